"""The runtime: backpressure, queue bounds, run-time errors, groupings end to end, ticks."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from engine import (
    BasicBolt,
    Bolt,
    Config,
    Fields,
    Spout,
    TaskStartError,
    TopologyBuilder,
    TopologyStateError,
    run_topology,
)
from engine.testing import advance_time, simulate

from .topologies import (
    CollectBolt,
    ListSpout,
    NeverAckBolt,
    SlowBolt,
    all_objects,
    run,
    sentences,
)


class FanOut(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for k in range(8):
            collector.emit([tuple[0] * 8 + k, tuple[1]])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "sentence"])


def test_queues_stay_within_bounds_under_a_slow_bolt(parallelism: int) -> None:
    items = [[i, f"s{i}"] for i in range(400)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items), parallelism)
        builder.set_bolt("fanout", FanOut(), parallelism).shuffle_grouping("sentences")
        builder.set_bolt("slow", SlowBolt(0.0001), parallelism).shuffle_grouping("fanout")
        builder.set_bolt("sink", CollectBolt(), 1).shuffle_grouping("slow")
        conf = Config()
        conf.set_executor_receive_buffer_size(64)
        conf.set_producer_batch_size(16)
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=60)
            info = running.info()
            for name, queue in info.queues.items():
                assert queue["max_queued"] <= 64, name
            slow_queues = [q for name, q in info.queues.items() if name.startswith("slow")]
            assert any(q["blocked_puts"] > 0 for q in slow_queues), "backpressure never engaged"
            assert info.components["sink"].executed == 3200
            assert sorted(i for s in all_objects(running, "sentences") for i in s.acked) == list(
                range(400)
            )

    run(main())


class EmitErrors(Bolt):
    """Makes one run-time mistake per kind of input, then keeps going."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.ok = 0

    def execute(self, tuple: Any) -> None:
        kind = tuple[1]
        if kind == "undeclared":
            self.collector.emit([1], stream="nope", anchors=[tuple])
        elif kind == "arity":
            self.collector.emit([1, 2, 3], anchors=[tuple])
        elif kind == "after-ack":
            self.collector.ack(tuple)
            self.collector.emit([1], anchors=[tuple])
        elif kind == "double-ack":
            self.collector.ack(tuple)
            self.collector.ack(tuple)
        elif kind == "direct-with-emit":
            self.collector.emit([1], stream="direct", anchors=[tuple])
        else:
            self.ok += 1
            self.collector.emit([1], anchors=[tuple])
            self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])
        declarer.declare_stream("direct", ["n"], direct=True)


