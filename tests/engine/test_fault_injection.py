"""Fault injection wraps what it disturbs when the topology is wired: an edge's destination
(``FaultyEdge``), a bolt's execution (``FaultyExecution``). A run without faults carries
none of their code, and a fault injected into a running topology reaches every executor."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from engine import TopologyBuilder, run_topology
from engine._execution.channel import Inbox
from engine._execution.executor import BoltExecutor
from engine._runtime.fault_injection import FaultyEdge, FaultyExecution
from engine.testing import DelayTuples, DropTuples, FailTuples, SlowBolt, advance_time, simulate

from .topologies import AsyncBolt, CollectBolt, ListSpout, sentences, word_count_topology


def destinations(running: Any, component: str) -> list[Any]:
    return [
        dest
        for ex in running.runtime.executors
        if ex.component_id == component
        for _, _, dest in ex._targets
    ]


def steps(running: Any, component: str) -> list[Any]:
    return [ex.execute_item for ex in running.runtime.executors if ex.component_id == component]


def test_a_run_without_faults_carries_none_of_their_code() -> None:
    async def scenario() -> list[Any]:
        async with run_topology(word_count_topology(sentences(10), 2)) as running:
            await running.wait_until_complete(timeout=60)
            executors = running.runtime.executors
            return [
                (type(dest), ex.execute_item == ex._execute_batch)
                for ex in executors
                for _, _, dest in ex._targets
                if isinstance(ex, BoltExecutor)
            ]

    wiring = simulate(scenario())
    assert wiring and set(wiring) == {(Inbox, True)}


def test_only_the_faulty_edge_and_the_faulty_bolt_are_wrapped() -> None:
    faults = [
        DropTuples(source="split", target="count", probability=0.1),
        SlowBolt(component="split", secs_per_tuple=0.001),
    ]

    async def scenario() -> tuple[set[type], set[type], set[type], int]:
        topology = word_count_topology(sentences(30), 2)
        async with run_topology(topology, {"topology.seed": 2}, faults=faults) as running:
            await running.wait_until_complete(timeout=600)
            return (
                {type(d) for d in destinations(running, "sentences")},
                {type(d) for d in destinations(running, "split")},
                {type(s) for s in steps(running, "split")}
                | {type(s) for s in steps(running, "count")},
                running.runtime.faults.dropped,
            )

    spout_dests, split_dests, bolt_steps, dropped = simulate(scenario())
    assert spout_dests == {Inbox}
    assert split_dests == {FaultyEdge}
    assert FaultyExecution in bolt_steps  # split's
    assert any(t is not FaultyExecution for t in bolt_steps)  # count's: none
    assert dropped > 0


def test_a_fault_injected_while_running_is_wired_into_every_executor() -> None:
    items = [[i, f"s{i}"] for i in range(40)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items), 2)
    builder.set_bolt("sink", CollectBolt(), 2).shuffle_grouping("src")
    topology = builder.create_topology()

    async def scenario() -> tuple[set[type], set[type], int, int]:
        conf = {
            "topology.seed": 1,
            "topology.message.timeout.secs": 5,
            "topology.max.spout.pending": 1,  # most are emitted after the faults come
        }
        async with run_topology(topology, conf, trace=True) as running:
            running.inject(DropTuples(source="src", target="sink", probability=1.0, end=1.0))
            running.inject(FailTuples(component="sink", probability=0.0))
            await running.wait_until_complete(timeout=600)
            return (
                {type(d) for d in destinations(running, "src")},
                {type(s) for s in steps(running, "sink")},
                running.runtime.faults.dropped,
                running.report()["src"].acked,
            )

    dests, bolt_steps, dropped, acked = simulate(scenario())
    assert dests == {FaultyEdge}
    assert bolt_steps == {FaultyExecution}
    assert dropped > 0  # emissions in the first second
    assert acked == 40  # replayed


def test_a_rewired_bolt_is_wrapped_once() -> None:
    async def scenario() -> Any:
        topology = word_count_topology(sentences(5), 1)
        faults = [SlowBolt(component="count", secs_per_tuple=0.001)]
        async with run_topology(topology, {"topology.seed": 1}, faults=faults) as running:
            running.inject(FailTuples(component="count", probability=0.0))
            await running.wait_until_complete(timeout=600)
            [step] = steps(running, "count")
            return step

    step = simulate(scenario())
    assert isinstance(step, FaultyExecution)
    assert not isinstance(step.inner, FaultyExecution)


def test_failing_tuples_reach_an_async_bolt() -> None:
    # Found while moving faults into wrappers: the per-tuple path of async bolts skipped
    # bolt faults, so FailTuples on an async bolt failed nothing.
    items = [[i, f"s{i}"] for i in range(50)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))
    builder.set_bolt("upper", AsyncBolt()).shuffle_grouping("src")
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("upper")
    topology = builder.create_topology()

    async def scenario() -> Any:
        faults = [FailTuples(component="upper", probability=0.2)]
        async with run_topology(topology, {"topology.seed": 4}, trace=True, faults=faults) as r:
            await r.wait_until_complete(timeout=600)
            return r.report()["src"]

    report = simulate(scenario())
    assert report.failed > 0
    assert report.acked == 50
    assert report.lost == 0


@pytest.mark.parametrize("component", ["split", "count"])  # a rich bolt, a basic one
def test_a_bolt_that_fails_every_input_for_a_while_loses_nothing(component: str) -> None:
    # Found on merging the basic bolts' array path: a batch whose every row failed
    # reached it as an empty list, which it could not make a batch of.
    items = sentences(60)

    async def scenario() -> tuple[Any, collections.Counter[str]]:
        topology = word_count_topology(items, 2)
        faults = [FailTuples(component=component, probability=1.0, end=0.5)]
        conf = {"topology.seed": 3, "topology.message.timeout.secs": 5}
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await running.wait_until_complete(timeout=600)
            counts: collections.Counter[str] = collections.Counter()
            for bolt in running.task_objects("count").values():
                counts.update(bolt.counts)
            return running.report()["sentences"], counts

    report, counts = simulate(scenario())
    assert report.failed > 0
    assert report.acked == 60
    assert report.lost == 0
    assert counts == collections.Counter(w for s in items for w in s.split())


def test_a_kill_does_not_wait_for_the_batches_a_delay_holds_back() -> None:
    # The delayed deliveries ran in the task group without being among the tasks a kill
    # cancels: the kill waited out their delay, and forever once they found the stopped
    # bolt's inbox full.
    items = [[i, f"s{i}"] for i in range(200)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("src")
    topology = builder.create_topology()
    conf = {
        "topology.seed": 1,
        "topology.executor.receive.buffer.size": 4,
        "topology.producer.batch.size": 1,
    }

    async def scenario() -> tuple[float, int]:
        faults = [DelayTuples(source="src", target="sink", delay_secs=500)]
        async with run_topology(topology, conf, faults=faults) as running:
            await advance_time(1)
        return running.runtime.uptime_secs(), running.runtime.faults.delayed

    uptime, delayed = simulate(scenario())
    assert uptime < 2
    assert delayed == 0
