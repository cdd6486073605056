"""``SinkTarget`` (where Spark writes) and ``SparkSinkBolt`` (a bolt that writes through it).

The bolt is a batch bolt: it holds its input batches' columns as they came (Arrow, numpy
or lists; per-tuple upstreams arrive as batches too), writes them as one Arrow table
through Spark when ``batch_rows`` have arrived or on the next tick (every ``batch_secs``),
and acks the batches' rows only after the write returned: at least once. A sink's tasks in
one process share one writer (``SparkSinkBolt._join``). With
``transactional=True`` every batch gets a transaction id and is published atomically, and
rows whose ``key_field`` was already published are dropped first: exactly once in the
output, even when the spout replays.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import os
import shutil
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, BatchBolt, SystemClock

from ._errors import (
    SinkError,
    SinkSchemaError,
    SparkConfigError,
    SparkIOError,
    is_spark_error,
    map_spark_error,
)
from ._py4j import release
from ._run import register_task_metrics, run_id
from ._session import SessionConfig

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from engine import TopologyContext, TupleBatch

__all__ = ["SINK_FORMATS", "SinkTarget", "SparkSinkBolt"]

#: Formats the sink writes without extra jars.
SINK_FORMATS = ("parquet", "json", "csv", "orc")
#: At most this many batches (of ``batch_rows``) queued behind a slow write go in one write.
_GROUP_COMMIT_BATCHES = 8
#: Input batches smaller than this on average are combined before a write (see
#: ``_arrow_table``).
_MIN_PIECE_ROWS = 4096

_write_locks: dict[tuple[str, str], threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _write_lock(kind: str, location: str) -> threading.Lock:
    """One lock per output that cannot be staged (tables, remote paths): one writer at a
    time, since Spark's committer shares ``_temporary`` between concurrent appends."""
    with _write_locks_guard:
        return _write_locks.setdefault((kind, location), threading.Lock())


def _local_path(location: str) -> Path | None:
    """The local filesystem path of ``location``, or None for a remote URI."""
    if location.startswith("file://"):
        return Path(location[len("file://") :])
    if "://" in location:
        return None
    return Path(location)


