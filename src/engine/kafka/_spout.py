"""``KafkaSpout``: Storm's KafkaSpout on the confluent-kafka client.

Each spout task owns some partitions, dealt round-robin over the tasks from the sorted list
of the subscribed topics' partitions (Storm's ``RoundRobinManualPartitioner``): assigning by
hand avoids the consumer group's join, which costs many seconds on every start. A task
records which offsets it emitted and which are done per partition (``OffsetTracker``), and
commits to the consumer group only the contiguous done prefix.

The event loop is never blocked: the client fetches in its own threads, ``next_tuple`` only
takes what is already fetched (``consume`` with a zero timeout) and commits asynchronously;
everything that waits for the broker (metadata, committed offsets, watermarks, a commit
that must finish before emitting) runs on the task's I/O thread.

A message id is an int that packs the offset with the partition's slot in the task:
``offset << SLOT_BITS | slot``. Within one partition ids grow with offsets, so the tracker
walks them directly, and one set of done ids serves every partition of the task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._model.offsets import (
    Chunk,
    FirstPollOffsetStrategy,
    OffsetTracker,
    ProcessingGuarantee,
    RetrySchedule,
    first_position,
)
from .._time.clock import SystemClock
from ..state import RewindableSpout
from ._config import KafkaSpoutConfig
from ._errors import KafkaConfigError, KafkaIOError, missing_client
from ._tasks import take_over_task
from ._translator import KafkaTuple

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

    from .._execution.collector import SpoutOutputCollector
    from .._model.component import OutputFieldsDeclarer
    from .._model.context import TopologyContext

__all__ = ["SLOT_BITS", "KafkaSpout", "assign_round_robin"]

logger = logging.getLogger("engine.kafka")

#: Bits of a message id that hold the partition's slot in its task.
SLOT_BITS = 20
_SLOT_MASK = (1 << SLOT_BITS) - 1
#: Seconds the I/O thread waits for a broker request.
REQUEST_TIMEOUT_SECS = 10.0
#: Seconds at least between two new clients made after fatal errors (one that fails at
#: once, a configuration the broker fences, is not made again at every ``next_tuple``).
RENEW_CLIENT_SECS = 10.0

#: Commits made by a run of a topology, in this process: (storm id, group, topic,
#: partition). A commit's metadata would say which run made it, but not every broker keeps
#: commit metadata; a task re-opened in the same run (a crash restart, a rebalance) runs in
#: this process, so this is where it looks.
_COMMITTED_BY_RUN: set[tuple[str, str, str, int]] = set()
_COMMITTED_LOCK = threading.Lock()

#: Which task of a run holds each partition, in this process: (storm id, group, topic,
#: partition) -> task index. When new partitions re-deal the list, a partition moves from
#: one task to another; its new owner waits until the old one committed and let it go, as
#: Storm's ``onPartitionsRevoked`` commits before a partition moves.
_OWNERS: dict[tuple[str, str, str, int], int] = {}
_OWNERS_CHANGED = threading.Condition()


def assign_round_robin(
    partitions: Sequence[tuple[str, int]], task_index: int, num_tasks: int
) -> list[tuple[str, int]]:
    """The partitions task ``task_index`` of ``num_tasks`` owns: the sorted list dealt
    round-robin (Storm's ``RoundRobinManualPartitioner``)."""
    return sorted(partitions)[task_index::num_tasks]


class _Partition:
    """One assigned partition: its tracker, what is read but not emitted, its commit."""

    __slots__ = ("committed", "key", "paused", "position", "slot", "start", "todo", "tracker")

    def __init__(self, key: tuple[str, int], slot: int, start: int, done: set[int]) -> None:
        self.key = key
        self.slot = slot
        #: where this task began reading it
        self.start = start
        #: the next offset expected from the client
        self.position = start
        #: the last offset committed (or to be committed: commits are asynchronous)
        self.committed = start
        self.tracker = OffsetTracker(start << SLOT_BITS | slot, done)
        #: chunks with rows not emitted yet, oldest first
        self.todo: deque[_KafkaChunk] = deque()
        self.paused = False

    def encode(self, offset: int) -> int:
        return offset << SLOT_BITS | self.slot


class _KafkaChunk(Chunk):
    """A chunk whose rows may go to several streams (``streams`` per row, or None: all on
    the main stream), and which may have to wait for a commit before it is emitted."""

    __slots__ = ("ready", "streams")

    def __init__(self, *args: Any, streams: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.streams = streams
        self.ready = True


class KafkaSpout(RewindableSpout):
    """Reads Kafka topics with Storm's KafkaSpout guarantees.

    >>> from engine import TopologyBuilder
    >>> from engine.kafka import KafkaSpout, KafkaSpoutConfig
    >>> spout = KafkaSpout(KafkaSpoutConfig("127.0.0.1:9092", ["page-views"]))
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("views", spout, 2)   # two tasks share the partitions

    ``consumer_factory(props)`` makes the client's consumer (Storm's
    ``KafkaConsumerFactory``): tests pass one that builds an in-memory stand-in.

    It is a ``RewindableSpout``: its position is the next offset to emit per partition, so
    feeding a stateful bolt makes that bolt's state exactly-once (``engine.state``).
    """

    def __init__(
        self,
        config: KafkaSpoutConfig,
        *,
        consumer_factory: Callable[[dict[str, Any]], Consumer] | None = None,
    ) -> None:
        if not isinstance(config, KafkaSpoutConfig):
            raise KafkaConfigError(f"KafkaSpout: config must be a KafkaSpoutConfig, got {config!r}")
        self.config = config
        self.consumer_factory = consumer_factory

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        translator = self.config.record_translator
        for stream, fields in translator.streams.items():
            declarer.declare_stream(stream, list(fields))
        if self.config.retry_exhausted_stream is not None:
            declarer.declare_stream(self.config.retry_exhausted_stream, list(translator.fields))

    # --- life cycle -----------------------------------------------------------------------
    async def open(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: SpoutOutputCollector
    ) -> None:
        config = self.config
        self._collector = collector
        self._emit = collector.emit
        self._emit_batch = collector.emit_batch
        self._pending_count = collector.pending_count
        self._component = context.get_this_component_id()
        self._task_index = context.get_this_task_index()
        self._num_tasks = len(context.get_component_tasks(self._component))
        self._run = context.get_storm_id() or f"{id(context.clock)}"
        name = conf.get("topology.name") or "topology"
        self._group = config.group_id or f"squall-{name}-{self._component}"
        self._take_over_task()
        self._now_ns: Callable[[], int] = (context.clock or SystemClock()).now_ns
        self._guarantee = config.processing_guarantee
        self._tracked = self._guarantee is ProcessingGuarantee.AT_LEAST_ONCE
        self._translator = config.record_translator
        self._main_stream = self._translator.stream
        self._max_pending: int | None = conf.get("topology.max.spout.pending")
        self._done: set[int] = set()
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._by_slot: dict[int, _Partition] = {}
        #: the partitions in the order ``next_tuple`` visits them
        self._order: list[_Partition] = []
        self._paused = False
        self._loop_thread = threading.get_ident()
        self._next_slot = 0
        self._cursor = 0
        self._retries = RetrySchedule(config.retry)
        self._retry_heap = self._retries.heap
        self._fails = self._retries.fails
        #: message ids given up on and sent to ``retry_exhausted_stream``, not yet acked
        self._exhausted_ids: set[int] = set()
        #: a partition was let go (or every one, by a rewind): acks of its tuples still in
        #: flight may come, for the commit rounds to drop
        self._let_go = False
        self._commit_period_ns = int(config.commit_period_secs * 1e9)
        self._refresh_period_ns = int(config.partition_refresh_period_ms * 1e6)
        now = self._now_ns()
        #: periodic commit rounds run (tests wait for a few to see what does not change)
        self.commit_rounds = 0
        self._next_commit_ns = now + self._commit_period_ns
        self._next_refresh_ns = now + self._refresh_period_ns
        self._next_due_ns = min(self._next_commit_ns, self._next_refresh_ns)
        self._refreshing: asyncio.Future[Any] | None = None
        #: revokes submitted and not done (their partitions may still be assigned)
        self._revoking = 0
        #: the partitions this object claimed and has not released (read and written on
        #: the I/O thread only): a refresh may have claimed some not installed yet
        self._claimed: set[tuple[str, int]] = set()
        self._io = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"squall-{self._component}-{self._task_index}-kafka"
        )
        #: records retried, given up on (past max_retries), and commit errors seen
        self.retried = 0
        self.exhausted = 0
        self.emitted = 0
        self._errors: list[Any] = []
        #: the client's fatal error, until a new client replaces it; when one may be made
        self._fatal: KafkaError | None = None
        self._renew_ns = now
        try:
            from confluent_kafka import TopicPartition
        except ImportError as exc:
            raise missing_client(exc) from exc
        self._topic_partition = TopicPartition
        self._consumer: Consumer | None = None
        opening = self._io.submit(self._open_blocking)
        try:
            # Waited for through the loop's executor, so that a virtual clock waits too
            # (the future itself is kept: a cancelled open closes what it made).
            await asyncio.get_running_loop().run_in_executor(
                None, concurrent.futures.wait, [opening]
            )
            consumer, starts, _ = opening.result()
        except BaseException:
            # Cancelled (a kill while opening): the consumer the thread is making is closed
            # once it is made, not left connected.
            opening.add_done_callback(_close_opened)
            self._io.shutdown(wait=False)
            raise
        self._consumer = consumer
        # A crashed task is never closed: its consumer is closed when the task's next
        # object opens (``_take_over_task``), or else when this object goes.
        self._finalizer = weakref.finalize(self, _close_later, consumer, self._io)
        self._install(starts)

    def _take_over_task(self) -> None:
        """Become the open object of this task; close the consumer of a crashed one."""
        prior = take_over_task((self._run, self._component, self._task_index), self)
        finalizer = getattr(prior, "_finalizer", None)
        if finalizer is not None:
            finalizer()  # closes its consumer (once), off the loop

    def _open_consumer(self) -> Consumer:
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError(
                f"spout {self._component!r}: its consumer is closed (the spout was closed, or "
                f"its open failed); it reads nothing more"
            )
        return consumer

    def _props(self) -> dict[str, Any]:
        config = self.config
        props: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": self._group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            # Offsets come from the spout's strategy; a position the broker no longer has
            # (deleted by retention) restarts at the earliest offset kept.
            "auto.offset.reset": "earliest",
            "logger": logger,
            # Weakly: the client holds its callbacks, and a spout it kept alive (a crashed
            # task's, never closed) could never be collected and its client closed.
            "on_commit": _weakly(self._on_commit),
            "error_cb": _weakly(self._on_client_error),
        }
        props.update(config.consumer_props)
        return props

    def _make_consumer(self, props: dict[str, Any]) -> Consumer:
        if self.consumer_factory is not None:
            return self.consumer_factory(props)
        from confluent_kafka import Consumer

        return Consumer(props)

    def _open_blocking(
        self,
    ) -> tuple[Consumer, dict[tuple[str, int], int], list[tuple[str, int]]]:
        consumer = self._make_consumer(self._props())
        try:
            mine = assign_round_robin(
                self._list_partitions(consumer), self._task_index, self._num_tasks
            )
            self._claim(mine)
            starts = self._resolve_starts(consumer, mine)
            consumer.assign(
                [self._topic_partition(t, p, starts[(t, p)]) for t, p in sorted(starts)]
            )
        except BaseException:
            consumer.close()
            raise
        return consumer, starts, mine

    def _list_partitions(self, consumer: Consumer) -> list[tuple[str, int]]:
        """Every partition of the subscribed topics that exists now. Topics are listed all
        at once: asking the broker for one by name may create it."""
        try:
            metadata = consumer.list_topics(timeout=REQUEST_TIMEOUT_SECS)
        except Exception as exc:
            raise self._io_error("listing the topics", exc) from exc
        topics = self.config.topics
        if isinstance(topics, re.Pattern):
            wanted = [t for t in metadata.topics if topics.fullmatch(t)]
        else:
            wanted = [t for t in topics if t in metadata.topics]
        return [(t, p) for t in wanted for p in metadata.topics[t].partitions]

    def _resolve_starts(
        self, consumer: Consumer, mine: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        """Where each partition starts (the first-poll strategy; this run's commit wins),
        committed at once as this run's: a task that re-opens in this run resumes there
        even before its first records are acked, so a ``LATEST`` task does not skip what
        arrived meanwhile."""
        if not mine:
            return {}
        tp = self._topic_partition
        try:
            committed = {
                (c.topic, c.partition): (c.offset if c.offset >= 0 else None)
                for c in consumer.committed(
                    [tp(t, p) for t, p in mine], timeout=REQUEST_TIMEOUT_SECS
                )
            }
        except Exception as exc:
            raise self._io_error("reading the committed offsets", exc) from exc
        strategy = self.config.first_poll_offset_strategy
        latest_first = strategy in (
            FirstPollOffsetStrategy.LATEST,
            FirstPollOffsetStrategy.UNCOMMITTED_LATEST,
        )
        starts: dict[tuple[str, int], int] = {}
        need_end: list[tuple[str, int]] = []
        bounds: dict[tuple[str, int], tuple[int, int]] = {}
        for key in mine:
            own = self._committed_by_this_run(key)
            at = committed[key]
            if at is not None and (own or not _ignores_commit(strategy)):
                starts[key] = at
                continue
            try:
                bounds[key] = consumer.get_watermark_offsets(tp(*key), timeout=REQUEST_TIMEOUT_SECS)
            except Exception as exc:
                raise self._io_error(f"reading the offsets of {key[0]}[{key[1]}]", exc) from exc
            if latest_first:
                need_end.append(key)
        ends = self._true_ends(need_end, bounds)
        for key, (low, high) in bounds.items():
            if key in starts:
                continue
            end = ends.get(key, high)
            latest = end - 1 if end > low else None
            pos = first_position(strategy, committed[key], low if high > low else None, latest)
            starts[key] = low if pos is None else pos
        self._commit_blocking(consumer, starts)
        return starts

    def _true_ends(
        self, keys: Sequence[tuple[str, int]], bounds: Mapping[tuple[str, int], tuple[int, int]]
    ) -> dict[tuple[str, int], int]:
        """The offset after each partition's last record. Some brokers answer "latest
        offset" with the start of the last record batch + 1, short of the real end when a
        producer packed several records into that batch; reading from there to the end of
        the partition finds where it really ends."""
        probe_keys = [k for k in keys if bounds[k][1] > bounds[k][0]]
        ends = {k: bounds[k][1] for k in keys}
        if not probe_keys:
            return ends
        # Without the spout's callbacks: the probe's commits and fatal errors are not the
        # spout's client's (its errors go to the client's log).
        props = {k: v for k, v in self._props().items() if k not in ("on_commit", "error_cb")}
        probe = self._make_consumer({**props, "enable.partition.eof": True})
        try:
            tp = self._topic_partition
            probe.assign([tp(t, p, max(bounds[(t, p)][1] - 1, 0)) for t, p in probe_keys])
            waiting = set(probe_keys)
            deadline = REQUEST_TIMEOUT_SECS
            stop = time.monotonic() + deadline
            while waiting and time.monotonic() < stop:
                for msg in probe.consume(1000, 0.1):
                    key = _where(msg)
                    error, offset = msg.error(), msg.offset()
                    if error is None:
                        if offset is not None:
                            ends[key] = max(ends[key], offset + 1)
                    elif error.code() == _partition_eof_code():
                        waiting.discard(key)
            if waiting:
                raise KafkaIOError(
                    f"spout {self._component!r}: could not read to the end of "
                    f"{sorted(waiting)} within {deadline:g} s to find the latest offset"
                )
        finally:
            probe.close()
        return ends

    def _committed_by_this_run(self, key: tuple[str, int]) -> bool:
        with _COMMITTED_LOCK:
            return (self._run, self._group, *key) in _COMMITTED_BY_RUN

    def _mark_committed(self, keys: Iterable[tuple[str, int]]) -> None:
        with _COMMITTED_LOCK:
            for key in keys:
                _COMMITTED_BY_RUN.add((self._run, self._group, *key))

    def _metadata(self) -> str:
        return json.dumps({"topology_id": self._run, "task": self._task_index})

    def _commit_blocking(self, consumer: Consumer, offsets: Mapping[tuple[str, int], int]) -> None:
        if not offsets:
            return
        tp = self._topic_partition
        meta = self._metadata()
        try:
            consumer.commit(
                offsets=[tp(t, p, o, metadata=meta) for (t, p), o in sorted(offsets.items())],
                asynchronous=False,
            )
        except Exception as exc:
            raise self._io_error("committing offsets", exc) from exc
        self._mark_committed(offsets)

    def _io_error(self, doing: str, exc: BaseException) -> KafkaIOError:
        return KafkaIOError(
            f"spout {self._component!r} (task {self._task_index}): {doing} on "
            f"{self.config.bootstrap_servers} ({self.config.describe_topics()}) failed: {exc}"
        )

    def _install(self, starts: Mapping[tuple[str, int], int]) -> None:
        for key, start in sorted(starts.items()):
            if self._next_slot > _SLOT_MASK:  # pragma: no cover - a million reassignments
                raise KafkaIOError(f"spout {self._component!r}: out of partition slots")
            part = _Partition(key, self._next_slot, start, self._done)
            self._next_slot += 1
            self._partitions[key] = part
            self._by_slot[part.slot] = part
        self._order = list(self._partitions.values())

    async def close(self) -> None:
        consumer: Consumer | None = getattr(self, "_consumer", None)
        if consumer is None:
            return  # open() failed
        offsets = self._commit_offsets()
        self._consumer = None
        self._finalizer.detach()
        keys = list(self._partitions)
        loop = asyncio.get_running_loop()

        def finish() -> None:
            # The I/O executor has one thread: a refresh in flight has finished by now,
            # and what it claimed is let go with the rest (were it kept, a task the
            # partitions go to would wait for them, then read them with a warning).
            try:
                self._commit_blocking(consumer, offsets)
            finally:
                self._release([*keys, *self._claimed])
                consumer.close()

        try:
            await loop.run_in_executor(self._io, finish)
        finally:
            self._io.shutdown(wait=False)

    def deactivate(self) -> None:
        """Commit what is done now (Storm's deactivate does): the periodic commit runs in
        ``next_tuple``, which is not called until the topology is activated again."""
        if getattr(self, "_consumer", None) is not None:
            self._commit_async()

    # --- emitting ---------------------------------------------------------------------------
    def next_tuple(self) -> None:
        now = self._now_ns()
        if now >= self._next_due_ns or self._paused or self._refreshing is not None or self._errors:
            self._housekeeping(now)
        if self._retry_heap:
            msg_id = self._retries.pop_due(now)
            if msg_id is not None:
                self._replay(msg_id)
                return
        if self._fatal is None:  # else the client is unusable until it is made anew
            self._poll()
        parts = self._order
        n = len(parts)
        for i in range(n):
            part = parts[(self._cursor + i) % n]
            if part.todo and self._emit_from(part):
                self._cursor = (self._cursor + i + 1) % n
                return

    def _housekeeping(self, now: int) -> None:
        """Commits, paused partitions, partition refresh: looked at between emits."""
        while self._errors:
            self._collector.report_error(self._errors.pop(0))
        if self._fatal is not None and now >= self._renew_ns:
            self._renew_ns = now + int(RENEW_CLIENT_SECS * 1e9)
            self._renew_consumer()
        for part in self._order:
            if part.paused:
                self._check_pause(part)
        self._paused = any(part.paused for part in self._order)
        if now >= self._next_commit_ns:
            self._next_commit_ns = now + self._commit_period_ns
            self.commit_rounds += 1
            self._commit_async()
            if self._let_go:
                self._drop_let_go()
        if self._refreshing is not None:
            if self._refreshing.done():
                self._refreshed()
        elif now >= self._next_refresh_ns:
            self._next_refresh_ns = now + self._refresh_period_ns
            self._refreshing = self._submit(
                self._refresh_blocking, self._open_consumer(), sorted(self._partitions)
            )
        self._next_due_ns = min(self._next_commit_ns, self._next_refresh_ns)

    def _poll(self) -> None:
        """Take what the client fetched (never waits) and file it per partition."""
        msgs = self._open_consumer().consume(self.config.max_poll_records, 0)
        if not msgs:
            return
        parts = self._partitions
        # Until a revoke's unassign has run, the client may still hand over records of the
        # revoked partition: filed by partition, they are dropped.
        if len(parts) == 1 and not self._revoking:
            (key,) = parts
            self._add_chunk(parts[key], msgs)
            return
        grouped: dict[tuple[str | None, int | None], list[Message]] = {}
        for msg in msgs:
            where = (msg.topic(), msg.partition())
            group = grouped.get(where)
            if group is None:
                group = grouped[where] = []
            group.append(msg)
        failed: Exception | None = None
        for group in grouped.values():
            part = parts.get(_where(group[0]))
            if part is not None:  # else: revoked since it was fetched
                try:
                    self._add_chunk(part, group)
                except Exception as exc:  # the translator's: the other partitions go on
                    failed = failed or exc
        if failed is not None:
            raise failed

    def _add_chunk(self, part: _Partition, msgs: list[Message]) -> None:
        if any(m.error() is not None for m in msgs):
            for m in msgs:
                error = m.error()
                if error is not None:
                    self._on_client_error(error)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                return
        # A fetched record always has its offset (the stubs allow None for a record being
        # produced).
        offsets = cast("list[int]", [m.offset() for m in msgs])
        if offsets[0] < part.position:
            # Fetched again after a seek back: keep only what is new.
            msgs = [m for m, o in zip(msgs, offsets, strict=True) if o >= part.position]
            offsets = [o for o in offsets if o >= part.position]
            if not msgs:
                return
        slot = part.slot
        ids = [o << SLOT_BITS | slot for o in offsets]
        lo = part.position << SLOT_BITS | slot
        hi = (offsets[-1] + 1) << SLOT_BITS | slot
        translator = self._translator
        if translator.func is None:
            key = part.key
            n = len(msgs)
            columns = [
                [key[0]] * n,
                [key[1]] * n,
                offsets,
                [m.key() for m in msgs],
                [m.value() for m in msgs],
            ]
            chunk = _KafkaChunk(lo, hi, ids, columns=columns)
        else:
            try:
                chunk = self._translate(lo, hi, ids, msgs)
            except Exception:
                # The task goes on after the error: the client reads these records again
                # (a local request), rather than the next chunk's range covering them.
                self._open_consumer().seek(self._topic_partition(*part.key, part.position))
                raise
        part.position = offsets[-1] + 1
        part.tracker.add(chunk)
        if self._guarantee is ProcessingGuarantee.AT_MOST_ONCE:
            self._commit_before_emit(part, chunk)
        if chunk.size:
            part.todo.append(chunk)
        self._check_pause(part)

    def _translate(self, lo: int, hi: int, ids: list[int], msgs: list[Message]) -> _KafkaChunk:
        func = self._translator.func
        assert func is not None
        main = self._main_stream
        width = len(self._translator.fields)
        keep_ids: list[int] = []
        rows: list[Any] = []
        streams: list[str] | None = None
        for msg_id, msg in zip(ids, msgs, strict=True):
            values = func(msg)
            if values is None:
                if not self.config.emit_null_tuples:
                    continue  # not emitted: the commit walks past it
                values = [None] * width
            if isinstance(values, KafkaTuple):
                if values.stream != main and streams is None:
                    streams = [main] * len(rows)
                if streams is not None:
                    streams.append(values.stream)
                values = values.values
            elif streams is not None:
                streams.append(main)
            keep_ids.append(msg_id)
            rows.append(values)
        self._check_widths(rows, streams, keep_ids)
        return _KafkaChunk(lo, hi, keep_ids, rows, streams=streams)

    def _check_widths(self, rows: list[Any], streams: list[str] | None, ids: list[int]) -> None:
        """Every translated row has one value per field of its stream, which is declared:
        rows become columns, and a row of another length would fail there, unexplained."""
        declared = self._translator.streams
        for j, values in enumerate(rows):
            stream = self._main_stream if streams is None else streams[j]
            fields = declared.get(stream)
            if fields is not None and isinstance(values, Sequence) and len(values) == len(fields):
                continue
            part = self._by_slot[ids[j] & _SLOT_MASK].key
            where = f"{part[0]}[{part[1]}] offset {ids[j] >> SLOT_BITS}"
            if fields is None:
                raise KafkaConfigError(
                    f"spout {self._component!r}: the record translator sent {where} to stream "
                    f"{stream!r}, which it does not declare (streams: {sorted(declared)}); "
                    f"declare it in RecordTranslator(streams=...)"
                )
            raise KafkaConfigError(
                f"spout {self._component!r}: the record translator returned {values!r} for "
                f"{where} on stream {stream!r}, whose fields are {list(fields)}; return one "
                f"value per field (a list), a KafkaTuple or None"
            )

    def _emit_from(self, part: _Partition) -> bool:
        """Emit one slice of the partition's oldest chunk; False if it may not emit now."""
        chunk = part.todo[0]
        if not chunk.ready:
            return False
        room = chunk.size - chunk.emitted
        if room == 0:  # given up before it was emitted (an AT_MOST_ONCE commit failed)
            part.todo.popleft()
            part.tracker.drop_emitted()
            return False
        if self._tracked:
            room = min(room, self.config.max_uncommitted_offsets - self._uncommitted(part))
            if self._max_pending is not None:
                room = min(room, self._max_pending - self._pending_count())
        if room <= 0:
            return False
        i = chunk.emitted
        end = i + min(room, self.config.max_poll_records)
        ids = chunk.offsets[i:end] if self._tracked else None
        if chunk.streams is None:
            self._emit_batch(chunk.column_slice(i, end), ids, self._main_stream)
        else:
            self._emit_runs(chunk, i, end, ids)
        self.emitted += end - i
        chunk.emitted = end
        if end == chunk.size:
            part.todo.popleft()
        if not self._tracked:
            part.tracker.drop_emitted()
        return True

    def _emit_runs(self, chunk: _KafkaChunk, i: int, end: int, ids: Sequence[int] | None) -> None:
        """Rows ``i:end`` of a chunk whose rows go to several streams: each run of rows
        bound for one stream is one batch (``emit_batch``), so a record routed elsewhere now
        and then (a malformed line) does not turn the whole chunk into single emits."""
        rows, streams = chunk.rows, chunk.streams
        assert rows is not None and streams is not None
        a = i
        while a < end:
            stream = streams[a]
            b = a + 1
            while b < end and streams[b] == stream:
                b += 1
            columns = [list(c) for c in zip(*rows[a:b], strict=True)]
            self._emit_batch(columns, None if ids is None else ids[a - i : b - i], stream)
            a = b

    def _uncommitted(self, part: _Partition) -> int:
        """Emitted records of ``part`` past its done prefix."""
        part.tracker.commit_point()
        return part.tracker.uncommitted()

    def _check_pause(self, part: _Partition) -> None:
        """Stop fetching a partition whose emitted-but-undone records reached
        ``max_uncommitted_offsets`` or whose read-ahead is that large; fetch again once
        it has room (Storm pauses such partitions too)."""
        limit = self.config.max_uncommitted_offsets
        buffered = sum(c.size - c.emitted for c in part.todo)
        full = buffered >= limit or (self._tracked and self._uncommitted(part) >= limit)
        if full != part.paused:
            tp = self._topic_partition(*part.key)
            if full:
                self._open_consumer().pause([tp])
                self._paused = True
            else:
                self._open_consumer().resume([tp])
            part.paused = full

    def _replay(self, msg_id: int) -> None:
        part = self._by_slot.get(msg_id & _SLOT_MASK)
        chunk = part.tracker.chunk_of(msg_id) if part is not None else None
        if not isinstance(chunk, _KafkaChunk):
            return  # its partition was revoked meanwhile: the new owner reads it again
        i = chunk.index_of(msg_id)
        stream = self._main_stream if chunk.streams is None else chunk.streams[i]
        if msg_id in self._exhausted_ids:
            stream = self.config.retry_exhausted_stream or stream
        else:
            self.retried += 1
        self._emit(chunk.row_of(msg_id), stream, msg_id)

    # --- acking -----------------------------------------------------------------------------
    def ack(self, msg_id: Any) -> None:
        self._done.add(msg_id)
        if self._fails:
            self._fails.pop(msg_id, None)
        if self._exhausted_ids:
            self._exhausted_ids.discard(msg_id)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        """Many acks at once (the engine calls this instead of ``ack`` per row)."""
        self._done.update(msg_ids)
        fails = self._fails
        if fails:
            for msg_id in fails.keys() & msg_ids:
                del fails[msg_id]
        if self._exhausted_ids:
            self._exhausted_ids.difference_update(msg_ids)

    def fail(self, msg_id: Any) -> None:
        part = self._by_slot.get(msg_id & _SLOT_MASK)
        if part is None or part.key not in self._partitions:
            return  # revoked: the new owner reads it again from the commit
        now = self._now_ns()
        if msg_id in self._exhausted_ids:
            # Its tuple on the retry-exhausted stream failed: send it there again, after
            # the longest backoff, until it is acked.
            self._retries.retry_at(msg_id, now + int(self.config.retry.max_delay_secs * 1e9))
            return
        if self._retries.fail(msg_id, now):
            return
        fails = self._fails.pop(msg_id)
        self.exhausted += 1
        offset = msg_id >> SLOT_BITS
        stream = self.config.retry_exhausted_stream
        where = f"; sent to stream {stream!r}" if stream else "; acked and counted"
        self._collector.report_error(
            f"spout {self._component!r}: gave up on {part.key[0]}[{part.key[1]}] offset "
            f"{offset} after {fails} failures (max_retries={self.config.retry.max_retries})"
            f"{where}"
        )
        if stream is None:
            self._done.add(msg_id)
        else:
            self._exhausted_ids.add(msg_id)
            self._retries.retry_at(msg_id, now)

    # --- committing ---------------------------------------------------------------------------
    def _commit_offsets(self) -> dict[tuple[str, int], int]:
        """The offsets to commit now: per partition, the done prefix (or, without acking,
        what was emitted), where it moved."""
        offsets = {}
        for key, part in self._partitions.items():
            tracker = part.tracker
            if self._tracked:
                point = tracker.commit_point() >> SLOT_BITS
            elif self._guarantee is ProcessingGuarantee.NO_GUARANTEE:
                point = tracker.emitted_point() >> SLOT_BITS
            else:
                continue  # AT_MOST_ONCE committed each chunk before emitting it
            if point != part.committed:
                offsets[key] = part.committed = point
        return offsets

    def _commit_async(self) -> None:
        offsets = self._commit_offsets()
        if not offsets:
            return
        tp = self._topic_partition
        meta = self._metadata()
        try:
            self._open_consumer().commit(
                offsets=[tp(t, p, o, metadata=meta) for (t, p), o in sorted(offsets.items())],
                asynchronous=True,
            )
        except Exception as exc:  # the client refused it at once: try again next period
            self._collector.report_error(self._io_error("committing offsets", exc))
            for key in offsets:
                self._partitions[key].committed = -1
            return
        self._mark_committed(offsets)

    def _commit_before_emit(self, part: _Partition, chunk: _KafkaChunk) -> None:
        """AT_MOST_ONCE: the chunk's end is committed before any of it is emitted, so a
        crash loses it rather than repeats it."""
        chunk.ready = False
        offsets = {part.key: chunk.hi >> SLOT_BITS}
        future = self._submit(self._commit_blocking, self._open_consumer(), offsets)

        def committed(f: asyncio.Future[Any]) -> None:
            if f.cancelled():
                return  # the loop is closing: the chunk is never emitted
            if f.exception() is None:
                part.committed = chunk.hi >> SLOT_BITS
            else:
                self._errors.append(f.exception())
                chunk.emitted = chunk.size  # never emitted: it was not committed
            chunk.ready = True

        future.add_done_callback(committed)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The client's report of an asynchronous commit (called inside ``consume``; a
        synchronous commit on the I/O thread raises its error instead)."""
        if error is not None and threading.get_ident() == self._loop_thread:
            self._collector.report_error(
                f"spout {self._component!r}: committing offsets to "
                f"{self.config.bootstrap_servers} failed ({error}); the next period commits "
                f"again"
            )
            for p in partitions or ():
                part = self._partitions.get((p.topic, p.partition))
                if part is not None:
                    part.committed = -1  # unknown: commit again next period

    def _on_client_error(self, error: KafkaError) -> None:
        """The client's errors. A fatal one leaves the client unusable (every later request
        fails), so the spout would read nothing more: it is reported, and the next
        ``next_tuple`` makes a new client that reads on from where this one was (Storm's
        spout raises such an error, and its restarted worker makes a new consumer). Others
        (a broker down, which the client retries by itself) are logged."""
        if getattr(error, "fatal", lambda: False)():
            self._fatal = error
            self._errors.append(
                KafkaIOError(
                    f"spout {self._component!r} (task {self._task_index}): the Kafka client "
                    f"failed and is unusable ({error}); a new one reads on from the last "
                    f"offsets read"
                )
            )
        else:
            logger.warning("spout %r: %s", getattr(self, "_component", "?"), error)

    def _renew_consumer(self) -> None:
        """Replace a client that had a fatal error with a new one, assigned the task's
        partitions at the offsets read up to (both calls are local: no broker request). What
        was read stays, tracked as before; the old client's asynchronous commits may have
        died with it, so the next period commits again."""
        old = self._open_consumer()
        consumer = self._make_consumer(self._props())
        tp = self._topic_partition
        parts = sorted(self._partitions.items())
        consumer.assign([tp(*key, part.position) for key, part in parts])
        paused = [tp(*key) for key, part in parts if part.paused]
        if paused:
            consumer.pause(paused)
        for _, part in parts:
            part.committed = -1
        self._consumer = consumer
        self._fatal = None
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_later, consumer, self._io)
        # On the I/O thread, after the requests queued there (a client must not be closed
        # under one); those fail, and are reported, as the client was unusable anyway.
        self._io.submit(old.close)

    # --- partitions coming and going ------------------------------------------------------------
    def _refresh_blocking(self, consumer: Consumer, had: list[tuple[str, int]]) -> Any:
        """On the I/O thread: the partitions this task lets go and takes on now."""
        mine = assign_round_robin(
            self._list_partitions(consumer), self._task_index, self._num_tasks
        )
        added = [k for k in mine if k not in set(had)]
        revoked = [k for k in had if k not in set(mine)]
        return "listed", revoked, added

    def _take_blocking(self, consumer: Consumer, added: list[tuple[str, int]]) -> Any:
        """On the I/O thread: wait until the partitions' old owners let them go, then
        where they start."""
        self._claim(added)
        return "taken", self._resolve_starts(consumer, added)

    def _refreshed(self) -> None:
        future, self._refreshing = self._refreshing, None
        assert future is not None
        try:
            result = future.result()
        except KafkaIOError as exc:
            self._collector.report_error(exc)
            return
        tp = self._topic_partition
        consumer = self._open_consumer()
        if result[0] == "taken":
            starts = result[1]
            self._install(starts)
            assign = [tp(t, p, o) for (t, p), o in starts.items()]
            self._submit(consumer.incremental_assign, assign).add_done_callback(self._keep_error)
            return
        _, revoked, added = result
        if revoked:
            # Storm's onPartitionsRevoked: commit what is done before the partition moves
            # (and the rest too: the walk has marked it committed).
            offsets = self._commit_offsets()
            paused = [tp(*k) for k in revoked if self._partitions[k].paused]
            if paused:
                # The client would keep it paused were the partition dealt back to this task.
                consumer.resume(paused)
            for key in revoked:
                part = self._partitions.pop(key)
                self._by_slot.pop(part.slot, None)
            self._order = list(self._partitions.values())
            self._drop_let_go()

            def revoke() -> None:
                try:
                    consumer.incremental_unassign([tp(*k) for k in revoked])
                    self._commit_blocking(consumer, offsets)
                finally:
                    self._release(revoked)

            self._revoking += 1
            self._submit(revoke).add_done_callback(self._revoked)
        if added:
            # After the revoke on the same thread: two tasks trading partitions never wait
            # for each other.
            self._refreshing = self._submit(self._take_blocking, self._open_consumer(), added)

    def _drop_let_go(self) -> None:
        """Forget the acks, failure counts and given-up ids of partitions the task let go:
        no commit walk takes them out of the done set, no retry (skipped: the new owner
        reads the record again) out of the counts. Acks of its tuples still in flight come
        later, and ``ack_batch`` takes them at C speed as ever, unchecked: from the first
        partition let go on, every commit round drops them (one pass over the done set,
        just walked)."""
        live = self._by_slot
        self._let_go = True
        done = self._done
        done.difference_update([i for i in done if i & _SLOT_MASK not in live])
        for msg_id in [i for i in self._fails if i & _SLOT_MASK not in live]:
            del self._fails[msg_id]
        self._exhausted_ids.difference_update(
            [i for i in self._exhausted_ids if i & _SLOT_MASK not in live]
        )

    def _revoked(self, future: asyncio.Future[Any]) -> None:
        # A revoke that failed may have left its partitions assigned: the shortcut for one
        # partition stays off.
        if future.cancelled() or future.exception() is None:
            self._revoking -= 1
        self._keep_error(future)

    def _claim(self, keys: Sequence[tuple[str, int]]) -> None:
        """On the I/O thread: become the owner of ``keys``, once no other task of this run
        holds them (a crashed object of this task does not count: it is this task)."""
        if not keys:
            return
        names = [(self._run, self._group, *k) for k in keys]
        me = self._task_index
        limit = self.config.partition_refresh_period_ms / 1000 + REQUEST_TIMEOUT_SECS
        with _OWNERS_CHANGED:
            free = _OWNERS_CHANGED.wait_for(
                lambda: all(_OWNERS.get(n, me) == me for n in names), limit
            )
            if not free:
                held = [k for k, n in zip(keys, names, strict=True) if _OWNERS.get(n, me) != me]
                logger.warning(
                    "spout %r task %d: %s still held by another task after %g s; reading "
                    "them from their last commit (records after it may be read twice)",
                    self._component,
                    me,
                    held,
                    limit,
                )
            for n in names:
                _OWNERS[n] = me
        self._claimed.update(keys)

    def _release(self, keys: Sequence[tuple[str, int]]) -> None:
        """Let ``keys`` go (after their commit): a task waiting to take them goes on."""
        me = self._task_index
        self._claimed.difference_update(keys)
        with _OWNERS_CHANGED:
            for k in keys:
                name = (self._run, self._group, *k)
                if _OWNERS.get(name) == me:
                    del _OWNERS[name]
            _OWNERS_CHANGED.notify_all()

    def _submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """``fn(*args)`` on this task's I/O thread, through the loop's ``run_in_executor``
        (under simulation the virtual clock then waits for the thread, so a refresh or a
        commit takes the same virtual time however busy the machine is)."""
        return asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    def _keep_error(self, future: asyncio.Future[Any]) -> None:
        """An error of a background request, reported from the loop."""
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            self._errors.append(error)

    # --- positions (exactly-once state) ------------------------------------------------------
    def position(self) -> dict[tuple[str, int], int]:
        """Per assigned partition, the first offset not emitted yet (or waiting for a
        retry): every record before it was emitted."""
        waiting: dict[int, int] = {}
        for _, _, msg_id in self._retries.heap:
            slot, offset = msg_id & _SLOT_MASK, msg_id >> SLOT_BITS
            waiting[slot] = min(offset, waiting.get(slot, offset))
        found = {}
        for key, part in self._partitions.items():
            point = part.position
            for chunk in part.todo:
                if chunk.emitted < chunk.size:
                    point = chunk.offsets[chunk.emitted] >> SLOT_BITS
                    break
            found[key] = min(point, waiting.get(part.slot, point))
        return found

    def rewind(self, position: Mapping[tuple[str, int], int]) -> None:
        """Read every assigned partition again from its offset in ``position`` (from where
        it started in this run when ``position`` does not name it), forgetting what was
        read, emitted, pending or waiting for a retry since."""
        starts = {key: position.get(key, part.start) for key, part in self._partitions.items()}
        paused = [key for key, part in self._partitions.items() if part.paused]
        self._done.clear()
        self._retries = RetrySchedule(self.config.retry)
        self._retry_heap = self._retries.heap
        self._fails = self._retries.fails
        self._exhausted_ids.clear()
        self._partitions.clear()
        self._by_slot.clear()
        self._install(starts)
        self._let_go = True  # the old slots' acks still to come
        self._paused = False
        # A new assignment: the client drops what it fetched for the old positions.
        tp = self._topic_partition
        consumer = self._open_consumer()
        consumer.assign([tp(t, p, o) for (t, p), o in sorted(starts.items())])
        if paused:
            # The client keeps a partition paused through a new assignment.
            consumer.resume([tp(*key) for key in paused])

    # --- completion -----------------------------------------------------------------------------
    def is_exhausted(self) -> bool:
        return False  # a Kafka topic never ends

    @property
    def committed(self) -> dict[tuple[str, int], int]:
        """The offset last committed (or being committed) per assigned partition."""
        return {k: p.committed for k, p in getattr(self, "_partitions", {}).items()}


def _weakly(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` through a weak reference to its object (a no-op once it is gone)."""
    ref = weakref.WeakMethod(method)

    def call(*args: Any) -> Any:
        bound = ref()
        return None if bound is None else bound(*args)

    return call


