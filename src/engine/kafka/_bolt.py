"""``KafkaBolt``: Storm's KafkaBolt on the confluent-kafka producer.

A ``BatchBolt``: the rows of a batch go to the producer in one call per topic
(``produce_batch``: the client loops over them in C and packs them into its own record
batches) and ``execute_batch`` returns; the rows are acked later, once the broker's
delivery reports for all of them came back without error. Many batches are thus in flight
at once, however the engine schedules ``execute_batch``. With ``fire_and_forget`` rows are
acked as soon as the producer took them, as Storm's ``setFireAndForget(true)``.

Each batch's delivery reports go to a small method of its own that counts them and keeps
the failed ones: a batch is done when it has a report per record. Its rows are then acked,
except those whose delivery failed, which fail (and are replayed). A report carries its
record, not its row, so a failed record is matched back to a row by its key and value:
rows with the same key and value are interchangeable (whichever is acked, a record like it
was delivered). An acked row was always delivered. (Counting in Python costs nothing
measurable next to a C ``put`` per report: 0.3 % of the producer's rate, measured.)

Reports are served on the event loop by the bolt's pump, a coroutine that runs while
records are outstanding: it polls the producer without blocking (``poll(0)``) and sleeps a
little between polls, longer while nothing comes. A thread serving the reports would hand
them across the GIL to the loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._model.batch_component import BatchBolt
from .._time.loop import cancel_and_wait
from ._errors import KafkaConfigError, missing_client
from ._tasks import take_over_task

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

    from .._columnar.batch import TupleBatch
    from .._columnar.batch_collector import BatchCollector
    from .._model.context import TopologyContext

#: What the bolt gives the producer as a delivery callback: ``(error or None, record)``.
DeliveryReport = Callable[["KafkaError | None", "Message"], None]

__all__ = [
    "DefaultTopicSelector",
    "FieldNameBasedTupleToKafkaMapper",
    "FieldNameTopicSelector",
    "KafkaBolt",
]

logger = logging.getLogger("engine.kafka")

#: Seconds between two looks for delivery reports: the first, and the longest.
_POLL_FIRST_SECS = 0.0002
_POLL_MAX_SECS = 0.005
#: librdkafka's "local queue full" error code (``KafkaError._QUEUE_FULL``).
_QUEUE_FULL = -184
#: Seconds ``cleanup`` waits for the reports of records still in flight.
_CLOSE_WAIT_SECS = 5.0
_BYTES = frozenset({bytes})


class DefaultTopicSelector:
    """Every tuple goes to ``topic`` (Storm's ``DefaultTopicSelector``)."""

    def __init__(self, topic: str) -> None:
        if not isinstance(topic, str) or not topic:
            raise KafkaConfigError(f"DefaultTopicSelector: topic must be a name, got {topic!r}")
        self.topic = topic

    def __repr__(self) -> str:
        return f"DefaultTopicSelector({self.topic!r})"


class FieldNameTopicSelector:
    """The topic is the tuple's field ``field_name``; ``default_topic`` when that is None
    (Storm's ``FieldNameTopicSelector``). A tuple with neither is acked, counted in
    ``KafkaBolt.skipped`` and logged, as Storm's bolt skips (with a warning) a tuple its
    selector gives no topic."""

    def __init__(self, field_name: str, default_topic: str | None = None) -> None:
        if not isinstance(field_name, str) or not field_name:
            raise KafkaConfigError(
                f"FieldNameTopicSelector: field_name must be a field name, got {field_name!r}"
            )
        self.field_name = field_name
        self.default_topic = default_topic

    def __repr__(self) -> str:
        return f"FieldNameTopicSelector({self.field_name!r}, {self.default_topic!r})"


class FieldNameBasedTupleToKafkaMapper:
    """The record's key and value are the tuple's fields ``key_field`` and
    ``message_field`` (Storm's defaults: ``"key"`` and ``"message"``); ``key_field=None``
    sends records without a key. Bytes are sent as they are, anything else as the UTF-8 of its
    ``str``."""

    def __init__(self, key_field: str | None = "key", message_field: str = "message") -> None:
        if key_field is not None and (not isinstance(key_field, str) or not key_field):
            raise KafkaConfigError(
                f"FieldNameBasedTupleToKafkaMapper: key_field must be a field name or None, "
                f"got {key_field!r}"
            )
        if not isinstance(message_field, str) or not message_field:
            raise KafkaConfigError(
                f"FieldNameBasedTupleToKafkaMapper: message_field must be a field name, got "
                f"{message_field!r}"
            )
        self.key_field = key_field
        self.message_field = message_field

    def __repr__(self) -> str:
        return f"FieldNameBasedTupleToKafkaMapper({self.key_field!r}, {self.message_field!r})"


class _Delivery:
    """One batch's records in flight to one topic: ``rows`` of ``batch`` and their
    ``messages``; ``report`` is the client's delivery callback for them. The report that
    completes it appends it to ``finished`` (the bolt's), which tells the bolt to look."""

    __slots__ = ("arrived", "batch", "expected", "failed", "finished", "messages", "rows")

    def __init__(
        self,
        batch: TupleBatch,
        rows: Sequence[int],
        messages: list[dict[str, Any]],
        finished: list[_Delivery],
    ) -> None:
        self.batch = batch
        self.rows = rows
        self.messages = messages
        self.finished = finished
        self.expected = len(rows)
        self.arrived = 0
        #: the records whose delivery failed
        self.failed: list[Message] = []

    def report(self, error: KafkaError | None, msg: Message) -> None:
        self.arrived += 1
        if error is not None:
            self.failed.append(msg)
        if self.arrived == self.expected:
            self.finished.append(self)

    def done(self) -> bool:
        return self.arrived >= self.expected

    def failed_rows(self) -> list[int]:
        """The rows whose records were not delivered (call once ``done``)."""
        missing = collections.Counter((m.key(), m.value()) for m in self.failed)
        rows = []
        for row, message in zip(self.rows, self.messages, strict=True):
            content = (message.get("key"), message.get("value"))
            if missing[content] > 0:
                missing[content] -= 1
                rows.append(row)
        if +missing:  # a report that matches no row: fail them all rather than guess
            return list(self.rows)
        return rows


def _close_producer(producer: Producer) -> None:
    """Drop what the producer still holds (those rows time out and are replayed) and close
    it; its connections close with it. Blocking: run off the loop."""
    producer.purge()
    producer.poll(0)
    producer.close()


def _encode(value: Any) -> bytes | None:
    """A field as record bytes: bytes as they are, None as no key/value, anything else as
    the UTF-8 of its ``str`` (Storm's ``StringSerializer``)."""
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode()


def _as_record_bytes(values: list[Any]) -> list[bytes | None]:
    """``values`` encoded with ``_encode``. A column of bytes (the common case) is returned
    as it is: checking the types in C (``map(type, ...)``) costs a fraction of a Python
    loop's type test and call per row."""
    if _BYTES.issuperset(map(type, values)):
        return values
    return [_encode(v) for v in values]


def _column(batch: TupleBatch, name: str) -> list[Any]:
    """The field's values as a list (a list column as it is, without a copy: it is only
    read)."""
    column = batch.column(name)
    if type(column) is list:
        return column
    if hasattr(column, "to_pylist"):  # Arrow
        return list(column.to_pylist())
    if hasattr(column, "tolist"):  # numpy
        return list(column.tolist())
    return list(column)


class KafkaBolt(BatchBolt):
    """Writes every tuple to Kafka; acks it once the broker confirmed it.

    >>> from engine.kafka import DefaultTopicSelector, KafkaBolt
    >>> bolt = KafkaBolt("127.0.0.1:9092", DefaultTopicSelector("page-counts"),
    ...                  FieldNameBasedTupleToKafkaMapper("page", "count"))
    >>> # builder.set_bolt("to-kafka", bolt).shuffle_grouping("count")

    ``producer_props`` are further client properties (librdkafka's names). Unless they set
    ``message.timeout.ms``, a delivery is given up after the topology's message timeout, so
    a broker that is down fails the tuples (they are replayed) rather than holding them.
    ``producer_factory(props)`` makes the client's producer (where a subclass of Storm's
    bolt overrides ``mkProducer``): tests pass one that builds a stand-in.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic_selector: DefaultTopicSelector | FieldNameTopicSelector,
        tuple_to_kafka_mapper: FieldNameBasedTupleToKafkaMapper | None = None,
        *,
        fire_and_forget: bool = False,
        producer_props: Mapping[str, Any] | None = None,
        producer_factory: Callable[[dict[str, Any]], Producer] | None = None,
    ) -> None:
        if not isinstance(bootstrap_servers, str) or not bootstrap_servers:
            raise KafkaConfigError(
                f"KafkaBolt: bootstrap_servers must be 'host:port[,host:port...]', got "
                f"{bootstrap_servers!r}"
            )
        if not isinstance(topic_selector, (DefaultTopicSelector, FieldNameTopicSelector)):
            raise KafkaConfigError(
                f"KafkaBolt: topic_selector must be a DefaultTopicSelector or "
                f"FieldNameTopicSelector, got {topic_selector!r}"
            )
        mapper = tuple_to_kafka_mapper or FieldNameBasedTupleToKafkaMapper()
        if not isinstance(mapper, FieldNameBasedTupleToKafkaMapper):
            raise KafkaConfigError(
                f"KafkaBolt: tuple_to_kafka_mapper must be a FieldNameBasedTupleToKafkaMapper, "
                f"got {mapper!r}"
            )
        if producer_props is not None and not isinstance(producer_props, Mapping):
            raise KafkaConfigError(
                f"KafkaBolt: producer_props must be a mapping of client properties, got "
                f"{producer_props!r}"
            )
        self.bootstrap_servers = bootstrap_servers
        self.topic_selector = topic_selector
        self.mapper = mapper
        self.fire_and_forget = bool(fire_and_forget)
        self.producer_props = dict(producer_props or {})
        self.producer_factory = producer_factory

    def prepare(
        self, conf: Mapping[str, Any], context: TopologyContext, collector: BatchCollector
    ) -> None:
        try:
            from confluent_kafka import Producer
        except ImportError as exc:
            raise missing_client(exc) from exc
        self.collector = collector
        self._component = context.get_this_component_id()
        props: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "linger.ms": 5,
            "logger": logger,
        }
        timeout = conf.get("topology.message.timeout.secs")
        if timeout:
            props["message.timeout.ms"] = int(timeout * 1000)
        props.update(self.producer_props)
        self._producer: Producer | None = (self.producer_factory or Producer)(props)
        run = context.get_storm_id() or f"{id(context.clock)}"
        prior = take_over_task((run, self._component, context.get_this_task_index()), self)
        crashed = getattr(prior, "_producer", None)
        if prior is not None and crashed is not None:
            # A crashed object of this task: its pump stops, its records die with it.
            if prior._pump is not None:
                prior._pump.cancel()
            prior._producer = None
            threading.Thread(
                target=_close_producer, args=(crashed,), name="squall-kafka-close", daemon=True
            ).start()
        self._pump: asyncio.Task[None] | None = None
        #: rows the broker confirmed, rows whose delivery failed, rows without a topic
        self.delivered = 0
        self.failed = 0
        self.skipped = 0
        #: batches whose records are in flight, oldest first
        self._pending: list[_Delivery] = []
        #: batches done since ``_finish_done`` last looked (they may not be pending yet)
        self._finished: list[_Delivery] = []
        #: fire-and-forget deliveries' reports (errors; None when delivered)
        self._forgotten: queue.SimpleQueue[KafkaError | None] = queue.SimpleQueue()

    def cleanup(self) -> Awaitable[None]:
        return self._shutdown()

    async def _shutdown(self) -> None:
        producer: Producer | None = getattr(self, "_producer", None)
        if producer is None:
            return
        # Deliveries still in flight get their reports for a while (their rows are then
        # acked or failed); what is left after that times out and is replayed.
        deadline = asyncio.get_running_loop().time() + _CLOSE_WAIT_SECS
        while (len(producer) or self._pending) and (asyncio.get_running_loop().time() < deadline):
            await asyncio.sleep(_POLL_MAX_SECS)
        pump = self._pump
        if pump is not None and not pump.done():
            await cancel_and_wait(pump)
        producer.poll(0)
        if self._pending:
            self._finish_done()
        # Closed, not left to the collector: a client left alive stays connected, and logs
        # the broker's absence, until it is collected (at the interpreter's exit, maybe).
        self._producer = None
        await asyncio.to_thread(_close_producer, producer)

    def _start_pump(self) -> None:
        pump = self._pump
        if pump is None or pump.done():
            error = None if pump is None or pump.cancelled() else pump.exception()
            if error is not None:
                self.collector.report_error(error)
            self._pump = asyncio.get_running_loop().create_task(self._serve_reports())

    async def _serve_reports(self) -> None:
        """Serve delivery reports while records are outstanding, never blocking the loop."""
        producer = self._open_producer()
        poll = producer.poll
        wait = _POLL_FIRST_SECS
        while len(producer) or self._pending:
            served = poll(0)
            if self._pending:
                self._finish_done()
            if served:
                wait = _POLL_FIRST_SECS
                await asyncio.sleep(0)
                continue
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_MAX_SECS)
        self._report_forgotten()

    def _finish_done(self) -> None:
        """Ack the batches whose every record was delivered; fail those with a failure.

        Batches are done in any order (another topic's records, or a slow partition's, come
        back later), so every pending batch is looked at; but only once one was done since
        the last look, which is rarely the case while records fly."""
        if not self._finished:
            return
        self._finished.clear()
        pending = self._pending
        left = []
        for delivery in pending:
            if delivery.done():
                self._finish(delivery)
            else:
                left.append(delivery)
        self._pending = left

    def _finish(self, delivery: _Delivery) -> None:
        batch, rows = delivery.batch, delivery.rows
        if not delivery.failed:
            self.delivered += len(rows)
            # every row of the batch (the common case): no index array to check and convert
            self.collector.ack(batch, None if len(rows) == len(batch) else rows)
            return
        failed = delivery.failed_rows()
        self.failed += len(failed)
        self.collector.report_error(
            f"bolt {self._component!r}: {len(failed)} records of a batch of {len(rows)} were "
            f"not delivered to {self.bootstrap_servers} ({delivery.failed[0].error()}); their "
            f"tuples failed and are replayed"
        )
        self.collector.fail(batch, failed)
        if len(failed) < len(rows):
            gone = set(failed)
            delivered = [r for r in rows if r not in gone]
            self.delivered += len(delivered)
            self.collector.ack(batch, delivered)

    def _open_producer(self) -> Producer:
        producer = self._producer
        if producer is None:
            raise RuntimeError(
                f"bolt {self._component!r}: its producer was closed (the bolt was cleaned up, "
                f"or a new object of its task took over); it sends nothing more"
            )
        return producer

    def _forget(self, error: KafkaError | None, msg: Message) -> None:
        """A fire-and-forget record's delivery report: its tuple was acked already, so
        only a failure is kept (to be reported)."""
        if error is not None:
            self._forgotten.put(error)

    def _report_forgotten(self) -> None:
        forgotten = self._forgotten
        n = forgotten.qsize()
        if not n:
            return
        lost = [forgotten.get(False) for _ in range(n)]
        self.failed += len(lost)
        self.collector.report_error(
            f"bolt {self._component!r}: {len(lost)} fire-and-forget records were not "
            f"delivered to {self.bootstrap_servers} ({lost[0]}); their tuples were acked "
            f"already"
        )

    async def _produce(
        self, topic: str, messages: list[dict[str, Any]], report: DeliveryReport
    ) -> list[int]:
        """Hand ``messages`` to the producer, waiting for room while its queue is full;
        returns the indexes of the messages it refused (too large, ...), reported."""
        producer = self._open_producer()
        produce_batch = producer.produce_batch
        refused: list[int] = []
        todo = list(range(len(messages)))
        while True:
            batch = messages if len(todo) == len(messages) else [messages[i] for i in todo]
            if produce_batch(topic, batch, on_delivery=report) == len(batch):
                return refused
            full = []
            for i, message in zip(todo, batch, strict=True):
                error = message.pop("_error", None)
                if error is None:
                    continue
                if error.code() == _QUEUE_FULL:
                    full.append(i)
                else:
                    self.collector.report_error(
                        f"bolt {self._component!r}: producing a record to {topic!r} failed: {error}"
                    )
                    refused.append(i)
            if not full:
                return refused
            todo = full
            # The local queue is full: wait for reports (they make room), then go on.
            if not producer.poll(0):
                await asyncio.sleep(_POLL_MAX_SECS)
            if self._pending:
                self._finish_done()

    # --- batches ----------------------------------------------------------------------------
    async def execute_batch(self, batch: TupleBatch) -> None:
        n = len(batch)
        selector = self.topic_selector
        values = _as_record_bytes(_column(batch, self.mapper.message_field))
        messages: list[dict[str, Any]]
        if self.mapper.key_field is None:
            messages = [{"value": v} for v in values]
        else:
            keys = _as_record_bytes(_column(batch, self.mapper.key_field))
            messages = [{"value": v, "key": k} for v, k in zip(values, keys, strict=True)]
        # Rows by topic: one produce call per topic.
        groups: dict[str, Sequence[int]]
        if isinstance(selector, DefaultTopicSelector):
            groups = {selector.topic: range(n)}
        else:
            default = selector.default_topic
            by_topic: dict[str | None, list[int]] = {}
            for i, t in enumerate(_column(batch, selector.field_name)):
                by_topic.setdefault(default if t is None else t, []).append(i)
            skipped = by_topic.pop(None, [])
            groups = {t: rows for t, rows in by_topic.items() if t is not None}
            if skipped:
                self.skipped += len(skipped)
                logger.warning(
                    "bolt %r: %d tuples have no topic (field %r is None and there is no "
                    "default_topic): acked without being sent, counted in KafkaBolt.skipped",
                    self._component,
                    len(skipped),
                    selector.field_name,
                )
                self.collector.ack(batch, skipped)
        self._report_forgotten()
        report: DeliveryReport = self._forget  # (fire and forget)
        refused: list[int] = []
        sent: list[int] = []  # (fire and forget)
        deliveries = []
        for topic, rows in groups.items():
            group = messages if len(rows) == n else [messages[i] for i in rows]
            if not self.fire_and_forget:
                delivery = _Delivery(batch, rows, group, self._finished)
                report = delivery.report
            bad = await self._produce(topic, group, report)
            if bad:
                refused.extend(rows[i] for i in bad)
                kept = set(bad)
                rows = [r for j, r in enumerate(rows) if j not in kept]
                if not self.fire_and_forget:
                    delivery.rows = rows
                    delivery.messages = [m for j, m in enumerate(group) if j not in kept]
                    delivery.expected = len(rows)
            if self.fire_and_forget:
                sent.extend(rows)
            elif rows:
                deliveries.append(delivery)
        if refused:
            self.failed += len(refused)
            self.collector.fail(batch, refused)
        if self.fire_and_forget:
            if sent:
                self.collector.ack(batch, None if len(sent) == n else sent)
        else:
            self._pending.extend(deliveries)
            # A delivery done before it was pending (its reports came while the next
            # topic's records were handed over), or by a refusal that lowered what it
            # expects, was not looked for: it is now.
            if any(d.done() for d in deliveries):
                self._finished.append(deliveries[0])
        self._start_pump()
