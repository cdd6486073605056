"""Virtual time: an event loop whose clock jumps to the next timer when nothing is ready.

Under ``VirtualTimeLoop`` an hour of timeouts, tick tuples, backoffs and sleeps passes in
as long as the work itself takes: whenever every coroutine is waiting on a timer, the
loop's clock moves straight to the earliest one. Nothing else changes, so the engine's code
under simulation is the code that runs in production. Real file descriptors still work
(they are polled without waiting), and while a call handed to a thread
(``asyncio.to_thread``) is running the loop waits for it for real, with the clock stopped.
A loop with no timer, no thread at work and nothing ready is deadlocked, which under
simulation is an error rather than a hang.

Work takes no virtual time, which is what makes a simulation fast and exact; but a loop
that always has a callback ready would then never reach a timer: a transactional topology
starting transaction after transaction, tuples going round a cycle, a spout that always
has something to emit. Real time passes during such work, so a simulation must let some
pass too: after 1,000 turns in a row with callbacks ready, each further such turn advances
the clock by 1 ms, until the loop next waits. Bursts of work shorter than that still cost
nothing (an ordinary topology waits on a timer every few dozen turns at most).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import selectors
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

    from .clock import Clock

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

__all__ = [
    "SimulationDeadlock",
    "VirtualClock",
    "VirtualTimeLoop",
    "clock_for_running_loop",
    "submit_io",
]


#: How long the loop waits for real, per turn, while a thread works for it (seconds).
_THREAD_POLL_SECS = 0.05
#: Turns in a row with callbacks ready that cost no virtual time (see the module's doc).
_FREE_BUSY_TURNS = 1000
#: The virtual time each further turn in a row with callbacks ready costs (seconds).
_BUSY_TURN_SECS = 0.001


class SimulationDeadlock(RuntimeError):
    """Every coroutine waits for something that no timer and no I/O will ever bring."""


class _TimeTravelSelector(selectors.BaseSelector):
    # The loop's own selector does the I/O; only ``select`` changes: it never waits for a
    # timer, it moves the loop's clock to it.
    def __init__(self, real: selectors.BaseSelector, loop: VirtualTimeLoop) -> None:
        self._real = real
        self._loop = loop

    def register(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = self._real.select(0)
        loop = self._loop
        if timeout == 0:  # callbacks are ready: a busy turn
            loop._busy_turns += 1
            if loop._busy_turns > _FREE_BUSY_TURNS:
                loop._now += _BUSY_TURN_SECS
            return events
        loop._busy_turns = 0
        if events:
            return events
        if self._loop._in_threads or self._loop._threads_at_work():
            # Work handed to a thread (``asyncio.to_thread``: Spark calls, file I/O) takes
            # real time: wait for it for real, and let no virtual time pass meanwhile.
            return self._real.select(_THREAD_POLL_SECS)
        if timeout is None:
            if self._loop._allow_idle:
                return self._real.select(None)
            raise SimulationDeadlock(
                "simulation deadlock: no coroutine is ready and no timer is scheduled"
            )
        self._loop._now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time, starting at ``start`` seconds."""

    # Set by ``asyncio.SelectorEventLoop.__init__``; typeshed does not declare it.
    _selector: selectors.BaseSelector

    def __init__(self, start: float = 0.0, *, allow_idle: bool = False) -> None:
        super().__init__()
        self._now = float(start)
        self._allow_idle = allow_idle
        #: turns in a row with callbacks ready (see ``_FREE_BUSY_TURNS``)
        self._busy_turns = 0
        #: calls handed to an executor thread and not done yet
        self._in_threads = 0
        #: ``submit_io``'s futures, until seen done
        self._thread_futures: list[concurrent.futures.Future[Any]] = []
        self._selector = _TimeTravelSelector(self._selector, self)

    def time(self) -> float:
        return self._now

    def run_in_executor(
        self,
        executor: concurrent.futures.Executor | None,
        func: Callable[[*_Ts], _T],
        *args: *_Ts,
    ) -> asyncio.Future[_T]:
        """``func(*args)`` in a thread, as on any loop; while it runs, the loop waits for it
        for real with its clock stopped, instead of jumping to the next timer (the thread's
        work takes real time, which virtual time cannot skip)."""
        future = super().run_in_executor(executor, func, *args)
        self._in_threads += 1

        def done(_: asyncio.Future[_T]) -> None:
            self._in_threads -= 1

        future.add_done_callback(done)
        return future

    def wait_for_thread(self, future: concurrent.futures.Future[Any]) -> None:
        """Wait for ``future`` (work some thread does for the loop's code, which checks it
        with ``done()`` or blocks on it) as for a call handed to ``run_in_executor``: the
        clock stops until it is done. (A future awaited through ``asyncio.wrap_future``
        goes through ``run_in_executor`` instead: its result reaches the loop by a callback
        after the future is done, and the clock must not move in between.)"""
        self._thread_futures.append(future)

    def _threads_at_work(self) -> bool:
        futures = self._thread_futures
        if futures:
            futures[:] = [f for f in futures if not f.done()]
        return bool(futures)


def submit_io(
    executor: concurrent.futures.Executor, fn: Callable[[*_Ts], _T], *args: *_Ts
) -> concurrent.futures.Future[_T]:
    """``executor.submit(fn, *args)``, made known to the running event loop: under
    simulation (``engine.testing.simulate``) the virtual clock stops while the call runs,
    as it does for ``run_in_executor``, instead of running on while a busy machine has not
    run the thread yet. For I/O a component hands to a thread of its own and checks with
    ``done()`` between calls (a commit, a dead-letter write) or blocks on when it closes;
    to await a call, use ``loop.run_in_executor``. On any other loop, or with no loop
    running, it is ``executor.submit``."""
    future = executor.submit(fn, *args)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return future
    if isinstance(loop, VirtualTimeLoop):
        loop.wait_for_thread(future)
    return future


class VirtualClock:
    """The engine's ``Clock`` on a ``VirtualTimeLoop``: reads and sleeps in loop time."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop

    def now_ns(self) -> int:
        """The loop's virtual time, in nanoseconds."""
        return int(self._loop.time() * 1e9)

    async def sleep(self, seconds: float) -> None:
        """``asyncio.sleep`` on the virtual loop: it returns as soon as nothing else is
        ready, with the clock moved on by ``seconds``."""
        await asyncio.sleep(seconds)


def clock_for_running_loop() -> Clock:
    """``VirtualClock`` under a ``VirtualTimeLoop``, else the system clock."""
    from .clock import SystemClock

    loop = asyncio.get_running_loop()
    if isinstance(loop, VirtualTimeLoop):
        return VirtualClock(loop)
    return SystemClock()
