"""``SparkOffsetSpout``: KafkaSpout's semantics over a Spark DataFrame, table or directory.

The source has an integer *offset column*: unique, non-negative, and growing with the data
(new rows get larger offsets), like a Kafka offset. Each task owns a partition of the offset
space (chunks of ``chunk_rows`` offsets dealt round-robin over the tasks). It streams its
rows out of Spark in one query per *pass* (every row it owns from where it starts), as the
Arrow record batches Spark builds, on a background thread that keeps a read in flight while
the engine works; it emits them as batches (``emit_batch``: the columns stay Arrow), each row
its own tree with its *position* (the order it was read in) as message id. Rows come in no
particular offset order, so a pass's end is committed to ``checkpoint_dir`` once every row
of it is done; a topology restarted on the same checkpoint directory re-reads from the last
commit (a range read, the only one). Duplicate, null or negative offsets end the run with an
``OffsetColumnError`` once what was emitted is done; a file that cannot be read or lacks a
field is a bad file (``BadFilePolicy``); a row added later with an offset below what a task
already read is never seen (as in Kafka, offsets only grow).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import SystemClock, submit_io
from engine.state import RewindableSpout

from ._bad_files import BAD_FILE_FIELDS, BadFilePolicy, FileGuard
from ._checkpoint import SharedCheckpoint, shared_checkpoint
from ._errors import (
    CheckpointError,
    OffsetColumnError,
    SourceError,
    SparkConfigError,
    is_spark_error,
    map_spark_error,
)
from ._offsets import (
    Batch,
    FirstPollStrategy,
    PositionTracker,
    ProcessingGuarantee,
    RetryPolicy,
    RetrySchedule,
    first_position,
    needs_latest,
)
from ._reader import END, PassEnd, ReaderFailure, StreamReader
from ._run import register_task_metrics, run_id
from ._session import SessionConfig
from ._sink import SinkTarget
from ._source import SparkSource
from ._txn import KeyRanges, key_ranges

if TYPE_CHECKING:
    from engine import OutputFieldsDeclarer, SpoutOutputCollector, TopologyContext

__all__ = ["SparkOffsetSpout"]

log = logging.getLogger("spark_io.spout")

#: The first item of a bad-file record's message id (the second is the file's path).
_BAD_FILE = "bad_file"

_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
#: Rows emitted between two looks at the clock for a periodic commit.
_COMMIT_CHECK_ROWS = 4096
#: Rows emitted per ``next_tuple`` call (one batch) at most.
_SLICE_ROWS = 10_000
#: Rows per Arrow record batch as Spark builds them (``spark.sql.execution.arrow.
#: maxRecordsPerBatch``, 10,000 by default): how the read-ahead queue is sized.
_SPARK_BATCH_ROWS = 10_000


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SparkConfigError(f"{name} must be an int >= 1, got {value!r}")
    return value


def _positive_secs(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value > 0 and math.isfinite(value))
    ):
        raise SparkConfigError(f"{name} must be a number of seconds > 0, got {value!r}")
    return float(value)


class SparkOffsetSpout(RewindableSpout):
    """Reads ``source`` through Spark with KafkaSpout's guarantees; emits ``fields`` per row.

    >>> from spark_io import SparkOffsetSpout, SparkSource
    >>> spout = SparkOffsetSpout(
    ...     SparkSource.files("data/sentences.parquet"), "id", ["id", "sentence"],
    ...     checkpoint_dir="/tmp/checkpoints/sentences",
    ... )
    >>> # builder.set_spout("sentences", spout, 2)   # two tasks split the offsets

    - ``first_poll``: where a task starts (``FirstPollStrategy``; default resume from the
      commit, else from the earliest offset).
    - ``guarantee``: ``ProcessingGuarantee`` (default ``AT_LEAST_ONCE``).
    - ``retry``: ``RetryPolicy`` for failed rows; past ``max_retries`` a row is dropped,
      reported, written to ``dead_letter`` (a ``SinkTarget``) if one is given, and counts as
      done for the commit.
    - ``max_uncommitted_offsets``: rows emitted and not yet done (acked or dropped) at which
      emitting pauses (default four chunks); with ``prefetch_chunks`` (chunks of rows read
      ahead) it bounds the rows held in memory.
    - ``bounded``: read what is there in one pass (the spout is then exhausted once every
      row is done, and commits at that end); otherwise a new pass every
      ``poll_interval_secs`` reads the rows above every offset seen, and commits as each
      pass is done.
    - ``bad_files``: what a file of a files source that cannot be read (corrupt,
      truncated, a column of another type) or lacks an emitted field does
      (``BadFilePolicy``). ``FAIL`` (default): reading stops, what was emitted completes,
      then the run ends with a ``BadFileError`` naming the file (``wait_until_complete``
      raises it). ``SKIP``: the file is left out and recorded on the stream
      ``bad_file_stream`` (fields ``file``, ``error``); every other file is read.
    - ``nullable``: emitted fields that some files may lack (read as None there); any
      other field missing from a parquet or orc file is a bad file.

    A source error that is not about one file (duplicate offsets, say) also ends the run
    with that error once what was emitted completes.

    A task that re-opens within the same run of the topology (a crash restart, a rebalance)
    resumes from its own commit whatever ``first_poll`` says; the strategies choose only
    where a new run starts. Retry backoff and the commit interval follow the topology's
    clock (``context.clock``), so a simulation drives them.

    Feeding a stateful bolt, the spout's positions go into the bolts' checkpoints and a
    recovery rewinds it to them (it is a ``RewindableSpout``): every row then affects the
    state exactly once, across SIGKILLs too. A position is the start of the pass being
    read and the offsets of that pass already emitted, as runs of consecutive offsets
    (whatever order Spark serves the rows in): a few when each file holds a range of
    offsets, as files written in offset order do, one per row emitted in the worst case
    (offsets dealt across files row by row), which each checkpoint then stores. A rewind
    reads the pass again from its start and leaves those offsets out; it needs the rows
    still in the source (a rewind to data deleted since reads nothing for it).
    """

    def __init__(
        self,
        source: SparkSource,
        offset_column: str,
        fields: Sequence[str],
        *,
        checkpoint_dir: str | os.PathLike[str],
        chunk_rows: int = 100_000,
        prefetch_chunks: int = 1,
        first_poll: FirstPollStrategy = FirstPollStrategy.UNCOMMITTED_EARLIEST,
        guarantee: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE,
        retry: RetryPolicy | None = None,
        max_uncommitted_offsets: int | None = None,
        commit_interval_secs: float = 1.0,
        bounded: bool = True,
        poll_interval_secs: float = 1.0,
        dead_letter: SinkTarget | None = None,
        bad_files: BadFilePolicy = BadFilePolicy.FAIL,
        bad_file_stream: str = "bad_files",
        nullable: Sequence[str] = (),
        session: SessionConfig | None = None,
        stream: str = "default",
    ) -> None:
        if not isinstance(source, SparkSource):
            raise SparkConfigError(
                f"source must be a SparkSource (SparkSource.files/table/sql/dataframe), got "
                f"{type(source).__name__}"
            )
        if not isinstance(offset_column, str) or not offset_column:
            raise SparkConfigError(f"offset_column must be a column name, got {offset_column!r}")
        if (
            isinstance(fields, str)
            or not fields
            or not all(isinstance(f, str) and f for f in fields)
        ):
            raise SparkConfigError(
                f"fields must be a non-empty list of column names to emit, got {fields!r}"
            )
        if len(set(fields)) != len(fields):
            raise SparkConfigError(f"fields has duplicates: {list(fields)!r}")
        if not isinstance(first_poll, FirstPollStrategy):
            raise SparkConfigError(f"first_poll must be a FirstPollStrategy, got {first_poll!r}")
        if not isinstance(guarantee, ProcessingGuarantee):
            raise SparkConfigError(f"guarantee must be a ProcessingGuarantee, got {guarantee!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise SparkConfigError(f"retry must be a RetryPolicy, got {retry!r}")
        if dead_letter is not None and not isinstance(dead_letter, SinkTarget):
            raise SparkConfigError(f"dead_letter must be a SinkTarget, got {dead_letter!r}")
        if not isinstance(bad_files, BadFilePolicy):
            raise SparkConfigError(f"bad_files must be a BadFilePolicy, got {bad_files!r}")
        if bad_files is BadFilePolicy.SKIP:
            if source.kind != "files":
                raise SparkConfigError(
                    f"bad_files=BadFilePolicy.SKIP leaves files out of a files source; "
                    f"{source.describe()} is not one (use SparkSource.files)"
                )
            if not isinstance(bad_file_stream, str) or not bad_file_stream:
                raise SparkConfigError(
                    f"bad_file_stream must be a stream name, got {bad_file_stream!r}"
                )
            if bad_file_stream == stream:
                raise SparkConfigError(
                    f"bad_file_stream {bad_file_stream!r} is the stream of the rows; give "
                    f"the bad-file records a stream of their own"
                )
        if isinstance(nullable, str) or not all(f in fields for f in nullable):
            raise SparkConfigError(
                f"nullable must list emitted fields (of {list(fields)}), got {nullable!r}"
            )
        self.source = source
        self.offset_column = offset_column
        self.fields = tuple(fields)
        self.checkpoint_dir = os.fspath(checkpoint_dir)
        self.chunk_rows = _positive_int("chunk_rows", chunk_rows)
        self.prefetch_chunks = _positive_int("prefetch_chunks", prefetch_chunks)
        self.first_poll = first_poll
        self.guarantee = guarantee
        self.retry = retry or RetryPolicy()
        self.max_uncommitted_offsets = _positive_int(
            "max_uncommitted_offsets",
            4 * self.chunk_rows if max_uncommitted_offsets is None else max_uncommitted_offsets,
        )
        self.commit_interval_secs = _positive_secs("commit_interval_secs", commit_interval_secs)
        self.bounded = bool(bounded)
        self.poll_interval_secs = _positive_secs("poll_interval_secs", poll_interval_secs)
        self.dead_letter = dead_letter
        self.bad_files = bad_files
        self.bad_file_stream = bad_file_stream
        self.nullable = tuple(nullable)
        self.session = session or SessionConfig()
        self.stream = stream

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(self.stream, list(self.fields))
        if self.bad_files is BadFilePolicy.SKIP:
            declarer.declare_stream(self.bad_file_stream, list(BAD_FILE_FIELDS))

    # --- life cycle -----------------------------------------------------------------------
    async def open(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        self._collector = collector
        self._emit = collector.emit
        self._emit_batch = collector.emit_batch
        self._component = context.get_this_component_id()
        self._partition = context.get_this_task_index()
        self._partitions = len(context.get_component_tasks(self._component))
        self._describe = self.source.describe()
        self._tracked = self.guarantee is ProcessingGuarantee.AT_LEAST_ONCE
        self._now_ns: Callable[[], int] = (context.clock or SystemClock()).now_ns
        self._run = run_id(conf, context)
        self._checkpoint: SharedCheckpoint = shared_checkpoint(self.checkpoint_dir)
        self._guard = FileGuard(
            self.source,
            self.bad_files,
            [*(f for f in self.fields if f not in self.nullable), self.offset_column],
            f"spout {self._component!r}",
        )
        #: bad-file records emitted and not yet acked: message id -> values
        self._bad_inflight: dict[Any, list[str]] = {}
        # Everything that can be checked before running is checked here, so a missing
        # column or a corrupt checkpoint fails the topology's start with a clear error.
        spark, committed = await asyncio.to_thread(self._open_blocking)
        own_commit = self._checkpoint.run_of(self._partition) == self._run
        self._spark = spark
        self._last_commit = committed
        # False while the file holds an earlier run's commit: the first commit of this run
        # is then written even if it names the same offset, to record the run.
        self._own_commit = own_commit
        self._tracker = PositionTracker()  # its start: chosen by the reader (_position)
        self._done = self._tracker.done
        self._done_all = self._tracker.done_all
        self._batch: Batch | None = None
        self._retries = RetrySchedule(self.retry)
        self._retry_heap = self._retries.heap  # truthy while retries wait (cheap to test)
        self._fails = self._retries.fails
        self._max_pending: int | None = conf.get("topology.max.spout.pending")
        self._pending_count = collector.pending_count
        self._dead: list[tuple[int, Any, int]] = []  # (position, row, fails) not yet written
        self._dead_writing: concurrent.futures.Future[None] | None = None
        self._dead_batch: list[tuple[int, Any, int]] = []
        self._commit_future: concurrent.futures.Future[None] | None = None
        self._io = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"squall-{self._component}-{self._partition}-io"
        )
        self._finished = False
        self._failure: BaseException | None = None
        self._since_check = 0
        self._next_commit_ns = self._now_ns() + int(self.commit_interval_secs * 1e9)
        self.dropped = 0
        self.retried = 0
        #: exactly-once bookkeeping, kept from the first ``rewind`` on (None before): where
        #: this run started, the start of the pass being emitted, the offsets of that pass
        #: emitted so far, and offsets the pass being read again leaves out
        self._run_start: int | None = None
        self._pass_lo: int | None = None
        self._pass_emitted: KeyRanges | None = None
        self._skip: KeyRanges | None = None
        self._emitted_any = False
        #: a rewind replaces the reader; the one it replaced may still be choosing its start
        #: on its thread, and must then leave this object alone
        self._generation = 0
        self._generation_lock = threading.Lock()
        # The source was loaded just now (_check_source): the first pass reads it as it is.
        self._reader = self._make_reader(
            spark, lambda latest: self._position(committed, latest), loaded=True
        )
        self._queue = self._reader.out
        self._reader.start()
        register_task_metrics(
            context,
            self,
            {
                "spark_io.committed_offset": lambda spout: spout._last_commit,
                "spark_io.rows_read": lambda spout: spout._reader.rows_read,
                "spark_io.retried": lambda spout: spout.retried,
                "spark_io.dropped": lambda spout: spout.dropped,
                "spark_io.bad_files": lambda spout: len(spout._guard.excluded),
            },
        )

    def _position(self, committed: int | None, latest: Callable[[], int | None]) -> int:
        """Where to start (called once by the reader; ``latest()`` queries the source's
        highest offset, which only the ``LATEST`` strategies need). The start is committed
        at once as this run's: a re-open in this run resumes there even before the first
        rows are acked, so a ``LATEST`` task that restarts does not skip what arrived
        meanwhile."""
        generation = self._generation
        own = self._own_commit
        high = (
            latest()
            if needs_latest(self.first_poll, committed, committed_by_this_run=own)
            else None
        )
        found = first_position(self.first_poll, committed, 0, high, committed_by_this_run=own)
        pos = 0 if found is None else found
        with self._generation_lock:
            if generation != self._generation:
                return pos  # replaced by a rewind meanwhile: its reader is stopping
            if not (own and pos == committed):
                self._checkpoint.commit(self._partition, pos, self._run)
                self._last_commit = pos
                self._own_commit = True
            self._tracker.rebase(pos)
            self._run_start = self._pass_lo = pos
        return pos

    def _make_reader(
        self,
        spark: Any,
        start: Callable[[Callable[[], int | None]], int],
        *,
        loaded: bool = False,
    ) -> StreamReader:
        """The background reader of this task's partition; ``start(latest)`` chooses the
        first offset; ``loaded``: the guard holds the source as just loaded."""
        return StreamReader(
            spark,
            self._guard,
            self.offset_column,
            self.fields,
            chunk_rows=self.chunk_rows,
            partitions=self._partitions,
            partition=self._partition,
            start=start,
            bounded=self.bounded,
            poll_interval_secs=self.poll_interval_secs,
            queue_batches=max(2, self.prefetch_chunks * self.chunk_rows // _SPARK_BATCH_ROWS),
            name=f"squall-{self._component}-{self._partition}-reader",
            loaded=loaded,
        )

    def _open_blocking(self) -> tuple[Any, int | None]:
        spark = self._spark_session()
        self._check_source(spark)
        committed = self._checkpoint.open(
            self._describe, self.offset_column, self._partitions, self.chunk_rows, self._partition
        )
        if self.dead_letter is not None:
            self.dead_letter.check_writable()
        return spark, committed

    def _spark_session(self) -> Any:
        return self.session.get_or_create()

    def _check_source(self, spark: Any) -> None:
        df = self._guard.load(spark)
        if df is None:
            return  # every file was bad (and skipped): nothing to check, nothing to read
        try:
            schema = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        except Exception as exc:
            if not is_spark_error(exc):
                raise
            raise map_spark_error(
                exc, f"reading the schema of {self._describe}", SourceError
            ) from exc
        if self.offset_column not in schema:
            raise OffsetColumnError(
                f"{self._describe} has no offset column {self.offset_column!r}; its columns are "
                f"{sorted(schema)}"
            )
        kind = schema[self.offset_column]
        if kind not in _INTEGRAL:
            raise OffsetColumnError(
                f"{self._describe}: offset column {self.offset_column!r} has type {kind}; "
                f"offsets must be integers ({', '.join(_INTEGRAL)})"
            )
        missing = [f for f in self.fields if f not in schema]
        if missing:
            raise SourceError(
                f"{self._describe} has no column(s) {missing} to emit; its columns are "
                f"{sorted(schema)}"
            )

    def close(self) -> None:
        reader = getattr(self, "_reader", None)
        if reader is None:
            return  # open() failed
        reader.stop()
        try:
            self._wait_io()
            self._commit(sync=True)
        finally:
            self._io.shutdown(wait=True)

    # --- emitting ---------------------------------------------------------------------------
    def next_tuple(self) -> None:
        if self._retry_heap:
            position = self._retries.pop_due(self._now_ns())
            if position is not None:
                self._replay(position)
                return
        batch = self._batch
        if batch is None:
            batch = self._take_batch()
            if batch is None:
                self._idle()
                return
        # One slice of the batch per call: its columns stay Arrow, each row is its own tree
        # with its position as message id. The slice never takes the spout past
        # topology.max.spout.pending.
        i = batch.emitted
        n = min(batch.size - i, _SLICE_ROWS)
        tracker = self._tracker
        if self._tracked:
            room = self.max_uncommitted_offsets - tracker.inflight
            if room <= 0:
                self._idle()  # paused: too much is waiting for acks
                return
            n = min(n, room)
            if self._max_pending is not None:
                n = min(n, max(self._max_pending - self._pending_count(), 1))
        end = i + n
        columns = batch.column_slice(i, end)
        if self._pass_emitted is not None:
            self._emitted_any = True
            self._pass_emitted.add(*key_ranges(np.sort(batch.offsets[i:end])))
        if self._tracked:
            lo = batch.lo
            self._emit_batch(columns, list(range(lo + i, lo + end)), self.stream)
            tracker.emitted(n)
        else:
            self._emit_batch(columns, None, self.stream)
            tracker.emitted(n)
            tracker.done_all(range(batch.lo + i, batch.lo + end))  # untracked: done when out
        batch.emitted = end
        if end == batch.size:
            self._batch = None
        self._since_check += n
        if self._since_check >= _COMMIT_CHECK_ROWS:
            self._since_check = 0
            self._maybe_commit()

    def _take_batch(self) -> Batch | None:
        if self._guard.found:
            self._emit_bad_file(*self._guard.found.popleft())
            return None
        if self._finished:
            return None
        tracker = self._tracker
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is END:
            self._finished = True
            return None
        if isinstance(item, PassEnd):
            tracker.end_pass(item.hi)
            if self._pass_emitted is not None:
                # every row of the pass was emitted: the next pass starts clean
                self._pass_lo, self._pass_emitted, self._skip = item.hi, KeyRanges(), None
            return None
        if isinstance(item, ReaderFailure):
            self._fail_reading(item.error)
            return None
        if self._skip is not None:
            item = self._left_out(item)
        batch: Batch = tracker.add(item)
        if self.guarantee is ProcessingGuarantee.AT_MOST_ONCE:
            # Commit past every offset read before any of this batch is emitted: a crash
            # loses rows, never repeats one.
            try:
                self._checkpoint.commit(self._partition, tracker.read_max(), self._run)
            except CheckpointError as exc:
                tracker.done_all(range(batch.lo, batch.lo + batch.size))
                batch.emitted = batch.size  # not committed: never emitted
                self._fail_reading(exc)
                return None
            self._last_commit = tracker.read_max()
            self._own_commit = True
        if batch.size == 0:
            return None
        self._batch = batch
        return batch

    def _fail_reading(self, error: BaseException) -> None:
        """A fatal source error: report it and stop reading. What was emitted still
        completes; then ``is_exhausted`` raises the error, which ends the run."""
        self._finished = True
        self._failure = error
        self._collector.report_error(error)

    def _idle(self) -> None:
        dead = self._dead_writing
        if dead is not None and dead.done():
            self._dead_written(dead)
        elif dead is None and self._dead:
            self._write_dead_letters()
        self._maybe_commit()

    def _emit_bad_file(self, path: str, what: str) -> None:
        """One record on the bad-file stream (SKIP): tracked, so a failure downstream
        re-emits it as the retry policy says."""
        values = [path, what]
        log.warning(
            "spout %r: skipping file %r of %s: it %s", self._component, path, self._describe, what
        )
        if not self._tracked:
            self._emit(values, self.bad_file_stream)
            return
        key = (_BAD_FILE, path)
        self._bad_inflight[key] = values
        self._emit(values, self.bad_file_stream, key)

    def _replay(self, position: Any) -> None:
        record = self._bad_inflight.get(position) if self._bad_inflight else None
        self.retried += 1
        if record is not None:
            self._emit(record, self.bad_file_stream, position)
            return
        self._emit(self._tracker.batch_of(position).row(position), self.stream, position)

    # --- acking -----------------------------------------------------------------------------
    def ack(self, msg_id: Any) -> None:
        if self._bad_inflight and self._bad_inflight.pop(msg_id, None) is not None:
            pass  # a bad-file record, not a row
        else:
            self._done(msg_id)
        if self._fails:
            self._fails.pop(msg_id, None)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        """Many acks at once (the engine calls this instead of ``ack`` per row)."""
        fails = self._fails
        if fails:
            for key in fails.keys() & msg_ids:
                del fails[key]
        if self._bad_inflight:
            inflight = self._bad_inflight
            for key in inflight.keys() & msg_ids:
                del inflight[key]
            msg_ids = [m for m in msg_ids if type(m) is not tuple]
        self._done_all(msg_ids)

    def fail(self, msg_id: Any) -> None:
        if self._retries.fail(msg_id, self._now_ns()):
            return
        fails = self._retries.fails.pop(msg_id)
        self.dropped += 1
        record = self._bad_inflight.pop(msg_id, None) if self._bad_inflight else None
        if record is not None:
            self._collector.report_error(
                f"spout {self._component!r}: dropped the record of the bad file {record[0]!r} "
                f"after {fails} failures (max_retries={self.retry.max_retries})"
            )
            return
        batch = self._tracker.batch_of(msg_id)
        offset = batch.offset(msg_id)
        where = (
            f"; writing it to the dead-letter sink {self.dead_letter.describe()}"
            if self.dead_letter is not None
            else ""
        )
        self._collector.report_error(
            f"spout {self._component!r}: dropped offset {offset} of {self._describe} after "
            f"{fails} failures (max_retries={self.retry.max_retries}){where}"
        )
        if self.dead_letter is None:
            self._tracker.done(msg_id)
        else:
            # Done only once the dead letter is durable, so the commit cannot pass it first.
            self._dead.append((msg_id, batch.row(msg_id), fails))

    # --- dead letters -------------------------------------------------------------------------
    def _write_dead_letters(self) -> None:
        assert self.dead_letter is not None
        batch, self._dead = self._dead, []
        self._dead_batch = batch
        tracker = self._tracker
        columns = {
            **{f: [row[i] for _, row, _ in batch] for i, f in enumerate(self.fields)},
            "squall_offset": [tracker.batch_of(p).offset(p) for p, _, _ in batch],
            "squall_failures": [fails for _, _, fails in batch],
        }
        self._dead_writing = submit_io(
            self._io, self.dead_letter.write_columns, self._spark, columns
        )

    def _dead_written(self, future: concurrent.futures.Future[None]) -> None:
        self._dead_writing = None
        batch, self._dead_batch = self._dead_batch, []
        error = future.exception()
        if error is not None:
            self._collector.report_error(error)
            self._dead.extend(batch)  # try again later; the commit waits for them
            return
        for position, _, _ in batch:
            self._tracker.done(position)

    # --- committing ---------------------------------------------------------------------------
    def _maybe_commit(self) -> None:
        now = self._now_ns()
        if now >= self._next_commit_ns:
            self._next_commit_ns = now + int(self.commit_interval_secs * 1e9)
            self._commit(sync=False)

    def _commit_point(self) -> int | None:
        point = self._tracker.commit_point()
        # AT_MOST_ONCE committed past each batch before emitting it.
        return None if self.guarantee is ProcessingGuarantee.AT_MOST_ONCE else point

    def _commit(self, sync: bool) -> None:
        point = self._commit_point()
        if point is None:
            return
        failed = False
        previous = self._commit_future
        if previous is not None:
            if not previous.done():
                return  # the last commit is still being written; try again later
            self._commit_future = None
            error = previous.exception()
            if error is not None:
                self._collector.report_error(error)
                failed = True  # not written: write it again, even at the same point
        if point == self._last_commit and self._own_commit and not failed:
            return
        self._last_commit = point
        self._own_commit = True
        if sync:
            self._checkpoint.commit(self._partition, point, self._run)
        else:
            self._commit_future = submit_io(
                self._io, self._checkpoint.commit, self._partition, point, self._run
            )

    def _wait_io(self) -> None:
        for future in (self._commit_future, self._dead_writing):
            if future is not None:
                concurrent.futures.wait([future])
        if self._dead_writing is not None:
            self._dead_written(self._dead_writing)

    # --- positions (exactly-once state) ----------------------------------------------------
    def position(self) -> tuple[int, tuple[tuple[int, int], ...]] | None:
        """``(pass start, runs [lo, hi) of offsets of that pass emitted)``; None before the
        task knows where it starts (nothing was emitted yet: a rewind to None goes back to
        where this run started)."""
        if self._pass_lo is None:
            return None
        emitted = self._pass_emitted
        if emitted is None:  # not rewound yet: nothing emitted since this run started
            return (self._pass_lo, ())
        emitted._merge()
        return (
            self._pass_lo,
            tuple(zip(emitted.starts.tolist(), emitted.ends.tolist(), strict=True)),
        )

    def rewind(self, position: tuple[int, Sequence[tuple[int, int]]] | None) -> None:
        """Read again from ``position``: a new reader starts the pass at its start and
        leaves out the offsets it names; everything read, emitted or waiting since is
        forgotten (the checkpoint protocol ignores the answers about it)."""
        if position is None:
            if not self._emitted_any:
                self._pass_emitted = KeyRanges()  # from here on positions are kept
                return
            assert self._run_start is not None  # something was emitted: the start is known
            position = (self._run_start, ())
        lo, runs = position
        starts = np.array([a for a, _ in runs], np.int64)
        ends = np.array([b for _, b in runs], np.int64)
        skip = KeyRanges()
        skip.add(starts, ends)
        with self._generation_lock:
            self._generation += 1
            if self._run_start is None:
                self._run_start = lo
        old = self._reader
        old.stopping.set()
        # Stopping cancels Spark jobs and joins a thread: not on the event loop.
        threading.Thread(target=old.stop, name=f"{old.name}-stop", daemon=True).start()
        self._tracker = PositionTracker(lo)
        self._done = self._tracker.done
        self._done_all = self._tracker.done_all
        self._batch = None
        self._retries = RetrySchedule(self.retry)
        self._retry_heap = self._retries.heap
        self._fails = self._retries.fails
        self._bad_inflight.clear()
        self._dead.clear()
        self._finished = False
        self._failure = None
        self._pass_lo = lo
        self._pass_emitted = KeyRanges()
        self._pass_emitted.add(starts, ends)
        self._skip = skip if runs else None
        self._emitted_any = True
        self._reader = self._make_reader(self._spark, lambda _latest: lo)
        self._queue = self._reader.out
        self._reader.start()

    def _left_out(self, batch: Batch) -> Batch:
        """``batch`` without the offsets a rewind found emitted already (its positions stay
        where the reader numbered them)."""
        assert self._skip is not None
        old = self._skip.contains(batch.offsets)
        if not bool(old.any()):
            return batch
        keep = ~old
        import pyarrow as pa

        mask = pa.array(keep)
        columns = [c.filter(mask) if hasattr(c, "filter") else c for c in batch.columns]
        return Batch(batch.lo, batch.offsets[keep], columns)

    # --- completion ---------------------------------------------------------------------------
    def is_exhausted(self) -> bool:
        """True once every row is done; raises the error that stopped reading instead, so
        the run ends with it (``wait_until_complete`` raises it)."""
        if not hasattr(self, "_reader"):
            return False  # not open (yet): a restarted task whose open() has not finished
        if (
            not self._finished
            or self._batch is not None
            or self._retries
            or self._dead
            or self._guard.found
            or self._bad_inflight
        ):
            return False
        if self._dead_writing is not None:
            if not self._dead_writing.done():
                return False
            self._dead_written(self._dead_writing)
            return False
        tracker = self._tracker
        tracker.commit_point()
        if tracker.batches:
            return False  # rows emitted and not done yet
        if self._failure is not None:
            raise self._failure  # (the pass it cut short is never committed)
        return tracker.is_empty()

    @property
    def failure(self) -> BaseException | None:
        """The error that stopped reading, if any (it is also in the topology's errors)."""
        return getattr(self, "_failure", None)
