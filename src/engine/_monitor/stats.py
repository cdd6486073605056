"""Statistics snapshots: ``TopologyInfo`` and what it is made of.

The hot path only bumps plain int attributes (per batch where it can); these records are
built from them on demand. Latencies are counted in log-linear buckets (``LatencyRecorder``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ComponentStats",
    "ErrorGroup",
    "ErrorInfo",
    "LatencyRecorder",
    "LatencySummary",
    "TaskStats",
    "TopologyInfo",
]

#: Latencies are recorded in nanoseconds from 1 ns to one hour.
_HIGHEST_NS = 3_600 * 10**9
#: Log-linear buckets: values below ``_LINEAR`` each have their own, larger ones
#: ``2**_SUB_BITS`` per power of two, so a bucket spans under 1 % of its values.
_SUB_BITS = 7
_LINEAR = 1 << (_SUB_BITS + 1)
_N_BUCKETS = _LINEAR + (_HIGHEST_NS.bit_length() - _SUB_BITS - 1) * (1 << _SUB_BITS)
#: Latencies wait in their arrays until this many are there, then go into the buckets in
#: one pass: numpy's cost per call then is a few nanoseconds per latency.
_FOLD_AT = 4096


@dataclass(frozen=True)
class LatencySummary:
    """A latency distribution in milliseconds: how many samples, their exact mean and
    maximum, and the median and 99th percentile (each the top of its bucket, so at most
    1 % above the true value, never below it)."""

    count: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    @classmethod
    def empty(cls) -> LatencySummary:
        """No samples: every figure 0 (a component that executed nothing yet)."""
        return cls(0, 0.0, 0.0, 0.0, 0.0)


class LatencyRecorder:
    """A histogram of latencies, fed a numpy array (or a batch mean) at a time.

    Log-linear buckets (under 1 % wide) counted with ``np.bincount``; arrays are kept as
    they come and counted ``_FOLD_AT`` latencies at a time, so recording a batch costs an
    append. The mean and the maximum are exact.
    """

    def __init__(self) -> None:
        self._counts = np.zeros(_N_BUCKETS, np.int64)
        self._waiting: list[np.ndarray] = []
        self._n_waiting = 0
        #: ``add_mean`` / ``add_one`` samples waiting: value, count
        self._means: list[int] = []
        self._mean_counts: list[int] = []
        self._sum = 0
        self._max = 0

    def add(self, latencies_ns: np.ndarray) -> None:
        """Record every latency of ``latencies_ns`` (nanoseconds; the array is kept until
        it is counted, so it must not be changed afterwards)."""
        n = latencies_ns.shape[0]
        if n:
            self._waiting.append(latencies_ns)
            self._n_waiting += n
            if self._n_waiting >= _FOLD_AT:
                self._fold()

    def add_mean(self, mean_ns: float, count: int) -> None:
        """Record ``count`` samples of ``mean_ns`` (a batch timed as a whole)."""
        if count:
            value = min(max(int(mean_ns), 1), _HIGHEST_NS)
            self._means.append(value)
            self._mean_counts.append(count)
            self._sum += value * count
            if value > self._max:
                self._max = value
            if len(self._means) >= _FOLD_AT:
                self._fold_means()

    def add_one(self, latency_ns: int) -> None:
        """Record one latency (nanoseconds)."""
        self.add_mean(latency_ns, 1)

    def _fold(self) -> None:
        waiting = self._waiting
        v = np.concatenate(waiting) if len(waiting) > 1 else waiting[0]
        waiting.clear()
        self._n_waiting = 0
        v = v.astype(np.int64, copy=False)
        low, high = int(v.min()), int(v.max())
        if low < 1 or high > _HIGHEST_NS:  # rare: clip only then (a pass less otherwise)
            v = np.clip(v, 1, _HIGHEST_NS)
            low, high = int(v.min()), int(v.max())
        self._counts += np.bincount(_buckets(v, low), minlength=_N_BUCKETS)
        self._sum += int(v.sum())
        self._max = max(self._max, high)

    def _fold_means(self) -> None:
        values = np.array(self._means, np.int64)
        counts = np.array(self._mean_counts, np.int64)
        self._means.clear()
        self._mean_counts.clear()
        self._counts += np.bincount(_buckets(values), counts, _N_BUCKETS).astype(np.int64)

    @property
    def count(self) -> int:
        """The latencies recorded so far."""
        return int(self._counts.sum()) + self._n_waiting + sum(self._mean_counts)

    def summary(self) -> LatencySummary:
        """Everything recorded so far, summed up (recording goes on after it)."""
        if self._waiting:
            self._fold()
        if self._means:
            self._fold_means()
        cumulative = np.cumsum(self._counts)
        n = int(cumulative[-1])
        if n == 0:
            return LatencySummary.empty()

        def at(percent: float) -> int:
            # the highest value of the bucket holding the ceil(p % of n)-th latency
            rank = max(1, -(-n * percent // 100))
            return min(_bucket_top(int(np.searchsorted(cumulative, rank))), self._max)

        return LatencySummary(
            count=n,
            mean_ms=self._sum / n / 1e6,
            p50_ms=at(50) / 1e6,
            p99_ms=at(99) / 1e6,
            max_ms=self._max / 1e6,
        )


def _buckets(v: np.ndarray, low: int = 0) -> np.ndarray:
    """The bucket of each latency in ``v`` (int64, 1 .. ``_HIGHEST_NS``; ``low``, if given,
    no more than the smallest of them).

    A value's float64 bits hold its exponent and then its mantissa, so the top bits of a
    converted value are its power of two and the ``_SUB_BITS`` bits after its leading one:
    shifted down and offset, its log-linear bucket (HdrHistogram's trick; exact, since the
    values are below 2**53). A third of the numpy passes of computing it with ``frexp``
    (4096 latencies in 12 us against 36 us). Values below ``_LINEAR`` are their own bucket.
    """
    buckets = v.astype(np.float64).view(np.int64)
    buckets >>= 52 - _SUB_BITS
    buckets -= (1022 + _SUB_BITS) << _SUB_BITS  # 2**(_SUB_BITS + 1) lands on _LINEAR
    if low < _LINEAR:
        buckets = np.where(v < _LINEAR, v, buckets)
    return buckets


def _bucket_top(index: int) -> int:
    """The highest latency bucket ``index`` holds."""
    if index < _LINEAR:
        return index
    shift = ((index - _LINEAR) >> _SUB_BITS) + 1
    top = ((index - _LINEAR) & ((1 << _SUB_BITS) - 1)) + (1 << _SUB_BITS)
    return ((top + 1) << shift) - 1


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
    """One task's counters since the topology started (Storm UI's per-task row).

    ``emitted`` counts per stream what the task emitted; ``transferred`` the tuples that
    left it, one per receiving task (an emit to an all grouping over three tasks is one
    emitted, three transferred); ``executed`` the inputs a bolt ran. ``metrics`` holds the
    task's user metrics (``TopologyContext.register_metric``) as last read.
    """

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
    """One spout's or bolt's stats: its tasks' ``TaskStats``, with the counters summed over
    them as properties (what Storm UI's component page shows)."""

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
        """Tuples emitted, every task and every stream."""
        return sum(sum(t.emitted.values()) for t in self.tasks.values())

    @property
    def transferred(self) -> int:
        """Tuples sent to tasks, one per receiving task (see ``TaskStats``)."""
        return self._sum("transferred")

    @property
    def executed(self) -> int:
        """Inputs executed (bolts)."""
        return self._sum("executed")

    @property
    def acked(self) -> int:
        """A spout: its trees fully processed. A bolt: the inputs it acked."""
        return self._sum("acked")

    @property
    def failed(self) -> int:
        """A spout: its trees failed, timed-out ones included. A bolt: the inputs it
        failed (an exception in ``execute`` fails its input too)."""
        return self._sum("failed")

    @property
    def timed_out(self) -> int:
        """A spout's trees that timed out (also in ``failed``): many of them mean the
        message timeout is too short for the work, or a bolt does not ack."""
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
