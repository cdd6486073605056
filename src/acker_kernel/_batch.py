"""Columnar acking: the acker's bookkeeping for a whole batch of rows, on arrays.

A batch of N rows moves between executors with its tree bookkeeping as numpy arrays: per
row its root id and its edge id (Storm's ``MessageId``), and its ack value (the XOR of the
edge ids of the children anchored to it). A row may belong to several trees (a join that
anchored to two inputs): then the batch carries its roots in CSR form, ``root_offsets``
(N + 1 int64) saying that row ``i`` has the roots ``roots[root_offsets[i]:root_offsets[i +
1]]`` and, parallel to them, its edge id for each root; a row without roots is untracked.
Without ``root_offsets`` every row has exactly one root. That is the one representation:
the engine's ``TupleBatch`` holds it and every function here takes it.

Storm's XOR protocol (a tree is complete when the XOR of its edge ids comes back to 0)
then becomes four array steps, each a jitted kernel behind a thin validating wrapper:

1. ``TreeIdSource.draw``: root and edge ids in bulk, from a counter-based generator; never 0.
2. ``xor_per_anchor``: each input row's ack value, the XOR of the edge ids of the output
   rows anchored to it.
3. ``ack_ops``: the ACKs of acked rows, ``ACK(root, edge_id ^ ack_value)`` per (row, root),
   consecutive ACKs of one root combined into one (XOR is associative: the acker sees the
   same value), so a sentence's eight words cost the acker one operation.
4. ``gather_roots``: the roots of some rows (their FAILs and RESETs), or the roots the
   children anchored to those rows inherit, in the same representation.

>>> import numpy as np
>>> ids = TreeIdSource(seed=7)
>>> roots, spout_edges = ids.draw(2), ids.draw(2)      # two sentences, one edge each
>>> anchor = np.array([0, 0, 1])                        # sentence 0 -> 2 words, 1 -> 1 word
>>> words = ids.draw(3)
>>> acks = xor_per_anchor(anchor, words, n_inputs=2)
>>> every = np.arange(2)
>>> split = ack_ops(roots, spout_edges, acks, every)    # split acks the sentences
>>> word_roots, _ = gather_roots(roots, anchor)         # the words' trees
>>> count = ack_ops(word_roots, words, None, np.arange(3))  # count acks the words
>>> len(count)                                          # the two words of sentence 0: one ACK
2
>>> done = {r: 0 for r in roots.tolist()}
>>> for r, v in zip(*(np.concatenate(p).tolist() for p in zip(split, count)), strict=True):
...     done[r] ^= v
>>> [done[r] == e for r, e in zip(roots.tolist(), spout_edges.tolist())]  # == the INITs
[True, True]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, types

from ._constants import HASH_MULTIPLIER, ID_GAMMA, ID_MIX_C1, ID_MIX_C2, ID_ZERO_SUBSTITUTE
from ._ledger import _check_array, _check_int
from ._types import I64_IN, I64S, INTP, JIT_DISABLED, U64, U64_IN, U64S

__all__ = ["AckOps", "TreeIdSource", "ack_ops", "gather_roots", "xor_per_anchor"]

_U64_MAX = 2**64 - 1

# The one signature each kernel is compiled for (``_types``, shared with the ledger's).
_U64S, _I64S = U64S, I64S
_U64_IN, _I64_IN = U64_IN, I64_IN
_intp, _u64 = INTP, U64

_ZERO = np.uint64(0)
_NONE = np.zeros(0, np.uint64)
_NONE.flags.writeable = False
_NO_OFFSETS = np.zeros(0, np.int64)
_NO_OFFSETS.flags.writeable = False

# --- 64-bit arithmetic that wraps ------------------------------------------------------------

if JIT_DISABLED:
    # Interpreted numpy scalars warn on the (intended) wrap-around: use Python ints there.
    _MASK64 = (1 << 64) - 1
    _GAMMA_INT, _C1_INT, _C2_INT = int(ID_GAMMA), int(ID_MIX_C1), int(ID_MIX_C2)
    _MULTIPLIER_INT = int(HASH_MULTIPLIER)

    def _id_at(key: np.uint64, counter: np.uint64) -> np.uint64:
        z = (int(key) + int(counter) * _GAMMA_INT) & _MASK64
        z = ((z ^ (z >> 30)) * _C1_INT) & _MASK64
        z = ((z ^ (z >> 27)) * _C2_INT) & _MASK64
        z ^= z >> 31
        return np.uint64(z) if z != 0 else ID_ZERO_SUBSTITUTE

    def _bucket(root: np.uint64, shift: int) -> np.uint64:
        return np.uint64(((int(root) * _MULTIPLIER_INT) & _MASK64) >> int(shift))

else:
    _S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)

    @njit(inline="always", cache=True)
    def _id_at(key: np.uint64, counter: np.uint64) -> np.uint64:
        z = key + counter * ID_GAMMA
        z = (z ^ (z >> _S30)) * ID_MIX_C1
        z = (z ^ (z >> _S27)) * ID_MIX_C2
        z ^= z >> _S31
        return z if z != _ZERO else ID_ZERO_SUBSTITUTE

    @njit(inline="always", cache=True)
    def _bucket(root: np.uint64, shift: int) -> np.uint64:
        return (root * HASH_MULTIPLIER) >> shift


# --- 1. tree ids ------------------------------------------------------------------------------


@njit(types.void(_U64S, _U64S), cache=True)
def _draw_ids(out: np.ndarray, state: np.ndarray) -> None:
    """``out[i] = id(counter + i)`` with ``state = [key, counter]`` (an array: no scalars
    to box per call). The caller checked that the counter does not wrap, and advances it."""
    key = state[0]
    counter = state[1]
    for i in range(np.uint64(out.shape[0])):
        out[i] = _id_at(key, counter + i)


@njit(_intp(_U64S, _I64_IN, _U64_IN, _U64S, _U64S, _U64S), cache=True)
def _children(
    state: np.ndarray,
    anchor: np.ndarray,
    roots: np.ndarray,
    ack_values: np.ndarray,
    out_roots: np.ndarray,
    out_edges: np.ndarray,
) -> int:
    """Child ``j`` of row ``anchor[j]``: its edge id ``id(counter + j)``, XORed into the
    row's ack value, and the row's root. Returns the first bad anchor, or -1 (then nothing
    of the state changed; the caller advances the counter)."""
    n = ack_values.shape[0]
    for j in range(anchor.shape[0]):
        if anchor[j] < 0 or anchor[j] >= n:
            return j
    m = anchor.shape[0]
    if m == 0:
        return -1
    # The ids first, in a loop of their own (the compiler vectorizes it: 8,192 children
    # took 39 us in one loop with the rest, 23 us in two); then a run of children of one
    # row (a flat map's) XORs into a local, written to the row once per run.
    key = state[0]
    counter = state[1]
    for j in range(np.uint64(m)):
        out_edges[j] = _id_at(key, counter + j)
    run_row = anchor[0]
    run_xor = _ZERO
    run_root = roots[run_row]
    for j in range(m):
        a = anchor[j]
        if a != run_row:
            ack_values[run_row] ^= run_xor
            run_row = a
            run_xor = _ZERO
            run_root = roots[a]
        run_xor ^= out_edges[j]
        out_roots[j] = run_root
    ack_values[run_row] ^= run_xor
    return -1


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
        """The seed the ids derive from: with ``counter``, all it takes to draw them again."""
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

    def children(
        self, anchor: np.ndarray, roots: np.ndarray, ack_values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Storm's rule for children anchored one each to rows of a batch whose rows have
        one root each (``roots``): child ``j`` of row ``anchor[j]`` gets the next id as its
        edge id, XORed into ``ack_values[anchor[j]]`` (in place), and the row's root.
        Returns the children's ``(roots, edge ids)``: ``draw``, ``xor_per_anchor`` and a
        gather of the roots in one pass.

        >>> ids = TreeIdSource(seed=3)
        >>> acks = np.zeros(2, np.uint64)
        >>> roots, edges = ids.children(np.array([1, 1]), np.array([7, 8], np.uint64), acks)
        >>> roots.tolist(), int(acks[1]) == int(edges[0] ^ edges[1]), int(acks[0])
        ([8, 8], True, 0)
        """
        anchor = _check_array("anchor", anchor, _INT64, None)
        roots = _check_array("roots", roots, _UINT64, None)
        if (
            not isinstance(ack_values, np.ndarray)
            or ack_values.dtype != _UINT64
            or not ack_values.flags.writeable
        ):
            raise TypeError("ack_values must be a writable numpy array of uint64")
        if ack_values.shape != roots.shape or not ack_values.flags.c_contiguous:
            raise ValueError(
                f"ack_values must be contiguous and parallel to roots ({roots.shape[0]} rows)"
            )
        m = anchor.shape[0]
        if self._counter + m > 2**64:
            raise ValueError(
                f"TreeIdSource(seed={self._seed}) has {2**64 - self._counter} ids left, "
                f"{m} asked; use another seed"
            )
        out_roots = np.empty(m, np.uint64)
        out_edges = np.empty(m, np.uint64)
        bad = _children(self._state, anchor, roots, ack_values, out_roots, out_edges)
        if bad >= 0:
            raise ValueError(
                f"anchor[{bad}] = {int(anchor[bad])} is not a row: anchors must be in "
                f"[0, {roots.shape[0]})"
            )
        self._counter += m
        self._state[1] = self._counter & _U64_MAX
        return out_roots, out_edges

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
def _xor_per_anchor(anchor_index: np.ndarray, edge_ids: np.ndarray, out: np.ndarray) -> int:
    """``out[anchor_index[m]] ^= edge_ids[m]``; returns the first bad row, or -1."""
    n = out.shape[0]
    for m in range(anchor_index.shape[0]):
        a = anchor_index[m]
        if a < 0 or a >= n:
            return m
        out[a] ^= edge_ids[m]
    return -1


