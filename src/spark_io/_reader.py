"""The background reader of the offset spout: one partition's chunks through Spark.

A daemon thread runs ranged queries ``lo <= offset < hi`` (one chunk each) and hands each
result, sorted and checked, to the spout through a bounded queue, so at most
``prefetch`` chunks wait in memory. A chunk keeps the columns as Arrow arrays: the spout
emits them to the engine as batches, with no Python object per row. The spout's ``next_tuple`` only ever takes from the
queue without blocking.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._bad_files import FileGuard
from ._errors import OffsetColumnError, SourceError, is_spark_error, map_spark_error
from ._offsets import Chunk, next_owned_chunk_start

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["END", "ChunkReader", "ReaderFailure", "check_offsets", "one_array", "table_to_chunk"]

#: Put in the queue when a bounded read is done.
END: Any = object()


class ReaderFailure:
    """Put in the queue when reading failed: the spout reports ``error`` and stops reading."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def check_offsets(offsets: Any, source: str, column: str) -> Any:
    """Sorted, unique, non-negative offsets as a numpy int64 array, or ``OffsetColumnError``.

    ``offsets`` is a numpy array in any order; returns the sort permutation (None if it was
    already sorted) after the checks.
    """
    import numpy as np

    order = None
    if offsets.size > 1 and not bool((offsets[1:] > offsets[:-1]).all()):
        order = np.argsort(offsets, kind="stable")
        offsets = offsets[order]
        same = offsets[1:] == offsets[:-1]
        if bool(same.any()):
            dup = int(offsets[1:][same][0])
            count = int((offsets == dup).sum())
            raise OffsetColumnError(
                f"{source}: offset column {column!r} is not unique: offset {dup} appears "
                f"{count} times (offsets must be unique, non-negative integers)"
            )
    if offsets.size and int(offsets[0]) < 0:
        raise OffsetColumnError(
            f"{source}: offset column {column!r} has the negative offset {int(offsets[0])} "
            f"(offsets must be unique, non-negative integers)"
        )
    return order


