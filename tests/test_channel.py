"""Round trips and damage for the per-channel payload (signals.channel)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals.channel import (
    ChannelModel,
    decode_channel,
    decode_packets,
    encode_channel,
    encode_packets,
    fit_channel_model,
)

I64 = st.integers(-2**63, 2**63 - 1)
any_ints = arrays(np.int64, st.integers(0, 200), elements=I64)
small_walk = arrays(np.int64, st.integers(0, 300), elements=st.integers(-40, 40)).map(np.cumsum)


def extremes():
    """Arrays that hit the edges of int64, int32 and uint64-as-int64."""
    i64 = np.iinfo(np.int64)
    i32 = np.iinfo(np.int32)
    return [
        np.zeros(0, np.int64), np.array([0]), np.array([i64.min]), np.array([i64.max]),
        np.full(1000, i64.min), np.array([i64.min, i64.max] * 50),
        np.array([i32.min, i32.max] * 50, np.int64),
        np.array([0, 2**64 - 1, 2**63, 1], np.uint64).view(np.int64),
        np.array([0, 2**28, 0, 2**28]),
        np.arange(-5000, 5000) * (2**40 + 3),
    ]


@pytest.mark.parametrize("level", [0, 2, 5, pytest.param(1, marks=pytest.mark.slow)]
                         + [pytest.param(lv, marks=pytest.mark.slow) for lv in (3, 4, 6, 7, 8, 9)])
def test_extremes_round_trip(level):
    for x in extremes():
        p = encode_channel(x, level=level)
        assert np.array_equal(decode_channel(p, x.size), x)


@settings(max_examples=100, deadline=None)
@given(x=st.one_of(any_ints, small_walk), level=st.integers(0, 5))
def test_round_trip_any_values(x, level):
    p = encode_channel(x, level=level)
    y = decode_channel(p, x.size)
    assert y.dtype == np.int64 and np.array_equal(y, x)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(x=st.one_of(any_ints, small_walk), level=st.integers(6, 9))
def test_round_trip_any_values_high_levels(x, level):
    p = encode_channel(x, level=level)
    assert np.array_equal(decode_channel(p, x.size), x)


repeats = st.tuples(arrays(np.int64, st.integers(1, 40), elements=st.integers(-3, 3)),
                    st.integers(2, 30), arrays(np.int64, st.integers(0, 20), elements=I64))


@settings(max_examples=60, deadline=None)
@given(parts=repeats, level=st.sampled_from([3, 5]))
def test_match_and_ranked_modes_round_trip(parts, level):
    """Repeated shapes (the match model) and sparse value sets (mode 5), with outliers mixed in."""
    shape, times, noise = parts
    x = np.concatenate([np.tile(np.cumsum(shape) * 1000, times), noise])
    p = encode_channel(x, level=level)
    assert np.array_equal(decode_channel(p, x.size), x)


def test_match_model_and_ranks_are_used():
    rng = np.random.default_rng(7)
    shape = np.cumsum(rng.integers(-9, 10, 300))
    x = np.tile(shape, 40)  # a repeating cycle: the match model codes it in well under a bit
    p = encode_channel(x)
    assert p[0] == 4 and 8 * len(p) / x.size < 0.5
    y = rng.integers(0, 50, 5000) * 977 + 13  # 50 distinct values far apart: ranks (mode 5)
    q = encode_channel(y)
    assert q[0] == 5 and 8 * len(q) / y.size < 6.6  # log2(50) = 5.64; the delta predictor is chosen
    assert np.array_equal(decode_channel(q, y.size), y)


def _match_head(payload):
    """Where the match parameters (mh, t, tbits, then the cascade byte) of a mode-4 payload
    start: after the predictor side."""
    assert payload[0] == 4
    pos = 1
    for _ in range(2):  # block size, then the side's length (varints)
        v = shift = 0
        while True:
            b = payload[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
    return pos + v


def _cascade_flag(payload):
    """The adaptive-cascade byte of a mode-4 payload (after the match parameters)."""
    return payload[_match_head(payload) + 3]


def test_a_match_table_above_what_writers_write_is_refused():
    """A match model's table of 2**24 entries (tbits 24) was accepted: 128 MiB filled before
    a sample, per payload (a file of 100 such columns decoded in 10 s against 0.05). Writers
    write at most 2**16 (MAX_TBITS)."""
    shape = np.cumsum(np.random.default_rng(7).integers(-9, 10, 300))
    x = np.tile(shape, 40)
    p = encode_channel(x)
    at = _match_head(p)
    assert p[at] > 0 and 10 <= p[at + 2] <= 16  # the match model is on
    assert np.array_equal(decode_channel(p, x.size), x)
    for tbits in (17, 24):
        forged = p[:at + 2] + bytes([tbits]) + p[at + 3:]
        with pytest.raises(ValueError, match="bad match parameters"):
            decode_channel(forged, x.size)


def _chirps(n=40000):
    """A chirp in noise, loud and faint: the cascade's estimated saving is ~0.34 bits/sample
    with the quieter noise, ~0.12 with the louder (below LMS_MIN_GAIN = 0.15)."""
    t = np.arange(n)
    sweep = np.sin(2 * np.pi * (0.01 + 0.05 * t / 40000) * t)
    loud = np.round(3000 * sweep + np.random.default_rng(0).normal(0, 20, n)).astype(np.int64)
    faint = np.round(1000 * sweep + np.random.default_rng(0).normal(0, 40, n)).astype(np.int64)
    return loud, faint


def test_default_levels_keep_the_cascade_only_where_it_saves_enough():
    loud, faint = _chirps()
    for x, at_5 in ((loud, True), (faint, False)):
        p5, p6 = encode_channel(x, level=5), encode_channel(x, level=6)
        assert (_cascade_flag(p5) != 0) == at_5
        assert _cascade_flag(p6) != 0  # level 6 keeps any saving of 1% or more
        assert np.array_equal(decode_channel(p5, x.size), x)
        assert np.array_equal(decode_channel(p6, x.size), x)


def test_default_levels_keep_the_cascade_only_where_it_saves_enough_on_short_inputs():
    # the same chirps, below SMALL_INPUT samples (_encode_small's bounded search, which
    # kept any cascade that saved a bit)
    loud, faint = _chirps(20000)
    for x, at_5 in ((loud, True), (faint, False)):
        p5 = encode_channel(x, level=5)
        assert (_cascade_flag(p5) != 0) == at_5
        assert np.array_equal(decode_channel(p5, x.size), x)


def test_models_keep_the_cascade_only_where_it_saves_enough():
    # chirps in noise, in packets of 1024: the model's cascade saves ~4.8 bits/sample on
    # the loud one, ~0.04 on the faint one (below min_cascade_gain = 0.15)
    t = np.arange(40000)
    chirp = np.sin(2 * np.pi * (0.01 + 0.05 * t / t.size) * t)
    rng = np.random.default_rng(0)
    loud = np.round(3000 * chirp + rng.normal(0, 20, t.size)).astype(np.int64)
    rng = np.random.default_rng(0)
    faint = np.round(60 * chirp + rng.normal(0, 100, t.size)).astype(np.int64)
    for x, kept in ((loud, True), (faint, False)):
        m = fit_channel_model([x], packet_size=1024, vocab_sizes=())
        st = next(s for s in m.stages_ if s["stage"] == "adaptive cascade")
        saving = (st["bits"] - st["bits_alternative"]) if st["kept"] == "off" else None
        assert (m.lms != 0) == kept, st
        if not kept:  # the runner-up was a cascade that saved something, but too little
            assert 0 < saving < 0.15 and st["min_gain"] == 0.15
            assert fit_channel_model([x], packet_size=1024, vocab_sizes=(),
                                     min_cascade_gain=0).lms != 0
        packets = [x[i:i + 1024] for i in range(0, 8192, 1024)]
        assert all(np.array_equal(a, b) for a, b in
                   zip(decode_packets(encode_packets(packets, m), [1024] * 8, m), packets))


def test_golden_small_cases():
    assert encode_channel(np.zeros(0, np.int64)) == b"\x00"
    # a constant: mode 1 and the zigzag varint (-3 -> 5)
    assert encode_channel(np.full(7, -3)) == b"\x01\x05"
    assert decode_channel(b"\x01\x05", 7).tolist() == [-3] * 7
    # raw fallback for incompressible data: mode 0, then little-endian int64
    x = np.array([1, -2**63])
    assert decode_channel(b"\x00" + x.astype("<i8").tobytes(), 2).tolist() == x.tolist()


def test_compresses_a_smooth_signal():
    t = np.arange(20000)
    x = np.round(1000 * np.sin(t / 50)).astype(np.int64)
    assert len(encode_channel(x)) * 8 / x.size < 3.0


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    train = [np.cumsum(rng.integers(-20, 21, 3000)) for _ in range(4)]
    return fit_channel_model(train)


@settings(max_examples=100, deadline=None)
@given(x=st.one_of(any_ints, small_walk))
def test_model_round_trip(model, x):
    p = encode_channel(x, model=model)
    assert np.array_equal(decode_channel(p, x.size, model=model), x)


def test_model_config_round_trip(model):
    cfg = json.loads(json.dumps(model.get_config()))
    m2 = ChannelModel.from_config(cfg)
    assert m2.content_id() == model.content_id()
    x = np.cumsum(np.random.default_rng(1).integers(-20, 21, 256))
    p = encode_channel(x, model=model)
    assert np.array_equal(decode_channel(p, 256, model=m2), x)
    assert len(p) * 8 / 256 < 7.5  # no tables in the packet


def test_model_payload_needs_the_model(model):
    x = np.cumsum(np.random.default_rng(2).integers(-20, 21, 256))
    with pytest.raises(ValueError, match="model"):
        decode_channel(encode_channel(x, model=model), 256)


@pytest.mark.parametrize("bad", [
    {"k": 99}, {"codes": "!!"}, {"thresholds": [5, 3]}, {"version": 2}, {"match": [1]},
    {"predictor": {"kind": 1, "order": 2, "shift": 3, "coefs": "x"}},
    {"predictor": {"kind": 1, "order": 2, "shift": 3, "coefs": [1, 2, 3]}},
    {"predictor": {"kind": 7, "order": 2, "shift": 3, "coefs": []}}, {"rows": 99}])
def test_bad_model_config_raises(model, bad):
    cfg = {**model.get_config(), **bad}
    with pytest.raises(ValueError):
        ChannelModel.from_config(cfg)



@pytest.mark.parametrize("path, value", [
    (("cascade",), 0.9), (("k",), 4.5), (("predictor", "order"), 1.5), (("predictor", "shift"), "3"),
    (("thresholds",), [1.5]), (("match",), [0.0, 0]), (("rows",), 2.0),
    (("predictor", "coefs"), [10**30]), (("cascade",), True), (("k",), False)])
def test_a_model_config_number_that_is_not_an_integer_is_refused(model, path, value):
    """A float or a string where the config holds an integer is refused (``int`` truncated
    ``"cascade": 0.9`` to no cascade, and a coefficient beyond int64 raised a raw
    OverflowError)."""
    cfg = json.loads(json.dumps(model.get_config()))
    d = cfg
    for key in path[:-1]:
        d = d[key]
    d[path[-1]] = value
    with pytest.raises(ValueError, match="malformed channel model config"):
        ChannelModel.from_config(cfg)

def test_a_table_row_of_more_tokens_than_rans_slots_is_refused(model):
    """A row of more than 4096 nonzero codes (k = 12, msb = 4: 4928 tokens) cannot sum to the
    4096 slots: its frequencies summed above them and the decode table dropped the symbols
    past slot 4095 without a word. Payload tables, model files and fitting refuse it."""
    import base64

    from signals import entropy as E
    q = np.ones((1, 4100), np.int64)
    assert not E.read_codes(E.write_codes(q), 1, 4100)[2]
    assert E.read_codes(E.write_codes(q[:, :4096]), 1, 4096)[2]
    with pytest.raises(ValueError, match="4928 tokens, at most 4096"):
        fit_channel_model([np.arange(3000) % 17], k=12, msb=4)
    cfg = json.loads(json.dumps(model.get_config()))
    rows = cfg["rows"]
    cfg.update(k=12, msb=4, codes=base64.b64encode(bytes([1]) * (rows * 4928)).decode())
    with pytest.raises(ValueError, match="4928 tokens a table row, above the 4096 slots"):
        ChannelModel.from_config(cfg)


def _payloads():
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.integers(-30, 31, 3000))
    return x, [encode_channel(x, level=lv) for lv in (0, 5, 9)]


def test_damaged_payloads_raise_value_error():
    x, payloads = _payloads()
    rng = np.random.default_rng(4)
    for p in payloads:
        for cut in range(0, len(p), max(1, len(p) // 40)):  # truncations
            with pytest.raises(ValueError):
                decode_channel(p[:cut], x.size)
        with pytest.raises(ValueError):
            decode_channel(p + b"\x00", x.size)
        for _ in range(200):  # random byte flips: an error or (rarely) other samples, never a crash
            b = bytearray(p)
            i = int(rng.integers(len(b)))
            b[i] ^= int(rng.integers(1, 256))
            try:
                y = decode_channel(bytes(b), x.size)
            except ValueError:
                continue
            assert y.shape == x.shape


def test_wrong_counts_raise():
    x, payloads = _payloads()
    for p in payloads:
        for n in (0, x.size - 1, x.size + 1, 10**15):
            with pytest.raises(ValueError):
                decode_channel(p, n)


def test_not_integers_raise():
    with pytest.raises(ValueError):
        encode_channel(np.array([0.5, 1.0]))
    with pytest.raises(ValueError):
        encode_channel(np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError):
        encode_channel(np.arange(5), level=10)


def test_packets_batch_matches_single_and_isolates_damage(model):
    from signals.channel import decode_packets, encode_packets
    rng = np.random.default_rng(5)
    pk = [np.cumsum(rng.integers(-20, 21, int(rng.integers(0, 300)))) for _ in range(50)]
    pk += [np.array([2**63 - 1, -2**63, 0]), np.zeros(0, np.int64), np.full(9, 7)]
    out = encode_packets(pk, model)
    for o, p in zip(out, pk):
        assert np.array_equal(decode_channel(o, p.size, model=model), p)
    back = decode_packets(out, [p.size for p in pk], model)
    assert all(np.array_equal(a, b) for a, b in zip(back, pk))
    bad = list(out)
    bad[3] = bad[3][:-2]  # truncated
    bad[7] = b"\x03\xff"  # a varint with no end
    with pytest.raises(ValueError, match="packet 3"):
        decode_packets(bad, [p.size for p in pk], model)
    got = decode_packets(bad, [p.size for p in pk], model, on_error="none")
    assert got[3] is None and got[7] is None
    assert all(np.array_equal(got[j], pk[j]) for j in range(len(pk)) if j not in (3, 7))
    with pytest.raises(ValueError):
        decode_packets(out[:1], [10**15], model)
    raw = encode_packets([np.arange(100)], model, level=0)  # (a raw payload of 2**61 samples:
    # 8 n wrapped in the kernel's size check, and numba's allocation error failed the batch)
    got = decode_packets(raw + [b"\x00"], [100, 2**61], model, on_error="none")
    assert np.array_equal(got[0], np.arange(100)) and got[1] is None
    for on_error in ("raise", "none"):  # a negative count is the caller's error, not a packet's
        with pytest.raises(ValueError, match="negative sample count"):
            decode_packets(out[:3], [pk[0].size, -1, pk[2].size], model, on_error=on_error)



@pytest.mark.parametrize("value", [7, -2**63, 2**63 - 1])
def test_a_long_constant_under_a_model_codes_in_a_few_hundred_bytes(model, value):
    """A constant above CONST_MAX samples (an idle channel) under a model: mode 1 is kept for
    shorter ones (the batch decoder bounds a payload's count by its bytes), and the model's
    tables coded it in 128,774 bytes for 200,000 samples (a review). Now mode 4 with a fixed
    predictor: the same bytes one at a time and in a batch, at every level; each decodes."""
    from signals.channel import CONST_MAX, decode_packets, encode_packets
    c = np.full(200_000, value, np.int64)
    xs = [c[:10], c, c[:CONST_MAX], c[:CONST_MAX + 1]]
    for level in (0, 5, 9):
        one = [encode_channel(x, model=model, level=level) for x in xs]
        assert encode_packets(xs, model, level=level) == one
        assert [p[0] for p in one] == [1, 4, 1, 4] and len(one[1]) < 500
        back = decode_packets(one, [x.size for x in xs], model)
        assert all(np.array_equal(a, x) for a, x in zip(back, xs))
        assert all(np.array_equal(decode_channel(p, x.size, model=model), x) for p, x in zip(one, xs))

def test_model_fits_real_fixture():
    """A model fitted on the first part of a real ECG codes packets of the rest below 7 bits."""
    from pathlib import Path
    x = np.load(Path(__file__).parent / "data" / "pywt_ecg_small.npz")["data"].astype(np.int64)
    m = fit_channel_model([x[:700]])
    pk = [x[i:i + 64] for i in range(700, x.size, 64)]
    payloads = [encode_channel(p, model=m) for p in pk]
    assert all(np.array_equal(decode_channel(b, p.size, model=m), p) for b, p in zip(payloads, pk))
    assert 8 * sum(map(len, payloads)) / sum(p.size for p in pk) < 7.0


def test_crafted_nested_ranked_payload_raises_value_error():
    inner = b"\x01\x02"  # a constant payload
    p = inner
    for _ in range(3000):  # deeper than Python's recursion limit
        p = b"\x05\x02" + bytes([len(p) & 0x7F | (0x80 if len(p) > 127 else 0)]) + \
            (bytes([len(p) >> 7]) if len(p) > 127 else b"") + p
        if len(p) > 16000:
            break
    with pytest.raises(ValueError):
        decode_channel(p, 10)
    with pytest.raises(ValueError):
        decode_channel(b"\x05\x02\x02\x01\x02" + b"\x05\x02\x02\x01\x02\x01\x00", 10)


CONSTANTS = st.tuples(I64, st.integers(1, 300)).map(lambda vn: np.full(vn[1], vn[0], np.int64))


@settings(max_examples=100, deadline=None)
@given(xs=st.lists(st.one_of(CONSTANTS, any_ints, small_walk), max_size=8))
def test_packets_batch_with_constants_round_trip(model, xs):
    """Constant packets are coded as constants (mode 1) by the batch kernel and by the single
    call alike, and the batch decoder reads them (full int64 range, one sample, empty)."""
    from signals.channel import CONST, decode_packets, encode_packets
    xs = xs + [np.array([-2**63]), np.array([2**63 - 1]), np.full(5, -2**63), np.full(3, 2**63 - 1),
               np.zeros(0, np.int64), np.full(4096, -1)]
    for level in (0, 5):
        out = encode_packets(xs, model, level=level)
        assert out == [encode_channel(x, model=model, level=level) for x in xs]
        back = decode_packets(out, [x.size for x in xs], model)
        assert all(np.array_equal(a, b) for a, b in zip(back, xs))
        for x, o in zip(xs, out):
            if x.size > 1 and (x == x[0]).all():
                assert o[0] == CONST and len(o) <= 11
            assert np.array_equal(decode_channel(o, x.size, model=model), x)


def test_packets_batch_constant_payloads_damaged(model):
    """A damaged constant payload fails in the batch as it does alone; others still decode."""
    from signals.channel import decode_packets
    good = b"\x01\x04"  # the constant 2
    bad = [b"\x01", b"\x01\x80", b"\x01\x04\x00", b"\x01" + b"\xff" * 9 + b"\x02", good,
           b"\x01" + b"\xff" * 9 + b"\x01"]  # the last: 2**64 - 1, zigzag of -2**63
    got = decode_packets(bad, [3] * len(bad), model, on_error="none")
    assert got[:4] == [None] * 4
    assert got[4].tolist() == [2, 2, 2] and got[5].tolist() == [-2**63] * 3
    for p, g in zip(bad, got):
        try:
            one = decode_channel(p, 3, model=model).tolist()
        except ValueError:
            one = None
        assert one == (None if g is None else g.tolist())
    assert decode_packets([good], [0], model, on_error="none") == [None]
    # a long constant: the model's payload, whose bytes bound its count (the decoder refuses a
    # count its bytes cannot hold, a constant's too)
    from signals.channel import CONST, CONST_MAX, encode_packets
    big = [np.full(CONST_MAX + 1, 7)]
    for level in (0, 5):
        (out,) = encode_packets(big, model, level=level)
        assert out[0] != CONST and np.array_equal(decode_packets([out], [big[0].size], model)[0],
                                                  big[0])
    assert decode_packets([good], [10**7], model, on_error="none") == [None]


def test_own_gain_hint(model):
    """fit_channel_model records how much long packets gained from their own coding; the
    hint is in the config (not in the payloads), and a low one skips the own coding of long
    packets that the model codes at its usual cost."""
    from signals.channel import OWN_GAIN_MIN, OWN_TRY_GAIN, SHORT_FALLBACK_LEVEL, encode_packets
    rng = np.random.default_rng(3)
    walk = [np.cumsum(rng.integers(-20, 21, 20000))]
    m = fit_channel_model(walk, packet_size=1024)
    assert m.own_gain is not None and 0 <= m.own_gain < OWN_GAIN_MIN < OWN_TRY_GAIN
    back = ChannelModel.from_config(json.loads(json.dumps(m.get_config())))
    assert back.own_gain == m.own_gain and back.content_id() == m.content_id()
    old = ChannelModel.from_config({k: v for k, v in m.get_config().items() if k != "own_gain"})
    assert old.own_gain is None  # a model fitted before the hint: every long packet may try
    pk = [np.cumsum(rng.integers(-20, 21, 4096)) for _ in range(3)]
    assert encode_packets(pk, m) == encode_packets(pk, m, level=0)
    # a periodic signal, far smaller on its own than under a model of noise: tried where the
    # hint is absent, not where it is low (the model's cost is below fallback_bits)
    import dataclasses
    noise = fit_channel_model([rng.integers(-1000, 1000, 20000)], packet_size=1024)
    saw = [np.tile(np.arange(0, 1000, 37), 200)[:4096]]
    plain = encode_packets(saw, noise, level=0)
    tried = encode_packets(saw, dataclasses.replace(noise, own_gain=None, fallback_bits=64.0))
    assert len(tried[0]) < len(plain[0]) / 4
    assert encode_packets(saw, dataclasses.replace(noise, own_gain=0.0, fallback_bits=64.0)) == plain
    # (a gain that fits the level hint, OWN_GAIN_MIN, but is too small for every long packet to
    # try: as a low one)
    assert encode_packets(saw, dataclasses.replace(noise, own_gain=OWN_TRY_GAIN / 2,
                                                   fallback_bits=64.0)) == plain
    assert encode_packets(saw, dataclasses.replace(noise, own_gain=OWN_TRY_GAIN,
                                                   fallback_bits=64.0)) == tried
    # a batch of 32 long packets: the probes (packets 0 and 16) gain, so all try (at
    # SHORT_FALLBACK_LEVEL: the hint says that own coding did not pay)
    many = saw * 32
    low, none = (dataclasses.replace(noise, own_gain=g, fallback_bits=64.0) for g in (0.0, None))
    at2 = dataclasses.replace(none, own_level=SHORT_FALLBACK_LEVEL)
    assert encode_packets(many, low) == encode_packets(many, at2) == encode_packets(saw, at2) * 32
    assert len(encode_packets(saw, at2)[0]) < len(plain[0]) / 4
    # ... and where they do not gain, none of the others tries
    walks = [np.cumsum(rng.integers(-20, 21, 1024)) for _ in range(32)]
    assert encode_packets(walks, m) == encode_packets(walks, m, level=0)
    # ... also where a share of the batch is costly (other data than the model's): the costly
    # packets try, the others only where the probes gained
    mixed = walks + [np.tile(np.arange(0, 1000, 37), 200)[:1024]] * 8
    plain = encode_packets(mixed, m, level=0)
    costly_j = [j for j, (b, p) in enumerate(zip(plain, mixed))
                if 8 * len(b) > m.fallback_bits * p.size + 64]
    assert len(costly_j) >= 0.2 * len(mixed)
    coded = encode_packets(mixed, m)
    assert all(coded[j] == plain[j] for j in range(len(mixed)) if j not in costly_j)
    assert all(len(coded[j]) < len(plain[j]) / 2 for j in range(32, 40))
    # a batch whose long packets are mostly costly under the model: all try
    costly = dataclasses.replace(noise, own_gain=0.0, fallback_bits=1.0)
    mixed = saw * 4 + [np.arange(4096) * 0 + np.arange(4096) % 7]
    assert encode_packets(mixed, costly) == encode_packets(
        mixed, dataclasses.replace(noise, own_gain=None, own_level=SHORT_FALLBACK_LEVEL,
                                   fallback_bits=1.0))
    with pytest.raises(ValueError, match="own_gain"):
        ChannelModel.from_config(m.get_config() | {"own_gain": 2.0})


def test_own_level_hint():
    """fit_channel_model keeps the lowest level of a packet's own coding that codes the
    validation packets within OWN_LEVEL_SLACK of the fallback level's bits: level 1 where the
    packets only need tables of their own, the fallback level where their sparse values need
    the ranks (mode 5). The hint is in the config (checked), and it caps the own coding's level
    below OWN_SEARCH_LEVEL."""
    from signals.channel import (
        FALLBACK_LEVEL,
        OWN_GAIN_MIN,
        OWN_SEARCH_LEVEL,
        RANKED,
        SHORT_FALLBACK_LEVEL,
        decode_packets,
        encode_packets,
    )
    rng = np.random.default_rng(5)

    def walks(n_packets, step=1):  # random walks of three spreads, one a packet
        return np.concatenate([np.cumsum(rng.integers(-s, s + 1, 1024)) * step
                               for s in rng.choice([1, 3, 300], n_packets)])

    dense = fit_channel_model([walks(30)], packet_size=1024)
    sparse = fit_channel_model([walks(30, 7)], packet_size=1024)  # values 7 apart
    assert (dense.own_level, sparse.own_level) == (1, FALLBACK_LEVEL)
    for m, other in ((dense, FALLBACK_LEVEL), (sparse, FALLBACK_LEVEL - 1)):
        last = m.stages_[-1]
        assert last["stage"] == "a packet's own coding (packets of 1024)"
        assert (last["kept"], last["alternative"]) == (f"level {m.own_level}", f"level {other}")
    assert sparse.stages_[-1]["bits"] < sparse.stages_[-1]["bits_alternative"]
    back = ChannelModel.from_config(json.loads(json.dumps(dense.get_config())))
    assert back.own_level == 1 and back.content_id() == dense.content_id()
    old = ChannelModel.from_config({k: v for k, v in dense.get_config().items()
                                    if k != "own_level"})
    assert old.own_level is None  # a model fitted before the hint: the fallback level
    for bad in (0, FALLBACK_LEVEL + 1, 1.0, True, "1"):
        with pytest.raises(ValueError, match="own_level"):
            ChannelModel.from_config(dense.get_config() | {"own_level": bad})
    pk = [walks(1) for _ in range(6)]
    coded = encode_packets(pk, dense)
    assert coded == encode_packets(pk, old, level=1) != encode_packets(pk, dense, level=0)
    assert all(np.array_equal(a, b) for a, b in zip(decode_packets(coded, [1024] * 6, dense), pk))
    # from OWN_SEARCH_LEVEL the hint does not apply
    assert encode_packets(pk, dense, level=OWN_SEARCH_LEVEL) == encode_packets(
        pk, old, level=OWN_SEARCH_LEVEL)
    pk7 = [walks(1, 7) for _ in range(6)]
    assert any(p[0] == RANKED for p in encode_packets(pk7, sparse))
    # without the hint, where own coding did not pay on the validation split (own_gain below
    # OWN_GAIN_MIN), a costly packet's own coding runs at SHORT_FALLBACK_LEVEL: no ranks
    import dataclasses
    costly = dataclasses.replace(sparse, own_level=None, fallback_bits=0.5)
    unmeasured = encode_packets(pk7, dataclasses.replace(costly, own_gain=None))
    low = encode_packets(pk7, dataclasses.replace(costly, own_gain=OWN_GAIN_MIN / 2))
    assert low == encode_packets(pk7, dataclasses.replace(costly, own_gain=None,
                                                          own_level=SHORT_FALLBACK_LEVEL))
    assert any(p[0] == RANKED for p in unmeasured) and not any(p[0] == RANKED for p in low)
    assert all(np.array_equal(a, b) for a, b in zip(decode_packets(low, [1024] * 6, sparse), pk7))


_OWN_BASE = fit_channel_model([np.cumsum(np.random.default_rng(2).integers(-9, 10, 3000))],
                              packet_size=256)


@settings(max_examples=30, deadline=None)
@given(st.lists(arrays(np.int64, st.integers(1, 700), elements=st.integers(-3000, 3000)),
                min_size=1, max_size=5),
       st.sampled_from([(0, 1, 0), (0, 3, 0), (2, 5, 0), (0, 1, 1), (2, 3, 2), (0, 2, 3)]),
       st.data())
def test_own_tables_of_many_packets_in_one_call(packets, predictor, data):
    """The packets' own tables (mode 4 with the model's fixed or lag predictor and cascade) coded
    in one kernel call are the payloads of :func:`_own_tables`, packet by packet, for any
    selection of the packets; each decodes. With a bound per packet, a payload is left out
    (None) only where it would not have been shorter than its bound."""
    import dataclasses

    from signals.channel import _own_tables, _own_tables_many, _starts
    kind, order, lms = predictor
    m = dataclasses.replace(_OWN_BASE, kind=kind, order=order, lms=lms,
                            coefs=np.zeros(0, np.int64), shift=0)
    x = np.concatenate(packets)
    offsets = _starts([p.size for p in packets])
    sel = data.draw(st.lists(st.integers(0, len(packets) - 1), unique=True), label="sel")
    got = _own_tables_many(x, offsets, sel, m)
    assert sorted(got) == sorted(sel)
    for j in sel:
        assert got[j] == _own_tables(packets[j], m)
        assert np.array_equal(decode_channel(got[j], packets[j].size), packets[j])
    # bounds around each payload's length: the estimate leaves out only payloads not shorter
    bounds = [len(got[j]) + data.draw(st.integers(-60, 40), label="bound") for j in sel]
    cut = _own_tables_many(x, offsets, sel, m, bounds)
    for j, bound in zip(sel, bounds):
        assert cut[j] == got[j] or (cut[j] is None and len(got[j]) >= bound)
    # (and it does leave them out: well past the payload, by its margin of 0.0932 bits a
    # sample, the estimate's distance to the body and a few bytes of slack)
    far = _own_tables_many(x, offsets, sel, m, [
        len(got[j]) - 16 - int(0.0932 * packets[j].size / 8) for j in sel])
    assert all(far[j] is None for j in sel)


@settings(max_examples=30, deadline=None)
@given(st.lists(arrays(np.int64, st.integers(0, 700), elements=st.integers(-3000, 3000)),
                min_size=1, max_size=5), st.data())
def test_model_payloads_are_left_out_only_where_they_cannot_be_shorter(packets, data):
    """The batch encoder with a bound per packet (the payload of the model's ranked stage to
    beat) gives each packet's model payload, or none where that payload would not have been
    shorter than its bound; well below the payload, none."""
    from signals.channel import MODEL, _starts
    encode = _OWN_BASE.batch_kernels()[0]
    x = np.concatenate(packets)
    offsets = _starts([p.size for p in packets])
    buf, off = encode(x, offsets, np.zeros(0, np.int64))
    full = [buf[a:b].tobytes() for a, b in zip(off[:-1], off[1:])]
    bounds = np.array([len(f) + data.draw(st.integers(-40, 40), label="bound") for f in full])
    buf, off = encode(x, offsets, bounds)
    for j, (a, b) in enumerate(zip(off[:-1], off[1:])):
        assert buf[a:b].tobytes() == full[j] or (a == b and len(full[j]) >= bounds[j])
    low = np.array([len(f) - 12 - int(0.12 * p.size / 8) for f, p in zip(full, packets)])
    buf, off = encode(x, offsets, low)
    for j in range(len(packets)):  # (all left out but constants and raw payloads)
        assert off[j + 1] == off[j] or full[j][0] != MODEL


def test_own_tables_are_left_out_only_where_they_cannot_be_shorter():
    """A packet whose tokens keep the rANS state low codes below the tables' ideal code lengths
    (here its body is 8 bits shorter than the estimate, which held 64 bits less than the body
    on ordinary data): its own tables, one byte below the bound, are still coded, and
    :func:`_own_or` keeps them (before the margin of 0.0932 bits a token, both were lost)."""
    import dataclasses
    from pathlib import Path

    from signals.channel import _own_or, _own_tables, _own_tables_many
    crafted = Path(__file__).parent / "data" / "crafted"
    x = np.load(crafted / "own_tables_rans_shortfall.npz")["x"].astype(np.int64)
    m = dataclasses.replace(_OWN_BASE, kind=0, order=0, lms=0, coefs=np.zeros(0, np.int64),
                            shift=0)
    own = _own_tables(x, m)
    assert np.array_equal(decode_channel(own, x.size), x)
    assert _own_tables_many(x, np.array([0, x.size]), [0], m, [len(own) + 1])[0] == own
    assert _own_tables_many(x, np.array([0, x.size]), [0], m, [len(own)])[0] in (own, None)
    quick = dataclasses.replace(m, own_search=False, fallback_bits=64.0, own_level=None)
    coded = bytes(len(own) + 1)
    assert _own_or(x, coded, 3, quick) == own

def test_own_coding_of_sparse_packets(model):
    """A sparse packet's own coding codes mode 4 and mode 5 only where their estimates are near
    (RANK_SURE, RANK_DOUBT): with both always coded, the same payloads here (where one of the
    two clearly wins, and where they are near); each decodes."""
    import dataclasses

    import signals.channel as C
    from signals.channel import decode_packets, encode_packets
    model = dataclasses.replace(model, own_gain=None)  # (no hint: FALLBACK_LEVEL, with ranks)
    rng = np.random.default_rng(5)
    walk = np.cumsum(rng.integers(-20, 21, 4096))
    packets = [walk * 97,  # sparse, ranks far smaller
               np.repeat(rng.integers(0, 10**6, 8), 512),  # sparse steps
               (walk // 8) * 3,  # sparse, dense gaps: mode 4 of x
               rng.choice([0, 5, 1000, 2000], 4096),  # sparse noise
               walk]  # not sparse
    got = encode_packets(packets, model)
    assert got[0][0] == C.RANKED and got[4][0] != C.RANKED
    both = C.RANK_SURE, C.RANK_DOUBT
    try:
        C.RANK_SURE, C.RANK_DOUBT = 0.0, np.inf  # every candidate coded
        assert encode_packets(packets, model) == got
    finally:
        C.RANK_SURE, C.RANK_DOUBT = both
    back = decode_packets(got, [p.size for p in packets], model)
    assert all(np.array_equal(a, b) for a, b in zip(packets, back))


@pytest.fixture(scope="module")
def bound_models():
    """Models whose tables' largest frequency is low (noise) and high (a flat line with rare
    steps): the batch decoder bounds a model payload's count with it."""
    rng = np.random.default_rng(3)
    noise = fit_channel_model([rng.integers(-2**20, 2**20, 4000) for _ in range(2)])
    flat = fit_channel_model([np.repeat(rng.integers(0, 3, 80), 50) for _ in range(2)])
    return noise, flat


