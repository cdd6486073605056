"""Columnar acking: the acker's bookkeeping for a whole batch of rows, on arrays.

A batch of N rows moves between executors with its tree bookkeeping as numpy arrays: per
row its root id(s), its edge id(s) and its ack value. Storm's XOR protocol (a tree is
complete when the XOR of its edge ids comes back to 0) then becomes four array steps, each a
jitted kernel behind a thin validating wrapper:

1. ``TreeIdSource.draw``: root and edge ids in bulk, from a counter-based generator; never 0.
2. ``xor_per_anchor`` / ``xor_per_anchors``: each input row's ack value, the XOR of the
   edge ids of the output rows anchored to it.
3. ``ack_ops`` / ``multi_root_ack_ops``: the acker ops for acked and failed input rows,
   ``ACK(root, edge_id ^ ack_value)`` per (row, root), ``FAIL(root)``.
4. ``fold_ops``: one batch's ops combined per root before the ledger; trees that start and
   finish inside the batch complete here and never take a slot of ``AckerLedger``.

>>> import numpy as np
>>> from acker_kernel import Op
>>> ids = TreeIdSource(seed=7)
>>> roots, spout_edges = ids.draw(2), ids.draw(2)      # two sentences, one edge each
>>> words = ids.draw(3)                                 # sentence 0 -> 2 words, 1 -> 1 word
>>> acks = xor_per_anchor(np.array([0, 0, 1]), words, n_inputs=2)
>>> split = ack_ops(roots, spout_edges, acks, np.ones(2, bool))   # split acks the sentences
>>> count = ack_ops(roots[[0, 0, 1]], words, np.zeros(3, np.uint64), np.ones(3, bool))
>>> init = np.full(2, Op.INIT, np.uint8), roots, spout_edges, np.array([5, 5], np.int32)
>>> ops = [np.concatenate(a) for a in zip(init, (*split, np.zeros(2, np.int32)),
...                                        (*count, np.zeros(3, np.int32)))]
>>> folded = fold_ops(*ops, times_ns=np.zeros(7, np.int64))
>>> len(folded.ops), sorted(folded.acked_root.tolist()) == sorted(roots.tolist())
(0, True)
"""

from __future__ import annotations

import operator
import threading
from typing import NamedTuple

import numpy as np
from numba import config, njit, types

from ._constants import (
    FOLD_MAX_LOAD_FACTOR,
    FOLD_MIN_CAPACITY,
    HASH_MULTIPLIER,
    ID_GAMMA,
    ID_MIX_C1,
    ID_MIX_C2,
    ID_ZERO_SUBSTITUTE,
    N_OPS,
    OP_ACK,
    OP_FAIL,
    OP_INIT,
    OP_RESET,
    OUTCOME_ACKED,
)
from ._ledger import Completions, _check_array
from ._types import BYTES, BYTES_IN, I32_IN, I32S, I64_IN, I64S, INTP, U64, U64_IN, U64S

__all__ = [
    "AckOps",
    "FoldedOps",
    "TreeIdSource",
    "ack_ops",
    "fold_ops",
    "multi_root_ack_ops",
    "xor_per_anchor",
    "xor_per_anchors",
]

_U64_MAX = 2**64 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# The one signature each kernel is compiled for (``_types``, shared with the ledger's).
_U64S, _I64S, _I32S, _U8S = U64S, I64S, I32S, BYTES
_U64_IN, _I64_IN, _I32_IN, _U8_IN = U64_IN, I64_IN, I32_IN, BYTES_IN
_intp, _u64 = INTP, U64

_ACK = np.uint8(OP_ACK)
_FAIL = np.uint8(OP_FAIL)
_INIT = np.uint8(OP_INIT)
_RESET = np.uint8(OP_RESET)
_ZERO = np.uint64(0)

# --- 64-bit arithmetic that wraps ------------------------------------------------------------

