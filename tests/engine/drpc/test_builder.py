"""LinearDRPCTopologyBuilder wires Storm's topology and refuses what cannot work."""

from __future__ import annotations

from typing import Any

import pytest

from engine import (
    BasicBolt,
    Fields,
    InvalidComponentError,
    InvalidDeclarationError,
    InvalidGroupingError,
)
from engine._model.grouping import GroupingKind
from engine.coordination import BatchBoltExecutor, CoordinatedBolt, IdStreamSpec, SourceArgs
from engine.drpc import (
    DRPCSpout,
    JoinResult,
    LinearDRPCTopologyBuilder,
    LocalDRPC,
    PrepareRequest,
    ReturnResults,
)

from .bolts import Exclaim, JoinWords, Split, Upper


@pytest.fixture
def drpc() -> Any:
    with LocalDRPC() as server:
        yield server


def inputs(topology: Any, component: str) -> list[tuple[str, str, str, list[str] | None]]:
    return sorted(
        (s.component, s.stream, s.grouping.kind.value, list(s.grouping.fields or []) or None)
        for s in topology.bolts[component].inputs
    )


def test_the_wiring_is_storms(drpc: LocalDRPC) -> None:
    builder = LinearDRPCTopologyBuilder("upper")
    builder.add_bolt(Split(), 2, envelope=True)
    builder.add_bolt(Upper(), 3).shuffle_grouping()
    builder.add_bolt(JoinWords(), 2).fields_grouping(["id"])
    topology = builder.create_local_topology(drpc)

    assert sorted(topology.components) == [
        "bolt0",
        "bolt1",
        "bolt2",
        "bolt3",
        "bolt4",
        "prepare-request",
        "spout",
    ]
    assert isinstance(topology.spouts["spout"].component, DRPCSpout)
    assert isinstance(topology.bolts["prepare-request"].component, PrepareRequest)
    assert isinstance(topology.bolts["bolt3"].component, JoinResult)
    assert isinstance(topology.bolts["bolt4"].component, ReturnResults)
    assert inputs(topology, "prepare-request") == [("spout", "default", "none", None)]
    assert inputs(topology, "bolt0") == [("prepare-request", "default", "none", None)]
    assert inputs(topology, "bolt1") == [
        ("bolt0", "coord", "direct", None),
        ("bolt0", "default", "shuffle", None),
    ]
    assert inputs(topology, "bolt2") == [
        ("bolt1", "coord", "direct", None),
        ("bolt1", "default", "fields", ["id"]),
        ("prepare-request", "id", "fields", ["request"]),
    ]
    assert inputs(topology, "bolt3") == [
        ("bolt2", "default", "fields", ["id"]),
        ("prepare-request", "ret", "fields", ["request"]),
    ]
    assert inputs(topology, "bolt4") == [("bolt3", "default", "none", None)]

    bolts = [topology.bolts[f"bolt{i}"].component for i in range(3)]
    assert all(isinstance(b, CoordinatedBolt) for b in bolts)
    assert [b.source_args for b in bolts] == [
        {},
        {"bolt0": SourceArgs.single()},
        {"bolt1": SourceArgs.all()},
    ]
    assert [b.id_stream_spec for b in bolts] == [None, None, IdStreamSpec("prepare-request", "id")]
    assert [b.envelope for b in bolts] == [True, False, False]
    assert isinstance(bolts[2].delegate, BatchBoltExecutor)
    assert [topology.bolts[f"bolt{i}"].parallelism for i in range(3)] == [2, 3, 2]
    assert topology.bolts["bolt0"].streams["default"].fields == Fields("id", "word")


def test_default_groupings_read_the_previous_bolt(drpc: LocalDRPC) -> None:
    builder = LinearDRPCTopologyBuilder("upper")
    builder.add_bolt(Split(), 1, envelope=True)
    builder.add_bolt(Upper(), 2)  # no grouping: shuffled
    builder.add_bolt(JoinWords(), 2)  # no grouping, finishes requests: by request id
    topology = builder.create_local_topology(drpc)
    assert ("bolt0", "default", "shuffle", None) in inputs(topology, "bolt1")
    assert ("bolt1", "default", "fields", ["id"]) in inputs(topology, "bolt2")


