"""LLVM intrinsics for the numba kernels."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic, overload


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


# The sign-data LMS filter of the adaptive cascade's variant 4 (signals.predict.SIGN_DATA),
# with its state (weights, the saturated history and its adapt values) in int16 vectors of
# ``m`` lanes: lane ``q`` holds the value of age ``m - q``. The newest history value also
# travels as a scalar, so that the output of one sample reaches the next one's prediction
# through a scalar multiply-add only. Two forms of one sample's arithmetic (_sd_sample):
# a whole loop in a direction, whose state stays in vector registers (numba keeps arrays in
# memory: a loop written over them runs about twice as long), and one decoding step with the
# state in an int16 array, for a decoder that interleaves it with its entropy decoder (both
# dependency chains then overlap: on speech, the two together take 1.2x the time of the
# entropy decoder alone, against 1.9x one after the other).
_I16 = ir.IntType(16)
_DECAY_AGES = (2, 3, 9)  # an adapt value halves when it reaches one of these ages


def _is_i64_array(a) -> bool:
    return (isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.int64
            and a.layout == "C")


def _i64(v: int) -> ir.Constant:
    return ir.Constant(_I64, v)


def _sd_sample(builder, m: int, shift: int, w, h, d, avg, newest, v, inverse: bool):
    """One sample of the sign-data LMS: from the state (``w``, ``h``, ``d``: ``<m x i16>``;
    ``avg``, ``newest``: i64) and the sample's input ``v`` (i64: the signal, forward, or
    the residual, inverse), ``(out, xs, w', h', d', avg')``: ``out`` the output, ``xs`` the
    signal's value saturated to int16 (the next ``newest``)."""
    v16, v32 = ir.VectorType(_I16, m), ir.VectorType(_I32, m)
    zero16 = ir.Constant(v16, None)
    lane0 = ir.Constant(_I32, 0)
    mod = builder.module
    reduce_add = cgutils.get_or_insert_function(mod, ir.FunctionType(_I32, [v32]),
                                                f"llvm.vector.reduce.add.v{m}i32")
    smax = cgutils.get_or_insert_function(mod, ir.FunctionType(_I64, [_I64, _I64]), "llvm.smax.i64")
    smin = cgutils.get_or_insert_function(mod, ir.FunctionType(_I64, [_I64, _I64]), "llvm.smin.i64")
    older = ir.Constant(v16, [ir.Constant(_I16, 0 if q == m - 1 else -1) for q in range(m)])
    # the prediction: the older lanes' products (int32, wrapping) plus the newest term
    prod = builder.mul(builder.sext(w, v32), builder.sext(builder.and_(h, older), v32))
    newest_w = builder.sext(builder.extract_element(w, ir.Constant(_I32, m - 1)), _I32)
    acc = builder.add(builder.call(reduce_add, [prod]),
                      builder.mul(newest_w, builder.trunc(newest, _I32)))
    pred = builder.ashr(builder.sext(acc, _I64), _i64(shift))
    if inverse:
        e, x = v, builder.add(v, pred)
        out = x
    else:
        e, x = builder.sub(v, pred), v
        out = e
    # the weights move by the adapt values, in the direction of the residual's sign
    sg = builder.sub(builder.zext(builder.icmp_signed(">", e, _i64(0)), _I16),
                     builder.zext(builder.icmp_signed("<", e, _i64(0)), _I16))
    sgv = builder.shuffle_vector(builder.insert_element(zero16, sg, lane0), zero16,
                                 ir.Constant(v32, [lane0] * m))
    nw = builder.add(w, builder.mul(d, sgv))
    # the sample, saturated to int16, and its adapt value (without a branch: the magnitude
    # 8, 16 or 32 from its size against the running average, its sign)
    xs = builder.call(smin, [builder.call(smax, [x, _i64(-32768)]), _i64(32767)])
    sx = builder.ashr(xs, _i64(63))
    ax = builder.sub(builder.xor(xs, sx), sx)
    big = builder.zext(builder.icmp_signed(">", ax, builder.mul(avg, _i64(3))), _I64)
    mid = builder.zext(builder.icmp_signed(">", builder.mul(ax, _i64(3)),
                                           builder.mul(avg, _i64(4))), _I64)
    nz = builder.zext(builder.icmp_signed(">", ax, _i64(0)), _I64)
    mag = builder.shl(builder.add(builder.add(nz, mid), builder.shl(big, _i64(1))), _i64(3))
    adapt = builder.trunc(builder.sub(builder.xor(mag, sx), sx), _I16)
    navg = builder.add(avg, builder.ashr(builder.sub(ax, avg), _i64(4)))
    # both shifted in as the newest lane; the adapt values that reach a decay age halve
    shift_in = ir.Constant(v32, [ir.Constant(_I32, q + 1) for q in range(m)])
    decay = ir.Constant(v16, [ir.Constant(_I16, int(m - q in _DECAY_AGES)) for q in range(m)])
    nh = builder.shuffle_vector(h, builder.insert_element(zero16, builder.trunc(xs, _I16), lane0),
                                shift_in)
    nd = builder.ashr(builder.shuffle_vector(d, builder.insert_element(zero16, adapt, lane0),
                                             shift_in), decay)
    return out, xs, nw, nh, nd, navg