RAMPS = st.tuples(st.integers(-2**62, 2**62), st.integers(-3, 3), st.integers(0, 20_000)).map(
    lambda a: a[0] + a[1] * np.arange(a[2], dtype=np.int64))


@settings(max_examples=40, deadline=None)
@given(xs=st.lists(st.one_of(RAMPS, CONSTANTS, any_ints, small_walk), min_size=1, max_size=6),
       level=st.sampled_from([0, 5]))
def test_packets_batch_reads_what_the_single_decoder_reads(bound_models, xs, level):
    """Whatever the model's tables (the count bound of a model payload comes from them), the
    batch decoder gives back every packet that decode_channel reads, in every mode the
    encoders write (long ramps: very few rANS words a sample; noise under a flat model: the
    packet's own coding, decoded by the general reader); a count one off fails that packet
    alone, and a count far beyond its bytes is refused."""
    from signals.channel import decode_packets, encode_packets
    xs = xs + [np.zeros(0, np.int64), np.array([-2**63]), np.arange(30_000) % 2]
    for m in bound_models:
        out = encode_packets(xs, m, level=level)
        out += [encode_channel(x, model=m, level=level) for x in xs]
        ns = [x.size for x in xs] * 2
        back = decode_packets(out, ns, m)
        assert all(np.array_equal(a, x) for a, x in zip(back, xs + xs))
        for j in range(len(xs)):
            wrong = list(ns)
            wrong[j] += 1
            got = decode_packets(out, wrong, m, on_error="none")
            assert got[j] is None or got[j].size == wrong[j]  # (a constant takes any count)
            assert all(np.array_equal(g, x) for k, (g, x) in enumerate(zip(got, xs + xs))
                       if k != j)
        far = decode_packets(out[:1], [2**40], m, on_error="none")
        assert far == [None]


