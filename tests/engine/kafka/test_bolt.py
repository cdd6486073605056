"""KafkaBolt against a real broker: a tuple is acked only after its delivery report; topic
selection; fire-and-forget; and the broker killed mid-run, where the tuples in flight fail
and are replayed and nothing acked is lost."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from engine import TopologyBuilder, run_topology
from engine._time.loop import run_sync
from engine.kafka import (
    DefaultTopicSelector,
    FieldNameBasedTupleToKafkaMapper,
    FieldNameTopicSelector,
    KafkaBolt,
    KafkaConfigError,
    LocalKafkaBroker,
)
from engine.testing import CrashTask, FiniteSpout, advance_time, simulate
from tests.engine.test_loop import cancelled_while_stopping, slow_to_stop

from .helpers import until

pytestmark = pytest.mark.kafka


def read_topic(servers: str, topic: str, expect: int, timeout: float = 20.0) -> list[bytes]:
    """Every value of every partition of ``topic``, once at least ``expect`` were read and
    every partition was read to its end."""
    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": "reader", "enable.partition.eof": True}
    )
    partitions = consumer.list_topics(timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.1):
                if msg.error() is None:
                    values.append(msg.value())
                    at_end.discard(msg.partition())
                else:
                    at_end.add(msg.partition())
            if len(values) >= expect and at_end == set(partitions):
                return values
        raise AssertionError(f"read {len(values)} of {expect} records of {topic}")
    finally:
        consumer.close()


def all_stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (state ``T`` in /proc)."""
    states = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as f:
            states.append(f.read().rsplit(")", 1)[1].split()[0])
    return all(state in ("T", "t") for state in states)


def topology(spout: FiniteSpout, bolt: KafkaBolt, tasks: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout)
    builder.set_bolt("kafka", bolt, tasks).shuffle_grouping("numbers")
    return builder.create_topology()


def test_every_tuple_is_acked_after_its_delivery(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    kafka_broker.create_topic(topic_name)
    servers = kafka_broker.bootstrap_servers
    bolt = KafkaBolt(
        servers, DefaultTopicSelector(topic_name), FieldNameBasedTupleToKafkaMapper("key", "id")
    )

    async def main() -> Any:
        async with run_topology(topology(FiniteSpout(2000), bolt, 2)) as running:
            await running.wait_until_complete(timeout=60)
            return [b.delivered for b in running.task_objects("kafka").values()], running

    delivered, running = asyncio.run(main())
    assert sum(delivered) == 2000
    values = read_topic(servers, topic_name, 2000)
    assert sorted(int(v) for v in values) == list(range(2000))
    info = running.info()
    assert list(info.errors) == []


def test_the_topic_comes_from_a_field_and_tuples_without_one_are_skipped(
    kafka_broker: LocalKafkaBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    servers = kafka_broker.bootstrap_servers
    evens, odds = f"{topic_name}-even", f"{topic_name}-odd"
    kafka_broker.create_topic(evens)
    kafka_broker.create_topic(odds)

    from engine import BasicBolt

    class Route(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            n = tuple[0]
            collector.emit([None if n % 10 == 9 else (evens if n % 2 == 0 else odds), n])

        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["topic", "n"])

    bolt = KafkaBolt(
        servers, FieldNameTopicSelector("topic"), FieldNameBasedTupleToKafkaMapper(None, "n")
    )
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(100))
    builder.set_bolt("route", Route()).shuffle_grouping("numbers")
    builder.set_bolt("kafka", bolt).shuffle_grouping("route")

    async def main() -> int:
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=60)
            (b,) = running.task_objects("kafka").values()
            return int(b.skipped)

    with caplog.at_level(logging.WARNING, "engine.kafka"):
        assert asyncio.run(main()) == 10
    warned = [r.getMessage() for r in caplog.records if "have no topic" in r.getMessage()]
    assert warned and sum(int(m.split(": ")[1].split()[0]) for m in warned) == 10
    assert warned[0].endswith(
        "tuples have no topic (field 'topic' is None and there is no default_topic): acked "
        "without being sent, counted in KafkaBolt.skipped"
    )
    assert sorted(int(v) for v in read_topic(servers, evens, 50)) == list(range(0, 100, 2))
    assert sorted(int(v) for v in read_topic(servers, odds, 40)) == [
        n for n in range(1, 100, 2) if n % 10 != 9
    ]


