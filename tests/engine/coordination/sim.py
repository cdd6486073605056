"""A slow, obviously-correct harness for ``CoordinatedBolt``: the bolts' tasks without the
engine's runtime, and a network that delivers in-flight tuples in whatever order a test
picks (not even FIFO per channel), with Storm's tuple-tree bookkeeping kept by hand.

The chain it wires is linear DRPC's shape::

    request (rid, n) -> a: Expand   (no sources)          emits (rid, j) for j < n
                     -> b: Fanout   ({a: single})         emits m tuples per input
                     -> c: Count    ({b: all}, id stream) finishes with n * m tuples
    the id tuple (rid) goes to c by fields grouping on the id, like the request tuples do.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import BasicBolt, Bolt, FailedException, Fields, Spout, TopologyBuilder
from engine._model.context import TopologyContext, build_plan
from engine._model.grouping import GroupingKind, stable_hash
from engine._model.tuple import Source, Tuple
from engine.coordination import (
    COORDINATED_STREAM_ID,
    CoordinatedBolt,
    FinishedCallback,
    IdStreamSpec,
    SourceArgs,
)

CONF = {"topology.message.timeout.secs": 30, "topology.tick.tuple.freq.secs": 1.0}


def run_now(coro: Any) -> Any:
    """Drive a coroutine that never really suspends (``CoordinatedBolt.prepare``)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine suspended")


class _Requests(Spout):
    def next_tuple(self) -> None:
        raise AssertionError("the harness emits requests itself")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["request", "n"])
        declarer.declare_stream("id", ["request"])


class Expand(BasicBolt, FinishedCallback):
    def prepare(self, conf: Any, context: Any) -> None:
        self.finished: list[Any] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        for j in range(tuple[1]):
            collector.emit([tuple[0], j])

    def finished_id(self, id: Any) -> None:
        self.finished.append(id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "j"])


class Fanout(Bolt, FinishedCallback):
    """Emits ``m`` tuples per input, anchored or not (Storm's batch bolts emit unanchored:
    then only the held count reports keep a request's tree open)."""

    def __init__(self, m: int, failing: frozenset[tuple[Any, int]], anchored: bool = True) -> None:
        self.m = m
        self.failing = failing
        self.anchored = anchored

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.finished: list[Any] = []

    def execute(self, tuple: Any) -> None:
        if (tuple[0], tuple[1]) in self.failing:
            raise FailedException("injected")
        for x in range(self.m):
            self.collector.emit([tuple[0], tuple[1], x], anchors=tuple if self.anchored else None)
        self.collector.ack(tuple)

    def finished_id(self, id: Any) -> None:
        self.finished.append(id)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "j", "x"])


class Count(Bolt, FinishedCallback):
    """Counts each request's tuples. With ``late``, it holds every tuple until the harness
    acks it (``ack_held``), so acks come in any order too."""

    def __init__(self, late: bool) -> None:
        self.late = late

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.counts: dict[Any, int] = {}
        self.finished: list[tuple[Any, int]] = []
        self.held: list[Any] = []

    def execute(self, tuple: Any) -> None:
        self.counts[tuple[0]] = self.counts.get(tuple[0], 0) + 1
        if self.late:
            self.held.append(tuple)
        else:
            self.collector.ack(tuple)

    def finished_id(self, id: Any) -> None:
        count = self.counts.pop(id, 0)
        self.world.finished_at_c.add(id)
        self.finished.append((id, count))
        self.collector.emit([id, count])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["id", "count"])


@dataclass
class World:
    """Tasks, the network, and every root's un-acked tuples."""

    topology: Any
    plan: Any
    choose: Callable[[int], int]  # picks an index below its argument
    tasks: dict[int, Any] = field(default_factory=dict)
    network: list[tuple[int, Tuple]] = field(default_factory=list)
    pending: dict[int, int] = field(default_factory=dict)  # root -> un-acked tuples
    failed_roots: set[int] = field(default_factory=set)
    completed_roots: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    results: list[list[Any]] = field(default_factory=list)
    finished_at_c: set[int] = field(default_factory=set)
    early: list[int] = field(default_factory=list)  # roots complete before c finished them

    def component_of(self, task: int) -> str:
        return self.plan.task_component[task]

    def targets(self, cid: str, stream: str, values: Sequence[Any]) -> list[int]:
        out: list[int] = []
        fields = self.topology.components[cid].streams[stream].fields
        for target, grouping in self.topology.subscribers(cid, stream):
            tasks = list(self.plan.component_tasks[target])
            kind = grouping.kind
            if kind is GroupingKind.FIELDS:
                idx = [fields.index(f) for f in grouping.fields]
                key = values[idx[0]] if len(idx) == 1 else tuple(values[i] for i in idx)
                out.append(tasks[stable_hash(key) % len(tasks)])
            elif kind is GroupingKind.ALL:
                out.extend(tasks)
            elif kind is GroupingKind.DIRECT:
                continue
            else:
                out.append(tasks[self.choose(len(tasks))])
        return out

    def send(
        self,
        cid: str,
        task: int,
        stream: str,
        values: Sequence[Any],
        root: int | None,
        targets: Iterable[int],
    ) -> None:
        fields = self.topology.components[cid].streams[stream].fields
        for target in targets:
            t = Tuple(list(values), Source(cid, stream, task, fields), root, 0)
            if root is not None:
                self.pending[root] += 1
            self.network.append((target, t))

    def done(self, t: Tuple, failed: bool) -> None:
        root = t._root
        assert t._ack_val is not None, f"{t!r} completed twice"
        t._ack_val = None
        if root is None:
            return
        if failed:
            self.failed_roots.add(root)
        self.pending[root] -= 1
        if self.pending[root] == 0 and root not in self.failed_roots:
            self.completed_roots.append(root)
            if root not in self.finished_at_c:
                self.early.append(root)

    def root_complete(self, root: int) -> bool:
        return self.pending[root] == 0 and root not in self.failed_roots


