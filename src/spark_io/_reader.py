"""The background reader of the offset spout: one task's rows, streamed out of Spark.

A *pass* is one Spark query, read once: the rows the task owns (``chunk_owner``) with
offsets from where the pass starts. Its plan is turned into Arrow record batches inside
Spark (the JVM builds them, as for ``toArrow()``), and the batches come to Python a group
of Spark partitions at a time: one job runs a group on every core, and the next group's
job runs while the spout emits the rows of the previous one, so a read is always in
flight while the engine works. The rows are numbered in the order they come (positions);
nothing sorts them and no query asks where the offsets start or end. A bounded read is
one pass; a tailing read starts a new pass, from above every offset seen, every
``poll_interval_secs``.

Each batch is checked before the spout sees it: null, negative or duplicate offsets end
the read with an ``OffsetColumnError``; a file that cannot be read, or that lacks an
emitted field, goes to the ``FileGuard`` (the pass then reads on without the file,
skipping the rows it already read). The spout's ``next_tuple`` only ever takes from the
bounded queue without blocking.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ._bad_files import FileGuard
from ._errors import OffsetColumnError, SourceError, is_spark_error, map_spark_error
from ._offsets import Batch
from ._py4j import release

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "END",
    "PassEnd",
    "ReaderFailure",
    "StreamReader",
    "check_offsets",
    "one_array",
    "spark_batches",
]

#: Put in the queue when a bounded read is done.
END: Any = object()


class ReaderFailure:
    """Put in the queue when reading failed: the spout reports ``error`` and stops reading."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class PassEnd:
    """Put in the queue after the last batch of a pass: every offset it held is below
    ``hi``."""

    __slots__ = ("hi",)

    def __init__(self, hi: int) -> None:
        self.hi = hi

    def __repr__(self) -> str:
        return f"PassEnd({self.hi})"


def check_offsets(offsets: Any, source: str, column: str) -> Any:
    """The offsets of one batch (a numpy int64 array), sorted, after checking that they are
    unique and non-negative (else ``OffsetColumnError``)."""
    import numpy as np

    ordered = np.sort(offsets, kind="stable")
    if ordered.size > 1:
        same = ordered[1:] == ordered[:-1]
        if bool(same.any()):
            dup = int(ordered[1:][same][0])
            _duplicate(source, column, dup, int((ordered == dup).sum()))
    if ordered.size and int(ordered[0]) < 0:
        raise OffsetColumnError(
            f"{source}: offset column {column!r} has the negative offset {int(ordered[0])} "
            f"(offsets must be unique, non-negative integers)"
        )
    return ordered