def test_runtime_mistakes_are_reported_and_the_topology_keeps_running() -> None:
    kinds = ["undeclared", "arity", "after-ack", "double-ack", "direct-with-emit", "fine"]
    items = [[i, kind] for i, kind in enumerate(kinds)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("src", ListSpout(items, fields=("id", "kind"), replay=False))
        builder.set_bolt("bolt", EmitErrors()).shuffle_grouping("src")
        builder.set_bolt("sink", CollectBolt()).shuffle_grouping("bolt")
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            spout = all_objects(running, "src")[0]
            # The mistaken tuples failed (except those acked before the mistake).
            assert sorted(spout.failed) == [0, 1, 4]
            assert sorted(spout.acked) == [2, 3, 5]
            errors = [e.error for e in running.info().errors]
            assert errors == [
                "EmitError(\"component 'bolt' emitted on undeclared stream 'nope'; declared "
                "streams: ['default', 'direct']\")",
                "EmitError(\"component 'bolt' emitted 3 values on stream 'default', which "
                "declares 1 fields ['n']: [1, 2, 3]\")",
                "TupleStateError(\"component 'bolt' emitted on stream 'default' anchored to "
                "Tuple([2, 'after-ack'], source='src':'default'@3), which was already acked "
                "or failed; emit a tuple's children before you ack or fail it (Storm would "
                'silently time the tree out)")',
                "TupleStateError(\"component 'bolt' called ack on Tuple([3, 'double-ack'], "
                "source='src':'default'@3), which was already acked or failed; every tuple "
                'is acked or failed exactly once")',
                "EmitError(\"component 'bolt' emitted on direct stream 'direct' with emit; use "
                'emit_direct(task, ...)")',
            ]
            assert all_objects(running, "bolt")[0].ok == 1
            assert running.info().components["sink"].executed == 1

    run(main())


class DirectSender(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.own_task = context.get_this_task_id()
        self.targets = context.get_component_tasks("receiver")
        self.errors: list[str] = []

    def execute(self, tuple: Any) -> None:
        target = self.targets[tuple[0] % len(self.targets)]
        self.collector.emit_direct(target, [tuple[0], target], stream="direct", anchors=[tuple])
        if tuple[0] == 0:
            try:  # not a task of a direct subscriber
                self.collector.emit_direct(self.own_task, [0, 0], stream="direct")
            except Exception as exc:
                self.errors.append(str(exc))
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream("direct", ["n", "target"], direct=True)


class Receiver(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.get_this_task_id()
        self.got: list[tuple[int, int]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.got.append((tuple[0], tuple[1]))


def test_direct_grouping_sends_to_the_chosen_task() -> None:
    items = [[i, "x"] for i in range(30)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("src", ListSpout(items, replay=False))
        builder.set_bolt("sender", DirectSender(), 2).shuffle_grouping("src")
        builder.set_bolt("receiver", Receiver(), 3).direct_grouping("sender", "direct")
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            receivers = running.task_objects("receiver")
            for task, bolt in receivers.items():
                assert bolt.got and all(target == task for _, target in bolt.got)
            assert sorted(n for b in receivers.values() for n, _ in b.got) == list(range(30))
            assert sorted(all_objects(running, "src")[0].acked) == list(range(30))
            errors = [e for b in all_objects(running, "sender") for e in b.errors]
            sender_task = next(b.own_task for b in all_objects(running, "sender") if b.errors)
            assert errors == [
                f"component 'sender': emit_direct to task {sender_task} on stream 'direct', "
                f"but that task does not subscribe to it with a direct grouping (direct "
                f"subscribers' tasks: {list(running.runtime.plan.component_tasks['receiver'])})"
            ]

    run(main())


class TaskRecorder(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.get_this_task_id()
        self.values: list[Any] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.values.append(tuple[1])


@pytest.mark.parametrize("grouping", ["fields", "all", "global", "shuffle", "none", "partial_key"])
def test_groupings_end_to_end(grouping: str) -> None:
    words = [w for s in sentences(100, 3) for w in s.split()]
    items = [[i, w] for i, w in enumerate(words)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("src", ListSpout(items, fields=("id", "word"), replay=False), 2)
        declarer = builder.set_bolt("rec", TaskRecorder(), 4)
        if grouping in ("fields", "partial_key"):
            getattr(declarer, f"{grouping}_grouping")("src", Fields("word"))
        else:
            getattr(declarer, f"{grouping}_grouping")("src")
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=10)
            recs = running.task_objects("rec")
            per_task = {t: collections.Counter(b.values) for t, b in recs.items()}
            total = sum((c for c in per_task.values()), collections.Counter())
            if grouping == "all":
                for counts in per_task.values():
                    assert counts == collections.Counter(words)
                return
            assert total == collections.Counter(words)
            if grouping == "global":
                assert [t for t, c in per_task.items() if c] == [min(recs)]
            elif grouping == "fields":
                owners = collections.defaultdict(set)
                for t, c in per_task.items():
                    for w in c:
                        owners[w].add(t)
                assert all(len(ts) == 1 for ts in owners.values())
                assert sum(1 for c in per_task.values() if c) > 1
            elif grouping == "partial_key":
                owners = collections.defaultdict(set)
                for t, c in per_task.items():
                    for w in c:
                        owners[w].add(t)
                assert all(len(ts) <= 2 for ts in owners.values())
                hot = max(collections.Counter(words).items(), key=lambda kv: kv[1])[0]
                assert len(owners[hot]) == 2
            else:
                assert all(c for c in per_task.values())

    run(main())


class EmitReturns(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.returned: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.returned.append(self.collector.emit([tuple[1]], anchors=[tuple]))
        self.returned.append(self.collector.emit([tuple[1]], stream="nobody", anchors=[tuple]))
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])
        declarer.declare_stream("nobody", ["word"])


def test_emit_returns_target_task_ids() -> None:
    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("src", ListSpout([[0, "a"], [1, "b"]], fields=("id", "w")))
        builder.set_bolt("emitter", EmitReturns()).shuffle_grouping("src")
        builder.set_bolt("all", CollectBolt(), 3).all_grouping("emitter")
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            tasks = running.runtime.plan.component_tasks["all"]
            returned = all_objects(running, "emitter")[0].returned
            assert returned == [tasks, (), tasks, ()]

    run(main())


class QuietSpout(Spout):
    """Never emits and is never exhausted."""

    def next_tuple(self) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["x"])


def test_tick_tuples_reach_the_bolt() -> None:
    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("src", QuietSpout())
        builder.set_bolt("ticked", CollectBolt(), 2).shuffle_grouping("src").add_configuration(
            "topology.tick.tuple.freq.secs", 0.01
        )
        async with run_topology(builder.create_topology()) as running:
            await advance_time(0.035)
            bolts = all_objects(running, "ticked")
            assert [b.ticks for b in bolts] == [3, 3]  # at 0.01, 0.02 and 0.03
            assert all(b.received == [] for b in bolts)

    simulate(main())


class BrokenPrepare(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        raise RuntimeError("cannot connect")

    def execute(self, tuple: Any, collector: Any) -> None:
        pass


def test_a_failing_prepare_is_raised_by_run_topology_naming_the_task() -> None:
    # Found in review: the bare RuntimeError came back, not saying which component failed.
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[0, "a"]]))
    builder.set_bolt("broken", BrokenPrepare(), 2).shuffle_grouping("src")
    topology = builder.create_topology()

    async def main() -> None:
        async with run_topology(topology):
            pass

    with pytest.raises(TaskStartError) as raised:
        run(main())
    assert str(raised.value) == (
        "bolt 'broken' task 1 failed in prepare: RuntimeError('cannot connect')"
    )
    assert repr(raised.value.__cause__) == "RuntimeError('cannot connect')"


class BrokenOpen(ListSpout):
    async def open(self, conf: Any, context: Any, collector: Any) -> None:
        raise ConnectionError("broker down")


def test_a_failing_open_names_the_spout_task_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", BrokenOpen([[0, "a"]]))
    builder.set_bolt("sink", CollectBolt()).shuffle_grouping("src")
    topology = builder.create_topology()

    async def main() -> None:
        async with run_topology(topology):
            pass

    with pytest.raises(TaskStartError) as raised:
        run(main())
    assert str(raised.value) == "spout 'src' task 2 failed in open: ConnectionError('broker down')"
    assert isinstance(raised.value.__cause__, ConnectionError)
    [record] = [r for r in caplog.records if r.name == "engine.component.src"]
    assert "ConnectionError('broker down')" in record.getMessage()


#: what the components below saw (their objects are copies: the calls are kept here)
CALLS: list[str] = []


class SlowOpenSpout(ListSpout):
    async def open(self, conf: Any, context: Any, collector: Any) -> None:
        await asyncio.sleep(10)
        super().open(conf, context, collector)

    def next_tuple(self) -> None:
        CALLS.append("next_tuple")
        super().next_tuple()


class CleanedUpBolt(CollectBolt):
    def cleanup(self) -> None:
        CALLS.append("cleanup")


def test_a_start_given_up_on_leaves_no_topology_running() -> None:
    # Found in review: a timeout around run_topology that expired while a task was still
    # opening left the topology to start and run on in the background, with no handle to
    # kill it, and the tasks already prepared never got cleanup.
    builder = TopologyBuilder()
    builder.set_spout("slow", SlowOpenSpout([[0, "a"]]))
    builder.set_bolt("collect", CleanedUpBolt()).shuffle_grouping("slow")
    topology = builder.create_topology()

    async def run_for_a_while() -> None:
        async with run_topology(topology):
            await asyncio.sleep(100)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run_for_a_while(), 1)
        await asyncio.sleep(20)

    CALLS.clear()
    simulate(main())
    assert CALLS == ["cleanup"]


def test_embedding_shares_the_running_loop_with_other_work() -> None:
    items = sentences(300)

    async def main() -> None:
        from .topologies import word_count_topology

        ticks = 0

        async def heartbeat() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.ensure_future(heartbeat())
        loop = asyncio.get_running_loop()
        async with run_topology(word_count_topology(items, 2)) as running:
            assert asyncio.get_running_loop() is loop
            await running.wait_until_complete(timeout=30)
        beat.cancel()
        assert ticks > 10  # the service's own coroutine kept running meanwhile
        assert running.info().status == "COMPLETED"

    run(main())


def test_wait_until_complete_times_out_with_a_clear_error() -> None:
    builder = TopologyBuilder()
    builder.set_spout("src", QuietSpout())
    topology = builder.create_topology()

    async def main() -> None:
        async with run_topology(topology, name="endless") as running:
            await running.wait_until_complete(timeout=0.05)

    with pytest.raises(
        TimeoutError,
        match=r"topology 'endless' did not become complete within "
        r"0.05 s \(pending trees: 0\)",
    ):
        simulate(main())


def test_reconfiguration_replaces_executors_in_the_runtimes_own_table() -> None:
    # Two objects that hold one ExecutorTable, not one class split by inheritance: what
    # the reconfiguration replaces is what the runtime runs, reports and stops.
    from engine._runtime.lifecycle import Runtime
    from engine._runtime.reconfigure import Reconfiguration

    assert Reconfiguration not in Runtime.__mro__
    items = [[i, f"s{i}"] for i in range(20)]
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout(items))
    builder.set_bolt("sink", CollectBolt(), 2).shuffle_grouping("src")

    async def scenario() -> tuple[bool, bool, int, int]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            runtime = running.runtime
            before = runtime.table.of_task[1]
            await runtime.reconfiguration.crash_task("sink", 0)
            after = runtime.table.of_task[1]
            await running.wait_until_complete(timeout=60)
            return (
                before not in runtime.executors,
                after in runtime.executors,
                runtime.reconfiguration.crashes,
                len(set(all_objects(running, "src")[0].acked)),
            )

    assert simulate(scenario()) == (True, True, 1, 20)