def test_a_last_bolt_that_finishes_requests_in_parallel_must_be_grouped_by_id(
    drpc: LocalDRPC,
) -> None:
    builder = LinearDRPCTopologyBuilder("upper")
    builder.add_bolt(Split(), 1, envelope=True)
    builder.add_bolt(JoinWords(), 2).shuffle_grouping()
    with pytest.raises(InvalidGroupingError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "linear DRPC 'upper', bolt1: the last bolt finishes requests (finished_id) on 2 "
        "tasks, so every tuple of a request must reach the task that gets its id; read "
        "bolt0 with fields_grouping on the request id (its first field) only, not "
        "shuffle_grouping('default',)"
    )

    # one executor running two tasks: the request's tuples still reach two tasks
    builder = LinearDRPCTopologyBuilder("upper")
    builder.add_bolt(Split(), 1, envelope=True)
    builder.add_bolt(JoinWords(), 1).shuffle_grouping().set_num_tasks(2)
    with pytest.raises(InvalidGroupingError) as info:
        builder.create_local_topology(drpc)
    assert "the last bolt finishes requests (finished_id) on 2 tasks, so" in str(info.value)


def test_the_last_bolt_declares_one_stream_of_two_fields(drpc: LocalDRPC) -> None:
    class TwoStreams(Exclaim):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["id", "result"])
            declarer.declare_stream("debug", ["id", "note"])

    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(TwoStreams())
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "linear DRPC 'f': the last bolt (bolt0, TwoStreams) must declare exactly one output "
        "stream, the results; it declares ['debug', 'default']"
    )

    class ThreeFields(Exclaim):
        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["id", "result", "extra"])

    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(ThreeFields())
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "linear DRPC 'f': the last bolt (bolt0, ThreeFields) must emit exactly two fields, the "
        "request id and the result; its stream 'default' declares ['id', 'result', 'extra']"
    )

    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(Exclaim(), envelope=True)
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "component 'bolt0': the envelope puts the request id in field 'id', and stream "
        "'default' already declares a field 'id' (['id', 'result']); rename it, or use "
        "envelope=False and carry the id as the first field yourself"
    )

    class Enveloped(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            collector.emit([tuple[0], 1])

        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["result", "more"])

    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(Enveloped(), envelope=True)
    with pytest.raises(InvalidDeclarationError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "linear DRPC 'f': the last bolt (bolt0, Enveloped) must emit exactly one field, the "
        "result (the envelope adds the request id); its stream 'default' declares "
        "['result', 'more']"
    )


def test_bad_arguments_are_named(drpc: LocalDRPC) -> None:
    with pytest.raises(InvalidComponentError) as info:
        LinearDRPCTopologyBuilder("")
    assert str(info.value) == "the DRPC function must be a non-empty string, got ''"
    builder = LinearDRPCTopologyBuilder("f")
    with pytest.raises(InvalidComponentError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == "linear DRPC 'f' has no bolts; add at least one with add_bolt"
    with pytest.raises(InvalidComponentError) as info:
        builder.add_bolt("not a bolt")  # type: ignore[arg-type]
    assert str(info.value) == (
        "linear DRPC 'f', bolt0: add_bolt takes an engine Bolt, BasicBolt or BatchBolt, got str"
    )
    with pytest.raises(InvalidComponentError) as info:
        builder.add_bolt(Exclaim(), 0)
    assert str(info.value) == "linear DRPC 'f', bolt0: parallelism must be a positive int, got 0"


def test_configuration_and_tasks_reach_the_component(drpc: LocalDRPC) -> None:
    builder = LinearDRPCTopologyBuilder("f")
    builder.add_bolt(Exclaim(), 2).set_num_tasks(4).add_configuration("my.key", 1)
    topology = builder.create_local_topology(drpc)
    spec = topology.bolts["bolt0"]
    assert spec.num_tasks == 4
    assert spec.config["my.key"] == 1
    # CoordinatedBolt times ids out on ticks; JoinResult expires stale halves on ticks
    assert spec.config["topology.tick.tuple.freq.secs"] == 1.0
    assert topology.bolts["bolt1"].config["topology.tick.tuple.freq.secs"] == 1.0
    assert GroupingKind.NONE is topology.bolts["bolt2"].inputs[0].grouping.kind


def test_a_single_bolt_that_finishes_requests_reads_its_arguments_by_id(
    drpc: LocalDRPC,
) -> None:
    builder = LinearDRPCTopologyBuilder("words")
    builder.add_bolt(JoinWords(), 2)
    topology = builder.create_local_topology(drpc)
    assert inputs(topology, "bolt0") == [
        ("prepare-request", "default", "fields", ["request"]),
        ("prepare-request", "id", "fields", ["request"]),
    ]

    builder = LinearDRPCTopologyBuilder("words")
    builder.add_bolt(JoinWords(), 2).shuffle_grouping()
    with pytest.raises(InvalidGroupingError) as info:
        builder.create_local_topology(drpc)
    assert str(info.value) == (
        "linear DRPC 'words', bolt0: the last bolt finishes requests (finished_id) on 2 "
        "tasks, so every tuple of a request must reach the task that gets its id; read "
        "prepare-request with fields_grouping on the request id (its first field) only, not "
        "shuffle_grouping('default',)"
    )
