"""Statistics snapshots: ``TopologyInfo`` and what it is made of.

The hot path only bumps plain int attributes (per batch where it can); these records are
built from them on demand. Latencies are kept as numpy samples in a bounded ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ComponentStats",
    "ErrorInfo",
    "LatencyRecorder",
    "LatencySummary",
    "TaskStats",
    "TopologyInfo",
]

#: Latency samples kept per recorder (the most recent ones).
LATENCY_SAMPLES = 1 << 16


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
    """Counts every sample; keeps the last ``LATENCY_SAMPLES`` for percentiles."""

    def __init__(self, size: int = LATENCY_SAMPLES) -> None:
        self._ring = np.zeros(size, np.int64)
        self._n = 0  # samples ever added
        self._sum = 0

    def add(self, latencies_ns: np.ndarray) -> None:
        k = int(latencies_ns.shape[0])
        if k == 0:
            return
        self._sum += int(latencies_ns.sum())
        size = self._ring.shape[0]
        if k >= size:
            self._ring[:] = latencies_ns[-size:]
        else:
            start = self._n % size
            end = start + k
            if end <= size:
                self._ring[start:end] = latencies_ns
            else:
                cut = size - start
                self._ring[start:] = latencies_ns[:cut]
                self._ring[: end - size] = latencies_ns[cut:]
        self._n += k

    def add_one(self, latency_ns: int) -> None:
        self._ring[self._n % self._ring.shape[0]] = latency_ns
        self._n += 1
        self._sum += latency_ns

    @property
    def count(self) -> int:
        return self._n

    def summary(self) -> LatencySummary:
        if self._n == 0:
            return LatencySummary.empty()
        kept = self._ring[: min(self._n, self._ring.shape[0])] / 1e6
        p50, p99 = np.percentile(kept, [50, 99])
        return LatencySummary(
            count=self._n,
            mean_ms=self._sum / self._n / 1e6,
            p50_ms=float(p50),
            p99_ms=float(p99),
            max_ms=float(kept.max()),
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
class TaskStats:
    task: int
    emitted: dict[str, int]
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int  # spouts: trees that timed out (also counted in ``failed``)
    complete_latency: LatencySummary  # spouts
    execute_latency_ms: float  # bolts: mean over executed tuples
    capacity: float  # bolts: share of the uptime spent executing
    errors: tuple[ErrorInfo, ...]
    pending: int  # spouts: trees in flight
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ComponentStats:
    id: str
    kind: str  # "spout" or "bolt"
    tasks: dict[int, TaskStats]
    executors: int

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
        return sorted((e for t in self.tasks.values() for e in t.errors), key=lambda e: e.time_secs)


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
        return sorted(
            (e for c in self.components.values() for e in c.errors), key=lambda e: e.time_secs
        )
