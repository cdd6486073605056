"""Slow, obviously-correct models of the batch kernels (``acker_kernel._batch``).

Python ints and lists, one row at a time, each rule of Storm's XOR protocol
(``engine._columnar.xor`` states them) written out as plainly as possible.
"""

from __future__ import annotations

from collections.abc import Sequence

from acker_kernel._constants import ID_GAMMA, ID_MIX_C1, ID_MIX_C2, ID_ZERO_SUBSTITUTE

M64 = 2**64 - 1


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


# --- 3. ack ops ------------------------------------------------------------------------------


def ack_ops(
    row_roots: Sequence[Sequence[tuple[int, int]]], ack_values: Sequence[int], rows: Sequence[int]
) -> list[tuple[int, int]]:
    """``row_roots[i]``: row i's (root, id for that root) pairs. Storm's ``ack(t)`` for each
    row of ``rows`` in order, one (root, value) message per root; then every run of messages
    for one root merged into one, its values XORed."""
    messages = []
    for i in rows:
        for root, edge in row_roots[i]:
            messages.append((root, edge ^ ack_values[i]))
    merged: list[tuple[int, int]] = []
    for root, value in messages:
        if merged and merged[-1][0] == root:
            merged[-1] = (root, merged[-1][1] ^ value)
        else:
            merged.append((root, value))
    return merged


# --- 4. the roots of rows --------------------------------------------------------------------


def gather_roots(row_roots: Sequence[Sequence[int]], rows: Sequence[int]) -> list[list[int]]:
    """Each of ``rows``' roots, row by row."""
    return [list(row_roots[i]) for i in rows]
