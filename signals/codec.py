"""The signal codec: arrays and files in, ``.ubpe`` containers out, and back.

This module is the pipeline; each stage has its own module:

1. reading (``readers.py``, ``table.py`` for exact CSV files);
2. exact integer mapping (``intmap.py``: integer offsets, decimal scales,
   IEEE bits) or, when asked, a quantizer (``quantize.py``, or ``max_error``);
3. per channel, prediction, tokens and entropy coding, behind one call
   (``channel.py``: ``encode_channel``/``decode_channel``);
4. the container (``container.py``; byte layout in ``docs/format.md``).

Version-1 files are read by ``codec_v1.py``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from . import container
from .arraylike import as_channels, is_series, is_table, warn_if_transposed
from .channel import check_level, decode_channel, encode_channel, payload_plan
from .codec_v1 import decompress_v1, inspect_v1
from .container import SignalFormatError
from .intmap import check_max_error, describe, map_to_int64, unmap_from_int64
from .quantize import Quantizer, check_bins, declared_bins, quantizer_from_dict

DEFAULT_LEVEL = 5
MAX_SAMPLES = container.MAX_SAMPLES
# values one call decodes unless told otherwise: 8 GiB of int64. A 20-byte constant payload
# may legally stand for any count, so the count is bounded before anything is allocated.
MAX_VALUES = 1 << 30

__all__ = ["compress", "decompress", "inspect", "compress_stream", "decompress_stream",
           "Column", "encode_columns", "decode_columns", "SignalFormatError", "DEFAULT_LEVEL"]


@dataclass
class Column:
    """One decoded column of a container.

    Attributes
    ----------
    name : str
    values : ndarray, shape (n,)
        In the original dtype (lossless), or float64 for a quantized column.
    max_error : float
        0 for lossless; else the guaranteed bound on ``|x - x'|``.
    map : dict
        The mapping config from the header (for ``inspect``).
    """

    name: str
    values: np.ndarray
    max_error: float = 0.0
    map: dict = field(default_factory=dict)


# ---------------------------------------------------------------- encoding
def _map_column(name: str, x: np.ndarray, quantizer: Quantizer | None,
                max_error: float | None) -> tuple[np.ndarray, dict, bytes, float]:
    """Values to int64: ``(ints, map config, exceptions, error bound)``."""
    if x.ndim != 1:
        raise ValueError(f"channel {name!r}: expected 1-D samples, got shape {x.shape}")
    if x.dtype.kind not in "iuf" and x.dtype != np.bool_:
        raise TypeError(f"channel {name!r}: samples must be numeric, got dtype {x.dtype}")
    if quantizer is not None:
        xq = x.view(np.uint8) if x.dtype == np.bool_ else x  # (0 and 1: exact)
        try:  # (the codebook in the data's dtype: a WAV or .npy is written back in it)
            q = type(quantizer)(**quantizer.get_params()).fit(xq).round_to(
                x.dtype if x.dtype != np.bool_ else np.float64)
            codes = q.encode(xq).astype(np.int64)
        except ValueError as e:
            raise ValueError(f"channel {name!r}: {e}") from None
        return codes, {"kind": "quantizer", "dtype": x.dtype.str, "quantizer": q.to_dict()}, \
            b"", float(q.max_error_[0])
    try:
        m = map_to_int64(x, max_error=max_error)
    except ValueError as e:
        raise ValueError(f"channel {name!r}: {e}") from None
    bound = float(m.config.get("max_error", 0.0)) if "max_error" in m.config else 0.0
    return m.ints, m.config, m.extra, bound


def encode_columns(columns: list[tuple[str, np.ndarray]], header: dict, *,
                   level: int = DEFAULT_LEVEL, max_error: float | None = None,
                   quantizer: Quantizer | None = None, blobs: Iterable[bytes] = (),
                   channel_options: dict | None = None, model: Any = None,
                   plans: dict | None = None) -> bytes:
    """A version-2 container holding ``columns`` (and raw ``blobs``) under ``header``.

    Parameters
    ----------
    columns : list of (name, ndarray of shape (n,))
        Numeric columns; each is mapped to int64 exactly (or quantized, if
        asked) and coded as one channel payload.
    header : dict
        The source description (``source``, ``shape``, ``csv``...; see
        ``docs/format.md``); ``columns`` and ``sections`` are filled here.
    level : int
        Speed/size trade-off passed to :func:`signals.channel.encode_channel`.
    max_error, quantizer
        Lossy coding, for every column (see :func:`compress`).
    blobs : iterable of bytes
        Extra byte strings stored after the columns (zstd), given back in
        order by :func:`decode_columns`.
    channel_options : dict, optional
        Keyword options for :func:`signals.channel.encode_channel`.
    model : SignalModel, optional
        A fitted model with a codec part: each column whose name it knows is
        mapped with the model's fixed mapping and coded against the model's
        tables (or its own, whichever is smaller); the header stores the
        model's content id.
    plans : dict, optional
        ``{column name: Plan}`` (:func:`column_plans` of a container of similar
        data): each column found there is coded with its plan
        (:func:`signals.channel.encode_channel`), without the search.
    """
    level, max_error = check_level(level), check_max_error(max_error)
    if max_error and quantizer is not None:
        raise ValueError("max_error and quantizer exclude each other: a quantizer sets its own "
                         "error (its max_error_), a max_error maps the values itself")
    columns = list(columns)
    if model is not None:
        model._check_fitted()  # (NotFittedError, not an AttributeError from inside)
    if len(columns) > container.MAX_COLUMNS:  # (what a reader refuses: refused before any work)
        raise ValueError(f"{len(columns):,} columns (channels), above the limit of "
                         f"{container.MAX_COLUMNS:,} that a container holds; a 2-D array is "
                         f"(n_channels, n_samples): is it transposed?")
    coded: list[dict] = []  # per column: its entry's fields, payload and exceptions
    bins = 0  # of the columns' quantizers so far
    exact: dict[int, dict] = {}  # the exact coding of the columns coded lossy
    for name, x in columns:
        x = np.asarray(x)
        entry = {"name": str(name), "kind": "samples", "n": int(x.size), "dtype": x.dtype.str}
        if model is not None and model.has_codec(name, x):
            ints, config = model.map_channel(name, x)
            coded.append({**entry, "map": config, "max_error": 0.0, "model": True,
                          "_payload": model.encode_channel(name, ints, level=level), "_extra": b""})
            continue
        if x.size > MAX_SAMPLES:
            raise ValueError(f"channel {name!r}: {x.size:,} samples, above the limit of "
                             f"{MAX_SAMPLES:,} per container (use compress_stream)")
        options = {"level": level, "plan": plans.get(str(name)) if plans else None,
                   **(channel_options or {})}
        c = _code_column(entry, x, quantizer, max_error, options)
        if c["map"].get("kind") == "quantizer":  # (what a reader takes: all columns together)
            bins += declared_bins(c["map"]["quantizer"])
            check_bins(bins, "the columns' quantizers")
        if c["max_error"] and quantizer is None:  # a lossy column: exact where that is smaller
            e = _code_column(entry, x, None, None, options)
            exact[len(coded)] = e
            c = e if _cost(e) <= _cost(c) else c
        coded.append(c)
    blobs = list(blobs)
    head = {**header, "n_blobs": len(blobs)}
    if any(c.get("model") for c in coded):  # (the model is needed only where a column used it)
        head["model"] = model.content_id()
    data = _container(head, coded, blobs)
    if exact and any(c["max_error"] for c in coded):  # lossy that does not code smaller: exact
        lossless = _container({k: v for k, v in head.items() if k != "max_error"},
                              [exact.get(k, c) for k, c in enumerate(coded)], blobs)
        if len(lossless) <= len(data):
            return lossless
    return data


def _code_column(entry: dict, x: np.ndarray, quantizer: Quantizer | None,
                 max_error: float | None, options: dict) -> dict:
    """A column's header entry (``entry`` and its mapping) with its payload and exceptions."""
    ints, config, extra, bound = _map_column(entry["name"], x, quantizer, max_error)
    return {**entry, "map": config, "max_error": bound, "_extra": extra,
            "_payload": encode_channel(ints, **options)}


