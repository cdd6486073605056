"""Statistics snapshots: ``TopologyInfo`` and what it is made of.

The hot path only bumps plain int attributes (per batch where it can); these records are
built from them on demand. Latencies are kept as numpy samples in a bounded ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

__all__ = [
    "ComponentStats",
    "ErrorGroup",
    "ErrorInfo",
    "LatencyRecorder",
    "LatencySummary",
    "TaskStats",
    "TopologyInfo",
]

#: Latencies are recorded in nanoseconds from 1 ns to one hour, to 2 significant digits
#: (1 % resolution): a small histogram keeps ``info()`` fast (the library's quantile and
#: mean queries walk every bucket in Python).
_HIGHEST_NS = 3_600 * 10**9
_DIGITS = 2


@dataclass(frozen=True)
class LatencySummary:
    count: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def empty(cls) -> LatencySummary:
        return cls(0, 0.0, 0.0, 0.0, 0.0)


class LatencyRecorder:
    """An HdrHistogram of latencies, fed a numpy array (or a batch mean) at a time.

    Values are rounded to 3 significant digits first (the histogram's own precision), so a
    batch of thousands of latencies costs a few hundred histogram updates, not thousands.
    """

    def __init__(self) -> None:
        self._hist = HdrHistogram(1, _HIGHEST_NS, _DIGITS)
        self._sum = 0

    def add(self, latencies_ns: np.ndarray) -> None:
        n = latencies_ns.shape[0]
        if n == 0:
            return
        if n <= 32:  # numpy's per-call overhead would dominate
            record = self._hist.record_value
            for value in latencies_ns.tolist():
                value = min(max(value, 1), _HIGHEST_NS)
                record(value)
                self._sum += value
            return
        v = np.clip(latencies_ns.astype(np.int64), 1, _HIGHEST_NS)
        # Round to the histogram's precision so one update covers many equal values.
        step = 10 ** np.maximum(np.floor(np.log10(v)).astype(np.int64) - (_DIGITS - 1), 0)
        values, counts = np.unique(v // step * step, return_counts=True)
        record = self._hist.record_value
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            record(value, count)
        self._sum += int(v.sum())

    def add_mean(self, mean_ns: float, count: int) -> None:
        """Record ``count`` samples of ``mean_ns`` (a batch timed as a whole)."""
        if count:
            value = min(max(int(mean_ns), 1), _HIGHEST_NS)
            self._hist.record_value(value, count)
            self._sum += value * count

    def add_one(self, latency_ns: int) -> None:
        value = min(max(int(latency_ns), 1), _HIGHEST_NS)
        self._hist.record_value(value)
        self._sum += value

    @property
    def count(self) -> int:
        return int(self._hist.get_total_count())

    def summary(self) -> LatencySummary:
        h = self._hist
        if h.get_total_count() == 0:
            return LatencySummary.empty()
        n = int(h.get_total_count())
        quantiles = h.get_percentile_to_value_dict([50, 99])  # one walk over the buckets
        return LatencySummary(
            count=n,
            mean_ms=self._sum / n / 1e6,
            p50_ms=quantiles[50] / 1e6,
            p99_ms=quantiles[99] / 1e6,
            max_ms=h.get_max_value() / 1e6,
        )


@dataclass(frozen=True)
class ErrorInfo:
    """An error reported by a task (``report_error`` or an exception in user code)."""

    component: str
    task: int
    time_secs: float  # on the topology's clock, since it started
    error: str
    traceback: str


@dataclass(frozen=True)
class ErrorGroup:
    """Identical errors of one component (same exception type and message, or the same
    reported text): how many, when first and last seen, and the last one's task and
    traceback."""

    component: str
    error: str
    count: int
    first_secs: float  # on the topology's clock, since it started
    last_secs: float
    last_task: int
    traceback: str


@dataclass(frozen=True)
class TaskStats:
    task: int
    emitted: dict[str, int]
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int  # spouts: trees that timed out (also counted in ``failed``)
    complete_latency: LatencySummary  # spouts: spout emit -> tree fully acked
    execute_latency_ms: float  # bolts: mean over executed tuples
    capacity: float  # bolts: share of the uptime spent executing
    errors: tuple[ErrorInfo, ...]  # the last ``topology.error.history.size``, tracebacks kept
    pending: int  # spouts: trees in flight
    metrics: dict[str, Any] = field(default_factory=dict)
    execute_latency: LatencySummary = field(default_factory=LatencySummary.empty)  # bolts
    process_latency: LatencySummary = field(default_factory=LatencySummary.empty)  # bolts
    error_count: int = 0  # every error since the start (``errors`` keeps the last few)


@dataclass(frozen=True)
class ComponentStats:
    id: str
    kind: str  # "spout" or "bolt"
    tasks: dict[int, TaskStats]
    executors: int
    #: identical errors grouped, the most recently seen last
    error_groups: tuple[ErrorGroup, ...] = ()

    def _sum(self, name: str) -> int:
        return sum(getattr(t, name) for t in self.tasks.values())

    @property
    def emitted(self) -> int:
        return sum(sum(t.emitted.values()) for t in self.tasks.values())

    @property
    def transferred(self) -> int:
        return self._sum("transferred")

    @property
    def executed(self) -> int:
        return self._sum("executed")

    @property
    def acked(self) -> int:
        return self._sum("acked")

    @property
    def failed(self) -> int:
        return self._sum("failed")

    @property
    def timed_out(self) -> int:
        return self._sum("timed_out")

    @property
    def errors(self) -> list[ErrorInfo]:
        """The last few errors of each task, with tracebacks, oldest first."""
        return sorted((e for t in self.tasks.values() for e in t.errors), key=lambda e: e.time_secs)

    @property
    def error_count(self) -> int:
        """Every error its tasks reported since the start."""
        return self._sum("error_count")


@dataclass(frozen=True)
class TopologyInfo:
    """``LocalCluster.get_topology_info`` / ``RunningTopology.info()``."""

    name: str
    status: str  # ACTIVE, INACTIVE, KILLED, COMPLETED
    uptime_secs: float
    seed: int
    components: dict[str, ComponentStats]
    pending_trees: int
    acker: dict[str, int]
    queues: dict[str, dict[str, int]]

    @property
    def errors(self) -> list[ErrorInfo]:
        """The last few errors of each task, with tracebacks, oldest first (``error_count``
        counts them all)."""
        return sorted(
            (e for c in self.components.values() for e in c.errors), key=lambda e: e.time_secs
        )

    @property
    def error_count(self) -> int:
        """Every error reported since the start."""
        return sum(c.error_count for c in self.components.values())

    @property
    def error_groups(self) -> list[ErrorGroup]:
        """Identical errors grouped, every component's, the most recently seen last."""
        return sorted(
            (g for c in self.components.values() for g in c.error_groups),
            key=lambda g: g.last_secs,
        )
