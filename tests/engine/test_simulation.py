"""Simulation: virtual time, determinism, fault injection and the per-message report."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
import time
from typing import Any

import pytest

from engine import (
    Config,
    Spout,
    TaskStartError,
    TopologyBuilder,
    TopologyStateError,
    run_topology,
    submit_io,
)
from engine.testing import (
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    FailTuples,
    FiniteSpout,
    PassBolt,
    SimulationDeadlock,
    SlowBolt,
    advance_time,
    simulate,
)

from .topologies import ListSpout, NeverAckBolt, all_objects, sentences, word_count_topology


def test_an_hour_of_timeouts_passes_in_virtual_time() -> None:
    items = [[i, f"s{i}"] for i in range(20)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))  # replays every timed-out message
    builder.set_bolt("sink", NeverAckBolt()).shuffle_grouping("src")
    conf = Config()
    conf.set_message_timeout_secs(30)

    async def scenario() -> tuple[float, Any]:
        loop = asyncio.get_running_loop()
        async with run_topology(builder.create_topology(), conf, trace=True) as running:
            start = loop.time()
            await advance_time(3600)
            return loop.time() - start, running.report()["src"]

    wall = time.perf_counter()
    elapsed, report = simulate(scenario())
    wall = time.perf_counter() - wall
    assert elapsed == pytest.approx(3600)
    # Every message times out once per ~30 s (the acker sweeps every 1 s): about 120 times.
    assert report.messages == 20
    assert 20 * 115 <= report.timed_out <= 20 * 120
    assert report.emitted == report.timed_out + 20  # the last emission of each is in flight
    assert report.in_flight == 20
    assert report.lost == 0
    assert wall < 30  # an hour in seconds (asserted loosely: CI machines vary)


def _wordcount_trace(seed: int) -> list[Any]:
    items = sentences(120)
    topology = word_count_topology(items, 3)

    async def scenario() -> list[Any]:
        faults = [FailTuples(component="count", probability=0.05)]
        async with run_topology(
            topology, {"topology.seed": seed}, trace=True, faults=faults
        ) as running:
            await running.wait_until_complete(timeout=600)
            return list(running.runtime.trace.events)  # type: ignore[union-attr]

    return simulate(scenario())


def test_same_seed_same_trace_different_seed_different_interleaving() -> None:
    first = _wordcount_trace(seed=21)
    again = _wordcount_trace(seed=21)
    other = _wordcount_trace(seed=22)
    assert first == again
    assert any(kind == "fail" for _, kind, *_ in first)  # the faults did fire
    assert first != other


def test_fault_campaign_on_word_count_ends_exact_with_nothing_lost() -> None:
    items = sentences(400)
    topology = word_count_topology(items, 2)
    faults = [
        SlowBolt(component="split", secs_per_tuple=0.002),  # processing takes virtual time
        CrashTask(component="split", task_index=0, at=0.2),
        CrashTask(component="split", task_index=1, at=0.5),
        CrashAcker(at=0.3),
        FailTuples(component="count", probability=0.05),
        DropTuples(source="split", target="count", probability=0.02),
        DelayTuples(source="sentences", target="split", delay_secs=0.05, start=0.1, end=0.4),
    ]
    conf = Config()
    conf.set_message_timeout_secs(5)
    conf.set_seed(5)

    async def scenario() -> tuple[Any, collections.Counter[str], Any]:
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await running.wait_until_complete(timeout=3600)
            counts: collections.Counter[str] = collections.Counter()
            for bolt in all_objects(running, "count"):
                counts.update(bolt.counts)
            return running.report()["sentences"], counts, running.info()

    report, counts, info = simulate(scenario())
    assert counts == collections.Counter(w for s in items for w in s.split())
    assert report.lost == 0
    assert report.in_flight == 0
    assert report.messages == 400
    assert report.acked == 400
    assert report.failed > 0 and report.timed_out > 0  # crashes and drops were replayed
    assert report.replayed == report.failed
    assert info.acker["acked"] <= 400


def test_crash_task_restarts_with_fresh_objects() -> None:
    items = sentences(50)

    async def scenario() -> tuple[int, bool]:
        async with run_topology(word_count_topology(items, 1), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            before = running.task_objects("count")
            task = await running.runtime.reconfiguration.crash_task("count")
            after = running.task_objects("count")
            with pytest.raises(TopologyStateError, match="has no task 5 of component 'count'"):
                await running.runtime.reconfiguration.crash_task("count", 5)
            return task, before[task] is not after[task] and after[task].counts == {}

    task, fresh = simulate(scenario())
    assert task == 1
    assert fresh


def test_a_deadlocked_simulation_raises_instead_of_hanging() -> None:
    async def stuck() -> None:
        await asyncio.get_running_loop().create_future()

    with pytest.raises(SimulationDeadlock, match="no coroutine is ready and no timer"):
        simulate(stuck())


def test_report_needs_trace() -> None:
    async def scenario() -> None:
        async with run_topology(word_count_topology(sentences(5), 1)) as running:
            running.report()

    with pytest.raises(TopologyStateError, match="was started without trace=True"):
        simulate(scenario())


def test_crashing_a_bolt_releases_producers_blocked_on_its_full_queue() -> None:
    items = sentences(300)
    topology = word_count_topology(items, 1)
    conf = Config()
    conf.set_seed(3)
    conf.set_message_timeout_secs(2)
    conf.set_executor_receive_buffer_size(8)
    conf.set_producer_batch_size(4)
    faults = [
        SlowBolt(component="count", secs_per_tuple=0.001),  # "split" blocks on count's queue
        CrashTask(component="count", at=0.05),
    ]

    async def scenario() -> Any:
        async with run_topology(topology, conf, trace=True, faults=faults) as running:
            await running.wait_until_complete(timeout=3600)
            return running.report()["sentences"], running.runtime.reconfiguration.crashes

    report, crashes = simulate(scenario())
    assert crashes == 1
    assert report.lost == 0
    assert report.acked == 300
    assert report.timed_out > 0  # what the crashed bolt held was replayed


def test_a_call_in_a_thread_runs_for_real_while_the_virtual_clock_waits() -> None:
    async def main() -> tuple[int, float, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        result = await asyncio.to_thread(lambda: (time.sleep(0.05), 42)[1])
        t1 = loop.time()
        await asyncio.sleep(100)
        return result, t1 - t0, loop.time() - t0

    # No SimulationDeadlock while the thread works; no virtual time passes meanwhile.
    assert simulate(main()) == (42, 0.0, 100.0)


def test_work_given_with_submit_io_stops_the_virtual_clock_until_it_is_done() -> None:
    """A component's own I/O thread, checked between calls rather than awaited: with
    ``submit_io`` the clock waits for the work (50 ms of real time) while 10 ms ticks come
    due; with a plain ``submit`` it runs on (here past 2 virtual seconds, the work held
    until the simulation ends)."""

    async def ticks_until_done(submit: Any, work: Any) -> float:
        loop = asyncio.get_running_loop()
        future = submit(io, work)
        t0 = loop.time()
        while not future.done() and loop.time() - t0 < 2.0:
            await asyncio.sleep(0.01)
        return loop.time() - t0

    held = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as io:
        assert simulate(ticks_until_done(submit_io, lambda: time.sleep(0.05))) <= 0.02
        assert simulate(ticks_until_done(type(io).submit, held.wait)) >= 2.0
        held.set()
        # no loop running: a plain submit
        assert submit_io(io, sum, [1, 2]).result() == 3


def test_a_loop_that_never_waits_still_reaches_its_timers() -> None:
    # A coroutine that always has work ready (tuples round a cycle, transaction after
    # transaction) must not stop the virtual clock: after 1,000 busy turns in a row each
    # further one costs 1 ms, so the timer of 0.5 s fires after about 1,500 turns.
    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        turns = 0

        async def spin() -> None:
            nonlocal turns
            while turns < 100_000:  # stops on its own, so the old clock returns too
                turns += 1
                await asyncio.sleep(0)

        spinner = asyncio.ensure_future(spin())
        await asyncio.sleep(0.5)
        woke_after = turns
        spinner.cancel()
        return woke_after, loop.time()

    woke_after, now = simulate(main())
    assert 1_000 + 500 <= woke_after <= 1_000 + 502  # not 100,000: the timer did not wait
    assert now == pytest.approx(0.5, abs=0.0015)


def test_a_burst_of_work_shorter_than_the_free_turns_takes_no_time() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        for _ in range(900):
            await asyncio.sleep(0)
        return loop.time()

    assert simulate(main()) == 0.0


def _crash_a_spout_task(spout: Any) -> Any:
    """Run ``spout`` (2 tasks) into a slow bolt, crash its task 0 at 0.5 s, return the
    report once idle."""
    builder = TopologyBuilder()
    builder.set_spout("numbers", spout, 2)
    builder.set_bolt("pass", PassBolt()).shuffle_grouping("numbers")
    conf = Config()
    conf.set_message_timeout_secs(5)
    conf.set_seed(3)
    faults = [
        CrashTask(component="numbers", task_index=0, at=0.5),
        SlowBolt(component="pass", secs_per_tuple=0.05),  # so trees are in flight then
    ]

    async def scenario() -> Any:
        async with run_topology(builder.create_topology(), conf, trace=True, faults=faults) as r:
            await r.wait_until_idle(timeout=600)
            return r.report()["numbers"]

    return simulate(scenario())


def test_a_spout_crash_abandons_its_pending_trees_and_a_replaying_spout_loses_nothing() -> None:
    # FiniteSpout starts over when its task restarts: it emits what it had in flight again.
    report = _crash_a_spout_task(FiniteSpout(200, interval_secs=0.01))
    assert report.abandoned > 0  # pending in task 0 when it crashed: nobody hears them
    assert report.replayed >= report.abandoned  # emitted again by the restarted task
    assert (report.messages, report.lost, report.lost_ids, report.in_flight) == (200, 0, [], 0)
    assert report.acked >= 200 and report.failed == 0


_CURSORS: dict[str, int] = {}


class ForgetfulSpout(Spout):
    """Emits 0..n-1 from a cursor kept outside the task and moved at emit time (an
    at-most-once source): a restarted task goes on from there, never emitting again what
    its predecessor had in flight."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.key = f"{self.name}/{context.get_this_task_index()}"
        self.step = len(context.get_component_tasks(context.get_this_component_id()))

    def next_tuple(self) -> None:
        i = _CURSORS.setdefault(self.key, int(self.key.rsplit("/", 1)[1]))
        if i < self.n and self.collector.pending_count() < 10:
            _CURSORS[self.key] = i + self.step
            self.collector.emit([i, i % 4], msg_id=i)

    def is_exhausted(self) -> bool:
        return _CURSORS.get(self.key, 0) >= self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "key"])


