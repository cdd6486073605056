"""``KafkaBolt``: Storm's KafkaBolt on the confluent-kafka producer.

A ``BatchBolt``: the rows of a batch go to the producer in one call per topic
(``produce_batch``: the client loops over them in C and packs them into its own record
batches) and ``execute_batch`` returns; the rows are acked later, once the broker's
delivery reports for all of them came back without error. Many batches are thus in flight
at once, however the engine schedules ``execute_batch``. With ``fire_and_forget`` rows are
acked as soon as the producer took them, as Storm's ``setFireAndForget(true)``.

Each batch's delivery reports land in a queue of its own, whose ``put`` the client calls
directly (a C call per record, no Python frame): a batch is done when its queue holds a
report per record, and all of its reports are read at once. A report cannot name its row
(the client keeps no per-record tag for a batch), so a batch with a failed delivery fails
all its rows: the spout replays them, and the rows that did arrive are sent again
(at-least-once, as a producer retry would do). An acked row was always delivered.

Reports are served on the event loop by the bolt's pump, a coroutine that runs while
records are outstanding: it polls the producer without blocking (``poll(0)``) and sleeps a
little between polls, longer while nothing comes. A thread serving the reports would hand
them across the GIL to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
from collections.abc import Mapping, Sequence
from typing import Any

from .._model.batch_component import BatchBolt
from ._errors import KafkaConfigError, missing_client

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
    (Storm's ``FieldNameTopicSelector``). A tuple with neither is acked and counted in
    ``KafkaBolt.skipped``, as Storm's bolt skips a tuple its selector gives no topic."""

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
    """One batch's records in flight: its delivery reports (the errors, None for a record
    delivered) arrive in ``reports``; done once there is one per record."""

    __slots__ = ("batch", "expected", "reports", "rows")

    def __init__(self, batch: Any, rows: Sequence[int]) -> None:
        self.batch = batch
        self.rows = rows
        self.expected = len(rows)
        self.reports: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def done(self) -> bool:
        return self.reports.qsize() >= self.expected

    def errors(self) -> list[Any]:
        """The failed deliveries' errors (reads every report; call once ``done``)."""
        found = set(map(self.reports.get, [False] * self.expected))
        found.discard(None)
        return list(found)


def _encode(value: Any) -> bytes | None:
    """A field as record bytes: bytes as they are, None as no key/value, anything else as
    the UTF-8 of its ``str`` (Storm's ``StringSerializer``)."""
    if value is None or isinstance(value, bytes):
        return value
    return str(value).encode()