@settings(max_examples=300, deadline=None)
@given(v=st.one_of(
    st.lists(st.integers(-2**63, 2**63 - 1), min_size=2, max_size=60, unique=True),
    st.lists(st.integers(-40, 40), min_size=2, max_size=60, unique=True),
    st.lists(st.integers(2**53 - 50, 2**53 + 50), min_size=2, max_size=60, unique=True),
    st.lists(st.integers(0, 1), min_size=2, max_size=2, unique=True)))
def test_dense_gaps_as_numpy(v):
    """_dense_gaps (mode 5's density test, on the integers) finds what numpy's median and mean
    of the gaps find, or leaves the case to them (-1: spans from 2**53)."""
    from signals.channel import _dense_gaps
    u = np.array(sorted(v), np.int64)
    got = _dense_gaps(u)
    with np.errstate(over="ignore"):
        gaps = np.diff(u)
    want = int(np.median(gaps) < 2 and gaps.mean() < 4)
    assert got == want or (got == -1 and int(u[-1]) - int(u[0]) >= 2**53)


# ---------------------------------------------------------------- plans (a CSV's later frames)
def test_models_take_the_sign_data_lms_unless_an_nlms_saves_what_a_cascade_must_save():
    """Real speech (tests/data/speech_0880.wav) in packets of 1024: variant 1 codes the
    validation split 0.006 bits/sample smaller than variant 4, which decodes in a fraction of
    its time: the model keeps variant 4 (an NLMS must save min_cascade_gain more), and
    variant 1 where any saving counts."""
    import wave
    from pathlib import Path
    with wave.open(str(Path(__file__).parent / "data" / "speech_0880.wav")) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.int64)
    m = fit_channel_model([x], packet_size=1024, vocab_sizes=())
    st = next(s for s in m.stages_ if s["stage"] == "adaptive cascade")
    assert m.lms == 4 and st["kept"] == "variant 4" and st["min_gain"] == 0.15
    assert st["alternative"] == "variant 1" and 0 < st["bits"] - st["bits_alternative"] < 0.15
    m0 = fit_channel_model([x], packet_size=1024, vocab_sizes=(), min_cascade_gain=0)
    assert m0.lms == 1
    packets = [x[i:i + 1024] for i in range(0, 8192, 1024)]
    for mm in (m, m0):
        assert all(np.array_equal(a, b) for a, b in
                   zip(decode_packets(encode_packets(packets, mm), [1024] * 8, mm), packets))



