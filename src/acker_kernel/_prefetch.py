"""``prefetch(array, byte_offset)``: a software prefetch hint usable inside jitted kernels.

Numba has no prefetch of its own, so this is a tiny intrinsic that emits LLVM's
``llvm.prefetch`` (``prefetchw`` on x86-64) for the cache line holding the byte
``byte_offset`` of ``array``'s data. A prefetch never faults, so an offset past the end is
harmless. Under ``NUMBA_DISABLE_JIT=1`` it is a plain no-op function, so the kernels still
run as ordinary Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._types import JIT_DISABLED

__all__ = ["prefetch"]

if JIT_DISABLED:

    def prefetch(array: object, byte_offset: int | np.integer[Any]) -> None:
        """No-op stand-in: there is no cache to warm in interpreted mode."""

else:
    from llvmlite import ir  # type: ignore[import-untyped]
    from numba import types
    from numba.extending import intrinsic

    _I8P = ir.IntType(8).as_pointer()
    _I32 = ir.IntType(32)
    _PREFETCH_FNTY = ir.FunctionType(ir.VoidType(), [_I8P, _I32, _I32, _I32])
    _FOR_WRITE = 1  # the slot is about to be updated: fetch the line in exclusive state
    _KEEP_IN_ALL_LEVELS = 3
    _DATA_CACHE = 1

    @intrinsic
    def prefetch(typingctx: Any, array: Any, byte_offset: Any) -> Any:
        if not isinstance(array, types.Array) or not isinstance(byte_offset, types.Integer):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            array_value = context.make_array(signature.args[0])(context, builder, args[0])
            data = builder.bitcast(array_value.data, _I8P)
            function = builder.module.declare_intrinsic("llvm.prefetch", [_I8P], _PREFETCH_FNTY)
            builder.call(
                function,
                [
                    builder.gep(data, [args[1]]),
                    _I32(_FOR_WRITE),
                    _I32(_KEEP_IN_ALL_LEVELS),
                    _I32(_DATA_CACHE),
                ],
            )
            return context.get_dummy_value()

        return types.void(array, byte_offset), codegen
