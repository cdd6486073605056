"""The jitted kernels: an open-addressing table of pending roots, driven in batches.

Linear probing over a power-of-two table of ``ENTRY_DTYPE`` records; the home bucket is
the top bits of ``root * HASH_MULTIPLIER``. Empty slots are marked by ``flags == 0``, so
every uint64 (0 and 2**64-1 included) is a valid root id. Deletion shifts the rest of the
probe run backwards, so no tombstones ever build up and a lookup stops at the first empty
slot.

Every function here takes and returns only numpy arrays and scalars, and is compiled
eagerly for exactly one signature into Numba's on-disk cache, so only the first process
pays the compile. ``AckerLedger`` in ``_ledger.py`` is their only caller: it owns the
arrays, validates input and grows or shrinks the table between calls.

Fields are read as ``table[i]["name"]`` rather than ``table[i].name``: Numba compiles both
to the same load, and the item form also works on numpy's own records, so the kernels run
unchanged (and measurably correct) under ``NUMBA_DISABLE_JIT=1``.

Slot and op indices in the hot loops are uint64: Numba then drops its negative-index
wrap-around code from every array access (about 10 % faster on the bench). Numba turns a
mix of uint64 and int64 into float64, hence the ``np.uint64`` around every constant there.
"""

from __future__ import annotations

import numpy as np
from numba import from_dtype, njit, types

from ._constants import (
    CACHE_LINE_BYTES,
    ENTRY_BYTES,
    ENTRY_DTYPE,
    FLAG_FAILED,
    FLAG_SPOUT_KNOWN,
    FLAG_USED,
    HASH_MULTIPLIER,
    MAX_LOAD_FACTOR,
    META_ACKED,
    META_COUNT,
    META_FAILED,
    META_MIN_DEADLINE,
    META_ORPHANS,
    META_TIMED_OUT,
    N_OPS,
    OP_ACK,
    OP_FAIL,
    OP_INIT,
    OP_RESET,
    OUTCOME_ACKED,
    OUTCOME_FAILED,
    OUTCOME_TIMED_OUT,
    PREFETCH_DISTANCE,
    PREFETCH_LINES,
)
from ._prefetch import prefetch
from ._types import (
    BYTES,
    BYTES_IN,
    I32_IN,
    I32S,
    I64_IN,
    I64S,
    INTP_PAIR,
    JIT_DISABLED,
    U64_IN,
    U64S,
)

_USED = np.uint8(FLAG_USED)
_FAILED = np.uint8(FLAG_FAILED)
_KNOWN = np.uint8(FLAG_SPOUT_KNOWN)
_NO_DEADLINE = np.iinfo(np.int64).max

# The one signature each kernel is compiled for.
_TABLE = types.Array(from_dtype(ENTRY_DTYPE), 1, "C")
_I64S, _U64S, _I32S, _U8S = I64S, U64S, I32S, BYTES  # shared with _batch (``_types``)
_OPS_IN, _U64_IN, _I32_IN, _I64_IN = BYTES_IN, U64_IN, I32_IN, I64_IN
_OUT = (_U64S, _I32S, _U8S, _I64S)  # root, spout task, outcome, start (emit) time
_intp, _i64, _u64 = types.intp, types.int64, types.uint64

if JIT_DISABLED:
    # Interpreted numpy scalars warn on the (intended) wrap-around of the product.
    _MULTIPLIER = int(HASH_MULTIPLIER)
    _MASK64 = (1 << 64) - 1

    def _home(root: np.uint64, shift: int) -> np.uint64:
        return np.uint64(((int(root) * _MULTIPLIER) & _MASK64) >> int(shift))

else:

    @njit(inline="always", cache=True)
    def _home(root: np.uint64, shift: int) -> np.uint64:
        return (root * HASH_MULTIPLIER) >> shift


@njit(inline="always", cache=True)
def _remove(table: np.ndarray, i: np.uint64, shift: int, mask: np.uint64) -> None:
    """Empty slot ``i`` and shift later members of its probe run back (no tombstones).

    ``i`` and ``mask`` are uint64. Inlined into its callers, which saves a call per
    completion in ``_apply``.
    """
    j = i
    while True:
        j = (j + np.uint64(1)) & mask
        if table[j]["flags"] == 0:
            break
        h = _home(table[j]["root"], shift)
        # The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
        movable = (h <= i or h > j) if i <= j else (h <= i and h > j)
        if movable:
            table[i] = table[j]
            i = j
    table[i]["flags"] = 0