@pytest.fixture(scope="module", params=[4, 1, 2, 3])
def cascade_model(model, request):
    """``model`` (a fixed predictor) with an adaptive cascade: the sign-data LMS (variant 4),
    or an NLMS (variants 1-3)."""
    import dataclasses
    return dataclasses.replace(model, lms=request.param)


@settings(max_examples=40, deadline=None)
@given(xs=st.lists(st.one_of(small_walk, any_ints), min_size=1, max_size=6), data=st.data())
def test_cascade_packets_in_the_batch_decoder_as_alone(cascade_model, xs, data):
    """A model with an adaptive cascade: the batch decoder (which decodes variant 4's payloads
    in place, and an NLMS's in three passes) gives back what decode_channel gives for each
    packet, damaged ones too (a changed byte or a cut tail: the same samples, or an error for
    that packet alone)."""
    from signals.channel import MODEL, decode_packets, encode_packets
    m = cascade_model
    xs = xs + [np.cumsum(np.random.default_rng(1).integers(-20, 21, 500))]  # (one model payload
    # at least: the kernel's path of the cascade)
    out = encode_packets(xs, m, level=0)
    assert m.mh == 0 and m.lms and out[-1][0] == MODEL
    assert all(np.array_equal(a, x) for a, x in zip(decode_packets(out, [x.size for x in xs], m), xs))
    bad = list(out)
    for j, p in enumerate(out):
        if len(p) > 1 and data.draw(st.booleans(), label=f"damage {j}"):
            at = data.draw(st.integers(1, len(p) - 1), label=f"at {j}")
            cut = data.draw(st.booleans(), label=f"cut {j}")
            bad[j] = p[:at] if cut else p[:at] + bytes([p[at] ^ 0x5A]) + p[at + 1:]
    got = decode_packets(bad, [x.size for x in xs], m, on_error="none")
    for b, x, g in zip(bad, xs, got):
        try:
            alone = decode_channel(b, x.size, model=m)
        except ValueError:
            alone = None
        assert (g is None) == (alone is None)
        assert g is None or np.array_equal(g, alone)

