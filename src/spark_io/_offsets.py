"""Offset bookkeeping for the offset-tracking spout (KafkaSpout's model); the strategies,
guarantees and retries are engine's (``engine.offsets``), shared with ``KafkaSpout``.

Pure Python, no Spark and no clock of its own: every time is passed in as ``now_ns``, so a
test drives it with a fake clock.

One spout task owns one *partition* of the source's offset space (chunks of offsets dealt
round-robin over the tasks). It reads the partition in *passes* (every row it owns from an
offset on, streamed in Arrow batches in the order Spark serves them), numbers the rows in the
order read (their *positions*, the message ids), and commits ``commit_point()``: every offset
of the partition below it was processed (acked, or dropped after ``max_retries``). A pass's
rows come in no particular offset order, so its end is committed once all of it is done.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.offsets import (
    FirstPollOffsetStrategy,
    ProcessingGuarantee,
    RetrySchedule,
    column_slice,
    first_position,
    needs_latest,
    value_at,
)
from engine.offsets import RetryPolicy as EngineRetryPolicy

from ._errors import SparkConfigError

__all__ = [
    "Batch",
    "FirstPollStrategy",
    "Pass",
    "PositionTracker",
    "ProcessingGuarantee",
    "RetryPolicy",
    "RetrySchedule",
    "chunk_owner",
    "first_position",
    "needs_latest",
    "next_owned_chunk_start",
]


#: Where a task starts reading its partition: engine's ``FirstPollOffsetStrategy`` (a commit
#: made by this run of the topology always wins; otherwise ``EARLIEST``/``LATEST`` ignore
#: the commit and the ``UNCOMMITTED_*`` strategies resume from it when there is one).
FirstPollStrategy = FirstPollOffsetStrategy


@dataclass(frozen=True)
class RetryPolicy(EngineRetryPolicy):
    """Exponential backoff, storm-kafka-client's ``KafkaSpoutRetryExponentialBackoff``
    (engine's ``RetryPolicy`` with spark_io's defaults and errors).

    The first retry is due ``initial_delay_secs`` after the failure, the n-th
    ``delay_period_secs * 2**(n-1)`` after it, never more than ``max_delay_secs``. After
    ``max_retries`` retries (None: forever) the next failure drops the record.

    The defaults back off for real: retries 0.5, 1, 2, 4 and 8 s after the failures, then
    every 10 s. (storm-kafka-client's own defaults, no initial delay and a 2 ms period,
    retry a row a dozen times in its first 16 s: when a sink cannot write, every row in
    flight fails again and again, some 9,000 failures a second. Pass
    ``RetryPolicy(initial_delay_secs=0, delay_period_secs=0.002)`` to have them.)

    >>> policy = RetryPolicy(initial_delay_secs=0.5, delay_period_secs=1.0, max_delay_secs=3.0)
    >>> [policy.delay_secs(fails) for fails in (1, 2, 3, 4)]
    [0.5, 2.0, 3.0, 3.0]
    """

    config_error: ClassVar[type[Exception]] = SparkConfigError

    initial_delay_secs: float = 0.5
    delay_period_secs: float = 0.5


def chunk_owner(offset: int, chunk_rows: int, partitions: int) -> int:
    """The partition (task index) that owns ``offset``: chunks of ``chunk_rows`` offsets are
    dealt round-robin, chunk ``k = offset // chunk_rows`` to partition ``k % partitions``."""
    return (offset // chunk_rows) % partitions


def next_owned_chunk_start(offset: int, chunk_rows: int, partitions: int, partition: int) -> int:
    """The lowest offset >= ``offset`` that ``partition`` owns."""
    k = offset // chunk_rows
    owner = k % partitions
    if owner == partition:
        return offset
    k += (partition - owner) % partitions
    return k * chunk_rows


class Batch:
    """The rows of one Arrow record batch as read: positions ``lo .. lo + size - 1``.

    ``offsets`` (a numpy int64 array) are the rows' offsets, ``columns`` one Arrow array per
    emitted field. The spout emits from ``emitted`` on; ``left`` rows are not done yet (not
    emitted, or emitted and neither acked nor dropped).
    """

    __slots__ = ("columns", "emitted", "left", "lo", "offsets", "pass_", "size")

    def __init__(self, lo: int, offsets: Any, columns: Sequence[Any]) -> None:
        self.lo = lo
        self.offsets = offsets
        self.columns = list(columns)
        self.size = len(offsets)
        self.emitted = 0
        self.left = self.size
        self.pass_: Pass | None = None

    def row(self, position: int) -> list[Any]:
        """The values of the row at ``position``."""
        i = position - self.lo
        return [value_at(col, i) for col in self.columns]

    def offset(self, position: int) -> int:
        return int(self.offsets[position - self.lo])

    def column_slice(self, start: int, stop: int) -> list[Any]:
        """Rows ``start:stop`` (indexes into the batch) as columns (Arrow slices are
        zero-copy views)."""
        return column_slice(self.columns, start, stop, self.size)

    def __repr__(self) -> str:
        return f"Batch(positions {self.lo}..{self.lo + self.size - 1}, emitted {self.emitted})"


class Pass:
    """One read of the source: the rows a task owns with offsets from ``lo`` on. ``hi``
    (known when the read ended) is above every offset it held."""

    __slots__ = ("ended", "hi", "left", "lo", "max_offset")

    def __init__(self, lo: int) -> None:
        self.lo = lo
        self.hi = lo
        self.left = 0  # rows read and not done
        self.ended = False
        self.max_offset = -1


class PositionTracker:
    """One task's rows by position, and what it may commit.

    Rows are numbered in the order they are read (their *positions*, the spout's message
    ids): acking a position is a count, whatever order Spark served the rows in. The
    source's offsets only say where a read starts. A read (a ``Pass``) holds every row the
    task owns from its start on, in no particular order, so its end ``hi`` may be committed
    once every row of it is done (acked, or dropped past ``max_retries``), never before:
    ``commit_point`` is the ``hi`` of the last pass done, in order.

    >>> import numpy as np
    >>> tracker = PositionTracker(start=0)
    >>> batch = tracker.add(Batch(0, np.array([7, 3, 5]), [["h", "d", "f"]]))
    >>> tracker.end_pass(8)
    >>> batch.emitted = 3; tracker.emitted(3)   # the spout emitted positions 0, 1, 2
    >>> tracker.done_all([0, 2]); tracker.commit_point()  # position 1 (offset 3) in flight
    0
    >>> tracker.done(1); tracker.commit_point()          # the pass is done: commit its end
    8
    """

    def __init__(self, start: int | None = None) -> None:
        #: None until the task knows where it starts (``rebase``)
        self._committed = start
        #: batches with rows not done, by position
        self.batches: list[Batch] = []
        self._los: list[int] = []
        self.passes: deque[Pass] = deque()
        #: rows emitted and not done
        self.inflight = 0

    # --- reading --------------------------------------------------------------------------
    def rebase(self, start: int) -> None:
        """The task starts reading at ``start`` (before anything was read)."""
        assert not self.passes, "rebase after reading"
        self._committed = start

    def _open_pass(self) -> Pass:
        if not self.passes or self.passes[-1].ended:
            lo = self.passes[-1].hi if self.passes else self._committed or 0
            self.passes.append(Pass(lo))
        return self.passes[-1]

    def add(self, batch: Batch) -> Batch:
        """A batch read (positions follow the last batch's)."""
        p = self._open_pass()
        batch.pass_ = p
        p.left += batch.size
        if batch.size:
            p.max_offset = max(p.max_offset, int(batch.offsets.max()))
            self.batches.append(batch)
            self._los.append(batch.lo)
        return batch

    def end_pass(self, hi: int) -> None:
        """The current read ended; every offset it held is below ``hi``."""
        p = self._open_pass()
        p.hi = max(hi, p.lo)
        p.ended = True

    def emitted(self, n: int) -> None:
        self.inflight += n

    def read_max(self) -> int:
        """Above every offset read (what at-most-once commits before emitting)."""
        p = self.passes[-1] if self.passes else None
        if p is None:
            return self._committed or 0
        return max(p.lo, p.max_offset + 1)

    # --- acking ---------------------------------------------------------------------------
    def batch_of(self, position: int) -> Batch:
        i = bisect_right(self._los, position) - 1
        batch = self.batches[i] if i >= 0 else None
        if batch is None or position >= batch.lo + batch.size:
            raise KeyError(position)
        return batch

    def done(self, position: int) -> None:
        self.done_all((position,))

    def done_all(self, positions: Sequence[int]) -> None:
        """Rows found done: their counts go down; a batch with none left is forgotten."""
        n = len(positions)
        if not n:
            return
        los = self._los
        lo, hi = min(positions), max(positions)
        i = bisect_right(los, lo) - 1
        if i >= 0 and hi < los[i] + self.batches[i].size:  # one batch: the common case
            self._count(i, n)
            return
        import numpy as np

        starts = np.asarray(los, np.int64)
        ends = starts + np.fromiter((b.size for b in self.batches), np.int64, len(los))
        at = np.asarray(positions, np.int64)
        index = np.searchsorted(starts, at, side="right") - 1
        if bool((index < 0).any()) or bool((at >= ends[np.maximum(index, 0)]).any()):
            raise KeyError(f"some of positions {lo}..{hi} are not held")
        found, counts = np.unique(index, return_counts=True)
        # From the last batch down, so that forgetting one leaves the others' indexes.
        for j, c in zip(found.tolist()[::-1], counts.tolist()[::-1], strict=True):
            self._count(j, c)

    def _count(self, i: int, n: int) -> None:
        batch = self.batches[i]
        batch.left -= n
        self.inflight -= n
        p = batch.pass_
        assert p is not None
        p.left -= n
        if batch.left <= 0:
            del self.batches[i]
            del self._los[i]

    def commit_point(self) -> int | None:
        """Every offset the task owns below the result is done (None: the task does not
        know where it starts yet)."""
        passes = self.passes
        while passes and passes[0].ended and passes[0].left == 0:
            self._committed = passes.popleft().hi
        return self._committed

    def is_empty(self) -> bool:
        return not self.batches and not self.passes