def _cost(c: dict) -> int:
    """Bytes a coded column adds to a container, about (its header entry uncompressed)."""
    return len(c["_payload"]) + len(c["_extra"]) + len(json.dumps(c["map"]))


def _container(head: dict, coded: list[dict], blobs: list[bytes]) -> bytes:
    """The container of the coded columns (:func:`encode_columns`) and raw ``blobs``."""
    sections: list[tuple[bytes, bytes]] = []
    cols = []
    for c in coded:
        col = {k: v for k, v in c.items() if not k.startswith("_")}
        col.update(payload=len(sections), extra=None)
        sections.append((b"C", c["_payload"]))
        if c["_extra"]:
            col["extra"] = len(sections)
            sections.append((b"B", container.blob(c["_extra"])))
        cols.append(col)
    sections += [(b"B", container.blob(raw)) for raw in blobs]
    return container.write_container({**head, "columns": cols}, sections,
                                     sum(c["n"] for c in cols))


def column_plans(header: dict, sections: list) -> dict:
    """``{column name: Plan}`` of a container's columns coded without a model
    (:func:`signals.channel.payload_plan`), from :func:`signals.container.read_container`'s
    header and sections; a name that occurs twice keeps its first plan."""
    plans: dict = {}
    for c in header.get("columns", []):
        if c.get("model") or c.get("name") in plans:
            continue
        p = payload_plan(sections[c["payload"]].body, c["n"])
        if p is not None:
            plans[c["name"]] = p
    return plans


