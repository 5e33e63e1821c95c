"""Bounded-alphabet coding: hybrid integers, table codes, context rANS (signals.entropy)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals import entropy as E

U64 = arrays(np.uint64, st.integers(0, 300), elements=st.integers(0, 2**64 - 1))
SMALL = arrays(np.uint64, st.integers(0, 300), elements=st.integers(0, 200))


def test_hybrid_golden():
    # k=4, msb=2: values below 16 are tokens; 16 = 0b10000 -> top bit 4, next two bits 00
    z = np.array([0, 15, 16, 23, 24, 2**64 - 1], np.uint64)
    tokens, nbits = E.hybrid_split(z, 4, 2)
    assert tokens.tolist() == [0, 15, 16, 17, 18, 16 + (63 - 4) * 4 + 3]
    assert nbits.tolist() == [0, 0, 2, 2, 2, 61]
    assert E.alphabet_size(4, 2) == 16 + 60 * 4 == tokens.max() + 1


@settings(max_examples=200, deadline=None)
@given(z=st.one_of(U64, SMALL), k=st.integers(0, E.MAX_K), msb=st.integers(0, E.MAX_MSB))
def test_hybrid_round_trip(z, k, msb):
    msb = min(msb, k)
    tokens, nbits = E.hybrid_split(z, k, msb)
    assert tokens.size == 0 or tokens.max() < E.alphabet_size(k, msb)
    raw, total = E.pack_raw_bits(z, nbits)
    back, ok = E.hybrid_merge(tokens, k, msb, np.append(raw, np.uint64(0)), total)
    assert ok and np.array_equal(back, z)
    assert np.array_equal(E.token_raw_bits(k, msb, E.alphabet_size(k, msb))[tokens], nbits)


@settings(max_examples=100, deadline=None)
@given(counts=arrays(np.int64, st.integers(1, 300), elements=st.integers(0, 10**9)))
def test_frequencies_sum_to_scale(counts):
    q = E.quantize_counts(counts)
    f = E.freqs_from_codes(q)
    nz = counts > 0
    if nz.any():
        assert f.sum() in (E.SCALE, E.SCALE - 1)  # SCALE - 1: a lone symbol keeps a cost
        assert (f[nz] >= 1).all() and f.max() < E.SCALE
    else:
        assert f.sum() == 0


@settings(max_examples=100, deadline=None)
@given(q=arrays(np.int64, st.tuples(st.integers(1, 6), st.integers(1, 40)),
                elements=st.integers(0, E.MAX_QCODE)))
def test_table_codes_round_trip(q):
    b = E.write_codes(q)
    back, used, ok = E.read_codes(b, *q.shape)
    assert ok and used == b.size and np.array_equal(back, q)


@settings(max_examples=100, deadline=None)
@given(tokens=arrays(np.int64, st.integers(0, 2000), elements=st.integers(0, 30)),
       n_rows=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_rans_rows_round_trip(tokens, n_rows, seed):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n_rows, tokens.size)
    counts = np.zeros((n_rows, 31), np.int64)
    np.add.at(counts, (rows, tokens), 1)
    f = E.freqs_from_code_rows(E.quantize_counts(counts))
    cum, lookup = E.build_tables(f)
    words = E.rans_encode_rows(tokens.astype(np.int32), rows, f, cum)
    # the decoder of the context statistic: one row per token here, so map stat -> row
    stat_rows = rows  # decode token by token with the same rows
    out = np.empty(tokens.size, np.int64)
    st_ = (int(words[0]) << 16) | int(words[1])
    pos = 2
    for i in range(tokens.size):
        r = stat_rows[i]
        slot = st_ & (E.SCALE - 1)
        s = lookup[r, slot]
        out[i] = s
        st_ = int(f[r, s]) * (st_ >> E.SCALE_BITS) + slot - int(cum[r, s])
        if st_ < E.RANS_L:
            st_ = (st_ << 16) | int(words[pos])
            pos += 1
    assert np.array_equal(out, tokens) and pos == words.size and st_ == E.RANS_L


def test_context_statistics():
    bl = E.token_bitlen(4, 2, E.alphabet_size(4, 2))
    t = np.array([0, 3, 1, 16], np.int32)
    # 2*b[i-1] + b[i-2] + b[i-3] with bit lengths 0, 2, 1, 5
    assert E.context_stat(t, bl).tolist() == [0, 0, 4, 4]
    z = np.array([0, 64, 64, 2**64 - 1], np.uint64)
    s = E.context_stat_ema(z, 2)
    assert s[0] == 0 and s[1] == 0 and s[2] > 0 and (s < E.CTX_RANGE).all()


@settings(max_examples=30, deadline=None)
@given(f=st.integers(1, E.SCALE - 1), n=st.integers(1, 70_000), c=st.integers(0, 1))
def test_no_token_costs_less_than_min_token_bits(f, n, c):
    # a run of one token of frequency f (the other slot(s) hold the rest of the scale)
    freqs = np.array([[E.SCALE - f, f]] if c else [[f, E.SCALE - f]], np.int64)
    cum, _ = E.build_tables(freqs)
    words = E.rans_encode_rows(np.full(n, c, np.int32), np.zeros(n, np.int64), freqs, cum)
    assert 16 * words.size + 64 >= n * E.min_token_bits(f)


def test_a_long_run_costs_less_than_its_information():
    # why min_token_bits is below -log2(f / SCALE): 70,000 tokens of frequency 462 take
    # 13,752 words (220,032 bits), 345 bits fewer than 70,000 * log2(4096 / 462) (a
    # 70,000-sample constant packet was refused by the batch decoder's old bound)
    f = 462
    freqs = np.array([[f, E.SCALE - f]], np.int64)
    cum, _ = E.build_tables(freqs)
    words = E.rans_encode_rows(np.zeros(70_000, np.int32), np.zeros(70_000, np.int64), freqs, cum)
    assert 16 * words.size + 64 < 70_000 * -np.log2(f / E.SCALE)
    assert 16 * words.size + 64 >= 70_000 * E.min_token_bits(f)