@dataclass(frozen=True)
class SinkTarget:
    """Where a sink writes. Build one with ``files`` or ``table``.

    >>> SinkTarget.files("/tmp/out/counts", "parquet").describe()
    "parquet files at '/tmp/out/counts'"
    """

    kind: str
    location: str
    format: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", {str(k): str(v) for k, v in self.options.items()})
        object.__setattr__(self, "partition_by", tuple(self.partition_by))

    @classmethod
    def files(
        cls,
        path: str | os.PathLike[str],
        format: str = "parquet",
        *,
        options: Mapping[str, Any] | None = None,
        partition_by: Sequence[str] = (),
    ) -> SinkTarget:
        """Files appended under the directory ``path`` (csv gets a header unless told)."""
        if format not in SINK_FORMATS:
            raise SparkConfigError(
                f"unknown sink format {format!r}; use one of {', '.join(SINK_FORMATS)}"
            )
        location = os.fspath(path)
        if not location:
            raise SparkConfigError("SinkTarget.files needs a non-empty path")
        opts = dict(options or {})
        if format == "csv":
            opts.setdefault("header", "true")
        return cls("files", location, format, opts, tuple(partition_by))

    @classmethod
    def table(
        cls, name: str, *, format: str = "parquet", options: Mapping[str, Any] | None = None
    ) -> SinkTarget:
        """A table of the session's catalog, created on the first write, appended after."""
        if not isinstance(name, str) or not name:
            raise SparkConfigError(f"SinkTarget.table needs a table name, got {name!r}")
        if format not in SINK_FORMATS:
            raise SparkConfigError(
                f"unknown table format {format!r}; use one of {', '.join(SINK_FORMATS)}"
            )
        return cls("table", name, format, dict(options or {}))

    def describe(self) -> str:
        if self.kind == "table":
            return f"table {self.location!r}"
        return f"{self.format} files at {self.location!r}"

    # --- checks and writes (in a worker thread) ----------------------------------------------
    def check_writable(self) -> None:
        """Fail early, naming the path, if a local output directory cannot be written."""
        if self.kind != "files":
            return
        path = _local_path(self.location)
        if path is None:
            return
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / f"_squall_probe_{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise SinkError(
                f"output directory {self.location!r} is not writable: {exc.strerror or exc}"
            ) from exc

    def existing_schema(self, spark: SparkSession) -> dict[str, str] | None:
        """Column name -> Spark type of what is already there (parquet, orc, tables)."""
        try:
            if self.kind == "table":
                if not spark.catalog.tableExists(self.location):
                    return None
                schema = spark.table(self.location).schema
            else:
                path = _local_path(self.location)
                if self.format not in ("parquet", "orc") or path is None:
                    return None
                from ._txn import data_files

                if next(data_files(path), None) is None:
                    return None  # nothing written yet
                schema = spark.read.format(self.format).load(self.location).schema
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc, f"reading the schema of {self.describe()}", SinkError
            ) from exc
        from ._txn import TXID_COLUMN

        return {f.name: f.dataType.simpleString() for f in schema.fields if f.name != TXID_COLUMN}

    def write(self, spark: SparkSession, table: pa.Table, location: str | None = None) -> None:
        """Append ``table`` (to ``location`` instead of the target's path if given).

        Safe with concurrent writers of the same target in this process: a local directory
        is appended through a staging directory of this write (``_txn.publish_files``);
        tables and remote paths are written one at a time.
        """
        df = writer = None
        try:
            df = spark.createDataFrame(table)
            writer = df.write.mode("append").format(self.format).options(**self.options)
            if self.partition_by:
                writer = writer.partitionBy(*self.partition_by)
            path = _local_path(self.location) if self.kind == "files" else None
            if location is not None:
                writer.save(location)  # the caller's private directory
            elif path is not None:
                from ._txn import publish_files, stage_dir

                staged = stage_dir(path)
                try:
                    writer.save(str(staged))
                    publish_files(staged, path)
                except OSError as exc:
                    raise SinkError(
                        f"publishing {table.num_rows} rows into {self.describe()} failed: {exc}"
                    ) from exc
                finally:
                    shutil.rmtree(staged, ignore_errors=True)
            else:
                with _write_lock(self.kind, self.location):
                    if self.kind == "table":
                        writer.saveAsTable(self.location)
                    else:
                        writer.save(self.location)
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            kind = SinkSchemaError if _looks_like_schema_error(exc) else SinkError
            raise map_spark_error(
                exc, f"writing {table.num_rows} rows to {self.describe()}", kind
            ) from exc
        finally:
            release(writer, df)  # the JVM's copy of the rows goes now, not at a full GC

    def write_columns(self, spark: SparkSession, columns: Mapping[str, Sequence[Any]]) -> None:
        import pyarrow as pa

        self.write(spark, pa.table({name: pa.array(values) for name, values in columns.items()}))


def _looks_like_schema_error(exc: BaseException) -> bool:
    text = str(exc)
    return any(
        marker in text
        for marker in (
            "SCHEMA",
            "INCOMPATIBLE",
            "CANNOT_WRITE",
            "DATATYPE",
            "UNRESOLVED_COLUMN",
            "cannot be cast",
        )
    )


def _spark_types(table: pa.Table) -> dict[str, str]:
    from pyspark.sql.pandas.types import from_arrow_schema

    return {f.name: f.dataType.simpleString() for f in from_arrow_schema(table.schema).fields}


#: Held rows of one input batch: (its input's (component, stream), the columns to write in
#: the sink's order, rows).
_Piece = tuple[tuple[str, str], list[Any], int]
#: A held input batch, with the task it came to (which acks or fails it).
_Held = tuple["SparkSinkBolt", Any]
#: The sinks whose tasks hold and write rows for others: (run, component, loop) -> it.
_groups: weakref.WeakValueDictionary[tuple[str, str, int], SparkSinkBolt] = (
    weakref.WeakValueDictionary()
)


def _join_lists(pieces: list[_Piece]) -> list[tuple[tuple[str, str], list[Any], int, list[int]]]:
    """Adjacent pieces of one input whose columns are all Python lists, as one piece (one
    Arrow conversion for many small batches of per-tuple emits), each with the indexes of
    the pieces it is made of."""
    out: list[tuple[tuple[str, str], list[Any], int, list[int]]] = []
    last_lists = owned = False  # out[-1] is all lists / its lists are copies of ours
    for i, (key, columns, n) in enumerate(pieces):
        lists = all(type(c) is list for c in columns)
        if out and lists and last_lists and out[-1][0] == key:
            _, joined, rows, which = out[-1]
            if not owned:
                joined, owned = [list(c) for c in joined], True
            for into, col in zip(joined, columns, strict=True):
                into.extend(col)
            out[-1] = (key, joined, rows + n, [*which, i])
        else:
            out.append((key, columns, n, [i]))
            last_lists, owned = lists, False
    return out


