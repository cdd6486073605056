"""The Numba array types the kernels are compiled for: one signature per kernel, outputs
writable, inputs typed read-only (so read-only arrays pass too; writable ones convert)."""

from __future__ import annotations

from numba import types

__all__ = [
    "BYTES",
    "BYTES_IN",
    "I32S",
    "I32_IN",
    "I64S",
    "I64_IN",
    "INTP",
    "U64",
    "U64S",
    "U64_IN",
]

U64S = types.Array(types.uint64, 1, "C")
I64S = types.Array(types.int64, 1, "C")
I32S = types.Array(types.int32, 1, "C")
BYTES = types.Array(types.uint8, 1, "C")
U64_IN = types.Array(types.uint64, 1, "C", readonly=True)
I64_IN = types.Array(types.int64, 1, "C", readonly=True)
I32_IN = types.Array(types.int32, 1, "C", readonly=True)
BYTES_IN = types.Array(types.uint8, 1, "C", readonly=True)
INTP, U64 = types.intp, types.uint64