def test_fire_and_forget_acks_without_waiting_for_the_broker(
    own_kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    """With the broker frozen no delivery report can come: fire-and-forget still acks."""
    own_kafka_broker.create_topic(topic_name)
    servers = own_kafka_broker.bootstrap_servers
    bolt = KafkaBolt(
        servers,
        DefaultTopicSelector(topic_name),
        FieldNameBasedTupleToKafkaMapper(None, "id"),
        fire_and_forget=True,
    )
    assert own_kafka_broker.process is not None
    own_kafka_broker.process.send_signal(signal.SIGSTOP)
    try:

        async def main() -> list[int]:
            async with run_topology(topology(FiniteSpout(50), bolt)) as running:
                await running.wait_until_complete(timeout=30)
                (spout,) = running.task_objects("numbers").values()
                return sorted(spout.acked)

        assert asyncio.run(main()) == list(range(50))
    finally:
        own_kafka_broker.process.send_signal(signal.SIGCONT)


def test_a_killed_broker_fails_the_tuples_in_flight_and_nothing_acked_is_lost(
    own_kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    """The broker keeps its records in memory, so what it had is read before it dies: a
    witness consumer reads everything it stored, then it is frozen (SIGSTOP), the topology
    sends more, and the broker is SIGKILLed with those deliveries in flight. They fail (the
    message timeout passes with no broker), the spout replays them, and they reach the
    broker started again on the same port. Every acked tuple is then in one of the two."""
    broker = own_kafka_broker
    broker.create_topic(topic_name)
    servers = broker.bootstrap_servers
    conf = {"topology.message.timeout.secs": 3, "topology.max.spout.pending": 50}
    bolt = KafkaBolt(
        servers, DefaultTopicSelector(topic_name), FieldNameBasedTupleToKafkaMapper(None, "id")
    )
    n = 400

    async def main() -> tuple[list[int], list[int], int, list[str]]:
        async with run_topology(topology(FiniteSpout(n, interval_secs=0.002), bolt), conf) as r:
            (spout,) = r.task_objects("numbers").values()
            await until(lambda: len(spout.acked) >= 100, what="100 acks")
            r.deactivate()
            await r.wait_until_idle(timeout=30)
            first = await asyncio.to_thread(read_topic, servers, topic_name, len(spout.acked))
            acked_before = list(spout.acked)
            assert broker.process is not None
            os.kill(broker.process.pid, signal.SIGSTOP)
            # A stopped broker still answers until every one of its threads has stopped.
            await until(lambda: all_stopped(broker.process.pid), what="the broker stopped")
            r.activate()
            (b,) = r.task_objects("kafka").values()
            await until(lambda: b._pending, what="records handed to the producer")
            broker.kill()
            await until(lambda: len(spout.failed) > 0, timeout=30, what="failed tuples")
            broker.start()  # empty: the old broker's records are the witness's
            await r.wait_until_complete(timeout=60)
            (b,) = r.task_objects("kafka").values()
            errors = [e.error for e in r.info().errors if e.component == "kafka"]
            return acked_before, [int(v) for v in first], b.failed, errors

    acked_before, first, bolt_failed, errors = asyncio.run(main())
    assert sorted(acked_before) == sorted(first)  # everything acked was in the old broker
    later = [int(v) for v in read_topic(servers, topic_name, n - len(acked_before))]
    assert set(first) | set(later) == set(range(n))  # nothing acked is lost
    assert bolt_failed > 0  # deliveries failed while the broker was gone ...
    assert any("were not delivered" in e for e in errors)


def test_a_misdeclared_bolt_is_refused_naming_what_to_change() -> None:
    with pytest.raises(
        KafkaConfigError,
        match=r"^KafkaBolt: topic_selector must be a DefaultTopicSelector or "
        r"FieldNameTopicSelector, got 'topic'$",
    ):
        KafkaBolt("127.0.0.1:9092", "topic")  # type: ignore[arg-type]


def test_a_record_the_client_refuses_fails_its_tuple_alone(
    kafka_broker: LocalKafkaBroker, topic_name: str
) -> None:
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name)

    from engine import BasicBolt

    class Pad(BasicBolt):
        """Every tenth number padded past the producer's size limit."""

        def execute(self, tuple: Any, collector: Any) -> None:
            n = tuple[0]
            collector.emit([b"%d" % n + (b" " * 5000 if n % 10 == 3 else b"")])

        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["message"])

    bolt = KafkaBolt(
        servers,
        DefaultTopicSelector(topic_name),
        FieldNameBasedTupleToKafkaMapper(None, "message"),
        producer_props={"message.max.bytes": 2000},
    )
    from engine import Spout

    class Once(Spout):
        """Numbers 0..99 with message ids, never replayed: done once each was answered."""

        def open(self, conf: Any, context: Any, collector: Any) -> None:
            self.collector, self.i, self.answered = collector, 0, 0

        def next_tuple(self) -> None:
            if self.i < 100:
                self.collector.emit([self.i], msg_id=self.i)
                self.i += 1

        def ack(self, msg_id: Any) -> None:
            self.answered += 1

        def fail(self, msg_id: Any) -> None:
            self.answered += 1

        def is_exhausted(self) -> bool:
            return self.answered == 100

        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["n"])

    builder = TopologyBuilder()
    builder.set_spout("numbers", Once())
    builder.set_bolt("pad", Pad()).shuffle_grouping("numbers")
    builder.set_bolt("kafka", bolt).shuffle_grouping("pad")

    async def main() -> tuple[int, int, list[str]]:
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=60)
            (b,) = running.task_objects("kafka").values()
            errors = [str(e.error) for e in running.info().errors]
            return b.delivered, b.failed, errors

    delivered, failed, errors = asyncio.run(main())
    assert (delivered, failed) == (90, 10)
    assert sorted(int(v) for v in read_topic(servers, topic_name, 90)) == [
        n for n in range(100) if n % 10 != 3
    ]
    assert any(
        e.startswith(f"bolt 'kafka': producing a record to {topic_name!r} failed: ") for e in errors
    ), errors