@njit(
    INTP_PAIR(
        _TABLE,
        _I64S,
        _OPS_IN,
        _U64_IN,
        _U64_IN,
        _I32_IN,
        _I64_IN,
        _intp,
        _i64,
        _i64,
        _u64,
        *_OUT,
        _intp,
    ),
    cache=True,
)
def _apply(
    table: np.ndarray,
    meta: np.ndarray,
    ops: np.ndarray,
    roots: np.ndarray,
    values: np.ndarray,
    spout_tasks: np.ndarray,
    starts: np.ndarray,
    first: int | np.intp,
    now: int,
    timeout: int,
    shift: int,
    out_root: np.ndarray,
    out_task: np.ndarray,
    out_outcome: np.ndarray,
    out_start: np.ndarray,
    n_out: int,
) -> tuple[int | np.intp, int]:
    """Apply ``ops[first:]`` in order; append completions to the ``out_*`` arrays.

    Returns ``(next_op, n_out)``. ``next_op < len(ops)`` means the table is full: the caller
    grows it and calls again from ``next_op``. Nothing of op ``next_op`` was applied.
    ``next_op < 0`` means op ``-1 - next_op`` has an unknown code, and nothing was applied.
    ``starts`` is empty, or parallel to ``ops``: then an INIT sets its entry's start time
    (the spout's emit time, which its completion reports) to ``starts[k]``.
    """
    n = ops.shape[0]
    if first == 0:
        # N_OPS is a power of two, so an op code is valid iff the OR of them all is below it;
        # a loop without an early exit, which LLVM vectorizes.
        seen = np.uint8(0)
        for k in range(n):
            seen |= ops[k]
        if seen >= N_OPS:
            for k in range(n):
                if ops[k] >= N_OPS:
                    return -1 - k, n_out
    mask = np.uint64(table.shape[0] - 1)
    one = np.uint64(1)
    limit = np.intp(table.shape[0] * MAX_LOAD_FACTOR)
    count = meta[META_COUNT]
    deadline = now + timeout  # the only deadline this call can set
    if deadline < meta[META_MIN_DEADLINE]:
        meta[META_MIN_DEADLINE] = deadline
    n_u = np.uint64(n)
    has_starts = starts.shape[0] != 0
    distance = np.uint64(PREFETCH_DISTANCE)
    for k in range(np.uint64(first), n_u):
        # Start fetching the slots a later op will probe: the table is far larger than the
        # caches, so without this nearly every op waits for memory. (Lines past the end of
        # the table are never needed, and a prefetch there is harmless.)
        ahead = k + distance
        if ahead < n_u:
            offset = _home(roots[ahead], shift) * np.uint64(ENTRY_BYTES)
            for line in range(PREFETCH_LINES):
                prefetch(table, offset + np.uint64(line * CACHE_LINE_BYTES))
        op = ops[k]
        root = roots[k]
        i = _home(root, shift)
        found = False
        while table[i]["flags"] != 0:
            if table[i]["root"] == root:
                found = True
                break
            i = (i + one) & mask
        entry = table[i]
        if op == OP_RESET:
            # A reset for an unknown root creates nothing: it could only time out.
            if found:
                entry["deadline"] = deadline
            continue
        if not found:
            if count >= limit:
                meta[META_COUNT] = count
                return np.intp(k), n_out
            # Storm's AckObject: created by whichever message arrives first.
            entry["root"] = root
            entry["val"] = 0
            entry["deadline"] = deadline
            entry["start"] = now
            entry["spout_task"] = -1
            entry["flags"] = _USED
            count += 1
        if op == OP_INIT:
            entry["val"] ^= values[k]
            entry["spout_task"] = spout_tasks[k]
            entry["flags"] |= _KNOWN
            if has_starts:
                entry["start"] = starts[k]
        elif op == OP_ACK:
            entry["val"] ^= values[k]
        elif op == OP_FAIL:
            entry["flags"] |= _FAILED
            entry["deadline"] = deadline
        flags = entry["flags"]
        if flags & _KNOWN:
            # A failure wins over a zero value: a tuple both acked and failed is replayed.
            if flags & _FAILED:
                outcome = OUTCOME_FAILED
                meta[META_FAILED] += 1
            elif entry["val"] == 0:
                outcome = OUTCOME_ACKED
                meta[META_ACKED] += 1
            else:
                continue
            out_root[n_out] = root
            out_task[n_out] = entry["spout_task"]
            out_outcome[n_out] = outcome
            out_start[n_out] = entry["start"]
            n_out += 1
            _remove(table, i, shift, mask)
            count -= 1
    meta[META_COUNT] = count
    return n, n_out