if config.DISABLE_JIT:  # type: ignore[attr-defined]
    # Interpreted numpy scalars warn on the (intended) wrap-around: use Python ints there.
    _MASK64 = (1 << 64) - 1
    _GAMMA_INT, _C1_INT, _C2_INT = int(ID_GAMMA), int(ID_MIX_C1), int(ID_MIX_C2)
    _MULTIPLIER_INT = int(HASH_MULTIPLIER)

    def _id_at(key, counter):
        z = (int(key) + int(counter) * _GAMMA_INT) & _MASK64
        z = ((z ^ (z >> 30)) * _C1_INT) & _MASK64
        z = ((z ^ (z >> 27)) * _C2_INT) & _MASK64
        z ^= z >> 31
        return np.uint64(z) if z != 0 else ID_ZERO_SUBSTITUTE

    def _bucket(root, shift):
        return ((int(root) * _MULTIPLIER_INT) & _MASK64) >> int(shift)

else:
    _S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)

    @njit(inline="always", cache=True)
    def _id_at(key, counter):
        z = key + counter * ID_GAMMA
        z = (z ^ (z >> _S30)) * ID_MIX_C1
        z = (z ^ (z >> _S27)) * ID_MIX_C2
        z ^= z >> _S31
        return z if z != _ZERO else ID_ZERO_SUBSTITUTE

    @njit(inline="always", cache=True)
    def _bucket(root, shift):
        return (root * HASH_MULTIPLIER) >> shift


# --- 1. tree ids ------------------------------------------------------------------------------


@njit(types.void(_U64S, _U64S), cache=True)
def _draw_ids(out, state):
    """``out[i] = id(counter + i)`` with ``state = [key, counter]`` (an array: no scalars
    to box per call). The caller checked that the counter does not wrap, and advances it."""
    key = state[0]
    counter = state[1]
    for i in range(np.uint64(out.shape[0])):
        out[i] = _id_at(key, counter + i)


def _key_for(seed: int) -> int:
    # The seed goes through the mixer once, so nearby seeds (7, 8) start far apart.
    z = (seed + int(ID_GAMMA)) & _U64_MAX
    z = ((z ^ (z >> 30)) * int(ID_MIX_C1)) & _U64_MAX
    z = ((z ^ (z >> 27)) * int(ID_MIX_C2)) & _U64_MAX
    return z ^ (z >> 31)


class TreeIdSource:
    """Random 64-bit root and edge ids for tuple trees, drawn in bulk; never 0.

    Counter-based: id number ``c`` is SplitMix64's mix of ``key + c * gamma`` (``key``
    from ``seed``), so a seed always gives the same ids, any stretch of them can be drawn
    again from its ``counter``, and no two of the first 2**64 ids repeat. Storm draws
    these from ``java.util.Random`` and only hopes for no 0 (the XOR identity: an edge id
    0 makes a tree look complete while that tuple is pending); here the one counter whose
    mix is 0 yields ``ID_ZERO_SUBSTITUTE`` instead.

    >>> ids = TreeIdSource(seed=1)
    >>> a = ids.draw(3)
    >>> a.dtype.name, bool(a.all()), ids.counter
    ('uint64', True, 3)
    >>> bool((TreeIdSource(seed=1).draw(3) == a).all())
    True
    """

    __slots__ = ("_counter", "_seed", "_state")

    def __init__(self, seed: int, counter: int = 0) -> None:
        self._seed = _check_u64("seed", seed)
        self._counter = _check_u64("counter", counter)
        # [key, counter mod 2**64], as the kernel reads them.
        self._state = np.array([_key_for(self._seed), self._counter & _U64_MAX], np.uint64)

    def __repr__(self) -> str:
        return f"TreeIdSource(seed={self._seed}, counter={self._counter})"

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def counter(self) -> int:
        """How many ids were drawn: ``TreeIdSource(seed, counter)`` continues from here."""
        return self._counter

    def draw(self, n: int) -> np.ndarray:
        """The next ``n`` ids, as a new uint64 array."""
        n = _check_int("n", n)
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out = np.empty(n, np.uint64)
        self._fill(out)
        return out

    def draw_into(self, out: np.ndarray) -> None:
        """Fill the preallocated uint64 array ``out`` with the next ``len(out)`` ids."""
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy array of uint64, got {type(out).__name__}")
        if out.dtype != np.uint64:
            raise TypeError(f"out must have dtype uint64, got {out.dtype}")
        if out.ndim != 1 or not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(
                "out must be a writable, contiguous one-dimensional array "
                f"(shape {out.shape}); pass a fresh np.empty(n, np.uint64)"
            )
        self._fill(out)

    def _fill(self, out: np.ndarray) -> None:
        n = out.shape[0]
        if self._counter + n > 2**64:
            raise ValueError(
                f"TreeIdSource(seed={self._seed}) has {2**64 - self._counter} ids left, "
                f"{n} asked; use another seed"
            )
        if n:
            _draw_ids(out, self._state)
            self._counter += n
            self._state[1] = self._counter & _U64_MAX


