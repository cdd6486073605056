"""Every tuple tree ends: the protection of queued trees against replay storms is bounded,
so a tree that does not complete (round a cycle of bolts, or behind a backlog that does not
drain) is failed to its spout within three message timeouts of its emit, plus one acker
sweep; and bolts that form a cycle are named by a warning when the topology is created."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from engine import BasicBolt, Bolt, Config, TopologyBuilder, run_topology
from engine.testing import FiniteSpout, advance_time, simulate

from .topologies import ListSpout, all_objects

#: A tree that does not complete is failed within this many message timeouts of its emit...
BOUND_TIMEOUTS = 3


def sweep_secs(timeout_secs: float) -> float:
    """... plus one acker sweep (the runtime sweeps every min(1 s, timeout / 8))."""
    return min(1.0, timeout_secs / 8)


class Forward(Bolt):
    """Re-emits every input anchored to it, then acks it: round a cycle, forever."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tuple: Any) -> None:
        self.collector.emit(list(tuple.values), anchors=[tuple])
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "key"])


def cycle_builder() -> TopologyBuilder:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(20))  # replays what fails
    builder.set_bolt("a", Forward()).shuffle_grouping("numbers").shuffle_grouping("b")
    builder.set_bolt("b", Forward()).shuffle_grouping("a")
    return builder


def first_outcomes(events: list[Any]) -> dict[Any, tuple[float, str, float]]:
    """msg id -> (first emit time, what ended that emission, when), from a trace."""
    emitted: dict[Any, tuple[Any, float]] = {}  # msg id -> (root, time) of its first emit
    ended: dict[Any, tuple[float, str, float]] = {}
    for t, kind, _, _, msg_id, root in events:
        if kind == "emit":
            emitted.setdefault(msg_id, (root, t))
        elif msg_id in emitted and emitted[msg_id][0] == root and msg_id not in ended:
            ended[msg_id] = (emitted[msg_id][1], kind, t)
    return ended


def test_trees_going_round_a_cycle_are_failed_to_their_spout_within_the_bound() -> None:
    timeout = 1.0
    conf = Config()
    conf.set_message_timeout_secs(timeout)
    conf.set_seed(4)

    async def scenario() -> tuple[Any, Any, dict[str, Any]]:
        topology = cycle_builder().create_topology()
        async with run_topology(topology, conf, trace=True) as running:
            await advance_time(BOUND_TIMEOUTS * timeout + 1)
            events = list(running.runtime.trace.events)
            return events, running.report()["numbers"], running.info().acker

    events, report, acker = simulate(scenario())
    ended = first_outcomes(events)
    assert sorted(ended) == list(range(20))  # every first emission ended...
    bound = BOUND_TIMEOUTS * timeout + sweep_secs(timeout) + 0.01  # (turns cost 1 ms here)
    for msg_id, (emitted_at, kind, at) in ended.items():
        assert kind == "timeout", msg_id  # ... timed out: the tree never completes
        assert 2 * timeout <= at - emitted_at <= bound, (msg_id, emitted_at, at)
    assert report.acked == 0 and report.lost == 0
    assert report.replayed >= 20  # the spout replays what failed, as in Storm
    assert acker["timed_out_while_queued"] >= 20  # queued all along, but too old


def test_bolts_forming_a_cycle_are_named_by_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="engine.topology"):
        cycle_builder().create_topology()
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "engine.topology",
            "WARNING",
            "bolts a -> b -> a form a cycle (Storm allows it): a tuple tree going round it "
            "completes only once a bolt stops re-emitting, and a tree that does not complete "
            "is failed to its spout within 3 message timeouts",
        )
    ]


def test_each_group_of_bolts_feeding_each_other_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(1))
    builder.set_bolt("self", Forward()).shuffle_grouping("numbers").shuffle_grouping("self")
    # x -> y -> z -> x and x -> y -> x: one group, named by its shortest cycle from x.
    x = builder.set_bolt("x", Forward()).shuffle_grouping("numbers").shuffle_grouping("z")
    x.shuffle_grouping("y")
    builder.set_bolt("y", Forward()).shuffle_grouping("x")
    builder.set_bolt("z", Forward()).shuffle_grouping("y")
    builder.set_bolt("sink", Forward()).shuffle_grouping("z")  # fed by the cycle, not in it
    with caplog.at_level(logging.WARNING, logger="engine.topology"):
        builder.create_topology()
    named = [r.getMessage().split(" form a cycle")[0] for r in caplog.records]
    assert named == ["bolts self -> self", "bolts x -> y -> x"]


def test_a_topology_without_a_cycle_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    builder = TopologyBuilder()
    builder.set_spout("numbers", FiniteSpout(1))
    builder.set_bolt("a", Forward()).shuffle_grouping("numbers")
    builder.set_bolt("b", Forward()).shuffle_grouping("a").shuffle_grouping("numbers")
    with caplog.at_level(logging.DEBUG, logger="engine.topology"):
        builder.create_topology()
    assert caplog.records == []


class SlowAsyncBolt(BasicBolt):
    async def execute(self, tuple: Any, collector: Any) -> None:
        await asyncio.sleep(0.0025)


def backlog(items: int, timeout: float) -> tuple[Any, Any, dict[str, Any], list[Any]]:
    """``items`` tuples of 2.5 ms each queued at once behind one slow slot (virtual time)."""
    rows = [[i, f"s{i}"] for i in range(items)]

    async def main() -> tuple[Any, Any, dict[str, Any], list[Any]]:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(rows, replay=False))
        builder.set_bolt("slow", SlowAsyncBolt()).shuffle_grouping("sentences")
        conf = Config()
        conf.set_message_timeout_secs(timeout)
        conf.set_bolt_max_inflight(1)
        conf.set_seed(2)
        async with run_topology(builder.create_topology(), conf, trace=True) as running:
            await running.wait_until_complete(timeout=30)
            spout = all_objects(running, "sentences")[0]
            events = list(running.runtime.trace.events)
            return spout, running.report()["sentences"], running.info().acker, events

    return simulate(main())


def test_a_backlog_that_drains_within_the_protection_times_nothing_out() -> None:
    # 400 tuples x 2.5 ms = 1 s of work queued at once, timeout 0.6 s: Storm would time
    # out and replay the tuples still waiting; here each is acked once, the last after
    # 1.67 timeouts in the queue (protected up to 2).
    spout, report, acker, _ = backlog(400, 0.6)
    assert spout.failed == []
    assert sorted(spout.acked) == list(range(400))
    assert (report.acked, report.failed, report.lost) == (400, 0, 0)
    assert acker["timed_out"] == acker["timed_out_while_queued"] == 0
    assert acker["timeouts_deferred_while_queued"] > 0


def test_a_backlog_longer_than_the_protection_fails_its_oldest_trees_within_the_bound() -> None:
    # The same second of work with a timeout of 0.2 s: a tree still queued 2 timeouts
    # after its emit is no longer protected, and its spout hears ``fail`` within 3.
    timeout = 0.2
    spout, report, acker, events = backlog(400, timeout)
    assert spout.failed and sorted(spout.acked + spout.failed) == list(range(400))
    assert report.lost == 0 and report.timed_out == len(spout.failed)
    assert acker["timed_out_while_queued"] > 0
    bound = BOUND_TIMEOUTS * timeout + sweep_secs(timeout) + 1e-9
    for msg_id, (emitted_at, kind, at) in first_outcomes(events).items():
        if kind == "timeout":
            assert 2 * timeout <= at - emitted_at <= bound, (msg_id, emitted_at, at)
