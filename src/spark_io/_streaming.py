"""``SparkStreamingSpout``: a Spark Structured Streaming query bridged into a topology.

The query runs in Spark with ``foreachBatch``; its batch function hands the batch's rows
(as Arrow columns, emitted to the engine in slices with ``emit_batch``) to the spout and returns only once every one of them is acked (or dropped past
``max_retries``). Spark commits a batch to its checkpoint only after the function returns,
so after a crash Spark re-delivers the same batch id with the same rows: at least once end
to end. A failed tuple is replayed within its batch by the spout's ``RetryPolicy``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine import Spout, SystemClock
from engine.offsets import value_at

from ._errors import SourceError, SparkConfigError, is_spark_error, map_spark_error
from ._offsets import RetryPolicy, RetrySchedule
from ._reader import one_array
from ._run import register_task_metrics
from ._session import SessionConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from engine import OutputFieldsDeclarer, SpoutOutputCollector, TopologyContext

__all__ = ["SparkStreamingSpout", "StreamSource"]

#: How often a waiting batch function checks whether the spout is closing (seconds).
_WAKE_SECS = 0.05
#: Rows emitted per ``next_tuple`` call (one batch) at most.
_SLICE_ROWS = 8192


@dataclass(frozen=True)
class StreamSource:
    """A streaming source: ``files`` (a directory that receives new files), ``rate``, or any
    format Spark offers with ``of``.

    >>> StreamSource.files("/data/incoming", "json", schema="id BIGINT, text STRING").describe()
    "json stream from '/data/incoming'"
    """

    format: str
    path: str | None = None
    schema: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", {str(k): str(v) for k, v in self.options.items()})

    @classmethod
    def files(
        cls,
        path: str | os.PathLike[str],
        format: str = "parquet",
        *,
        schema: str,
        max_files_per_trigger: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> StreamSource:
        """New files in the directory ``path``; streaming file sources need a ``schema``."""
        if not schema:
            raise SparkConfigError(
                "a streaming file source needs a schema (a DDL string such as "
                "'id BIGINT, text STRING'): Spark does not infer one for streams"
            )
        opts = dict(options or {})
        if max_files_per_trigger is not None:
            opts["maxFilesPerTrigger"] = max_files_per_trigger
        return cls(format, os.fspath(path), schema, opts)

    @classmethod
    def rate(cls, rows_per_second: int = 1, *, num_partitions: int = 1) -> StreamSource:
        """Spark's ``rate`` source: ``(timestamp, value)`` rows, ``value`` counting up."""
        return cls(
            "rate",
            options={"rowsPerSecond": str(rows_per_second), "numPartitions": str(num_partitions)},
        )

    @classmethod
    def of(
        cls, format: str, path: str | None = None, *, schema: str | None = None, **options: Any
    ) -> StreamSource:
        """Any streaming source Spark offers, by its format name and options."""
        if not isinstance(format, str) or not format:
            raise SparkConfigError(f"StreamSource.of needs a format name, got {format!r}")
        return cls(format, path, schema, options)

    def describe(self) -> str:
        return f"{self.format} stream from {self.path!r}" if self.path else f"{self.format} stream"

    def load(self, spark: SparkSession) -> DataFrame:
        try:
            reader = spark.readStream.format(self.format).options(**self.options)
            if self.schema:
                reader = reader.schema(self.schema)
            return reader.load(self.path) if self.path else reader.load()
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(exc, f"opening {self.describe()}", SourceError) from exc


#: Loggers that report an exception raised in a foreachBatch function.
_ABORT_LOGGERS = (
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
)


@contextlib.contextmanager
def _quiet_abort(spark: Any) -> Iterator[None]:
    py4j_log = logging.getLogger("py4j.clientserver")
    level = py4j_log.level
    py4j_log.setLevel(logging.CRITICAL)
    jvm_levels: list[tuple[str, Any]] = []
    try:
        configurator = spark.sparkContext._jvm.org.apache.logging.log4j.core.config.Configurator
        log_manager = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager
        off = spark.sparkContext._jvm.org.apache.logging.log4j.Level.OFF
        for name in _ABORT_LOGGERS:
            jvm_levels.append((name, log_manager.getLogger(name).getLevel()))
            configurator.setLevel(name, off)
    except Exception:  # best effort: only log noise is at stake
        configurator = None
    try:
        yield
    finally:
        py4j_log.setLevel(level)
        if configurator is not None:
            for name, old in jvm_levels:
                with contextlib.suppress(Exception):
                    configurator.setLevel(name, old)


class _Aborted(Exception):
    """Raised in the batch function when the spout closes mid-batch: Spark then does not
    commit the batch and re-delivers it after a restart."""


class _Batch:
    """One micro-batch handed from Spark's thread to the spout, as Arrow columns."""

    __slots__ = ("batch_id", "columns", "done", "emitted", "finished", "size")

    def __init__(self, batch_id: int, columns: list[Any], size: int) -> None:
        self.batch_id = batch_id
        self.columns = columns
        self.size = size
        self.emitted = 0
        self.finished = 0  # rows acked or dropped
        self.done = threading.Event()