@njit(_intp(_TABLE, _I64S, _i64, _u64, *_OUT), cache=True)
def _expire(
    table: np.ndarray,
    meta: np.ndarray,
    now: int,
    shift: int,
    out_root: np.ndarray,
    out_task: np.ndarray,
    out_outcome: np.ndarray,
    out_start: np.ndarray,
) -> int:
    """Remove every entry whose deadline is ``<= now``; report those whose spout is known.

    Entries whose spout task never became known are orphans (acks for a root that already
    completed, or trees whose INIT was lost): they leave quietly and are only counted.
    Also records the earliest deadline left, so the next call can skip the sweep.
    """
    mask = table.shape[0] - 1
    count = meta[META_COUNT]
    earliest = _NO_DEADLINE
    n_out = 0
    i = 0
    while i < table.shape[0]:
        entry = table[i]
        if entry["flags"] != 0:
            if entry["deadline"] <= now:
                if entry["flags"] & _KNOWN:
                    out_root[n_out] = entry["root"]
                    out_task[n_out] = entry["spout_task"]
                    out_outcome[n_out] = OUTCOME_TIMED_OUT
                    out_start[n_out] = entry["start"]
                    n_out += 1
                    meta[META_TIMED_OUT] += 1
                else:
                    meta[META_ORPHANS] += 1
                _remove(table, np.uint64(i), shift, np.uint64(mask))
                count -= 1
                # The backward shift may have moved an unvisited entry into slot i. It never
                # moves one into a slot already passed, so every survivor is seen.
                continue
            if entry["deadline"] < earliest:
                earliest = entry["deadline"]
        i += 1
    meta[META_COUNT] = count
    meta[META_MIN_DEADLINE] = earliest
    return n_out


@njit(_intp(_TABLE, _U64_IN, _i64, _i64, _i64, _u64), cache=True)
def _reset_younger(
    table: np.ndarray, roots: np.ndarray, now: int, timeout: int, min_start: int, shift: int
) -> int:
    """Give each root of ``roots`` whose entry started at or after ``min_start`` the
    deadline ``now + timeout`` (a RESET); return how many were reset (repeats counted).

    The caller lowers the sweep's lower bound (``META_MIN_DEADLINE``) to the new deadline
    if any root was reset: on a clock that stepped back it may be the earliest.
    """
    mask = np.uint64(table.shape[0] - 1)
    one = np.uint64(1)
    deadline = now + timeout
    n = 0
    for k in range(roots.shape[0]):
        root = roots[k]
        i = _home(root, shift)
        while table[i]["flags"] != 0:
            if table[i]["root"] == root:
                if table[i]["start"] >= min_start:
                    table[i]["deadline"] = deadline
                    n += 1
                break
            i = (i + one) & mask
    return n


@njit(_intp(_TABLE, _i64, _U64S), cache=True)
def _due(table: np.ndarray, now: int, out_root: np.ndarray) -> int:
    """Roots with a known spout whose deadline is ``<= now``, without removing them."""
    n = 0
    for i in range(table.shape[0]):
        if table[i]["flags"] & _KNOWN and table[i]["deadline"] <= now:
            out_root[n] = table[i]["root"]
            n += 1
    return n


@njit(types.void(_TABLE, _TABLE, _u64), cache=True)
def _rehash(old: np.ndarray, new: np.ndarray, shift: int) -> None:
    """Insert every entry of ``old`` into the empty table ``new``."""
    mask = np.uint64(new.shape[0] - 1)
    for j in range(old.shape[0]):
        if old[j]["flags"] != 0:
            i = _home(old[j]["root"], shift)
            while new[i]["flags"] != 0:
                i = (i + np.uint64(1)) & mask
            new[i] = old[j]
