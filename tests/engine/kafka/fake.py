"""An in-memory stand-in for the client's consumer, for tests on virtual time (the real
broker's tests are in the other modules): ``KafkaSpout(config, consumer_factory=...)``.

It keeps topics as lists of values per partition and the group's commits in a dict, and
answers the calls the spout makes: ``list_topics``, ``committed``,
``get_watermark_offsets``, ``assign``, ``consume``, ``seek``, ``commit``, ``pause``/``resume``.
``latency`` makes the calls a real client blocks on (metadata, committed offsets,
assignments, a synchronous commit) take that long in real time, as a broker's round trip
does; ``consume`` and an asynchronous commit never wait, as with the real client.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition


class FakeMessage:
    __slots__ = ("_offset", "_partition", "_topic", "_value")

    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return self._value

    def error(self) -> None:
        return None


_CLUSTERS: dict[int, FakeCluster] = {}


def _cluster(key: int) -> FakeCluster:
    return _CLUSTERS[key]


@dataclass
class FakeCluster:
    """Topics (name -> partitions -> values) and committed offsets (group, topic, p).

    Components are copied per task; the copies of a cluster are the cluster itself, as
    copies of a client's connection settings reach the same broker."""

    topics: dict[str, list[list[bytes]]] = field(default_factory=dict)
    commits: dict[tuple[str, str, int], int] = field(default_factory=dict)
    #: real seconds each blocking call takes
    latency: float = 0.0

    def __post_init__(self) -> None:
        _CLUSTERS[id(self)] = self

    def __reduce__(self) -> Any:
        return _cluster, (id(self),)

    def __deepcopy__(self, memo: Any) -> FakeCluster:
        return self

    def consumer(self, props: dict[str, Any]) -> FakeConsumer:
        return FakeConsumer(self, props["group.id"])


class FakeConsumer:
    def __init__(self, cluster: FakeCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.positions: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        # the spout calls from its loop and from its I/O thread, as the real client allows
        self._lock = threading.Lock()

    def _round_trip(self) -> None:
        if self.cluster.latency:
            time.sleep(self.cluster.latency)

    def list_topics(self, timeout: float = -1) -> Any:
        self._round_trip()
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(partitions=dict.fromkeys(range(len(parts))))
                for name, parts in self.cluster.topics.items()
            }
        )

    def committed(self, tps: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        self._round_trip()
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.cluster.commits.get((self.group, tp.topic, tp.partition), -1001),
            )
            for tp in tps
        ]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float = -1) -> tuple[int, int]:
        self._round_trip()
        return 0, len(self.cluster.topics[tp.topic][tp.partition])

    def assign(self, tps: list[TopicPartition]) -> None:
        self._round_trip()
        with self._lock:
            self.positions = {(tp.topic, tp.partition): tp.offset for tp in tps}

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        self._round_trip()
        with self._lock:
            self.positions.update({(tp.topic, tp.partition): tp.offset for tp in tps})

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        self._round_trip()
        with self._lock:
            for tp in tps:
                self.positions.pop((tp.topic, tp.partition), None)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        out: list[FakeMessage] = []
        with self._lock:
            for (topic, p), pos in self.positions.items():
                if (topic, p) in self.paused:
                    continue
                values = self.cluster.topics[topic][p]
                take = values[pos : pos + num_messages - len(out)]
                out += [FakeMessage(topic, p, pos + i, v) for i, v in enumerate(take)]
                self.positions[(topic, p)] = pos + len(take)
        return out

    def seek(self, tp: TopicPartition) -> None:
        with self._lock:
            self.positions[(tp.topic, tp.partition)] = tp.offset

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> None:
        if not asynchronous:
            self._round_trip()
        for tp in offsets:
            self.cluster.commits[(self.group, tp.topic, tp.partition)] = tp.offset

    def pause(self, tps: list[TopicPartition]) -> None:
        self.paused.update((tp.topic, tp.partition) for tp in tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self.paused.difference_update((tp.topic, tp.partition) for tp in tps)

    def close(self) -> None:
        pass
