"""Offset bookkeeping and retries of the offset-tracking spouts (Storm's KafkaSpout model).

One home for what ``engine.kafka.KafkaSpout`` and spark_io's ``SparkOffsetSpout`` share:
where a task starts reading (``FirstPollOffsetStrategy``), what it promises
(``ProcessingGuarantee``), when a failed record is retried (``RetryPolicy``,
``RetrySchedule``) and which offset it may commit (``OffsetTracker`` over ``Chunk`` objects).
Pure Python, no I/O and no clock of its own: every time is passed in as ``now_ns``, so a
test drives it with a fake clock.

A spout task reads a *partition* (a Kafka partition, a slice of a table's offset column) in
*chunks* (sorted offsets and their rows), emits each row with its offset as message id, and
commits ``commit_point()``: every offset of the partition below it was processed (acked, or
given up after ``max_retries``). Walking up from the last commit, an emitted offset that is
not done stops the walk; offsets that were never read (gaps: compacted records, transaction
markers) do not.
"""

from __future__ import annotations

import enum
import heapq
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from .errors import InvalidConfigError

__all__ = [
    "Chunk",
    "FirstPollOffsetStrategy",
    "OffsetTracker",
    "ProcessingGuarantee",
    "RetryPolicy",
    "RetrySchedule",
    "column_slice",
    "first_position",
    "needs_latest",
    "value_at",
]


class FirstPollOffsetStrategy(enum.Enum):
    """Where a spout task starts reading its partition (Storm's ``FirstPollOffsetStrategy``).

    A commit made by this run of the topology (the task re-opens after a crash restart or a
    rebalance) always wins: every strategy resumes from it. Otherwise ``EARLIEST``/``LATEST``
    ignore the commit (an earlier run's), and the ``UNCOMMITTED_*`` strategies resume from it
    when there is one and fall back to the earliest/latest offset when there is none.
    """

    EARLIEST = "EARLIEST"
    LATEST = "LATEST"
    UNCOMMITTED_EARLIEST = "UNCOMMITTED_EARLIEST"
    UNCOMMITTED_LATEST = "UNCOMMITTED_LATEST"


class ProcessingGuarantee(enum.Enum):
    """KafkaSpout's processing guarantees.

    ``AT_LEAST_ONCE``: rows are emitted with their offset as message id, failures are retried,
    only the acked prefix is committed. ``AT_MOST_ONCE``: a chunk's end is committed when it is
    read, before its rows are emitted, untracked and never retried. ``NO_GUARANTEE``: rows are
    emitted untracked and what was emitted is committed periodically.
    """

    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    AT_MOST_ONCE = "AT_MOST_ONCE"
    NO_GUARANTEE = "NO_GUARANTEE"


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff (``KafkaSpoutRetryExponentialBackoff``), Storm's defaults.

    The first retry is due ``initial_delay_secs`` after the failure, the n-th
    ``delay_period_secs * 2**(n-1)`` after it, never more than ``max_delay_secs``. After
    ``max_retries`` retries (None: forever) the next failure drops the record.

    >>> policy = RetryPolicy(initial_delay_secs=0.5, delay_period_secs=1.0, max_delay_secs=3.0)
    >>> [policy.delay_secs(fails) for fails in (1, 2, 3, 4)]
    [0.5, 2.0, 3.0, 3.0]

    A source package subclasses it under its own name (``KafkaSpoutRetryExponentialBackoff``)
    and sets ``config_error`` to its own configuration error, so a bad value is reported in
    the words of the package the user called.
    """

    config_error: ClassVar[type[Exception]] = InvalidConfigError

    initial_delay_secs: float = 0.0
    delay_period_secs: float = 0.002
    max_retries: int | None = None
    max_delay_secs: float = 10.0

    def __post_init__(self) -> None:
        for name in ("initial_delay_secs", "delay_period_secs", "max_delay_secs"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (value >= 0 and math.isfinite(value))
            ):
                raise self.config_error(
                    f"{type(self).__name__}.{name} must be a number >= 0, got {value!r}"
                )
        if self.max_retries is not None and (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise self.config_error(
                f"{type(self).__name__}.max_retries must be an int >= 0 or None (retry "
                f"forever), got "
                f"{self.max_retries!r}"
            )

    def delay_secs(self, fails: int) -> float:
        """Seconds from the ``fails``-th failure to the retry (``fails`` >= 1)."""
        if fails < 1:
            raise ValueError(f"fails must be >= 1, got {fails}")
        if fails == 1:
            delay = self.initial_delay_secs
        else:
            # 2**(fails-1) overflows a float long after max_delay caps it.
            delay = self.delay_period_secs * 2.0 ** min(fails - 1, 1023)
        return min(delay, self.max_delay_secs)

    def retries_exhausted(self, fails: int) -> bool:
        """True when a record that failed ``fails`` times must be dropped, not retried."""
        return self.max_retries is not None and fails > self.max_retries


class RetrySchedule:
    """Failed records waiting for their retry, earliest due first.

    >>> schedule = RetrySchedule(RetryPolicy(initial_delay_secs=1.0, max_retries=1))
    >>> schedule.fail(7, now_ns=0)          # first failure: retry at 1 s
    True
    >>> schedule.pop_due(now_ns=999_999_999), schedule.pop_due(now_ns=10**9)
    (None, 7)
    >>> schedule.fail(7, now_ns=10**9)      # second failure: max_retries=1 spent -> drop
    False
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        #: (due_ns, seq, key), a heap; empty when nothing waits
        self.heap: list[tuple[int, int, Any]] = []
        self._seq = 0
        #: key -> failures so far (kept until ``forget``)
        self.fails: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.heap)

    def fail(self, key: Any, now_ns: int) -> bool:
        """Count a failure of ``key``; schedule its retry, or return False to drop it."""
        fails = self.fails.get(key, 0) + 1
        self.fails[key] = fails
        if self.policy.retries_exhausted(fails):
            return False
        due = now_ns + int(self.policy.delay_secs(fails) * 1e9)
        self._seq += 1
        heapq.heappush(self.heap, (due, self._seq, key))
        return True

    def retry_at(self, key: Any, due_ns: int) -> None:
        """Schedule ``key`` at ``due_ns`` without counting a failure (a record given up on
        whose dead-letter tuple failed is sent there again)."""
        self._seq += 1
        heapq.heappush(self.heap, (due_ns, self._seq, key))

    def next_due_ns(self) -> int | None:
        """When the earliest retry is due (clock nanoseconds), or None with none waiting:
        how long the spout may sleep."""
        return self.heap[0][0] if self.heap else None

    def pop_due(self, now_ns: int) -> Any:
        """The earliest key whose retry is due at ``now_ns``, or None."""
        if self.heap and self.heap[0][0] <= now_ns:
            return heapq.heappop(self.heap)[2]
        return None

    def forget(self, key: Any) -> None:
        """``key`` is done (acked or dropped): drop its failure count."""
        self.fails.pop(key, None)


