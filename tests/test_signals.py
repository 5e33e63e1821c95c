import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals import CsvError, SignalModel, UniformQuantizer, read_csv


@settings(max_examples=200, deadline=None)
@given(x=arrays(np.float64, st.integers(1, 200),
                elements=st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)),
       n_levels=st.integers(2, 5000))
def test_uniform_error_is_at_most_half_a_step(x, n_levels):
    q = UniformQuantizer(n_levels).fit(x)
    codes = q.encode(x)
    assert codes.dtype == np.int32 and codes.min() >= 0 and codes.max() < n_levels
    err = np.abs(q.decode(codes) - x).max()
    assert err <= q.max_error_[0] * (1 + 1e-9) + 1e-9
    assert q.error(x)[0] == pytest.approx(err)


def test_uniform_golden():
    q = UniformQuantizer(4).fit([0.0, 1.0, 2.0, 4.0])
    assert q.step_.tolist() == [1.0]
    assert q.bin_edges_[0].tolist() == [0, 1, 2, 3, 4]
    assert q.encode([0.0, 0.99, 1.0, 3.5, 4.0]).tolist() == [0, 0, 1, 3, 3]
    assert q.decode([0, 1, 3]).tolist() == [0.5, 1.5, 3.5]
    assert q.max_error_.tolist() == [0.5]


@settings(max_examples=100, deadline=None)
@given(x=arrays(np.int64, st.integers(1, 100), elements=st.integers(-3000, 3000)))
def test_integers_that_fit_pass_through_losslessly(x):
    q = UniformQuantizer(6001).fit(x)
    assert q.lossless_.all() and q.max_error_[0] == 0
    assert np.array_equal(q.decode(q.encode(x)), x)


def test_per_channel_fit_and_constant_channel():
    x = np.array([[0.0, 10.0, 5.0], [3.0, 3.0, 3.0]]).T  # (n_samples, n_features)
    q = UniformQuantizer(10).fit(x)
    assert q.step_.tolist() == [1.0, 0.0] and q.max_error_.tolist() == [0.5, 0.0]  # (3.0 alone)
    assert q.decode(q.encode(x))[:, 1].tolist() == [3.0, 3.0, 3.0]


def test_quantizer_errors():
    with pytest.raises(ValueError, match="channel 0, sample 2: non-finite value nan"):
        UniformQuantizer(8).fit([0.0, 1.0, np.nan])
    q = UniformQuantizer(8).fit([0.0, 1.0])
    with pytest.raises(ValueError, match=r"channel 0, sample 1: value 2.0 is outside the fitted"):
        q.encode([0.5, 2.0])
    with pytest.raises(ValueError, match="n_levels must be"):
        UniformQuantizer(1).fit([0.0, 1.0])
    assert UniformQuantizer.from_dict(q.to_dict()).encode([0.5]).tolist() == q.encode([0.5]).tolist()


def test_integers_beyond_2_to_53_are_read_exactly_and_never_called_lossless(tmp_path):
    # (read as float64, 2**62 + k collapsed to one value; a quantizer kept 10**16 + k in float64
    # bins, said "lossless" and gave back other integers)
    for x in (np.array([10**16 + 1, 10**16 + 2, 10**16 + 3, 10**16 + 500], np.int64),
              np.array([2**62 + 1, 2**62 + 100], np.int64),  # (one double holds both)
              np.array([-2**63 + 7, -2**63], np.int64)):
        q = UniformQuantizer(16).fit(x)
        assert not q.lossless_[0]
        back = q.decode(q.encode(x))
        err = max(abs(int(b) - int(v)) for b, v in zip(back.tolist(), x.tolist()))
        assert err <= q.max_error_[0]
        q2 = UniformQuantizer.from_dict(q.to_dict())
        assert q2.max_error_[0] == q.max_error_[0] and not q2.lossless_[0]
    # (lossless below 2**52, where float64 still holds the bins' half-integer edges: at 2**52
    # the saved range gave back a codebook half a step off, still called lossless)
    for top in (2**52 - 1, -(2**52 - 1) + 2):
        x = np.array([-2, -1, 0]) + top
        q = UniformQuantizer.from_dict(UniformQuantizer(16).fit(x).to_dict())
        assert q.lossless_.all() and q.decode(q.encode(x)).tolist() == x.tolist()
    for top in (2**52, -(2**52) + 2, 2**53):
        x = np.array([-2, -1, 0]) + top
        q = UniformQuantizer(16).fit(x)
        assert not q.lossless_.any()
        q2 = UniformQuantizer.from_dict(q.to_dict())
        assert np.abs(q2.decode(q2.encode(x)) - x).max() <= q2.max_error_[0]
    path = tmp_path / "big.csv"
    path.write_text("a,u\n4611686018427387919,18446744073709551615\n-9223372036854775808,7\n")
    t = read_csv(path)
    assert t.channels[0].dtype == np.int64 and t.channels[0].tolist() == [2**62 + 15, -2**63]
    assert t.channels[1].dtype == np.uint64 and t.channels[1].tolist() == [2**64 - 1, 7]