# --- 2. ack values: XOR of the edge ids anchored to each input row ---------------------------


@njit(_intp(_I64_IN, _U64_IN, _U64S), cache=True)
def _xor_per_anchor(anchor_index, edge_ids, out):
    """``out[anchor_index[m]] ^= edge_ids[m]``; returns the first bad row, or -1."""
    n = out.shape[0]
    for m in range(anchor_index.shape[0]):
        a = anchor_index[m]
        if a < 0 or a >= n:
            return m
        out[a] ^= edge_ids[m]
    return -1


@njit(_intp(_I64_IN, _intp), cache=True)
def _bad_offset(offsets, total):
    """The first index where ``offsets`` is not a CSR offsets array ending at ``total``."""
    if offsets[0] != 0:
        return 0
    for i in range(1, offsets.shape[0]):
        if offsets[i] < offsets[i - 1]:
            return i
    if offsets[offsets.shape[0] - 1] != total:
        return offsets.shape[0] - 1
    return -1


def xor_per_anchor(anchor_index: np.ndarray, edge_ids: np.ndarray, n_inputs: int) -> np.ndarray:
    """Each input row's ack value when every output row has one anchor (a flat map).

    Output row ``m`` is anchored to input row ``anchor_index[m]`` (int64, any order) and has
    edge id ``edge_ids[m]``; input row ``i``'s ack value is the XOR of the edge ids of the
    output rows anchored to it (0 if none), as Storm's ``a.ack_val ^= e`` per emit.

    >>> xor_per_anchor(np.array([1, 0, 1]), np.array([1, 2, 4], np.uint64), 3).tolist()
    [2, 5, 0]
    """
    n = _check_n_inputs(n_inputs)
    anchor_index = _check_array("anchor_index", anchor_index, _INT64, None)
    edge_ids = _check_parallel("edge_ids", edge_ids, _UINT64, "anchor_index", anchor_index)
    out = np.zeros(n, np.uint64)
    bad = _xor_per_anchor(anchor_index, edge_ids, out)
    if bad >= 0:
        raise ValueError(
            f"anchor_index[{bad}] = {int(anchor_index[bad])} is not an input row: "
            f"anchors must be in [0, n_inputs={n})"
        )
    return out