def _resumes(
    strategy: FirstPollOffsetStrategy, committed: int | None, committed_by_this_run: bool
) -> bool:
    """Whether a task resumes from ``committed``: this run made it, or the strategy is an
    ``UNCOMMITTED_*`` one and there is a commit."""
    return committed is not None and (
        committed_by_this_run
        or strategy
        in (
            FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST,
            FirstPollOffsetStrategy.UNCOMMITTED_LATEST,
        )
    )


def first_position(
    strategy: FirstPollOffsetStrategy,
    committed: int | None,
    earliest: int | None,
    latest: int | None,
    *,
    committed_by_this_run: bool = False,
) -> int | None:
    """The offset a task starts reading at; None = the earliest offset there is.

    ``committed`` is the task's commit (None if none), ``committed_by_this_run`` whether this
    run of the topology made it (KafkaSpout's ``isOffsetCommittedByThisTopology``);
    ``earliest``/``latest`` are the lowest and highest offsets of the source (None if it is
    empty).
    """
    if _resumes(strategy, committed, committed_by_this_run):
        return committed
    if strategy in (FirstPollOffsetStrategy.LATEST, FirstPollOffsetStrategy.UNCOMMITTED_LATEST):
        return None if latest is None else latest + 1
    return earliest


def needs_latest(
    strategy: FirstPollOffsetStrategy,
    committed: int | None,
    *,
    committed_by_this_run: bool = False,
) -> bool:
    """Whether ``first_position`` needs the source's latest offset to decide (a source
    where asking costs a query asks only then)."""
    if _resumes(strategy, committed, committed_by_this_run):
        return False
    return strategy in (FirstPollOffsetStrategy.LATEST, FirstPollOffsetStrategy.UNCOMMITTED_LATEST)


class Chunk:
    """Rows of one offset range ``[lo, hi)`` of a partition, sorted by offset.

    ``offsets`` is a list of ints (what the tracker walks); the rows are either
    ``columns`` (one column per emitted field: Arrow arrays as read, or lists), which the
    spout emits as batches, or ``rows`` (one sequence of values per row). The spout emits
    from ``emitted`` on; ``walked`` rows are done and committed.
    """

    __slots__ = ("columns", "emitted", "hi", "lo", "offsets", "rows", "size", "walked")

    def __init__(
        self,
        lo: int,
        hi: int,
        offsets: Sequence[int],
        rows: Sequence[Any] | None = None,
        *,
        columns: Sequence[Any] | None = None,
    ) -> None:
        self.lo = lo
        self.hi = hi
        self.offsets = offsets
        self.rows = rows
        self.columns = None if columns is None else list(columns)
        self.size = len(offsets)
        self.emitted = 0
        self.walked = 0

    def index_of(self, offset: int) -> int:
        """The row position of ``offset`` (a binary search: offsets may have gaps, for
        records compacted away); ``KeyError`` if the chunk has no such offset."""
        i = bisect_left(self.offsets, offset)
        if i < self.size and self.offsets[i] == offset:
            return i
        raise KeyError(offset)

    def row_of(self, offset: int) -> Any:
        """The row of ``offset`` (its values as a list when the chunk holds columns)."""
        i = self.index_of(offset)
        if self.rows is not None:
            return self.rows[i]
        return [value_at(col, i) for col in self.columns or ()]

    def column_slice(self, start: int, stop: int) -> list[Any]:
        """Rows ``start:stop`` as columns (Arrow slices are zero-copy views)."""
        if self.columns is None:
            rows = self.rows or ()
            self.columns = [list(c) for c in zip(*rows, strict=True)]
        return column_slice(self.columns, start, stop, self.size)

    def __repr__(self) -> str:
        return f"Chunk([{self.lo}, {self.hi}), {self.size} rows, emitted {self.emitted})"