@njit(_intp(_I64_IN, _intp), cache=True)
def _bad_offset(offsets: np.ndarray, total: int) -> int:
    """The first index where ``offsets`` is not a CSR offsets array ending at ``total``."""
    if offsets[0] != 0:
        return 0
    for i in range(1, offsets.shape[0]):
        if offsets[i] < offsets[i - 1]:
            return i
    if offsets[offsets.shape[0] - 1] != total:
        return len(offsets) - 1
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


# --- 3. the ACKs of acked rows --------------------------------------------------------------


class AckOps(NamedTuple):
    """ACK operations for ``AckerLedger.apply`` (parallel arrays; the op is ``Op.ACK``)."""

    roots: np.ndarray  # uint64
    values: np.ndarray  # uint64

    def __len__(self) -> int:
        return int(self.roots.shape[0])


@njit(_intp(_I64_IN, _I64_IN, _intp), cache=True)
def _size_of(root_offsets: np.ndarray, rows: np.ndarray, n: int) -> int:
    """How many (row, root) pairs ``rows`` has (one per row without ``root_offsets``), or
    ``-1 - j`` if ``rows[j]`` is not in ``[0, n)``."""
    csr = root_offsets.shape[0] != 0
    size = 0
    for j in range(rows.shape[0]):
        i = rows[j]
        if i < 0 or i >= n:
            return -1 - j
        size += root_offsets[i + 1] - root_offsets[i] if csr else 1
    return size


