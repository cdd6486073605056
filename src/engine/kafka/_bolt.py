"""``KafkaBolt``: Storm's KafkaBolt on the confluent-kafka producer.

A ``BatchBolt``: every row of a batch is handed to the producer at once (the client packs
them into its own record batches) and ``execute_batch`` returns; a row is acked later, when
the broker's delivery report for it came back without error, and a failed delivery fails
that row's tree, so the spout replays it. Many batches are thus in flight at once, however
the engine schedules ``execute_batch``. With ``fire_and_forget`` rows are acked as soon as
the producer took them, as Storm's ``setFireAndForget(true)``.

Delivery reports are served on the event loop by the bolt's pump, a coroutine that runs
while records are outstanding: it polls the producer without blocking (``poll(0)`` runs the
callbacks of whatever reports arrived) and sleeps a little between polls, longer while
nothing comes. A thread serving the reports would hand every callback across the GIL to the
loop, several times slower.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Mapping
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
    """One batch's delivery reports, counted by the callbacks ``poll`` runs; once the last
    one came, ``finish(self)`` acks and fails its rows."""

    __slots__ = ("batch", "failed", "finish", "rows", "size", "waiting")

    def __init__(self, batch: Any, size: int, finish: Any) -> None:
        self.batch = batch
        self.size = size
        self.waiting = size
        self.failed: list[tuple[int, Any]] = []
        self.finish = finish
        #: the rows handed to the producer (set once the whole batch was)
        self.rows: list[int] = []

    def report(self, row: int, error: Any, msg: Any) -> None:
        if error is not None:
            self.failed.append((row, error))
        self.waiting -= 1
        if self.waiting == 0:
            self.finish(self)


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
        #: fire-and-forget deliveries that failed, not reported yet
        self._lost: list[Any] = []

    def cleanup(self) -> Any:
        return self._shutdown()

    async def _shutdown(self) -> None:
        if getattr(self, "_producer", None) is None:
            return
        # Deliveries still in flight get their reports for a while (their rows are then
        # acked or failed); what is left after that times out and is replayed.
        deadline = asyncio.get_running_loop().time() + _CLOSE_WAIT_SECS
        while len(self._producer) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(_POLL_MAX_SECS)
        pump = self._pump
        if pump is not None and not pump.done():
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        self._producer.poll(0)

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
        while len(producer):
            if poll(0):
                wait = _POLL_FIRST_SECS
                await asyncio.sleep(0)
                continue
            await asyncio.sleep(wait)
            wait = min(wait * 2, _POLL_MAX_SECS)
        self._report_forgotten()

    async def _produce_when_room(self, topic: str, value: Any, key: Any, callback: Any) -> None:
        """The producer's local queue is full: wait for reports until it takes the record."""
        while True:
            if not self._producer.poll(0):
                await asyncio.sleep(_POLL_MAX_SECS)
            try:
                self._producer.produce(topic, value, key, on_delivery=callback)
                return
            except BufferError:
                continue

    def _finish(self, delivery: _Delivery) -> None:
        """Every row of a batch has its report: ack the delivered rows, fail the others."""
        batch, failed = delivery.batch, delivery.failed
        if failed:
            rows = sorted(row for row, _ in failed)
            self.failed += len(rows)
            self.collector.report_error(
                f"bolt {self._component!r}: {len(rows)} of {delivery.size} records were not "
                f"delivered to {self.bootstrap_servers} ({failed[0][1]}); their tuples failed "
                f"and are replayed"
            )
            self.collector.fail(batch, rows)
            bad = set(rows)
            ok = [i for i in delivery.rows if i not in bad]
        else:
            ok = delivery.rows
        self.delivered += len(ok)
        if ok:
            self.collector.ack(batch, ok)

    def _forgotten(self, row: int, error: Any, msg: Any) -> None:
        """A fire-and-forget record's report."""
        if error is not None:
            self._lost.append(error)

    def _report_forgotten(self) -> None:
        if self._lost:
            lost, self._lost = self._lost, []
            self.failed += len(lost)
            self.collector.report_error(
                f"bolt {self._component!r}: {len(lost)} fire-and-forget records were not "
                f"delivered to {self.bootstrap_servers} ({lost[0]}); their tuples were "
                f"acked already"
            )

    # --- batches ----------------------------------------------------------------------------
    async def execute_batch(self, batch: Any) -> None:
        n = len(batch)
        selector = self.topic_selector
        if isinstance(selector, DefaultTopicSelector):
            topics: list[Any] = [selector.topic] * n
        else:
            default = selector.default_topic
            topics = [default if t is None else t for t in _column(batch, selector.field_name)]
        values = _column(batch, self.mapper.message_field)
        keys = _column(batch, self.mapper.key_field) if self.mapper.key_field else [None] * n
        skipped = [i for i, t in enumerate(topics) if t is None]
        if skipped:
            self.skipped += len(skipped)
            self.collector.ack(batch, skipped)
        self._report_forgotten()
        produce = self._producer.produce
        delivery = None
        if self.fire_and_forget:
            report = self._forgotten
        else:
            # ``waiting`` starts one above the rows, so no report finishes the batch while
            # its rows are still being handed over; the last step below takes it away.
            delivery = _Delivery(batch, n - len(skipped) + 1, self._finish)
            report = delivery.report
        partial = functools.partial
        refused: list[int] = []
        for i, (topic, value, key) in enumerate(zip(topics, values, keys, strict=True)):
            if topic is None:
                continue
            if type(value) is not bytes:
                value = _encode(value)
            if key is not None and type(key) is not bytes:
                key = _encode(key)
            try:
                produce(topic, value, key, on_delivery=partial(report, i))
            except BufferError:
                await self._produce_when_room(topic, value, key, partial(report, i))
            except Exception as exc:  # a record the client refuses (too large, ...)
                self.collector.report_error(
                    f"bolt {self._component!r}: producing a record to {topic!r} failed: {exc!r}"
                )
                refused.append(i)
        if refused:
            self.failed += len(refused)
            self.collector.fail(batch, refused)
        done = set(skipped) | set(refused)
        rows = [i for i in range(n) if i not in done] if done else list(range(n))
        if delivery is None:
            if rows:
                self.collector.ack(batch, rows)
        else:
            delivery.rows = rows
            delivery.waiting -= len(refused)
            delivery.report(-1, None, None)  # the extra count: the batch is handed over
        self._start_pump()
