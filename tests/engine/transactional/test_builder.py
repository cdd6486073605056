"""TransactionalTopologyBuilder: Storm's wiring, a plain TransactionalSpout, and errors."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from engine import BasicBolt, InvalidComponentError, InvalidGroupingError, run_topology
from engine.coordination import (
    BatchBolt,
    BatchBoltExecutor,
    CoordinatedBolt,
    IdStreamSpec,
    SourceArgs,
)
from engine.testing import simulate
from engine.transactional import (
    BATCH_STREAM_ID,
    COMMIT_STREAM_ID,
    Committer,
    MemoryStateStore,
    TransactionalCoordinator,
    TransactionalEmitter,
    TransactionalSpout,
    TransactionalSpoutCoordinator,
    TransactionalStateError,
    TransactionalTopologyBuilder,
    TransactionAttempt,
)

from .counting import LOGS, GlobalCount, LogSpout, PartialCount

SEEN: dict[str, list[tuple[int, list[int]]]] = {}


class Windows(TransactionalCoordinator):
    def __init__(self, last: int) -> None:
        self.last = last
        self.started = 0

    def initialize_transaction(self, txid: int, prev: Any) -> Any:
        self.started = txid
        return (txid - 1) * 10

    def is_ready(self) -> bool:
        return self.started < self.last


class Numbers(TransactionalSpout):
    """Transaction t carries 10(t-1) .. 10t - 1, enveloped: the emitter never writes tx."""

    def get_coordinator(self, conf: Any, context: Any) -> TransactionalCoordinator:
        return Windows(5)

    def get_emitter(self, conf: Any, context: Any) -> TransactionalEmitter:
        return Emit()

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Emit(TransactionalEmitter):
    def emit_batch(self, tx: Any, start: Any, collector: Any) -> None:
        for n in range(start, start + 10):
            collector.emit([n])


class Collect(BatchBolt, Committer):
    def __init__(self, name: str) -> None:
        self.name = name

    def prepare(self, conf: Any, context: Any, collector: Any, id: Any) -> None:
        self.id, self.values = id, []

    def execute(self, tuple: Any) -> None:
        self.values.append(tuple["n"])

    def finish_batch(self) -> None:
        SEEN.setdefault(self.name, []).append((self.id.transaction_id, sorted(self.values)))


def test_a_plain_transactional_spout_enveloped_end_to_end() -> None:
    name = uuid.uuid4().hex
    builder = TransactionalTopologyBuilder("numbers", "numbers", Numbers(), envelope=True)
    builder.set_bolt("collect", Collect(name), envelope=True).global_grouping("numbers")

    async def main() -> list[int]:
        async with run_topology(builder.build_topology(), {"topology.max.spout.pending": 2}) as r:
            (coordinator,) = r.task_objects("numbers/coordinator").values()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while len(coordinator.committed) < 5:
                assert loop.time() < deadline
                await asyncio.sleep(0.005)
            return coordinator.committed

    assert simulate(main()) == [1, 2, 3, 4, 5]
    assert SEEN[name] == [(t, list(range((t - 1) * 10, t * 10))) for t in range(1, 6)]


def test_the_wiring_is_storms() -> None:
    LOGS["wiring"] = [[1]]
    builder = TransactionalTopologyBuilder(
        "count", "log", LogSpout("wiring", 5), 3, state=MemoryStateStore()
    )
    builder.set_bolt("partial", PartialCount(0, 0), 2).shuffle_grouping("log")
    builder.set_committer_bolt("global", GlobalCount("w", None, 0, 0)).global_grouping("partial")  # type: ignore[arg-type]
    topology = builder.build_topology()
    assert sorted(topology.components) == ["global", "log", "log/coordinator", "partial"]
    assert isinstance(topology.spouts["log/coordinator"].component, TransactionalSpoutCoordinator)

    def inputs(cid: str) -> list[tuple[str, str, str]]:
        return sorted(
            (s.component, s.stream, s.grouping.kind.value) for s in topology.bolts[cid].inputs
        )

    assert inputs("log") == [("log/coordinator", BATCH_STREAM_ID, "all")]
    assert inputs("partial") == [("log", "coord", "direct"), ("log", "default", "shuffle")]
    assert inputs("global") == [
        ("log/coordinator", COMMIT_STREAM_ID, "all"),
        ("partial", "coord", "direct"),
        ("partial", "default", "global"),
    ]
    partial: CoordinatedBolt = topology.bolts["partial"].component
    total: CoordinatedBolt = topology.bolts["global"].component
    assert partial.source_args == {"log": SourceArgs.all()} and partial.id_stream_spec is None
    assert total.id_stream_spec == IdStreamSpec("log/coordinator", COMMIT_STREAM_ID)
    assert isinstance(total.delegate, BatchBoltExecutor)
    assert topology.bolts["log"].parallelism == 3
    assert topology.spouts["log/coordinator"].config["topology.max.task.parallelism"] == 1
    assert repr(TransactionAttempt(3, 9)) == "TransactionAttempt(txid=3, attempt=9)"


class Nothing(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass


def test_mistakes_are_named_at_build_time() -> None:
    def builder() -> TransactionalTopologyBuilder:
        LOGS.setdefault("e", [[1]])
        return TransactionalTopologyBuilder("count", "log", LogSpout("e", 5))

    with pytest.raises(InvalidComponentError) as info:
        TransactionalTopologyBuilder("count", "log", Nothing())  # type: ignore[arg-type]
    assert str(info.value) == (
        "transactional topology 'count': spout 'log' must be a TransactionalSpout or "
        "PartitionedTransactionalSpout, got Nothing"
    )
    with pytest.raises(TransactionalStateError) as bad_id:
        TransactionalTopologyBuilder("a/b", "log", LogSpout("e", 5))
    assert str(bad_id.value).startswith("the transactional id must be a non-empty string")

    with pytest.raises(InvalidComponentError) as info:
        builder().set_committer_bolt("c", Nothing())  # type: ignore[arg-type]
    assert str(info.value) == (
        "transactional topology 'count': committer 'c' must be a BatchBolt (its finish_batch "
        "is the commit), got Nothing"
    )
    b = builder()
    b.set_bolt("x", Nothing())
    with pytest.raises(InvalidComponentError) as info:
        b.set_bolt("x", Nothing())
    assert str(info.value) == "transactional topology 'count': component id 'x' is used twice"

    b = builder()
    b.set_bolt("x", Nothing()).shuffle_grouping("log/coordinator", BATCH_STREAM_ID)
    with pytest.raises(InvalidGroupingError) as grouping:
        b.build_topology()
    assert str(grouping.value) == (
        "transactional topology 'count': bolt 'x' reads 'log/coordinator', the coordinator "
        "(read the spout instead); components: ['log', 'x']"
    )
    b = builder()
    b.set_bolt("x", Nothing()).shuffle_grouping("nope")
    with pytest.raises(InvalidGroupingError) as grouping:
        b.build_topology()
    assert str(grouping.value) == (
        "transactional topology 'count': bolt 'x' reads 'nope', no component of this "
        "topology; components: ['log', 'x']"
    )
    b = builder()
    b.set_bolt("x", Nothing())
    with pytest.raises(InvalidGroupingError) as grouping:
        b.build_topology()
    assert str(grouping.value) == (
        "transactional topology 'count': bolt 'x' reads nothing; subscribe it to the spout "
        "'log' or another bolt"
    )
