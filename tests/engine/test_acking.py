"""End to end: Storm's at-least-once guarantees on the engine (each at parallelism 1 and 3)."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from engine import (
    BasicBolt,
    Bolt,
    Config,
    FailedException,
    Fields,
    Spout,
    TopologyBuilder,
    run_topology,
)

from .topologies import (
    AsyncBolt,
    CollectBolt,
    ListSpout,
    NeverAckBolt,
    RaisingBasicBolt,
    all_objects,
    run,
    sentences,
    word_count_topology,
)


def reference(items: list[str]) -> collections.Counter[str]:
    return collections.Counter(w for s in items for w in s.split())


def merged_counts(running: Any) -> collections.Counter[str]:
    total: collections.Counter[str] = collections.Counter()
    for bolt in all_objects(running, "count"):
        total.update(bolt.counts)
    return total


def spout_ids(running: Any, attr: str) -> list[int]:
    return sorted(i for s in all_objects(running, "sentences") for i in getattr(s, attr))


def test_every_message_acked_exactly_once(parallelism: int) -> None:
    items = sentences(600)

    async def main() -> None:
        topology = word_count_topology(items, parallelism)
        async with run_topology(topology, {"topology.seed": 5}) as running:
            await running.wait_until_complete(timeout=30)
            assert spout_ids(running, "acked") == list(range(len(items)))
            assert spout_ids(running, "failed") == []
            assert merged_counts(running) == reference(items)
            info = running.info()
            assert info.components["sentences"].acked == len(items)
            assert info.components["split"].executed == len(items)
            assert info.components["count"].executed == 5 * len(items)
            assert info.components["count"].acked == 5 * len(items)
            assert info.components["split"].emitted == 5 * len(items)
            assert info.components["split"].transferred == 5 * len(items)
            assert info.acker["acked"] == len(items)
            assert info.acker["pending_roots"] == 0
            assert info.pending_trees == 0
            assert info.errors == []
            complete = [t.complete_latency for t in info.components["sentences"].tasks.values()]
            assert sum(c.count for c in complete) == len(items)

    run(main())


def test_random_failures_are_replayed_and_nothing_is_lost(parallelism: int) -> None:
    items = sentences(400)

    async def main() -> None:
        topology = word_count_topology(items, parallelism, fail_rate=0.05)
        async with run_topology(topology, {"topology.seed": 9}) as running:
            await running.wait_until_complete(timeout=60)
            failed = spout_ids(running, "failed")
            acked = spout_ids(running, "acked")
            assert failed, "5 % of 2000 word executions should have failed some sentences"
            # Every sentence is acked exactly once in the end, whatever failed on the way.
            assert acked == list(range(len(items)))
            assert merged_counts(running) == reference(items)
            info = running.info()
            assert info.components["sentences"].failed == len(failed)
            assert info.components["count"].failed > 0
            assert info.errors == []  # FailedException fails quietly

    run(main())


def test_bolt_that_never_acks_times_out_every_tree(parallelism: int) -> None:
    items = [[i, f"s{i}"] for i in range(50)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items, replay=False), parallelism)
        builder.set_bolt("sink", NeverAckBolt(), parallelism).shuffle_grouping("sentences")
        conf = {"topology.message.timeout.secs": 0.2}
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=10)
            assert spout_ids(running, "failed") == list(range(50))
            assert spout_ids(running, "acked") == []
            info = running.info()
            assert info.components["sentences"].timed_out == 50
            assert info.acker["timed_out"] == 50
            assert sum(len(b.held) for b in all_objects(running, "sink")) == 50

    run(main())


class SlowCountBolt(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        sum(range(2000))


def test_max_spout_pending_is_never_exceeded(parallelism: int) -> None:
    items = [[i, f"s{i}"] for i in range(3000)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items), parallelism)
        builder.set_bolt("slow", SlowCountBolt(), parallelism).shuffle_grouping("sentences")
        conf = Config()
        conf.set_max_spout_pending(7)
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=30)
            spouts = all_objects(running, "sentences")
            assert max(s.max_pending for s in spouts) == 7
            assert spout_ids(running, "acked") == list(range(3000))

    run(main())


def test_ackers_zero_acks_at_once_and_tracks_nothing(parallelism: int) -> None:
    items = sentences(200)

    async def main() -> None:
        topology = word_count_topology(items, parallelism)
        conf = Config()
        conf.set_num_ackers(0)
        conf.set_max_spout_pending(1)  # must not stall: nothing is pending without ackers
        async with run_topology(topology, conf) as running:
            await running.wait_until_complete(timeout=30)
            assert spout_ids(running, "acked") == list(range(len(items)))
            assert merged_counts(running) == reference(items)
            info = running.info()
            assert info.acker["acked"] == 0
            assert info.acker["pending_roots"] == 0
            assert info.components["sentences"].acked == len(items)

    run(main())


class BulkAckedSentences(Spout):
    """Emits ``items`` in batches of 7 (message id = index); records ``ack`` and
    ``ack_batch`` calls apart."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        n = len(context.get_component_tasks(context.get_this_component_id()))
        self.ids = range(context.get_this_task_index(), len(self.items), n)  # every n-th
        self.next = 0
        self.acked_one: list[int] = []
        self.acked_bulk: list[list[int]] = []

    def next_tuple(self) -> None:
        i, self.next = self.next, min(self.next + 7, len(self.ids))
        if i < self.next:
            ids = self.ids[i : self.next]
            self.collector.emit_batch([[self.items[k] for k in ids]], msg_ids=ids)

    def ack(self, msg_id: Any) -> None:
        self.acked_one.append(msg_id)

    def ack_batch(self, msg_ids: list[Any]) -> None:
        self.acked_bulk.append(list(msg_ids))

    def is_exhausted(self) -> bool:
        return self.next == len(self.ids)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