def _check_column(c: Any, k: int, n_sections: int) -> None:
    if not isinstance(c, dict):
        raise SignalFormatError(f"header: column {k} is not an object")
    for key, kind in (("name", str), ("n", int), ("map", dict), ("payload", int)):
        if not isinstance(c.get(key), kind):
            raise SignalFormatError(f"header: column {k} has no valid {key!r}")
    if not 0 <= c["n"] <= MAX_SAMPLES:
        raise SignalFormatError(f"header: column {c['name']!r} declares {c['n']:,} samples")
    for key in ("payload", "extra"):
        if c.get(key) is not None and not (isinstance(c[key], int) and 0 <= c[key] < n_sections):
            raise SignalFormatError(f"header: column {c['name']!r} points to a missing section")
    if c.get("max_error") is not None and not _is_bound(c["max_error"]):
        raise SignalFormatError(f"header: column {c['name']!r} has no valid 'max_error'")


def _is_bound(v: Any) -> bool:
    """Whether a header's ``max_error`` is a finite number >= 0 (a forged one may be anything)."""
    return not isinstance(v, bool) and isinstance(v, int | float) and 0 <= v < float("inf")


def decode_columns(data: bytes, model: Any = None, *,
                   max_values: int = MAX_VALUES) -> tuple[dict, list[Column], list[bytes]]:
    """Inverse of :func:`encode_columns`: ``(header, columns, blobs)``.

    Raises
    ------
    SignalFormatError
        On any damage or inconsistency, naming the section or column; or
        when the container was made with a model and ``model`` is missing
        or another one (the message names the id expected).
    """
    header, sections, n_values = container.read_container(data)
    if header.get("verbatim"):  # (a CSV file stored whole: read_container's one section V)
        return header, [], [container.read_verbatim(sections[0].body)]
    if n_values > max_values:
        raise SignalFormatError(f"the file declares {n_values:,} values, above max_values="
                                f"{max_values:,}; pass a larger max_values (ubpe decompress "
                                f"--max-values) to decode it")
    wanted = header.get("model")
    if wanted is None and any(isinstance(c, dict) and c.get("model") for c in header["columns"]):
        raise SignalFormatError("header: columns coded with a model, but no model id")
    if wanted is not None:
        if model is None:
            raise SignalFormatError(f"this file was compressed with model {wanted}; pass that "
                                    f"model (--model) to decompress it")
        if model.content_id() != wanted:
            raise SignalFormatError(f"this file was compressed with model {wanted}, not with "
                                    f"the model given ({model.content_id()})")
    for k, c in enumerate(header["columns"]):
        _check_column(c, k, len(sections))
    declared = sum(c["n"] for c in header["columns"])
    if declared != n_values:  # (before a column's samples are allocated)
        raise SignalFormatError(f"header: the columns declare {declared:,} values, the end "
                                f"marker {n_values:,}")
    try:  # (each quantizer builds its tables: all together bounded, as the writer bounds them)
        check_bins(sum(declared_bins(c["map"].get("quantizer") or {}) for c in header["columns"]
                       if c["map"].get("kind") == "quantizer"), "the columns' quantizers")
    except ValueError as e:
        raise SignalFormatError(f"header: {e}") from None
    columns: list[Column] = []
    used = set()
    for c in header["columns"]:
        name = c["name"]
        sec = sections[c["payload"]]
        if sec.kind != b"C":
            raise SignalFormatError(f"column {name!r}: section {c['payload']} is not a payload")
        try:
            if c.get("model"):
                if model is None or not model.has_codec(name):
                    raise ValueError("the model has no such channel")
                ints = model.decode_channel(name, sec.body, c["n"])
            else:
                ints = decode_channel(sec.body, c["n"])
        except (ValueError, IndexError) as e:
            raise SignalFormatError(f"column {name!r}, payload at byte {sec.offset}: {e}") from None
        used.add(c["payload"])
        extra = b""
        if c.get("extra") is not None:
            extra = container.read_blob(sections[c["extra"]].body, f"column {name!r} exceptions")
            used.add(c["extra"])
        try:
            if c.get("model"):
                values = model.unmap_channel(name, ints)
            elif c["map"].get("kind") == "quantizer":
                values = quantizer_from_dict(c["map"]["quantizer"]).decode(ints)
            else:
                values = unmap_from_int64(ints, c["map"], extra, copy=False)
        except (ValueError, KeyError, TypeError) as e:
            raise SignalFormatError(f"column {name!r}: bad mapping ({e})") from None
        columns.append(Column(name, _byte_order(values, c.get("dtype")),
                              float(c.get("max_error") or 0.0), c["map"]))
    if sum(c.values.size for c in columns) != n_values:
        raise SignalFormatError(f"the end marker declares {n_values:,} values, the columns "
                                f"hold {sum(c.values.size for c in columns):,}")
    rest = [k for k in range(len(sections)) if k not in used]
    if len(rest) != header.get("n_blobs", 0) or any(sections[k].kind != b"B" for k in rest):
        raise SignalFormatError("header: the blob sections do not match the columns")
    blobs = [container.read_blob(sections[k].body, f"blob at byte {sections[k].offset}")
             for k in rest]
    return header, columns, blobs


