"""What the Kafka tests share: producing records, reading commits back, a bolt that records
what it saw (and can fail or hold chosen records), and waiting for a condition."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from engine import Bolt

#: name -> (partition, offset, value) in the order the bolts executed them, across restarts
SEEN: dict[str, list[tuple[int, int, bytes]]] = collections.defaultdict(list)


def produce(
    servers: str, topic: str, values: Iterable[Any], *, partition: int = 0, packed: bool = True
) -> None:
    """Produce ``values`` to one partition: ``packed`` lets the producer put many records
    into one batch; otherwise each goes alone (one batch per record)."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20 if packed else 0})
    for v in values:
        producer.produce(topic, str(v).encode(), partition=partition)
        if not packed:
            producer.flush(10)
    assert producer.flush(10) == 0


def committed(servers: str, group: str, topic: str, partitions: int = 1) -> list[int | None]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10
        )
        return [tp.offset if tp.offset >= 0 else None for tp in found]
    finally:
        consumer.close()


def commit(servers: str, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commit as an earlier run of a topology would have."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


class Record(Bolt):
    """Records ``(partition, offset, value)`` of each input in ``SEEN[name]``; fails the
    offsets in ``fail`` (always), holds those in ``hold`` unacked until ``release``."""

    def __init__(
        self, name: str, fail: Iterable[int] = (), hold: Callable[[int], bool] | None = None
    ) -> None:
        self.name = name
        self.fail_offsets = frozenset(fail)
        self.hold = hold

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        partition, offset, value = tuple[1], tuple[2], tuple[4]
        SEEN[self.name].append((partition, offset, value))
        if offset in self.fail_offsets:
            self.collector.fail(tuple)
        elif self.hold is not None and self.hold(offset):
            self.held.append(tuple)
        else:
            self.collector.ack(tuple)

    def release(self) -> None:
        held, self.held = self.held, []
        for t in held:
            self.collector.ack(t)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def offsets(name: str, partition: int = 0) -> list[int]:
    return [o for p, o, _ in SEEN[name] if p == partition]


async def until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Wait (on the wall clock: the broker is real) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or condition}")
        await asyncio.sleep(0.01)


async def commit_rounds(spout: Any, n: int, timeout: float = 30.0) -> None:
    """Wait until ``spout`` (a ``KafkaSpout``) ran ``n`` more periodic commit rounds: a
    stretch of its life in which something that must not happen had every chance to."""
    start = spout.commit_rounds
    await until(lambda: spout.commit_rounds >= start + n, timeout, f"{n} commit rounds")
