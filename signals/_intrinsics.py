"""LLVM intrinsics for the numba kernels."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic


@intrinsic
def clz64(typingctx, v):
    """Leading zero bits of a uint64 (64 for 0): LLVM's ``ctlz``, one instruction."""
    if v != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.uint64(types.uint64), codegen