def test_cleanup_cancelled_while_the_pump_stops_is_cancelled() -> None:
    """``cleanup`` stops the delivery-report pump and waits for it; a cancellation of
    ``cleanup`` itself meanwhile (a kill's deadline) goes on up, not taken for the pump's."""

    class Idle:
        """A producer with nothing in flight."""

        def __len__(self) -> int:
            return 0

        def poll(self, timeout: float) -> int:
            return 0

    async def scenario() -> str:
        bolt = KafkaBolt("127.0.0.1:1", DefaultTopicSelector("t"))
        bolt._producer = Idle()
        bolt._pending = []
        release = asyncio.Event()
        bolt._pump = asyncio.ensure_future(slow_to_stop(release))
        await asyncio.sleep(0)
        return await cancelled_while_stopping(bolt.cleanup)

    assert run_sync(scenario()) == "cancelled"


class FlakyProducer:
    """A stand-in for the client's producer whose deliveries of ``bad`` values fail the
    first time: ``produce_batch`` keeps each record with its callback, ``poll`` reports."""

    def __init__(self, bad: set[bytes]) -> None:
        self.bad = bad
        self.in_flight: list[tuple[Any, Any]] = []
        self.sent: list[bytes] = []
        self.closed = threading.Event()

    def __len__(self) -> int:
        return len(self.in_flight)

    def produce_batch(self, topic: str, messages: list[dict[str, Any]], on_delivery: Any) -> int:
        self.in_flight += [(Record(topic, m.get("key"), m["value"]), on_delivery) for m in messages]
        return len(messages)

    def purge(self) -> None:
        self.in_flight = []

    def close(self) -> bool:
        self.closed.set()
        return True

    def poll(self, timeout: float) -> int:
        served, self.in_flight = self.in_flight, []
        for record, report in served:
            if record.value() in self.bad:
                self.bad.discard(record.value())
                record.error_ = KafkaError(KafkaError._MSG_TIMED_OUT)
                report(record.error_, record)
            else:
                self.sent.append(record.value())
                report(None, record)
        return len(served)


class Record:
    def __init__(self, topic: str, key: bytes | None, value: bytes) -> None:
        self.topic_, self.key_, self.value_ = topic, key, value
        self.error_: Any = None

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes:
        return self.value_

    def error(self) -> Any:
        return self.error_


