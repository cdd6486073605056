"""``KafkaBolt``: Storm's KafkaBolt on the confluent-kafka producer.

A ``BatchBolt`` with an ``async execute_batch``: every row of a batch is handed to the
producer at once (the client packs them into its own record batches), and a row is acked
only when the broker's delivery report for it came back without error; a failed delivery
fails that row's tree, so the spout replays it. With ``fire_and_forget`` rows are acked as
soon as the producer took them, as Storm's ``setFireAndForget(true)``.

Delivery reports are served by a thread of the bolt's own that polls the producer; it hands
a batch's outcome to the event loop once every row of the batch has its report.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from .._batch_component import BatchBolt
from ._errors import KafkaConfigError, missing_client

__all__ = [
    "DefaultTopicSelector",
    "FieldNameBasedTupleToKafkaMapper",
    "FieldNameTopicSelector",
    "KafkaBolt",
]

logger = logging.getLogger("engine.kafka")

#: Seconds the delivery thread waits in one ``poll`` (also how soon it notices a stop).
_POLL_SECS = 0.05
#: Seconds to wait before handing rows to a producer whose local queue is full.
_FULL_QUEUE_WAIT_SECS = 0.005


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
    """One batch's delivery reports, counted on the delivery thread."""

    __slots__ = ("failed", "future", "lock", "loop", "waiting")

    def __init__(self, n: int, loop: asyncio.AbstractEventLoop) -> None:
        self.waiting = n
        self.failed: list[tuple[int, Any]] = []
        self.loop = loop
        self.lock = threading.Lock()
        self.future: asyncio.Future[None] = loop.create_future()

    def report(self, row: int, error: Any, msg: Any) -> None:
        if error is not None:
            self.failed.append((row, error))
        self.cancel_rows(1)

    def cancel_rows(self, n: int) -> None:
        """``n`` rows had their report, or will never have one (never handed over)."""
        with self.lock:
            self.waiting -= n
            last = self.waiting == 0
        if last:
            self.loop.call_soon_threadsafe(_resolve, self.future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


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
        self._stop = threading.Event()
        self._poller = threading.Thread(
            target=self._serve_reports,
            name=f"squall-{self._component}-{context.get_this_task_index()}-kafka",
            daemon=True,
        )
        self._poller.start()
        #: rows the broker confirmed, rows whose delivery failed, rows without a topic
        self.delivered = 0
        self.failed = 0
        self.skipped = 0
        #: fire-and-forget deliveries that failed, reported with the next batch
        self._lost: list[Any] = []

    def _serve_reports(self) -> None:
        producer, stop = self._producer, self._stop
        while not stop.is_set():
            producer.poll(_POLL_SECS)

    def cleanup(self) -> Any:
        return self._shutdown()

    async def _shutdown(self) -> None:
        producer = getattr(self, "_producer", None)
        if producer is None:
            return

        def finish() -> None:
            # Deliveries still in flight get their reports (their rows were not acked yet).
            producer.flush(5.0)
            self._stop.set()
            self._poller.join()

        await asyncio.get_running_loop().run_in_executor(None, finish)

    def _forgotten(self, row: int, error: Any, msg: Any) -> None:
        """On the delivery thread: a fire-and-forget record's report."""
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
        delivery = None if self.fire_and_forget else _Delivery(n, asyncio.get_running_loop())
        skipped = [i for i, t in enumerate(topics) if t is None]
        if skipped:
            self.skipped += len(skipped)
            self.collector.ack(batch, skipped)
            if delivery is not None:
                delivery.cancel_rows(len(skipped))
        self._report_forgotten()
        produce = self._producer.produce
        report = self._forgotten if delivery is None else delivery.report
        refused: list[int] = []
        for i in range(n):
            topic = topics[i]
            if topic is None:
                continue
            callback = functools.partial(report, i)
            while True:
                try:
                    produce(topic, _encode(values[i]), _encode(keys[i]), on_delivery=callback)
                    break
                except BufferError:
                    # The producer's local queue is full: let the delivery thread drain it.
                    await asyncio.sleep(_FULL_QUEUE_WAIT_SECS)
                except Exception as exc:  # a record the client refuses (too large, ...)
                    self.collector.report_error(
                        f"bolt {self._component!r}: producing a record to {topic!r} failed: {exc!r}"
                    )
                    refused.append(i)
                    break
        if refused:
            self.failed += len(refused)
            self.collector.fail(batch, refused)
            if delivery is not None:
                delivery.cancel_rows(len(refused))
        sent = n - len(skipped) - len(refused)
        if delivery is None:
            if sent:
                done = set(skipped) | set(refused)
                self.collector.ack(batch, [i for i in range(n) if i not in done])
            return
        await delivery.future
        if delivery.failed:
            rows = sorted(row for row, _ in delivery.failed)
            self.failed += len(rows)
            self.collector.report_error(
                f"bolt {self._component!r}: {len(rows)} of {n} records were not delivered to "
                f"{self.bootstrap_servers} ({delivery.failed[0][1]}); their tuples failed and "
                f"are replayed"
            )
            self.collector.fail(batch, rows)
        bad = {row for row, _ in delivery.failed} | set(skipped) | set(refused)
        ok = [i for i in range(n) if i not in bad]
        self.delivered += len(ok)
        if ok:
            self.collector.ack(batch, ok)
