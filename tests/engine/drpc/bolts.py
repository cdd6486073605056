"""Bolts for the DRPC tests: small functions computed by linear DRPC topologies."""

from __future__ import annotations

import random
from typing import Any

from engine import BasicBolt, Bolt, FailedException
from engine.coordination import BatchBolt
from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC


class Exclaim(BasicBolt):
    """``(id, args) -> (id, args + "!")``: the one-bolt function of Storm's examples."""

    def execute(self, tuple: Any, collector: Any) -> None:
        collector.emit([tuple[0], tuple[1] + "!"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


class Split(BasicBolt):
    """Enveloped: ``(args,) -> (word,)`` per word."""

    def execute(self, tuple: Any, collector: Any) -> None:
        for word in tuple[0].split():
            collector.emit([word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class Upper(BasicBolt):
    """``(id, word) -> (id, WORD)``; fails the tuple for words listed in ``poison``, and
    each of the others with probability ``fail_rate``."""

    def __init__(
        self, fail_rate: float = 0.0, poison: frozenset[str] = frozenset(), seed: int = 0
    ) -> None:
        self.fail_rate = fail_rate
        self.poison = poison
        self.seed = seed

    def prepare(self, conf: Any, context: Any) -> None:
        self.rng = random.Random(self.seed * 1000 + context.get_this_task_id())

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple[1] in self.poison or (self.fail_rate and self.rng.random() < self.fail_rate):
            raise FailedException("injected")
        collector.emit([tuple[0], tuple[1].upper()])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "word"])


class JoinWords(BatchBolt):
    """Per request: the sorted words joined by spaces."""

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id, self.words = collector, id, []

    def execute(self, tuple: Any) -> None:
        self.words.append(tuple[1])

    def finish_batch(self) -> None:
        self.collector.emit([self.id, " ".join(sorted(self.words))])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


class Hold(Bolt):
    """Never acks: every request through it hangs in the topology."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.held.append(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


def upper_words(
    drpc: LocalDRPC,
    parallelism: int = 2,
    fail_rate: float = 0.0,
    poison: frozenset[str] = frozenset(),
    seed: int = 0,
) -> Any:
    """``upper("b a c") == "A B C"``: split (enveloped) -> upper -> join (batch bolt)."""
    builder = LinearDRPCTopologyBuilder("upper")
    builder.add_bolt(Split(), parallelism, envelope=True)
    builder.add_bolt(Upper(fail_rate, poison, seed), parallelism).shuffle_grouping()
    builder.add_bolt(JoinWords(), parallelism).fields_grouping(["id"])
    return builder.create_local_topology(drpc)


def exclaim(drpc: LocalDRPC, parallelism: int = 1) -> Any:
    builder = LinearDRPCTopologyBuilder("exclaim")
    builder.add_bolt(Exclaim(), parallelism)
    return builder.create_local_topology(drpc)


def expected_upper(args: str) -> str:
    return " ".join(sorted(w.upper() for w in args.split()))


#: label -> the request ids ``RecordingExclaim`` saw, in order
REQUEST_IDS: dict[str, list[int]] = {}


class RecordingExclaim(Exclaim):
    """``Exclaim`` that also records each request id under ``label``."""

    def __init__(self, label: str) -> None:
        self.label = label

    def execute(self, tuple: Any, collector: Any) -> None:
        REQUEST_IDS.setdefault(self.label, []).append(tuple[0])
        super().execute(tuple, collector)


class Picky(BasicBolt):
    """``Exclaim`` that raises ``ValueError`` for the argument ``"boom"``."""

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple[1] == "boom":
            raise ValueError(f"cannot exclaim {tuple[1]!r}")
        collector.emit([tuple[0], tuple[1] + "!"])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


class CountChars(BatchBolt):
    """Per request: how many characters its arguments have."""

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.collector, self.id, self.count = collector, id, 0

    def execute(self, tuple: Any) -> None:
        self.count += len(tuple[1])

    def finish_batch(self) -> None:
        self.collector.emit([self.id, str(self.count)])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "result"])


class NoSum(CountChars):
    """``CountChars`` whose ``finish_batch`` raises ``ValueError``."""

    def finish_batch(self) -> None:
        raise ValueError(f"cannot sum {self.count} characters")
