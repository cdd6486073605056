"""Storm's XOR acking protocol: its rules, in one place.

Every tuple of a tracked tree carries, per root, an *edge id* (random, 64 bits, nonzero)
and an *ack value* (the XOR of the edge ids of the copies anchored to it). The acker keeps,
per root, the XOR of everything it is told; the tree is complete when it comes back to 0.

1. ``spout_tree``: a spout's tracked emit draws a root id and one edge id per outgoing
   copy; the acker is told ``INIT(root, XOR of the copies' edge ids)``.
2. ``anchored_copy`` / ``multi_anchored_copy``: a copy anchored to input ``a`` draws an
   edge id ``e``, XORs it into ``a``'s ack value and carries ``e`` for every root of
   ``a``. Anchored to several inputs, the copy draws one ``e`` per anchor, and its edge id
   for a root is the XOR of the ``e``'s of the anchors in that root's tree.
3. ``ack``: acking ``t`` tells the acker ``ACK(r, edge_r ^ ack_val)`` for each root ``r``.
   XOR being associative, consecutive ACKs of one root may be sent as their XOR.
4. ``fail`` / ``reset``: ``FAIL(r)`` / ``RESET(r)`` for each root ``r`` of ``t``.

The batch side applies the same rules to arrays (``batch_*``, over ``acker_kernel``, on
its one representation of a batch's trees): batch bolts, and per-tuple basic bolts and
spouts, whose emits are collected as rows and sent on as batches. Rich bolts apply the
per-tuple rules; a traced spout inlines rule 1 (``TracedSpoutCollector._send``).
``tests/engine/test_xor.py`` checks the batch paths against the per-tuple rules, on the
same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from acker_kernel import ack_ops, gather_roots, xor_per_anchor

from .._model.tuple import Source, Tuple
from .batch import TupleBatch

__all__ = [
    "ack",
    "anchored_copy",
    "batch_ack_ops",
    "batch_anchor",
    "batch_children",
    "batch_group_anchor",
    "batch_roots",
    "batch_spout_init",
    "fail",
    "multi_anchored_copy",
    "reset",
    "spout_tree",
]

#: ``rand(64)``: a task's source of 64-bit ids (``random.Random.getrandbits``)
Rand = Callable[[int], int]
Append = Callable[[int], None]


# --- per tuple -------------------------------------------------------------------------------
def spout_tree(rand: Rand, copies: int) -> tuple[int, list[int], int]:
    """Rule 1: ``(root, edge id per copy, INIT value)`` of a tracked spout emit."""
    root = rand(64)
    edges = [rand(64) for _ in range(copies)]
    init = 0
    for e in edges:
        init ^= e
    return root, edges, init


def anchored_copy(values: Sequence[Any], src: Source, a: Tuple, rand: Rand) -> Tuple:
    """Rule 2: the copy of an emit anchored to ``a`` (acked or failed already: the caller
    checks), XORing its edge id into ``a``'s ack value."""
    root = a._root
    if root is None:  # an untracked input: its children are untracked
        return Tuple(values, src, None, 0)
    e = rand(64)
    a._ack_val ^= e  # type: ignore[operator]
    if type(root) is int:
        return Tuple(values, src, root, e)
    return Tuple(values, src, dict.fromkeys(root, e), 0)


def multi_anchored_copy(
    values: Sequence[Any], src: Source, anchors: Sequence[Tuple], rand: Rand
) -> Tuple:
    """Rule 2, several anchors: one edge id per tracked anchor, XORed per root."""
    ids: dict[int, int] = {}
    for a in anchors:
        root = a._root
        if root is None:
            continue
        e = rand(64)
        a._ack_val ^= e  # type: ignore[operator]
        for r in (root,) if type(root) is int else root:
            ids[r] = ids.get(r, 0) ^ e
    if not ids:
        return Tuple(values, src, None, 0)
    if len(ids) == 1:
        ((r, e),) = ids.items()
        return Tuple(values, src, r, e)
    return Tuple(values, src, ids, 0)


def ack(t: Tuple, ack_root: Append, ack_val: Append) -> None:
    """Rule 3: ``t``'s ACK operations, appended root by root; ``t`` is then completed."""
    v = t._ack_val
    t._ack_val = None
    root = t._root
    if type(root) is int:
        ack_root(root)
        ack_val(t._edge ^ v)  # type: ignore[operator]
    elif root is not None:
        for r, e in root.items():
            ack_root(r)
            ack_val(e ^ v)


