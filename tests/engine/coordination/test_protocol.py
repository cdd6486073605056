"""CoordinatedBolt's protocol against the by-hand harness (``sim.py``): any delivery order,
any ack order, any parallelism, with and without failures."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Fields
from engine._model.context import TopologyContext
from engine._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Source, Tuple
from engine.coordination import CoordinatedBolt, SourceArgs, TimeoutCallback

from .sim import (
    FakeCollector,
    Fanout,
    World,
    ack_held,
    build_world,
    deliver,
    held,
    run_now,
    submit,
)

tasks_st = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))


def run_to_the_end(world: World, pick: Any) -> None:
    while True:
        waiting = held(world)
        actions = len(world.network) + len(waiting)
        if not actions:
            return
        i = pick(actions)
        if i < len(world.network):
            deliver(world, i)
        else:
            ack_held(world, i - len(world.network))


def finished(world: World, component: str) -> dict[int, list[Any]]:
    return {
        t: list(world.tasks[t].delegate.finished) for t in world.plan.component_tasks[component]
    }


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    tasks=tasks_st,
    sizes=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    m=st.integers(1, 3),
    late=st.booleans(),
    anchored=st.booleans(),
)
def test_any_delivery_order_finishes_each_id_exactly_once_with_the_right_count(
    data: st.DataObject,
    tasks: tuple[int, int, int],
    sizes: list[int],
    m: int,
    late: bool,
    anchored: bool,
) -> None:
    def pick(n: int) -> int:
        return data.draw(st.integers(0, n - 1))

    world = build_world(pick, tasks, m, late=late, anchored=anchored)
    rids = [101 + i for i in range(len(sizes))]
    for rid, n in zip(rids, sizes, strict=True):
        submit(world, rid, n)
    run_to_the_end(world, pick)

    # a: the one task that got the request finishes it; b: every task finishes every id
    assert sorted(r for ids in finished(world, "a").values() for r in ids) == rids
    for ids in finished(world, "b").values():
        assert sorted(ids) == rids
    # c: the task the id went to finishes it once, with every tuple of the request
    c_done = [done for done in finished(world, "c").values() for done in done]
    assert sorted(c_done) == sorted((rid, n * m) for rid, n in zip(rids, sizes, strict=True))
    assert sorted(world.results) == sorted([rid, n * m] for rid, n in zip(rids, sizes, strict=True))
    # the request's tree completes, and never before the last stage finished it
    assert sorted(world.completed_roots) == rids
    assert world.early == []
    assert world.failed_roots == set()
    assert world.errors == []
    for cid in ("a", "b"):
        for task in world.plan.component_tasks[cid]:
            assert world.tasks[task].statistics().tracked == 0
    stats = Counter()
    for task in world.plan.component_tasks["c"]:
        s = world.tasks[task].statistics()
        stats["finished"] += s.finished
        stats["failed"] += s.failed
    assert stats == Counter(finished=len(rids))


@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    tasks=tasks_st,
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    m=st.integers(1, 3),
    failing=st.sets(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=3),
)
def test_a_failed_tuple_fails_its_request_only(
    data: st.DataObject,
    tasks: tuple[int, int, int],
    sizes: list[int],
    m: int,
    failing: set[tuple[int, int]],
) -> None:
    def pick(n: int) -> int:
        return data.draw(st.integers(0, n - 1))

    rids = [101 + i for i in range(len(sizes))]
    bad = frozenset((rids[i], j) for i, j in failing if i < len(rids))
    world = build_world(pick, tasks, m, failing=bad, anchored=data.draw(st.booleans()))
    for rid, n in zip(rids, sizes, strict=True):
        submit(world, rid, n)
    run_to_the_end(world, pick)

    lost = {
        rid for rid, n in zip(rids, sizes, strict=True) if any((rid, j) in bad for j in range(n))
    }
    ok = [rid for rid in rids if rid not in lost]
    assert world.failed_roots == lost
    assert sorted(world.completed_roots) == ok
    c_done = sorted(done for done in finished(world, "c").values() for done in done)
    assert c_done == sorted((rid, n * m) for rid, n in zip(rids, sizes, strict=True) if rid in ok)
    for ids in finished(world, "b").values():  # at most once, and every good id
        assert len(ids) == len(set(ids))
        assert set(ok) <= set(ids)
    assert world.errors == []  # FailedException fails quietly


def tick() -> Tuple:
    return Tuple(
        [0.5], Source(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, -1, Fields("rate_secs")), None, 0
    )


def test_an_id_that_never_completes_times_out_once_and_its_stragglers_fail() -> None:
    class Timed(Fanout, TimeoutCallback):
        def prepare(self, conf: Any, context: Any, collector: Any) -> None:
            super().prepare(conf, context, collector)
            self.timed_out: list[Any] = []

        def timeout_id(self, id: Any) -> None:
            self.timed_out.append(id)

    world = build_world(lambda n: 0, (1, 1, 1), 1)
    (b_task,) = world.plan.component_tasks["b"]
    bolt = CoordinatedBolt(Timed(1, frozenset()), {"a": SourceArgs.single()}, timeout_secs=2)
    conf = {"topology.message.timeout.secs": 30, **bolt.component_configuration()}
    assert conf["topology.tick.tuple.freq.secs"] == 0.5
    context = TopologyContext(world.topology, world.plan, conf, b_task, {})
    run_now(bolt.prepare(conf, context, FakeCollector(world, b_task)))
    world.tasks[b_task] = bolt
    world.pending[7] = 0
    # a tuple of request 7 reaches b, but a's count report never comes
    world.send("a", 1, "default", [7, 0], 7, [b_task])
    deliver(world, 0)
    world.network.clear()  # b's output is not the point here
    for _ in range(4):  # 2 s at 0.5 s per tick: still tracked (it lives for a full 2 s)
        bolt.execute(tick())
    assert bolt.delegate.timed_out == []
    assert bolt.statistics().tracked == 1
    bolt.execute(tick())
    assert bolt.delegate.timed_out == [7]
    assert bolt.statistics().timed_out == 1
    assert bolt.statistics().tracked == 0
    # a straggler of request 7 is failed without running the bolt
    world.send("a", 1, "default", [7, 1], 7, [b_task])
    deliver(world, 0)
    assert world.failed_roots == {7}
    assert bolt.statistics().tracked == 0
    for _ in range(10):
        bolt.execute(tick())
    assert bolt.delegate.timed_out == [7]  # once