def test_ackers_zero_acks_a_spout_with_ack_batch_in_bulk(parallelism: int) -> None:
    """Without ackers every message is acked once emitted, in one ``ack_batch`` call when
    the spout overrides it, as the acker's completions are (never ``ack`` one by one)."""
    items = sentences(100)

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", BulkAckedSentences(items), parallelism)
        builder.set_bolt("collect", CollectBolt(), parallelism).shuffle_grouping("sentences")
        conf = Config()
        conf.set_num_ackers(0)
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=30)
            spouts = all_objects(running, "sentences")
            assert [s.acked_one for s in spouts] == [[] for _ in spouts]
            bulk = sorted(i for s in spouts for ids in s.acked_bulk for i in ids)
            assert bulk == list(range(len(items)))
            assert all(len(ids) > 1 for s in spouts for ids in s.acked_bulk)
            assert running.info().components["sentences"].acked == len(items)
            received = [v[0] for b in all_objects(running, "collect") for v in b.received]
            assert sorted(received) == sorted(items)

    run(main())


def test_unreliable_emits_are_not_tracked(parallelism: int) -> None:
    items = sentences(100)

    async def main() -> None:
        spout = ListSpout([[i, s] for i, s in enumerate(items)], reliable=False)
        topology = word_count_topology(items, parallelism, spout=spout)
        async with run_topology(topology) as running:
            await running.wait_until_complete(timeout=30)
            assert merged_counts(running) == reference(items)
            assert running.info().acker["acked"] == 0

    run(main())


