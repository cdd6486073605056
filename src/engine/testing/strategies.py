"""Hypothesis strategies for Squall: topologies, tuple trees, delivery orders, faults, seeds.

This module needs Hypothesis (``pip install hypothesis``; ``engine.testing`` itself does
not), so import it by name. With the pytest plugin's ``simulation`` fixture
(``engine.testing.pytest_plugin``)::

    from hypothesis import given, settings
    from engine.testing import strategies as sst

    @settings(max_examples=20, deadline=None)
    @given(sst.topologies(), sst.seeds())
    def test_every_message_is_acked_once(simulation, generated, seed):
        result = simulation.run_topology(generated, seed=seed)
        for spout, n in generated.messages.items():
            assert result.reports[spout].lost == 0
            assert result.acks(spout) == dict.fromkeys(range(n), 1)

What it offers:

- ``topologies()``: random valid topology shapes (``GeneratedTopology``) made of the
  finite, reliable ``FiniteSpout`` and the bolt kinds below, with random groupings,
  parallelism and task counts, and the number of messages every spout emits.
- ``tuple_trees()``: Storm tuple trees as plain data (``TupleTree``: spout messages,
  tuples, anchors, edge ids, which tuples fail); ``acker_ops(tree)`` is the INIT / ACK /
  FAIL sequence Storm's protocol sends for them; ``delivery_orders(ops)`` permutes those
  and splits them into batches (XOR is order-free, so every order must do).
- ``fault_schedules(topology, horizon_secs)``: lists of ``engine.testing`` fault records
  naming real components, tasks and edges, with times inside the horizon.
- ``seeds()``: values for ``topology.seed``.

The components (``FiniteSpout``, ``PassBolt``, ``HoldBolt``, ...) live in
``engine.testing`` itself, which needs no Hypothesis; they are re-exported here.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from acker_kernel import Op, Outcome

from .. import StormTopology, TopologyBuilder
from .._model.faults import (
    CrashAcker,
    CrashTask,
    DelayTuples,
    DropTuples,
    FailTuples,
    Fault,
    SlowBolt,
)
from ._components import (
    FIELDS,
    AsyncPassBolt,
    BasicPassBolt,
    FanOutBolt,
    FilterBolt,
    FiniteSpout,
    HoldBolt,
    PassBolt,
)

__all__ = [
    "BOLT_KINDS",
    "FIELDS",
    "GROUPINGS",
    "AckerOp",
    "AsyncPassBolt",
    "BasicPassBolt",
    "FanOutBolt",
    "FilterBolt",
    "FiniteSpout",
    "GeneratedTopology",
    "HoldBolt",
    "PassBolt",
    "TreeTuple",
    "TupleTree",
    "acker_ops",
    "delivery_orders",
    "fault_schedules",
    "op_arrays",
    "seeds",
    "topologies",
    "tuple_trees",
]

#: Bolt kinds ``topologies`` picks from, by name.
BOLT_KINDS = ("pass", "basic", "async", "fan_out", "filter", "hold")
#: Groupings ``topologies`` picks from (the ``<name>_grouping`` builder methods; direct and
#: custom groupings need bolts that choose their targets, so none are generated).
GROUPINGS = ("shuffle", "fields", "all", "global", "none", "partial_key", "local_or_shuffle")
_KEYED = frozenset({"fields", "partial_key"})
_U64 = 2**64 - 1


# --- components --------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class GeneratedTopology:
    """A topology drawn by ``topologies()``: the topology, the number of distinct messages
    each spout emits (every one must end up acked exactly once), and ``source``, Python
    that builds the same topology (it is the ``repr``, so a failing example can be pasted
    into a regression test).
    """

    topology: StormTopology
    messages: Mapping[str, int]
    source: str

    @property
    def spouts(self) -> list[str]:
        """The spouts' ids, sorted (the order ``messages`` and assertions go through)."""
        return sorted(self.topology.spouts)

    @property
    def bolts(self) -> list[str]:
        """The bolts' ids, sorted."""
        return sorted(self.topology.bolts)

    def __repr__(self) -> str:
        body = "\n".join(f"    {line}" for line in self.source.splitlines())
        return f"GeneratedTopology(\n{body}\n)"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Hypothesis prints falsifying examples with IPython's protocol, not ``repr``.
        printer.text(repr(self))


