"""Executors' run loops: how long a spout's turn holds the event loop, and how many calls
of an async bolt run at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine import (
    BasicBatchBolt,
    BasicBolt,
    BatchBolt,
    FailedException,
    Spout,
    TopologyBuilder,
    run_topology,
)
from engine._time.loop import run_sync
from engine.testing import simulate


class BlockingSpout(Spout):
    """``next_tuple`` blocks 20 ms (a synchronous client, say) and emits one tuple. It
    counts its calls per stretch of the loop: a callback queued at a stretch's first call
    runs as soon as the loop gets control back, and closes the stretch."""

    def __init__(self, n: int) -> None:
        self.n = n

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.sent = 0
        self.acked = 0
        self.calls = 0
        self.stretches: list[int] = []

    def next_tuple(self) -> None:
        if self.sent == self.n:
            return
        if self.calls == 0:
            asyncio.get_running_loop().call_soon(self._stretch_ended)
        self.calls += 1
        time.sleep(0.02)
        self.collector.emit([self.sent], msg_id=self.sent)
        self.sent += 1

    def _stretch_ended(self) -> None:
        self.stretches.append(self.calls)
        self.calls = 0

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def is_exhausted(self) -> bool:
        return self.acked == self.n

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Sink(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass


def test_a_blocking_next_tuple_holds_the_loop_for_one_call_per_turn() -> None:
    builder = TopologyBuilder()
    builder.set_spout("slow", BlockingSpout(10))
    builder.set_bolt("sink", Sink()).shuffle_grouping("slow")

    async def scenario() -> list[int]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=60)
            (spout,) = running.task_objects("slow").values()
            return list(spout.stretches)

    # Real time: the blocking is what is measured (under ``simulate`` the topology's clock
    # stands still while a call blocks, and a spout's turn ends by count). Before, the
    # spout loop looked at the clock every 16th call only: 10 calls in one stretch.
    assert run_sync(scenario()) == [1] * 10


class BatchesSpout(Spout):
    """Emits ``batches`` batches of ``rows`` rows (message id = row value), one per
    ``next_tuple``; replays what fails; records when each id was acked (loop time)."""

    def __init__(self, batches: int, rows: int) -> None:
        self.batches = batches
        self.rows = rows

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.next = 0
        self.replay: list[int] = []
        self.acked_at: dict[int, float] = {}
        self.failed: list[int] = []

    def next_tuple(self) -> None:
        if self.replay:
            ids, self.replay = self.replay, []
        elif self.next < self.batches:
            ids = list(range(self.next * self.rows, (self.next + 1) * self.rows))
            self.next += 1
        else:
            return
        self.collector.emit_batch([ids], msg_ids=ids)

    def ack(self, msg_id: Any) -> None:
        self.acked_at[msg_id] = asyncio.get_running_loop().time()

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)
        self.replay.append(msg_id)

    def is_exhausted(self) -> bool:
        return len(self.acked_at) == self.batches * self.rows

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class _Concurrency:
    """Counts the calls in flight; remembers when each row's call completed."""

    def start(self) -> None:
        if not hasattr(self, "in_flight"):
            self.in_flight = self.max_in_flight = self.calls = 0
            self.done_at: dict[int, float] = {}
        self.in_flight += 1
        self.calls += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, rows: list[int]) -> None:
        self.in_flight -= 1
        now = asyncio.get_running_loop().time()
        self.done_at.update(dict.fromkeys(rows, now))


def _delay(rows: list[int]) -> float:
    # Varied, so calls complete in another order than they started.
    return 0.3 - (rows[0] % 7) * 0.01


class AwaitingBasicBatch(BasicBatchBolt, _Concurrency):
    """Awaits ~0.3 s (a round trip to a store), then emits its rows, anchored by default
    to the call's own batch; the engine acks them when the call returns."""

    async def execute_batch(self, batch: Any, collector: Any) -> None:
        self.start()
        rows = list(batch.column("n"))
        await asyncio.sleep(_delay(rows))
        collector.emit_batch([rows])
        self.end(rows)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class AwaitingRichBatch(BatchBolt, _Concurrency):
    """The same as a ``BatchBolt``: emits without naming the batch, acks it by name."""

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector

    async def execute_batch(self, batch: Any) -> None:
        self.start()
        rows = list(batch.column("n"))
        await asyncio.sleep(_delay(rows))
        self.collector.emit_batch([rows])
        self.end(rows)
        self.collector.ack(batch)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class FailSevensOnce(BasicBolt):
    """Fails each multiple of 7 the first time it sees it: if a child were anchored to
    another call's batch, another id would fail."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: set[int] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        n = tuple["n"]
        if n % 7 == 0 and n not in self.seen:
            self.seen.add(n)
            raise FailedException()


@pytest.mark.parametrize("bolt", [AwaitingBasicBatch, AwaitingRichBatch])
def test_an_async_batch_bolt_runs_up_to_max_inflight_batches_at_once(bolt: type) -> None:
    builder = TopologyBuilder()
    builder.set_spout("batches", BatchesSpout(200, 5))
    builder.set_bolt("store", bolt()).shuffle_grouping("batches")
    builder.set_bolt("check", FailSevensOnce()).shuffle_grouping("store")

    async def scenario() -> tuple[float, Any, Any]:
        conf = {"topology.seed": 1, "topology.bolt.max.inflight": 64}
        async with run_topology(builder.create_topology(), conf) as running:
            start = running.clock.now_ns()
            await running.wait_until_complete(timeout=600)
            took = (running.clock.now_ns() - start) / 1e9
            (spout,) = running.task_objects("batches").values()
            (store,) = running.task_objects("store").values()
            return took, spout, store

    took, spout, store = simulate(scenario())
    # 200 batches of 0.3 s, 64 at a time: 4 rounds (one at a time: 60 s), plus the replays
    # of the 143 failed multiples of 7 (one or two batches more).
    assert took < 2.0, took
    assert store.max_in_flight == 64
    assert sorted(spout.failed) == list(range(0, 1000, 7))
    assert sorted(spout.acked_at) == list(range(1000))
    # Every row acked once its call completed, not before.
    assert all(spout.acked_at[n] >= store.done_at[n] for n in range(1000))


def test_max_inflight_bounds_the_async_batch_calls_of_a_task() -> None:
    builder = TopologyBuilder()
    builder.set_spout("batches", BatchesSpout(40, 2))
    builder.set_bolt("store", AwaitingBasicBatch(), 2).shuffle_grouping("batches")

    async def scenario() -> list[int]:
        conf = {"topology.seed": 1, "topology.bolt.max.inflight": 3}
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=600)
            return [s.max_in_flight for s in running.task_objects("store").values()]

    assert simulate(scenario()) == [3, 3]


class FailsOneBatchOnce(BasicBatchBolt):
    """Its call for the batch of rows 10-14 raises after awaiting, the first time."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.raised = False

    async def execute_batch(self, batch: Any, collector: Any) -> None:
        rows = list(batch.column("n"))
        await asyncio.sleep(_delay(rows))
        if rows[0] == 10 and not self.raised:
            self.raised = True
            raise ValueError("store refused rows 10-14")


