"""LLVM intrinsics for the numba kernels."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic


def _bit_count(op: str):
    """An intrinsic of a uint64 to a uint64 through LLVM's ``op`` (one instruction)."""
    @intrinsic
    def count(typingctx, v):
        if v != types.uint64:
            return None

        def codegen(context, builder, signature, args):
            if op == "ctpop":
                return builder.ctpop(args[0])
            return getattr(builder, op)(args[0], ir.Constant(ir.IntType(1), 0))
        return types.uint64(types.uint64), codegen
    return count


clz64 = _bit_count("ctlz")  # leading zero bits (64 for 0)
ctz64 = _bit_count("cttz")  # trailing zero bits (64 for 0)
popcount64 = _bit_count("ctpop")  # set bits


# Fixed-length float64 vector loops for the adaptive cascade (signals.predict): numba's
# loops over 16 or 32 taps carry a runtime alias check, a remainder loop and, with a
# constant length, are unrolled into scalar code; these emit the <4 x double> loads,
# multiplies and adds directly. Indices are not bounds-checked: the callers keep them in
# range.
_I32, _I64 = ir.IntType(32), ir.IntType(64)
_V4 = ir.VectorType(ir.DoubleType(), 4)


def _is_f64_array(a) -> bool:
    """A contiguous 1-D float64 array (the pointer arithmetic below assumes unit stride)."""
    return (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.float64
            and a.layout == "C")


def _quad(context, builder, aryty, ary, idx, k):
    """A ``<4 x double>*`` at element ``idx + 4 k`` of a float64 array."""
    data = context.make_array(aryty)(context, builder, ary).data
    return builder.bitcast(builder.gep(data, [builder.add(idx, ir.Constant(_I64, 4 * k))]),
                           _V4.as_pointer())


def _splat(builder, x):
    v = builder.insert_element(ir.Constant(_V4, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(_V4, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, 4), [0, 0, 0, 0]))


def _dot(m: int):
    @intrinsic
    def dot(typingctx, w, h, hi):
        """``sum(w[q] * h[hi + q] for q < m)`` (float64 arrays, an integer offset), summed
        in a fixed tree (exact where every partial sum is an integer below 2**53)."""
        if not (_is_f64_array(w) and _is_f64_array(h) and isinstance(hi, types.Integer)):
            return None

        def codegen(context, builder, sig, args):
            zero = ir.Constant(_I64, 0)
            hi64 = context.cast(builder, args[2], sig.args[2], types.int64)
            terms = []
            for k in range(m // 4):
                a = builder.load(_quad(context, builder, sig.args[0], args[0], zero, k), align=8)
                b = builder.load(_quad(context, builder, sig.args[1], args[1], hi64, k), align=8)
                terms.append(builder.fmul(a, b))
            while len(terms) > 1:
                terms = [builder.fadd(terms[j], terms[j + 1]) for j in range(0, len(terms), 2)]
            lane = [builder.extract_element(terms[0], ir.Constant(_I32, j)) for j in range(4)]
            return builder.fadd(builder.fadd(lane[0], lane[1]), builder.fadd(lane[2], lane[3]))
        return types.float64(w, h, hi), codegen
    return dot


def _sign_step(m: int):
    @intrinsic
    def step(typingctx, w, s, si, mu, lim):
        """``w[q] = min(max(w[q] + mu * s[si + q], -lim), lim)`` for ``q < m`` (float64)."""
        if not (_is_f64_array(w) and _is_f64_array(s) and isinstance(si, types.Integer)
                and isinstance(mu, types.Float) and isinstance(lim, types.Float)):
            return None

        def codegen(context, builder, sig, args):
            si64 = context.cast(builder, args[2], sig.args[2], types.int64)
            mu_v = _splat(builder, context.cast(builder, args[3], sig.args[3], types.float64))
            hi = _splat(builder, context.cast(builder, args[4], sig.args[4], types.float64))
            lo = builder.fneg(hi)
            zero = ir.Constant(_I64, 0)
            for k in range(m // 4):
                wp = _quad(context, builder, sig.args[0], args[0], zero, k)
                v = builder.load(wp, align=8)
                sv = builder.load(_quad(context, builder, sig.args[1], args[1], si64, k), align=8)
                v = builder.fadd(v, builder.fmul(mu_v, sv))
                v = builder.select(builder.fcmp_ordered(">", v, hi), hi, v)
                v = builder.select(builder.fcmp_ordered("<", v, lo), lo, v)
                builder.store(v, wp, align=8)
            return context.get_dummy_value()
        return types.void(w, s, si, mu, lim), codegen
    return step


dot16, dot32 = _dot(16), _dot(32)
step16, step32 = _sign_step(16), _sign_step(32)
