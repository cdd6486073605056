"""A stateful word count shared by the state tests (and the SIGKILL child)."""

from __future__ import annotations

import collections
from typing import Any

from engine import BasicBolt, Fields, Spout, StormTopology, TopologyBuilder
from engine.state import BasicStatefulBolt, StatefulBolt

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date"]


def sentences(n: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 4)) for i in range(n)]


def truth(n: int) -> collections.Counter[str]:
    return collections.Counter(w for s in sentences(n) for w in s.split())


class SentenceSpout(Spout):
    """Emits sentence ``i`` with message id ``i`` at most every ``interval_secs``; replays
    every failed one. Exhausted once each was acked."""

    def __init__(self, n: int, interval_secs: float = 0.001) -> None:
        self.n = n
        self.interval_secs = interval_secs

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.sentences = sentences(self.n)
        self.next = 0
        self.next_at = 0
        self.retry: collections.deque[int] = collections.deque()
        self.acked: set[int] = set()
        self.failed = 0

    def next_tuple(self) -> None:
        now = self.clock.now_ns()
        if now < self.next_at:
            return
        if self.retry:
            i = self.retry.popleft()
        elif self.next < self.n:
            i = self.next
            self.next += 1
        else:
            return
        self.collector.emit([self.sentences[i]], msg_id=i)
        self.next_at = now + int(self.interval_secs * 1e9)

    def ack(self, msg_id: Any) -> None:
        self.acked.add(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed += 1
        self.retry.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for word in tuple[0].split():
            collector.emit([word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class BasicCount(BasicStatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute(self, tuple: Any, collector: Any) -> None:
        word = tuple[0]
        self.counts.put(word, self.counts.get(word, 0) + 1)
        collector.emit([word, self.counts.get(word)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word", "count"])


class RichCount(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        word = tuple[0]
        self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.ack(tuple)


def build(n: int, *, rich: bool = False, counters: int = 2, interval_secs: float = 0.001) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(n, interval_secs))
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    count = RichCount() if rich else BasicCount()
    builder.set_bolt("count", count, counters).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def committed_counts(running: Any) -> collections.Counter[str]:
    """The counts in every count task's state."""
    total: collections.Counter[str] = collections.Counter()
    for bolt in running.task_objects("count").values():
        assert bolt.state is not None
        for word, count in bolt.state.items():
            total[word] += count
    return total
