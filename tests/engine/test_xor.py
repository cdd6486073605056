"""The XOR protocol's one home (``engine._columnar.xor``) and the hot paths that apply it.

``SpoutCollector._send`` inlines ``spout_tree`` for a single-root tuple; a basic bolt
(``BoltExecutor._run_basic`` with its ``BasicCollector``) applies rules 2-4 to whole batches
on arrays. Each is checked here against the per-tuple functions, on the same ids."""

from __future__ import annotations

import asyncio
import random
from functools import reduce
from operator import xor
from typing import Any

import pytest

from acker_kernel import Op, TreeIdSource
from engine import BasicBolt, FailedException
from engine._columnar.batch import TupleBatch
from engine._columnar.xor import ack, anchored_copy, fail, spout_tree
from engine._execution.acker import AckerOps
from engine._execution.channel import Inbox
from engine._execution.collector import (
    Route,
    SpoutCollector,
    TracedSpoutCollector,
    UntrackedBasicCollector,
)
from engine._execution.executor import BoltExecutor
from engine._execution.groupers import Grouper, NoColumnRouting, SparkRouting
from engine._execution.services import Services
from engine._model.config import merged_config
from engine._model.faults import Trace
from engine._model.fields import Fields
from engine._model.grouping import Grouping, GroupingKind
from engine._model.tuple import Source, Tuple
from engine._time.clock import SystemClock

SEED = 1234
IN = Source("in", "default", 9, Fields("x"))


class Host:
    """What a collector needs of its executor (``CollectorHost``)."""

    def __init__(self, max_task: int = 8) -> None:
        self.component_id = "c"
        self.out: list[list[Tuple] | None] = [[] for _ in range(max_task + 1)]
        self.in_batch = True
        self.acker_ops = AckerOps()
        self.clock = SystemClock()
        self.trace = None
        self.notify_acker = lambda: None
        self.errors: list[str] = []

    def rng_for(self, task: int) -> random.Random:
        return random.Random(SEED)

    def draw_ids_for(self, task: int) -> Any:
        return TreeIdSource(SEED).draw

    def note_batch(self, rows: int) -> None:
        pass

    def record_error(self, task: int, error: str, tb: str) -> None:
        self.errors.append(error)


class To(Grouper):
    """Every tuple to ``targets``, in that order; ``fixed`` if emit may skip the call."""

    kind = GroupingKind.CUSTOM

    def __init__(self, targets: tuple[int, ...], fixed: bool) -> None:
        self.targets = targets
        self.fixed = targets if fixed else None
        self.choose = lambda values: targets

    @classmethod
    def spark_routing(cls, grouping: Grouping) -> SparkRouting:
        return NoColumnRouting("a test's grouper")


def route(component: str, targets: tuple[int, ...]) -> dict[str, Route]:
    src = Source(component, "default", 1, Fields("w"))
    return {"default": Route(src, False, [To(targets, fixed=False)], frozenset())}


def clone(t: Tuple) -> Tuple:
    root = dict(t._root) if isinstance(t._root, dict) else t._root
    c = Tuple(list(t.values), t._src, root, t._edge)
    c._ack_val = t._ack_val
    return c


def shape(t: Tuple) -> tuple[Any, int]:
    return (dict(t._root) if isinstance(t._root, dict) else t._root), t._edge


def test_a_traced_spout_collector_emits_a_spout_tree_per_tuple() -> None:
    targets = (3, 4, 6)
    host = Host()
    host.trace = Trace()  # type: ignore[assignment]
    collector = TracedSpoutCollector(host, 1, route("s", targets), acking=True)  # type: ignore[arg-type]
    reference_rand = random.Random(SEED).getrandbits
    for msg_id in range(40):
        root, edges, init = spout_tree(reference_rand, len(targets))
        collector.emit(["w"], msg_id=msg_id)
        assert [shape(host.out[task][-1]) for task in targets] == [(root, e) for e in edges]  # type: ignore[index]
        assert collector.pending[root] == msg_id
        assert host.acker_ops.init_roots[-1] == root
        assert host.acker_ops.init_vals[-1] == init == reduce(xor, edges)