def test_tasks_run_the_components_as_they_were_when_the_topology_was_created() -> None:
    """Storm serializes a topology's components when it is created: changing the objects
    afterwards changes nothing that runs (and a topology can be run many times)."""
    spout = ListSpout([[i, f"s{i}"] for i in range(5)])
    builder = TopologyBuilder()
    builder.set_spout("src", spout)
    builder.set_bolt("collect", CollectBolt(), 2).shuffle_grouping("src")
    topology = builder.create_topology()
    spout.items.append([5, "late"])  # after create_topology: not what runs

    async def main() -> list[Any]:
        async with run_topology(topology, {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=30)
            return sorted(v[:2] for b in all_objects(running, "collect") for v in b.received)

    for _ in range(2):
        assert run(main()) == [(i, f"s{i}") for i in range(5)]


class StumblingSpout(Spout):
    """Emits 0..29 (message id = the value); every call that would emit a multiple of 7
    raises once first."""

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.raised: set[int] = set()
        self.acked: list[int] = []

    def next_tuple(self) -> None:
        i = self.next
        if i == 30:
            return
        if i % 7 == 0 and i not in self.raised:
            self.raised.add(i)
            raise RuntimeError(f"stumbled before {i}")
        self.next = i + 1
        self.collector.emit([i], msg_id=i)

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked) == 30

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