def _byte_order(values: np.ndarray, stored: Any) -> np.ndarray:
    """``values`` in the byte order of the column's stored dtype (``x.dtype.str`` of the input:
    ``">i4"`` for a big-endian array), where that dtype is theirs but for the byte order; the
    mappings give native values."""
    if not isinstance(stored, str) or stored[:1] not in ("<", ">") or stored == values.dtype.str:
        return values
    try:
        dtype = np.dtype(stored)
    except (TypeError, ValueError):
        return values
    return values.astype(dtype) if dtype.newbyteorder("=") == values.dtype else values


# ---------------------------------------------------------------- arrays
def compress(x: Any, *, level: int = DEFAULT_LEVEL, max_error: float | None = None,
             quantizer: Quantizer | None = None, names: Sequence[str] | None = None, meta: dict | None = None,
             model: Any = None, plans: dict | None = None, **channel_options) -> bytes:
    """Compress sampled signals into a ``.ubpe`` container, lossless by default.

    Parameters
    ----------
    x : array-like
        A 1-D array (n_samples,) or a 2-D array (n_channels, n_samples) (or
        what ``numpy.asarray`` takes: a Dask array, a list of numbers), given
        back with its shape and dtype; a list of 1-D arrays (lengths may
        differ), given back as a list; or a pandas, polars or pyarrow Series
        or table (columns are channels, names kept), given back as a list of
        arrays. Any integer dtype up to 64 bits, bool, or float16/32/64.
    level : int, default 5
        Speed against size, as xz's and zstd's presets: see
        :func:`signals.channel.encode_channel`.
    max_error : float, optional
        Lossy coding with ``max |x - x'| <= max_error`` per value (absolute
        error bound, as SZ and ZFP give). Default (None, or 0): lossless, bit
        for bit. Bool channels are always kept exactly.
    quantizer : Quantizer, optional
        Lossy coding through a quantizer fitted per channel (its error bound
        is stored and reported by :func:`inspect`).
    names : list of str, optional
        Channel names (default: DataFrame columns, else ``ch0, ch1, ...``).
    meta : dict, optional
        JSON metadata stored as is (units, sampling rate, ...).
    model : SignalModel, optional
        A model from ``ubpe build`` (:meth:`signals.SignalModel.fit`): the
        channels it knows (by name) are coded against its tables, and the
        file stores its content id instead of tables; decompress it with
        the same model.
    plans : dict, optional
        ``{channel name: Plan}`` of a container of similar data
        (:func:`column_plans`; :func:`compress_stream` passes its first
        chunk's): those channels are coded with these choices, without the
        search (see :func:`encode_columns`).
    **channel_options
        Passed to :func:`signals.channel.encode_channel`.

    Returns
    -------
    bytes
        A version-2 container (``docs/format.md``).

    Raises
    ------
    ValueError
        On a bad option, names that do not match, more than 65,536 channels,
        or an array of more than 2 dimensions.
    TypeError
        On a non-numeric channel (complex, text, objects, dates).
    """
    if model is not None:
        model._check_fitted()  # (NotFittedError, not an AttributeError from inside)
    chans, default_names, shape, dtype = _channels_of(x)
    names = list(names) if names is not None else (
        default_names or [f"ch{i}" for i in range(len(chans))])
    if len(names) != len(chans):
        raise ValueError(f"{len(names)} names for {len(chans)} channels")
    twice = sorted(n for n, k in Counter(map(str, names)).items() if k > 1)  # (stored as str)
    if twice:  # (decompress gives channels back by name)
        raise ValueError(f"channel names must be distinct: {', '.join(map(repr, twice))} more "
                         f"than once")
    header = {"source": "array" if shape is not None else "arrays", "shape": shape,
              "axis": 0, "meta": _json_meta(meta), "dtype": dtype}
    if model is not None and names == [f"ch{i}" for i in range(len(chans))] and \
            len(chans) == len(model.channel_names_):
        names = list(model.channel_names_)  # unnamed channels are the model's, in order
    return encode_columns(list(zip(names, chans)), header, level=level, max_error=max_error,
                          quantizer=quantizer, channel_options=channel_options, model=model,
                          plans=plans)