@pytest.mark.parametrize("targets", [(3, 4, 6), (5,)])
@pytest.mark.parametrize("some_untracked", [False, True])
@pytest.mark.parametrize("n", [40, 9])
def test_spout_emits_leave_sealed_as_spout_trees(
    targets: tuple[int, ...], some_untracked: bool, n: int
) -> None:
    """Rule 1 on arrays (or per tuple, for a handful): every tracked row its own root, one
    edge id per copy, the INIT the XOR of them, the message id pending under the root;
    untracked rows no tree."""
    host = Host()
    fixed = len(targets) == 1
    routes = route("s", targets)
    if fixed:
        src = routes["default"].source
        routes = {"default": Route(src, False, [To(targets, fixed=True)], frozenset())}
    collector = SpoutCollector(host, 1, routes, acking=True)  # type: ignore[arg-type]
    ids = [None if some_untracked and i % 3 == 1 else i for i in range(n)]
    for i, msg_id in enumerate(ids):
        assert collector.emit([f"w{i}"], msg_id=msg_id) == targets
    assert host.out[targets[0]] == []  # nothing leaves before the seal
    tracked = sum(m is not None for m in ids)
    assert collector.pending_count() == tracked
    collector.seal()
    copies = {task: tuples_of(host.out[task]) for task in targets}
    for task in targets:
        assert [t[0] for t in copies[task]] == [f"w{i}" for i in range(n)]
    ops, roots, values, _ = host.acker_ops.take()
    assert set(ops.tolist()) == {Op.INIT}
    inits = dict(zip(roots.tolist(), values.tolist(), strict=True))
    assert len(inits) == tracked == len(collector.pending)
    edges_seen = []
    for i, msg_id in enumerate(ids):
        trees = [copies[task][i].anchors_to_ids for task in targets]
        if msg_id is None:
            assert trees == [{} for _ in targets]
            continue
        (root,) = set().union(*trees)
        edges = [tree[root] for tree in trees]
        edges_seen += edges
        assert inits[root] == reduce(xor, edges)
        assert collector.pending[root] == msg_id
    assert len(set(edges_seen)) == len(edges_seen) and 0 not in edges_seen


class Emitting(BasicBolt):
    """Emits ``values[1]`` copies of each input (``values[0]`` is a tag), on ``default``
    and, for tags ending in "+", also on "other"; keeps the inputs tagged "keep"; fails
    the inputs tagged "fail" (after emitting)."""

    def prepare(self, conf: Any, context: Any) -> None:
        self.kept: list[Tuple] = []
        self.seen: list[tuple[Any, ...]] = []

    def execute(self, tuple: Tuple, collector: Any) -> None:
        tag, copies = tuple[0], tuple[1]
        self.seen.append((tag, copies, tuple.anchors_to_ids))
        for k in range(copies):
            collector.emit([f"{tag}.{k}"])
            if tag.endswith("+"):
                collector.emit([f"{tag}.{k}", k], "other")
        if tag == "keep":
            self.kept.append(tuple)
        if tag == "fail":
            raise FailedException("told to")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["w"])
        declarer.declare_stream("other", ["w", "k"])


def executor(
    bolt: BasicBolt, targets: dict[str, tuple[int, ...]], acking: bool = True
) -> BoltExecutor:
    services = Services(
        acker_ops=AckerOps(),
        acking=acking,
        clock=SystemClock(),
        notify_acker=lambda: None,
        uptime_secs=lambda: 0.0,
        rng_for=lambda task: random.Random(task),
        context_for=lambda task: None,  # type: ignore[arg-type,return-value]
        trace=None,
        on_error=lambda info: None,
    )
    ex = BoltExecutor(services, "b", (1,), merged_config({}), {1: bolt}, 9)
    routes = {}
    for stream, fields in (("default", Fields("w")), ("other", Fields("w", "k"))):
        chosen = targets[stream]
        grouper = To(chosen, fixed=len(chosen) == 1)
        routes[stream] = Route(Source("b", stream, 1, fields), False, [grouper], frozenset())
        for t in chosen:
            ex.add_target(t, Inbox(10_000))
    ex.routes[1] = routes
    asyncio.run(ex.start())
    return ex


def input_rows(rng: random.Random, n: int) -> list[Tuple]:
    """Inputs with single roots (runs of one root among them), several roots, none."""
    roots = [rng.getrandbits(64) for _ in range(3)]
    tags = ["a", "b+", "keep", "fail", "c"]
    made = []
    for _ in range(n):
        values = [rng.choice(tags), rng.randrange(4)]
        kind = rng.random()
        if kind < 0.6:
            made.append(Tuple(values, IN, rng.choice(roots), rng.getrandbits(64) | 1))
        elif kind < 0.85:
            ids = {r: rng.getrandbits(64) | 1 for r in rng.sample(roots, 2)}
            made.append(Tuple(values, IN, ids, 0))
        else:
            made.append(Tuple(values, IN, None, 0))
    return made