@njit(inline="always", cache=True)
def _ack_row(
    i: int,
    root_offsets: np.ndarray,
    roots: np.ndarray,
    edge_ids: np.ndarray,
    ack_values: np.ndarray,
    out_roots: np.ndarray,
    out_values: np.ndarray,
    n_out: int,
    run_root: np.uint64,
    run_value: np.uint64,
) -> tuple[int, np.uint64, np.uint64]:
    """Row ``i``'s ACKs into the output of ``_ack_ops`` / ``_ack_ops_all``: a run of one
    root folded into one, the current run's root and value kept by the caller (locals, not
    read back from the output: 8,192 one-root rows in 7 us against 25 us). Returns the
    new ``(n_out, run_root, run_value)``; the caller writes the last run's value."""
    v = ack_values[i] if ack_values.shape[0] != 0 else _ZERO
    if root_offsets.shape[0] != 0:
        lo, hi = root_offsets[i], root_offsets[i + 1]
    else:
        lo, hi = i, i + 1
    for k in range(lo, hi):
        r = roots[k]
        if n_out and run_root == r:
            run_value ^= edge_ids[k] ^ v
        else:
            if n_out:
                out_values[n_out - 1] = run_value
            run_root = r
            run_value = edge_ids[k] ^ v
            out_roots[n_out] = r
            n_out += 1
    return n_out, run_root, run_value