def test_abandoned_messages_a_spout_never_emits_again_are_reported_lost() -> None:
    report = _crash_a_spout_task(ForgetfulSpout("forgetful", 100))
    assert report.abandoned == 10  # task 0 had its 10 pending (its limit) when it crashed
    assert report.lost == 10 and len(report.lost_ids) == 10
    assert all(i % 2 == 0 for i in report.lost_ids)  # task 0's messages
    assert report.acked == 90 and report.messages == report.emitted == 100
    assert report.replayed == report.in_flight == report.failed == 0


def test_a_crash_injected_after_the_kill_is_refused_as_the_topology_is_stopped() -> None:
    # Found in review: it reached the finished task group ("TaskGroup ... is finished",
    # and the crash's coroutine was never awaited).
    async def scenario() -> Any:
        async with run_topology(word_count_topology(sentences(5), 1)) as running:
            await running.wait_until_complete(timeout=60)
        return running

    running = simulate(scenario())
    with pytest.raises(TopologyStateError, match="topology 'topology' is no longer running"):
        running.inject(CrashTask(component="count", at=0.0))


def test_a_topology_that_stopped_on_an_error_raises_it_at_the_end_of_its_block() -> None:
    # Found in review: run_topology's block ended as if all went well (the error only
    # reached asyncio's "Task exception was never retrieved" log) when the topology had
    # stopped on an error meanwhile, here the prepare of a crashed task's restart.
    prepared: list[int] = []

    class ConnectsOnce(PassBolt):
        def prepare(self, conf: Any, context: Any, collector: Any) -> None:
            prepared.append(1)
            if len(prepared) > 1:
                raise RuntimeError("cannot connect")
            super().prepare(conf, context, collector)

    builder = TopologyBuilder()
    builder.set_spout("src", FiniteSpout(100))
    builder.set_bolt("pass", ConnectsOnce()).shuffle_grouping("src")
    topology = builder.create_topology()

    handles: list[Any] = []

    async def scenario() -> None:
        async with run_topology(topology, faults=[CrashTask(component="pass", at=0.5)]) as r:
            handles.append(r)
            await advance_time(5)

    with pytest.raises(ExceptionGroup) as raised:
        simulate(scenario())
    # The error names the task that would not restart, and is recorded as its error.
    assert raised.group_contains(
        TaskStartError,
        match=r"^bolt 'pass' task 1 failed in prepare: RuntimeError\('cannot connect'\)$",
    )
    [error] = handles[0].info().errors
    assert (error.component, error.task, error.error) == (
        "pass",
        1,
        "RuntimeError('cannot connect')",
    )
