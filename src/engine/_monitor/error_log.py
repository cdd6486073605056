"""``ErrorLog``: every error a topology's tasks report, counted, grouped, and logged under a
throttle.

A bolt that fails on every tuple reports thousands of errors a second. Each one is counted
(per task; a component's total is its tasks' sum), the last few of each task are kept with
their tracebacks, and identical ones (same component, same exception type and message) are
grouped with a count and when they were first and last seen. What reaches the log is
throttled as Storm throttles error reports: per task at most
``topology.max.error.report.per.interval`` errors (5) per
``topology.error.throttle.interval.secs`` (10 s), each with its traceback; when an
interval in which errors were held back ends, one line says how many ("suppressed N").

The log lives as long as the topology (not its executors), so counts survive rebalances and
restarted tasks. Intervals run on the topology's clock: virtual time under ``simulate``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._time.clock import Clock
from .stats import ErrorGroup, ErrorInfo

__all__ = ["ErrorLog"]

#: Kinds of error (component, error text) kept at most; the least recently seen go first.
MAX_GROUPS = 1000


@dataclass
class _TaskErrors:
    component: str
    recent: deque[ErrorInfo]
    count: int = 0
    #: the throttle's interval: when it ends (clock ns), errors logged in it, held back
    window_end_ns: int = -1
    logged: int = 0
    suppressed: int = 0
    last_suppressed: str = ""
    summary: asyncio.TimerHandle | None = field(default=None, repr=False)


@dataclass
class _Group:
    count: int
    first_secs: float
    last_secs: float
    last_task: int
    traceback: str


class ErrorLog:
    """The errors of one running topology (see the module's docstring)."""

    def __init__(self, conf: Mapping[str, Any], clock: Clock) -> None:
        self._history = int(conf["topology.error.history.size"])
        self._max_per_interval = int(conf["topology.max.error.report.per.interval"])
        self._interval_secs = float(conf["topology.error.throttle.interval.secs"])
        self._interval_ns = int(self._interval_secs * 1e9)
        self._clock = clock
        self._tasks: dict[int, _TaskErrors] = {}
        self._groups: OrderedDict[tuple[str, str], _Group] = OrderedDict()

    def record(self, info: ErrorInfo) -> None:
        """Count, keep and group ``info``; log it unless its task's interval is full."""
        state = self._tasks.get(info.task)
        if state is None:
            state = self._tasks[info.task] = _TaskErrors(
                info.component, deque(maxlen=self._history)
            )
        state.count += 1
        state.recent.append(info)
        self._group(info)
        now = self._clock.now_ns()
        if now >= state.window_end_ns:
            self._summarize(info.task)  # a summary no timer could log (no running loop)
            state.window_end_ns = now + self._interval_ns
            state.logged = 0
        log = logging.getLogger(f"engine.component.{info.component}")
        if state.logged < self._max_per_interval:
            state.logged += 1
            tb = info.traceback
            log.error("task %d: %s%s", info.task, info.error, f"\n{tb.rstrip()}" if tb else "")
            return
        state.suppressed += 1
        state.last_suppressed = info.error
        if state.summary is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # logged by the next error after the interval, or by ``close``
            delay = (state.window_end_ns - now) / 1e9
            state.summary = loop.call_later(delay, self._summarize, info.task)

    def _group(self, info: ErrorInfo) -> None:
        key = (info.component, info.error)
        group = self._groups.get(key)
        if group is None:
            self._groups[key] = _Group(1, info.time_secs, info.time_secs, info.task, info.traceback)
            if len(self._groups) > MAX_GROUPS:
                self._groups.popitem(last=False)
            return
        group.count += 1
        group.last_secs = info.time_secs
        group.last_task = info.task
        group.traceback = info.traceback
        self._groups.move_to_end(key)

    def _summarize(self, task: int) -> None:
        """The interval of ``task`` ended: say how many errors were not logged in it."""
        state = self._tasks[task]
        if state.summary is not None:
            state.summary.cancel()
            state.summary = None
        if not state.suppressed:
            return
        logging.getLogger(f"engine.component.{state.component}").error(
            "task %d: suppressed %s more error(s) in %g s, the last: %s (at most %d are "
            "logged per %g s: topology.max.error.report.per.interval, "
            "topology.error.throttle.interval.secs); every error is counted in the stats",
            task,
            f"{state.suppressed:,}",
            self._interval_secs,
            state.last_suppressed,
            self._max_per_interval,
            self._interval_secs,
        )
        state.suppressed = 0

    def close(self) -> None:
        """The topology stopped: log the summaries of intervals still open."""
        for task in self._tasks:
            self._summarize(task)

    # --- reading -------------------------------------------------------------------------
    def count(self, task: int) -> int:
        """Errors ``task`` reported since the topology started."""
        state = self._tasks.get(task)
        return 0 if state is None else state.count

    def recent(self, task: int) -> tuple[ErrorInfo, ...]:
        """The last ``topology.error.history.size`` errors of ``task``, oldest first."""
        state = self._tasks.get(task)
        return () if state is None else tuple(state.recent)

    def groups(self, component: str) -> tuple[ErrorGroup, ...]:
        """``component``'s kinds of error, the most recently seen last."""
        return tuple(
            ErrorGroup(cid, error, g.count, g.first_secs, g.last_secs, g.last_task, g.traceback)
            for (cid, error), g in self._groups.items()
            if cid == component
        )