def xor_per_anchors(
    anchor_offsets: np.ndarray, anchor_rows: np.ndarray, edge_ids: np.ndarray, n_inputs: int
) -> np.ndarray:
    """Each input row's ack value when output rows may have several anchors (CSR).

    Output row ``m`` is anchored to the input rows ``anchor_rows[anchor_offsets[m]:
    anchor_offsets[m + 1]]``, with one edge id per (output row, anchor) in ``edge_ids``
    (parallel to ``anchor_rows``), as Storm draws one per anchor: one id shared by two
    anchors with a common root would cancel out of the child's id for that root, and the
    tree could complete while the child is still pending.

    >>> offsets, rows = np.array([0, 2, 3]), np.array([0, 1, 1])
    >>> xor_per_anchors(offsets, rows, np.array([1, 2, 4], np.uint64), 2).tolist()
    [1, 6]
    """
    n = _check_n_inputs(n_inputs)
    anchor_offsets = _check_array("anchor_offsets", anchor_offsets, _INT64, None)
    anchor_rows = _check_array("anchor_rows", anchor_rows, _INT64, None)
    edge_ids = _check_parallel("edge_ids", edge_ids, _UINT64, "anchor_rows", anchor_rows)
    _check_offsets("anchor_offsets", anchor_offsets, "anchor_rows", anchor_rows.shape[0])
    out = np.zeros(n, np.uint64)
    bad = _xor_per_anchor(anchor_rows, edge_ids, out)
    if bad >= 0:
        raise ValueError(
            f"anchor_rows[{bad}] = {int(anchor_rows[bad])} is not an input row: "
            f"anchors must be in [0, n_inputs={n})"
        )
    return out


# --- 3. the acker ops for acked and failed rows -----------------------------------------------


class AckOps(NamedTuple):
    """Acker operations (parallel arrays), the first three arguments of ``apply``."""

    ops: np.ndarray  # uint8, values of ``Op``
    roots: np.ndarray  # uint64
    values: np.ndarray  # uint64: 0 for FAIL

    def __len__(self) -> int:
        return int(self.ops.shape[0])


@njit(types.void(_U64_IN, _U64_IN, _U8_IN, _U8S, _U64S), cache=True)
def _ack_ops(edge_ids, ack_values, acked, ops, values):
    for i in range(edge_ids.shape[0]):
        if acked[i]:
            ops[i] = _ACK
            values[i] = edge_ids[i] ^ ack_values[i]
        else:
            ops[i] = _FAIL
            values[i] = _ZERO


@njit(types.void(_I64_IN, _U64_IN, _U64_IN, _U8_IN, _U8S, _U64S), cache=True)
def _multi_root_ack_ops(root_offsets, edge_ids, ack_values, acked, ops, values):
    for i in range(ack_values.shape[0]):
        for k in range(root_offsets[i], root_offsets[i + 1]):
            if acked[i]:
                ops[k] = _ACK
                values[k] = edge_ids[k] ^ ack_values[i]
            else:
                ops[k] = _FAIL
                values[k] = _ZERO


def ack_ops(
    roots: np.ndarray, edge_ids: np.ndarray, ack_values: np.ndarray, acked: np.ndarray
) -> AckOps:
    """The acker ops for input rows with one root each: ``ACK(root, edge_id ^ ack_value)``
    where ``acked`` (bool or uint8) is true, else ``FAIL(root)``; one op per row.

    >>> ack_ops(np.array([7, 8], np.uint64), np.array([3, 1], np.uint64),
    ...         np.array([1, 9], np.uint64), np.array([True, False])).values.tolist()
    [2, 0]
    """
    roots = _check_array("roots", roots, _UINT64, None)
    edge_ids = _check_parallel("edge_ids", edge_ids, _UINT64, "roots", roots)
    ack_values = _check_parallel("ack_values", ack_values, _UINT64, "roots", roots)
    acked = _check_mask(acked, "roots", roots.shape[0])
    n = roots.shape[0]
    ops = np.empty(n, np.uint8)
    values = np.empty(n, np.uint64)
    _ack_ops(edge_ids, ack_values, acked, ops, values)
    return AckOps(ops, roots.copy(), values)