@njit(_intp(_I64_IN, _U64_IN, _U64_IN, _U64_IN, _I64_IN, _U64S, _U64S), cache=True)
def _ack_ops(
    root_offsets: np.ndarray,
    roots: np.ndarray,
    edge_ids: np.ndarray,
    ack_values: np.ndarray,
    rows: np.ndarray,
    out_roots: np.ndarray,
    out_values: np.ndarray,
) -> int:
    """ACK per (row, root) of ``rows`` (checked by ``_size_of``), a run of one root
    folded into one; returns how many. ``root_offsets`` empty: one root per row;
    ``ack_values`` empty: all 0."""
    n_out, run_root, run_value = 0, _ZERO, _ZERO
    for j in range(rows.shape[0]):
        n_out, run_root, run_value = _ack_row(
            rows[j], root_offsets, roots, edge_ids, ack_values, out_roots, out_values,
            n_out, run_root, run_value,
        )  # fmt: skip
    if n_out:
        out_values[n_out - 1] = run_value
    return n_out


@njit(_intp(_I64_IN, _U64_IN, _U64_IN, _U64_IN, _intp, _U64S, _U64S), cache=True)
def _ack_ops_all(
    root_offsets: np.ndarray,
    roots: np.ndarray,
    edge_ids: np.ndarray,
    ack_values: np.ndarray,
    n: int,
    out_roots: np.ndarray,
    out_values: np.ndarray,
) -> int:
    """``_ack_ops`` of every row ``0 .. n-1`` in order: no row index to read or check (a
    loop of its own: one kernel for both, switching per row, took 18-20 us for 8,192
    rows, against 7 us)."""
    n_out, run_root, run_value = 0, _ZERO, _ZERO
    for i in range(n):
        n_out, run_root, run_value = _ack_row(
            i, root_offsets, roots, edge_ids, ack_values, out_roots, out_values,
            n_out, run_root, run_value,
        )  # fmt: skip
    if n_out:
        out_values[n_out - 1] = run_value
    return n_out


def ack_ops(
    roots: np.ndarray,
    edge_ids: np.ndarray,
    ack_values: np.ndarray | None,
    rows: np.ndarray | None,
    root_offsets: np.ndarray | None = None,
) -> AckOps:
    """The ACKs of ``rows`` (int64 indexes, in that order; None: every row, in order):
    ``ACK(root, edge_id ^ ack_value)`` per (row, root), as Storm's ``ack(tuple)`` sends one
    per root of the tuple.

    ``roots`` and ``edge_ids`` (uint64, parallel) give each row's root and its edge id,
    or, with ``root_offsets``, each row's roots in CSR form (see the module docstring);
    ``ack_values`` (uint64, one per row) the XOR of the edge ids of each row's children, or
    None when no row has children. Consecutive ACKs of one root come out as one, their
    values XORed: the acker ends in the same state, with fewer operations to apply.

    >>> ack_ops(np.array([7, 7, 8], np.uint64), np.array([1, 2, 4], np.uint64),
    ...         np.array([0, 8, 0], np.uint64), np.arange(3)).values.tolist()
    [11, 4]
    """
    roots = _check_array("roots", roots, _UINT64, None)
    edge_ids = _check_parallel("edge_ids", edge_ids, _UINT64, "roots", roots)
    n = _rows_of(roots, root_offsets)
    offsets = (
        _NO_OFFSETS
        if root_offsets is None
        else _check_array("root_offsets", root_offsets, _INT64, None)
    )
    if ack_values is None:
        values = _NONE
    else:
        values = _check_array("ack_values", ack_values, _UINT64, None)
        if values.shape[0] != n:
            raise ValueError(
                f"ack_values has {values.shape[0]} elements for {n} rows; give one per row"
            )
    if rows is None:
        size = roots.shape[0]  # every (row, root) pair
        out_roots = np.empty(size, np.uint64)
        out_values = np.empty(size, np.uint64)
        k = _ack_ops_all(offsets, roots, edge_ids, values, n, out_roots, out_values)
    else:
        rows = _check_array("rows", rows, _INT64, None)
        size = _checked_size(offsets, rows, n)
        out_roots = np.empty(size, np.uint64)
        out_values = np.empty(size, np.uint64)
        k = _ack_ops(offsets, roots, edge_ids, values, rows, out_roots, out_values)
    return AckOps(out_roots[:k], out_values[:k])