def test_a_replaced_model_builds_its_tables_and_kernels_again(model):
    """dataclasses.replace of a model that has coded (its tables and bound kernels built)
    gives a model that codes with its own fields: the copy took the original's bound
    kernels, and decoded a variant-4 packet as a packet without the cascade."""
    import dataclasses

    from signals.channel import decode_channel, decode_packets, encode_packets
    x = np.cumsum(np.random.default_rng(3).integers(-20, 21, 500))
    encode_packets([x], model, level=0)  # (the original's caches are built)
    other = dataclasses.replace(model, lms=4)
    out = encode_packets([x], other, level=0)
    assert np.array_equal(decode_channel(out[0], x.size, model=other), x)
    assert np.array_equal(decode_packets(out, [x.size], other)[0], x)


def test_a_payload_plan_names_its_choices():
    from signals.channel import CODED2, Plan, payload_plan
    assert payload_plan(encode_channel(np.full(50, 7)), 50) is None  # a constant: mode 1
    assert payload_plan(b"", 0) is None and payload_plan(b"\x04\xff", 10) is None  # unparsed
    x = np.arange(100, dtype=np.int64) * 3  # a ramp: a fixed predictor, no match model
    payload = encode_channel(x, level=1)
    assert payload_plan(payload, 100) == Plan(CODED2, 8 * len(payload) / 100, 0, 0, 0, False)