def multi_root_ack_ops(
    root_offsets: np.ndarray,
    roots: np.ndarray,
    edge_ids: np.ndarray,
    ack_values: np.ndarray,
    acked: np.ndarray,
) -> AckOps:
    """The acker ops for input rows with any number of roots (CSR).

    Row ``i`` has the roots ``roots[root_offsets[i]:root_offsets[i + 1]]`` and, parallel
    to them in ``edge_ids``, its id for each root (Storm's ``anchorsToIds``: a
    multi-anchored tuple's id differs per root). Per (row, root): ``ACK(root, id ^
    ack_values[i])`` if ``acked[i]``, else ``FAIL(root)``. A row without roots sends nothing.

    >>> multi_root_ack_ops(np.array([0, 2, 2]), np.array([7, 8], np.uint64),
    ...     np.array([1, 2], np.uint64), np.array([4, 5], np.uint64),
    ...     np.array([1, 1], np.uint8)).values.tolist()
    [5, 6]
    """
    root_offsets = _check_array("root_offsets", root_offsets, _INT64, None)
    roots = _check_array("roots", roots, _UINT64, None)
    edge_ids = _check_parallel("edge_ids", edge_ids, _UINT64, "roots", roots)
    ack_values = _check_array("ack_values", ack_values, _UINT64, None)
    n = ack_values.shape[0]
    if root_offsets.shape[0] != n + 1:
        raise ValueError(
            f"root_offsets has {root_offsets.shape[0]} elements; it needs one per row plus "
            f"one (ack_values has {n} rows, so {n + 1})"
        )
    _check_offsets("root_offsets", root_offsets, "roots", roots.shape[0])
    acked = _check_mask(acked, "ack_values", n)
    k = roots.shape[0]
    ops = np.empty(k, np.uint8)
    values = np.empty(k, np.uint64)
    _multi_root_ack_ops(root_offsets, edge_ids, ack_values, acked, ops, values)
    return AckOps(ops, roots.copy(), values)


# --- 4. folding a batch's ops per root ------------------------------------------------------

# Per-root flags in fold's scratch.
_HAS_INIT = np.uint8(1)
_HAS_RESET = np.uint8(2)
_HAS_SUFFIX = np.uint8(4)  # an INIT or ACK after the INIT
_HAS_VALUE = np.uint8(8)  # an INIT or ACK at all
_ZERO_NOW = np.uint8(16)  # INIT seen and the running XOR is 0 (the ledger would complete)
_PASS = np.uint8(32)  # not folded: a FAIL, a second INIT, or a zero before the last value op


class FoldedOps(NamedTuple):
    """What ``fold_ops`` makes of a batch: ops for ``AckerLedger.apply`` and the trees that
    completed inside the batch (ACKED; they never reach the ledger)."""

    ops: np.ndarray  # uint8
    roots: np.ndarray  # uint64
    values: np.ndarray  # uint64
    spout_tasks: np.ndarray  # int32
    times_ns: np.ndarray  # int64: earliest time of the ops folded in (RESET: the latest)
    acked_root: np.ndarray  # uint64
    acked_spout_task: np.ndarray  # int32
    acked_start_ns: np.ndarray  # int64: the tree's earliest op in the batch

    def acked(self, now_ns: int) -> Completions:
        """The trees completed inside the batch as ``Completions`` (ACKED, latency
        ``now_ns - start``), to merge with what ``apply`` returns."""
        n = self.acked_root.shape[0]
        return Completions(
            self.acked_root,
            self.acked_spout_task,
            np.full(n, OUTCOME_ACKED, np.uint8),
            _check_int("now_ns", now_ns) - self.acked_start_ns,
        )


