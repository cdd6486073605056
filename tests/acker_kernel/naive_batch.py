"""Slow, obviously-correct models of the batch kernels (``acker_kernel._batch``).

Python ints and lists, one row at a time, each rule of Storm's XOR protocol
(``engine._xor`` states them) written out as plainly as possible.
"""

from __future__ import annotations

from collections.abc import Sequence

from acker_kernel import Op
from acker_kernel._constants import ID_GAMMA, ID_MIX_C1, ID_MIX_C2, ID_ZERO_SUBSTITUTE

M64 = 2**64 - 1

#: One acker op with the time it was made: (op, root, value, spout task, time).
TimedMessage = tuple[int, int, int, int, int]
#: One tree completed inside a batch: (root, spout task, start time).
Acked = tuple[int, int, int]


# --- 1. tree ids ---------------------------------------------------------------------------


def splitmix(z: int) -> int:
    """SplitMix64's finalizer, a bijection of 64-bit integers."""
    z = ((z ^ (z >> 30)) * int(ID_MIX_C1)) & M64
    z = ((z ^ (z >> 27)) * int(ID_MIX_C2)) & M64
    return z ^ (z >> 31)


def key_for(seed: int) -> int:
    return splitmix((seed + int(ID_GAMMA)) & M64)


def tree_ids(seed: int, counter: int, n: int) -> list[int]:
    """Ids ``counter`` .. ``counter + n - 1`` of ``TreeIdSource(seed)``."""
    key = key_for(seed)
    out = []
    for c in range(counter, counter + n):
        z = splitmix((key + c * int(ID_GAMMA)) & M64)
        out.append(z if z != 0 else int(ID_ZERO_SUBSTITUTE))
    return out


def zero_counter(seed: int) -> int:
    """The one counter whose id would be 0 (``splitmix(0) == 0``): key + c * gamma = 0."""
    return (-key_for(seed) * pow(int(ID_GAMMA), -1, 2**64)) & M64


# --- 2. ack values -----------------------------------------------------------------------------


def xor_per_anchor(anchor_index: Sequence[int], edge_ids: Sequence[int], n: int) -> list[int]:
    ack = [0] * n
    for a, e in zip(anchor_index, edge_ids, strict=True):
        ack[a] ^= e
    return ack


def xor_per_anchors(
    anchors: Sequence[Sequence[int]], edge_ids: Sequence[Sequence[int]], n: int
) -> list[int]:
    """``anchors[m]``: output row m's anchor rows; ``edge_ids[m]``: one id per anchor."""
    ack = [0] * n
    for rows, ids in zip(anchors, edge_ids, strict=True):
        for a, e in zip(rows, ids, strict=True):
            ack[a] ^= e
    return ack


# --- 3. ack ops ------------------------------------------------------------------------------


def ack_ops(
    row_roots: Sequence[Sequence[tuple[int, int]]],
    ack_values: Sequence[int],
    acked: Sequence[bool],
) -> list[tuple[int, int, int]]:
    """``row_roots[i]``: row i's (root, id for that root) pairs. Storm's ``ack(t)`` and
    ``fail(t)``: one message per root, (op, root, value)."""
    out = []
    for pairs, ack_val, ok in zip(row_roots, ack_values, acked, strict=True):
        for root, edge in pairs:
            if ok:
                out.append((int(Op.ACK), root, edge ^ ack_val))
            else:
                out.append((int(Op.FAIL), root, 0))
    return out


# --- 4. folding ------------------------------------------------------------------------------


def fold(messages: Sequence[TimedMessage]) -> tuple[list[TimedMessage], list[Acked]]:
    """``fold_ops`` spelled out: returns (ops for the ledger, trees acked in the batch)."""
    by_root: dict[int, list[int]] = {}
    for k, message in enumerate(messages):
        by_root.setdefault(message[1], []).append(k)
    passed: set[int] = set()
    folded: dict[int, list[TimedMessage]] = {}
    acked: list[Acked] = []
    for root, ks in by_root.items():
        mine = [messages[k] for k in ks]
        value_ops = [m for m in mine if m[0] in (Op.INIT, Op.ACK)]
        inits = [m for m in mine if m[0] == Op.INIT]
        resets = [m for m in mine if m[0] == Op.RESET]
        # Would the ledger, starting from no entry, complete this tree before its last op?
        value, known, early_zero = 0, False, False
        for j, m in enumerate(value_ops):
            value ^= m[2]
            known = known or m[0] == Op.INIT
            if known and value == 0 and j < len(value_ops) - 1:
                early_zero = True
        if any(m[0] == Op.FAIL for m in mine) or len(inits) > 1 or early_zero:
            passed.add(root)
            continue
        if inits and value == 0:
            acked.append((root, inits[0][3], min(m[4] for m in value_ops)))
            continue
        out: list[TimedMessage] = []
        if value_ops:
            cut = value_ops.index(inits[0]) + 1 if inits else len(value_ops)
            head, tail = value_ops[:cut], value_ops[cut:]
            xor = 0
            for m in head:
                xor ^= m[2]
            op = Op.INIT if inits else Op.ACK
            task = inits[0][3] if inits else 0
            out.append((int(op), root, xor, task, min(m[4] for m in head)))
            if tail:
                xor = 0
                for m in tail:
                    xor ^= m[2]
                out.append((int(Op.ACK), root, xor, 0, min(m[4] for m in tail)))
        if resets:
            out.append((int(Op.RESET), root, 0, 0, max(m[4] for m in resets)))
        folded[root] = out
    ops: list[TimedMessage] = []
    for k, message in enumerate(messages):
        root = message[1]
        if root in passed:
            ops.append(message)
        elif root in folded and by_root[root][0] == k:
            ops.extend(folded[root])
    return ops, acked