def test_only_the_rows_whose_delivery_failed_fail() -> None:
    """A batch whose deliveries partly fail acks the delivered rows and fails only the
    others (matched by their records' key and value), which are replayed and delivered."""
    bad = {str(i).encode() for i in range(3, 200, 7)}
    expected_failures = sorted(int(v) for v in bad)
    producer = FlakyProducer(set(bad))
    bolt = KafkaBolt(
        "stand-in:9092",
        DefaultTopicSelector("t"),
        FieldNameBasedTupleToKafkaMapper(None, "id"),
        producer_factory=lambda props: producer,
    )

    async def main() -> tuple[list[int], int, int, list[str]]:
        conf = {"topology.max.spout.pending": 1000}
        async with run_topology(topology(FiniteSpout(200), bolt), conf) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("numbers").values()
            (b,) = running.task_objects("kafka").values()
            errors = [e.error for e in running.info().errors if e.component == "kafka"]
            return sorted(spout.failed), b.failed, b.delivered, errors

    failed, bolt_failed, delivered, errors = simulate(main())
    assert failed == expected_failures
    assert bolt_failed == len(bad) and delivered == 200
    assert sorted(int(v) for v in producer.sent) == list(range(200))
    assert all("were not delivered" in e for e in errors) and errors


def test_fire_and_forget_reports_the_deliveries_that_failed() -> None:
    """A fire-and-forget tuple is acked when the producer takes its record; a delivery
    that fails later is counted in ``failed`` and reported, never replayed."""
    bad = {str(i).encode() for i in range(5, 100, 10)}
    producer = FlakyProducer(set(bad))
    bolt = KafkaBolt(
        "stand-in:9092",
        DefaultTopicSelector("t"),
        FieldNameBasedTupleToKafkaMapper(None, "id"),
        fire_and_forget=True,
        producer_factory=lambda props: producer,
    )

    async def main() -> tuple[list[int], int, list[str]]:
        async with run_topology(topology(FiniteSpout(100), bolt)) as running:
            await running.wait_until_complete(timeout=60)
            await advance_time(1)  # the pump serves the last reports
            (spout,) = running.task_objects("numbers").values()
            (b,) = running.task_objects("kafka").values()
            errors = [str(e.error) for e in running.info().errors if e.component == "kafka"]
            return sorted(spout.failed), b.failed, errors

    failed, bolt_failed, errors = simulate(main())
    assert failed == []
    assert bolt_failed == len(bad)
    assert sorted(int(v) for v in producer.sent) == sorted(
        set(range(100)) - {5, 15, 25, 35, 45, 55, 65, 75, 85, 95}
    )
    assert errors and all(
        "fire-and-forget records were not delivered to stand-in:9092" in e
        and "their tuples were acked already" in e
        for e in errors
    ), errors


def test_producers_are_closed_at_cleanup_and_when_a_crashed_task_restarts() -> None:
    """A crashed task gets no ``cleanup``; its producer must not stay connected (and log
    the broker's absence) until the object happens to be collected: the task's next object
    closes it. ``cleanup`` closes the live one."""
    producers: list[FlakyProducer] = []

    def factory(props: dict[str, Any]) -> FlakyProducer:
        producers.append(producer := FlakyProducer(set()))
        return producer

    bolt = KafkaBolt(
        "stand-in:9092",
        DefaultTopicSelector("t"),
        FieldNameBasedTupleToKafkaMapper(None, "id"),
        producer_factory=factory,
    )

    async def main() -> list[Any]:
        spout = FiniteSpout(300, interval_secs=0.01)
        async with run_topology(topology(spout, bolt)) as running:
            await advance_time(1)
            crashed = list(running.task_objects("kafka").values())  # kept alive
            running.inject(CrashTask(component="kafka"))
            await advance_time(1)
            assert len(producers) == 2
            assert producers[0].closed.wait(10), "the crashed task's producer is still open"
            assert not producers[1].closed.is_set()
            await running.wait_until_complete(timeout=60)
        return crashed

    assert simulate(main())
    assert producers[1].closed.wait(10)