def test_a_payload_plan_refuses_what_the_reader_refuses():
    """A mode-4 payload whose cascade byte names no variant (or a cascade with the match
    model, or a context above 32) has no plan: coding with such a plan crashed the process
    (the cascade's tables read out of bounds)."""
    from signals.channel import _read_block_side, _Reader, payload_plan
    x = np.cumsum(np.random.default_rng(0).integers(-300, 300, 5000))
    p = encode_channel(x)
    rd = _Reader(p)
    rd.byte()
    _read_block_side(rd, x.size)
    assert payload_plan(p, x.size) is not None
    for at, value in ((3, 5), (3, 255), (0, 33)):  # lms 5 and 255; mh 33
        b = bytearray(p)
        b[rd.pos + at] = value
        assert payload_plan(bytes(b), x.size) is None
        with pytest.raises(ValueError):
            decode_channel(bytes(b), x.size)
    b = bytearray(p)
    b[rd.pos], b[rd.pos + 3] = 2, 4  # the match model with the cascade
    assert payload_plan(bytes(b), x.size) is None


def test_a_plan_given_by_hand_is_checked_as_a_payload_would_be():
    """A plan of match context 40 wrote a payload that its reader refuses (data lost, no
    error at compress); lms 4.0 gave a raw numba error, t = 300 an unrelated one."""
    import signals
    from signals.channel import CODED2, RANKED, Plan
    x = np.cumsum(np.random.default_rng(0).integers(-50, 50, 3000))
    for bad in (Plan(CODED2, 64.0, mh=40), Plan(CODED2, 64.0, lms=4.0), Plan(CODED2, 64.0, t=300),
                Plan(CODED2, 64.0, mh=-1), Plan(CODED2, 64.0, lms=5), Plan(7, 64.0),
                Plan(RANKED, 64.0, body=Plan(CODED2, 64.0, mh=33)), (4, 64.0)):
        with pytest.raises(ValueError, match="plan"):
            encode_channel(x, plan=bad)
        with pytest.raises(ValueError, match="plan"):
            signals.compress(x, plans={"ch0": bad})
    for good in (Plan(CODED2, 64.0, mh=32, t=255), Plan(CODED2, 64.0, lms=4),
                 Plan(CODED2, 64.0, mh=np.int64(2), t=1, lms=4)):  # (the cascade dropped)
        assert np.array_equal(decode_channel(encode_channel(x, plan=good), x.size), x)


