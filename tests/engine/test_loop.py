"""``cancel_and_wait``: stopping a task of ours without swallowing our own cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from engine._time.loop import cancel_and_wait, run_sync


def slow_to_stop(release: asyncio.Event) -> Coroutine[Any, Any, None]:
    """A task that, once cancelled, still waits for ``release`` before it ends (a pump
    finishing its round, a sampler closing a file)."""

    async def body() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()

    return body()


async def cancelled_while_stopping(stop: Callable[[], Coroutine[Any, Any, Any]]) -> str:
    """Run ``stop()`` (which stops a slow task with ``cancel_and_wait``) in a task, cancel
    that task while it waits, and say how it ended."""
    stopping = asyncio.ensure_future(stop())
    for _ in range(5):
        await asyncio.sleep(0)  # it cancelled the slow task and waits for it to end
    assert not stopping.done()
    stopping.cancel()
    try:
        await stopping
    except asyncio.CancelledError:
        return "cancelled"
    return "went on"


def test_a_cancelled_task_is_waited_for_and_its_cancellation_kept() -> None:
    async def scenario() -> None:
        task = asyncio.ensure_future(asyncio.Event().wait())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        assert task.cancelled()
        await cancel_and_wait(task)  # done already: nothing to do

    run_sync(scenario())


def test_the_callers_own_cancellation_goes_on_up() -> None:
    async def scenario() -> str:
        release = asyncio.Event()
        task = asyncio.ensure_future(slow_to_stop(release))
        await asyncio.sleep(0)

        async def stop() -> None:
            await cancel_and_wait(task)

        return await cancelled_while_stopping(stop)

    assert run_sync(scenario()) == "cancelled"


def test_an_error_raised_instead_of_stopping_goes_on_up() -> None:
    async def scenario() -> None:
        async def refuses() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                raise RuntimeError("broken on the way out")

        task = asyncio.ensure_future(refuses())
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="broken on the way out"):
            await cancel_and_wait(task)

    run_sync(scenario())
