"""Recent-window statistics: a ring of counter snapshots, diffed on demand.

``RunningTopology.info()`` counts over the whole run. Storm UI also shows recent windows
(10 min, 3 h, 1 day); in one process the useful ones are shorter, so the UI keeps the last
``horizon_secs`` (10 min) of snapshots, one per ``interval`` (1 s), taken by the server's
sampler task — off the topology's hot path, on the topology's own clock
(``TopologyInfo.uptime_secs``), so a simulated run windows in virtual time.

A window's counts are ``now - snapshot at (now - window)``; latencies over a window are
means (sum of latencies over count, both diffed), capacity is busy time over the window.
A task whose counters went backwards (it crashed and restarted) counts from zero.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, fields
from typing import NamedTuple

from .._monitor.stats import TaskStats, TopologyInfo

__all__ = ["WINDOWS", "Counts", "Sample", "StatsSampler", "WindowCounts", "snapshot", "task_counts"]

#: Windows offered by the UI and the REST API, in seconds (``None``: the whole run).
WINDOWS: tuple[int, ...] = (60, 600)


@dataclass(frozen=True)
class Counts:
    """One task's cumulative counters, as needed to diff two snapshots."""

    emitted: int = 0
    transferred: int = 0
    executed: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0
    complete_count: int = 0
    complete_sum_ms: float = 0.0
    execute_count: int = 0
    execute_sum_ms: float = 0.0
    process_count: int = 0
    process_sum_ms: float = 0.0
    busy_secs: float = 0.0

    def minus(self, base: Counts) -> Counts:
        """What was counted since ``base``; from zero if the task restarted since (its
        counters are below the base's), never negative."""
        if self.emitted < base.emitted or self.executed < base.executed or self.acked < base.acked:
            base = Counts()  # restarted task: its counters began again at zero
        return Counts(
            **{f.name: max(getattr(self, f.name) - getattr(base, f.name), 0) for f in fields(self)}
        )

    def plus(self, other: Counts) -> Counts:
        """Both counted together: tasks summed into their component."""
        return Counts(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    @property
    def complete_latency_ms(self) -> float | None:
        """The mean complete latency of what was counted, None with nothing to average:
        a mean is kept as a sum and a count precisely so that windows can diff it."""
        return self.complete_sum_ms / self.complete_count if self.complete_count else None

    @property
    def execute_latency_ms(self) -> float | None:
        """The mean execute latency (see ``complete_latency_ms``)."""
        return self.execute_sum_ms / self.execute_count if self.execute_count else None

    @property
    def process_latency_ms(self) -> float | None:
        """The mean process latency (see ``complete_latency_ms``)."""
        return self.process_sum_ms / self.process_count if self.process_count else None


def task_counts(stats: TaskStats, uptime_secs: float) -> Counts:
    """``stats`` as cumulative counts: latencies as sums, capacity as busy seconds."""
    c, e, p = stats.complete_latency, stats.execute_latency, stats.process_latency
    return Counts(
        emitted=sum(stats.emitted.values()),
        transferred=stats.transferred,
        executed=stats.executed,
        acked=stats.acked,
        failed=stats.failed,
        timed_out=stats.timed_out,
        complete_count=c.count,
        complete_sum_ms=c.mean_ms * c.count,
        execute_count=e.count,
        execute_sum_ms=e.mean_ms * e.count,
        process_count=p.count,
        process_sum_ms=p.mean_ms * p.count,
        busy_secs=stats.capacity * uptime_secs,
    )


class Sample(NamedTuple):
    """Every task's counts at one moment of the topology's uptime."""

    time_secs: float  # the topology's uptime when taken
    tasks: dict[tuple[str, int], Counts]


def snapshot(info: TopologyInfo) -> Sample:
    """The ``Sample`` of ``info``."""
    return Sample(
        info.uptime_secs,
        {
            (cid, task): task_counts(stats, info.uptime_secs)
            for cid, comp in info.components.items()
            for task, stats in comp.tasks.items()
        },
    )


@dataclass(frozen=True)
class WindowCounts:
    """Counts over ``span_secs`` (shorter than asked while the run is younger)."""

    window_secs: float | None  # None: the whole run
    span_secs: float
    tasks: dict[tuple[str, int], Counts]

    def component(self, component_id: str) -> Counts:
        """The window's counts summed over ``component_id``'s tasks."""
        total = Counts()
        for (cid, _), counts in self.tasks.items():
            if cid == component_id:
                total = total.plus(counts)
        return total


class StatsSampler:
    """Keeps ``horizon_secs`` of snapshots; ``window(info, secs)`` diffs against them."""

    def __init__(self, horizon_secs: float = 600.0) -> None:
        if horizon_secs <= 0:
            raise ValueError(f"horizon_secs must be > 0, got {horizon_secs!r}")
        self.horizon_secs = horizon_secs
        self._samples: collections.deque[Sample] = collections.deque()

    @property
    def samples(self) -> list[Sample]:
        """The snapshots kept, oldest first (a copy)."""
        return list(self._samples)

    def record(self, info: TopologyInfo) -> Sample:
        """Take a snapshot of ``info`` and keep it; snapshots older than the horizon are
        dropped, except the one a full window needs as its baseline."""
        sample = snapshot(info)
        if self._samples and sample.time_secs <= self._samples[-1].time_secs:
            self._samples[-1] = sample  # same instant (or a clock that did not move)
        else:
            self._samples.append(sample)
        # Keep one sample at or beyond the horizon, so a full window has a baseline.
        horizon = sample.time_secs - self.horizon_secs
        while len(self._samples) > 2 and self._samples[1].time_secs <= horizon:
            self._samples.popleft()
        return sample

    def _baseline(self, now: float, window: float) -> Sample | None:
        start = now - window
        best = None
        for s in self._samples:
            if s.time_secs <= start:
                best = s
            else:
                break
        return best

    def window(self, info: TopologyInfo, window_secs: float | None) -> WindowCounts:
        """Counts over the last ``window_secs`` of ``info``'s run (``None``: all of it)."""
        now = snapshot(info)
        if window_secs is None:
            return WindowCounts(None, now.time_secs, now.tasks)
        if window_secs <= 0:
            raise ValueError(f"window_secs must be > 0, got {window_secs!r}")
        base = self._baseline(now.time_secs, window_secs)
        if base is None:  # the run is younger than the window: everything so far
            return WindowCounts(window_secs, now.time_secs, now.tasks)
        zero = Counts()
        return WindowCounts(
            window_secs,
            now.time_secs - base.time_secs,
            {key: c.minus(base.tasks.get(key, zero)) for key, c in now.tasks.items()},
        )

    def series(self, spouts: set[str], max_points: int = 300) -> list[dict[str, float | None]]:
        """Per interval between consecutive samples: spout emits, acks and fails per
        second and the mean complete latency (ms), oldest first, at most ``max_points``."""
        samples = list(self._samples)[-(max_points + 1) :]
        points: list[dict[str, float | None]] = []
        zero = Counts()
        for a, b in itertools.pairwise(samples):
            dt = b.time_secs - a.time_secs
            if dt <= 0:
                continue
            total = Counts()
            for key, c in b.tasks.items():
                if key[0] in spouts:
                    total = total.plus(c.minus(a.tasks.get(key, zero)))
            points.append(
                {
                    "time": round(b.time_secs, 3),
                    "emitted": total.emitted / dt,
                    "acked": total.acked / dt,
                    "failed": total.failed / dt,
                    "completeLatency": total.complete_latency_ms,
                }
            )
        return points