def test_a_next_tuple_that_raises_is_recorded_and_the_spout_goes_on() -> None:
    """On the system clock (a spout's quick loop): each raise is an error of the spout's
    task, the turn ends, and the next turn calls ``next_tuple`` again."""

    async def main() -> tuple[list[int], int, list[str]]:
        builder = TopologyBuilder()
        builder.set_spout("src", StumblingSpout())
        builder.set_bolt("collect", CollectBolt()).shuffle_grouping("src")
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=30)
            (spout,) = all_objects(running, "src")
            info = running.info().components["src"]
            return sorted(spout.acked), info.error_count, [e.error for e in info.errors]

    acked, count, errors = run(main())
    assert acked == list(range(30))
    assert count == 5
    assert errors == [f"RuntimeError('stumbled before {i}')" for i in (0, 7, 14, 21, 28)]


def test_a_topology_being_killed_is_killed_at_once_and_refuses_to_be_reactivated() -> None:
    """Storm's kill: the status is KILLED from the start of the drain, and activate,
    deactivate and rebalance are refused meanwhile (activate would restart the spouts)."""
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(10)]))
    builder.set_bolt("sink", NeverAckBolt()).shuffle_grouping("src")

    async def main() -> None:
        conf = {"topology.message.timeout.secs": 30, "topology.seed": 2}
        async with run_topology(builder.create_topology(), conf, name="t") as running:
            await advance_time(1)
            kill = asyncio.ensure_future(running.kill(20))
            await advance_time(1)  # the kill waits for the 10 trees the sink holds
            assert not kill.done()
            assert running.status == running.info().status == "KILLED"
            for action in (running.activate, running.deactivate):
                with pytest.raises(TopologyStateError, match=r"^topology 't' is killed$"):
                    action()
            with pytest.raises(TopologyStateError, match=r"^topology 't' is killed$"):
                await running.rebalance("sink", 1)
            assert not any(sx.active for sx in running.runtime.table.spouts)
            await kill
            assert running.status == "KILLED"

    simulate(main())


def test_a_rebalance_that_a_kill_overtakes_moves_and_leaves_the_spouts_off() -> None:
    """A rebalance waiting for the topology to become idle when a kill begins: once idle,
    it moves the executors and ends without error, and the spouts stay off (the kill's
    KILLED holds), rather than failing on reactivating a killed topology."""
    builder = TopologyBuilder()
    builder.set_spout("src", ListSpout([[i, f"s{i}"] for i in range(10)]))
    builder.set_bolt("sink", NeverAckBolt()).shuffle_grouping("src")

    async def main() -> None:
        # the sink holds every tree until it times out (3 s): until then nothing is idle
        conf = {"topology.message.timeout.secs": 3, "topology.seed": 2}
        async with run_topology(builder.create_topology(), conf, name="t") as running:
            await advance_time(1)
            rebalance = asyncio.ensure_future(running.rebalance("sink", 2, wait_secs=10))
            await advance_time(1)
            assert not rebalance.done()
            kill = asyncio.ensure_future(running.kill(20))
            await advance_time(5)  # the trees time out: idle, the rebalance moves
            assert rebalance.done()
            await rebalance  # no TopologyStateError from reactivating
            assert running.status == "KILLED"
            assert not any(sx.active for sx in running.runtime.table.spouts)
            await kill

    simulate(main())