def _sign_data_loop(m: int, shift: int, inverse: bool):
    v16 = ir.VectorType(_I16, m)

    @intrinsic
    def run(typingctx, src, dst):
        """``dst`` from ``src`` (int64 arrays of one length): the filter's forward direction
        (``dst`` the residuals of the input ``src``) or its inverse, from a zero state."""
        if not (_is_i64_array(src) and _is_i64_array(dst)):
            return None

        def codegen(context, builder, sig, args):
            sa = context.make_array(sig.args[0])(context, builder, args[0])
            da = context.make_array(sig.args[1])(context, builder, args[1])
            n = builder.extract_value(sa.shape, 0)
            entry = builder.block
            head = builder.append_basic_block("sdlms_head")
            body = builder.append_basic_block("sdlms_body")
            done = builder.append_basic_block("sdlms_done")
            builder.branch(head)
            builder.position_at_end(head)
            i, w, h, d, avg, newest = (builder.phi(t) for t in (_I64, v16, v16, v16, _I64, _I64))
            for p in (i, avg, newest):
                p.add_incoming(_i64(0), entry)
            for p in (w, h, d):
                p.add_incoming(ir.Constant(v16, None), entry)
            builder.cbranch(builder.icmp_signed("<", i, n), body, done)
            builder.position_at_end(body)
            v = builder.load(builder.gep(sa.data, [i]))
            out, xs, nw, nh, nd, navg = _sd_sample(builder, m, shift, w, h, d, avg, newest, v,
                                                   inverse)
            builder.store(out, builder.gep(da.data, [i]))
            for p, val in ((i, builder.add(i, _i64(1))), (w, nw), (h, nh), (d, nd), (avg, navg),
                           (newest, xs)):
                p.add_incoming(val, body)
            builder.branch(head)
            builder.position_at_end(done)
            return context.get_dummy_value()
        return types.void(src, dst), codegen
    return run


def _sign_data_step(m: int, shift: int):
    v16 = ir.VectorType(_I16, m)

    @intrinsic
    def step(typingctx, state, e, newest, avg):
        """One sample of the inverse: ``(x, xs, avg')`` (``xs``: ``x`` saturated to int16, the
        next ``newest``) from the residual ``e``, the state
        ``state`` (int16, ``3 m`` values: weights, history, adapt values; updated in place;
        its length is not checked: the caller allocates it), ``newest`` (the last ``x``
        saturated to int16) and ``avg`` (the running average)."""
        if not (isinstance(state, types.Array) and state.ndim == 1 and state.layout == "C"
                and state.dtype == types.int16 and all(
                    isinstance(a, types.Integer) for a in (e, newest, avg))):
            return None
        sig = types.UniTuple(types.int64, 3)(state, e, newest, avg)

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, args[0]).data
            ptrs = [builder.bitcast(builder.gep(data, [_i64(k * m)]), v16.as_pointer())
                    for k in range(3)]
            w, h, d = (builder.load(p, align=2) for p in ptrs)
            e, newest, avg = (context.cast(builder, a, t, types.int64)
                              for a, t in zip(args[1:], sig.args[1:]))
            x, xs, nw, nh, nd, navg = _sd_sample(builder, m, shift, w, h, d, avg, newest, e,
                                                 True)
            for p, val in zip(ptrs, (nw, nh, nd)):
                builder.store(val, p, align=2)
            return context.make_tuple(builder, sig.return_type, [x, xs, navg])
        return sig, codegen
    return step


def as_int64_c(a):
    """``a`` (1-D, integers) as a contiguous int64 array: ``a`` itself where it is one, else
    a copy. For numba code only (the kernels above take contiguous int64 arrays)."""
    raise NotImplementedError("as_int64_c runs in numba code only")


@overload(as_int64_c)
def _as_int64_c(a):
    if not (isinstance(a, types.Array) and a.ndim == 1 and isinstance(a.dtype, types.Integer)):
        return None
    if _is_i64_array(a):
        return lambda a: a

    def copy(a):
        out = np.empty(a.shape[0], np.int64)
        for i in range(a.shape[0]):
            out[i] = a[i]
        return out
    return copy


sign_data16_forward = _sign_data_loop(16, 9, inverse=False)
sign_data16_inverse = _sign_data_loop(16, 9, inverse=True)
sign_data16_step = _sign_data_step(16, 9)
