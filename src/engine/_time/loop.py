"""Event loops: uvloop where it is installed and usable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["cancel_and_wait", "new_event_loop", "run_sync"]

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep working without
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop, not set as the thread's current one: uvloop's (faster at the many
    small callbacks the engine makes) when it imports, else asyncio's."""
    return loop_factory()()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh uvloop event loop in this thread."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)


async def cancel_and_wait(fut: asyncio.Future[Any]) -> None:
    """Cancel ``fut`` (a task of ours) if it is still running, and wait until it ended.

    Awaiting a task we cancelled raises its ``CancelledError`` in us, and that one is
    expected. But the same exception also says that *we* are being cancelled (a kill, a
    timeout around us): then it must go on up, or whoever cancelled us waits for a task that
    carries on as if nothing happened. ``Task.cancelling()`` tells the two apart, which a
    bare ``contextlib.suppress(asyncio.CancelledError)`` cannot. An error the task raised
    instead of stopping goes on up too."""
    if fut.done():
        return
    fut.cancel()
    try:
        await fut
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
