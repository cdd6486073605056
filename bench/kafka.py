"""KafkaSpout and KafkaBolt against raw client loops, on the same topic and broker.

    python bench/kafka.py            # ~1 minute; needs the kafka extra; last line: JSON

1. Spout: a ``KafkaSpout`` (one task, ``AT_LEAST_ONCE``: every record a tracked tree, the
   acked prefix committed) into a batch bolt that counts and acks, until every record of a
   topic of ``RECORDS`` small records was counted; against a raw consumer loop that
   assigns the partition and counts records from ``consume`` (no acking, no commits).
   Target: >= 0.8x.
2. Bolt: a spout emitting ``(key, value)`` rows in batches with message ids into a
   ``KafkaBolt`` that acks each row after its delivery report, until every row is acked;
   against a raw producer loop that produces the same records with a delivery callback and
   flushes. Target: >= 0.8x.

A Kafka-protocol broker (``LocalKafkaBroker``) is started on a free loopback port. Each
measurement runs once per round, rounds interleaved, best of 3 (the machine is shared).
"""

from __future__ import annotations

import collections
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from confluent_kafka import Consumer, Producer, TopicPartition

from engine import BatchBolt, Spout, TopologyBuilder, run_topology
from engine.kafka import (
    DefaultTopicSelector,
    FieldNameBasedTupleToKafkaMapper,
    FirstPollOffsetStrategy,
    KafkaBolt,
    KafkaSpout,
    KafkaSpoutConfig,
    LocalKafkaBroker,
)

RECORDS = 300_000
BATCH = 1000
VALUE = b"x" * 24
CONF = {"topology.max.spout.pending": 50_000}
BOLT_CONF = {"topology.max.spout.pending": 200_000}


class Count(BatchBolt):
    """Counts and acks every row."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.count = 0

    def execute_batch(self, batch: Any) -> None:
        self.count += len(batch)
        self.collector.ack(batch)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


async def spout_rows_per_s(servers: str, topic: str, run: int) -> float:
    config = KafkaSpoutConfig(
        servers,
        [topic],
        group_id=f"bench-{run}",
        first_poll_offset_strategy=FirstPollOffsetStrategy.EARLIEST,
        offset_commit_period_ms=1000,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config))
    builder.set_bolt("count", Count()).shuffle_grouping("kafka")
    start = time.perf_counter()
    async with run_topology(builder.create_topology(), CONF) as running:
        (bolt,) = running.task_objects("count").values()
        while bolt.count < RECORDS:
            await _sleep()
        took = time.perf_counter() - start
    return RECORDS / took


async def _sleep() -> None:
    import asyncio

    await asyncio.sleep(0.001)


def raw_consumer_rows_per_s(servers: str, topic: str, run: int) -> float:
    start = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"raw-{run}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    n = 0
    while n < RECORDS:
        for msg in consumer.consume(10_000, 0.1):
            if msg.error() is None:
                n += 1
    took = time.perf_counter() - start
    consumer.close()
    return RECORDS / took


class Rows(Spout):
    """``RECORDS`` rows ``(key, value)`` in batches with message ids; replays failures."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector, self.i, self.acked = collector, 0, 0
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.failed:
            ids, self.failed = self.failed[:BATCH], self.failed[BATCH:]
        elif self.i < RECORDS:
            ids = list(range(self.i, min(self.i + BATCH, RECORDS)))
            self.i += len(ids)
        else:
            return
        self.collector.emit_batch([[None] * len(ids), [VALUE] * len(ids)], msg_ids=ids)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        self.acked += len(msg_ids)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.acked == RECORDS

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["key", "value"])


async def bolt_rows_per_s(servers: str, topic: str) -> float:
    builder = TopologyBuilder()
    builder.set_spout("rows", Rows())
    bolt = KafkaBolt(
        servers, DefaultTopicSelector(topic), FieldNameBasedTupleToKafkaMapper(None, "value")
    )
    builder.set_bolt("kafka", bolt).shuffle_grouping("rows")
    start = time.perf_counter()
    async with run_topology(builder.create_topology(), BOLT_CONF) as running:
        await running.wait_until_complete(timeout=600)
        took = time.perf_counter() - start
    return RECORDS / took


def raw_producer_rows_per_s(servers: str, topic: str) -> float:
    start = time.perf_counter()
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
    delivered = 0

    def report(error: Any, msg: Any) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1

    for _ in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.005)
    producer.flush(60)
    took = time.perf_counter() - start
    assert delivered == RECORDS, delivered
    return RECORDS / took


async def main() -> dict[str, float]:
    best: dict[str, float] = collections.defaultdict(float)
    with LocalKafkaBroker() as broker:
        servers = broker.bootstrap_servers
        broker.create_topic("bench-in")
        raw_producer_rows_per_s(servers, "bench-in")  # the spout's input
        for run in range(3):
            broker.create_topic(f"bench-out-{run}")
            broker.create_topic(f"bench-raw-{run}")
            best["spout"] = max(best["spout"], await spout_rows_per_s(servers, "bench-in", run))
            best["consumer"] = max(
                best["consumer"], raw_consumer_rows_per_s(servers, "bench-in", run)
            )
            best["bolt"] = max(best["bolt"], await bolt_rows_per_s(servers, f"bench-out-{run}"))
            best["producer"] = max(
                best["producer"], raw_producer_rows_per_s(servers, f"bench-raw-{run}")
            )
    return best


if __name__ == "__main__":
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    best = uvloop.run(main())
    spout_ratio = best["spout"] / best["consumer"]
    bolt_ratio = best["bolt"] / best["producer"]
    print(f"raw consumer loop                 {best['consumer']:>12,.0f} records/s")
    print(
        f"KafkaSpout -> counting bolt       {best['spout']:>12,.0f} records/s "
        f"({spout_ratio:.2f}x raw; target >= 0.8x)"
    )
    print(f"raw producer loop                 {best['producer']:>12,.0f} records/s")
    print(
        f"spout -> KafkaBolt                {best['bolt']:>12,.0f} records/s "
        f"({bolt_ratio:.2f}x raw; target >= 0.8x)"
    )
    print(
        json.dumps(
            {
                "spout_rows_per_s": round(best["spout"]),
                "raw_consumer_rows_per_s": round(best["consumer"]),
                "spout_vs_raw_consumer": round(spout_ratio, 3),
                "bolt_rows_per_s": round(best["bolt"]),
                "raw_producer_rows_per_s": round(best["producer"]),
                "bolt_vs_raw_producer": round(bolt_ratio, 3),
            }
        )
    )