def _duplicate(source: str, column: str, offset: int, count: int | None) -> None:
    times = f"{count} times" if count else "more than once"
    raise OffsetColumnError(
        f"{source}: offset column {column!r} is not unique: offset {offset} appears {times} "
        f"(offsets must be unique, non-negative integers)"
    )


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A table column as one contiguous Arrow array (what the engine's batches carry)."""
    if column.num_chunks == 1:
        return column.chunk(0)
    import pyarrow as pa

    if column.num_chunks == 0:
        return pa.array([], column.type)
    return pa.concat_arrays(column.chunks)


def spark_batches(
    spark: SparkSession,
    df: DataFrame,
    *,
    job_group: str,
    stopping: threading.Event,
) -> Iterator[pa.RecordBatch]:
    """``df``'s rows as Arrow record batches, in partition order, without holding them all.

    Spark builds the batches (``toArrowBatchRdd``, as ``toArrow()`` does); each job runs a
    group of partitions (one per core) and serves its batches over a local socket, and the
    next group's job starts as soon as one is served, so Spark reads ahead by one group
    while the caller works. Jobs run in ``job_group`` (cancel it to stop a read). Without
    the classic JVM API (Spark Connect), the batches of one ``toArrow()``.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:  # pragma: no cover - Spark Connect
        yield from df.toArrow().to_batches()
        return
    import pyarrow as pa
    from pyspark.serializers import NoOpSerializer
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.util import _load_from_socket

    conf = spark.conf
    schema = to_arrow_schema(
        df.schema,
        timezone=conf.get("spark.sql.session.timeZone"),
        prefers_large_types=conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true",
    )
    sc = spark.sparkContext
    rdd = jdf.toArrowBatchRdd()
    jrdd = rdd.toJavaRDD()
    partitions = rdd.getNumPartitions()
    per = max(1, sc.defaultParallelism)
    groups = [list(range(k, min(partitions, k + per))) for k in range(0, partitions, per)]

    def run(parts: list[int]) -> Any:
        sc.setJobGroup(job_group, "squall: SparkOffsetSpout read", interruptOnCancel=True)
        return sc._jvm.PythonRDD.runJob(sc._jsc.sc(), jrdd, parts)  # type: ignore[union-attr]

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=job_group) as jobs:
        ahead = jobs.submit(run, groups[0]) if groups else None
        done = False
        try:
            for k in range(len(groups)):
                assert ahead is not None
                served = ahead.result()
                ahead = jobs.submit(run, groups[k + 1]) if k + 1 < len(groups) else None
                with _load_from_socket(served, NoOpSerializer()) as stream:
                    for raw in stream:
                        if stopping.is_set():
                            return
                        yield pa.ipc.read_record_batch(pa.py_buffer(raw), schema)
            done = True
        finally:
            if not done and ahead is not None and not ahead.done():
                sc.cancelJobGroup(job_group)  # a read given up: do not finish its next job
    release(jrdd, rdd)


class _ReadAgain(Exception):
    """A file was left out mid-pass: read the pass again without it."""


class StreamReader(threading.Thread):
    """Reads partition ``partition`` of ``partitions``, pass by pass, into ``out``.

    ``start(latest)`` chooses the first offset (called once); ``latest()`` asks Spark for
    the highest offset there is, which only the ``LATEST`` strategies need. ``loaded``: the
    guard's DataFrame was loaded just before (by the spout's ``open``), so the first pass
    reads it as it is rather than listing the files and reading the schema again.
    """

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
        start: Callable[[Callable[[], int | None]], int],
        bounded: bool,
        poll_interval_secs: float,
        queue_batches: int,
        name: str,
        loaded: bool = False,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.loaded = loaded
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
        self.out: queue.Queue[Any] = queue.Queue(maxsize=max(1, queue_batches))
        self.stopping = threading.Event()
        self.describe = guard.describe
        self.job_group = f"squall-{name}-{uuid.uuid4().hex[:8]}"
        #: passes and rows read (for metrics)
        self.passes = 0
        self.rows_read = 0
        #: the position of the next row read
        self.position = 0
        self._columns_checked = False
        #: set once the first-poll strategy has chosen where to start
        self.positioned = threading.Event()

    # --- control --------------------------------------------------------------------------
    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        try:
            self.spark.sparkContext.cancelJobGroup(self.job_group)
        except Exception as exc:  # the session is gone already: nothing runs
            if not is_spark_error(exc) and not isinstance(exc, AttributeError):
                raise
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
            if self.stopping.is_set():
                return  # stopped mid-read: the cancelled job's error is ours
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

    def _latest(self) -> int | None:
        """The highest offset of the source (a query; the ``LATEST`` strategies only)."""
        from pyspark.sql import functions as F

        col = F.col(f"`{self.column}`")

        def highest(df: DataFrame | None) -> int | None:
            if df is None:
                return None
            value = df.agg(F.max(col)).collect()[0][0]
            return None if value is None else int(value)

        return self.guard.query(self.spark, highest)

    def _read(self) -> None:
        if not self.loaded:
            self.guard.load(self.spark)
        lo = self.start_at(self._latest)
        self.positioned.set()
        while not self.stopping.is_set():
            hi = self._pass(lo)
            self.passes += 1
            if not self._put(PassEnd(hi)):
                return
            if self.bounded:
                self._put(END)
                return
            if self.stopping.wait(self.poll_interval_secs):
                return
            self.guard.load(self.spark)  # list the files again
            lo = hi

    def _pass(self, lo: int) -> int:
        """Read every row this task owns with an offset from ``lo`` on; returns above the
        highest offset read (``lo`` if none)."""
        from pyspark.sql import functions as F

        from ._txn import KeyRanges

        col = F.col(f"`{self.column}`")
        rows = self._own(col) if lo <= 0 else self._own(col) & (col >= F.lit(lo))
        select = [f"`{f}`" for f in dict.fromkeys([*self.fields, self.column])]
        seen = KeyRanges()  # the offsets read in this pass
        again = False  # reading the pass again, without a file: skip what was read
        self._columns_checked = False
        highest = lo - 1
        while True:
            df = self.guard.df
            query = None if df is None else df.where(rows).select(*select)
            try:
                if query is not None:
                    for rb in spark_batches(
                        self.spark, query, job_group=self.job_group, stopping=self.stopping
                    ):
                        if self.stopping.is_set():
                            return max(lo, highest + 1)
                        batch = self._batch(rb, rows, seen, again)
                        if batch is None:
                            continue
                        highest = max(highest, int(batch.offsets.max()))
                        if not self._put(batch):
                            return max(lo, highest + 1)
                return max(lo, highest + 1)
            except _ReadAgain:
                again = True
            except Exception as exc:
                if self.stopping.is_set() or not self.guard.left_out(exc):
                    raise
                self.guard.load(self.spark)
                again = True
            finally:
                release(query)

    def _batch(self, rb: pa.RecordBatch, rows: Column, seen: Any, again: bool) -> Batch | None:
        """The checked ``Batch`` of one record batch (None: nothing new in it)."""
        import numpy as np
        import pyarrow as pa

        if rb.num_rows == 0:
            return None
        offsets_col = rb.column(self.column)
        if not self._columns_checked and any(
            rb.column(f).null_count for f in self.guard.checked if f in rb.schema.names
        ):
            # Nulls where a file may lack the column: ask Spark once per pass which files
            # hold nulls (all of them, for the whole pass) and look at their columns.
            if not self.guard.check_columns(self.spark, pa.Table.from_batches([rb]), rows):
                raise _ReadAgain
            self._columns_checked = True
        if offsets_col.null_count:
            raise OffsetColumnError(
                f"{self.describe}: offset column {self.column!r} has {offsets_col.null_count} "
                f"null value(s) (every row needs an offset)"
            )
        offsets = offsets_col.to_numpy().astype(np.int64, copy=False)
        ordered = check_offsets(offsets, self.describe, self.column)
        old = seen.contains(offsets)
        if bool(old.any()):
            if not again:
                _duplicate(self.describe, self.column, int(offsets[old][0]), None)
            keep = pa.array(~old)
            rb = rb.filter(keep)
            offsets = offsets[~old]
            ordered = np.sort(offsets)
            if offsets.size == 0:
                return None
        from ._txn import key_ranges

        seen.add(*key_ranges(ordered))
        columns = [rb.column(f) for f in self.fields]
        batch = Batch(self.position, offsets, columns)
        self.position += batch.size
        self.rows_read += batch.size
        return batch
