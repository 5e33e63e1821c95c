"""The fast decode kernels against the kernels they replaced (kept here as references).

The payload bytes are a released format: every payload, well-formed or
damaged, must decode to the same integers (or fail) as before.
"""

import copy

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numba import njit

from signals import channel as C
from signals import entropy as E
from signals import predict as P
from ubpe import _jit


@pytest.fixture(scope="module", autouse=True)
def _numba_kernels():
    """The references below are numba functions that call the modules' kernels, which
    numba can only compile against numba's own dispatchers: the process runs in JIT
    from this module's first test on (in AOT it would fail to type them)."""
    _jit.use_jit("tests/test_decode_kernels.py: numba references call the kernels")


# ------------------------------------------------ the replaced kernels, verbatim
@njit(cache=True)
def ref_cascade_forward(e1, variant):
    m1, d1, m2, mu = P._CASCADE_TABLE[variant]
    n = e1.shape[0]
    e2 = np.empty(n, np.int64)
    e3 = np.empty(n, np.int64)
    w1 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    w2 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    for i in range(n):
        e2[i] = e1[i] - P._lms_predict(e1, i, w1, m1)
        P._nlms_update(e1, i, w1, e2[i], m1, d1)
        e3[i] = e2[i] - P._lms_predict(e2, i, w2, m2)
        P._sign_update(e2, i, w2, e3[i], m2, mu)
    return e3


@njit(cache=True)
def ref_cascade_inverse(e3, variant):
    m1, d1, m2, mu = P._CASCADE_TABLE[variant]
    n = e3.shape[0]
    e1 = np.empty(n, np.int64)
    e2 = np.empty(n, np.int64)
    w1 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    w2 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    for i in range(n):
        e2[i] = e3[i] + P._lms_predict(e2, i, w2, m2)
        P._sign_update(e2, i, w2, e3[i], m2, mu)
        e1[i] = e2[i] + P._lms_predict(e1, i, w1, m1)
        P._nlms_update(e1, i, w1, e2[i], m1, d1)
    return e1


@njit(cache=True)
def ref_lpc_inverse(r, block, kinds, orders, shifts, coefs):
    n = r.shape[0]
    x = np.empty(n, np.int64)
    for i in range(n):
        b = i // block
        x[i] = r[i] + P._lpc_predict(x, i, kinds[b], orders[b], shifts[b], coefs, b)
    return x