@dataclass(frozen=True)
class _Input:
    source: str
    grouping: str
    fields: tuple[str, ...] = ()

    def call(self) -> str:
        keyed = f", {list(self.fields)!r}" if self.grouping in _KEYED else ""
        return f".{self.grouping}_grouping({self.source!r}{keyed})"


@dataclass(frozen=True)
class _Declaration:
    id: str
    component: Any
    parallelism: int
    num_tasks: int
    inputs: tuple[_Input, ...] = ()

    def line(self) -> str:
        setter = "set_bolt" if self.inputs else "set_spout"
        call = f"builder.{setter}({self.id!r}, {self.component!r}, {self.parallelism})"
        call += "".join(i.call() for i in self.inputs)
        if self.num_tasks != self.parallelism:
            call += f".set_num_tasks({self.num_tasks})"
        return call


def _build(declarations: Sequence[_Declaration]) -> GeneratedTopology:
    builder = TopologyBuilder()
    messages: dict[str, int] = {}
    for d in declarations:
        if isinstance(d.component, FiniteSpout):
            declarer: Any = builder.set_spout(d.id, d.component, d.parallelism)
            messages[d.id] = d.component.n_messages
        else:
            declarer = builder.set_bolt(d.id, d.component, d.parallelism)
            for i in d.inputs:
                method = getattr(declarer, f"{i.grouping}_grouping")
                if i.grouping in _KEYED:
                    method(i.source, list(i.fields))
                else:
                    method(i.source)
        declarer.set_num_tasks(d.num_tasks)
    source = "\n".join(
        ["builder = TopologyBuilder()"]
        + [d.line() for d in declarations]
        + ["topology = builder.create_topology()"]
    )
    return GeneratedTopology(builder.create_topology(), messages, source)


def _bolt(kind: str, draw: st.DrawFn, fan_limit: int) -> Any:
    if kind == "pass":
        return PassBolt()
    if kind == "basic":
        return BasicPassBolt()
    if kind == "async":
        return AsyncPassBolt(draw(st.sampled_from([0.0, 0.001, 0.01, 0.1])))
    if kind == "fan_out":
        return FanOutBolt(draw(st.integers(1, max(1, min(3, fan_limit)))))
    if kind == "filter":
        return FilterBolt(draw(st.integers(2, 4)))
    if kind == "hold":
        return HoldBolt(draw(st.integers(1, 4)))
    raise AssertionError(kind)


