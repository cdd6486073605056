"""The XOR protocol's one home (``engine._xor``) and the hot paths that inline it.

``SpoutCollector._send``, ``BasicCollector.emit`` and ``BoltExecutor._run_basic`` inline
``spout_tree``, ``anchored_copy`` and ``ack`` for single-root tuples: each is checked here
against the function it mirrors, on the same random ids."""

from __future__ import annotations

import asyncio
import random
import time
from functools import reduce
from operator import xor
from typing import Any

import pytest

from engine import BasicBolt, FailedException
from engine._acker import AckerOps
from engine._clock import SystemClock
from engine._collector import BasicCollector, Route, SpoutCollector
from engine._config import merged_config
from engine._executor import BoltExecutor
from engine._fields import Fields
from engine._groupers import make_grouper
from engine._grouping import Grouping, GroupingKind
from engine._services import Services
from engine._tuple import Source, Tuple
from engine._xor import ack, anchored_copy, fail, spout_tree

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
        raise AssertionError("not a batch emit")

    def note_batch(self, rows: int) -> None:
        raise AssertionError("not a batch emit")

    def record_error(self, task: int, error: str, tb: str) -> None:
        self.errors.append(error)


def route(component: str, targets: tuple[int, ...]) -> dict[str, Route]:
    src = Source(component, "default", 1, Fields("w"))
    every = make_grouper(
        Grouping(GroupingKind.ALL), src.fields, targets, random.Random(0), None, ("", "")
    )
    return {"default": Route(src, False, [every], frozenset())}


def inputs(rng: random.Random, n: int) -> list[Tuple]:
    """Single-root tuples (runs of one root among them), multi-root and untracked ones."""
    roots = [rng.getrandbits(64) for _ in range(3)]
    made = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.6:
            t = Tuple(["s"], IN, rng.choice(roots), rng.getrandbits(64))
        elif kind < 0.85:
            t = Tuple(["m"], IN, {r: rng.getrandbits(64) for r in rng.sample(roots, 2)}, 0)
        else:
            t = Tuple(["u"], IN, None, 0)
        t._ack_val = rng.getrandbits(64) if t._root is not None else 0
        made.append(t)
    return made


def clone(t: Tuple) -> Tuple:
    root = dict(t._root) if isinstance(t._root, dict) else t._root
    c = Tuple(list(t.values), t._src, root, t._edge)
    c._ack_val = t._ack_val
    return c


def shape(t: Tuple) -> tuple[Any, int]:
    return (dict(t._root) if isinstance(t._root, dict) else t._root), t._edge


@pytest.mark.parametrize("seed", range(5))
def test_basic_collector_emit_is_anchored_copy(seed: int) -> None:
    targets = (2, 5, 7)
    host = Host()
    collector = BasicCollector(host, 1, route("c", targets))  # type: ignore[arg-type]
    reference_rand = random.Random(SEED).getrandbits
    src = collector._routes["default"].source
    for t in inputs(random.Random(seed), 60):
        expected_input = clone(t)
        expected = [anchored_copy(["w"], src, expected_input, reference_rand) for _ in targets]
        collector._input = t
        assert collector.emit(["w"]) == targets
        got = [host.out[task][-1] for task in targets]  # type: ignore[index]
        assert [shape(c) for c in got] == [shape(c) for c in expected]
        assert t._ack_val == expected_input._ack_val


def test_spout_collector_emit_is_spout_tree() -> None:
    targets = (3, 4, 6)
    host = Host()
    collector = SpoutCollector(host, 1, route("s", targets), acking=True)  # type: ignore[arg-type]
    reference_rand = random.Random(SEED).getrandbits
    for msg_id in range(40):
        root, edges, init = spout_tree(reference_rand, len(targets))
        collector.emit(["w"], msg_id=msg_id)
        assert [shape(host.out[task][-1]) for task in targets] == [(root, e) for e in edges]  # type: ignore[index]
        assert collector.pending[root] == msg_id
        assert host.acker_ops.init_roots[-1] == root
        assert host.acker_ops.init_vals[-1] == init == reduce(xor, edges)


class Acking(BasicBolt):
    """Fails every tuple whose value says so; the executor acks the others."""

    def execute(self, tuple: Tuple, collector: Any) -> None:
        if tuple.values[0] == "fail":
            raise FailedException("told to")

    def declare_output_fields(self, declarer: Any) -> None:
        pass


def folded(roots: list[int], vals: list[int]) -> dict[int, int]:
    """What the acker sees of ACKs: XOR per root (XOR is order-free)."""
    seen: dict[int, int] = {}
    for r, v in zip(roots, vals, strict=True):
        seen[r] = seen.get(r, 0) ^ v
    return seen


@pytest.mark.parametrize("seed", range(5))
def test_run_basic_acks_as_xor_ack(seed: int) -> None:
    ops = AckerOps()
    services = Services(
        acker_ops=ops,
        acking=True,
        clock=SystemClock(),
        notify_acker=lambda: None,
        uptime_secs=lambda: 0.0,
        rng_for=lambda task: random.Random(task),
        context_for=lambda task: None,  # type: ignore[arg-type,return-value]
        trace=None,
        on_error=lambda info: None,
    )
    ex = BoltExecutor(services, "b", (1,), merged_config({}), {1: Acking()}, 1)
    ex.routes[1] = {}
    asyncio.run(ex.start())
    rng = random.Random(seed)
    batch = inputs(rng, 200)
    for t in batch:
        if rng.random() < 0.1:
            t.values = ["fail"]
    reference = [clone(t) for t in batch]
    ex.in_batch = True
    ex._run_basic(1, batch, time.perf_counter_ns())
    expected_roots: list[int] = []
    expected_vals: list[int] = []
    expected_fails: list[int] = []
    for t in reference:
        if t.values == ["fail"]:
            fail(t, expected_fails.append)
        else:
            ack(t, expected_roots.append, expected_vals.append)
    assert folded(ops.ack_roots, ops.ack_vals) == folded(expected_roots, expected_vals)
    assert len(ops.ack_roots) <= len(expected_roots)  # consecutive ACKs of a root: one
    assert ops.fail_roots == expected_fails
    assert all(t._ack_val is None for t in batch if t._root is not None)


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
