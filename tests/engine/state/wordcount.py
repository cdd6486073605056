"""A stateful word count shared by the state tests (and the SIGKILL child)."""

from __future__ import annotations

import collections
from typing import Any

from engine import BasicBatchBolt, BasicBolt, Fields, Spout, StormTopology, TopologyBuilder
from engine.state import BasicStatefulBatchBolt, BasicStatefulBolt, StatefulBatchBolt, StatefulBolt

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date"]


def sentences(n: int) -> list[str]:
    return [
        " ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(1 + i % 4)) for i in range(n)
    ]


def truth(n: int) -> collections.Counter[str]:
    return collections.Counter(w for s in sentences(n) for w in s.split())


class SentenceSpout(Spout):
    """Emits sentence ``i`` with message id ``i`` at most every ``interval_secs``; replays
    every failed one. Exhausted once each was acked."""

    def __init__(self, n: int, interval_secs: float = 0.001, acked_path: str | None = None) -> None:
        self.n = n
        self.interval_secs = interval_secs
        #: a file of acked ids (one a line): a restarted spout skips them, as a spout whose
        #: source commits offsets does
        self.acked_path = acked_path

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.clock = context.clock
        self.sentences = sentences(self.n)
        self.next = 0
        self.next_at = 0
        self.retry: collections.deque[int] = collections.deque()
        self.acked: set[int] = set()
        self.failed = 0
        self.log = None
        if self.acked_path is not None:
            with open(self.acked_path, "a+") as f:
                f.seek(0)
                self.acked = {int(line) for line in f if line.strip()}
            self.log = open(self.acked_path, "a")  # noqa: SIM115 - closed in close()
        self.todo = collections.deque(i for i in range(self.n) if i not in self.acked)

    def next_tuple(self) -> None:
        now = self.clock.now_ns()
        if now < self.next_at:
            return
        if self.retry:
            i = self.retry.popleft()
        elif self.todo:
            i = self.todo.popleft()
        else:
            return
        self.collector.emit([self.sentences[i], i], msg_id=i)
        self.next_at = now + int(self.interval_secs * 1e9)

    def ack(self, msg_id: Any) -> None:
        self.acked.add(msg_id)
        if self.log is not None:
            self.log.write(f"{msg_id}\n")
            self.log.flush()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    def fail(self, msg_id: Any) -> None:
        self.failed += 1
        self.retry.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence", "id"])


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


class BatchSplit(BasicBatchBolt):
    """``Split`` on columns: the columnar road leading into state."""

    def execute_batch(self, batch: Any, collector: Any) -> None:
        collector.emit_flat([s.split() for s in batch.column("sentence")])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class BatchCount(BasicStatefulBatchBolt):
    def init_state(self, state: Any) -> None:
        self.counts = state

    def execute_batch(self, batch: Any, collector: Any) -> None:
        for word, n in collections.Counter(batch.column("word")).items():
            self.counts.put(word, self.counts.get(word, 0) + n)


class RichBatchCount(StatefulBatchBolt):
    """Acks its rows itself, the last one in a second call (held until the commit)."""

    def init_state(self, state: Any) -> None:
        self.counts = state

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute_batch(self, batch: Any) -> None:
        for word, n in collections.Counter(batch.column("word")).items():
            self.counts.put(word, self.counts.get(word, 0) + n)
        self.collector.ack(batch, list(range(batch.n - 1)))
        self.collector.ack(batch, [batch.n - 1])


class SplitIndexed(BasicBolt):
    """Emits ``(sentence id, position, word)``: the key of an idempotent update."""

    def execute(self, tuple: Any, collector: Any) -> None:
        for j, word in enumerate(tuple[0].split()):
            collector.emit([tuple[1], j, word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "position", "word"])


class IdempotentWords(BasicStatefulBolt):
    """Puts ``(id, position) -> word``: replaying a tuple writes the same entry again."""

    def init_state(self, state: Any) -> None:
        self.words = state

    def execute(self, tuple: Any, collector: Any) -> None:
        self.words.put((tuple[0], tuple[1]), tuple[2])


def build(
    n: int,
    *,
    rich: bool = False,
    split: str = "basic",
    count: str = "basic",
    idempotent: bool = False,
    counters: int = 2,
    interval_secs: float = 0.001,
    acked_path: str | None = None,
) -> StormTopology:
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(n, interval_secs, acked_path))
    if idempotent:
        builder.set_bolt("split", SplitIndexed(), 2).shuffle_grouping("sentences")
        builder.set_bolt("count", IdempotentWords(), counters).fields_grouping(
            "split", Fields("id")
        )
        return builder.create_topology()
    builder.set_bolt("split", BatchSplit() if split == "batch" else Split(), 2).shuffle_grouping(
        "sentences"
    )
    bolt = {
        "basic": BasicCount,
        "rich": RichCount,
        "batch": BatchCount,
        "rich-batch": RichBatchCount,
    }["rich" if rich else count]()
    builder.set_bolt("count", bolt, counters).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def state_counts(entries: Any, *, idempotent: bool = False) -> collections.Counter[str]:
    """Word counts from ``(key, value)`` state entries of either bolt."""
    total: collections.Counter[str] = collections.Counter()
    for key, value in entries:
        if idempotent:
            total[value] += 1
        else:
            total[key] += value
    return total


def committed_counts(running: Any, *, idempotent: bool = False) -> collections.Counter[str]:
    """The counts in every count task's state."""
    entries = []
    for bolt in running.task_objects("count").values():
        assert bolt.state is not None
        entries.extend(bolt.state.items())
    return state_counts(entries, idempotent=idempotent)
