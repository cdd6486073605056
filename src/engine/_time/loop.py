"""Event loops: uvloop where it is installed and usable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["new_event_loop", "run_sync"]

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
