"""Quantizers follow scikit-learn: clone, get/set_params, samples x features, pandas input."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from signals import QUANTIZERS, UniformQuantizer, quantizer_from_dict


@pytest.mark.parametrize("kind", sorted(QUANTIZERS))
def test_clone(kind):
    base = pytest.importorskip("sklearn.base")
    q = QUANTIZERS[kind](n_levels=37)
    c = base.clone(q)
    assert type(c) is type(q) and c is not q
    assert c.get_params(deep=True) == q.get_params(deep=False)
    fitted = QUANTIZERS[kind](8).fit(np.arange(20.0))
    assert not hasattr(base.clone(fitted), "lossless_")  # a clone is unfitted


def test_set_params_and_repr():
    q = UniformQuantizer(8).set_params(n_levels=16)
    assert q.n_levels == 16 and repr(q) == "UniformQuantizer(n_levels=16)"
    with pytest.raises(ValueError, match="invalid parameter 'levels'"):
        q.set_params(levels=3)


def test_samples_by_features_by_hand():
    x = np.array([[0.0, 3.0], [10.0, 3.0], [5.0, 3.0]])  # 3 samples, 2 features
    q = UniformQuantizer(10).fit(x)
    assert q.step_.tolist() == [1.0, 1.0] and q.lossless_.tolist() == [False, True]
    codes = q.transform(x)
    assert codes.shape == (3, 2) and codes[:, 0].tolist() == [0, 9, 5]
    assert q.inverse_transform(codes)[:, 1].tolist() == [3.0, 3.0, 3.0]
    assert q.error(x).shape == (2,)


def test_transposed_input_warns():
    with pytest.warns(UserWarning, match="more features than samples"):
        UniformQuantizer(4).fit(np.zeros((2, 100)))


def test_pipeline_and_pandas():
    pytest.importorskip("sklearn")
    pd = pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline
    df = pd.DataFrame({"a": np.linspace(0, 1, 50), "b": np.linspace(-5, 5, 50)})
    pipe = make_pipeline(UniformQuantizer(16))
    codes = pipe.fit_transform(df)
    assert codes.shape == (50, 2) and codes.max() == 15
    assert np.abs(pipe.inverse_transform(codes) - df.to_numpy()).max() <= 10 / 32 + 1e-12
    s = pd.Series(np.arange(5.0), name="x")
    assert UniformQuantizer(4).fit(s).encode(s).shape == (5,)


def test_saved_dicts_still_load():
    """A quantizer saved as before (kind, params and state) loads and codes the same."""
    saved = {"kind": "uniform", "n_levels": 4, "lossless": [False], "range": [[0.0, 4.0, 4]]}
    q = quantizer_from_dict(saved)
    assert q.encode([0.1, 3.9]).tolist() == [0, 3]
    assert q.to_dict() == saved
    mu = QUANTIZERS["mulaw"](n_levels=np.int64(8), mu=np.float32(100)).fit(np.linspace(-1, 1, 9))
    d = json.loads(json.dumps(mu.to_dict()))  # numpy parameters become JSON numbers
    assert d["n_levels"] == 8 and d["mu"] == 100.0


@settings(max_examples=30, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(2, 80), st.integers(1, 4)),
              elements=st.floats(-100, 100)), st.sampled_from(sorted(QUANTIZERS)))
def test_fit_transform_bound(x, kind):
    q = QUANTIZERS[kind](32)
    codes = q.fit_transform(x)
    assert codes.shape == x.shape
    err = np.abs(q.inverse_transform(codes) - x).max(axis=0)
    assert (err <= q.max_error_ * (1 + 1e-9) + 1e-9).all()