@njit(cache=True)
def ref_decode_fused(words, raw, total_bits, n, k, msb, bitlen, cmap, nc, freqs, cum, lookup,
                     block, kinds, orders, shifts, coefs, mh, t, tbits, lms=0, ctxk=0):
    acc = 0
    x = np.empty(n, np.int64)
    e1 = np.empty(n if lms else 0, np.int64)
    e2 = np.empty(n if lms else 0, np.int64)
    w1 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    w2 = np.zeros(P.LMS_MAX_ORDER, np.int64)
    sign_data = lms == 4  # (the match model is off): the residuals first, then the filter
    m1, d1, m2, mu = P._CASCADE_TABLE[0 if sign_data else lms]
    rs = np.empty(n if sign_data else 0, np.int64)
    nw = words.shape[0]
    if nw < 2:
        return x, False
    st = (np.uint64(words[0]) << np.uint64(16)) | np.uint64(words[1])
    wpos = 2
    mask = np.uint64(E.SCALE - 1)
    direct = 1 << k
    bpos = 0
    b1 = 0
    b2 = 0
    b3 = 0
    size = 1 << tbits if mh > 0 else 1
    table = np.full(size, -1, np.int64)
    hmask = size - 1
    ptr = -1
    mlen = 0
    for i in range(n):
        blk = i // block
        h = -1
        if mh > 0 and i >= mh:
            h = P._hash(x, i, mh, hmask)
            if ptr < 0:
                ptr = table[h]
                mlen = 0
        use = ptr >= 0 and mlen >= t
        row = cmap[2 * b1 + b2 + b3] if ctxk == 0 else cmap[E.ema_stat(acc, ctxk)]
        if use:
            row += nc * P._bucket(mlen, t)
        slot = st & mask
        s = lookup[row, slot]
        if s < 0:
            return x, False
        st = np.uint64(freqs[row, s]) * (st >> np.uint64(E.SCALE_BITS)) + slot - np.uint64(cum[row, s])
        if st < np.uint64(E.RANS_L):
            if wpos >= nw:
                return x, False
            st = (st << np.uint64(16)) | np.uint64(words[wpos])
            wpos += 1
        b3 = b2
        b2 = b1
        b1 = bitlen[s]
        if s < direct:
            z = np.uint64(s)
        else:
            e = k + ((s - direct) >> msb)
            nb = e - msb
            if e > 63 or bpos + nb > total_bits:
                return x, False
            m = np.uint64((s - direct) & ((1 << msb) - 1))
            w = bpos >> 6
            o = bpos & 63
            v = raw[w] >> np.uint64(o)
            if o + nb > 64:
                v |= raw[w + 1] << np.uint64(64 - o)
            if nb < 64:
                v &= (np.uint64(1) << np.uint64(nb)) - np.uint64(1)
            z = (((np.uint64(1) << np.uint64(msb)) | m) << np.uint64(nb)) | v
            bpos += nb
        if ctxk:
            acc = E.ema_update(acc, z, ctxk)
        r = np.int64(z >> np.uint64(1)) ^ -np.int64(z & np.uint64(1))
        if sign_data:
            rs[i] = r
            continue
        if lms:
            e2[i] = r + P._lms_predict(e2, i, w2, m2)
            P._sign_update(e2, i, w2, r, m2, mu)
            e1[i] = e2[i] + P._lms_predict(e1, i, w1, m1)
            P._nlms_update(e1, i, w1, e2[i], m1, d1)
            r = e1[i]
        if use:
            pred = x[ptr]
        else:
            pred = P._lpc_predict(x, i, kinds[blk], orders[blk], shifts[blk], coefs, blk)
        x[i] = r + pred
        if ptr >= 0:
            if x[ptr] == x[i]:
                mlen += 1
                ptr += 1
            else:
                ptr = -1
                mlen = 0
        if h >= 0:
            table[h] = i
    if sign_data:
        e1 = P._sign_data_ref(rs, 16, 9, True)
        for i in range(n):
            blk = i // block
            x[i] = e1[i] + P._lpc_predict(x, i, kinds[blk], orders[blk], shifts[blk], coefs, blk)
    return x, wpos == nw and st == np.uint64(E.RANS_L) and total_bits - bpos < 8


def ref_decode_words(rd, n, k, msb, cmap, nc, f, block, kinds, orders, shifts, coefs, mh, t, tbits,
                     lms=0, ctxk=0):
    """The replaced ``_decode_words``: x, or None where it raised."""
    try:
        n_words = rd.varint(rd.remaining() // 2)
        words = np.frombuffer(rd.take(2 * n_words), "<u2").astype(np.uint16)
        if n * E.MIN_TOKEN_BITS > 16 * n_words + 64:
            return None
        rest = rd.take(rd.remaining())
    except ValueError:
        return None
    raw = np.frombuffer(rest + bytes(-len(rest) % 8 + 8), "<u8").astype(np.uint64)
    cum, lookup = E.build_tables(f)
    x, ok = ref_decode_fused(words, raw, 8 * len(rest), n, k, msb, E.token_bitlen(k, msb, f.shape[1]),
                             cmap, nc, f, cum, lookup, block, kinds, orders, shifts, coefs, mh, t,
                             tbits, lms, ctxk)
    return x if ok else None


class _Compare:
    """Wraps ``channel._decode_words``: every call also runs the reference and compares."""

    def __init__(self):
        self.calls = 0
        self.inner = C._decode_words

    def __call__(self, rd, n, k, msb, cmap, nc, f, cum, lookup, block, kinds, orders, shifts, coefs,
                 mh, t, tbits, lms=0, ctxk=0):
        self.calls += 1
        want = ref_decode_words(copy.copy(rd), n, k, msb, cmap, nc, f, block, kinds, orders, shifts,
                                coefs, mh, t, tbits, lms, ctxk)
        try:
            got = self.inner(rd, n, k, msb, cmap, nc, f, cum, lookup, block, kinds, orders, shifts,
                             coefs, mh, t, tbits, lms, ctxk)
        except ValueError:
            got = None
        assert (got is None) == (want is None)
        if got is None:
            raise ValueError("inconsistent rANS words or raw bits")
        assert np.array_equal(got, want)
        return got


# ------------------------------------------------------------------ strategies
wide = arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**63, 2**63 - 1))
wide32 = arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**31, 2**31 - 1))
walk = arrays(np.int64, st.integers(0, 600), elements=st.integers(-60, 60)).map(np.cumsum)
const = st.tuples(st.integers(0, 300), st.integers(-2**63, 2**63 - 1)).map(
    lambda a: np.full(a[0], a[1], np.int64))