def _where(msg: Message) -> tuple[str, int]:
    """A fetched record's ``(topic, partition)``: never None for a record the client
    fetched (the stubs allow None for a record being produced)."""
    return cast("tuple[str, int]", (msg.topic(), msg.partition()))


def _close_later(consumer: Consumer, io: concurrent.futures.ThreadPoolExecutor) -> None:
    """Close a task's consumer off the loop (destroying a live client can take a second):
    on the task's I/O thread, after the requests queued there, since a client must not be
    closed under one; on a thread of its own when that one is gone (interpreter exit)."""
    try:
        io.submit(consumer.close)
    except RuntimeError:
        threading.Thread(target=consumer.close, name="squall-kafka-close", daemon=True).start()
    io.shutdown(wait=False)


def _close_opened(opening: concurrent.futures.Future[Any]) -> None:
    """The consumer an abandoned ``open`` made, closed (if it made one)."""
    if not opening.cancelled() and opening.exception() is None:
        opening.result()[0].close()


def _ignores_commit(strategy: FirstPollOffsetStrategy) -> bool:
    """``EARLIEST`` and ``LATEST`` ignore a commit made by an earlier run."""
    return strategy in (FirstPollOffsetStrategy.EARLIEST, FirstPollOffsetStrategy.LATEST)


def _partition_eof_code() -> int:
    from confluent_kafka import KafkaError

    return int(KafkaError._PARTITION_EOF)