def _long_signal(n=40000, seed=0):
    rng = np.random.default_rng(seed)
    day = np.round(500 * np.maximum(0, np.sin(np.arange(240) / 240 * 2 * np.pi))).astype(np.int64)
    x = np.tile(day, n // day.size + 1)[:n] + rng.integers(-2, 3, n)  # a daily cycle, repeated
    x[n // 2:] += np.cumsum(rng.integers(-3, 4, n - n // 2))  # and a wandering second half
    return x


@pytest.mark.parametrize("level", [2, 5])
def test_a_channel_coded_with_its_own_plan_gives_the_same_bytes(level):
    # (an input of SMALL_INPUT samples or more: its search and its plan take the same path)
    from signals.channel import payload_plan
    x = _long_signal()
    payload = encode_channel(x, level=level)
    plan = payload_plan(payload, x.size)
    assert plan is not None
    assert encode_channel(x, level=level, plan=plan) == payload


@settings(max_examples=60, deadline=None)
@given(x=st.one_of(small_walk, any_ints, st.sampled_from(extremes())),
       mode=st.sampled_from([4, 5]), mh=st.sampled_from([0, 1, 2, 4]), t=st.integers(0, 3),
       lms=st.integers(0, 3), lpc=st.booleans(), bits=st.floats(0.01, 70),
       level=st.sampled_from([1, 3, 5]))
def test_any_plan_round_trips(x, mode, mh, t, lms, lpc, bits, level):
    # a plan only steers the search: whatever it says, the payload decodes exactly
    from signals.channel import Plan
    part = Plan(4, bits, mh, t, lms, lpc)
    plan = part if mode == 4 else Plan(5, bits, head=part, body=part)
    payload = encode_channel(x, level=level, plan=plan)
    assert np.array_equal(decode_channel(payload, x.size), x)
