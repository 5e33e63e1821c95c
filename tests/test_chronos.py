"""Chronos-style mean scaling and uniform bins, then UBPE tokens."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import signals
from signals.chronos import CHRONOS_N_BINS, ChronosUBPETokenizer, mean_scale


def test_mean_scale():
    assert mean_scale(np.array([1.0, -3.0])) == 2.0
    assert mean_scale(np.zeros(4)) == 1.0  # Chronos: scale 1 for an all-zero context
    assert mean_scale(np.array([np.nan, 2.0])) == 2.0


def test_bins_by_hand():
    """Centres -2..2: boundaries -1.5, -0.5, 0.5, 1.5; a value on a boundary goes up
    (torch.bucketize(right=True), as Chronos); beyond the limits, the outer bins."""
    c = ChronosUBPETokenizer(n_bins=5, low_limit=-2, high_limit=2)
    bins, s = c.quantize([1.0, -1.0, 2.0, 0.0])  # mean |x| = 1
    assert s == 1.0 and bins.tolist() == [3, 1, 4, 2]
    bins, s = c.quantize([0.5, -0.5, 10.0, -9.0])  # scale 5: 0.1, -0.1, 2, -1.8
    assert s == 5.0 and bins.tolist() == [2, 2, 4, 0]
    assert np.allclose(c.dequantize([0, 4], 5.0), [-10.0, 10.0])
    assert c.half_bin == 0.5


def test_parameters_and_bins_are_checked_before_any_work():
    """method='bogus' trained a whole vocabulary before encode refused it; low_limit='a' gave
    numpy's 'ufunc isfinite not supported'; dequantize took bin 1.7 for bin 1."""
    for params, message in (({"method": "bogus"}, "unknown method 'bogus'"),
                            ({"low_limit": "a"}, "low_limit must be below high_limit")):
        with pytest.raises(ValueError, match=message):
            ChronosUBPETokenizer(n_bins=5, vocab_size=8, **params).fit([np.arange(100.0)])
    with pytest.raises(TypeError, match="bins must be integers"):
        ChronosUBPETokenizer(n_bins=5, low_limit=-2, high_limit=2).dequantize([1.7], 1.0)


def test_chronos_defaults():
    c = ChronosUBPETokenizer()
    assert c.n_bins == CHRONOS_N_BINS == 4096 - 2 - 1 and c.context_length == 512
    centres, inner = c._grid()  # (centers_ is fitted state: set by fit)
    assert centres[0] == -15.0 and centres[-1] == 15.0 and inner.size == CHRONOS_N_BINS - 1


@pytest.fixture(scope="module")
def fitted(ecg_csv):
    x = signals.read_csv(ecg_csv).channels[0]
    return ChronosUBPETokenizer(n_bins=1024, vocab_size=1024 + 512).fit([x[:40000]]), x


def test_fewer_tokens_than_samples(fitted):
    c, x = fitted
    tps = c.tokens_per_sample([x[60000:80000]])
    assert 0 < tps < 1.0  # Chronos: one token per sample


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 300),
                  elements=st.floats(-1e3, 1e3, allow_nan=False)))
def test_decode_within_half_a_bin(fitted, w):
    c, _ = fitted
    ids, s = c.encode(w)
    back = c.decode(ids, s)
    scaled = w / s
    inside = (scaled >= c.low_limit) & (scaled <= c.high_limit)
    assert back.shape == w.shape
    assert np.all(np.abs(back[inside] / s - scaled[inside]) <= c.half_bin + 1e-12)
    assert np.array_equal(back, c.dequantize(c.quantize(w)[0], s))


def test_encode_batch_padded(fitted):
    c, x = fitted
    windows = [x[:512], x[512:700], x[700:701]]
    ids, mask, scales = c.encode_batch(windows)
    assert ids.shape == mask.shape and ids.shape[0] == 3
    for row, m, w, s in zip(ids, mask, windows, scales):
        assert s == mean_scale(w)
        assert np.array_equal(row[m == 1], c.encode(w)[0])


