"""The Numba types the kernels are compiled for: one signature per kernel, outputs
writable, inputs typed read-only (so read-only arrays pass too; writable ones convert).

Numba ships no type hints, so this module is also where its untyped names are given types
once, for mypy, instead of an ignore at every use.
"""

from __future__ import annotations

from typing import Any, cast

from numba import config, types

__all__ = [
    "BYTES",
    "BYTES_IN",
    "I32S",
    "I32_IN",
    "I64S",
    "I64_IN",
    "INTP",
    "INTP_PAIR",
    "JIT_DISABLED",
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
#: The return type of a kernel that hands back two indexes (``_apply``'s next op and count).
INTP_PAIR: types.UniTuple = cast(Any, types.UniTuple)(INTP, 2)
#: ``NUMBA_DISABLE_JIT``, read once at import as Numba does: the kernels then run as plain
#: Python, and the few that need Python-int arithmetic to wrap silently pick that variant.
#: (``numba.config`` fills its attributes in at run time, so mypy cannot see them.)
JIT_DISABLED: bool = cast(Any, config).DISABLE_JIT