@njit(
    types.UniTuple(_intp, 2)(
        _U8_IN, _U64_IN, _U64_IN, _I32_IN, _I64_IN, _I32S, _u64,
        _I32S, _I64S, _U64S, _U8S, _U64S, _U64S, _U64S, _I32S, _I64S, _I64S, _I64S,
        _U8S, _U64S, _U64S, _I32S, _I64S, _U64S, _I32S, _I64S,
    ),
    cache=True,
)  # fmt: skip
def _fold(
    ops, roots, values, spout_tasks, times, slots, shift,
    rid_of, first, keys, flags, total, prefix, suffix, task, t_prefix, t_suffix, t_reset,
    out_op, out_root, out_value, out_task, out_time, done_root, done_task, done_start,
):  # fmt: skip
    """Fold ``ops`` per root; returns ``(n_out, n_done)``, or ``(-1 - k, 0)`` if op ``k``
    has an unknown code. ``slots`` (a power of two, all -1) maps roots to dense ids."""
    n = ops.shape[0]
    seen = np.uint8(0)
    for k in range(n):
        seen |= ops[k]
    if seen >= N_OPS:
        for k in range(n):
            if ops[k] >= N_OPS:
                return -1 - k, 0
    mask = np.uint64(slots.shape[0] - 1)
    one = np.uint64(1)
    n_roots = 0
    # Pass 1: per root, replay the ledger's rules from an empty entry. Rows of one tree
    # tend to come together (a sentence's words): a run of one root is one probe, with the
    # root's state in locals.
    k = 0
    while k < n:
        root = roots[k]
        i = _bucket(root, shift)
        while True:
            r = slots[i]
            if r < 0:
                r = n_roots
                slots[i] = r
                keys[r] = root
                first[r] = k
                flags[r] = 0
                total[r] = 0
                prefix[r] = 0
                suffix[r] = 0
                task[r] = 0
                t_prefix[r] = _INT64_MAX
                t_suffix[r] = _INT64_MAX
                t_reset[r] = _INT64_MIN
                n_roots += 1
                break
            if keys[r] == root:
                break
            i = (i + one) & mask
        f = flags[r]
        tot = total[r]
        pre = prefix[r]
        suf = suffix[r]
        tsk = task[r]
        tp = t_prefix[r]
        ts = t_suffix[r]
        tr = t_reset[r]
        while k < n and roots[k] == root:
            rid_of[k] = r
            op = ops[k]
            t = times[k]
            if op == _RESET:
                f |= _HAS_RESET
                tr = max(tr, t)
            elif op == _FAIL:
                f |= _PASS
            else:
                if f & _ZERO_NOW:
                    f |= _PASS  # the ledger completed the tree here; this op starts anew
                v = values[k]
                tot ^= v
                if op == _INIT:
                    if f & _HAS_INIT:
                        f |= _PASS
                    f |= _HAS_INIT
                    tsk = spout_tasks[k]
                    pre ^= v
                    tp = min(tp, t)
                elif f & _HAS_INIT:
                    suf ^= v
                    f |= _HAS_SUFFIX
                    ts = min(ts, t)
                else:
                    pre ^= v
                    tp = min(tp, t)
                f |= _HAS_VALUE
                if f & _HAS_INIT and tot == _ZERO:
                    f |= _ZERO_NOW
                else:
                    f &= ~_ZERO_NOW
            k += 1
        flags[r] = f
        total[r] = tot
        prefix[r] = pre
        suffix[r] = suf
        task[r] = tsk
        t_prefix[r] = tp
        t_suffix[r] = ts
        t_reset[r] = tr
    # Pass 2: in batch order, a folded root's ops where it first appeared; the ops of roots
    # not folded as they came (ops of different roots commute in the ledger).
    n_out = 0
    n_done = 0
    for k in range(n):
        r = rid_of[k]
        f = flags[r]
        if f & _PASS:
            out_op[n_out] = ops[k]
            out_root[n_out] = roots[k]
            out_value[n_out] = values[k]
            out_task[n_out] = spout_tasks[k]
            out_time[n_out] = times[k]
            n_out += 1
            continue
        if first[r] != k:
            continue
        root = keys[r]
        if f & _ZERO_NOW:  # INIT and every ack in this batch: complete, no ledger slot
            done_root[n_done] = root
            done_task[n_done] = task[r]
            done_start[n_done] = min(t_prefix[r], t_suffix[r])
            n_done += 1
            continue
        if f & _HAS_VALUE:
            # Up to and including the INIT, then what came after it: a FAIL already in the
            # ledger completes the tree at the INIT, and later acks start a new entry there.
            out_op[n_out] = _INIT if f & _HAS_INIT else _ACK
            out_root[n_out] = root
            out_value[n_out] = prefix[r]
            out_task[n_out] = task[r]
            out_time[n_out] = t_prefix[r]
            n_out += 1
            if f & _HAS_SUFFIX:
                out_op[n_out] = _ACK
                out_root[n_out] = root
                out_value[n_out] = suffix[r]
                out_task[n_out] = 0
                out_time[n_out] = t_suffix[r]
                n_out += 1
        if f & _HAS_RESET:
            out_op[n_out] = _RESET
            out_root[n_out] = root
            out_value[n_out] = 0
            out_task[n_out] = 0
            out_time[n_out] = t_reset[r]
            n_out += 1
    return n_out, n_done