class FakeCollector:
    """The engine collector of one task, over the ``World``."""

    def __init__(self, world: World, task: int) -> None:
        self.world = world
        self.task = task
        self.cid = world.component_of(task)

    @staticmethod
    def _root(anchors: Tuple | Iterable[Tuple] | None) -> int | None:
        if anchors is None:
            return None
        anchors = [anchors] if isinstance(anchors, Tuple) else list(anchors)
        roots = {a._root for a in anchors if a._root is not None}
        for a in anchors:
            assert a._ack_val is not None, f"emit anchored to completed {a!r}"
        assert len(roots) <= 1
        return roots.pop() if roots else None

    def emit(
        self,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> list[int]:
        targets = self.world.targets(self.cid, stream, values)
        self.world.send(self.cid, self.task, stream, values, self._root(anchors), targets)
        if self.cid == "c":
            self.world.results.append(list(values))
        return targets

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        stream: str = "default",
        anchors: Tuple | Iterable[Tuple] | None = None,
    ) -> None:
        assert stream == COORDINATED_STREAM_ID
        assert self.world.component_of(task) in {
            target for target, _ in self.world.topology.subscribers(self.cid, stream)
        }
        self.world.send(self.cid, self.task, stream, values, self._root(anchors), [task])

    def ack(self, t: Tuple) -> None:
        self.world.done(t, failed=False)

    def fail(self, t: Tuple) -> None:
        self.world.done(t, failed=True)

    def reset_timeout(self, t: Tuple) -> None:
        pass

    def report_error(self, error: Any) -> None:
        self.world.errors.append(repr(error))


def build_world(
    choose: Callable[[int], int],
    tasks: tuple[int, int, int],
    m: int,
    failing: frozenset[tuple[Any, int]] = frozenset(),
    late: bool = False,
    anchored: bool = True,
) -> World:
    builder = TopologyBuilder()
    builder.set_spout("req", _Requests())
    builder.set_bolt("a", CoordinatedBolt(Expand()), tasks[0]).shuffle_grouping("req")
    builder.set_bolt(
        "b", CoordinatedBolt(Fanout(m, failing, anchored), {"a": SourceArgs.single()}), tasks[1]
    ).shuffle_grouping("a").direct_grouping("a", COORDINATED_STREAM_ID)
    builder.set_bolt(
        "c",
        CoordinatedBolt(Count(late), {"b": SourceArgs.all()}, IdStreamSpec("req", "id")),
        tasks[2],
    ).fields_grouping("b", Fields("id")).direct_grouping(
        "b", COORDINATED_STREAM_ID
    ).fields_grouping("req", Fields("request"), "id")
    topology = builder.create_topology()
    plan = build_plan(topology)
    world = World(topology, plan, choose)
    for cid in ("a", "b", "c"):
        for task in plan.component_tasks[cid]:
            bolt = pickle.loads(pickle.dumps(topology.components[cid].component))
            conf = {**CONF, **topology.components[cid].config}
            context = TopologyContext(topology, plan, conf, task, {})
            run_now(bolt.prepare(conf, context, FakeCollector(world, task)))
            bolt.delegate.world = world
            world.tasks[task] = bolt
    return world


def submit(world: World, rid: int, n: int) -> None:
    """The request's tuples, as prepare-request emits them: one root, two tuples."""
    world.pending[rid] = 0
    world.send("req", 0, "default", [rid, n], rid, world.targets("req", "default", [rid, n]))
    world.send("req", 0, "id", [rid], rid, world.targets("req", "id", [rid]))


def deliver(world: World, index: int) -> None:
    task, t = world.network.pop(index)
    # on FailedException the engine would fail the tuple: the CoordinatedBolt already did
    with contextlib.suppress(FailedException):
        world.tasks[task].execute(t)


def held(world: World) -> list[tuple[int, Any]]:
    """Tuples the ``c`` tasks executed and have not acked yet (late acks)."""
    return [
        (task, t)
        for task in world.plan.component_tasks["c"]
        for t in world.tasks[task].delegate.held
    ]


def ack_held(world: World, index: int) -> None:
    task, t = held(world)[index]
    bolt = world.tasks[task].delegate
    bolt.held.remove(t)
    bolt.collector.ack(t)