class JoinBolt(Bolt):
    """Joins tuples from two streams on their id; anchors the output to both inputs."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.waiting: dict[int, Any] = {}

    def execute(self, tuple: Any) -> None:
        other = self.waiting.pop(tuple["id"], None)
        if other is None:
            self.waiting[tuple["id"]] = tuple
            return
        # left before right, whichever came first (spout turns end by real time)
        first, second = sorted((other, tuple), key=lambda t: t.source_component)
        self.collector.emit([tuple["id"], f"{first[1]}+{second[1]}"], anchors=[other, tuple])
        self.collector.ack(other)
        self.collector.ack(tuple)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "joined"])


class FailOddBolt(Bolt):
    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.joined: list[str] = []

    def execute(self, tuple: Any) -> None:
        if tuple["id"] % 2:
            self.collector.fail(tuple)
        else:
            self.joined.append(tuple["joined"])
            self.collector.ack(tuple)


def test_multi_anchoring_join_acks_and_fails_both_roots(parallelism: int) -> None:
    left = [[i, f"L{i}"] for i in range(40)]
    right = [[i, f"R{i}"] for i in range(40)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("left", ListSpout(left, fields=("id", "v"), replay=False), parallelism)
        builder.set_spout("right", ListSpout(right, fields=("id", "v"), replay=False), parallelism)
        builder.set_bolt("join", JoinBolt(), parallelism).fields_grouping(
            "left", Fields("id")
        ).fields_grouping("right", Fields("id"))
        builder.set_bolt("sink", FailOddBolt(), parallelism).shuffle_grouping("join")
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=30)
            for side in ("left", "right"):
                spouts = all_objects(running, side)
                assert sorted(i for s in spouts for i in s.acked) == list(range(0, 40, 2))
                assert sorted(i for s in spouts for i in s.failed) == list(range(1, 40, 2))
            joined = sorted(j for b in all_objects(running, "sink") for j in b.joined)
            assert joined == sorted(f"L{i}+R{i}" for i in range(0, 40, 2))

    run(main())


@pytest.mark.parametrize(
    ("kind", "reported"),
    [("failed", False), ("reported", True), ("error", True)],
)
def test_basic_bolt_exceptions_fail_the_input(parallelism: int, kind: str, reported: bool) -> None:
    items = [[i, f"s{i}"] for i in range(30)]
    bad = {"s3", "s17"}

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items, replay=False), parallelism)
        builder.set_bolt("check", RaisingBasicBolt(bad, kind), parallelism).shuffle_grouping(
            "sentences"
        )
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=30)
            assert spout_ids(running, "failed") == [3, 17]
            assert len(spout_ids(running, "acked")) == 28
            errors = running.info().errors
            if not reported:
                assert errors == []
                return
            assert len(errors) == 2
            assert {e.component for e in errors} == {"check"}
            expected = {
                "reported": "ReportedFailedException('failed and reported')",
                "error": "ValueError('bad value s3')",
            }[kind]
            assert expected in {e.error for e in errors}
            assert all("Traceback" in e.traceback for e in errors)

    run(main())


def test_async_bolt_runs_tuples_concurrently_within_its_bound(parallelism: int) -> None:
    items = [[i, f"s{i}"] for i in range(200)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items), parallelism)
        builder.set_bolt("io", AsyncBolt(), parallelism).shuffle_grouping("sentences")
        builder.set_bolt("sink", SlowCountBolt(), 1).shuffle_grouping("io")
        conf = Config()
        conf.set_bolt_max_inflight(8)
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=30)
            bolts = all_objects(running, "io")
            assert sum(b.done for b in bolts) == 200
            assert max(b.max_inflight for b in bolts) == 8
            assert spout_ids(running, "acked") == list(range(200))
            assert running.info().components["sink"].executed == 200

    run(main())


class ReplayInFailSpout(ListSpout):
    """Replays a failed message from inside fail(), as Storm spouts often do."""

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.collector.emit(self.items[msg_id], msg_id=msg_id)


class FailFirstTime(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: set[int] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        if tuple[0] not in self.seen:
            self.seen.add(tuple[0])
            raise FailedException("first attempt fails")


def test_tuples_emitted_from_fail_are_sent() -> None:
    items = [[i, f"s{i}"] for i in range(20)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ReplayInFailSpout(items, replay=False))
        builder.set_bolt("flaky", FailFirstTime()).fields_grouping("sentences", Fields("id"))
        async with run_topology(builder.create_topology()) as running:
            await running.wait_until_complete(timeout=10)
            assert spout_ids(running, "acked") == list(range(20))
            assert spout_ids(running, "failed") == list(range(20))

    run(main())


class CallbackAckBolt(Bolt):
    """Acks each input from a loop callback, after execute returned (as a sink does)."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        import asyncio

        self.collector = collector
        self.loop = asyncio.get_running_loop()

    def execute(self, tuple: Any) -> None:
        self.loop.call_soon(self.collector.ack, tuple)