def _json_meta(meta: dict | None) -> dict:
    """``meta`` as plain JSON (NumPy scalars as Python numbers), or ValueError naming the key."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ValueError(f"meta must be a dict, got {type(meta).__name__}")

    def plain(v: Any, key: str) -> Any:
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"meta[{key!r}]: {v} is not JSON (a finite number)")
        if isinstance(v, dict):
            return {str(k): plain(w, f"{key}.{k}") for k, w in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(w, key) for w in v]
        if v is None or isinstance(v, (str, int, float, bool)):
            return v
        raise ValueError(f"meta[{key!r}]: {type(v).__name__} is not JSON (str, number, bool, "
                         f"None, list or dict)")
    return {str(k): plain(v, str(k)) for k, v in meta.items()}


def _channels_of(x) -> tuple[list[np.ndarray], list[str] | None, list[int] | None, str | None]:
    """``(channels, names, shape to give back or None for a list, dtype of the array or None)``."""
    if is_table(x) or is_series(x):  # DataFrames, Series, Arrow
        chans, names = as_channels(x)
        return chans, names, None, None
    if isinstance(x, (list, tuple)) and (not x or not all(np.ndim(c) == 0 for c in x)):
        chans = [np.asarray(c) for c in x]
        if any(c.ndim != 1 for c in chans):
            raise ValueError("a list of channels must hold 1-D arrays")
        return chans, None, None, None
    arr = np.asarray(x)
    if arr.ndim == 1:
        return [arr], None, [int(arr.size)], arr.dtype.str
    if arr.ndim == 2:
        warn_if_transposed(arr.shape, stacklevel=4)
        return list(arr), None, [int(d) for d in arr.shape], arr.dtype.str
    raise ValueError(f"expected 1-D (n_samples,) or 2-D (n_channels, n_samples) samples, "
                     f"got shape {arr.shape}")


def _not_a_stream(data: bytes) -> None:
    """SignalFormatError where ``data`` is a stream of containers (it said 'bad magic bytes')."""
    if data[:len(container.STREAM_MAGIC)] == container.STREAM_MAGIC:
        raise SignalFormatError("a stream of containers, not one: read it with "
                                "signals.decompress_stream (or, for a CSV or WAV file in "
                                "frames, signals.files.decompress_file_stream)")


def decompress(data: bytes, *, model: Any = None, max_values: int = MAX_VALUES) -> Any:
    """Decode a ``.ubpe`` container (version 1 or 2) to what :func:`compress` took.

    Parameters
    ----------
    data : bytes
    model : SignalModel, optional
        Needed when the file was compressed with a model.
    max_values : int, default 2**30
        Refuse a file that declares more values (memory is checked before it
        is allocated; a constant column of any length takes a few bytes).

    Returns
    -------
    ndarray or list of ndarray
        The array as given (shape and dtype), or a list of 1-D arrays for a
        list, Series or table input (see :func:`compress`). Every column keeps
        its dtype, lossy ones included, except those coded through a
        ``quantizer`` (float64). The ``meta`` given to :func:`compress` is in
        :func:`inspect`'s summary.

    Raises
    ------
    SignalFormatError
        On a foreign, truncated, corrupted or newer file.
    ValueError
        On a container of a CSV file (:func:`signals.decompress_file` gives
        its bytes back).
    TypeError
        If ``data`` is not bytes.
    """
    data = _as_bytes(data)
    _not_a_stream(data)
    if container.container_version(data) == 1:
        return decompress_v1(data, max_values=max_values)
    header, columns, _ = decode_columns(data, model, max_values=max_values)
    if header.get("source") == "csv":  # (its columns are the codec's integers, not the cells)
        raise ValueError("this container holds a CSV file: signals.decompress_file(data) gives "
                         "its bytes back (signals.read_csv reads its columns)")
    if header.get("kept"):  # (arrays of its file that are not columns: they would be missing)
        raise ValueError(f"this container holds an {header.get('source')} file whose arrays "
                         f"{', '.join(map(str, header['kept']))} are kept as they are: "
                         f"signals.decompress_file(data) gives its bytes back")
    return _as_array(header, columns)


def _as_bytes(data) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    return bytes(data)


def _as_array(header: dict, columns: list[Column]) -> Any:
    values = [c.values for c in columns]
    shape = header.get("shape")
    if header.get("source") != "array" or shape is None:
        return values
    if len(shape) == 1:
        if len(values) != 1 or values[0].size != shape[0]:
            raise SignalFormatError("header: the shape does not match the columns")
        return values[0]
    if len({v.dtype for v in values}) > 1:
        values = [v.astype(np.float64) for v in values]
    if header.get("axis", 0) not in (0, 1) or isinstance(header.get("axis"), bool):
        raise SignalFormatError(f"header: axis {header.get('axis')!r} (0 or 1)")
    out = np.stack(values) if values else np.zeros(shape, header.get("dtype") or np.int64)
    if header.get("axis") == 1:
        out = out.T
    if list(out.shape) != list(shape):
        raise SignalFormatError(f"header: shape {shape} does not match the columns {out.shape}")
    return _byte_order(out, header.get("dtype"))  # (np.stack gives native order)


def inspect(data: bytes) -> dict:
    """Summary of a ``.ubpe`` container without decoding the samples.

    Returns
    -------
    dict
        ``format``, ``version``, ``bytes``, ``source``, ``bits_per_sample``,
        ``max_error`` (the largest bound of any column or CSV cell: 0 when
        everything is exact), ``meta`` (what :func:`compress` was given as
        ``meta``; ``{}`` if nothing), ``model`` (the content id of the model
        needed, or None), ``csv_columns`` (a CSV file's columns, else None),
        ``stored_whole`` (for a small CSV file stored whole, because that was
        smaller than coding its columns: the coder, ``"zstd"`` or
        ``"lzma2"``; else None),
        ``wav`` (a WAV file's ``rate`` in Hz, ``n_channels``, ``bits`` per
        sample and sample ``dtype``, else None) and ``channels``: per column
        its ``name``, ``n_samples``, ``dtype``, ``mapping`` (in words:
        "lossless, ...", or the bound), ``max_error`` and ``bytes`` (its
        payload's size).

    Raises
    ------
    SignalFormatError
        On a foreign, truncated, corrupted or newer file.
    """
    data = _as_bytes(data)
    _not_a_stream(data)
    if container.container_version(data) == 1:
        return inspect_v1(data)
    header, sections, n_values = container.read_container(data)
    stored = container.verbatim_coder(sections[0].body) if header.get("verbatim") else None
    chans = []
    for k, c in enumerate(header["columns"]):
        _check_column(c, k, len(sections))
        mapping = c["map"]
        if mapping.get("kind") == "quantizer":
            words = f"lossy: {mapping['quantizer']['kind']} quantizer, max error {c['max_error']:.6g}"
        else:
            words = describe(mapping)
        chans.append({"name": c["name"], "n_samples": c["n"], "dtype": c.get("dtype"),
                      "mapping": words, "max_error": float(c.get("max_error") or 0.0),
                      "quantizer": mapping["quantizer"]["kind"]
                      if mapping.get("kind") == "quantizer" else None,
                      "bytes": len(sections[c["payload"]].body)})
    if header.get("source") == "csv" and isinstance(header.get("csv"), dict):
        from .table import CsvParts
        try:
            csv_columns = CsvParts(header["csv"]).describe(lossy=bool(header.get("max_error")))
        except (KeyError, TypeError, ValueError) as e:
            raise SignalFormatError(f"header: inconsistent CSV layout ({e})") from None
    else:
        csv_columns = None
    bound = header.get("max_error") or 0.0
    if not _is_bound(bound):
        raise SignalFormatError("header: no valid 'max_error'")
    meta = header.get("meta") or {}
    if not isinstance(meta, dict):
        raise SignalFormatError("header: 'meta' is not an object")
    return {"format": "ubpe.signal", "version": container.VERSION, "bytes": len(data),
            "source": header.get("source"), "channels": chans, "model": header.get("model"),
            "max_error": max([float(bound)] + [c["max_error"] for c in chans]), "meta": meta,
            "csv_columns": csv_columns, "stored_whole": stored,
            "wav": ({k: header["wav"].get(k) for k in ("rate", "n_channels", "bits", "dtype")}
                    if header.get("source") == "wav" and isinstance(header.get("wav"), dict)
                    else None),
            "bits_per_sample": 8 * len(data) / max(n_values, 1)}


# ---------------------------------------------------------------- streams
def compress_stream(chunks: Iterable, fileobj: IO[bytes], **options) -> int:
    """Compress a signal larger than memory, one chunk at a time.

    Parameters
    ----------
    chunks : iterable of array-like
        Consecutive pieces of the signal, each as :func:`compress` takes.
    fileobj : binary file object
        Receives the stream (``docs/format.md``, section 3): a magic, a
        version, one length-prefixed container per chunk, and an end marker
        with the frame count, so that truncation is detected.
    **options
        Passed to :func:`compress` for every chunk; the chunks after the first
        are coded with the first one's choices per channel (its
        :func:`column_plans`), without the search.

    Returns
    -------
    int
        The number of frames written.
    """
    container.write_stream_head(fileobj)
    n = 0
    plans = options.pop("plans", None)
    for chunk in chunks:
        frame = compress(chunk, plans=plans, **options)
        if n == 0 and plans is None:
            plans = column_plans(*container.read_container(frame)[:2])
        container.write_stream_frame(fileobj, frame)
        n += 1
    container.write_stream_end(fileobj, n)
    return n


def decompress_stream(fileobj: IO[bytes], *, model: Any = None) -> Iterator[Any]:
    """Yield the chunks written by :func:`compress_stream`, one at a time.

    Raises
    ------
    SignalFormatError
        On a foreign or newer stream, a corrupted frame, or a stream that
        ends before its end marker (truncated), when that point is reached.
    """
    for frame in container.iter_stream_frames(fileobj):
        yield decompress(frame, model=model)