def test_errors():
    c = ChronosUBPETokenizer(n_bins=16)
    with pytest.raises(ValueError, match="not fitted"):  # (NotFittedError, as scikit-learn's)
        c.encode([1.0])
    with pytest.raises(ValueError, match="non-finite"):
        c.quantize([1.0, np.nan])
    with pytest.raises(ValueError, match="unknown parameter"):
        c.set_params(bins=3)


def test_set_params_after_fit_keeps_the_fitted_bins():
    """centers_ and boundaries_ were computed from the parameters on every call: set_params
    after fit moved the bins under the fitted vocabulary (decode 4.7 off, no error) or gave
    bins outside its alphabet."""
    x = np.sin(np.arange(3000) / 10)
    c = ChronosUBPETokenizer(n_bins=256, vocab_size=300, context_length=64).fit([x])
    w = x[:64]
    ids, s = c.encode(w)
    back = c.decode(ids, s)
    c.set_params(low_limit=-5.0, high_limit=5.0, n_bins=1000)
    assert np.array_equal(c.decode(ids, s), back)
    assert np.array_equal(c.encode(50 * w)[0], c.encode(w)[0])  # (mean scaling)
    assert c.centers_.size == 256 and c.half_bin == 15.0 / 255
    for bad in ([np.array([1.0, np.nan])], []):  # a failed refit leaves the fitted object
        with pytest.raises(ValueError):
            c.fit(bad)
        assert c.centers_.size == 256 and np.array_equal(c.decode(ids, s), back)
    c.set_params(vocab_size=1100).fit([x])  # a refit takes the new parameters
    assert c.centers_.size == 1000 and c.centers_[-1] == 5.0


def test_sklearn_check_is_fitted():
    validation = pytest.importorskip("sklearn.utils.validation")
    exceptions = pytest.importorskip("sklearn.exceptions")
    c = ChronosUBPETokenizer(n_bins=64, vocab_size=80)
    with pytest.raises(exceptions.NotFittedError):
        validation.check_is_fitted(c)
    validation.check_is_fitted(c.fit([np.sin(np.arange(500) / 10)]))


def test_sklearn_clone():
    base = pytest.importorskip("sklearn.base")
    c = ChronosUBPETokenizer(n_bins=64, vocab_size=100)
    c2 = base.clone(c)
    assert c2 is not c and c2.get_params() == c.get_params()


def test_mean_scale_of_huge_values_and_bins_out_of_range():
    """A window near 1e306 overflowed the mean: scale 1.0, every value the outer bin. A
    negative bin indexed from the end of the centres."""
    w = np.full(512, 1e306)
    w[::2] = 2e306
    assert mean_scale(w) == pytest.approx(1.5e306)
    ct = ChronosUBPETokenizer(n_bins=64, vocab_size=80).fit([np.sin(np.arange(2000) / 10)])
    ids, s = ct.encode(w)
    assert np.abs(ct.decode(ids, s) - w).max() <= ct.half_bin * s * (1 + 1e-12)
    for bad in ([-1], [64], [0, 70]):
        with pytest.raises(ValueError, match="is not in 0..63"):
            ct.dequantize(bad, 1.0)


def test_chronos_conventions(fitted):
    """context_length was used by fit only (a 5,000-sample window was tokenized whole, one
    scale); batches were padded and truncated on the right (Chronos: left, keeping the most
    recent); fit([]) and low_limit > high_limit were accepted."""
    c, x = fitted
    long = x[:5000]
    ids, s = c.encode(long)
    tail = long[-c.context_length:]
    assert s == mean_scale(tail) and np.array_equal(ids, c.encode(tail)[0])
    ids, mask, _ = c.encode_batch([x[:512], x[:30]])
    assert mask[1, -1] == 1 and mask[1, 0] == 0  # padded on the left
    cut, cmask, _ = c.encode_batch([x[:512]], max_length=10, truncation=True)
    full = c.encode(x[:512])[0]
    assert np.array_equal(cut[0], full[-10:]) and cmask.all()  # the most recent tokens kept
    with pytest.raises(ValueError, match="no samples"):
        ChronosUBPETokenizer(n_bins=16, vocab_size=20).fit([])
    with pytest.raises(ValueError, match="low_limit must be below high_limit"):
        ChronosUBPETokenizer(n_bins=16, low_limit=5, high_limit=-5).fit([x[:100]])
