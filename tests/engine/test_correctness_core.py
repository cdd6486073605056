"""Engine-core correctness (issue 9): ticks across restarts, bounded rebalance, copying
components without pickle, hung async bolts, async spouts' flushes, complete latency from
the emit, fresh contexts on restart, no spout method before ``open`` completed."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import numpy as np
import pytest

from engine import (
    BasicBolt,
    Bolt,
    Config,
    InvalidComponentError,
    LocalCluster,
    Spout,
    TaskStartError,
    TopologyBuilder,
    TopologyStateError,
    is_tick_tuple,
    run_topology,
)
from engine.testing import CrashTask, FiniteSpout, PassBolt, advance_time, simulate

from .topologies import CollectBolt, ListSpout, NeverAckBolt


def _now() -> float:
    return asyncio.get_running_loop().time()


class QuietSpout(Spout):
    """Never emits and is never exhausted."""

    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])


def with_component(topology: Any, cid: str, component: Any) -> Any:
    """``topology`` with ``cid``'s object replaced (bypasses ``create_topology``'s checks)."""
    spouts, bolts = dict(topology.spouts), dict(topology.bolts)
    table = spouts if cid in spouts else bolts
    table[cid] = dataclasses.replace(table[cid], component=component)
    return type(topology)(spouts=spouts, bolts=bolts)


# --- 1: ticks reach every live task, whatever was crashed or rebalanced ---------------------


class TickCounter(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.ticks = 0

    def execute(self, tuple: Any, collector: Any) -> None:
        if is_tick_tuple(tuple):
            self.ticks += 1


def test_ticks_keep_flowing_after_a_crash_and_a_rebalance(parallelism: int) -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())
    builder.set_bolt("ticked", TickCounter(), parallelism).shuffle_grouping(
        "src"
    ).add_configuration("topology.tick.tuple.freq.secs", 1.0)
    topology = builder.create_topology()

    async def scenario() -> None:
        faults = [CrashTask(component="ticked", task_index=0, at=5.5)]
        async with run_topology(topology, {"topology.seed": 1}, faults=faults) as running:
            await advance_time(10.2)
            ticks = {t: b.ticks for t, b in running.task_objects("ticked").items()}
            crashed = min(ticks)
            assert ticks[crashed] == 5  # the fresh object, ticked at 6, 7, 8, 9 and 10
            assert all(n == 10 for t, n in ticks.items() if t != crashed), ticks
            await running.rebalance("ticked", max(1, parallelism - 1))
            before = {t: b.ticks for t, b in running.task_objects("ticked").items()}
            await advance_time(10.0)
            after = {t: b.ticks for t, b in running.task_objects("ticked").items()}
            # The rebalanced tasks keep their objects and go on ticking once a second.
            assert {t: after[t] - before[t] for t in after} == dict.fromkeys(after, 10)

    simulate(scenario())


# --- 4: LocalCluster raises in the caller; rebalance waits a bounded time -------------------


def test_cluster_activate_and_deactivate_raise_in_the_caller() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[0, "a"]]))
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("src")
    with LocalCluster() as cluster:
        cluster.submit_topology("t", None, builder.create_topology())
        cluster.deactivate("t")
        assert cluster.get_topology_info("t").status == "INACTIVE"  # applied on return
        cluster.activate("t")
        assert cluster.get_topology_info("t").status == "ACTIVE"
        cluster.wait_until_complete("t", timeout=30)
        with pytest.raises(TopologyStateError, match=r"^topology 't' is completed$"):
            cluster.activate("t")
        with pytest.raises(TopologyStateError, match=r"^topology 't' is completed$"):
            cluster.deactivate("t")


def _stuck_topology(parallelism: int = 1) -> Any:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(10)]))
    builder.set_bolt("sink", NeverAckBolt(), parallelism).shuffle_grouping("src")
    return builder.create_topology()


def test_rebalance_gives_up_after_wait_secs_naming_what_is_pending(parallelism: int) -> None:
    async def scenario() -> None:
        conf = {"topology.message.timeout.secs": 30, "topology.seed": 2}
        async with run_topology(_stuck_topology(parallelism), conf) as running:
            await advance_time(1)
            start = _now()
            with pytest.raises(TimeoutError) as caught:
                await running.rebalance("sink", 2, wait_secs=5)
            assert _now() - start == pytest.approx(5, abs=0.05)
            assert str(caught.value) == (
                "rebalance of 'sink' in topology 'topology': the topology did not become "
                "idle within wait_secs=5 s (pending trees: 10); nothing was moved. Give it a "
                "longer wait_secs"
            )
            info = running.info()
            assert info.status == "ACTIVE"  # as it was
            assert info.components["sink"].executors == parallelism

    simulate(scenario())


#: the prepares of ``FailingPrepares`` so far, and which of them fail (1-based)
PREPARES: list[int] = []
FAILING: set[int] = set()


class FailingPrepares(PassBolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        PREPARES.append(context.task_id)
        if len(PREPARES) in FAILING:
            raise ConnectionError("db down")
        super().prepare(conf, context, collector)


def _rebalanced_topology(failing: set[int]) -> Any:
    PREPARES.clear()
    FAILING.clear()
    FAILING.update(failing)
    builder = TopologyBuilder()
    builder.set_spout("src", FiniteSpout(200, interval_secs=0.01))
    builder.set_bolt("pass", FailingPrepares()).set_num_tasks(2).shuffle_grouping("src")
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("pass")
    return builder.create_topology()


def test_a_rebalance_whose_prepare_fails_is_undone_and_loses_nothing() -> None:
    # Found in review: the topology stayed deactivated, and the new executor was in the
    # table but never ran, so the tuples for its task piled up.
    async def scenario() -> None:
        # prepares 1, 2: the start; 3: the first new executor; 4 (task 2's) fails
        async with run_topology(_rebalanced_topology({4}), {"topology.seed": 1}) as running:
            await advance_time(0.5)
            with pytest.raises(TaskStartError) as caught:
                await running.rebalance("pass", 2, wait_secs=5)
            assert str(caught.value) == (
                "bolt 'pass' task 2 failed in prepare: ConnectionError('db down')"
            )
            assert caught.value.__notes__ == [
                "rebalance of 'pass' in topology 'topology' undone: its tasks run on their "
                "previous 1 executor(s)"
            ]
            info = running.info()
            assert info.status == "ACTIVE"  # as it was
            assert info.components["pass"].executors == 1
            [error] = info.errors
            assert (error.component, error.task, error.error) == (
                "pass",
                2,
                "ConnectionError('db down')",
            )
            await running.wait_until_complete(timeout=60)
            received = [t for b in running.task_objects("sink").values() for t in b.received]
            assert sorted(v[0] for v in received) == list(range(200))
        assert PREPARES == [1, 2, 1, 2, 1, 2]

    simulate(scenario())


def test_a_rebalance_that_cannot_be_undone_stops_the_topology_on_its_error() -> None:
    async def scenario() -> None:
        async with run_topology(_rebalanced_topology({4, 6})) as running:
            await advance_time(0.5)
            with pytest.raises(TaskStartError, match=r"^bolt 'pass' task 2 failed in prepare"):
                await running.rebalance("pass", 2, wait_secs=5)
            await advance_time(1)

    with pytest.raises(ExceptionGroup) as raised:
        simulate(scenario())
    assert raised.group_contains(
        TaskStartError,
        match=r"^bolt 'pass' task 2 failed in prepare: ConnectionError\('db down'\)$",
    )


def test_rebalance_by_default_waits_for_stuck_trees_to_time_out() -> None:
    async def scenario() -> None:
        conf = {"topology.message.timeout.secs": 4, "topology.seed": 2}
        async with run_topology(_stuck_topology(), conf) as running:
            await advance_time(1)
            await running.rebalance("sink", 1)  # the trees time out meanwhile
            assert running.info().components["src"].timed_out == 10
            assert 4 <= _now() <= 1 + 4 + 0.5 + 0.1

    simulate(scenario())


def test_cluster_rebalance_takes_wait_secs() -> None:
    with LocalCluster() as cluster:
        cluster.submit_topology("stuck", None, _stuck_topology())
        with pytest.raises(TimeoutError, match=r"in topology 'stuck': .* within wait_secs=0.2"):
            cluster.rebalance("stuck", {"sink": 2}, wait_secs=0.2)
        assert cluster.get_topology_info("stuck").status == "ACTIVE"


# --- 10: the engine's own TimeoutError reaches the LocalCluster caller ----------------------


def test_cluster_keeps_the_engines_timeout_message() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())
    with LocalCluster() as cluster:
        cluster.submit_topology("quiet", None, builder.create_topology())
        with pytest.raises(
            TimeoutError,
            match=r"^topology 'quiet' did not become complete within 0.2 s \(pending trees: 0\)$",
        ):
            cluster.wait_until_complete("quiet", timeout=0.2)


# --- 5: components are copied in-process, without an importable name ------------------------


def test_a_bolt_class_defined_in_a_function_with_a_closure_runs() -> None:
    seen: list[Any] = []
    double = lambda v: 2 * v  # noqa: E731 - a closure attribute is the point

    class LocalBolt(BasicBolt):
        def __init__(self) -> None:
            self.transform = double
            self.report = seen.append  # a bound method of a local list

        def execute(self, tuple: Any, collector: Any) -> None:
            self.report(self.transform(tuple[0]))

    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(20)]))
    builder.set_bolt("local", CollectBolt(), 3).shuffle_grouping("src")
    topology = with_component(builder.create_topology(), "local", LocalBolt())

    async def scenario() -> None:
        async with run_topology(topology, {"topology.seed": 4}) as running:
            await running.wait_until_complete(timeout=30)
            tasks = running.task_objects("local")
            assert len({id(b) for b in tasks.values()}) == 3  # one copy per task

    simulate(scenario())
    assert sorted(seen) == [2 * i for i in range(20)]


def test_create_topology_accepts_a_bolt_class_defined_in_a_function() -> None:
    class LocalBolt(BasicBolt):
        def execute(self, tuple: Any, collector: Any) -> None:
            pass

    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[0, "a"]]))
    builder.set_bolt("local", LocalBolt()).shuffle_grouping("src")
    builder.create_topology()


class Connection:
    def __init__(self) -> None:
        self.host = "db"
        self.lock = threading.Lock()


class LockedBolt(BasicBolt):
    def __init__(self) -> None:
        self.name = "locked"
        self.connection = Connection()

    def execute(self, tuple: Any, collector: Any) -> None:
        pass


def test_an_uncopyable_component_is_refused_naming_the_attribute() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[0, "a"]]))
    builder.set_bolt("locked", CollectBolt()).shuffle_grouping("src")
    topology = with_component(builder.create_topology(), "locked", LockedBolt())

    async def scenario() -> None:
        async with run_topology(topology):
            pass

    with pytest.raises(InvalidComponentError) as caught:
        simulate(scenario())
    assert str(caught.value) == (
        "component 'locked' (LockedBolt) cannot be copied for each task: attribute "
        "'connection.lock' (lock): cannot pickle '_thread.lock' object. Components are "
        "copied per task like Storm's; create such state (connections, locks, open files, "
        "threads) in open()/prepare() instead"
    )


# --- 6: a hung async bolt does not stall its spout ------------------------------------------


class HangingBolt(Bolt):
    """Its first call (per task) never returns; the others would ack at once."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.calls = 0

    async def execute(self, tuple: Any) -> None:
        self.calls += 1
        if self.calls == 1:
            await asyncio.Event().wait()  # never set
        self.collector.ack(tuple)