def _check_keys(component: str, key_field: str | None, table: pa.Table) -> None:
    """A transactional sink's rows: ``key_field`` an integer, in every row."""
    import pyarrow as pa

    key = table.column(key_field)
    if key.null_count or not pa.types.is_integer(key.type):
        raise SinkSchemaError(
            f"sink {component!r}: key_field {key_field!r} must be a non-null "
            f"integer in every row (got type {key.type}, {key.null_count} null(s))"
        )


@dataclass(frozen=True)
class _Outcome:
    """A write's outcome (``_write_batch``): per piece, the rows written (a transactional
    sink leaves out those already published), and the error of each piece left out."""

    written: list[int]
    failed: dict[int, SinkSchemaError]


def _to_arrow(col: Any, kind: Any) -> Any:
    """A column (Arrow, numpy or a sequence) as an Arrow array of type ``kind`` (None: as
    Arrow infers it)."""
    import pyarrow as pa

    if isinstance(col, (pa.Array, pa.ChunkedArray)):
        return col if kind is None or col.type == kind else col.cast(kind)
    return pa.array(col, type=kind)


class SparkSinkBolt(BatchBolt):
    """Writes its input rows through Spark in batches; acks them once the write is durable.

    >>> from spark_io import SinkTarget, SparkSinkBolt
    >>> sink = SparkSinkBolt(SinkTarget.files("/tmp/out/counts"), ["word", "count"],
    ...                      batch_rows=50_000, batch_secs=1.0)
    >>> # builder.set_bolt("sink", sink).shuffle_grouping("count")

    - ``fields``: the input fields to write, in order (default: every field of the input).
    - ``schema``: a DDL string (``"word STRING, count BIGINT"``) the rows must fit; by
      default the first batch's types are kept for every later batch. A batch that does not
      fit, or whose schema differs from the existing output, fails its tuples with a
      ``SinkSchemaError`` naming the column (they are replayed by the spout's retry policy).
    - ``transactional``: exactly-once output keyed by the int field ``key_field`` (unique
      per row, stable across replays, e.g. the source offset); files targets only.

    The tasks of one sink in a process hold their rows together and write them in the same
    Spark jobs, one writer thread for them all: ``batch_rows`` is the rows of one write,
    whichever tasks they came to (each Spark job has a fixed cost, and Spark already uses
    every core for one write: four tasks writing on their own made 12 jobs of what one task
    writes in 3). Each task still acks or fails its own rows, and its metrics count them
    (``spark_io.batches_written``: the writes that carried any of its rows). A batch that
    does not convert is failed alone; a write that fails (Spark, the file system) fails
    every batch in it.

    Give ``topology.max.spout.pending`` at least twice ``batch_rows``, or batches only ever
    fill on the timer.
    """

    #: the writer thread of the task's group (``_join``)
    _writer: concurrent.futures.ThreadPoolExecutor

    def __init__(
        self,
        target: SinkTarget,
        fields: Sequence[str] | None = None,
        *,
        schema: str | None = None,
        batch_rows: int = 50_000,
        batch_secs: float = 1.0,
        transactional: bool = False,
        key_field: str | None = None,
        session: SessionConfig | None = None,
    ) -> None:
        if not isinstance(target, SinkTarget):
            raise SparkConfigError(
                f"target must be a SinkTarget (SinkTarget.files/table), got {type(target).__name__}"
            )
        if fields is not None and (
            isinstance(fields, str)
            or not fields
            or not all(isinstance(f, str) and f for f in fields)
        ):
            raise SparkConfigError(
                f"fields must be a non-empty list of field names, got {fields!r}"
            )
        if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
            raise SparkConfigError(f"batch_rows must be an int >= 1, got {batch_rows!r}")
        if (
            isinstance(batch_secs, bool)
            or not isinstance(batch_secs, (int, float))
            or not (batch_secs > 0 and math.isfinite(batch_secs))
        ):
            raise SparkConfigError(
                f"batch_secs must be a number of seconds > 0, got {batch_secs!r}"
            )
        if transactional:
            if target.kind != "files" or _local_path(target.location) is None:
                raise SparkConfigError(
                    f"transactional mode publishes each batch with an atomic rename, so it needs a "
                    f"local files target, not {target.describe()}"
                )
            if not key_field:
                raise SparkConfigError(
                    "transactional mode needs key_field: an int field, unique per row and the "
                    "same when the row is replayed (e.g. the source offset)"
                )
            if fields is not None and key_field not in fields:
                raise SparkConfigError(
                    f"key_field {key_field!r} must be one of fields {list(fields)}"
                )
        self.target = target
        self.fields = None if fields is None else tuple(fields)
        self.schema = schema
        self.batch_rows = batch_rows
        self.batch_secs = float(batch_secs)
        self.transactional = bool(transactional)
        self.key_field = key_field
        self.session = session or SessionConfig()

    def component_configuration(self) -> Mapping[str, Any]:
        # Ticks twice per batch_secs; a tick flushes a batch whose first tuple waited
        # batch_secs, so a tuple waits at most 1.5 batch_secs and full batches are not cut.
        return {"topology.tick.tuple.freq.secs": self.batch_secs / 2}

    # --- life cycle -----------------------------------------------------------------------
    async def prepare(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: Any
    ) -> None:
        self._collector = collector
        self._component = context.get_this_component_id()
        self._task_index = context.get_this_task_index()
        inputs = sorted(context.get_this_sources())
        input_fields: list[list[str]] = []
        for c, s in inputs:
            names = list(context.get_component_output_fields(c, s))
            if names not in input_fields:
                input_fields.append(names)
        if self.fields is None:
            if len(input_fields) != 1:
                raise SparkConfigError(
                    f"sink {self._component!r}: its inputs have different fields "
                    f"{input_fields}; pass fields=[...] to choose the columns"
                )
            self._columns = tuple(input_fields[0])
        else:
            self._columns = self.fields
        # Per input stream: the index of every column in that stream's values.
        self._index: dict[tuple[str, str], tuple[int, ...]] = {}
        for c, s in inputs:
            names = list(context.get_component_output_fields(c, s))
            missing = [f for f in self._columns if f not in names]
            if missing:
                raise SparkConfigError(
                    f"sink {self._component!r}: input {c!r} stream {s!r} has no field(s) "
                    f"{missing} (its fields: {names})"
                )
            self._index[(c, s)] = tuple(names.index(f) for f in self._columns)
        if self.transactional and self.key_field not in self._columns:
            raise SparkConfigError(
                f"sink {self._component!r}: key_field {self.key_field!r} is not among the "
                f"columns {list(self._columns)}"
            )
        self._loop = asyncio.get_running_loop()
        self._now_ns: Callable[[], int] = (context.clock or SystemClock()).now_ns
        self._batch_ns = int(self.batch_secs * 1e9)
        self._checked_existing = False  # the output's schema (_prepare_blocking checks a given one)
        self._spark, self._arrow_schema, self._log = await asyncio.to_thread(self._prepare_blocking)
        self.rows_written = 0
        self.rows_skipped = 0
        self.batches_written = 0
        self._task_id = context.get_this_task_id()
        self._join((run_id(conf, context), self._component, id(self._loop)))
        register_task_metrics(
            context,
            self,
            {
                "spark_io.rows_written": lambda sink: sink.rows_written,
                "spark_io.batches_written": lambda sink: sink.batches_written,
                "spark_io.duplicate_rows_skipped": lambda sink: sink.rows_skipped,
            },
        )

    def _prepare_blocking(self) -> tuple[Any, Any, Any]:
        spark = self.session.get_or_create()
        self.target.check_writable()
        arrow_schema = None
        if self.schema is not None:
            try:
                struct = spark.createDataFrame([], self.schema).schema
            except Exception as exc:
                if not is_spark_error(exc):
                    raise
                raise SparkConfigError(
                    f"sink {self._component!r}: schema {self.schema!r} is not a valid DDL "
                    f"schema: {exc}"
                ) from exc
            from pyspark.sql.pandas.types import to_arrow_schema

            names = [f.name for f in struct.fields]
            if names != list(self._columns):
                raise SparkConfigError(
                    f"sink {self._component!r}: schema columns {names} differ from the fields "
                    f"written {list(self._columns)}"
                )
            arrow_schema = to_arrow_schema(struct)
            self._check_existing(spark, {f.name: f.dataType.simpleString() for f in struct.fields})
            self._checked_existing = True
        path = _local_path(self.target.location) if self.target.kind == "files" else None
        if path is not None:
            from ._txn import clean_stale_staging

            clean_stale_staging(path)
        log = None
        if self.transactional:
            from ._txn import TransactionLog

            # __init__ refused a transactional sink without a local files target
            assert path is not None and self.key_field is not None
            log = TransactionLog(path, self.key_field)
            log.clean_stale_staging()
            log.refresh()
        return spark, arrow_schema, log

    def _check_existing(self, spark: SparkSession, ours: dict[str, str]) -> None:
        existing = self.target.existing_schema(spark)
        if existing is None or existing == ours:
            return
        for name, kind in ours.items():
            if name in existing and existing[name] != kind:
                raise SinkSchemaError(
                    f"sink {self._component!r}: column {name!r} is {kind} in the tuples but "
                    f"{existing[name]} in the existing output {self.target.describe()}"
                )
        raise SinkSchemaError(
            f"sink {self._component!r}: the tuples have the columns {sorted(ours)} but the "
            f"existing output {self.target.describe()} has {sorted(existing)}"
        )

    async def cleanup(self) -> None:
        if not hasattr(self, "_group"):
            return  # prepare() failed
        group = self._group
        try:
            if group._held:
                group._flush()
            # In steps: a cancelled cleanup leaves no thread waiting for good (the loop's
            # shutdown waits for its default executor's threads).
            while not await asyncio.to_thread(self._settled.wait, 1.0):
                pass
        finally:
            group._members.discard(self._task_id)
            if not group._members:  # the last task: the writer goes (a task to come makes one)
                if _groups.get(group._key) is group:
                    del _groups[group._key]
                group._writer.shutdown(wait=True)

    # --- the writer a sink's tasks share ----------------------------------------------------
    def _join(self, key: tuple[str, str, int]) -> None:
        """Join the writer of this sink's tasks on this loop (the first task to come makes
        it). The tasks hold their rows together and write them in the same Spark jobs: a
        write of ``batch_rows`` rows of any tasks, not one per task (with 4 tasks, 12 jobs
        for what one task writes in 3); each task's rows are still acked or failed by that
        task, and its metrics count its own rows."""
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = self
            self._lead(key)
        # By task id: a task restarted without its cleanup (a crash) comes back as itself.
        group._members.add(self._task_id)
        self._group = group
        self._writer = group._writer
        #: this task's batches held, queued or being written; set when there are none
        self._in_flight = 0
        self._settled = threading.Event()
        self._settled.set()

    def _lead(self, key: tuple[str, str, int]) -> None:
        """Become the writer of a sink's tasks (``_join``): hold their rows, write them."""
        self._key = key
        self._new_buffers()
        self._new_writer()
        #: the ids of the tasks in the group, and when the oldest row held came
        self._members: set[int] = set()
        self._first_held_ns = 0

    def _new_writer(self) -> None:
        """The writer thread and what the loop knows of it (``_start_write``)."""
        self._writer = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"squall-{self._component}-writer"
        )
        # Batches waiting for the writer thread; while it writes one, the next ones queue
        # and are written together (group commit), so slow writes make bigger batches
        # rather than a backlog. An item: (pieces, input batches to ack, rows). The loop
        # alone touches the queue and decides each write; the thread only writes.
        self._queued: list[tuple[list[_Piece], list[_Held], int]] = []
        self._writing = False
        self._idle = threading.Event()  # no write running and nothing queued
        self._idle.set()
        self._seq = 0
        #: input batches taken so far, and whether the last write was a lingering tail's
        self._arrivals = 0
        self._lingered = False

    def _new_buffers(self) -> None:
        #: the columns to write of each held batch, with its input's key
        self._pieces: list[_Piece] = []
        #: the input batches whose rows are held (acked or failed after the write), each
        #: with the task it came to
        self._held: list[_Held] = []
        self._held_rows = 0

    # --- batches ----------------------------------------------------------------------------
    def execute_batch(self, batch: TupleBatch) -> None:
        key = (batch.source_component, batch.source_stream)
        index = self._index.get(key)
        if index is None:
            if key == (SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID):
                group = self._group
                if group._held and self._now_ns() - group._first_held_ns >= self._batch_ns:
                    group._flush()
                return
            raise SinkError(  # pragma: no cover - the engine only delivers subscribed streams
                f"sink {self._component!r}: unexpected input {key[0]!r} stream {key[1]!r}"
            )
        n = len(batch)
        if n:
            columns = batch.columns
            self._group._hold(self, key, [columns[i] for i in index], n, batch)

    def _hold(
        self, task: SparkSinkBolt, key: tuple[str, str], columns: list[Any], n: int, batch: Any
    ) -> None:
        """The group's: hold ``task``'s batch ``batch`` (its ``n`` rows' ``columns``) for
        the next write; write once ``batch_rows`` are held."""
        self._arrivals += 1
        if not self._held:
            self._first_held_ns = self._now_ns()
        self._pieces.append((key, columns, n))
        self._held.append((task, batch))
        self._held_rows += n
        task._in_flight += 1
        task._settled.clear()
        if self._held_rows >= self.batch_rows:
            self._flush()

    def _flush(self) -> None:
        """Queue the held rows for a write; start one unless a write is running (they then
        go with the next one)."""
        self._queue_held()
        if not self._writing:
            self._start_write()

    def _queue_held(self) -> None:
        self._queued.append((self._pieces, self._held, self._held_rows))
        self._new_buffers()

    def _start_write(self) -> None:
        """On the loop: hand the writer thread what is queued, up to
        ``_GROUP_COMMIT_BATCHES`` batches, as one write, and with it the rows held since
        if they make half a batch or more (group commit: while a write runs, the input goes
        on, and with ``topology.max.spout.pending`` a few batches the last batch often
        stops just short of full until the write's acks come back; written with the next
        write, not after it, they make one Spark job fewer). Rows under half a batch wait
        for ``batch_rows``, the tick, or a quiet input (``_linger``), so that a slow input
        does not become many small files."""
        limit = _GROUP_COMMIT_BATCHES * self.batch_rows
        queued = self._queued
        rows = sum(n for _, _, n in queued)
        if self._held_rows >= max(1, self.batch_rows // 2) and (
            not queued or rows + self._held_rows <= limit
        ):
            self._queue_held()
        if not queued:
            self._idle.set()
            if self._held and not self._lingered:
                # Under half a batch, held while the write ran: if no more rows come for
                # a tenth of batch_secs, the input has likely stopped (the tail of a finite
                # input), and they go then, not up to 1.5 batch_secs later at a tick. At
                # most one such write follows a full one, so a slow input still makes
                # files of a batch_secs' rows.
                self._loop.call_later(self.batch_secs / 10, self._linger, self._arrivals)
            return
        self._lingered = False
        taken = rows = 0
        for _, _, n in queued:
            if taken and rows + n > limit:
                break
            taken += 1
            rows += n
        items, self._queued = queued[:taken], queued[taken:]
        pieces = [p for item in items for p in item[0]]
        held = [b for item in items for b in item[1]]
        self._seq += 1
        try:
            # Through the loop, so that a simulation (``engine.testing.simulate``) waits for
            # the write with its clock stopped, as for any call handed to a thread.
            self._loop.run_in_executor(self._writer, self._write_job, pieces, held, self._seq)
        except RuntimeError as exc:  # the writer was shut down (a cancelled cleanup)
            unwritten = held + [b for item in self._queued for b in item[1]] + self._held
            self._queued = []
            self._new_buffers()
            self._written(unwritten, SinkError(f"sink {self._component!r} stopped: {exc}"))
            return
        self._writing = True
        self._idle.clear()

    def _linger(self, arrivals: int) -> None:
        """On the loop, a tenth of ``batch_secs`` after a write ended with rows held (see
        ``_start_write``): write them if none came since and the writer is idle."""
        if self._held and not self._writing and arrivals == self._arrivals:
            self._flush()
            self._lingered = True

    def _write_job(self, pieces: list[_Piece], held: list[_Held], seq: int) -> None:
        """The writer thread: one write; its outcome goes back to the loop (``_written``)."""
        error: BaseException | None = None
        outcome: _Outcome | None = None
        try:
            outcome = self._write_batch(pieces, seq)
        except Exception as exc:
            error = exc
        # RuntimeError: the loop is closed, the topology is gone.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._written, held, error, outcome, pieces)

    def _written(
        self,
        held: list[_Held],
        error: BaseException | None,
        outcome: _Outcome | None = None,
        pieces: list[_Piece] | None = None,
    ) -> None:
        """On the loop: ack the batches' rows after a durable write, else fail them (an
        error is reported by each task whose rows it failed, an error from an ack or fail
        too, and the other batches are still settled); then the next write, if anything is
        queued or half a batch is held."""
        self._writing = False
        try:
            wrote: set[int] = set()
            reported: set[tuple[int, int]] = set()
            for i, (task, batch) in enumerate(held):
                collector = task._collector
                why = error if outcome is None else outcome.failed.get(i)
                try:
                    if why is None:
                        assert outcome is not None and pieces is not None
                        published = outcome.written[i]
                        task.rows_written += published
                        task.rows_skipped += pieces[i][2] - published
                        if id(task) not in wrote:
                            wrote.add(id(task))
                            task.batches_written += 1
                        collector.ack(batch)
                    else:
                        if (id(task), id(why)) not in reported:
                            reported.add((id(task), id(why)))
                            collector.report_error(why)
                        collector.fail(batch)
                except Exception as exc:  # e.g. rows the bolt's executor already failed
                    collector.report_error(exc)
                finally:
                    task._in_flight -= 1
                    if not task._in_flight:
                        task._settled.set()
        finally:
            self._start_write()

    # --- the writer thread ------------------------------------------------------------------
    def _convert(self, pieces: list[_Piece]) -> tuple[pa.Table | None, dict[int, SinkSchemaError]]:
        """One Arrow table of the held columns, a chunk per input batch: Arrow columns as
        they are (no copy), numpy and lists converted by Arrow in bulk (adjacent list pieces
        of one input are joined first), with the pieces that do not convert, or do not fit
        the schema, left out: returns the table of the others (None if none) and the error
        of each piece left out, by its index. The first write's pieces set the schema (their
        types unified; where they do not unify, the first piece's): later ones must fit it."""
        import pyarrow as pa

        names = list(self._columns)
        failed: dict[int, SinkSchemaError] = {}
        tables: list[pa.Table] = []
        for key, columns, _, which in _join_lists(pieces):
            try:
                tables.append(self._piece_table(key, names, columns))
            except SinkSchemaError as exc:
                if len(which) == 1:
                    failed[which[0]] = exc
                    continue
                for i in which:  # joined batches: find the ones that do not convert
                    try:
                        tables.append(self._piece_table(pieces[i][0], names, pieces[i][1]))
                    except SinkSchemaError as one:
                        failed[i] = one
        if not tables:
            return None, failed
        if self._arrow_schema is None:  # the first write: later batches must fit it
            try:
                schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                schema = tables[0].schema
            self._arrow_schema = schema
        fitting = []
        good = [i for i in range(len(pieces)) if i not in failed]
        at = 0  # the pieces of each table, in order: ``good`` from ``at`` on
        for t in tables:
            lo, n = at, 0
            while n < t.num_rows:  # a table is one piece or a run of joined pieces
                n += pieces[good[at]][2]
                at += 1
            if t.schema != self._arrow_schema:
                try:
                    t = t.cast(self._arrow_schema)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    error = SinkSchemaError(
                        f"sink {self._component!r}: a batch does not fit the schema of the "
                        f"first one ({self._arrow_schema}) for {self.target.describe()}: {exc}"
                    )
                    error.__cause__ = exc
                    for i in good[lo:at]:
                        failed[i] = error
                    continue
            fitting.append(t)
        if not fitting:
            return None, failed
        table = fitting[0] if len(fitting) == 1 else pa.concat_tables(fitting)
        # Pieces of a useful size stay as they came (a chunk each): Spark's Arrow path slices
        # the table into record batches, one per Spark partition and output file, without
        # copying the rows again. Only small pieces (per-tuple or sparse upstreams) are
        # combined, so that they do not become as many tiny files.
        if table.num_columns and table.column(0).num_chunks > max(
            1, table.num_rows // _MIN_PIECE_ROWS
        ):
            table = table.combine_chunks()
        return table, failed

    def _piece_table(self, key: tuple[str, str], names: list[str], columns: list[Any]) -> pa.Table:
        """One piece's columns as an Arrow table (of the schema's types, once known)."""
        import pyarrow as pa

        schema = self._arrow_schema
        arrays = []
        for name, col in zip(names, columns, strict=True):
            kind = None if schema is None else schema.field(name).type
            try:
                arrays.append(_to_arrow(col, kind))
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                OverflowError,
            ) as exc:
                expected = f" as {kind}" if kind is not None else ""
                raise SinkSchemaError(
                    f"sink {self._component!r}: field {name!r} from {key[0]!r} does not "
                    f"convert{expected} for {self.target.describe()}: {exc}"
                ) from exc
        table = pa.Table.from_arrays(arrays, names=names)
        if self.transactional:
            _check_keys(self._component, self.key_field, table)
        return table

    def _write_batch(self, pieces: list[_Piece], seq: int) -> _Outcome:
        """Write (or publish) the pieces that convert as one batch; returns how many rows
        of each piece were written, and the error of each piece that does not convert. A
        failure of the write leaves as a ``SinkError`` naming this sink and the output,
        ``from`` the original."""
        import numpy as np

        where = f"sink {self._component!r}"
        try:
            table, failed = self._convert(pieces)
            written = [0] * len(pieces)
            if table is None:
                return _Outcome(written, failed)
            if not self._checked_existing:
                self._check_existing(self._spark, _spark_types(table))
                self._checked_existing = True
            good = [i for i in range(len(pieces)) if i not in failed]
            rows = [pieces[i][2] for i in good]
            if self.transactional:
                published = self._publish(table, seq)
                starts = np.cumsum([0, *rows[:-1]])
                rows = np.add.reduceat(published.astype(np.int64), starts).tolist()
            else:
                self.target.write(self._spark, table)
            for i, n in zip(good, rows, strict=True):
                written[i] = n
            return _Outcome(written, failed)
        except SparkIOError as exc:
            if str(exc).startswith(where):
                raise
            raise type(exc)(f"{where}: {exc}") from (exc.__cause__ or exc)
        except OSError as exc:  # the staging, the publishing rename, the transaction log
            total = sum(n for _, _, n in pieces)
            raise SinkError(
                f"{where}: writing {total} rows to {self.target.describe()} failed: {exc}"
            ) from exc
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc, f"{where}: writing to {self.target.describe()}", SinkError
            ) from exc

    def _publish(self, table: pa.Table, seq: int) -> np.ndarray:
        """Publish the rows of ``table`` whose keys are not in the output yet, as one
        transaction; returns which of its rows were published."""
        import numpy as np
        import pyarrow as pa

        from ._txn import key_ranges

        log = self._log
        key = table.column(self.key_field)
        published = np.zeros(table.num_rows, bool)
        keys = key.to_numpy().astype(np.int64, copy=False)
        rows = None  # the rows of ``table`` that ``keys`` are (None: all of them)
        ordered = np.sort(keys)
        if ordered.size > 1 and bool((ordered[1:] == ordered[:-1]).any()):
            # The same row twice in one batch (a replay that overtook the original) counts
            # once.
            _, rows = np.unique(keys, return_index=True)
            rows.sort()
            table, keys = table.take(pa.array(rows)), keys[rows]
            ordered = np.sort(keys)
        while True:
            with log.locked():
                fresh = ~log.refresh().contains(keys)
            if not fresh.all():  # only then a copy: the rows not yet published
                todo, todo_keys = table.filter(pa.array(fresh)), keys[fresh]
                todo_ordered = np.sort(todo_keys)
            else:
                todo, todo_keys, todo_ordered = table, keys, ordered
            if todo.num_rows == 0:
                return published
            txid = log.new_txid(self._task_index, seq)
            staged = log.staging / txid
            shutil.rmtree(staged, ignore_errors=True)
            try:
                self.target.write(self._spark, todo, str(staged))
                starts, ends = key_ranges(todo_ordered)
                log.write_manifest(staged, txid, starts, ends, todo.num_rows)
                with log.locked():
                    if log.refresh().contains(todo_keys).any():
                        # Another writer published some of these keys meanwhile: filter again.
                        shutil.rmtree(staged, ignore_errors=True)
                        continue
                    log.publish(staged, txid, starts, ends)
            except BaseException:
                shutil.rmtree(staged, ignore_errors=True)  # a failed batch leaves nothing staged
                raise
            published[fresh if rows is None else rows[fresh]] = True
            return published