signals = st.one_of(wide, wide32, walk, const, st.just(np.zeros(0, np.int64)),
                    st.integers(-2**63, 2**63 - 1).map(lambda v: np.array([v], np.int64)))


# ------------------------------------------------------------------ kernels
# signals near the float path's limit: outputs that cross FP_LIMIT part of the way through
near_limit = st.tuples(st.integers(1, 400), st.integers(0, 2**32 - 1),
                       st.sampled_from([P.FP_LIMIT // 4, P.FP_LIMIT // 2, P.FP_LIMIT - 1,
                                        P.FP_LIMIT, 2 * P.FP_LIMIT])).map(
    lambda a: np.round(a[2] * np.sin(np.arange(a[0]) / 3.0)
                       + np.random.default_rng(a[1]).normal(0, a[2] / 50, a[0])).astype(np.int64))


@settings(max_examples=150, deadline=None)
@given(x=st.one_of(signals, near_limit), variant=st.sampled_from(sorted(P.CASCADES)))
def test_cascade_float_path_gives_the_int64_kernels_integers(x, variant):
    e3 = P.cascade_forward(x, variant)
    for r in (e3, x):  # forward outputs, and any input (a damaged payload's residuals)
        y, ok = P._cascade_inverse_fp(r, variant)
        want = P._cascade_inverse_int(r, variant)
        if ok:  # (where it stops, at an output beyond the limit, the int64 kernel takes over)
            assert np.array_equal(y, want)
        assert np.array_equal(P.cascade_inverse(r, variant), want)
    assert np.array_equal(P.cascade_inverse(e3, variant), x)
    y, ok = P._cascade_forward_fp(x, variant)
    if ok:
        assert np.array_equal(y, ref_cascade_forward(x, variant))
    assert np.array_equal(e3, ref_cascade_forward(x, variant))


def test_cascade_float_path_takes_audio_and_leaves_wide_values():
    t = np.arange(10_000)  # longer than the inverse's ring of history (4096)
    speech_like = np.round(8000 * np.sin(t / 5.0) * np.sin(t / 300.0)).astype(np.int64)
    e3, ok = P._cascade_forward_fp(speech_like, 1)
    assert ok and np.array_equal(e3, ref_cascade_forward(speech_like, 1))
    x, ok = P._cascade_inverse_fp(e3, 1)
    assert ok and np.array_equal(x, speech_like)
    wide = np.round(2.0**40 * np.sin(t / 5.0)).astype(np.int64)
    assert not P._cascade_forward_fp(wide, 1)[1]
    assert not P._cascade_inverse_fp(P.cascade_forward(wide, 1), 1)[1]
    assert np.array_equal(P.cascade_inverse(P.cascade_forward(wide, 1), 1), wide)


@settings(max_examples=150, deadline=None)
@given(x=signals, variant=st.sampled_from(sorted(P.CASCADES)))
def test_cascade_matches_the_replaced_kernels(x, variant):
    e3 = P.cascade_forward(x, variant)
    assert np.array_equal(e3, ref_cascade_forward(x, variant))
    assert np.array_equal(P.cascade_inverse(e3, variant), ref_cascade_inverse(e3, variant))
    assert np.array_equal(P.cascade_inverse(e3, variant), x)
    # any input to the inverse (a damaged payload's residuals), not only forward outputs
    assert np.array_equal(P.cascade_inverse(x, variant), ref_cascade_inverse(x, variant))