@st.composite
def _topologies(
    draw: st.DrawFn,
    max_spouts: int,
    max_layers: int,
    max_bolts_per_layer: int,
    max_parallelism: int,
    max_extra_tasks: int,
    max_messages: int,
    bolt_kinds: tuple[str, ...],
    groupings: tuple[str, ...],
    max_tuples_per_message: int,
    spout_intervals: tuple[float, ...],
) -> GeneratedTopology:
    def tasks(parallelism: int) -> int:
        return parallelism + draw(st.integers(0, max_extra_tasks))

    declarations: list[_Declaration] = []
    # Tuples one spout message makes a component emit, at most: keeps every tree small.
    emitted: dict[str, int] = {}
    num_tasks: dict[str, int] = {}
    layers: list[list[str]] = [[]]
    for i in range(draw(st.integers(1, max_spouts))):
        cid = f"spout-{i}"
        parallelism = draw(st.integers(1, max_parallelism))
        n = draw(st.integers(1, max_messages))
        spout = FiniteSpout(n, interval_secs=draw(st.sampled_from(spout_intervals)))
        declarations.append(_Declaration(cid, spout, parallelism, tasks(parallelism)))
        emitted[cid] = 1
        num_tasks[cid] = declarations[-1].num_tasks
        layers[0].append(cid)
    for layer in range(1, draw(st.integers(1, max_layers)) + 1):
        layers.append([])
        for j in range(draw(st.integers(1, max_bolts_per_layer))):
            cid = f"bolt-{layer}-{j}"
            parallelism = draw(st.integers(1, max_parallelism))
            n_tasks = tasks(parallelism)
            # One input from the layer just above, so every layer is reached; maybe one
            # more from any layer above (a diamond or a skip edge).
            sources = [draw(st.sampled_from(layers[layer - 1]))]
            earlier = sorted({c for lay in layers[:layer] for c in lay} - set(sources))
            add_another: bool = bool(earlier) and draw(st.booleans())
            if add_another:
                sources.append(draw(st.sampled_from(earlier)))
            inputs: list[_Input] = []
            received = 0
            for source in sources:
                if received + emitted[source] > max_tuples_per_message:
                    continue  # the first source always fits: emitted <= the budget
                fits_all = received + emitted[source] * n_tasks <= max_tuples_per_message
                options = [g for g in groupings if g != "all" or fits_all]
                grouping = draw(st.sampled_from(options or ["shuffle"]))
                chosen: tuple[str, ...] = ()
                if grouping in _KEYED:
                    chosen = draw(st.sampled_from([("key",), ("id",), ("id", "key")]))
                inputs.append(_Input(source, grouping, chosen))
                received += emitted[source] * (n_tasks if grouping == "all" else 1)
            kind = draw(st.sampled_from(bolt_kinds))
            bolt = _bolt(kind, draw, max_tuples_per_message // max(1, received))
            factor = bolt.k if isinstance(bolt, FanOutBolt) else 1
            emitted[cid] = received * factor
            num_tasks[cid] = n_tasks
            declarations.append(_Declaration(cid, bolt, parallelism, n_tasks, tuple(inputs)))
            layers[layer].append(cid)
    return _build(declarations)


def topologies(
    *,
    max_spouts: int = 3,
    max_layers: int = 4,
    max_bolts_per_layer: int = 2,
    max_parallelism: int = 4,
    max_extra_tasks: int = 2,
    max_messages: int = 12,
    bolt_kinds: Iterable[str] = BOLT_KINDS,
    groupings: Iterable[str] = GROUPINGS,
    max_tuples_per_message: int = 16,
    spout_intervals: Iterable[float] = (0.0, 0.001, 0.05),
) -> st.SearchStrategy[GeneratedTopology]:
    """Random valid topologies: 1..``max_spouts`` ``FiniteSpout``s emitting 1..
    ``max_messages`` messages each, then 1..``max_layers`` layers of 1..
    ``max_bolts_per_layer`` bolts of ``bolt_kinds``, each subscribed with one of
    ``groupings`` to a component of the layer above and maybe to one more above that.

    Parallelism is 1..``max_parallelism``, tasks up to ``max_extra_tasks`` more. All
    groupings and fan-outs are bounded so that one spout message makes at most
    ``max_tuples_per_message`` tuples reach any one bolt. Each spout paces its tasks'
    emits with an ``interval_secs`` from ``spout_intervals`` (0: as fast as it can).

    >>> from hypothesis import given
    >>> @given(topologies(max_layers=2, bolt_kinds=["pass", "hold"]))
    ... def test_shapes(generated):
    ...     assert generated.topology.spouts and generated.topology.bolts
    """
    kinds = tuple(bolt_kinds)
    chosen_groupings = tuple(groupings)
    for name, value in [
        ("max_spouts", max_spouts),
        ("max_layers", max_layers),
        ("max_bolts_per_layer", max_bolts_per_layer),
        ("max_parallelism", max_parallelism),
        ("max_messages", max_messages),
        ("max_tuples_per_message", max_tuples_per_message),
    ]:
        if not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be an int >= 1, got {value!r}")
    if not isinstance(max_extra_tasks, int) or max_extra_tasks < 0:
        raise InvalidArgument(f"max_extra_tasks must be an int >= 0, got {max_extra_tasks!r}")
    intervals = tuple(spout_intervals)
    if not intervals or any(not isinstance(i, (int, float)) or i < 0 for i in intervals):
        raise InvalidArgument(
            f"spout_intervals must be a non-empty list of numbers >= 0, got {list(intervals)}"
        )
    unknown = sorted(set(kinds) - set(BOLT_KINDS))
    if unknown or not kinds:
        raise InvalidArgument(
            f"bolt_kinds must be a non-empty selection of {list(BOLT_KINDS)}, got {list(kinds)}"
        )
    unknown = sorted(set(chosen_groupings) - set(GROUPINGS))
    if unknown or not chosen_groupings:
        raise InvalidArgument(
            f"groupings must be a non-empty selection of {list(GROUPINGS)}, got "
            f"{list(chosen_groupings)}"
        )
    return _topologies(
        max_spouts,
        max_layers,
        max_bolts_per_layer,
        max_parallelism,
        max_extra_tasks,
        max_messages,
        kinds,
        chosen_groupings,
        max_tuples_per_message,
        intervals,
    )


def seeds() -> st.SearchStrategy[int]:
    """Values for ``topology.seed`` (``Config.set_seed``): every random choice of a run,
    faults included, follows from it.

    >>> from hypothesis import given
    >>> @given(seeds())
    ... def test_seed(seed):
    ...     assert 0 <= seed < 2**63
    """
    return st.integers(min_value=0, max_value=2**63 - 1)


# --- tuple trees and the acker protocol ---------------------------------------------------


@dataclass(frozen=True)
class TreeTuple:
    """One tuple of a ``TupleTree``.

    A spout tuple has ``message`` set (the index of the spout message, so of the root, it
    belongs to), no anchors and one edge id (the spout's edge to it). Any other tuple was
    emitted by a bolt anchored to ``anchors`` (indices of earlier tuples; several is
    multi-anchoring), with one edge id per anchor. ``failed``: the bolt fails it instead
    of acking it.
    """

    anchors: tuple[int, ...]
    edge_ids: tuple[int, ...]
    message: int | None = None
    failed: bool = False


@dataclass(frozen=True)
class TupleTree:
    """The tuple trees of one or more spout messages, as plain data.

    ``roots[m]`` is message m's root id and ``spout_tasks[m]`` the task that emitted it;
    ``tuples`` are in emit order (anchors come first). A tuple anchored to tuples of
    several messages belongs to all their trees, like a join's output in Storm. In trees
    drawn by ``tuple_trees()`` the edge ids are linearly independent over GF(2), so no
    partial XOR of a tree is ever zero: a tree completes only once all of it was acked.

    >>> tree = TupleTree(roots=(7,), spout_tasks=(1,), tuples=(
    ...     TreeTuple(anchors=(), edge_ids=(0b01,), message=0),   # the spout's tuple
    ...     TreeTuple(anchors=(0,), edge_ids=(0b10,)),            # a bolt's child of it
    ... ))
    >>> [(op.name, hex(value)) for op, _, value, _ in acker_ops(tree)]
    [('INIT', '0x1'), ('ACK', '0x3'), ('ACK', '0x2')]
    >>> tree.outcomes()
    {7: <Outcome.ACKED: 1>}
    """

    roots: tuple[int, ...]
    spout_tasks: tuple[int, ...]
    tuples: tuple[TreeTuple, ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.roots) != len(self.spout_tasks):
            raise ValueError(
                f"TupleTree: {len(self.roots)} roots but {len(self.spout_tasks)} spout tasks"
            )
        if len(set(self.roots)) != len(self.roots):
            raise ValueError(f"TupleTree: root ids must be distinct, got {list(self.roots)}")
        for i, t in enumerate(self.tuples):
            if t.message is not None:
                ok = not t.anchors and len(t.edge_ids) == 1 and 0 <= t.message < len(self.roots)
                what = "a spout tuple needs no anchors, one edge id and a message index"
            else:
                ok = len(t.anchors) == len(t.edge_ids) >= 1 and all(0 <= a < i for a in t.anchors)
                what = "a bolt tuple needs one edge id per anchor, anchors to earlier tuples"
            if not ok:
                raise ValueError(f"TupleTree: tuple {i} {t!r}: {what}")

    def __len__(self) -> int:
        return len(self.tuples)

    @cached_property
    def _roots_of(self) -> list[frozenset[int]]:
        roots: list[frozenset[int]] = []
        for t in self.tuples:
            if t.message is not None:
                roots.append(frozenset([self.roots[t.message]]))
            else:
                roots.append(frozenset().union(*(roots[a] for a in t.anchors)))
        return roots

    def roots_of(self, index: int) -> frozenset[int]:
        """The roots whose trees tuple ``index`` belongs to."""
        return self._roots_of[index]

    def anchors_to_ids(self, index: int) -> dict[int, int]:
        """Storm's ``MessageId.getAnchorsToIds``: root -> XOR of the tuple's edge ids
        from anchors in that root's tree."""
        t = self.tuples[index]
        if t.message is not None:
            return {self.roots[t.message]: t.edge_ids[0]}
        ids: dict[int, int] = {}
        for anchor, edge in zip(t.anchors, t.edge_ids, strict=True):
            for root in self._roots_of[anchor]:
                ids[root] = ids.get(root, 0) ^ edge
        return ids

    def ack_val(self, index: int) -> int:
        """XOR of the edge ids of the tuples anchored to tuple ``index``."""
        return self._ack_vals[index]

    @cached_property
    def _ack_vals(self) -> list[int]:
        values = [0] * len(self.tuples)
        for t in self.tuples:
            if t.message is None:
                for anchor, edge in zip(t.anchors, t.edge_ids, strict=True):
                    values[anchor] ^= edge
        return values

    def init_value(self, message: int) -> int:
        """The INIT value of ``message``: XOR of the spout's edge ids to its tuples."""
        value = 0
        for t in self.tuples:
            if t.message == message:
                value ^= t.edge_ids[0]
        return value

    def outcomes(self) -> dict[int, Outcome]:
        """Per root: ``FAILED`` if any tuple of its tree failed, else ``ACKED``."""
        failed = {r for i, t in enumerate(self.tuples) if t.failed for r in self._roots_of[i]}
        return {r: Outcome.FAILED if r in failed else Outcome.ACKED for r in self.roots}


class AckerOp(NamedTuple):
    """One acker operation: the values of one row of ``AckerLedger.apply``'s arrays."""

    op: Op
    root: int
    value: int
    spout_task: int


def acker_ops(tree: TupleTree, *, reset_timeouts: bool = False) -> list[AckerOp]:
    """The operations Storm's protocol sends the acker for ``tree``: one INIT per message
    (``value`` the XOR of its spout edge ids), then per tuple and per root of it an ACK
    (``edge ^ ack_val``) or, for a failed tuple, a FAIL. With ``reset_timeouts``, every
    bolt-emitted tuple also sends a RESET per root first (``collector.reset_timeout``).

    >>> tree = TupleTree(roots=(5,), spout_tasks=(0,), tuples=(
    ...     TreeTuple(anchors=(), edge_ids=(6,), message=0, failed=True),))
    >>> [(op.name, root) for op, root, _, _ in acker_ops(tree)]
    [('INIT', 5), ('FAIL', 5)]
    """
    ops = [
        AckerOp(Op.INIT, root, tree.init_value(m), tree.spout_tasks[m])
        for m, root in enumerate(tree.roots)
    ]
    for i, t in enumerate(tree.tuples):
        ids = tree.anchors_to_ids(i)
        if reset_timeouts and t.message is None:
            ops.extend(AckerOp(Op.RESET, root, 0, 0) for root in sorted(ids))
        if t.failed:
            ops.extend(AckerOp(Op.FAIL, root, 0, 0) for root in sorted(ids))
        else:
            ack_val = tree.ack_val(i)
            ops.extend(AckerOp(Op.ACK, root, edge ^ ack_val, 0) for root, edge in ids.items())
    return ops


def op_arrays(ops: Sequence[AckerOp]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ops, roots, values, spout_tasks)`` arrays for ``AckerLedger.apply``.

    >>> import acker_kernel
    >>> ledger = acker_kernel.AckerLedger()
    >>> done = ledger.apply(*op_arrays([AckerOp(Op.INIT, 3, 0, 2)]), now_ns=0)
    >>> done.root.tolist(), done.spout_task.tolist()
    ([3], [2])
    """
    return (
        np.array([o.op for o in ops], np.uint8),
        np.array([o.root for o in ops], np.uint64),
        np.array([o.value for o in ops], np.uint64),
        np.array([o.spout_task for o in ops], np.int32),
    )


def _independent(values: Sequence[int]) -> bool:
    """True if no non-empty subset of ``values`` XORs to 0 (Gaussian elimination over
    GF(2): the basis keeps distinct top bits, highest first, so reduction is complete)."""
    basis: list[int] = []
    for v in values:
        for b in basis:
            v = min(v, v ^ b)  # clears b's top bit in v if it is set
        if v == 0:
            return False
        basis.append(v)
        basis.sort(reverse=True)
    return True


def _edge_ids(seed: int, n: int) -> list[int]:
    if n > 64:
        raise AssertionError("more than 64 edges cannot be independent")
    rng = random.Random(seed)
    while True:
        edges = [rng.getrandbits(64) for _ in range(n)]
        if _independent(edges):
            return edges


@st.composite
def _tuple_trees(
    draw: st.DrawFn,
    max_messages: int,
    max_spout_tuples: int,
    max_bolt_tuples: int,
    max_anchors: int,
    fail: bool,
) -> TupleTree:
    n_messages = draw(st.integers(1, max_messages))
    roots = draw(
        st.lists(
            st.one_of(st.sampled_from([0, 1, 2**63, _U64]), st.integers(0, _U64)),
            min_size=n_messages,
            max_size=n_messages,
            unique=True,
        )
    )
    tasks = draw(st.lists(st.integers(0, 8), min_size=n_messages, max_size=n_messages))
    fails = fail and draw(st.booleans())
    shapes: list[tuple[tuple[int, ...], int | None, bool]] = []
    for m in range(n_messages):
        for _ in range(draw(st.integers(0, max_spout_tuples))):
            shapes.append(((), m, fails and draw(st.booleans())))
    edges = len(shapes)
    if shapes:
        for _ in range(draw(st.integers(0, max_bolt_tuples))):
            if edges >= 64:
                break  # edge ids must stay independent: at most 64 of them
            k = draw(st.integers(1, min(max_anchors, len(shapes), 64 - edges)))
            anchors = draw(
                st.lists(st.integers(0, len(shapes) - 1), min_size=k, max_size=k, unique=True)
            )
            shapes.append((tuple(anchors), None, fails and draw(st.booleans())))
            edges += k
    ids = iter(_edge_ids(draw(st.integers(0, 2**32 - 1)), edges))
    tuples = tuple(
        TreeTuple(
            anchors=anchors,
            edge_ids=tuple(next(ids) for _ in range(max(1, len(anchors)))),
            message=message,
            failed=failed,
        )
        for anchors, message, failed in shapes
    )
    return TupleTree(tuple(roots), tuple(tasks), tuples)


def tuple_trees(
    *,
    max_messages: int = 3,
    max_spout_tuples: int = 3,
    max_bolt_tuples: int = 16,
    max_anchors: int = 3,
    fail: bool = True,
) -> st.SearchStrategy[TupleTree]:
    """Random ``TupleTree``s: 1..``max_messages`` spout messages (any uint64 root ids,
    0 and 2**64-1 included) of 0..``max_spout_tuples`` spout tuples each, then up to
    ``max_bolt_tuples`` bolt tuples anchored to 1..``max_anchors`` earlier tuples; with
    ``fail``, some tuples fail. Edge ids come from a drawn seed and are independent.

    >>> from hypothesis import given
    >>> @given(tuple_trees(max_messages=1, fail=False))
    ... def test_tree(tree):
    ...     assert set(tree.outcomes().values()) == {Outcome.ACKED}
    """
    for name, value in [
        ("max_messages", max_messages),
        ("max_anchors", max_anchors),
    ]:
        if not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be an int >= 1, got {value!r}")
    for name, value in [
        ("max_spout_tuples", max_spout_tuples),
        ("max_bolt_tuples", max_bolt_tuples),
    ]:
        if not isinstance(value, int) or value < 0:
            raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
    return _tuple_trees(max_messages, max_spout_tuples, max_bolt_tuples, max_anchors, fail)


@st.composite
def _delivery_orders(draw: st.DrawFn, ops: list[AckerOp], max_batches: int) -> list[list[AckerOp]]:
    order = draw(st.permutations(ops))
    if not order:
        return []
    cuts = draw(
        st.lists(st.integers(1, len(order) - 1), max_size=max_batches - 1, unique=True)
        if len(order) > 1
        else st.just([])
    )
    bounds = [0, *sorted(cuts), len(order)]
    return [order[a:b] for a, b in itertools.pairwise(bounds)]


def delivery_orders(
    ops: Sequence[AckerOp], *, max_batches: int = 8
) -> st.SearchStrategy[list[list[AckerOp]]]:
    """``ops`` in any order, split into 1..``max_batches`` non-empty consecutive batches
    (the acker applies one batch per ``AckerLedger.apply``). XOR is order-free, so every
    delivery must end the same way.

    >>> from hypothesis import given
    >>> ops = [AckerOp(Op.INIT, 1, 2, 0), AckerOp(Op.ACK, 1, 2, 0)]
    >>> @given(delivery_orders(ops))
    ... def test_order(batches):
    ...     assert sorted(op for batch in batches for op in batch) == sorted(ops)
    """
    if not isinstance(max_batches, int) or max_batches < 1:
        raise InvalidArgument(f"max_batches must be an int >= 1, got {max_batches!r}")
    return _delivery_orders(list(ops), max_batches)


# --- faults ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    bolts: dict[str, int]  # component id -> number of tasks
    spouts: dict[str, int]
    edges: list[tuple[str, str]]  # (source, target) subscriptions


def _shape_of(target: GeneratedTopology | StormTopology | Sequence[str]) -> _Shape:
    if isinstance(target, GeneratedTopology):
        target = target.topology
    if isinstance(target, StormTopology):
        edges = sorted(
            {(sub.component, bolt.id) for bolt in target.bolts.values() for sub in bolt.inputs}
        )
        return _Shape(
            {cid: spec.num_tasks for cid, spec in sorted(target.bolts.items())},
            {cid: spec.num_tasks for cid, spec in sorted(target.spouts.items())},
            edges,
        )
    if isinstance(target, str):
        raise InvalidArgument(f"pass a list of component ids, not the string {target!r}")
    ids = sorted(target)
    return _Shape(dict.fromkeys(ids, 1), {}, [(a, b) for a in ids for b in ids if a != b])


def _millis(low: float, high: float) -> st.SearchStrategy[float]:
    return st.integers(round(low * 1000), round(high * 1000)).map(lambda ms: ms / 1000)


@st.composite
def _window(draw: st.DrawFn, horizon: float) -> dict[str, float]:
    # Under virtual time most work happens at the instants timers fire, often at 0: a
    # window that opens at 0 or stays open to the horizon is the one that meets traffic.
    start = draw(st.one_of(st.just(0.0), _millis(0, horizon - 0.001)))
    end = draw(st.one_of(st.just(horizon), _millis(start + 0.001, horizon)))
    return {"start": start, "end": end}


def fault_schedules(
    target: GeneratedTopology | StormTopology | Sequence[str],
    horizon_secs: float = 10.0,
    *,
    min_faults: int = 0,
    max_faults: int = 4,
    ackers: int = 1,
    crash_spouts: bool = False,
    max_probability: float = 0.1,
    max_delay_secs: float = 2.0,
    max_slow_secs: float = 0.05,
) -> st.SearchStrategy[list[Fault]]:
    """Lists of ``min_faults``..``max_faults`` fault records for ``target`` (a topology,
    or bare component ids, then all taken as one-task bolts).

    Crashes name a real task (spouts only with ``crash_spouts``: a crashed spout forgets
    its pending messages, which the report counts as abandoned, and as lost unless the
    restarted task emits them again) or one of ``ackers`` ackers;
    drops and delays name a real subscription; slow and failing bolts name a bolt. Times
    are on the topology's clock, in milliseconds inside ``[0, horizon_secs]``, and every
    window closes by then, so a reliable topology recovers afterwards. Under virtual time
    work takes no time, and a tree that fails at once is replayed at once: a window does
    not bound a replay loop, the probability does, so keep ``max_probability`` modest.

    >>> from hypothesis import given
    >>> @given(fault_schedules(["split", "count"], horizon_secs=5))
    ... def test_faults(faults):
    ...     assert len(faults) <= 4
    """
    if not isinstance(horizon_secs, (int, float)) or not horizon_secs >= 0.01:
        raise InvalidArgument(f"horizon_secs must be >= 0.01, got {horizon_secs!r}")
    if not isinstance(min_faults, int) or min_faults < 0:
        raise InvalidArgument(f"min_faults must be an int >= 0, got {min_faults!r}")
    if not isinstance(max_faults, int) or max_faults < min_faults:
        raise InvalidArgument(
            f"max_faults must be an int >= min_faults ({min_faults}), got {max_faults!r}"
        )
    if not isinstance(ackers, int) or ackers < 0:
        raise InvalidArgument(f"ackers must be an int >= 0, got {ackers!r}")
    if not 0.01 <= max_probability <= 1:
        raise InvalidArgument(f"max_probability must be in [0.01, 1], got {max_probability!r}")
    if not max_delay_secs >= 0.001 or not max_slow_secs >= 0.001:
        raise InvalidArgument(
            f"max_delay_secs and max_slow_secs must be >= 0.001, got {max_delay_secs!r} "
            f"and {max_slow_secs!r}"
        )
    shape = _shape_of(target)
    horizon = float(horizon_secs)
    at = _millis(0, horizon)
    probability = st.integers(1, round(max_probability * 100)).map(lambda p: p / 100)
    crashable = dict(shape.bolts)
    if crash_spouts:
        crashable.update(shape.spouts)
    kinds: list[st.SearchStrategy[Fault]] = []
    if crashable:
        kinds.append(
            st.sampled_from(sorted(crashable)).flatmap(
                lambda cid: st.builds(
                    CrashTask,
                    component=st.just(cid),
                    task_index=st.integers(0, crashable[cid] - 1),
                    at=at,
                )
            )
        )
    if ackers:
        kinds.append(st.builds(CrashAcker, at=at, index=st.integers(0, ackers - 1)))
    if shape.edges:
        edge = st.sampled_from(shape.edges)
        kinds.append(
            st.tuples(edge, _window(horizon), probability).map(
                lambda e: DropTuples(source=e[0][0], target=e[0][1], probability=e[2], **e[1])
            )
        )
        kinds.append(
            st.tuples(edge, _window(horizon), _millis(0.001, max_delay_secs)).map(
                lambda e: DelayTuples(source=e[0][0], target=e[0][1], delay_secs=e[2], **e[1])
            )
        )
    if shape.bolts:
        bolt = st.sampled_from(sorted(shape.bolts))
        kinds.append(
            st.tuples(bolt, _window(horizon), _millis(0.001, max_slow_secs)).map(
                lambda b: SlowBolt(component=b[0], secs_per_tuple=b[2], **b[1])
            )
        )
        kinds.append(
            st.tuples(bolt, _window(horizon), probability).map(
                lambda b: FailTuples(component=b[0], probability=b[2], **b[1])
            )
        )
    if not kinds:
        if min_faults:
            raise InvalidArgument(f"min_faults={min_faults}, but {target!r} admits no fault")
        return st.just([])
    return st.lists(st.one_of(kinds), min_size=min_faults, max_size=max_faults)
