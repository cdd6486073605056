"""The one clock every timer of a running topology reads.

Timeouts, tick tuples, spout wait strategies, flush intervals and latencies all go through
``Clock``: swap in another implementation (a virtual clock for simulation) and all of them
follow it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """What the engine asks of a clock: the time, and a sleep on that time.

    Any object with these two methods is a ``Clock`` (a ``Protocol``: no base class
    needed). ``SystemClock`` reads the machine's monotonic clock; ``engine.testing``'s
    ``VirtualClock`` reads a simulation's, where an hour of timeouts passes at once. A
    component times its own work on ``context.clock``, so that a simulation drives it too:

    >>> import asyncio
    >>> from engine.testing import VirtualClock, simulate
    >>> async def an_hour() -> float:
    ...     clock = VirtualClock(asyncio.get_running_loop())
    ...     start = clock.now_ns()
    ...     await clock.sleep(3600)
    ...     return (clock.now_ns() - start) / 1e9
    >>> simulate(an_hour())                      # returns at once, an hour later
    3600.0
    """

    def now_ns(self) -> int:
        """Monotonic time in nanoseconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling coroutine for ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """Wall-clock time: ``time.monotonic_ns`` and the running loop's timers."""

    def now_ns(self) -> int:
        """``time.monotonic_ns()``: never jumps back when the wall clock is set."""
        return time.monotonic_ns()

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep``, on the running loop's timers."""
        await asyncio.sleep(seconds)
