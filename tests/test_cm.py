"""signals.cm: context mixing over symbols, exact in both directions; payload mode 6."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signals import cm
from signals.channel import CM_MODE, decode_channel, encode_channel

DATA = Path(__file__).resolve().parent / "data"


def round_trip(sym, m, order, values=None):
    u = np.arange(m) * 3 - 5 if values is None else values
    code = cm.cm_encode(np.asarray(sym, np.int64), u, order, 10**7)
    assert code is not None
    back = cm.cm_decode(code, len(sym), u, order)
    assert back.tolist() == list(sym)
    return code


# ---------------------------------------------------------------- small cases, by hand
def test_squash_and_stretch_are_inverse_and_monotone():
    t = cm._SQUASH_POINTS
    sq = [cm._squash(d, t) for d in range(-2047, 2048)]
    assert sq[0] == 1 and sq[-1] == 4095 and cm._squash(0, t) == 2048
    assert all(a <= b for a, b in zip(sq, sq[1:]))
    st_ = cm._stretch_table(t)
    assert all(cm._squash(int(st_[p]), t) >= p for p in range(1, 4095))


def test_binarisation_helpers():
    assert [cm._bitlen(z) for z in (0, 1, 2, 3, 4, 255, 256)] == [0, 1, 2, 2, 3, 8, 9]
    assert [cm._zz(r) for r in (0, -1, 1, -2, 2)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("order", [0, 1, 2])
def test_tiny_sequences(order):
    for sym, m in [([], 1), ([0], 1), ([0, 0, 0], 1), ([1, 0, 1, 1], 2), ([5, 5, 0, 7], 8)]:
        code = round_trip(sym, m, order)
        assert len(code) >= 4  # the flushed low end of the interval


def test_a_repeated_pattern_costs_little():
    sym = [3, 1, 4, 1, 5, 9, 2, 6] * 500
    code = round_trip(sym, 10, 0)
    assert 8 * len(code) / len(sym) < 0.2  # learned: far below log2(10) bits per symbol


def test_the_limit_gives_up_and_the_decoder_checks_lengths():
    sym, u = np.arange(1000) % 7, np.arange(7)
    assert cm.cm_encode(sym, u, 0, 3) is None
    code = cm.cm_encode(sym, u, 0, 10**6)
    with pytest.raises(ValueError, match="inconsistent"):
        cm.cm_decode(code[:-2], 1000, u, 0)
    with pytest.raises(ValueError, match="inconsistent"):
        cm.cm_decode(code + b"\x00", 1000, u, 0)
    with pytest.raises(ValueError, match="cannot fit"):
        cm.cm_decode(code[:8], 10**9, u, 0)  # checked before anything is allocated
    with pytest.raises(ValueError):
        cm.cm_decode(code, 1000, u, 3)
    with pytest.raises(ValueError):
        cm.cm_decode(code, 1000, np.arange((1 << cm.MAX_NB) + 1), 0)


def test_decoding_stops_past_the_decisions_a_code_can_hold():
    sym, u = np.arange(500) % 7, np.arange(7)
    code = cm.cm_encode(sym, u, 0, 10**6)
    buf = np.frombuffer(code, np.uint8).copy()
    out = np.zeros(500, np.int64)
    args = (0, u, cm.table_bits(500, 7), buf, True)
    rest = (False, 1, cm.NO_BLOCKS, cm.NO_BLOCKS, cm.NO_BLOCKS, cm.NO_COEFS)
    assert cm.cm_code(out, 500, 7, *args, cm._max_decisions(code), *rest)[1]
    assert out.tolist() == sym.tolist()
    assert not cm.cm_code(out, 500, 7, *args, 100, *rest)[1]  # 500 symbols need more than 100


def test_a_symbol_outside_the_alphabet_is_an_error():
    # the same code read with a smaller alphabet decodes some rank >= m, or fails otherwise
    code = cm.cm_encode(np.array([0, 9, 9, 3] * 50), np.arange(10), 1, 10**6)
    with pytest.raises(ValueError):
        cm.cm_decode(code, 200, np.arange(4), 1)


# ---------------------------------------------------------------- hypothesis
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.lists(st.integers(0, 10**6), max_size=300), st.sampled_from([0, 1, 2]))
def test_any_sequence_round_trips(m, raw, order):
    round_trip([v % m for v in raw], m, order)
    # extrapolations over values that are far apart, uneven, or at the ends of int64
    u = np.unique(np.array([(v * 7919) % (1 << 62) - (1 << 61) for v in range(m)], np.int64))
    if u.size == m:
        round_trip([v % m for v in raw], m, order, values=np.concatenate([[-(1 << 63)], u[1:]]))


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(0, (1 << 16) - 1), min_size=1, max_size=200), st.sampled_from([0, 1, 2]))
def test_the_largest_alphabet_round_trips(raw, order):
    round_trip(raw, 1 << 16, order)


# ---------------------------------------------------------------- payload mode 6
def test_level_9_uses_context_mixing_where_it_codes_smaller():
    from signals.channel import _encode_cm
    x = np.array([t * t % 13 * 100 for t in range(600)], np.int64)
    assert encode_channel(x, level=9)[0] in (CM_MODE, CM_MODE + 1)  # mode 6 or 7
    p = _encode_cm(x, 9, 10**7)
    assert p[0] == CM_MODE and len(p) < len(encode_channel(x, level=8)) + 8
    assert decode_channel(p, x.size).tolist() == x.tolist()
    for bad in (p[:-1], p[:3], p[:1] + b"\x01" + p[2:], p + b"\x00"):
        with pytest.raises(ValueError):
            decode_channel(bad, x.size)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.sampled_from([-(1 << 63), -7, 0, 5, 1 << 40, (1 << 63) - 1]), min_size=2,
                max_size=400))
def test_mode_6_round_trips_extreme_values(values):
    x = np.array(values, np.int64)
    assert decode_channel(encode_channel(x, level=9), x.size).tolist() == values


# ---------------------------------------------------------------- mode 7: over predictor residuals
def _params(x, orders=(8,)):
    from signals import predict as P
    return P.block_lpc_analyze(np.asarray(x, np.int64), 64, np.array(orders, np.int64), 14, True, 8)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=300), st.booleans())
def test_block_predictor_residuals_round_trip(values, lpc):
    x = np.array(values, np.int64)
    params = _params(x, (8,) if lpc else ())
    code = cm.cm_encode_lpc(x, 64, params, 10**7)
    assert code is not None
    assert cm.cm_decode_lpc(code, x.size, 64, params).tolist() == values


def test_block_predictor_extremes():
    for x in (np.zeros(1, np.int64), np.full(500, -7, np.int64),
              np.array([-(1 << 31), (1 << 31) - 1] * 100, np.int64)):
        params = _params(x)
        code = cm.cm_encode_lpc(x, 64, params, 10**7)
        assert cm.cm_decode_lpc(code, x.size, 64, params).tolist() == x.tolist()
    # residuals beyond the binarisation's bound: no code, the caller keeps another mode
    x = np.array([0, 1 << 62, -(1 << 62), 5] * 10, np.int64)
    assert cm.cm_encode_lpc(x, 64, _params(x, ()), 10**7) is None


def test_level_9_codes_a_sawtooth_over_predictor_residuals():
    from signals.channel import CM_LPC, _encode_cm_lpc
    x = np.array([t % 50 * 7 + t * 13 % 3 for t in range(800)], np.int64)
    p = encode_channel(x, level=9)
    assert p[0] == CM_LPC and decode_channel(p, x.size).tolist() == x.tolist()
    # mode 7 on any signal, chosen or not, decodes exactly
    y = np.cumsum(np.arange(3000) % 17 - 8) * 3
    q = _encode_cm_lpc(y, 9, 10**7)
    assert q[0] == CM_LPC and decode_channel(q, y.size).tolist() == y.tolist()
    for bad in (p[:-1], p[:4], p + b"\x00", p[:1] + b"\x00" + p[2:]):
        with pytest.raises(ValueError):
            decode_channel(bad, x.size)
    with pytest.raises(ValueError, match="cannot fit"):
        decode_channel(p, 10**9)