def column_slice(columns: list[Any], start: int, stop: int, size: int) -> list[Any]:
    """Rows ``start:stop`` of ``columns`` (``size`` rows each): Arrow slices are zero-copy
    views, lists are copied; all the rows are the columns themselves."""
    if start == 0 and stop == size:
        return columns
    return [
        col.slice(start, stop - start) if hasattr(col, "slice") else col[start:stop]
        for col in columns
    ]


def value_at(col: Any, i: int) -> Any:
    """Row ``i`` of a column as a Python value (an Arrow scalar is converted)."""
    v = col[i]
    return v.as_py() if hasattr(v, "as_py") else v


#: Offsets the commit walk checks at once.
_WALK_BLOCK = 1024


class OffsetTracker:
    """One partition's offsets: chunks read, rows emitted and done, the commit point.

    The spout appends chunks in offset order and advances ``chunk.emitted`` as it emits;
    ``done(offset)`` marks an emitted offset processed. ``commit_point()`` walks the done
    prefix and returns the offset to commit.

    >>> tracker = OffsetTracker(start=0)
    >>> chunk = tracker.add(Chunk(0, 10, [0, 1, 4], ["a", "b", "e"]))
    >>> chunk.emitted = 3                      # the spout emitted all three
    >>> tracker.done(1); tracker.commit_point()  # 0 is still in flight
    0
    >>> tracker.done(0); tracker.commit_point()  # 0, 1 done; 2, 3 were never there
    4
    >>> tracker.done(4); tracker.commit_point()  # the whole range [0, 10)
    10
    """

    def __init__(self, start: int, done: set[int] | None = None) -> None:
        self._committed = start
        self.chunks: deque[Chunk] = deque()
        # A task reading several partitions may pass one set to all their trackers when
        # its offsets (message ids) are unique across them: acks then land in one
        # ``set.update`` whatever partition they belong to; each walk removes its own.
        self._done: set[int] = set() if done is None else done
        #: bound methods for the spout's hot ``ack`` / ``ack_batch`` paths
        self.done = self._done.add
        self.done_all = self._done.update

    def add(self, chunk: Chunk) -> Chunk:
        """Append a chunk just read, and return it. Chunks come in offset order, never
        overlapping what was read before (``ValueError``): the commit walk relies on it."""
        if chunk.lo < self._committed or (self.chunks and chunk.lo < self.chunks[-1].hi):
            raise ValueError(
                f"chunk [{chunk.lo}, {chunk.hi}) overlaps what was already read (read up to "
                f"{self.chunks[-1].hi if self.chunks else self._committed})"
            )
        self.chunks.append(chunk)
        return chunk

    def commit_point(self) -> int:
        """Every offset of this partition below the result is done."""
        chunks = self.chunks
        done = self._done
        while chunks:
            chunk = chunks[0]
            offsets = chunk.offsets
            w, e = chunk.walked, chunk.emitted
            while w < e:
                # Whole blocks at C speed while they are done; row by row in the first
                # block that is not.
                k = min(e, w + _WALK_BLOCK)
                block = offsets[w:k]
                if done.issuperset(block):
                    done.difference_update(block)
                    w = k
                    continue
                while offsets[w] in done:
                    done.discard(offsets[w])
                    w += 1
                break
            chunk.walked = w
            if w < chunk.size:
                self._committed = offsets[w]
                break
            chunks.popleft()
            self._committed = chunk.hi
        return self._committed

    def emitted_point(self) -> int:
        """Every offset below the result was emitted (commit point without acking)."""
        for chunk in self.chunks:
            if chunk.emitted < chunk.size:
                return chunk.offsets[chunk.emitted]
        return self.chunks[-1].hi if self.chunks else self._committed

    def drop_emitted(self) -> None:
        """Forget fully emitted chunks (for guarantees that do not track acks)."""
        while self.chunks and self.chunks[0].emitted == self.chunks[0].size:
            self._committed = self.chunks.popleft().hi

    def uncommitted(self) -> int:
        """Emitted rows not yet walked past (as of the last ``commit_point``)."""
        return sum(c.emitted - c.walked for c in self.chunks)

    def chunk_of(self, offset: int) -> Chunk | None:
        """The chunk whose range holds ``offset`` (to replay a failed one), or None when
        it was committed already."""
        for chunk in self.chunks:
            if chunk.lo <= offset < chunk.hi:
                return chunk
        return None

    def is_empty(self) -> bool:
        """Nothing read is left uncommitted (time to read more)."""
        return not self.chunks
