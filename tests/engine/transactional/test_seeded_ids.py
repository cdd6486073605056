"""Attempt ids come from ``topology.seed``: the same seed replays them, another changes
them, and a restarted coordinator never hands out an id again."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from engine import BasicBolt, run_topology
from engine.testing import CrashTask, advance_time, simulate
from engine.transactional import (
    TransactionalCoordinator,
    TransactionalEmitter,
    TransactionalSpout,
    TransactionalTopologyBuilder,
)

#: label -> every attempt a batch bolt saw, in order
SEEN: dict[str, list[Any]] = defaultdict(list)


class _Windows(TransactionalCoordinator):
    """Six transactions per coordinator instance, then idle (a short list to compare)."""

    def __init__(self) -> None:
        self.started = 0

    def is_ready(self) -> bool:
        return self.started < 6

    def initialize_transaction(self, txid: int, prev: Any) -> Any:
        self.started += 1
        return (txid - 1) * 3


class _Emit(TransactionalEmitter):
    def emit_batch(self, tx: Any, start: Any, collector: Any) -> None:
        for n in range(start, start + 3):
            collector.emit([tx, n])


class Numbers(TransactionalSpout):
    def get_coordinator(self, conf: Any, context: Any) -> TransactionalCoordinator:
        return _Windows()

    def get_emitter(self, conf: Any, context: Any) -> TransactionalEmitter:
        return _Emit()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx", "n"])


class RecordAttempts(BasicBolt):
    def __init__(self, label: str) -> None:
        self.label = label

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple[1] % 3 == 0:  # once per batch
            SEEN[self.label].append(tuple[0])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["tx"])


def attempts(label: str, seed: int | None, faults: list[Any] | None = None) -> list[Any]:
    builder = TransactionalTopologyBuilder(f"tx-{label}", "numbers", Numbers())
    builder.set_bolt("record", RecordAttempts(label)).shuffle_grouping("numbers")
    conf = {"topology.seed": seed, "topology.max.spout.pending": 2}

    async def main() -> None:
        async with run_topology(builder.build_topology(), conf, faults=faults or []):
            await advance_time(2.0)

    SEEN.pop(label, None)
    simulate(main())
    return SEEN.pop(label)


def test_the_same_seed_gives_the_same_attempt_ids_and_another_seed_others() -> None:
    first, again, other = attempts("a", 7), attempts("b", 7), attempts("c", 8)
    assert len(first) >= 5
    assert [a.transaction_id for a in first[:5]] == [1, 2, 3, 4, 5]
    assert first == again
    assert {a.attempt_id for a in first}.isdisjoint(a.attempt_id for a in other)


def test_a_restarted_coordinator_never_reuses_an_attempt_id() -> None:
    crash = CrashTask(component="numbers/coordinator", at=1.0)
    seen = attempts("crash", 7, [crash])
    assert len(seen) >= 5
    assert len({a.attempt_id for a in seen}) == len(seen)
    assert seen == attempts("crash-again", 7, [CrashTask(component="numbers/coordinator", at=1.0)])