def test_read_real_daphnet_csv(daphnet_csv):
    t = read_csv(daphnet_csv, exclude=["is_anomaly"])
    assert t.header and t.skipped == ["timestamp"]
    assert len(t.names) == 9 and t.names[0] == "ankle_horiz_fwd"
    assert all(c.dtype == np.int64 and c.shape == (7040,) for c in t.channels)
    assert t.channels[0][:3].tolist() == [101, 101, 121]  # rows 2-4 of the file
    t2 = read_csv(daphnet_csv, columns=["trunk_vert", "2"])
    assert t2.names == ["trunk_vert", "ankle_vert"] and t2.skipped == []


def _write(tmp_path, text, name="x.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_without_header_and_float_columns(tmp_path):
    t = read_csv(_write(tmp_path, "1,2.5\n3,4\n"))
    assert not t.header and t.names == ["col0", "col1"]
    assert t.channels[0].dtype == np.int64 and t.channels[1].dtype == np.float64


@pytest.mark.parametrize("text, columns, message", [
    ("a,b\n1,2\n3,nan\n", None, r"x.csv, line 3, column 'b': non-finite value 'nan'"),
    ("a,b\n1,2\n3,\n", None, r"x.csv, line 3, column 'b': missing value"),
    ("a,b\n1,2\n3,zz\n", None, r"x.csv, line 3, column 'b': 'zz' is not a number"),
    ("t,b\nmon,2\ntue,3\n", ["t"], r"x.csv, line 2, column 't': the column is not numeric"),
    ("a,b\n1,2\n3\n", None, r"x.csv, line 3: 1 fields, expected 2"),
    ("a,b\n1,2\n", ["c"], r"no column named 'c'"),
    ("a,b\n1,2\n", ["5"], r"column index 5 is out of range"),
    ("a,b\n", None, r"no data rows"),
    ("", None, r"the file is empty"),
    ("t\nmon\n", None, r"no numeric columns to read \(skipped: t\)"),
])
def test_csv_errors_name_file_line_column(tmp_path, text, columns, message):
    with pytest.raises(CsvError, match=message):
        read_csv(_write(tmp_path, text), columns=columns)


def test_signal_model_round_trip_and_save(tmp_path, ecg_csv):
    x = read_csv(ecg_csv).channels[0][:20000]
    m = SignalModel(256, 600, doc_length=2000).fit([x, x[::-1].copy()], ["ecg", "rev"])
    tokens = m.encode([x, x[::-1]])
    assert tokens[0].size < x.size
    back = m.decode(tokens)
    assert np.abs(back[0] - x).max() <= m.quantizers_[0].max_error_[0] + 1e-12
    m.save(tmp_path / "m.json")
    m2 = SignalModel.load(tmp_path / "m.json")
    assert m2.channel_names_ == ["ecg", "rev"]
    assert all(np.array_equal(a, b) for a, b in zip(m2.encode([x, x[::-1]]), tokens))


from signals import QUANTIZERS, quantizer_from_dict  # noqa: E402


@pytest.mark.parametrize("kind", sorted(QUANTIZERS))
@settings(max_examples=40, deadline=None)
@given(x=arrays(np.float64, st.tuples(st.integers(1, 120), st.integers(1, 3)),  # samples x features
                elements=st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)),
       n_levels=st.integers(2, 300))
def test_every_quantizer_respects_its_bound_and_serializes(kind, x, n_levels):
    import json
    q = QUANTIZERS[kind](n_levels).fit(x)
    codes = q.encode(x)
    assert codes.shape == x.shape and codes.min() >= 0
    assert (codes.max(axis=0) < q.n_codes_).all() and (q.n_codes_ <= n_levels).all()
    err = np.abs(q.decode(codes) - x).max(axis=0)
    assert (err <= q.max_error_ * (1 + 1e-9) + 1e-9).all()
    back = quantizer_from_dict(json.loads(json.dumps(q.to_dict())))
    assert np.array_equal(back.encode(x), codes)
    assert np.allclose(back.decode(codes), q.decode(codes))