class TopicsProducer:
    """A stand-in producer that delivers only the records of topics in ``reachable`` (the
    others stay in flight, as records to a partition whose leader is away)."""

    def __init__(self, reachable: set[str]) -> None:
        self.reachable = reachable
        self.in_flight: list[tuple[Any, Any]] = []

    def __len__(self) -> int:
        return len(self.in_flight)

    def produce_batch(self, topic: str, messages: list[dict[str, Any]], on_delivery: Any) -> int:
        self.in_flight += [(Record(topic, m.get("key"), m["value"]), on_delivery) for m in messages]
        return len(messages)

    def poll(self, timeout: float) -> int:
        served = [(r, report) for r, report in self.in_flight if r.topic_ in self.reachable]
        self.in_flight = [
            (r, report) for r, report in self.in_flight if r.topic_ not in self.reachable
        ]
        for record, report in served:
            report(None, record)
        return len(served)

    def purge(self) -> None:
        self.in_flight = []

    def close(self) -> None:
        pass


class Batch:
    """A stand-in batch: ``len`` and ``column``, all ``execute_batch`` reads."""

    def __init__(self, name: str, columns: dict[str, list[Any]]) -> None:
        self.name, self.columns = name, columns

    def __len__(self) -> int:
        return len(self.columns["message"])

    def column(self, name: str) -> list[Any]:
        return self.columns[name]


class Acks:
    """A stand-in collector: which batches were acked and failed."""

    def __init__(self) -> None:
        self.acked: list[str] = []
        self.failed: list[str] = []

    def ack(self, batch: Batch, rows: Any = None) -> None:
        self.acked.append(batch.name)

    def fail(self, batch: Batch, rows: Any = None) -> None:
        self.failed.append(batch.name)

    def report_error(self, error: Any) -> None:
        raise AssertionError(error)


class Context:
    clock = None

    def get_this_component_id(self) -> str:
        return "kafka"

    def get_storm_id(self) -> str:
        return f"topics-producer-{id(self)}"

    def get_this_task_index(self) -> int:
        return 0


def slow_fast_slow(producer: TopicsProducer) -> tuple[KafkaBolt, Acks, list[Batch]]:
    """A bolt with three batches in flight: to ``slow``, ``fast``, ``slow``."""
    bolt = KafkaBolt(
        "stand-in:9092",
        FieldNameTopicSelector("topic"),
        FieldNameBasedTupleToKafkaMapper(None, "message"),
        producer_factory=lambda props: producer,  # type: ignore[arg-type,return-value]
    )
    acks = Acks()
    bolt.prepare({}, Context(), acks)  # type: ignore[arg-type]
    batches = [
        Batch(name, {"topic": [topic] * 3, "message": [b"%d" % i for i in range(3)]})
        for name, topic in [("old", "slow"), ("middle", "fast"), ("new", "slow")]
    ]
    return bolt, acks, batches


def test_a_batch_delivered_while_older_and_newer_ones_fly_is_acked_at_once() -> None:
    """Batches finish in any order: one to a topic whose records come back is acked as its
    reports come, although the batches before and after it (to a slow topic) still wait.
    It waited for one of those (until the message timeout), and its tuples timed out."""
    producer = TopicsProducer({"fast"})

    async def main() -> tuple[list[str], list[str]]:
        bolt, acks, batches = slow_fast_slow(producer)
        for batch in batches:
            await bolt.execute_batch(batch)  # type: ignore[arg-type]
        await advance_time(0.1)
        acked_while_flying = list(acks.acked)
        producer.reachable.add("slow")
        await advance_time(0.1)
        await bolt.cleanup()
        return acked_while_flying, acks.acked

    acked_while_flying, acked = simulate(main())
    assert acked_while_flying == ["middle"]
    assert acked == ["middle", "old", "new"]


def test_cleanup_acks_a_delivered_batch_between_two_that_never_are() -> None:
    """At cleanup every batch the broker confirmed is acked; only those still in flight
    after the wait are left (to time out and be replayed). The batch between two such was
    left too, and replayed: written to the topic twice."""
    producer = TopicsProducer({"fast"})

    async def main() -> tuple[list[str], list[str]]:
        bolt, acks, batches = slow_fast_slow(producer)
        for batch in batches:
            await bolt.execute_batch(batch)  # type: ignore[arg-type]
        await bolt.cleanup()
        return acks.acked, acks.failed

    assert simulate(main()) == (["middle"], [])