def _column(batch: Any, name: str) -> list[Any]:
    column = batch.column(name)
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
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic_selector: DefaultTopicSelector | FieldNameTopicSelector,
        tuple_to_kafka_mapper: FieldNameBasedTupleToKafkaMapper | None = None,
        *,
        fire_and_forget: bool = False,
        producer_props: Mapping[str, Any] | None = None,
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

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
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
        self._producer = Producer(props)
        self._pump: asyncio.Task[None] | None = None
        #: rows the broker confirmed, rows whose delivery failed, rows without a topic
        self.delivered = 0
        self.failed = 0
        self.skipped = 0
        #: batches whose records are in flight, oldest first
        self._pending: list[_Delivery] = []
        #: fire-and-forget deliveries' reports (errors; None when delivered)
        self._forgotten: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def cleanup(self) -> Any:
        return self._shutdown()

    async def _shutdown(self) -> None:
        if getattr(self, "_producer", None) is None:
            return
        # Deliveries still in flight get their reports for a while (their rows are then
        # acked or failed); what is left after that times out and is replayed.
        deadline = asyncio.get_running_loop().time() + _CLOSE_WAIT_SECS
        while (len(self._producer) or self._pending) and (
            asyncio.get_running_loop().time() < deadline
        ):
            await asyncio.sleep(_POLL_MAX_SECS)
        pump = self._pump
        if pump is not None and not pump.done():
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        self._producer.poll(0)
        if self._pending:
            self._finish_done()

    def _start_pump(self) -> None:
        pump = self._pump
        if pump is None or pump.done():
            if pump is not None and not pump.cancelled() and pump.exception() is not None:
                self.collector.report_error(pump.exception())
            self._pump = asyncio.get_running_loop().create_task(self._serve_reports())

    async def _serve_reports(self) -> None:
        """Serve delivery reports while records are outstanding, never blocking the loop."""
        producer = self._producer
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
        """Ack the batches whose every record was delivered; fail those with a failure."""
        pending = self._pending
        if not pending[0].done() and not pending[-1].done():
            return  # the common case while records fly: nothing new (checked cheaply)
        left = []
        for delivery in pending:
            if delivery.done():
                self._finish(delivery)
            else:
                left.append(delivery)
        self._pending = left

    def _finish(self, delivery: _Delivery) -> None:
        batch, rows = delivery.batch, delivery.rows
        errors = delivery.errors()
        if errors:
            self.failed += len(rows)
            self.collector.report_error(
                f"bolt {self._component!r}: records of a batch of {len(rows)} were not "
                f"delivered to {self.bootstrap_servers} ({errors[0]}); its tuples failed "
                f"and are replayed"
            )
            self.collector.fail(batch, rows)
            return
        self.delivered += len(rows)
        # every row of the batch (the common case): no index array to check and convert
        self.collector.ack(batch, None if len(rows) == len(batch) else rows)

    def _report_forgotten(self) -> None:
        forgotten = self._forgotten
        n = forgotten.qsize()
        if not n:
            return
        lost = [e for e in map(forgotten.get, [False] * n) if e is not None]
        if lost:
            self.failed += len(lost)
            self.collector.report_error(
                f"bolt {self._component!r}: {len(lost)} fire-and-forget records were not "
                f"delivered to {self.bootstrap_servers} ({lost[0]}); their tuples were "
                f"acked already"
            )

    async def _produce(self, topic: str, messages: list[dict[str, Any]], report: Any) -> list[int]:
        """Hand ``messages`` to the producer, waiting for room while its queue is full;
        returns the indexes of the messages it refused (too large, ...), reported."""
        produce_batch = self._producer.produce_batch
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
            if not self._producer.poll(0):
                await asyncio.sleep(_POLL_MAX_SECS)
            if self._pending:
                self._finish_done()

    # --- batches ----------------------------------------------------------------------------
    async def execute_batch(self, batch: Any) -> None:
        n = len(batch)
        selector = self.topic_selector
        values = _column(batch, self.mapper.message_field)
        keys = _column(batch, self.mapper.key_field) if self.mapper.key_field else None
        encode = _encode
        if keys is None:
            messages = [{"value": v if type(v) is bytes else encode(v)} for v in values]
        else:
            messages = [
                {
                    "value": v if type(v) is bytes else encode(v),
                    "key": k if type(k) is bytes else encode(k),
                }
                for v, k in zip(values, keys, strict=True)
            ]
        # Rows by topic: one produce call per topic.
        groups: dict[Any, Sequence[int]]
        if isinstance(selector, DefaultTopicSelector):
            groups = {selector.topic: range(n)}
        else:
            default = selector.default_topic
            by_topic: dict[Any, list[int]] = {}
            for i, t in enumerate(_column(batch, selector.field_name)):
                by_topic.setdefault(default if t is None else t, []).append(i)
            skipped = by_topic.pop(None, [])
            groups = dict(by_topic)
            if skipped:
                self.skipped += len(skipped)
                self.collector.ack(batch, skipped)
        self._report_forgotten()
        if self.fire_and_forget:
            report = self._forgotten.put
        refused: list[int] = []
        sent: list[int] = []  # (fire and forget)
        deliveries = []
        for topic, rows in groups.items():
            if not self.fire_and_forget:
                delivery = _Delivery(batch, rows)
                report = delivery.reports.put
            group = messages if len(rows) == n else [messages[i] for i in rows]
            bad = await self._produce(topic, group, report)
            if bad:
                refused.extend(rows[i] for i in bad)
                kept = set(bad)
                rows = [r for j, r in enumerate(rows) if j not in kept]
                if not self.fire_and_forget:
                    delivery.rows = rows
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
        self._start_pump()