def sent(ex: BoltExecutor) -> list[Tuple]:
    """Every tuple the executor's buffers hold, as ``Tuple`` views, in buffer order."""
    out: list[Tuple] = []
    for _, buf, _ in ex._targets:
        for item in buf:
            out += item.tuples() if isinstance(item, TupleBatch) else [item]
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["tuples", "csr batch", "single-root batch", "untracked batch"])
@pytest.mark.parametrize("n", [120, 12])
def test_a_basic_bolt_over_a_batch_follows_the_rules(seed: int, kind: str, n: int) -> None:
    """The batch path against ``_xor``'s rules replayed on copies of the inputs with the
    edge ids the batch path drew: each target gets its stream's rows in emit order, each
    child with its input's roots and one fresh edge id (rule 2), then the same ACKs
    (XORed per root, rule 3) and FAILs (rule 4) as acking and failing the inputs one by
    one; ``execute`` saw each input with its tree, and the tuples it kept stay valid."""
    rng = random.Random(seed)
    inputs = input_rows(rng, n)  # 12: a handful, run tuple by tuple
    if kind == "single-root batch":
        inputs = [t for t in inputs if type(t._root) is int]
    elif kind == "untracked batch":
        inputs = [Tuple(t.values, IN, None, 0) for t in inputs]
    bolt = Emitting()
    ex = executor(bolt, {"default": (2,), "other": (3, 4)})
    reference = [clone(t) for t in inputs]
    item: Any = inputs if kind == "tuples" else TupleBatch.from_tuples(inputs)
    ex._run_basic(1, item)
    edges_seen: list[int] = []
    for stream, tasks in (("default", (2,)), ("other", (3, 4))):
        anchors = [
            (t, k)
            for t in reference
            if stream == "default" or t[0].endswith("+")
            for k in range(t[1])
        ]
        for task in tasks:
            got = tuples_of(ex.out[task])
            assert {c.source_stream for c in got} <= {stream}
            extra = [[k] for _, k in anchors] if stream == "other" else [[] for _ in anchors]
            want = [[f"{t[0]}.{k}", *x] for (t, k), x in zip(anchors, extra, strict=True)]
            assert [list(c.values) for c in got] == want
            for c, (a, _) in zip(got, anchors, strict=True):
                ids = c.anchors_to_ids
                if a._root is None:
                    assert ids == {}
                    continue
                assert set(ids) == set(a.anchors_to_ids)
                (e,) = set(ids.values())  # one edge id per copy, for each of its roots
                edges_seen.append(e)
                a._ack_val ^= e  # type: ignore[operator]
    assert len(set(edges_seen)) == len(edges_seen) and 0 not in edges_seen
    want_acks: list[int] = []
    want_vals: list[int] = []
    want_fails: list[int] = []
    for t in reference:
        if t[0] == "fail":
            fail(t, want_fails.append)
        else:
            ack(t, want_acks.append, want_vals.append)
    got_roots, got_vals, got_fails = drained(ex.acker_ops)
    assert folded(got_roots, got_vals) == folded(want_acks, want_vals)
    assert len(got_roots) <= len(want_acks)  # a run of ACKs of one root: one
    assert sorted(got_fails) == sorted(want_fails)
    collector = ex.collectors[1]
    assert (collector.acked, collector.failed) == (  # type: ignore[attr-defined]
        sum(t[0] != "fail" for t in reference),
        sum(t[0] == "fail" for t in reference),
    )
    assert [(tag, n) for tag, n, _ in bolt.seen] == [(t[0], t[1]) for t in reference]
    assert [ids for _, _, ids in bolt.seen] == [t.anchors_to_ids for t in reference]
    kept = [t for t in reference if t[0] == "keep"]
    assert [list(t.values) for t in bolt.kept] == [list(t.values) for t in kept]
    assert [t.anchors_to_ids for t in bolt.kept] == [t.anchors_to_ids for t in kept]
    assert len({id(t) for t in bolt.kept}) == len(bolt.kept)
    assert all(t.completed for t in bolt.kept)


