"""Array-likes to channels: pandas, polars, pyarrow, Dask, lists and NumPy arrays.

:func:`as_channels` is the one place where the signal functions turn what a
user holds into the list of 1-D NumPy arrays they work on. pandas, polars and
pyarrow are recognised by duck typing, so none of them is imported here.

Axis order: a NumPy array follows :func:`signals.compress` (1-D ``(n_samples,)``
or 2-D ``(n_channels, n_samples)``); a table (pandas or polars DataFrame,
pyarrow Table) follows its own convention, rows are samples and columns are
channels, whose names are kept.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["as_channels", "warn_if_transposed"]


# set (in this thread or task) by callers that pass (n_channels, n_samples) arrays on purpose,
# such as the zarr codec's chunks of many channels
AXIS_ORDER_KNOWN: contextvars.ContextVar[bool] = contextvars.ContextVar("AXIS_ORDER_KNOWN",
                                                                        default=False)


def warn_if_transposed(shape: tuple[int, ...], stacklevel: int = 3) -> None:
    """Warn (UserWarning) on a 2-D array read as ``(n_channels, n_samples)`` that has more
    channels than samples, and more than 64: most likely ``(n_samples, n_features)``, the
    axis order of scikit-learn and of the quantizers, which would make each sample a channel
    (not where the caller set :data:`AXIS_ORDER_KNOWN`)."""
    if len(shape) == 2 and shape[0] > shape[1] and shape[0] > 64 and not AXIS_ORDER_KNOWN.get():
        warnings.warn(f"a 2-D array of shape {shape} is read as (n_channels, n_samples): "
                      f"{shape[0]} channels of {shape[1]} samples. For (n_samples, n_features) "
                      f"data (each column a channel), pass its transpose", UserWarning,
                      stacklevel=stacklevel)


def _column(values: Any, name: str) -> np.ndarray:
    """One table column or series as a 1-D numeric array; nulls and text raise."""
    if hasattr(values, "isna") and hasattr(values, "to_numpy"):  # pandas Series
        if isinstance(values.dtype, np.dtype):  # NumPy-backed: a NaN is a value (kept bit for bit)
            arr = values.to_numpy()
        else:  # nullable Int64, Float32...: NA is a missing value
            if bool(values.isna().any()):
                i = int(np.flatnonzero(values.isna().to_numpy())[0])
                raise ValueError(f"channel {name!r}, sample {i}: missing value (NA)")
            dtype = getattr(values.dtype, "numpy_dtype", None)
            arr = values.to_numpy(dtype=dtype) if dtype is not None else values.to_numpy()
    elif hasattr(values, "null_count") and hasattr(values, "to_numpy"):  # polars Series, pyarrow Array
        if int(values.null_count) if not callable(values.null_count) else int(values.null_count()):
            raise ValueError(f"channel {name!r}: missing values (null)")
        arrow = type(values).__module__.startswith("pyarrow")  # (bools are bits there: a copy)
        arr = values.to_numpy(zero_copy_only=False) if arrow else values.to_numpy()
    else:
        arr = np.asarray(values)
    arr = np.asarray(arr)
    if arr.ndim != 1:
        raise ValueError(f"channel {name!r}: expected 1-D samples, got shape {arr.shape}")
    if arr.dtype.kind not in "iufb":
        raise TypeError(f"channel {name!r}: expected numbers, got dtype {arr.dtype}")
    return arr


def _table_columns(x: Any) -> tuple[list[str], list[Any]] | None:
    """(names, columns) of a pandas/polars DataFrame or pyarrow Table, else None."""
    if hasattr(x, "columns") and hasattr(x, "iloc"):  # pandas DataFrame
        return [str(c) for c in x.columns], [x.iloc[:, i] for i in range(x.shape[1])]
    if hasattr(x, "column_names") and hasattr(x, "column"):  # pyarrow Table / RecordBatch
        return [str(c) for c in x.column_names], [x.column(i) for i in range(x.num_columns)]
    if hasattr(x, "columns") and hasattr(x, "get_columns"):  # polars DataFrame
        return [str(c) for c in x.columns], list(x.get_columns())
    return None


def _series_name(x: Any) -> str | None:
    name = getattr(x, "name", None)
    return None if name is None or callable(name) or name == "" else str(name)


def as_channels(x: Any) -> tuple[list[np.ndarray], list[str] | None]:
    """Channels of a signal as a list of 1-D NumPy arrays, with their names if it has any.

    Parameters
    ----------
    x : array-like
        One of:

        - pandas ``DataFrame``, polars ``DataFrame``, pyarrow ``Table``:
          rows are samples, each column a channel (names kept, as ``str``);
        - pandas or polars ``Series``, pyarrow ``Array`` / ``ChunkedArray``:
          one channel (its name kept when it has one);
        - NumPy array (or anything ``np.asarray`` takes, a Dask array or a
          list of numbers included): 1-D ``(n_samples,)`` is one channel,
          2-D ``(n_channels, n_samples)`` one channel per row;
        - a list or tuple of 1-D array-likes (lengths may differ).

    Returns
    -------
    channels : list of ndarray, each of shape (n_samples_c,)
        Bool, integer and float dtypes are kept; pandas' nullable dtypes
        become their NumPy dtype (a NaN of a NumPy float column is a value,
        kept; NA is a missing value). No copy is made
        where the input already is a NumPy array.
    names : list of str or None
        Column or series names; None when the input carries none.

    Raises
    ------
    ValueError
        On a missing value (pandas NA, polars/pyarrow null; names the
        channel), or an array of more than 2 dimensions.
    TypeError
        On a non-numeric channel (text, dates, objects; names the channel).

    Examples
    --------
    >>> import pandas as pd
    >>> chans, names = as_channels(pd.DataFrame({"ax": [1, 2], "ay": [3, 4]}))
    >>> names, [c.tolist() for c in chans]
    (['ax', 'ay'], [[1, 2], [3, 4]])
    """
    table = _table_columns(x)
    if table is not None:
        names, cols = table
        return [_column(c, n) for c, n in zip(cols, names)], names
    if is_series(x):
        name = _series_name(x)
        if hasattr(x, "combine_chunks"):  # pyarrow ChunkedArray
            x = x.combine_chunks()
        return [_column(x, name or "ch0")], None if name is None else [name]
    if isinstance(x, (list, tuple)) and x and all(_is_sequence(c) for c in x):
        chans = [_column(c, f"ch{i}") for i, c in enumerate(x)]
        return chans, None
    arr = np.asarray(x)
    if arr.ndim == 0 or arr.ndim > 2:
        raise ValueError(f"expected 1-D (n_samples,) or 2-D (n_channels, n_samples) samples, "
                         f"got shape {arr.shape}")
    warn_if_transposed(arr.shape, stacklevel=4)
    rows: Iterable[np.ndarray] = [arr] if arr.ndim == 1 else list(arr)
    return [_column(r, f"ch{i}") for i, r in enumerate(rows)], None


def is_series(x: Any) -> bool:
    """Whether ``x`` is a pandas or polars Series or a pyarrow Array (one named channel)."""
    return not isinstance(x, np.ndarray) and (hasattr(x, "to_numpy") or hasattr(x, "null_count"))


def is_table(x: Any) -> bool:
    """Whether ``x`` is a pandas or polars DataFrame or a pyarrow Table (named channels)."""
    return _table_columns(x) is not None


def _is_sequence(c: Any) -> bool:
    return (isinstance(c, (list, tuple, np.ndarray)) and np.ndim(c) == 1) or hasattr(c, "to_numpy")