def table_to_chunk(
    table: pa.Table, lo: int, hi: int, fields: Sequence[str], column: str, source: str
) -> Chunk:
    """One chunk from an Arrow table holding ``fields`` and the offset ``column``."""
    if table.num_rows == 0:
        return Chunk(lo, hi, [], columns=[[] for _ in fields])
    offsets_col = table.column(column)
    if offsets_col.null_count:
        raise OffsetColumnError(
            f"{source}: offset column {column!r} has {offsets_col.null_count} null value(s) "
            f"between offsets {lo} and {hi} (every row needs an offset)"
        )
    arr = offsets_col.to_numpy()
    order = check_offsets(arr, source, column)
    if order is not None:
        table = table.take(order)
        arr = arr[order]
    offsets = arr.tolist()
    return Chunk(lo, hi, offsets, columns=[one_array(table.column(f)) for f in fields])


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A table column as one contiguous Arrow array (what the engine's batches carry)."""
    if column.num_chunks == 1:
        return column.chunk(0)
    import pyarrow as pa

    if column.num_chunks == 0:
        return pa.array([], column.type)
    return pa.concat_arrays(column.chunks)


class ChunkReader(threading.Thread):
    """Reads partition ``partition`` of ``partitions``, chunk by chunk, into ``out``."""

    def __init__(
        self,
        spark: SparkSession,
        guard: FileGuard,
        column: str,
        fields: Sequence[str],
        *,
        chunk_rows: int,
        partitions: int,
        partition: int,
        start: Callable[[int | None, int | None], int | None],
        bounded: bool,
        poll_interval_secs: float,
        prefetch: int,
        name: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.spark = spark
        self.guard = guard
        self.column = column
        self.fields = list(fields)
        self.chunk_rows = chunk_rows
        self.partitions = partitions
        self.partition = partition
        self.start_at = start
        self.bounded = bounded
        self.poll_interval_secs = poll_interval_secs
        self.out: queue.Queue[Any] = queue.Queue(maxsize=prefetch)
        self.stopping = threading.Event()
        self.describe = guard.describe
        #: chunks and rows read (for metrics)
        self.chunks_read = 0
        self.rows_read = 0
        #: set once the first-poll strategy has chosen where to start
        self.positioned = threading.Event()

    # --- control --------------------------------------------------------------------------
    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        try:  # unblock a put waiting on a full queue
            while True:
                self.out.get_nowait()
        except queue.Empty:
            pass
        if self.is_alive():
            self.join(timeout)

    def _put(self, item: Any) -> bool:
        while not self.stopping.is_set():
            try:
                self.out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # the spout reports it; this thread only carries it
            if is_spark_error(exc):
                exc = map_spark_error(exc, f"reading {self.describe}", SourceError)
            self._put(ReaderFailure(exc))

    # --- reading --------------------------------------------------------------------------
    def _own(self, col: Column) -> Column:
        from pyspark.sql import functions as F

        if self.partitions == 1:
            return F.lit(True)
        return F.pmod(F.floor(col / F.lit(self.chunk_rows)), F.lit(self.partitions)) == F.lit(
            self.partition
        )

    def _bounds(self, col: Column, at_least: int | None) -> tuple[Any, Any]:
        from pyspark.sql import functions as F

        cond = self._own(col)
        if at_least is not None:
            cond = cond & (col >= F.lit(at_least))

        def bounds(df: DataFrame | None) -> tuple[Any, Any]:
            if df is None:
                return None, None
            row = df.where(cond).agg(F.min(col).alias("lo"), F.max(col).alias("hi")).collect()[0]
            return row["lo"], row["hi"]

        return self.guard.query(self.spark, bounds)

    def _chunk(self, col: Column, select: list[str], lo: int, hi: int) -> Chunk:
        """The rows of offsets ``[lo, hi)`` this task owns, checked (see ``FileGuard``)."""
        from pyspark.sql import functions as F

        rows = (col >= F.lit(lo)) & (col < F.lit(hi))
        guard = self.guard
        while True:
            table = guard.query(
                self.spark,
                lambda df: None if df is None else df.where(rows).select(*select).toArrow(),
            )
            if table is None:
                return Chunk(lo, hi, [], columns=[[] for _ in self.fields])
            if guard.check_columns(self.spark, table, rows):
                return table_to_chunk(table, lo, hi, self.fields, self.column, self.describe)

    def _read(self) -> None:
        from pyspark.sql import functions as F

        self.guard.load(self.spark)
        col = F.col(f"`{self.column}`")
        select = [f"`{f}`" for f in dict.fromkeys([*self.fields, self.column])]
        earliest, latest = self._bounds(col, None)
        if earliest is not None and earliest < 0:
            raise OffsetColumnError(
                f"{self.describe}: offset column {self.column!r} has the negative offset "
                f"{earliest} (offsets must be unique, non-negative integers)"
            )
        pos = self.start_at(earliest, latest)
        self.positioned.set()
        end = latest if self.bounded else None  # inclusive
        seek = pos is None
        C, n, i = self.chunk_rows, self.partitions, self.partition
        while not self.stopping.is_set():
            if seek:
                lo_hi = self._bounds(col, pos)
                if lo_hi[0] is None or (end is not None and lo_hi[0] > end):
                    if self.bounded:
                        self._put(END)
                        return
                    if self.stopping.wait(self.poll_interval_secs):
                        return
                    self.guard.load(self.spark)  # list the files again
                    continue
                pos, seek = lo_hi[0], False
            assert pos is not None
            pos = next_owned_chunk_start(pos, C, n, i)
            if end is not None and pos > end:
                self._put(END)
                return
            hi = (pos // C + 1) * C
            if end is not None:
                hi = min(hi, end + 1)  # a bounded read ends at the last offset seen at start
            chunk = self._chunk(col, select, pos, hi)
            if not self.bounded:
                if chunk.size == 0:
                    seek = True
                    continue
                if chunk.size < hi - pos:
                    # The chunk may still grow: claim only up to what was read.
                    chunk.hi = chunk.offsets[-1] + 1
            self.chunks_read += 1
            self.rows_read += chunk.size
            if not self._put(chunk):
                return
            seek = chunk.size == 0
            pos = chunk.hi