def fold_ops(
    ops: np.ndarray,
    roots: np.ndarray,
    values: np.ndarray,
    spout_tasks: np.ndarray,
    times_ns: np.ndarray,
) -> FoldedOps:
    """Combine a batch's acker ops per root before they reach ``AckerLedger.apply``.

    Per root: the INIT and ACK values XOR together (the INIT's spout task carried), RESETs
    become one. A root whose batch holds its INIT and whose values XOR to 0 is a tree that
    started and finished inside the batch: it comes back in ``acked_*`` (root, spout task,
    earliest time) and never takes a ledger slot. The rest comes back as at most three ops
    per root: ``INIT``/``ACK`` of the values up to the INIT, ``ACK`` of those after it,
    ``RESET``. Roots with a FAIL or a second INIT, or whose values reach 0 after the INIT
    before their last one (the ledger would complete the tree there and start a new entry),
    are passed through unfolded, in their order; so FAIL always wins.

    Applying the result equals applying the batch op by op (the same completions with the
    same outcomes, spout tasks and latencies, the same ledger entries and counters once the
    ``acked_*`` trees are counted as acked) when the batch's roots are not in the ledger,
    and otherwise whenever no proper subset of one tree's INIT/ACK values XORs to 0, which
    Storm's protocol with random nonzero edge ids (``TreeIdSource``) guarantees but for a
    chance of 2**-64. Times: each folded op carries the earliest time of the ops it
    replaces (a tree starts at its first op), a folded RESET the latest.

    >>> from acker_kernel import Op
    >>> ops = np.array([Op.INIT, Op.ACK, Op.ACK], np.uint8)
    >>> roots, values = np.array([9, 9, 4], np.uint64), np.array([6, 6, 1], np.uint64)
    >>> f = fold_ops(ops, roots, values, np.array([2, 0, 0], np.int32), np.zeros(3, np.int64))
    >>> f.acked_root.tolist(), f.acked_spout_task.tolist(), f.roots.tolist(), f.values.tolist()
    ([9], [2], [4], [1])
    """
    ops = _check_array("ops", ops, _UINT8, None)
    n = ops.shape[0]
    roots = _check_array("roots", roots, _UINT64, n)
    values = _check_array("values", values, _UINT64, n)
    spout_tasks = _check_array("spout_tasks", spout_tasks, _INT32, n)
    times_ns = _check_array("times_ns", times_ns, _INT64, n)
    capacity = max(FOLD_MIN_CAPACITY, 1 << max(0, int(n / FOLD_MAX_LOAD_FACTOR) - 1).bit_length())
    shift = np.uint64(64 - (capacity.bit_length() - 1))
    scratch = _scratch_for(capacity)
    slots = scratch[0][:capacity]
    slots.fill(-1)
    n_out, n_done = _fold(ops, roots, values, spout_tasks, times_ns, slots, shift, *scratch[1:])
    if n_out < 0:
        bad = int(ops[-1 - n_out])
        raise ValueError(f"ops holds an unknown op code {bad}; use the values of Op")
    out, done = scratch[-8:-3], scratch[-3:]
    return FoldedOps(*(a[:n_out].copy() for a in out), *(a[:n_done].copy() for a in done))


