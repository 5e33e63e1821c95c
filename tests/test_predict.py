import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals.predict import Delta, FixedPredictor, differences, predictor_from_config, unzigzag, zigzag

ints = arrays(np.int64, st.integers(0, 300), elements=st.integers(-2**40, 2**40))


@settings(max_examples=200, deadline=None)
@given(x=ints, order=st.integers(0, 8))
def test_delta_is_exactly_invertible(x, order):
    t = Delta(order)
    r, side = t.encode(x)
    assert r.shape == x.shape and np.array_equal(t.decode(r, side), x)


@settings(max_examples=200, deadline=None)
@given(x=ints, block=st.integers(1, 64), max_order=st.integers(0, 4))
def test_fixed_predictor_is_exactly_invertible(x, block, max_order):
    t = FixedPredictor(block, max_order)
    r, orders = t.encode(x)
    assert orders.size == -(-x.size // block) and (orders <= max_order).all()
    assert np.array_equal(t.decode(r, orders), x)


@settings(max_examples=200, deadline=None)
@given(r=arrays(np.int64, st.integers(0, 100), elements=st.integers(-2**61, 2**61)))
def test_zigzag_round_trip(r):
    z = zigzag(r)
    assert (z >= 0).all() and np.array_equal(unzigzag(z), r)


def test_golden_cases():
    assert zigzag(np.array([0, -1, 1, -2, 2])).tolist() == [0, 1, 2, 3, 4]
    x = np.array([1, 4, 9, 16, 25, 36])
    assert differences(x, 1).tolist() == [1, 3, 5, 7, 9, 11]
    assert differences(x, 2).tolist() == [1, 3, 2, 2, 2, 2]
    assert differences(x, 3).tolist() == [1, 3, 2, 0, 0, 0]
    # a quadratic is predicted exactly from order 3 on; order 2 leaves constant 2s
    r, orders = FixedPredictor(block_size=6).encode(x)
    assert orders.tolist() == [3] and r.tolist() == [1, 3, 2, 0, 0, 0]


def test_predictor_orders_on_real_ecg(ecg_csv):
    from signals import read_csv
    x = np.round(read_csv(ecg_csv).channels[0] / 0.005).astype(np.int64)  # ADC units
    r, orders = FixedPredictor(4096).encode(x)
    assert np.array_equal(FixedPredictor(4096).decode(r, orders), x)
    assert np.abs(r).mean() < np.abs(x - x.mean()).mean() / 5  # prediction pays
    assert set(orders.tolist()) <= {1, 2, 3}


def test_transform_config_and_errors():
    assert predictor_from_config(FixedPredictor(128, 3).get_config()).block_size == 128
    assert predictor_from_config({"kind": "delta", "order": 2}).order == 2
    with pytest.raises(ValueError, match="unknown predictor kind 'fft'"):
        predictor_from_config({"kind": "fft"})
    with pytest.raises(ValueError, match="expected 2 block orders"):
        FixedPredictor(4).decode(np.zeros(8, np.int64), np.zeros(3, np.uint8))


from signals.predict import LinearPredictor  # noqa: E402


@settings(max_examples=100, deadline=None)
@given(x=arrays(np.int64, st.integers(0, 400), elements=st.integers(-2**20, 2**20)),
       block=st.integers(1, 128), orders=st.lists(st.integers(1, 12), min_size=1, max_size=3))
def test_linear_predictor_is_exactly_invertible(x, block, orders):
    t = LinearPredictor(block, tuple(orders))
    r, side = t.encode(x)
    assert np.array_equal(t.decode(r, side), x)
    assert np.array_equal(predictor_from_config(t.get_config()).decode(r, side), x)


def test_linear_predictor_beats_fixed_on_oscillations():
    # a sum of two sinusoids obeys a linear recurrence of order 4; the fixed
    # polynomial predictors cannot follow it, a fitted LPC can (up to rounding)
    t = np.arange(24 * 200)
    x = np.round(100 * np.sin(2 * np.pi * t / 24) + 30 * np.sin(2 * np.pi * t / 97)).astype(np.int64)
    lin, _ = LinearPredictor(4096).encode(x)
    fixed, _ = FixedPredictor().encode(x)
    assert np.abs(lin[32:]).mean() < np.abs(fixed[32:]).mean() / 2


def test_linear_predictor_rejects_bad_side_information():
    t = LinearPredictor(4)
    r, side = t.encode(np.arange(10))
    with pytest.raises(ValueError, match="do not describe 3 blocks"):
        t.decode(r, side[:-1])


# --- the channel payload's predictors (block LPC, match model, adaptive cascade)
from signals import predict as P  # noqa: E402

wide = arrays(np.int64, st.integers(0, 400), elements=st.integers(-2**63, 2**63 - 1))
walk = arrays(np.int64, st.integers(0, 400), elements=st.integers(-50, 50)).map(np.cumsum)


@settings(max_examples=100, deadline=None)
@given(x=st.one_of(wide, walk), variant=st.sampled_from(P.LMS_VARIANTS))
def test_cascade_is_exactly_invertible(x, variant):
    assert np.array_equal(P.cascade_inverse(P.cascade_forward(x, variant), variant), x)


# --- variant 4: the sign-data LMS, its vector kernels against their readable twin
audio16 = arrays(np.int64, st.integers(0, 300), elements=st.integers(-40000, 40000))


@settings(max_examples=150, deadline=None)
@given(x=st.one_of(wide, walk, audio16))
def test_sign_data_kernels_match_their_readable_twin(x):
    r = P.cascade_forward(x, 4)
    assert np.array_equal(r, P._sign_data_ref(x, 16, 9, False))
    assert np.array_equal(P.cascade_inverse(r, 4), x)
    # any input to the inverse (a damaged payload's residuals), not only forward outputs
    assert np.array_equal(P.cascade_inverse(x, 4), P._sign_data_ref(x, 16, 9, True))


def test_sign_data_by_hand():
    """Three samples of 100: the first two are predicted 0 (zero weights; the first sample's
    adapt value 32 moves no weight, the second's residual is coded before it moves). The
    newest weight is then 32 (sign +, adapt 32), so the third is predicted 32 * 100 >> 9 = 6."""
    assert P.cascade_forward(np.array([100, 100, 100]), 4).tolist() == [100, 100, 94]
    assert P.cascade_inverse(np.array([100, 100, 94]), 4).tolist() == [100, 100, 100]


def test_cascade_takes_any_integer_array_and_refuses_unknown_variants():
    """Every variant takes strided and int32 arrays as their int64 copies (variant 4's vector
    kernels take contiguous int64 only); a variant outside LMS_VARIANTS raises ValueError
    (it read the variants' table out of bounds: a crash)."""
    x = (np.arange(400, dtype=np.int64) * 37) % 1000 - 500
    for v in P.LMS_VARIANTS:
        want = P.cascade_forward(np.ascontiguousarray(x[::2]), v)
        assert np.array_equal(P.cascade_forward(x[::2], v), want)
        assert np.array_equal(P.cascade_inverse(want.astype(np.int32)[::-1][::-1], v),
                              P.cascade_inverse(want, v))
        assert np.array_equal(P.cascade_forward(x.astype(np.int32), v), P.cascade_forward(x, v))
    for v in (0, 5, 255, -1):
        with pytest.raises(ValueError, match="unknown adaptive cascade variant"):
            P.cascade_forward(x, v)
        with pytest.raises(ValueError, match="unknown adaptive cascade variant"):
            P.cascade_inverse(x, v)


def test_sign_data_extremes():
    """The full int64 range (wrapping sums, the history saturated at int16), a constant signal,
    one sample, none, and longer than any lane count."""
    t = np.arange(5000)
    cases = [np.array([2**63 - 1, -2**63] * 40, np.int64), np.full(1000, -2**63, np.int64),
             np.full(700, 123, np.int64), np.array([7], np.int64), np.zeros(0, np.int64),
             np.round(30000 * np.sin(t / 7.0) * np.sin(t / 500.0)).astype(np.int64),
             np.iinfo(np.int32).min + (t * 7919 % 65536) * 65537]
    for x in cases:
        r = P.cascade_forward(x, 4)
        assert np.array_equal(r, P._sign_data_ref(x, 16, 9, False))
        assert np.array_equal(P.cascade_inverse(r, 4), x)


@settings(max_examples=100, deadline=None)
@given(x=st.one_of(wide, walk), block=st.integers(1, 128), mh=st.sampled_from([0, 1, 2, 4]),
       t=st.integers(0, 2))
def test_block_lpc_and_match_residuals_are_consistent(x, block, mh, t):
    kinds, orders, shifts, coefs = P.block_lpc_analyze(x, block, np.array([2, 4, 8]), 14)
    r, mb = P.predict_fused(x, block, kinds, orders, shifts, coefs, mh, t, 10)
    side = P.block_side_bytes(kinds, orders, shifts, coefs)
    k2, o2, s2, c2, ok = P.parse_block_side(np.frombuffer(side, np.uint8), kinds.size)
    assert ok and np.array_equal(k2, kinds) and np.array_equal(c2, coefs)
    assert r.shape == x.shape and (mh > 0 or not mb.any())
    # the decoder lives in signals.channel; a round trip through a payload checks it
    from signals.channel import decode_channel, encode_channel
    assert np.array_equal(decode_channel(encode_channel(x, level=4), x.size), x)


def test_a_lag_entry_of_the_block_side_reads_2_0_then_the_lag():
    side = np.array([2, 0, 10, 1, 0, 3], np.uint8)  # lag 266, then the fixed order 3
    kinds, orders, _, _, ok = P.parse_block_side(side, 2)
    assert ok and kinds.tolist() == [2, 0] and orders.tolist() == [266, 3]
    assert P.block_side_bytes(kinds, orders, np.zeros(2, np.int64), np.zeros((2, 32), np.int64)) \
        == side.tobytes()
    side[1] = 7  # (it was read and overwritten: two side strings for one payload)
    assert not P.parse_block_side(side, 2)[-1]


def test_lpc_golden():
    # a pure ramp: the order-2 fixed predictor leaves zeros after the warm-up
    x = np.arange(10, dtype=np.int64) * 7
    kinds, orders, shifts, coefs = P.block_lpc_analyze(x, 16, np.zeros(0, np.int64), 14)
    r, _ = P.predict_fused(x, 16, kinds, orders, shifts, coefs, 0, 0, 10)
    assert r.tolist() == [0, 7] + [0] * 8 and orders.tolist() == [2]


def test_every_stage_is_found_by_its_config():
    from signals import UniformQuantizer
    from signals.stage import REGISTRY, stage_from_config
    assert {"uniform", "lloydmax", "linear_predictor", "fixed_predictor"} <= set(REGISTRY)
    q = UniformQuantizer(16).fit(np.linspace(0.0, 1.0, 100))
    back = stage_from_config(q.get_config())
    assert type(back) is UniformQuantizer and np.array_equal(back.encode(q.codebook_[0]),
                                                              q.encode(q.codebook_[0]))


@pytest.mark.parametrize("m", [1, 2, 3, 63, 64, 65, 256, 1031, 4128])
def test_hann_window_rotated_agrees_with_the_direct_formula(m):
    # the rotation between the direct values every _HANN_SYNC samples drifts by a few ulps
    want = 0.5 - 0.5 * np.cos(2 * np.pi * (np.arange(m) + 0.5) / m)
    assert np.abs(P._hann(m) - want).max() <= 1e-13