class TimedSpout(ListSpout):
    """Records, on the loop's clock, when each message was emitted and completed."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.emitted_at: dict[Any, float] = {}
        self.done_at: dict[Any, float] = {}
        self.latencies: list[float] = []

    def next_tuple(self) -> None:
        before = self.collector.pending_count()
        retry = self.retry[0] if self.retry else None
        upcoming = self.ids[self.next] if self.next < len(self.ids) else None
        super().next_tuple()
        if self.collector.pending_count() > before:
            self.emitted_at[retry if retry is not None else upcoming] = _now()

    def ack(self, msg_id: Any) -> None:
        super().ack(msg_id)
        self.done_at[msg_id] = _now()
        self.latencies.append(_now() - self.emitted_at[msg_id])

    def fail(self, msg_id: Any) -> None:
        super().fail(msg_id)
        self.done_at[msg_id] = _now()


def test_a_hung_async_bolt_lets_every_tree_time_out(parallelism: int) -> None:
    timeout = 10.0
    builder = TopologyBuilder()
    builder.set_spout("src", TimedSpout([[i, f"s{i}"] for i in range(30)], replay=False))
    builder.set_bolt("hang", HangingBolt(), parallelism).shuffle_grouping("src")
    conf = Config()
    conf.set_message_timeout_secs(timeout)
    conf.set_bolt_max_inflight(1)
    conf.set_max_spout_pending(5)
    conf.set_seed(5)

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), conf) as running:
            # Never complete (the hung calls stay in flight): 30 trees, 5 at a time.
            await advance_time(10 * timeout)
            (spout,) = running.task_objects("src").values()
            assert spout.is_exhausted()
            assert sorted(spout.done_at) == list(range(30))
            waits = [spout.done_at[m] - spout.emitted_at[m] for m in spout.done_at]
            # Each hears fail one timeout (plus one acker sweep) after its emit, at most.
            assert max(waits) <= timeout + timeout / 8 + 0.1
            stuck = running.task_objects("hang").values()
            assert len(spout.failed) == 30 - len(spout.acked)
            assert len(spout.failed) >= len(stuck)

    simulate(scenario())


# --- 9: an async next_tuple's emits leave within the flush interval -------------------------


class SleepySpout(Spout):
    """An async spout that emits one tuple, then awaits 0.1 s before returning."""

    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = 0
        self.emitted_at: dict[int, float] = {}
        self.acked: list[int] = []

    async def next_tuple(self) -> None:
        if self.i < self.n:
            self.emitted_at[self.i] = _now()
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1
            await asyncio.sleep(0.1)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["i"])


class ArrivalBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.arrived: dict[int, float] = {}

    def execute(self, tuple: Any, collector: Any) -> None:
        self.arrived[tuple[0]] = _now()


def test_an_async_next_tuple_that_awaits_delivers_each_tuple_within_the_flush_interval(
    parallelism: int,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", SleepySpout(40))
    builder.set_bolt("sink", ArrivalBolt(), parallelism).shuffle_grouping("src")
    conf = Config()
    conf.set_batch_flush_interval_millis(5)
    conf.set_seed(6)

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("src").values()
            arrived = {
                i: t for b in running.task_objects("sink").values() for i, t in b.arrived.items()
            }
            assert sorted(arrived) == list(range(40))
            delays = [arrived[i] - spout.emitted_at[i] for i in range(40)]
            assert max(delays) <= 0.005 + 1e-6, delays
            (latency,) = (
                t.complete_latency for t in running.info().components["src"].tasks.values()
            )
            # The tuples arrive on time; the spout hears each ack when its await ends.
            assert latency.mean_ms == pytest.approx(100, abs=5)

    simulate(scenario())


# --- 11: complete latency runs from the spout's emit ----------------------------------------


class SlowAsyncBolt(BasicBolt):
    def __init__(self, secs: float) -> None:
        self.secs = secs

    async def execute(self, tuple: Any, collector: Any) -> None:
        await asyncio.sleep(self.secs)


@pytest.mark.parametrize("load", ["idle", "loaded"])
def test_complete_latency_matches_the_spouts_own_measurement(load: str) -> None:
    n = 200
    builder = TopologyBuilder()
    builder.set_spout("src", TimedSpout([[i, f"s{i}"] for i in range(n)]))
    conf = Config()
    conf.set_seed(7)
    if load == "loaded":
        # One slot, a short queue: the spout's flush waits for room (backpressure), so the
        # acker sees a tree's INIT well after its emit.
        builder.set_bolt("slow", SlowAsyncBolt(0.05)).shuffle_grouping("src")
        conf.set_bolt_max_inflight(1)
        conf.set_executor_receive_buffer_size(4)
        conf.set_producer_batch_size(4)
        conf.set_max_spout_pending(40)
    else:
        builder.set_bolt("slow", SlowAsyncBolt(0.01)).shuffle_grouping("src")
        conf.set_max_spout_pending(1)

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=3600)
            (spout,) = running.task_objects("src").values()
            measured = np.array(spout.latencies) * 1e3
            (reported,) = (
                t.complete_latency for t in running.info().components["src"].tasks.values()
            )
            assert reported.count == n == measured.shape[0]
            assert reported.mean_ms == pytest.approx(measured.mean(), rel=1e-3)
            assert reported.max_ms == pytest.approx(measured.max(), rel=0.02)
            assert reported.p50_ms == pytest.approx(np.percentile(measured, 50), rel=0.05)
            if load == "loaded":
                assert measured.mean() > 500  # it was under load

    simulate(scenario())


# --- 13: a restarted task gets a fresh context and fresh metrics ----------------------------


class MeteredBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen = context.register_counter("seen")
        context.register_gauge("constant", lambda: 7)

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.incr()


class MeteredSpout(ListSpout):
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.polls = context.register_counter("polls")

    def next_tuple(self) -> None:
        self.polls.incr()
        super().next_tuple()


def test_components_that_register_metrics_survive_crashes_and_rebalances(
    parallelism: int,
) -> None:
    n = 300
    builder = TopologyBuilder()
    builder.set_spout("src", MeteredSpout([[i, f"s{i}"] for i in range(n)]))
    builder.set_bolt("metered", MeteredBolt(), parallelism).set_num_tasks(3).shuffle_grouping("src")
    conf = Config()
    conf.set_max_spout_pending(10)
    conf.set_seed(8)
    faults = [CrashTask(component="metered", at=0.001), CrashTask(component="src", at=0.002)]

    async def scenario() -> None:
        async with run_topology(builder.create_topology(), conf, faults=faults) as running:
            await advance_time(0.01)
            await running.rebalance("metered", 4 - parallelism)
            await running.wait_until_complete(timeout=600)
            info = running.info()
            tasks = info.components["metered"].tasks
            assert all(t.metrics["constant"] == 7 for t in tasks.values())
            # Counters restart with the task: what they show is what the live objects saw.
            objects = running.task_objects("metered")
            assert {t: s.metrics["seen"] for t, s in tasks.items()} == {
                t: b.seen.value for t, b in objects.items()
            }
            assert running.runtime.reconfiguration.crashes == 2
            assert not info.errors, info.errors

    simulate(scenario())


# --- 14: no spout method runs before its open completed -------------------------------------


class SlowOpenSpout(ListSpout):
    """``open`` awaits before it sets up anything ``is_exhausted`` reads."""

    async def open(self, conf: Any, context: Any, collector: Any) -> None:  # type: ignore[override]
        self.opening = True
        await asyncio.sleep(1.0)
        super().open(conf, context, collector)
        self.opening = False

    def is_exhausted(self) -> bool:
        assert not self.opening, "is_exhausted called before open completed"
        return super().is_exhausted()

    def next_tuple(self) -> None:
        assert not self.opening, "next_tuple called before open completed"
        super().next_tuple()


def test_no_spout_method_runs_before_an_async_open_completed(parallelism: int) -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", SlowOpenSpout([[i, f"s{i}"] for i in range(50)]), parallelism)
    builder.set_bolt("sink", SlowAsyncBolt(0.02)).shuffle_grouping("src")  # 1 s of work
    conf = Config()
    conf.set_max_spout_pending(5)
    conf.set_bolt_max_inflight(1)
    conf.set_seed(9)

    async def scenario() -> None:
        faults = [CrashTask(component="src", task_index=parallelism - 1, at=1.3)]
        async with run_topology(builder.create_topology(), conf, faults=faults) as running:
            await running.wait_until_complete(timeout=600)
            info = running.info()
            assert not info.errors, info.errors
            assert running.runtime.reconfiguration.crashes == 1

    simulate(scenario())
