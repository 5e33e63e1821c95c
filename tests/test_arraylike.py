"""signals.arraylike.as_channels: what users hold, as channels."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from signals.arraylike import as_channels


def test_numpy_follows_compress_axis_order():
    x = np.arange(6).reshape(2, 3)  # (n_channels, n_samples)
    chans, names = as_channels(x)
    assert names is None and [c.tolist() for c in chans] == [[0, 1, 2], [3, 4, 5]]
    chans, names = as_channels(np.arange(4.0))
    assert names is None and len(chans) == 1 and chans[0].dtype == np.float64


def test_no_copy_for_numpy_rows():
    x = np.arange(10, dtype=np.int16)
    assert np.shares_memory(as_channels(x)[0][0], x)


def test_lists():
    chans, _ = as_channels([1, 2, 3])
    assert len(chans) == 1 and chans[0].tolist() == [1, 2, 3]
    chans, _ = as_channels([np.arange(3), [5, 6]])  # ragged: lengths may differ
    assert [c.tolist() for c in chans] == [[0, 1, 2], [5, 6]]
    assert as_channels([True, False])[0][0].dtype == np.bool_  # (bool is kept: the codec codes it)


def test_rejects():
    with pytest.raises(ValueError, match="got shape"):
        as_channels(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="got shape"):
        as_channels(3.0)
    with pytest.raises(TypeError, match="expected numbers"):
        as_channels(np.array(["a", "b"]))


@given(hnp.arrays(st.sampled_from([np.int8, np.uint16, np.int64, np.float32]),
                  hnp.array_shapes(min_dims=1, max_dims=2, min_side=1)))
def test_numpy_round_trip(x):
    chans, _ = as_channels(x)
    back = chans[0] if x.ndim == 1 else np.stack(chans)
    assert back.dtype == x.dtype and np.array_equal(back, x, equal_nan=True)


def test_pandas():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"ax": [1, 2, 3], "ay": [0.5, 1.5, 2.5], 7: [True, False, True]},
                      index=pd.date_range("2024-01-01", periods=3, freq="s"))
    chans, names = as_channels(df)  # rows are samples, columns channels
    assert names == ["ax", "ay", "7"]
    assert chans[0].tolist() == [1, 2, 3] and chans[0].dtype == np.int64
    assert chans[2].dtype == np.bool_
    s = pd.Series([3, 4], name="ecg")
    assert as_channels(s)[1] == ["ecg"] and as_channels(s)[0][0].tolist() == [3, 4]
    assert as_channels(pd.Series([1.0]))[1] is None
    nullable = pd.Series([1, 2], dtype="Int64")
    assert as_channels(nullable)[0][0].dtype == np.int64
    with pytest.raises(ValueError, match="missing value"):
        as_channels(pd.Series([1, None], dtype="Int64", name="x"))
    with pytest.raises(TypeError, match="'label'"):
        as_channels(pd.DataFrame({"label": ["a", "b"]}))


def test_pyarrow():
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"x": [1, 2, 3], "y": [1.0, 2.0, 3.0]})
    chans, names = as_channels(t)
    assert names == ["x", "y"] and chans[1].tolist() == [1.0, 2.0, 3.0]
    chans, names = as_channels(t.column("x"))  # ChunkedArray
    assert chans[0].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="null"):
        as_channels(pa.table({"x": [1, None]}))


def test_dask_array():
    da = pytest.importorskip("dask.array")
    chans, _ = as_channels(da.arange(10, chunks=3))
    assert chans[0].tolist() == list(range(10))
