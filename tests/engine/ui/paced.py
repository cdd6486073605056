"""A small topology that keeps running at a modest pace, for the UI's tests and screenshots:
words -> split (2 executors) -> count (fields grouping) and a bolt that reports an error now
and then (with its traceback)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from engine import BasicBolt, Fields, Spout, TopologyBuilder

SENTENCES = ["the cat sat on the mat", "storm squall and rain", "a tuple tree is acked"]


class PacedSpout(Spout):
    """Emits a sentence every ``pause`` seconds (forever, or ``limit`` of them)."""

    def __init__(self, pause: float = 0.002, limit: int | None = None) -> None:
        self.pause = pause
        self.limit = limit

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0
        self.acked = 0
        self.failed = 0

    async def next_tuple(self) -> None:
        if self.limit is not None and self.i >= self.limit:
            return
        await asyncio.sleep(self.pause)
        self.collector.emit([SENTENCES[self.i % len(SENTENCES)]], msg_id=self.i)
        self.i += 1

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:  # no replay: the UI shows the failures
        self.failed += 1

    def is_exhausted(self) -> bool:
        return self.limit is not None and self.acked + self.failed >= self.limit

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for word in tuple[0].split():
            collector.emit([word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Count(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def execute(self, tuple: Any, collector: Any) -> None:
        self.counts[tuple[0]] += 1
        if tuple[0] == "rain" and self.counts["rain"] % 50 == 1:
            raise ValueError(f"no umbrella for rain #{self.counts['rain']}")


def paced_topology(pause: float = 0.002, limit: int | None = None) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("sentences", PacedSpout(pause, limit))
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", Count(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()
