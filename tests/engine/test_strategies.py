"""The shipped Hypothesis strategies, used as users would: random topologies run to
completion on virtual time (with and without random faults) ack every message exactly
once, and random tuple trees delivered to the acker ledger in any order and batch split
complete every root exactly once with the right outcome."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from acker_kernel import AckerLedger, Op, Outcome
from engine import TopologyBuilder, run_topology
from engine.testing import (
    AsyncPassBolt,
    BasicPassBolt,
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    FailTuples,
    FanOutBolt,
    FilterBolt,
    FiniteSpout,
    HoldBolt,
    PassBolt,
    simulate,
)
from engine.testing import strategies as sst
from engine.testing.pytest_plugin import Simulation, SimulationResult

SRC = Path(__file__).resolve().parents[2] / "src"

#: Replays after a drop or a crash wait for the message timeout (virtual seconds).
TIMEOUT_SECS = 5


def conf(ackers: int, max_spout_pending: int | None, batch_size: int = 1024) -> dict[str, Any]:
    return {
        "topology.message.timeout.secs": TIMEOUT_SECS,
        "topology.acker.executors": ackers,
        "topology.max.spout.pending": max_spout_pending,
        "topology.producer.batch.size": batch_size,
    }


#: Producer batch sizes: Storm's 1, small, and the engine's default.
batch_sizes = st.sampled_from([1024, 1, 3])


def assert_every_message_acked_once(
    generated: sst.GeneratedTopology, result: SimulationResult
) -> None:
    assert set(result.reports) == set(generated.messages)
    for spout, n in generated.messages.items():
        report = result.reports[spout]
        assert report.lost == 0, (spout, report)
        assert report.in_flight == 0, (spout, report)
        assert report.messages == n, (spout, report)
        assert report.acked == n, (spout, report)
        assert result.acks(spout) == dict.fromkeys(range(n), 1), spout


def one_crash_per_component_at_a_time(faults: list[Any]) -> list[Any]:
    """Drop all but the first of several crashes of one component at the same moment
    (kept narrow on purpose: test_two_crashes_of_one_task_at_once_... covers that case)."""
    seen: set[tuple[str, float]] = set()
    kept = []
    for fault in faults:
        if isinstance(fault, CrashTask):
            if (fault.component, fault.at) in seen:
                continue
            seen.add((fault.component, fault.at))
        kept.append(fault)
    return kept


# --- topologies ----------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    generated=sst.topologies(),
    seed=sst.seeds(),
    ackers=st.sampled_from([1, 2, 0]),
    max_spout_pending=st.sampled_from([None, 1, 3]),
    batch_size=batch_sizes,
)
def test_any_topology_acks_every_message_exactly_once(
    simulation: Simulation,
    generated: sst.GeneratedTopology,
    seed: int,
    ackers: int,
    max_spout_pending: int | None,
    batch_size: int,
) -> None:
    result = simulation.run_topology(
        generated, conf(ackers, max_spout_pending, batch_size), seed=seed, timeout_secs=600
    )
    assert result.seed == seed
    assert_every_message_acked_once(generated, result)
    for spout in generated.spouts:
        assert result.reports[spout].failed == 0  # no faults: nothing fails or times out


@settings(max_examples=25, deadline=None)
@given(st.data(), sst.seeds(), st.sampled_from([1, 2]), batch_sizes)
def test_any_topology_under_faults_loses_nothing_and_acks_every_message(
    simulation: Simulation, data: st.DataObject, seed: int, ackers: int, batch_size: int
) -> None:
    generated = data.draw(sst.topologies(max_messages=6, max_tuples_per_message=8))
    schedules = sst.fault_schedules(
        generated, horizon_secs=1, ackers=ackers, min_faults=1, max_probability=0.3
    )
    faults = one_crash_per_component_at_a_time(data.draw(schedules))
    result = simulation.run_topology(
        generated, conf(ackers, None, batch_size), seed=seed, faults=faults, timeout_secs=3600
    )
    assert_every_message_acked_once(generated, result)


def test_faults_given_to_run_topology_apply_from_the_first_tuple() -> None:
    # Found while checking that test_any_topology_under_faults_... meets its faults.
    builder = TopologyBuilder()
    builder.set_spout("spout", FiniteSpout(5))
    builder.set_bolt("bolt", PassBolt()).shuffle_grouping("spout")
    topology = builder.create_topology()

    async def scenario() -> tuple[int, int]:
        faults = [DropTuples(source="spout", target="bolt", probability=1.0, end=1.0)]
        conf = {"topology.seed": 1, "topology.message.timeout.secs": 5}
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await running.wait_until_complete(timeout=60)
            return running.runtime.faults.dropped, running.report()["spout"].timed_out

    assert simulate(scenario()) == (5, 5)  # every first emission dropped, then replayed


def test_two_crashes_of_one_task_at_once_crash_it_twice() -> None:
    # Found by test_any_topology_under_faults_...; runtime.crash_task twice under
    # asyncio.gather (virtual or real time) raises the same KeyError.
    builder = TopologyBuilder()
    builder.set_spout("spout", FiniteSpout(1))
    builder.set_bolt("bolt", PassBolt()).shuffle_grouping("spout")
    topology = builder.create_topology()

    async def scenario() -> int:
        faults = [CrashTask(component="bolt", at=0.0), CrashTask(component="bolt", at=0.0)]
        async with run_topology(topology, {"topology.seed": 1}, faults=faults) as running:
            await running.wait_until_complete(timeout=60)
            return running.runtime.reconfiguration.crashes

    assert simulate(scenario()) == 2


def test_a_crash_still_scheduled_when_the_topology_is_killed_does_not_hang_the_kill() -> None:
    # Found by test_any_topology_under_faults_...: the topology completes at ~0.01 s.
    builder = TopologyBuilder()
    builder.set_spout("spout", FiniteSpout(1))
    builder.set_bolt("bolt", PassBolt()).shuffle_grouping("spout")
    topology = builder.create_topology()

    async def scenario() -> float:
        faults = [CrashTask(component="bolt", at=0.5)]
        async with run_topology(topology, {"topology.seed": 1}, faults=faults) as running:
            await running.wait_until_complete(timeout=60)
            return running.runtime.uptime_secs()

    assert simulate(scenario()) < 0.5


@settings(max_examples=25, deadline=None)
@given(sst.topologies())
def test_generated_source_builds_the_same_topology(generated: sst.GeneratedTopology) -> None:
    namespace: dict[str, Any] = {"TopologyBuilder": TopologyBuilder, **vars(sst)}
    exec(generated.source, namespace)
    rebuilt = namespace["topology"]
    assert sorted(rebuilt.components) == sorted(generated.topology.components)
    for cid, spec in generated.topology.components.items():
        other = rebuilt.components[cid]
        assert (other.parallelism, other.num_tasks) == (spec.parallelism, spec.num_tasks)
        assert other.inputs == spec.inputs
        assert repr(other.component) == repr(spec.component)
    assert repr(generated).startswith("GeneratedTopology(\n    builder = TopologyBuilder()")


@pytest.mark.parametrize("kind", sst.BOLT_KINDS)
def test_every_bolt_kind_is_generated(kind: str) -> None:
    generated = find(sst.topologies(bolt_kinds=[kind]), lambda g: len(g.bolts) > 1)
    assert all(kind_of(spec.component) == kind for spec in generated.topology.bolts.values())


@pytest.mark.parametrize("grouping", sst.GROUPINGS)
def test_every_grouping_is_generated(grouping: str) -> None:
    generated = find(sst.topologies(groupings=[grouping]), lambda g: len(g.bolts) > 1)
    for spec in generated.topology.bolts.values():
        assert {sub.grouping.kind.value for sub in spec.inputs} == {grouping}


def kind_of(bolt: Any) -> str:
    kinds = {
        PassBolt: "pass",
        BasicPassBolt: "basic",
        AsyncPassBolt: "async",
        FanOutBolt: "fan_out",
        FilterBolt: "filter",
        HoldBolt: "hold",
    }
    return kinds[type(bolt)]


def test_topologies_validates_its_arguments() -> None:
    with pytest.raises(InvalidArgument, match=r"max_layers must be an int >= 1, got 0"):
        sst.topologies(max_layers=0)
    with pytest.raises(InvalidArgument, match=r"bolt_kinds must be a non-empty selection"):
        sst.topologies(bolt_kinds=["pass", "teleport"])
    with pytest.raises(InvalidArgument, match=r"groupings must be a non-empty selection"):
        sst.topologies(groupings=["direct"])


# --- faults --------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_fault_schedules_name_real_components_tasks_and_edges(data: st.DataObject) -> None:
    generated = data.draw(sst.topologies())
    topology = generated.topology
    faults = data.draw(sst.fault_schedules(generated, horizon_secs=3, ackers=2, max_faults=6))
    assert len(faults) <= 6
    edges = {(s.component, b.id) for b in topology.bolts.values() for s in b.inputs}
    for fault in faults:
        if isinstance(fault, CrashTask):
            assert fault.component in topology.bolts  # no spout crashes by default
            assert 0 <= fault.task_index < topology.bolts[fault.component].num_tasks
        elif isinstance(fault, CrashAcker):
            assert 0 <= fault.at <= 3 and fault.index in (0, 1)
        elif isinstance(fault, (DropTuples, DelayTuples)):
            assert (fault.source, fault.target) in edges
        else:
            assert fault.component in topology.bolts
        if isinstance(fault, (CrashTask, CrashAcker)):
            assert 0 <= fault.at <= 3
        else:
            assert fault.end is not None  # every window closes
            assert 0 <= fault.start < fault.end <= 3
        if isinstance(fault, (DropTuples, FailTuples)):
            assert 0 < fault.probability <= 0.1


@given(sst.fault_schedules(["split", "count"], horizon_secs=1, ackers=0, max_faults=8))
def test_fault_schedules_from_bare_ids(faults: list[Any]) -> None:
    for fault in faults:
        assert not isinstance(fault, CrashAcker)
        if isinstance(fault, CrashTask):
            assert fault.task_index == 0
        if isinstance(fault, (DropTuples, DelayTuples)):
            assert {fault.source, fault.target} == {"split", "count"}


def test_fault_schedules_validates_its_arguments() -> None:
    with pytest.raises(InvalidArgument, match=r"horizon_secs must be >= 0.01, got 0"):
        sst.fault_schedules(["a"], horizon_secs=0)
    with pytest.raises(InvalidArgument, match=r"not the string 'split'"):
        sst.fault_schedules("split")
    with pytest.raises(InvalidArgument, match=r"max_probability must be in \[0.01, 1\]"):
        sst.fault_schedules(["a"], max_probability=2)


# --- tuple trees and the acker ledger -------------------------------------------------------


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[sst.TupleTree, list[list[sst.AckerOp]]]:
    tree = draw(sst.tuple_trees())
    ops = sst.acker_ops(tree, reset_timeouts=draw(st.booleans()))
    return tree, draw(sst.delivery_orders(ops))


@settings(max_examples=300, deadline=None)
@given(deliveries())
def test_the_ledger_completes_every_root_once_in_any_delivery_order(
    delivery: tuple[sst.TupleTree, list[list[sst.AckerOp]]],
) -> None:
    tree, batches = delivery
    ledger = AckerLedger(timeout_ns=10**9)
    seen: list[tuple[int, int, Outcome]] = []
    for now, batch in enumerate(batches):
        done = ledger.apply(*sst.op_arrays(batch), now_ns=now)
        outcomes = [Outcome(o) for o in done.outcome]
        seen += zip(done.root.tolist(), done.spout_task.tolist(), outcomes, strict=True)
    expected = tree.outcomes()
    task_of = dict(zip(tree.roots, tree.spout_tasks, strict=True))
    assert sorted(seen) == sorted((r, task_of[r], outcome) for r, outcome in expected.items())
    if Outcome.FAILED not in expected.values():
        assert len(ledger) == 0  # every tree completed and left nothing behind
    # What a failed tree's later acks left are orphans: they expire and are never reported.
    assert len(ledger.expire(now_ns=10**12)) == 0
    assert len(ledger) == 0


@given(sst.tuple_trees())
def test_acker_ops_speak_storms_protocol(tree: sst.TupleTree) -> None:
    ops = sst.acker_ops(tree)
    assert [(o.root, o.spout_task) for o in ops if o.op == Op.INIT] == list(
        zip(tree.roots, tree.spout_tasks, strict=True)
    )
    for root, outcome in tree.outcomes().items():
        mine = [o for o in ops if o.root == root]
        total = 0
        for o in mine:
            total ^= o.value
        if outcome == Outcome.ACKED:
            assert total == 0  # every edge id XORed in exactly twice
            assert all(o.op != Op.FAIL for o in mine)
        else:
            assert any(o.op == Op.FAIL for o in mine)


@given(st.lists(st.integers(0, 15), max_size=6))
def test_edge_ids_independence_check_matches_brute_force(values: list[int]) -> None:
    dependent = False
    for mask in range(1, 2 ** len(values)):
        total = 0
        for i, v in enumerate(values):
            if mask >> i & 1:
                total ^= v
        dependent |= total == 0
    assert sst._independent(values) == (not dependent)


def test_tuple_tree_rejects_malformed_tuples() -> None:
    with pytest.raises(ValueError, match=r"tuple 0 .* a bolt tuple needs one edge id per anchor"):
        sst.TupleTree((1,), (0,), (sst.TreeTuple(anchors=(0,), edge_ids=(5,)),))
    with pytest.raises(ValueError, match=r"1 roots but 2 spout tasks"):
        sst.TupleTree((1,), (0, 1))
    with pytest.raises(ValueError, match=r"root ids must be distinct, got \[4, 4\]"):
        sst.TupleTree((4, 4), (0, 1))


# --- the fixture and the import boundary ------------------------------------------------------


def test_the_fixture_seeds_each_test_by_its_node_id(simulation: Simulation) -> None:
    import zlib

    node = "tests/engine/test_strategies.py::test_the_fixture_seeds_each_test_by_its_node_id"
    assert simulation.seed == zlib.crc32(node.encode())
    assert Simulation(seed=5).seed == 5


def test_the_fixture_runs_a_topology_with_its_seed(simulation: Simulation) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(5))
    builder.set_bolt("hold", HoldBolt(2), 2).shuffle_grouping("numbers")
    result = simulation.run_topology(builder.create_topology(), with_info=True)
    assert isinstance(result, SimulationResult)
    assert result.info is not None
    assert result.seed == simulation.seed == result.info.seed
    assert result.acks("numbers") == dict.fromkeys(range(5), 1)
    assert simulation.run(_answer()) == 42


async def _answer() -> int:
    return 42


def test_engine_testing_imports_without_hypothesis() -> None:
    script = (
        "import sys\n"
        "sys.modules['hypothesis'] = None  # importing it now raises ImportError\n"
        "import engine.testing, engine.testing.pytest_plugin\n"
        "from engine import TopologyBuilder\n"
        "from engine.testing import FiniteSpout, HoldBolt, PassBolt, complete_topology\n"
        "b = TopologyBuilder()\n"
        "b.set_spout('n', FiniteSpout(6), 2)\n"
        "b.set_bolt('p', PassBolt(), 2).shuffle_grouping('n')\n"
        "b.set_bolt('h', HoldBolt(2)).global_grouping('p')\n"
        "r = complete_topology(b.create_topology())\n"
        "assert sorted(v[0] for v in r.emitted('p')) == list(range(6)), r\n"
        "try:\n"
        "    import engine.testing.strategies\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('strategies imported without hypothesis')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