@pytest.mark.parametrize("n", [120, 12])
def test_without_ackers_a_basic_bolt_records_no_anchor_rows(n: int) -> None:
    """No ackers (``topology.acker.executors`` 0): the collector records no anchor row per
    emit and the executor sets none per row; each target still gets its stream's rows in
    emit order, rows that raised are counted as failed, nothing reaches the acker, and the
    tuples the bolt kept keep their values, with no tree, completed."""
    rows = [["keep", 1], ["fail", 2], *(t.values for t in input_rows(random.Random(n), n - 2))]
    inputs = [Tuple(values, IN, None, 0) for values in rows]
    bolt = Emitting()
    ex = executor(bolt, {"default": (2,), "other": (3, 4)}, acking=False)
    collector = ex.collectors[1]
    assert type(collector) is UntrackedBasicCollector
    item: Any = TupleBatch.from_tuples(inputs) if n > 16 else inputs
    if n > 16:
        collector.begin(item)  # type: ignore[attr-defined]
        collector.emit(["x.0"])
        collector.emit(["x.0", 0], "other")
        assert [len(buf.tags) for buf in collector._bufs.values()] == [0, 0]  # type: ignore[attr-defined]
        collector._take()  # type: ignore[attr-defined]
    ex._run_basic(1, item)
    for stream, tasks in (("default", (2,)), ("other", (3, 4))):
        want = [
            [f"{t[0]}.{k}", *([k] if stream == "other" else [])]
            for t in inputs
            if stream == "default" or t[0].endswith("+")
            for k in range(t[1])
        ]
        for task in tasks:
            got = tuples_of(ex.out[task])
            assert [list(c.values) for c in got] == want
            assert all(c.anchors_to_ids == {} for c in got)
    assert len(ex.acker_ops) == 0
    fails = sum(t[0] == "fail" for t in inputs)
    assert (collector.acked, collector.failed) == (n - fails, fails)  # type: ignore[attr-defined]
    assert [(tag, k) for tag, k, _ in bolt.seen] == [(t[0], t[1]) for t in inputs]
    kept = [t for t in inputs if t[0] == "keep"]
    assert kept and [list(t.values) for t in bolt.kept] == [list(t.values) for t in kept]
    assert len({id(t) for t in bolt.kept}) == len(bolt.kept)
    assert all(t.anchors_to_ids == {} and t.completed for t in bolt.kept)


def test_a_row_view_is_reused_only_while_nothing_keeps_it() -> None:
    class Ids(BasicBolt):
        def prepare(self, conf: Any, context: Any) -> None:
            self.ids: list[int] = []

        def execute(self, tuple: Tuple, collector: Any) -> None:
            self.ids.append(id(tuple))

    bolt = Ids()
    ex = executor(bolt, {"default": (2,), "other": (3,)})
    ex._run_basic(1, TupleBatch(IN, [list(range(50))]))
    assert len(set(bolt.ids)) == 1  # one view for the whole batch


def tuples_of(items: list[Any] | None) -> list[Tuple]:
    """The tuples of an outgoing buffer: batches' rows as views, and per-tuple emits."""
    return [t for b in items or [] for t in (b.tuples() if isinstance(b, TupleBatch) else [b])]


def folded(roots: list[int], vals: list[int]) -> dict[int, int]:
    """What the acker sees of ACKs: XOR per root (XOR is order-free)."""
    seen: dict[int, int] = {}
    for r, v in zip(roots, vals, strict=True):
        seen[r] = seen.get(r, 0) ^ v
    return seen


def drained(ops: AckerOps) -> tuple[list[int], list[int], list[int]]:
    """The ACK roots and values and the FAIL roots ``ops`` holds, lists and arrays alike."""
    all_ops, roots, vals, _ = ops.take()
    acks = all_ops == Op.ACK
    fails = all_ops == Op.FAIL
    return roots[acks].tolist(), vals[acks].tolist(), roots[fails].tolist()


def test_rules_complete_a_tree_exactly_when_every_tuple_is_acked() -> None:
    rand = random.Random(7).getrandbits
    src = Source("s", "default", 1, Fields("w"))
    root, edges, init = spout_tree(rand, 2)
    acker = init
    level = [Tuple(["w"], src, root, e) for e in edges]
    for _ in range(3):  # each tuple has two children, then is acked
        children = [anchored_copy(["w"], src, t, rand) for t in level for _ in range(2)]
        for t in level:
            ops: list[int] = []
            ack(t, ops.append, ops.append)
            assert ops[0] == root
            acker ^= ops[1]
            assert acker != 0  # its children are still pending
        level = children
    for i, t in enumerate(level):
        ops = []
        ack(t, ops.append, ops.append)
        acker ^= ops[1]
        assert (acker == 0) == (i == len(level) - 1)


def test_a_basic_bolt_resets_the_timeout_of_the_row_it_executes() -> None:
    class Resetting(BasicBolt):
        def execute(self, tuple: Tuple, collector: Any) -> None:
            if tuple[0] == "slow":
                collector.reset_timeout(tuple)

    ex = executor(Resetting(), {"default": (2,), "other": (3,)})
    inputs = [
        Tuple(["fast"], IN, 5, 1),
        Tuple(["slow"], IN, {6: 2, 7: 3}, 0),
        Tuple(["slow"], IN, 8, 4),
        Tuple(["slow"], IN, None, 0),
    ]
    ex._run_basic(1, TupleBatch.from_tuples(inputs))
    ops, roots, _, _ = ex.acker_ops.take()
    assert sorted(roots[ops == Op.RESET].tolist()) == [6, 7, 8]