class SparkStreamingSpout(Spout):
    """Emits the rows of a Structured Streaming query, batch by batch, reliably.

    >>> from spark_io import SparkStreamingSpout, StreamSource
    >>> spout = SparkStreamingSpout(
    ...     StreamSource.files("/data/incoming", "json", schema="id BIGINT, text STRING"),
    ...     ["id", "text"], checkpoint_location="/tmp/checkpoints/incoming",
    ...     available_now=True)   # process what is there, then be exhausted

    Message ids are ``(batch_id, row_index)``. ``trigger_secs`` sets a processing-time
    trigger; ``available_now=True`` processes what is available and ends the query.
    """

    def __init__(
        self,
        source: StreamSource,
        fields: Sequence[str],
        *,
        checkpoint_location: str | os.PathLike[str],
        available_now: bool = False,
        trigger_secs: float | None = None,
        retry: RetryPolicy | None = None,
        session: SessionConfig | None = None,
        stream: str = "default",
    ) -> None:
        if not isinstance(source, StreamSource):
            raise SparkConfigError(
                f"source must be a StreamSource (StreamSource.files/rate/of), got "
                f"{type(source).__name__}"
            )
        if (
            isinstance(fields, str)
            or not fields
            or not all(isinstance(f, str) and f for f in fields)
        ):
            raise SparkConfigError(
                f"fields must be a non-empty list of column names, got {fields!r}"
            )
        if available_now and trigger_secs is not None:
            raise SparkConfigError("give either available_now=True or trigger_secs, not both")
        if trigger_secs is not None and (
            isinstance(trigger_secs, bool)
            or not isinstance(trigger_secs, (int, float))
            or not (trigger_secs > 0 and math.isfinite(trigger_secs))
        ):
            raise SparkConfigError(
                f"trigger_secs must be a number of seconds > 0, got {trigger_secs!r}"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise SparkConfigError(f"retry must be a RetryPolicy, got {retry!r}")
        self.source = source
        self.fields = tuple(fields)
        self.checkpoint_location = os.fspath(checkpoint_location)
        self.available_now = bool(available_now)
        self.trigger_secs = trigger_secs
        self.retry = retry or RetryPolicy()
        self.session = session or SessionConfig()
        self.stream = stream

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(self.stream, list(self.fields))

    # --- life cycle -----------------------------------------------------------------------
    async def open(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self._collector = collector
        self._emit = collector.emit
        self._emit_batch = collector.emit_batch
        self._max_pending: int | None = conf.get("topology.max.spout.pending")
        self._pending_count = collector.pending_count
        self._component = context.get_this_component_id()
        if len(context.get_component_tasks(self._component)) != 1:
            raise SparkConfigError(
                f"spout {self._component!r}: a streaming query is one reader; give the "
                f"SparkStreamingSpout parallelism 1 (split the work downstream)"
            )
        self._describe = self.source.describe()
        self._now_ns: Callable[[], int] = (context.clock or SystemClock()).now_ns
        self._handoff: queue.Queue[_Batch] = queue.Queue(maxsize=1)
        self._batch: _Batch | None = None
        self._retries = RetrySchedule(self.retry)
        self._closing = threading.Event()
        self._terminated = threading.Event()
        self._failure: BaseException | None = None
        self._failure_reported = False
        self.batches = 0
        self.dropped = 0
        self.retried = 0
        self._spark: Any = None
        self._query = await asyncio.to_thread(self._start_query)
        self._watcher = threading.Thread(
            target=self._watch, name=f"squall-{self._component}-query", daemon=True
        )
        self._watcher.start()
        register_task_metrics(
            context,
            self,
            {
                "spark_io.batches": lambda spout: spout.batches,
                "spark_io.retried": lambda spout: spout.retried,
                "spark_io.dropped": lambda spout: spout.dropped,
            },
        )

    def _start_query(self) -> StreamingQuery:
        spark = self._spark = self.session.get_or_create()
        df = self.source.load(spark)
        columns = df.columns
        missing = [f for f in self.fields if f not in columns]
        if missing:
            raise SourceError(
                f"{self._describe} has no column(s) {missing} to emit; its columns are "
                f"{sorted(columns)}"
            )
        writer = (
            df.select(*[f"`{f}`" for f in self.fields])
            .writeStream.foreachBatch(self._on_batch)
            .option("checkpointLocation", self.checkpoint_location)
            .queryName(f"squall_{self._component}_{os.getpid()}_{id(self)}")
        )
        if self.available_now:
            writer = writer.trigger(availableNow=True)
        elif self.trigger_secs is not None:
            writer = writer.trigger(processingTime=f"{int(self.trigger_secs * 1000)} milliseconds")
        try:
            return writer.start()
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc, f"starting the query on {self._describe}", SourceError
            ) from exc

    def _watch(self) -> None:
        try:
            self._query.awaitTermination()
        except Exception as exc:
            if not self._closing.is_set():
                self._failure = (
                    map_spark_error(exc, f"the streaming query on {self._describe}", SourceError)
                    if is_spark_error(exc)
                    else exc
                )
        finally:
            self._terminated.set()

    def close(self) -> None:
        if not hasattr(self, "_query"):
            return
        self._closing.set()
        # A batch cut short raises in Spark's callback on purpose: keep Spark and py4j from
        # logging that as an error.
        with _quiet_abort(self._spark):
            try:
                self._query.stop()
            except Exception as exc:  # stop() reports the aborted batch; we caused it
                if not is_spark_error(exc):
                    raise
            self._watcher.join(30)

    # --- Spark's side (its foreachBatch thread) ---------------------------------------------
    def _on_batch(self, df: DataFrame, batch_id: int) -> None:
        if self._closing.is_set():
            raise _Aborted(f"spout {self._component!r} closed before batch {batch_id}")
        table = df.toArrow()
        if table.num_rows == 0:
            return
        batch = _Batch(batch_id, [one_array(c) for c in table.columns], table.num_rows)
        while True:
            try:
                self._handoff.put(batch, timeout=_WAKE_SECS)
                break
            except queue.Full:
                if self._closing.is_set():
                    raise _Aborted(
                        f"spout {self._component!r} closed during batch {batch_id}"
                    ) from None
        while not batch.done.wait(_WAKE_SECS):
            if self._closing.is_set():
                # Not every row was acked: do not let Spark commit this batch.
                raise _Aborted(f"spout {self._component!r} closed during batch {batch_id}")

    # --- the topology's side ----------------------------------------------------------------
    def next_tuple(self) -> None:
        batch = self._batch
        if batch is None:
            try:
                batch = self._batch = self._handoff.get_nowait()
            except queue.Empty:
                if self._failure is not None and not self._failure_reported:
                    self._failure_reported = True
                    self._collector.report_error(self._failure)
                return
            self.batches += 1
        if self._retries:
            key = self._retries.pop_due(self._now_ns())
            if key is not None:
                self.retried += 1
                row = [value_at(col, key[1]) for col in batch.columns]
                self._emit(row, self.stream, key)
                return
        # The rest of the batch in slices, as Arrow columns; message ids (batch_id, row).
        i = batch.emitted
        if i < batch.size:
            n = min(batch.size - i, _SLICE_ROWS)
            if self._max_pending is not None:
                n = min(n, max(self._max_pending - self._pending_count(), 1))
            end = i + n
            columns = [col.slice(i, n) for col in batch.columns]
            bid = batch.batch_id
            self._emit_batch(columns, [(bid, j) for j in range(i, end)], self.stream)
            batch.emitted = end

    def ack(self, msg_id: Any) -> None:
        if self._retries.fails:
            self._retries.forget(msg_id)
        self._finish_one(msg_id)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        """Many acks at once (the engine calls this instead of ``ack`` per row)."""
        fails = self._retries.fails
        if fails:
            for key in fails.keys() & msg_ids:
                del fails[key]
        batch = self._batch
        if batch is None:  # pragma: no cover - defensive, as in _finish_one
            return
        # One batch is in flight at a time: every id is one of its rows.
        self._finish(batch, sum(1 for key in msg_ids if key[0] == batch.batch_id))

    def fail(self, msg_id: Any) -> None:
        if self._retries.fail(msg_id, self._now_ns()):
            return
        fails = self._retries.fails.pop(msg_id)
        self.dropped += 1
        self._collector.report_error(
            f"spout {self._component!r}: dropped row {msg_id[1]} of batch {msg_id[0]} of "
            f"{self._describe} after {fails} failures (max_retries={self.retry.max_retries})"
        )
        self._finish_one(msg_id)

    def _finish_one(self, msg_id: Any) -> None:
        batch = self._batch
        if batch is None or msg_id[0] != batch.batch_id:  # pragma: no cover - defensive
            return
        self._finish(batch, 1)

    def _finish(self, batch: _Batch, rows: int) -> None:
        batch.finished += rows
        if batch.finished == batch.size:
            self._batch = None
            batch.done.set()  # Spark's batch function returns; Spark commits the batch

    def is_exhausted(self) -> bool:
        """True once the query has ended and every row is done; raises the error that
        ended the query instead (once reported), so the run ends with it
        (``wait_until_complete`` raises it), as the offset spout's does."""
        if not (self._terminated.is_set() and self._batch is None and self._handoff.empty()):
            return False
        if self._failure is not None:
            if not self._failure_reported:
                return False
            raise self._failure
        return True

    @property
    def failure(self) -> BaseException | None:
        """The error that ended the query, if any (it is also in the topology's errors)."""
        return getattr(self, "_failure", None)