# --- 4. the roots of rows ----------------------------------------------------------------------


@njit(types.void(_I64_IN, _U64_IN, _I64_IN, _I64S, _U64S), cache=True)
def _gather_roots(
    root_offsets: np.ndarray,
    roots: np.ndarray,
    rows: np.ndarray,
    out_offsets: np.ndarray,
    out_roots: np.ndarray,
) -> None:
    k = 0
    out_offsets[0] = 0
    for j in range(rows.shape[0]):
        i = rows[j]
        for m in range(root_offsets[i], root_offsets[i + 1]):
            out_roots[k] = roots[m]
            k += 1
        out_offsets[j + 1] = k


def gather_roots(
    roots: np.ndarray, rows: np.ndarray, root_offsets: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The roots of ``rows`` (int64 indexes) as ``(roots, root_offsets)``, in the module's
    representation: one root per row (``root_offsets`` None) when the input has that
    form, else CSR. What a FAIL or RESET of those rows names (``roots``), and what children
    anchored one each to those rows inherit (each child gets its anchor's roots).

    >>> gather_roots(np.array([5, 6, 7], np.uint64), np.array([2, 0, 2]))[0].tolist()
    [7, 5, 7]
    >>> r, o = gather_roots(np.array([5, 6, 7], np.uint64), np.array([1, 0]), np.array([0, 2, 3]))
    >>> r.tolist(), o.tolist()
    ([7, 5, 6], [0, 1, 3])
    """
    roots = _check_array("roots", roots, _UINT64, None)
    n = _rows_of(roots, root_offsets)
    rows = _check_array("rows", rows, _INT64, None)
    if root_offsets is None:
        _checked_size(_NO_OFFSETS, rows, n)
        return roots[rows], None
    offsets = _check_array("root_offsets", root_offsets, _INT64, None)
    size = _checked_size(offsets, rows, n)
    out_offsets = np.empty(rows.shape[0] + 1, np.int64)
    out_roots = np.empty(size, np.uint64)
    _gather_roots(offsets, roots, rows, out_offsets, out_roots)
    return out_roots, out_offsets


# --- validation -------------------------------------------------------------------------------

_UINT64 = np.dtype(np.uint64)
_INT64 = np.dtype(np.int64)


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


def _rows_of(roots: np.ndarray, root_offsets: np.ndarray | None) -> int:
    """How many rows ``roots`` describes, checking ``root_offsets`` when given."""
    if root_offsets is None:
        return int(roots.shape[0])
    offsets = _check_array("root_offsets", root_offsets, _INT64, None)
    if offsets.shape[0] == 0:
        raise ValueError("root_offsets must have at least one element (0), got none")
    bad = _bad_offset(offsets, roots.shape[0])
    if bad >= 0:
        raise ValueError(
            f"root_offsets[{bad}] = {int(offsets[bad])} breaks the CSR layout: root_offsets "
            f"must start at 0, never decrease, and end at len(roots) = {roots.shape[0]}"
        )
    return int(offsets.shape[0]) - 1


def _checked_size(root_offsets: np.ndarray, rows: np.ndarray, n: int) -> int:
    """The (row, root) pairs of ``rows``, once every row is checked to be in ``[0, n)``."""
    size = _size_of(root_offsets, rows, n)
    if size < 0:
        j = -1 - size
        raise ValueError(f"rows[{j}] = {int(rows[j])} is not a row: rows must be in [0, {n})")
    return int(size)