def test_a_failing_async_batch_call_fails_its_own_rows_only() -> None:
    builder = TopologyBuilder()
    builder.set_spout("batches", BatchesSpout(20, 5))
    builder.set_bolt("store", FailsOneBatchOnce()).shuffle_grouping("batches")

    async def scenario() -> tuple[list[int], list[str]]:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=600)
            (spout,) = running.task_objects("batches").values()
            return sorted(spout.failed), [e.error for e in running.info().errors]

    failed, errors = simulate(scenario())
    assert failed == [10, 11, 12, 13, 14]
    assert errors == ["ValueError('store refused rows 10-14')"]


class EmitsOnOddCalls(BasicBatchBolt):
    """Passes its rows on in its odd calls; its even calls, awaiting longer, emit nothing."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.calls = 0

    async def execute_batch(self, batch: Any, collector: Any) -> None:
        self.calls += 1
        odd = self.calls % 2
        await asyncio.sleep(0.001 if odd else 0.002)
        if odd:
            collector.emit_batch([batch.column("n")])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["n"])


class Seen(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: list[int] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.seen.append(tuple["n"])


def test_concurrent_flushes_of_async_calls_deliver_batches_as_batches() -> None:
    # Each async call flushes when it completes. One call's flush waits for room in the
    # first target's small inbox while a call that emitted nothing flushes: that one must
    # still send the batches waiting for the second target as batches, not a list of them.
    builder = TopologyBuilder()
    builder.set_spout("batches", BatchesSpout(40, 5))
    builder.set_bolt("store", EmitsOnOddCalls()).shuffle_grouping("batches")
    builder.set_bolt("a", Seen()).global_grouping("store")
    builder.set_bolt("b", Seen()).global_grouping("store")

    async def scenario() -> tuple[list[int], list[list[int]], list[str]]:
        conf = {
            "topology.seed": 1,
            "topology.executor.receive.buffer.size": 4,
            "topology.bolt.max.inflight": 4,
        }
        async with run_topology(builder.create_topology(), conf) as running:
            await running.wait_until_complete(timeout=600)
            (spout,) = running.task_objects("batches").values()
            seen = [sorted(bolt.seen) for c in "ab" for bolt in running.task_objects(c).values()]
            return sorted(spout.acked_at), seen, [e.error for e in running.info().errors]

    acked, seen, errors = simulate(scenario())
    assert errors == []
    assert acked == list(range(200))
    assert seen[0] == seen[1] == sorted(set(seen[0]))
    assert seen[0]  # the odd calls' rows, each once


class KeepsTheFirst(BasicBolt):
    """Keeps its first input and reads that tuple's tree again at every later input."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.first: Any = None
        self.first_roots: frozenset[int] = frozenset()
        self.later_reads: set[frozenset[int]] = set()

    def execute(self, tuple: Any, collector: Any) -> None:
        if self.first is None:
            self.first, self.first_roots = tuple, tuple.root_ids
        else:
            self.later_reads.add(self.first.root_ids)


def test_a_tuple_a_basic_bolt_keeps_has_its_own_tree_for_the_rest_of_its_batch() -> None:
    # One batch of 40 rows runs through the basic bolt's row view: the tuple it kept at
    # the first row must not take the tree of the row being executed afterwards.
    builder = TopologyBuilder()
    builder.set_spout("batches", BatchesSpout(1, 40))
    builder.set_bolt("keep", KeepsTheFirst()).shuffle_grouping("batches")

    async def scenario() -> Any:
        async with run_topology(builder.create_topology(), {"topology.seed": 1}) as running:
            await running.wait_until_complete(timeout=600)
            (bolt,) = running.task_objects("keep").values()
            return bolt

    bolt = simulate(scenario())
    assert bolt.first.values == (0,)
    assert len(bolt.first_roots) == 1
    assert bolt.later_reads == {bolt.first_roots}