def fail(t: Tuple, fail_root: Append) -> None:
    """Rule 4: ``t``'s FAIL operations; ``t`` is then completed."""
    t._ack_val = None
    _each_root(t, fail_root)


def reset(t: Tuple, reset_root: Append) -> None:
    """Rule 4: ``t``'s RESET operations (its trees' timeouts start again)."""
    _each_root(t, reset_root)


def _each_root(t: Tuple, append: Append) -> None:
    root = t._root
    if type(root) is int:
        append(root)
    elif root is not None:
        for r in root:
            append(r)


# --- batches ---------------------------------------------------------------------------------
# The same rules on a ``TupleBatch``'s arrays (one root per row, or CSR: ``TupleBatch``),
# through ``acker_kernel``'s batch functions, which take that one representation.


def batch_spout_init(init: np.ndarray, rows: np.ndarray | None, edges: np.ndarray) -> None:
    """Rule 1 on arrays: XOR one partition's copy edge ids into the rows' INIT values
    (``rows`` None: every row; rows are distinct within a partition)."""
    if rows is None:
        init ^= edges
    else:
        init[rows] ^= edges


def batch_anchor(batch: TupleBatch, anchor: np.ndarray, edges: np.ndarray) -> None:
    """Rule 2 on arrays: output row ``j`` anchored to input row ``anchor[j]`` with edge id
    ``edges[j]``: XOR each edge id into its anchor row's ack value."""
    if batch.ack_vals is None:
        batch.ack_vals = np.zeros(batch.n, np.uint64)
    batch.ack_vals ^= xor_per_anchor(anchor, edges, batch.n)


def batch_children(
    batch: TupleBatch, anchor: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Rule 2 on arrays, the children's side: ``(roots, edges, root_offsets)`` of output
    rows anchored one each to input rows ``anchor`` with edge ids ``edges``. A child has its
    anchor's roots, and its one edge id for each of them."""
    assert batch.roots is not None
    roots, offsets = gather_roots(batch.roots, anchor, batch.root_offsets)
    if offsets is not None:
        edges = np.repeat(edges, np.diff(offsets))
    return roots, edges, offsets


def batch_group_anchor(
    batch: TupleBatch, owner: np.ndarray, anchor: np.ndarray, edges: np.ndarray, n_out: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Rule 2 on arrays, several anchors per output row (an aggregate anchored to every row
    it combines): pair ``k`` anchors output row ``owner[k]`` to input row ``anchor[k]``
    with edge id ``edges[k]``. XORs the edge ids into the anchors' ack values and returns
    the ``n_out`` output rows' ``(roots, edges, root_offsets)``: each output row gets every
    root of its anchors, with the XOR of its edge ids in that tree; one root per row when
    every row has exactly one, else CSR (as ``TupleBatch`` holds them)."""
    assert batch.roots is not None
    batch_anchor(batch, anchor, edges)
    roots, offsets = gather_roots(batch.roots, anchor, batch.root_offsets)
    if offsets is not None:  # each pair once per root of its anchor
        counts = np.diff(offsets)
        owner = np.repeat(owner, counts)
        edges = np.repeat(edges, counts)
    order = np.lexsort((roots, owner))
    owner, roots, edges = owner[order], roots[order], edges[order]
    first = np.ones(owner.shape[0], bool)
    first[1:] = (owner[1:] != owner[:-1]) | (roots[1:] != roots[:-1])
    starts = np.flatnonzero(first)
    g_owner, g_root = owner[starts], roots[starts]
    g_edge = np.bitwise_xor.reduceat(edges, starts) if starts.shape[0] else edges[:0]
    trees = np.bincount(g_owner, minlength=n_out)
    if bool((trees == 1).all()):
        return g_root, g_edge, None  # sorted by owner: row j's root is g_root[j]
    out_offsets = np.zeros(n_out + 1, np.int64)
    np.cumsum(trees, out=out_offsets[1:])
    return g_root, g_edge, out_offsets


def batch_ack_ops(batch: TupleBatch, idx: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Rule 3 on arrays: ``(roots, values)`` of the ACKs of rows ``idx`` of ``batch`` (None:
    every row; consecutive ACKs of one root combined)."""
    assert batch.roots is not None and batch.edges is not None
    return ack_ops(batch.roots, batch.edges, batch.ack_vals, idx, batch.root_offsets)


def batch_roots(batch: TupleBatch, idx: np.ndarray) -> np.ndarray:
    """Rule 4 on arrays: the roots of rows ``idx`` of ``batch`` (for FAILs and RESETs)."""
    assert batch.roots is not None
    return gather_roots(batch.roots, idx, batch.root_offsets)[0]
