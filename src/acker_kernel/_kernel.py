"""The jitted kernels: an open-addressing table of pending roots, driven in batches.

Linear probing over a power-of-two table of ``ENTRY_DTYPE`` records; the home bucket is
the top bits of ``root * HASH_MULTIPLIER``. Empty slots are marked by ``flags == 0``, so
every uint64 (0 and 2**64-1 included) is a valid root id. Deletion shifts the rest of the
probe run backwards, so no tombstones ever build up and a lookup stops at the first empty
slot.

Every function here takes and returns only numpy arrays and scalars. ``AckerLedger`` in
``_ledger.py`` is their only caller: it owns the arrays, validates input and grows or
shrinks the table between calls.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._constants import (
    FLAG_FAILED,
    FLAG_SPOUT_KNOWN,
    FLAG_USED,
    HASH_MULTIPLIER,
    MAX_LOAD_FACTOR,
    META_ACKED,
    META_COUNT,
    META_FAILED,
    META_ORPHANS,
    META_TIMED_OUT,
    OP_ACK,
    OP_FAIL,
    OP_INIT,
    OP_RESET,
    OUTCOME_ACKED,
    OUTCOME_FAILED,
    OUTCOME_TIMED_OUT,
)

_USED = np.uint8(FLAG_USED)
_FAILED = np.uint8(FLAG_FAILED)
_KNOWN = np.uint8(FLAG_SPOUT_KNOWN)


@njit(cache=True, inline="always")
def _home(root, shift):
    return np.intp((root * HASH_MULTIPLIER) >> shift)


@njit(cache=True)
def _remove(table, i, shift, mask):
    """Empty slot ``i`` and shift later members of its probe run back (no tombstones)."""
    j = i
    while True:
        j = (j + 1) & mask
        if table[j].flags == 0:
            break
        h = _home(table[j].root, shift)
        # The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
        if i <= j:
            movable = h <= i or h > j
        else:
            movable = h <= i and h > j
        if movable:
            table[i].root = table[j].root
            table[i].val = table[j].val
            table[i].deadline = table[j].deadline
            table[i].start = table[j].start
            table[i].spout_task = table[j].spout_task
            table[i].flags = table[j].flags
            i = j
    table[i].flags = 0


@njit(cache=True)
def _apply(
    table,
    meta,
    ops,
    roots,
    values,
    spout_tasks,
    first,
    now,
    timeout,
    shift,
    out_root,
    out_task,
    out_outcome,
    out_latency,
    n_out,
):
    """Apply ``ops[first:]`` in order; append completions to the ``out_*`` arrays.

    Returns ``(next_op, n_out)``. ``next_op < len(ops)`` means the table is full: the caller
    grows it and calls again from ``next_op``. Nothing of op ``next_op`` was applied.
    """
    mask = table.shape[0] - 1
    limit = np.int64(table.shape[0] * MAX_LOAD_FACTOR)
    ushift = np.uint64(shift)
    for k in range(first, ops.shape[0]):
        op = ops[k]
        root = roots[k]
        i = _home(root, ushift)
        found = False
        while table[i].flags != 0:
            if table[i].root == root:
                found = True
                break
            i = (i + 1) & mask
        if op == OP_RESET:
            # Storm: a reset for an unknown root creates nothing; it could only time out.
            if found:
                table[i].deadline = now + timeout
            continue
        if not found:
            if meta[META_COUNT] >= limit:
                return k, n_out
            table[i].root = root
            table[i].val = np.uint64(0)
            table[i].deadline = now + timeout
            table[i].start = now
            table[i].spout_task = -1
            table[i].flags = _USED
            meta[META_COUNT] += 1
        if op == OP_INIT:
            table[i].val ^= values[k]
            table[i].spout_task = spout_tasks[k]
            table[i].flags |= _KNOWN
        elif op == OP_ACK:
            table[i].val ^= values[k]
        elif op == OP_FAIL:
            table[i].flags |= _FAILED
            table[i].deadline = now + timeout
        flags = table[i].flags
        if flags & _KNOWN:
            # A failure wins over a zero value: a tuple both acked and failed is replayed.
            if flags & _FAILED:
                outcome = OUTCOME_FAILED
                meta[META_FAILED] += 1
            elif table[i].val == 0:
                outcome = OUTCOME_ACKED
                meta[META_ACKED] += 1
            else:
                continue
            out_root[n_out] = root
            out_task[n_out] = table[i].spout_task
            out_outcome[n_out] = outcome
            out_latency[n_out] = now - table[i].start
            n_out += 1
            _remove(table, i, ushift, mask)
            meta[META_COUNT] -= 1
    return ops.shape[0], n_out


@njit(cache=True)
def _expire(table, meta, now, shift, out_root, out_task, out_outcome, out_latency):
    """Remove every entry whose deadline is ``<= now``; report those whose spout is known.

    Entries whose spout task never became known are orphans (acks for a root that already
    completed, or trees whose INIT was lost): they leave quietly and are only counted.
    """
    mask = table.shape[0] - 1
    ushift = np.uint64(shift)
    n_out = 0
    i = 0
    while i < table.shape[0]:
        if table[i].flags != 0 and table[i].deadline <= now:
            if table[i].flags & _KNOWN:
                out_root[n_out] = table[i].root
                out_task[n_out] = table[i].spout_task
                out_outcome[n_out] = OUTCOME_TIMED_OUT
                out_latency[n_out] = now - table[i].start
                n_out += 1
                meta[META_TIMED_OUT] += 1
            else:
                meta[META_ORPHANS] += 1
            _remove(table, i, ushift, mask)
            meta[META_COUNT] -= 1
            continue  # the backward shift may have moved an unvisited entry into slot i
        i += 1
    return n_out


@njit(cache=True)
def _due(table, now, out_root):
    """Roots with a known spout whose deadline is ``<= now``, without removing them."""
    n = 0
    for i in range(table.shape[0]):
        if table[i].flags & _KNOWN and table[i].deadline <= now:
            out_root[n] = table[i].root
            n += 1
    return n


@njit(cache=True)
def _rehash(old, new, shift):
    """Insert every entry of ``old`` into the empty table ``new``."""
    mask = new.shape[0] - 1
    ushift = np.uint64(shift)
    for j in range(old.shape[0]):
        if old[j].flags != 0:
            i = _home(old[j].root, ushift)
            while new[i].flags != 0:
                i = (i + 1) & mask
            new[i] = old[j]