def test_acks_from_outside_execute_reach_the_acker_at_once() -> None:
    # Max spout pending 5 and a 30 s timeout: if such acks waited for the acker's next
    # timeout sweep (once a second), 200 messages would take 40 s.
    items = [[i, f"s{i}"] for i in range(200)]

    async def main() -> None:
        builder = TopologyBuilder()
        builder.set_spout("sentences", ListSpout(items))
        builder.set_bolt("sink", CallbackAckBolt()).shuffle_grouping("sentences")
        conf = Config()
        conf.set_max_spout_pending(5)
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=5)
            assert spout_ids(running, "acked") == list(range(200))

    run(main())


class _IdsSpout(Spout):
    """Emits 0..n-1 with message ids, per tuple or as one batch; overrides no ack."""

    def __init__(self, n: int, batch: bool) -> None:
        self.n, self.batch = n, batch

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.done = False

    def next_tuple(self) -> None:
        if self.done:
            return
        self.done = True
        ids = list(range(self.n))
        if self.batch:
            self.collector.emit_batch([ids], msg_ids=ids)
        else:
            for i in ids:
                self.collector.emit([i], msg_id=i)

    def is_exhausted(self) -> bool:
        return self.done

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


@pytest.mark.parametrize("batch", [False, True], ids=["per-tuple", "batch"])
@pytest.mark.parametrize("ackers", [1, 0])
def test_a_spout_without_ack_has_its_trees_completed_and_counted(batch: bool, ackers: int) -> None:
    # Spout.ack does nothing, so the engine calls nothing for such a spout's acks; the trees
    # still leave the pending table and count as acked. One that sets ``ack`` on itself
    # hears each.
    heard: list[int] = []

    class SetsAck(_IdsSpout):
        def open(self, conf: Any, context: Any, collector: Any) -> None:
            super().open(conf, context, collector)
            self.ack = heard.append  # type: ignore[method-assign]

    async def main() -> None:
        for spout in (_IdsSpout(300, batch), SetsAck(300, batch)):
            builder = TopologyBuilder()
            builder.set_spout("ids", spout)
            builder.set_bolt("sink", CollectBolt()).shuffle_grouping("ids")
            conf = {"topology.acker.executors": ackers}
            async with run_topology(builder.create_topology(), conf) as running:
                await running.wait_until_complete(timeout=30)
                info = running.info().components["ids"]
                assert (info.acked, info.failed) == (300, 0)
                assert running.runtime.executors[0].pending() == 0

    run(main())
    assert sorted(heard) == list(range(300))


def test_a_spouts_pending_table_grows_between_turns_not_inside_next_tuple(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Growing the table of trees in flight takes a while at millions of trees; inside an
    # emit it would count as the spout's own call (the blocking warning). The executor
    # grows it between turns once 7/16 full, before an emit finds it half full.
    from engine._columnar.batch_collector import PendingTable
    from engine.testing import simulate

    inside: list[int] = []
    in_call = [False]
    grow = PendingTable._grow

    def spy(self: PendingTable) -> None:
        if in_call[0]:
            inside.append(self.slots)
        grow(self)

    monkeypatch.setattr(PendingTable, "_grow", spy)

    class Batches(Spout):
        def open(self, conf: Any, context: Any, collector: Any) -> None:
            self.collector, self.next = collector, 0

        def next_tuple(self) -> None:
            if self.next >= 200_000:
                return
            ids = list(range(self.next, self.next + 1000))
            in_call[0] = True
            try:
                self.collector.emit_batch([ids], msg_ids=ids)
            finally:
                in_call[0] = False
            self.next += 1000

        def declare_output_fields(self, declarer: Any) -> None:
            declarer.declare(["n"])

    async def main() -> tuple[int, int]:
        builder = TopologyBuilder()
        builder.set_spout("ids", Batches())
        builder.set_bolt("hold", NeverAckBolt()).shuffle_grouping("ids")
        conf = {"topology.message.timeout.secs": 3600}
        async with run_topology(builder.create_topology(), conf) as running:
            (spout,) = [e for e in running.runtime.executors if e.component_id == "ids"]
            while spout.pending() < 200_000:
                await asyncio.sleep(0.01)
            return spout.pending(), spout.collectors[spout.tasks[0]].pending.slots

    pending, slots = simulate(main())
    assert pending == 200_000 and slots >= 2**19
    # grown inside an emit only while small (a turn's rows past 1/16 of the table)
    assert all(size < 2**14 for size in inside), inside