@pytest.mark.parametrize("kind", sorted(QUANTIZERS))
def test_quantizers_on_real_ecg(kind, ecg_csv):
    x = read_csv(ecg_csv).channels[0][:20000]
    q = QUANTIZERS[kind](64).fit(x)
    s = q.error_stats(x)
    assert s["max"][0] <= q.max_error_[0] + 1e-12
    assert s["snr_db"][0] > 10  # 64 levels keep an ECG recognisable
    with pytest.raises(ValueError, match="outside the fitted range"):
        q.encode(x + 100)


def test_lloydmax_beats_uniform_mse_on_ecg(ecg_csv):
    x = read_csv(ecg_csv).channels[0][:20000]
    rms = {k: QUANTIZERS[k](32).fit(x).error_stats(x)["rms"][0] for k in ("uniform", "lloydmax")}
    assert rms["lloydmax"] < rms["uniform"]


def test_quantile_codes_are_about_equally_frequent(ecg_csv):
    x = read_csv(ecg_csv).channels[0]
    codes = QUANTIZERS["quantile"](16).fit(x).encode(x)
    freq = np.bincount(codes) / codes.size
    assert freq.max() < 2.5 / len(freq)


def test_unknown_quantizer_kind():
    with pytest.raises(ValueError, match="unknown quantizer kind 'zz'"):
        quantizer_from_dict({"kind": "zz"})


def test_quantizer_error_is_exact_beyond_2_to_53():
    """error() subtracted in float64: 2**60 + k (k < 50) measured 0 against one code (the
    CLI's build summary then said "lossless")."""
    x = 2**60 + np.arange(50, dtype=np.int64)
    q = UniformQuantizer(64).fit(x)
    assert q.error(x)[0] == 49.0 and q.error_stats(x)["max"][0] == 49.0
    assert q.error(x)[0] <= q.max_error_[0]
    u = np.array([2**64 - 1, 2**64 - 2049], np.uint64)  # (both decode to the float 2**64)
    q = UniformQuantizer(4).fit(u)
    assert q.error(u)[0] == 2049.0 and q.error(u)[0] <= q.max_error_[0]


@pytest.mark.parametrize("kind", ["uniform", "quantile", "gaussian", "mulaw", "lloydmax"])
def test_quantizers_near_the_largest_double(kind):
    """Midpoints, means and variances of values near 1.8e308 overflowed: an inf codebook,
    max_error_ inf, and a JSON error on save."""
    for x in (np.array([1.79e308, 1.6e308, 0.0, 1.0, 2.0, -1e300]),
              np.array([0.0, 1.0, np.finfo(float).max, 5e307])):  # (its spacing is inf)
        with np.errstate(all="raise"):
            q = QUANTIZERS[kind](4).fit(x)
            assert np.isfinite(q.codebook_[0]).all() and np.isfinite(q.max_error_[0])
            assert q.bin_edges_[0][0] == x.min() and q.bin_edges_[0][-1] == x.max()
            assert q.error(x)[0] <= q.max_error_[0]
        quantizer_from_dict(q.to_dict())


def test_a_reloaded_quantizer_over_subnormals_is_the_fitted_one():
    """Bin centres as halves' sums (to avoid an overflow near 1.8e308) moved the centres of
    subnormal bins: files saved before decoded to other values."""
    x = np.array([5e-324, 1.5e-323, 2.5e-323, 1e-322] * 10)
    q = UniformQuantizer(16).fit(x)
    e = q.bin_edges_[0]
    assert np.array_equal(q.codebook_[0], (e[:-1] + e[1:]) / 2)  # (as quantizers saved before)
    r = quantizer_from_dict(q.to_dict())
    assert np.array_equal(r.decode(r.encode(x)), q.decode(q.encode(x)))


def test_round_to_keeps_64_bit_integers_in_their_range():
    """round_to rounded a codebook to the float 2**63, which the int64 cast wrapped to -2**63
    (uint64: 2**64 -> 0), while the bound said 4096."""
    for dtype, top in ((np.int64, 2**63 - 1), (np.uint64, 2**64 - 1)):
        for x in (np.full(5, top, dtype), np.array([top, top - 3000], dtype)):
            q = UniformQuantizer(16).fit(x).round_to(dtype)
            back = q.decode(q.encode(x)).astype(dtype)
            err = max(abs(int(b) - int(v)) for b, v in zip(back.tolist(), x.tolist()))
            assert err <= q.max_error_[0]
