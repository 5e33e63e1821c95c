"""The encoder's fast kernels against plain per-sample references (any int64 values)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals import channel as C
from signals import predict as P

wide = arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**63, 2**63 - 1))
walk = arrays(np.int64, st.integers(0, 300), elements=st.integers(-50, 50)).map(np.cumsum)
edge = st.sampled_from([np.zeros(0, np.int64), np.array([7], np.int64),
                        np.full(50, -2**63, np.int64), np.full(50, 2**63 - 1, np.int64),
                        np.array([-2**63, 2**63 - 1] * 40, np.int64),
                        np.array([-2**31, 2**31 - 1] * 40, np.int64)])
signals = st.one_of(wide, walk, edge)


def _wrap(v: int) -> int:
    return (int(v) + 2**63) % 2**64 - 2**63


def _ref_predict(x, i, kind, order, shift, c):
    """The predictor of ``signals.predict._lpc_predict`` in Python integers, wrapped to int64."""
    xs = [int(v) for v in x]
    kind, order, shift = int(kind), int(order), int(shift)
    if kind == 2:
        return xs[i - order] if i >= order else (xs[i - 1] if i > 0 else 0)
    if kind == 0 or i < order:
        k = min(order if kind == 0 else min(i, P.WARMUP_ORDER), i)
        w = P._WEIGHTS[k]
        return _wrap(sum(int(w[j]) * xs[i - 1 - j] for j in range(k)))
    acc = _wrap(sum(int(c[j]) * xs[i - 1 - j] for j in range(order)))
    return acc >> shift


def _cap(v: int) -> int:
    return min(abs(_wrap(v)), P._SUM_CAP)


@settings(max_examples=150, deadline=None)
@given(x=signals, block=st.integers(1, 64), data=st.data())
def test_block_residuals_match_the_per_sample_predictor(x, block, data):
    nb = max(1, -(-x.size // block))
    kinds = np.array(data.draw(st.lists(st.integers(0, 2), min_size=nb, max_size=nb)), np.int64)
    orders = np.zeros(nb, np.int64)
    shifts = np.array(data.draw(st.lists(st.integers(0, 30), min_size=nb, max_size=nb)), np.int64)
    coefs = np.zeros((nb, 32), np.int64)
    for b in range(nb):
        if kinds[b] == 0:
            orders[b] = data.draw(st.integers(0, 4))
        elif kinds[b] == 2:
            orders[b] = data.draw(st.integers(2, 70))
        else:
            orders[b] = data.draw(st.integers(1, 32))
            coefs[b, :orders[b]] = data.draw(arrays(np.int64, int(orders[b]),
                                                    elements=st.integers(-32768, 32767)))
    r, mb = P.predict_fused(x, block, kinds, orders, shifts, coefs, 0, 0, 10)
    want = [_wrap(int(x[i]) - _ref_predict(x, i, kinds[i // block], orders[i // block],
                                           shifts[i // block], coefs[i // block]))
            for i in range(x.size)]
    assert r.tolist() == want and not mb.any()


# the analysis sums are estimates: exact where no difference overflows int64 (beyond that,
# any value is safe: it only picks among valid predictors, which the payload then names)
bounded = st.one_of(walk, arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**42, 2**42)),
                    st.sampled_from([np.zeros(0, np.int64), np.array([7], np.int64),
                                     np.array([-2**42, 2**42] * 40, np.int64)]))


@settings(max_examples=100, deadline=None)
@given(x=bounded, s=st.integers(0, 40), length=st.integers(0, 80), lag=st.integers(2, 40),
       o=st.integers(1, 32), sh=st.integers(0, 30), data=st.data())
def test_analysis_sums_match_their_definition(x, s, length, lag, o, sh, data):
    s = min(s, x.size)
    e = min(x.size, s + length)
    sums = np.zeros(P.MAX_ORDER + 1, np.int64)
    P._fixed_sums(x, s, e, sums)
    dummy = np.zeros(32, np.int64)
    for k in range(P.MAX_ORDER + 1):
        assert sums[k] == sum(_cap(int(x[i]) - _ref_predict(x, i, 0, k, 0, dummy))
                              for i in range(s, e))
    assert P._lag_sum(x, s, e, lag) == sum(_cap(int(x[i]) - _ref_predict(x, i, 2, lag, 0, dummy))
                                           for i in range(s, e))
    q = np.zeros((1, 32), np.int64)
    q[0, :o] = data.draw(arrays(np.int64, o, elements=st.integers(-32768, 32767)))
    assert P._lpc_sum(x, s, e, q, o, sh) == sum(_cap(int(x[i]) - _ref_predict(x, i, 1, o, sh, q[0]))
                                                for i in range(s, e))


@settings(max_examples=100, deadline=None)
@given(seg=arrays(np.float64, st.integers(0, 120),
                  elements=st.floats(-1e6, 1e6, allow_nan=False)), pmax=st.integers(0, 40))
def test_autocorrelation_sums_in_the_same_order(seg, pmax):
    want = np.zeros(pmax + 1)
    for k in range(pmax + 1):
        acc = 0.0
        for i in range(k, seg.size):
            acc += seg[i] * seg[i - k]
        want[k] = acc
    assert np.array_equal(P._autocorr(seg, pmax), want)


@settings(max_examples=60, deadline=None)
@given(x=signals, level=st.sampled_from([0, 2, 3, 5]))
def test_fast_levels_round_trip(x, level):
    kinds, orders, _, _ = P.block_lpc_analyze(x, 16, np.array([2, 8]), 14, False, 8)
    assert kinds.size == -(-x.size // 16) and set(kinds.tolist()) <= {0, 1, 2}
    assert np.array_equal(C.decode_channel(C.encode_channel(x, level=level), x.size), x)


@settings(max_examples=100, deadline=None)
@given(x=signals, ctxk=st.sampled_from([1, 3]), n_ctx=st.integers(1, 8), matched=st.booleans())
def test_size_estimate_is_entropy_plus_raw_bits(x, ctxk, n_ctx, matched):
    z = P.zigzag(x).view(np.uint64)
    mb = (np.arange(x.size) % 4).astype(np.uint8) if matched else np.zeros(x.size, np.uint8)
    bits = C._est_bits(z, mb, 4 if matched else 1, ctxk, n_ctx)
    bl = np.array([int(v).bit_length() for v in z], np.int64)
    raw = int(np.maximum(bl - 3, 0)[z >= 16].sum())
    assert np.isfinite(bits) and raw <= bits <= raw + x.size * 12 + 8 * 4 * n_ctx + 5 * x.size


def _ref_est_bits(z, mb, n_mb, ema, n_ctx):
    """C._est_bits written plainly: tokens of the hybrid split (4, 2), both context statistics,
    contexts at their quantiles, the empirical entropy of each row plus 8 bits a row and 5 an
    entry, plus the raw bits; the better context kind."""
    from signals import entropy as E
    toks, s0, s1, raw = [], [], [], 0
    b1 = b2 = b3 = acc = 0
    for v in (int(q) for q in z):
        bl = v.bit_length()
        t = v if v < 16 else 16 + ((bl - 5) << 2) + ((v >> (bl - 3)) & 3)
        raw += bl - 3 if v >= 16 else 0
        a = acc >> ema
        s1.append(0 if a == 0 else 4 * a.bit_length() + (((a << 2) >> (a.bit_length() - 1)) & 3))
        s0.append(2 * b1 + b2 + b3)
        toks.append(t)
        b1, b2, b3 = bl, b1, b2
        acc += min(v, E.EMA_CLAMP) - (acc >> ema)
    best = None
    for stat in (s0, s1):
        hist = np.bincount(stat, minlength=E.CTX_RANGE)
        cmap, c, run = [], 0, 0
        for h in hist:  # a context ends where the running count reaches its quantile
            cmap.append(c)
            run += int(h)
            if run * n_ctx >= (c + 1) * len(stat) and c < n_ctx - 1:
                c += 1
        rows = {}
        for t, st_, m in zip(toks, stat, mb.tolist()):
            rows.setdefault(m * n_ctx + cmap[st_], []).append(t)
        bits = 0.0
        for r in rows.values():
            counts = np.bincount(r)
            counts = counts[counts > 0]
            bits += 8 + float((counts * np.log2(len(r) / counts)).sum()) + 5 * counts.size
        best = bits if best is None else min(best, bits)
    return raw + best


@settings(max_examples=100, deadline=None)
@given(z=arrays(np.uint64, st.integers(1, 300), elements=st.one_of(
    st.integers(0, 40), st.integers(0, 2**64 - 1), st.sampled_from([2**64 - 1, 2**63, 15, 16]))),
       ema=st.sampled_from([1, 3, 5]), n_ctx=st.integers(1, 8), n_mb=st.sampled_from([1, 4]))
def test_size_estimate_matches_its_definition(z, ema, n_ctx, n_mb):
    # every token (up to 255, from the largest uint64) and statistic has its own count, in the
    # narrow arrays the kernel keeps them in
    mb = (np.arange(z.size) % n_mb).astype(np.uint8)
    want = _ref_est_bits(z, mb, n_mb, ema, n_ctx)
    assert abs(C._est_bits(z, mb, n_mb, ema, n_ctx) - want) <= 1e-9 * max(1.0, want)


@settings(max_examples=100, deadline=None)
@given(tokens=arrays(np.int64, st.integers(1, 400), elements=st.integers(0, 40)),
       ctxk=st.sampled_from([0, 2, 5]), n_mb=st.sampled_from([1, 4]),
       n_ctx=st.integers(1, 32), seed=st.integers(0, 2**16))
def test_context_tables_match_the_numpy_fit(tokens, ctxk, n_mb, n_ctx, seed):
    from signals import entropy as E
    z = tokens.astype(np.uint64)  # k = 8: every value is its own token
    width = int(tokens.max()) + 1
    bl = E.token_bitlen(8, 2, width)
    mb = np.random.default_rng(seed).integers(0, n_mb, tokens.size).astype(np.uint8)
    fine, shist = C._fine_hist(tokens.astype(np.int32), z, bl, mb, n_mb, width, ctxk)
    bits, th, f, codes = C._tables_for(fine, shist, width, n_mb, n_ctx)
    stat = E.context_stat(tokens.astype(np.int32), bl) if ctxk == 0 else E.context_stat_ema(z, ctxk)
    want_th = C._thresholds(stat, n_ctx)
    rows = E.context_map(want_th)[stat] + (want_th.size + 1) * mb.astype(np.int64)
    nr = n_mb * (want_th.size + 1)
    counts = np.bincount(rows * width + tokens, minlength=nr * width).reshape(nr, width)
    q = E.quantize_counts(counts)
    want_f = E.freqs_from_code_rows(q)
    assert np.array_equal(th, want_th) and np.array_equal(f, want_f)
    assert np.array_equal(codes, q)
    table = E.write_codes(q)
    assert bits == E.coded_bits(counts, want_f) + 8 * (len(table) + want_th.size + 1)
    best = C._rows_tables(fine, shist, width, n_mb, (n_ctx, 1, n_ctx + 3))
    cands = [C._tables_for(fine, shist, width, n_mb, c) for c in (n_ctx, 1, n_ctx + 3)]
    want = min(cands, key=lambda c: c[0])  # (the first of the fewest bits)
    assert best[0] == want[0] and all(np.array_equal(a, b) for a, b in zip(best[1:], want[1:]))


@settings(max_examples=200, deadline=None)
@given(q=arrays(np.int64, st.tuples(st.integers(0, 6), st.integers(0, 40)),
                elements=st.integers(0, 161)))
def test_table_code_length_is_that_of_the_written_codes(q):
    from signals import entropy as E
    assert C._codes_bytes(q) == len(E.write_codes(q))


small_alphabet = arrays(np.int64, st.integers(1, 300), elements=st.sampled_from(
    [-2**63, -2**62, -5, 0, 1, 3, 1000, 2**62, 2**63 - 1]))
dense = arrays(np.int64, st.integers(1, 300), elements=st.integers(-40, 0)).map(
    lambda a: a * 3 + np.int64(2**63 - 200))  # near the top of the range


@settings(max_examples=150, deadline=None)
@given(x=st.one_of(wide, walk, small_alphabet, dense, edge).filter(lambda a: a.size > 0))
def test_distinct_values_and_ranks_match_numpy(x):
    u = C._distinct(x)
    assert np.array_equal(u, np.unique(x)) and u.dtype == np.int64
    r, heads = C._ranks_heads(x)
    assert r.dtype == np.int64 and np.array_equal(r, np.searchsorted(u, x))
    assert np.array_equal(heads, P.differences(u, 1))
    span, lo = C._span(x)
    true_span = int(x.max()) - int(x.min())
    assert lo == x.min() and span == (true_span if true_span < 2**63 else -1)


@settings(max_examples=100, deadline=None)
@given(x=signals, mh=st.integers(1, 3), t=st.integers(0, 2))
def test_match_gain_is_the_fused_kernels_gain(x, mh, t):
    kinds, orders, shifts, coefs = P.block_lpc_analyze(x, 32, np.array([2, 4]), 14, False, 8)
    r0, _ = P.predict_fused(x, 32, kinds, orders, shifts, coefs, 0, 0, 10)
    r, mb, gain = P.predict_fused_gain(x, 32, kinds, orders, shifts, coefs, mh, t, 10)
    assert C._match_gain(r0, r, mb) == gain  # the same sum in the same order: equal floats


@settings(max_examples=60, deadline=None)
@given(e=signals, variant=st.sampled_from([1, 2, 3]))
def test_cascade_variant_kernels_match_the_generic_one(e, variant):
    m1, d1, m2, mu = P._CASCADE_TABLE[variant]
    with np.errstate(over="ignore"):  # int64 wraps, in Python as in the compiled kernel
        want = P._cascade_run.py_func(e, int(m1), int(d1), int(m2), int(mu)) if e.size < 40 else None
    got = P.cascade_forward(e, variant)
    assert np.array_equal(P.cascade_inverse(got, variant), e)
    if want is not None:
        assert np.array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(x=signals.filter(lambda a: a.size > 0), lag=st.integers(2, 40), o=st.integers(1, 8),
       frac=st.floats(0.0, 2.0))
def test_block_sums_with_a_limit_stop_only_above_it(x, lag, o, frac):
    q = np.zeros((1, 32), np.int64)
    q[0, :o] = np.arange(1, o + 1) - 3
    for full, part in ((P._lag_sum(x, 0, x.size, lag), lambda lim: P._lag_sum(x, 0, x.size, lag, lim)),
                       (P._lpc_sum(x, 0, x.size, q, o, 2),
                        lambda lim: P._lpc_sum(x, 0, x.size, q, o, 2, lim))):
        limit = int(full * frac)
        got = part(limit)
        assert got == full if full <= limit else got > limit
        assert part(-1) == full
    assert P._sum_limit(np.inf, 16.0, 100) == -1 and 0 <= P._sum_limit(10.0, 16.0, 100) <= 1


near_float_bound = arrays(np.int64, st.integers(1, 200), elements=st.one_of(
    st.integers(-2**31 + 1, 2**31 - 1), st.sampled_from([-2**31 + 1, 2**31 - 1, -2**31, 2**31])))


@settings(max_examples=100, deadline=None)
@given(x=st.one_of(near_float_bound, signals.filter(lambda a: a.size > 0)), o=st.integers(1, 32),
       sh=st.integers(0, 30), data=st.data())
def test_lpc_residuals_through_float_sums_are_exact(x, o, sh, data):
    c = np.array(data.draw(st.lists(st.integers(-32768, 32767), min_size=o, max_size=o)), np.int64)
    coefs = np.zeros((1, 32), np.int64)
    coefs[0, :o] = c
    r = np.empty(x.size, np.int64)
    P._block_residual(x, 0, x.size, 1, o, sh, coefs, 0, r)
    want = [_wrap(int(x[i]) - _ref_predict(x, i, 1, o, sh, coefs[0])) for i in range(x.size)]
    assert r.tolist() == want
    if np.abs(x.astype(float)).max() < 2.0**40:  # (sums that wrap: not compared)
        assert P._lpc_sum(x, 0, x.size, coefs, o, sh) == sum(min(abs(v), P._SUM_CAP) for v in want)


@settings(max_examples=200, deadline=None)
@given(v=st.one_of(st.integers(-5000, 5000), st.integers(-2**63, 2**63 - 1),
                   st.sampled_from([-2**63, 2**63 - 1, -4096, 4096, -4095, 4095, 0])))
def test_log_cost_table_gives_the_same_floats(v):
    assert P._cost1p(np.int64(v)) == P._cost(np.int64(v))


def test_log_cost_table_holds_the_kernels_floats():
    assert [P._cost(np.int64(k)) for k in range(4096)] == P._LOG2_1P.tolist()


def test_count_code_and_log_tables_are_the_kernels_floats():
    """_QCODE and _LOG2_FREQ (built by the C library's log2) hold what numba's np.log2 computes
    in the kernels they replaced, for every entry."""
    from numba import njit

    from signals import entropy as E

    @njit
    def codes(n):
        q = np.zeros(n, np.int64)
        for c in range(1, n):
            q[c] = min(1 + np.int64(np.rint(4 * np.log2(np.float64(c)))), E.MAX_QCODE)
        return q

    @njit
    def logs(n):
        out = np.zeros(n + 1)
        for f in range(1, n + 1):
            out[f] = np.log2(f)
        return out

    assert np.array_equal(C._QCODE, codes(C._QCODE.size))
    assert np.array_equal(C._LOG2_FREQ, logs(E.SCALE))
    counts = np.array([[0, 1, 2, 5000, 1 << 13, 1 << 20]], np.int64)
    assert np.array_equal(C._quantize_counts(counts), E.quantize_counts(counts))
    f = np.array([[0, 1, 7, 4096, 0, 1]], np.int64)
    assert C._coded_bits(counts, f) == E.coded_bits(counts, f)
    assert C._coded_bits(counts, f * 0 + 3) == E.coded_bits(counts, f * 0 + 3)


@settings(max_examples=100, deadline=None)
@given(tokens=arrays(np.int64, st.integers(0, 400), elements=st.integers(0, 40)),
       ctxk=st.sampled_from([0, 2, 5]), n_mb=st.sampled_from([1, 4]), seed=st.integers(0, 2**16),
       big=st.booleans())
def test_stat_hist_is_the_prefix_of_the_fine_histogram(tokens, ctxk, n_mb, seed, big):
    """_stat_hist (the running sums over the statistics that occur, in one pass) gives
    _stat_prefix of _fine_hist, and the same best tables; _freqs_rows the frequencies of
    signals.entropy.freqs_from_code_rows."""
    from signals import entropy as E
    z = tokens.astype(np.uint64) << np.uint64(50 if big else 0)
    width = int(tokens.max(initial=0)) + 1
    bl = E.token_bitlen(8, 2, width)
    mb = np.random.default_rng(seed).integers(0, n_mb, tokens.size).astype(np.uint8)
    fine, shist = C._fine_hist(tokens, z, bl, mb, n_mb, width, ctxk)
    stats, pre = C._stat_prefix(fine, shist)
    got = C._stat_hist(tokens, z, bl, mb, n_mb, width, ctxk)
    assert np.array_equal(got[0], stats) and np.array_equal(got[1], pre)
    assert np.array_equal(got[2], shist)
    if tokens.size:
        contexts = np.array([1, 4, 8, 12], np.int64)
        a = C._best_tables(fine, shist, width, n_mb, contexts)
        b = C._best_tables_of(*got, width, n_mb, contexts)
        assert a[0] == b[0] and all(np.array_equal(u, v) for u, v in zip(a[1:], b[1:]))
        assert np.array_equal(C._freqs_rows(a[3]), E.freqs_from_code_rows(a[3]))


@settings(max_examples=200, deadline=None)
@given(x=st.one_of(signals, arrays(np.int64, st.integers(1, 300), elements=st.integers(-3000, 3000)),
                   arrays(np.int64, st.integers(1, 300), elements=st.sampled_from(
                       [-2**63, -7, 0, 5, 900, 2**63 - 1]))))
def test_ranks_are_the_sorted_search(x):
    """_ranks_heads (through a bitmap of the span, or a sort) gives each sample's index among
    the distinct values."""
    if x.size:
        u = np.unique(x)
        assert np.array_equal(C._ranks_heads(x)[0], np.searchsorted(u, x))


def _ref_code_residuals(r, mb, n_mb, preset):
    """:func:`signals.channel._code_residuals` step by step: each kernel called from Python, the
    sections joined with numpy and bytes (the composition that its two kernels fuse)."""
    from signals import entropy as E
    z = C._zigzag_u64(r)
    best = None
    for k, msb in preset.hybrid:
        tokens, nbits = E.hybrid_split(z, k, msb)
        width = int(tokens.max()) + 1
        bl = E.token_bitlen(k, msb, width)
        raw_bits = float(nbits.sum(dtype=np.int64))
        for ctxk in preset.ctx:
            stats, pre, shist = C._stat_hist(tokens, z, bl, mb, n_mb, width, ctxk)
            bits, th, f, q = C._best_tables_of(stats, pre, shist, width, n_mb,
                                               np.asarray(preset.contexts, np.int64))
            if best is None or bits + raw_bits < best[0]:
                best = (bits + raw_bits, k, msb, tokens, nbits, th, f, q, width, ctxk, bl)
    bits, k, msb, tokens, nbits, th, f, q, width, ctxk, bl = best
    table = E.write_codes(q)
    rows = C._table_rows(tokens, z, bl, mb, E.context_map(th), th.size + 1, ctxk)
    cum = np.zeros_like(f)
    np.cumsum(f[:, :-1], axis=1, out=cum[:, 1:])
    words = E.rans_encode_rows(tokens, rows, f, cum)
    raw, total = E.pack_raw_bits(z, nbits)
    return bits, b"".join([bytes([k << 4 | msb, th.size + 1]), th.astype(np.uint8).tobytes(),
                           bytes([n_mb, ctxk]), C._varint(width), C._varint(len(table)),
                           table.tobytes(), C._varint(words.size), words.astype("<u2").tobytes(),
                           raw.astype("<u8").tobytes()[:(total + 7) // 8]])


@settings(max_examples=60, deadline=None)
@given(r=st.one_of(wide, walk, edge).filter(lambda a: a.size > 0), level=st.integers(0, 9),
       matched=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_entropy_sections_are_those_of_the_kernels_one_by_one(r, level, matched, seed):
    n_mb = P.MATCH_BUCKETS if matched else 1
    mb = np.random.default_rng(seed).integers(0, n_mb, r.size).astype(np.uint8)
    preset = C.PRESETS[level]
    bits, emit = C._code_residuals(r, mb, n_mb, preset)
    assert (bits, emit()) == _ref_code_residuals(r, mb, n_mb, preset)


def _ref_own_estimate(x, level):
    """``C._own_estimate`` composed of the separate kernels it fuses, one call each."""
    pr = C.PRESETS[level]
    k, o, s, c = lpc = C._lpc_params(x, pr)
    tbits = C._tbits(x.size)
    r, mb = P.predict_fused(x, pr.block_size, k, o, s, c, 0, 0, tbits)
    best = C._estimate(r, mb, 1)
    runs = {(0, 0): (r, mb, 0.0, best)}
    for mh, t in pr.match:
        r2, mb2, gain = P.predict_fused_gain(x, pr.block_size, k, o, s, c, mh, t, tbits)
        e2 = C._estimate(r2, mb2, P.MATCH_BUCKETS) if gain > 0 else None
        runs[mh, t] = (r2, mb2, gain, e2)
        if e2 is not None:
            best = min(best, e2)
    return best + 8 * len(P.block_side_bytes(k, o, s, c)) + 64, (lpc, runs)


@settings(max_examples=60, deadline=None)
@given(x=signals, level=st.integers(0, C.MAX_LEVEL))
def test_own_estimate_is_its_kernels_one_by_one(x, level):
    # _own_analysis fuses the analysis, every match model's pass and estimate: the same floats
    est, (lpc, runs) = C._own_estimate(x, level)
    want, (want_lpc, want_runs) = _ref_own_estimate(x, level)
    assert est == want
    assert all(np.array_equal(a, b) for a, b in zip(lpc, want_lpc))
    assert runs.keys() == want_runs.keys()
    for key, (r, mb, gain, e) in runs.items():
        wr, wmb, wgain, we = want_runs[key]
        assert np.array_equal(r, wr) and np.array_equal(mb, wmb) and (gain, e) == (wgain, we)


@settings(max_examples=150, deadline=None)
@given(x=st.one_of(signals, arrays(np.int64, st.integers(1, 300), elements=st.one_of(
    st.integers(-5, 5), st.integers(-10**6, 10**6)))), cut=st.integers(0, 300))
def test_distinct_ranks_are_numpys_unique(x, cut):
    # the bitmap of the span (up to 4 n + 1024 words) and the sort beyond it, against np.unique
    offsets = np.array(sorted({0, min(cut, x.size), x.size}), np.int64)
    heads, hoff, ranks = C._distinct_ranks_batch(x, offsets)
    for j in range(offsets.size - 1):
        seg = x[offsets[j]:offsets[j + 1]]
        u, inv = np.unique(seg, return_inverse=True)
        got = heads[hoff[j]:hoff[j + 1]]
        assert got.size == u.size and np.array_equal(ranks[offsets[j]:offsets[j + 1]], inv.ravel())
        if u.size:  # the first value, then the differences (wrapped, as int64 arithmetic)
            assert got[0] == u[0] and np.array_equal(got[1:], (u[1:] - u[:-1]))


@settings(max_examples=100, deadline=None)
@given(r=signals, hybrid=st.sampled_from([(4, 2), (2, 2), (6, 2), (4, 3), (3, 1), (0, 0)]),
       nc=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_tokens_rows_raw_is_the_split_context_and_packing(r, hybrid, nc, seed):
    # the model coder's one pass against the kernels it fuses, called one by one
    from signals import entropy as E
    k, msb = hybrid
    rng = np.random.default_rng(seed)
    mb = rng.integers(0, P.MATCH_BUCKETS, r.size).astype(np.uint8)
    bl = E.token_bitlen(k, msb, E.alphabet_size(k, msb))
    cmap = rng.integers(0, nc, E.CTX_RANGE).astype(np.int64)
    tokens, rows, raw = (np.full(r.size + 3, 7, d) for d in (np.int32, np.int64, np.uint64))
    w, total = C._tokens_rows_raw(r, mb, k, msb, bl, cmap, nc, tokens, rows, raw)
    tokens, rows, raw = tokens[:r.size], rows[:r.size], raw[:w]
    z = C._zigzag_u64(r)
    want_t, nbits = E.hybrid_split(z, k, msb)
    want_raw, want_total = E.pack_raw_bits(z, nbits)
    assert np.array_equal(tokens, want_t) and tokens.dtype == np.int32
    assert np.array_equal(rows, cmap[E.context_stat(want_t, bl)] + nc * mb.astype(np.int64))
    assert total == want_total and np.array_equal(raw, want_raw)