#: fold's scratch dtypes: slots; per op or root: rid_of, first, keys, flags, total, prefix,
#: suffix, task, t_prefix, t_suffix, t_reset; outputs: op, root, value, task, time; acked
#: root, task, start.
_I4, _I8, _U1, _U8 = (np.dtype(t) for t in ("i4", "i8", "u1", "u8"))
_SCRATCH_DTYPES: tuple[np.dtype, ...] = (_I4, _I4, _I8, _U8, _U1, _U8, _U8, _U8, _I4, _I8, _I8)
_SCRATCH_DTYPES += (_I8, _U1, _U8, _U8, _I4, _I8, _U8, _I4, _I8)
_scratch = threading.local()


def _scratch_for(capacity: int) -> tuple[np.ndarray, ...]:
    """This thread's scratch arrays, at least ``capacity`` long (kept between calls: fresh
    pages for every batch would cost more than the fold itself)."""
    arrays: tuple[np.ndarray, ...] | None = getattr(_scratch, "arrays", None)
    if arrays is None or arrays[0].shape[0] < capacity:
        rows = int(capacity * FOLD_MAX_LOAD_FACTOR) + 1  # >= the ops of a batch this size
        arrays = (np.empty(capacity, np.int32),)
        arrays += tuple(np.empty(rows, dtype) for dtype in _SCRATCH_DTYPES[1:])
        _scratch.arrays = arrays
    return arrays


# --- validation -------------------------------------------------------------------------------

_UINT8 = np.dtype(np.uint8)
_UINT64 = np.dtype(np.uint64)
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


def _check_int(name: str, value: object) -> int:
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None


def _check_u64(name: str, value: object) -> int:
    number = _check_int(name, value)
    if not 0 <= number <= _U64_MAX:
        raise ValueError(f"{name} must be in [0, 2**64), got {number}")
    return number


def _check_n_inputs(n_inputs: object) -> int:
    n = _check_int("n_inputs", n_inputs)
    if n < 0:
        raise ValueError(f"n_inputs must be >= 0, got {n}")
    return n


def _check_parallel(
    name: str, value: object, dtype: np.dtype, other: str, other_value: np.ndarray
) -> np.ndarray:
    array = _check_array(name, value, dtype, None)
    if array.shape[0] != other_value.shape[0]:
        raise ValueError(
            f"{name} has {array.shape[0]} elements, but {other} has {other_value.shape[0]}; "
            "they are parallel arrays"
        )
    return array


def _check_mask(acked: object, other: str, n: int) -> np.ndarray:
    if isinstance(acked, np.ndarray) and acked.dtype == np.bool_:
        acked = acked.view(np.uint8)
    if isinstance(acked, np.ndarray) and acked.dtype != np.uint8:
        raise TypeError(f"acked must have dtype bool or uint8, got {acked.dtype}")
    acked = _check_array("acked", acked, _UINT8, None)
    if acked.shape[0] != n:
        raise ValueError(f"acked has {acked.shape[0]} elements, but {other} has {n} rows")
    return acked


def _check_offsets(name: str, offsets: np.ndarray, rows_name: str, total: int) -> None:
    if offsets.shape[0] == 0:
        raise ValueError(f"{name} must have at least one element (0), got none")
    bad = _bad_offset(offsets, total)
    if bad >= 0:
        raise ValueError(
            f"{name}[{bad}] = {int(offsets[bad])} breaks the CSR layout: {name} must start "
            f"at 0, never decrease, and end at len({rows_name}) = {total}"
        )