@st.composite
def block_params(draw):
    n = draw(st.integers(0, 400))
    block = draw(st.integers(1, 130))
    nb = max(1, -(-n // block))
    kinds = np.array(draw(st.lists(st.integers(0, 2), min_size=nb, max_size=nb)), np.int64)
    orders = np.zeros(nb, np.int64)
    shifts = np.zeros(nb, np.int64)
    coefs = np.zeros((nb, 32), np.int64)
    for b in range(nb):
        if kinds[b] == 0:
            orders[b] = draw(st.integers(0, P.MAX_ORDER))
        elif kinds[b] == 1:
            orders[b] = draw(st.integers(1, 32))
            shifts[b] = draw(st.integers(0, 30))
            # int16 as payloads store them, or wider, as a model's JSON may hold them
            coefs[b, :orders[b]] = draw(arrays(np.int64, int(orders[b]), elements=st.one_of(
                st.integers(-32768, 32767), st.integers(-2**40, 2**40))))
        else:
            orders[b] = draw(st.integers(2, 300))
    r = draw(st.one_of(arrays(np.int64, n, elements=st.integers(-2**63, 2**63 - 1)),
                       arrays(np.int64, n, elements=st.integers(-3, 3)),
                       arrays(np.int64, n, elements=st.integers(-2**20, 2**20))))
    return r, block, kinds, orders, shifts, coefs


@settings(max_examples=200, deadline=None)
@given(p=block_params(), lms=st.integers(0, 4))
def test_block_inverse_matches_per_sample_prediction(p, lms):
    r, rest = p[0], p[1:]
    e = P._sign_data_ref(r, 16, 9, True) if lms == 4 else ref_cascade_inverse(r, lms)
    want = ref_lpc_inverse(e if lms else r, *rest)
    assert np.array_equal(C.inverse_blocks(r, *rest, lms), want)


@pytest.mark.parametrize("order", [12, 16, 20, 21, 32])
@pytest.mark.parametrize("case", ["limits", "wide samples", "wide coefficient", "two blocks",
                                  "after a fixed block", "wide at the warm-up"])
def test_lpc_float_sums_give_the_int64_integers(case, order):
    """The decoder sums an LPC's older terms in float64 (over 16 samples up to order 20, over
    32 above; in int64 below order 16) where that is exact (samples below
    2**31, coefficients of at most 2**15); at those limits it gives the int64 sums' integers,
    and past them the int64 sums take over (a float64 sum would lose low bits there): samples
    near 2**40 in the middle of a block, before a block's start, and exactly ``order`` before
    the first sample past the warm-up; a coefficient of 2**30 - 1. "after a fixed block": the
    float sums of a block that starts after sample 0 (its ring filled from the samples before
    it). (A review: limits moved within float64's headroom stay exact and pass; moved past
    these samples, or the window, the ring's filling or the distance to the last wide sample
    off by one, some case fails.)"""
    rng = np.random.default_rng(5)
    n, shift = 400, 0  # (no shift: an inexact sum would show in every bit)
    lim = 2**31 - 1
    x = np.clip(np.round(lim * np.sin(np.arange(n) / 9.0)) + rng.integers(-99, 99, n), -lim, lim)
    x = x.astype(np.int64)
    coefs = np.zeros((2, 32), np.int64)
    coefs[:, :order] = np.where(np.arange(order) % 2, -32767, 32768)  # (odd: wide products)
    if case == "wide samples":
        x[150:170] = 2**40 + 2 * rng.integers(0, 2**38, 20) + 1
        x[300] = -2**31
    elif case == "wide coefficient":
        coefs[:, 7] = 2**30 - 1  # (products of 61 bits: a float64 sum loses some)
    elif case == "wide at the warm-up":  # (order before the first sample of the float loop)
        x[4] = 2**40 + 2 * rng.integers(0, 2**38) + 1
    block = {"two blocks": 200, "after a fixed block": 100}.get(case, n)
    if case == "two blocks":
        x[190:199] = 2**40 + 2 * rng.integers(0, 2**38, 9) + 1  # (in the window of the
        # second block's first samples)
    kinds, orders, shifts = np.ones(4, np.int64), np.full(4, order), np.full(4, shift)
    if case == "after a fixed block":
        kinds[0], orders[0] = 0, 1
    coefs = np.vstack([coefs, coefs])
    r = np.array([x[i] - P._lpc_predict(x, i, kinds[i // block], orders[i // block], shift, coefs,
                                        i // block) for i in range(n)], np.int64)
    assert np.array_equal(ref_lpc_inverse(r, block, kinds, orders, shifts, coefs), x)
    assert np.array_equal(C.inverse_blocks(r, block, kinds, orders, shifts, coefs), x)


@settings(max_examples=100, deadline=None)
@given(acc=st.one_of(st.integers(0, 2**63 - 1), st.integers(0, 5000)), sh=st.integers(0, 8))
def test_ema_stat_fast_matches(acc, sh):
    assert E.ema_stat_fast(acc, sh) == E.ema_stat(acc, sh)


@settings(max_examples=100, deadline=None)
@given(k=st.integers(0, 6), msb=st.integers(0, 4), rows=st.integers(1, 3), data=st.data())
def test_decode_table_fields(k, msb, rows, data):
    msb = min(msb, k)
    width = E.alphabet_size(k, msb)
    q = np.array(data.draw(st.lists(st.lists(st.integers(0, E.MAX_QCODE), min_size=width,
                                             max_size=width), min_size=rows, max_size=rows)))
    f = E.freqs_from_code_rows(q)
    cum, lookup = E.build_tables(f)
    dt = E.decode_table(f, k, msb).reshape(rows, E.SCALE)
    bl = E.token_bitlen(k, msb, width)
    nbits = E.token_raw_bits(k, msb, width)
    s = lookup.astype(np.int64)
    used = s >= 0
    freq = (dt & np.uint64(E.DT_FREQ_MASK)).astype(np.int64)
    assert np.array_equal(freq == 0, ~used)
    sv = np.where(used, s, 0)
    rr = np.arange(rows)[:, None]
    slot = np.arange(E.SCALE)[None, :]
    assert np.array_equal(freq[used], f[rr, sv][used])
    assert np.array_equal(((dt >> np.uint64(13)) & np.uint64(4095)).astype(np.int64)[used],
                          (slot - cum[rr, sv])[used])
    assert np.array_equal(((dt >> np.uint64(32)) & np.uint64(63)).astype(np.int64)[used], nbits[sv][used])
    assert np.array_equal(((dt >> np.uint64(40)) & np.uint64(127)).astype(np.int64)[used], bl[sv][used])
    top = (dt >> np.uint64(48)).astype(np.int64)[used]
    z_top = np.where(sv < (1 << k), sv, (1 << msb) | ((sv - (1 << k)) & ((1 << msb) - 1)))
    assert np.array_equal(top, z_top[used])


# ------------------------------------------------------------------ payloads
def _damaged(p: bytes, data) -> bytes:
    how = data.draw(st.sampled_from(["flip", "cut", "byte"]))
    if not p:
        return p
    i = data.draw(st.integers(0, len(p) - 1))
    if how == "cut":
        return p[:i]
    b = bytearray(p)
    if how == "flip":
        b[i] ^= 1 << data.draw(st.integers(0, 7))
    else:
        b[i] = data.draw(st.integers(0, 255))
    return bytes(b)


@settings(max_examples=80, deadline=None)
@given(x=signals, level=st.integers(0, 6), data=st.data())
def test_payloads_decode_as_with_the_replaced_kernels(x, level, data):
    p = C.encode_channel(x, level=level)
    cmp = _Compare()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_decode_words", cmp)
        assert np.array_equal(C.decode_channel(p, x.size), x)
        assert cmp.calls > 0 or p[0] != C.CODED2
        for _ in range(3):  # damaged copies: the same integers or the same failure
            try:
                C.decode_channel(_damaged(p, data), x.size)
            except ValueError:
                pass


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(7)
    t = np.arange(20000)
    smooth = (1000 * np.sin(t / 9.0) + rng.normal(0, 3, t.size)).astype(np.int64)
    steps = np.repeat(rng.integers(0, 50, 400), 50).astype(np.int64)
    return [C.fit_channel_model([smooth], packet_size=256),
            C.fit_channel_model([steps], packet_size=256)]


@settings(max_examples=40, deadline=None)
@given(which=st.integers(0, 1), xs=st.lists(signals, min_size=0, max_size=6), data=st.data())
def test_model_packets_decode_as_with_the_replaced_kernels(models, which, xs, data):
    m = models[which]
    ps = C.encode_packets(xs, m, level=0)
    assert all(np.array_equal(a, b) for a, b in zip(C.decode_packets(ps, [x.size for x in xs], m), xs))
    bad = [_damaged(p, data) for p in ps]
    cmp = _Compare()
    got = C.decode_packets(bad, [x.size for x in xs], m, on_error="none")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_decode_words", cmp)
        for b, x, g in zip(bad, xs, got):
            try:
                one = C.decode_channel(b, x.size, model=m)
            except ValueError:
                one = None
            assert (g is None) == (one is None)
            if g is not None:
                assert np.array_equal(g, one)
        assert cmp.calls >= sum(b[:1] == bytes([C.MODEL]) for b in bad)


@settings(max_examples=300, deadline=None)
@given(a=st.integers(-2**62, 2**62), d=st.integers(1, 2**62 - 1))
def test_floordiv_pos_is_floor_division(a, d):
    # the cascade's NLMS step: an unsigned division of the magnitude, floored like Python's //
    assert P._floordiv_pos(a, d) == a // d


@pytest.mark.parametrize("a", [0, 1, -1, 4095, -4096, 2**52, -2**52, 2**40 << 12, -(2**40 << 12)])
@pytest.mark.parametrize("d", [1, 8, 9, 2**31 - 1, 2**32, 2**32 + 1, 2**51])
def test_floordiv_pos_edges(a, d):
    assert P._floordiv_pos(a, d) == a // d


sparse = st.tuples(walk, st.integers(2, 10**6), st.integers(-2**40, 2**40)).map(
    lambda a: a[0] * a[1] + a[2])  # (mode 5 over mode 4 where the ranks win)
plain_inputs = st.one_of(signals, sparse)


def _general(p, n):
    """The general reader's samples of one payload, or None where it raises."""
    try:
        return C.decode_channel(p, n)
    except ValueError:
        return None


@settings(max_examples=120, deadline=None)
@given(x=plain_inputs, level=st.integers(2, 5), data=st.data())
def test_plain_kernel_decodes_as_the_general_reader(x, level, data):
    """_k_plain (modes 4 and 5 over mode 4, one kernel): every payload it takes, well-formed or
    damaged, gives the general reader's integers; it refuses what the general reader refuses
    (and may leave others to it: they then go to the general reader). Every well-formed payload
    of mode 4, or of mode 5 over two of mode 4, it takes."""
    p = C.encode_channel(x, level=level)
    for q in [p] + [_damaged(p, data) for _ in range(4)]:
        for n in {x.size, max(0, x.size - 1), x.size + 1}:
            got, ok = C._k_plain(np.frombuffer(q, np.uint8), 0, len(q), n)
            want = _general(q, n)
            if ok:
                assert want is not None and np.array_equal(got, want)
    got, ok = C._k_plain(np.frombuffer(p, np.uint8), 0, len(p), x.size)
    assert ok == (p[0] == C.CODED2 or (p[0] == C.RANKED and _two_fused(p, x.size)))


def _two_fused(p, n):
    """Whether a mode-5 payload holds two mode-4 payloads (what _k_plain takes)."""
    rd = C._Reader(p[1:])
    rd.varint()
    head = rd.take(rd.varint())
    return head[:1] == bytes([C.CODED2]) and rd.take(rd.remaining())[:1] == bytes([C.CODED2])


@settings(max_examples=40, deadline=None)
@given(xs=st.lists(plain_inputs, min_size=0, max_size=6), data=st.data())
def test_batch_decodes_own_payloads_as_the_general_reader(models, xs, data):
    """decode_packets takes the packets of modes 4 and 5 through _k_plain: the same integers, or
    the same failure, as decode_channel of each, damaged ones included."""
    m = models[0]
    ps = [C.encode_channel(x, level=3) for x in xs]
    ns = [x.size for x in xs]
    assert all(np.array_equal(a, b) for a, b in zip(C.decode_packets(ps, ns, m), xs))
    bad = [_damaged(p, data) for p in ps]
    got = C.decode_packets(bad, ns, m, on_error="none")
    for b, n, g in zip(bad, ns, got):
        try:
            one = C.decode_channel(b, n, model=m)
        except ValueError:
            one = None
        assert (g is None) == (one is None)
        if g is not None:
            assert np.array_equal(g, one)


def test_plain_kernel_takes_ranked_payloads():
    """A mode-5 payload over two of mode 4 (few distinct values far apart) decodes in the kernel,
    and in a batch, as the general reader decodes it."""
    rng = np.random.default_rng(2)
    x = rng.choice(np.cumsum(rng.integers(1000, 2000, 80)) - 2**62, 4096)
    p = C.encode_channel(x, level=3)
    assert p[0] == C.RANKED and _two_fused(p, x.size)
    got, ok = C._k_plain(np.frombuffer(p, np.uint8), 0, len(p), x.size)
    assert ok and np.array_equal(got, x)
    xs, off, fine = C._decode_plain_batch(np.frombuffer(p + p, np.uint8), np.array([0, len(p), 2 * len(p)]),
                                          np.array([x.size, x.size - 1]), np.array([0, 1]))
    assert fine.tolist() == [True, False] and np.array_equal(xs, x) and off.tolist() == [0, x.size, x.size]


def test_speech_payload_with_the_sign_data_cascade_decodes_as_the_reference(cascade_bytes):
    """Real speech (tests/data/speech_0880.wav) at the default level keeps the sign-data LMS
    (``lms`` 4); its payload decodes as the reference decoder above decodes it."""
    import wave
    from pathlib import Path
    with wave.open(str(Path(__file__).parent / "data" / "speech_0880.wav")) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.int64)
    p = C.encode_channel(x)
    cmp = _Compare()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(C, "_decode_words", cmp)
        assert np.array_equal(C.decode_channel(p, x.size), x)
        assert cascade_bytes == [4] and cmp.calls == 1
        # damaged copies (past the header: a bit flipped in the tokens or the raw bits, a
        # byte overwritten, the end cut): the same integers as the reference, or its failure
        rng = np.random.default_rng(4)
        for j in range(12):
            b = bytearray(p)
            i = int(rng.integers(len(p) // 8, len(p)))
            if j % 3 == 0:
                b[i] ^= 1 << int(rng.integers(0, 8))
            elif j % 3 == 1:
                b[i] = int(rng.integers(0, 256))
            else:
                b = b[:i]
            try:
                C.decode_channel(bytes(b), x.size)
            except ValueError:
                pass
    assert cascade_bytes == [4] * 13 and cmp.calls == 13


@pytest.fixture(scope="module")
def ranked_stage():
    """The two models of a ranked stage (distinct values, ranks): different tables."""
    t = np.arange(24_000)
    x = np.round(9.8 * np.cumsum(np.random.default_rng(4).integers(-3, 4, t.size))).astype(np.int64)
    m = C.fit_channel_model([x], packet_size=1024)
    assert m.ranked is not None
    return m.ranked


@settings(max_examples=60, deadline=None)
@given(xs=st.lists(walk.filter(lambda x: x.size > 1), min_size=2, max_size=2), data=st.data())
def test_two_streams_decode_as_each_alone(ranked_stage, xs, data):
    """_two_streams (the ranked stage's two token streams in one loop) gives the residuals that
    _decode_residuals gives of each stream alone (each through its own model's tables), and
    fails where either fails: well-formed and damaged model payloads, streams of different
    lengths, counts one off."""
    streams = []
    for m, x in zip(ranked_stage[::data.draw(st.sampled_from([1, -1]))], xs):
        p = C.encode_packets([x], m, level=0)[0]
        assume(p[:1] == bytes([C.MODEL]))
        n = x.size + data.draw(st.sampled_from([0, 0, -1, 1]))
        q = _damaged(p, data) if data.draw(st.booleans()) else p
        ok, w, r, nraw = C._k_model_stream(np.frombuffer(q, np.uint8), 0, len(q), n, 0.0)
        if not ok:  # (a damaged word count: the kernel's caller refuses the payload first)
            ok, w, r, nraw = C._k_model_stream(np.frombuffer(p, np.uint8), 0, len(p), n, 0.0)
        cmap, dtab = m.tables()[0], m.batch_params()[6]
        streams.append((w, r, 8 * nraw, n, cmap, dtab))
    (wa, ra, ta, na, ca, da), (wb, rb, tb, nb, cb, db) = streams
    assert not np.array_equal(da, db)  # (two tables: a stream read through the other's fails)
    crow_a, crow_b = (c.astype(np.uint64) << np.uint64(E.SCALE_BITS) for c in (ca, cb))
    got_a, got_b, ok = C._two_streams(wa, ra, ta, crow_a, da, na, wb, rb, tb, crow_b, db, nb)
    want_a, ok_a = C._decode_residuals(wa, ra, ta, na, ca, da, 0)
    want_b, ok_b = C._decode_residuals(wb, rb, tb, nb, cb, db, 0)
    assert ok == (ok_a and ok_b)
    if ok:
        assert np.array_equal(got_a, want_a) and np.array_equal(got_b, want_b)
