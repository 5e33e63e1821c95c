"""Reading signal channels: numeric CSV columns (pyarrow), ``.npz``/``.npy`` arrays, ``.wav``."""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .table import (
    CsvError,
    Sniffed,
    _binary_buffers,
    _decimal_values,
    _scan_decimals,
    pa,  # pyarrow, imported on first use
    parse_table,
    resolve_columns,
    sniff,
)

__all__ = ["CsvChannels", "CsvError", "read_csv", "read_signal"]


@dataclass
class CsvChannels:
    """Numeric columns of one CSV file (or arrays of one ``.npz``/``.npy``/``.wav`` file).

    Attributes
    ----------
    path : str
    names : list of str
        Channel names: the header's, or ``"col<i>"`` (0-based) without a header.
    channels : list of ndarray, each of shape (n_rows,)
        int64 where every value is an integer literal; for decimal columns
        float64 (the nearest double to each decimal), or with
        ``decimals="scaled"`` int64 counts of ``10**-scale``.
    skipped : list of str
        Non-numeric columns left out because they were not asked for.
    header : bool
        Whether the file has a header line.
    scales : list of int
        Decimals of each channel as written in the file (0 for integers):
        ``channels[i] * 10**-scales[i]`` is the value when the channel is
        scaled. ``-1`` where the text has no fixed scale (exponent forms,
        19-digit integers), which are then float64.
    scaled : list of bool
        Whether each channel holds scaled integers (``decimals="scaled"``).
    preamble : list of str
        Lines above the header (metadata, comments), as read.
    """

    path: str
    names: list
    channels: list
    skipped: list = field(default_factory=list)
    header: bool = True
    scales: list = field(default_factory=list)
    scaled: list = field(default_factory=list)
    preamble: list = field(default_factory=list)


_resolve = resolve_columns


def _line_of(s: Sniffed, row: int) -> int:
    """1-based file line of body row ``row`` (comment and blank lines counted)."""
    return s.body_line + row + sum(1 for p, _ in s.inserted if p <= row)


def _first_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _column(col: pa.Array, name: str, s: Sniffed, path: str,
            decimals: str) -> tuple[np.ndarray, int, bool]:
    """(values, scale, scaled) of one numeric column; raises CsvError naming the first bad cell."""
    import pyarrow.compute as pc  # (25 ms to import: where needed)
    offs, data = _binary_buffers(col)
    digits, dec, ok, _ = _scan_decimals(offs, data)
    if ok.all():
        scale = int(dec.max()) if dec.size else 0
        if scale == 0:
            return digits, 0, False
        if decimals == "scaled":
            ints, _, exact = _decimal_values(digits, dec, scale, False)
            if exact:
                return ints, scale, True
        # both exact in binary64: one correctly rounded division gives the nearest double
        _, floats, exact = _decimal_values(digits, dec, scale, True)
        if exact:
            return floats, scale, False
    else:
        scale = -1
    where = lambda r: f"{path}, line {_line_of(s, r)}, column {name!r}"  # noqa: E731
    for wide in (pa.int64(), pa.uint64()):  # integers of 19-20 digits: exact, not as doubles
        try:
            return pc.cast(col.cast(pa.string()), wide).to_numpy(zero_copy_only=False), 0, False
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    try:
        x = pc.cast(col.cast(pa.string()), pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for r in np.flatnonzero(~ok).tolist():
            v = bytes(col[r].as_py()).decode("utf-8", "replace").strip()
            if v == "":
                raise CsvError(f"{where(r)}: missing value") from None
            if not _first_float(v):
                raise CsvError(f"{where(r)}: {v!r} is not a number") from None
        raise CsvError(f"{path}, column {name!r}: cannot read as numbers") from None
    bad = ~np.isfinite(x)
    if bad.any():
        r = int(np.argmax(bad))
        v = bytes(col[r].as_py()).decode("utf-8", "replace")
        raise CsvError(f"{where(r)}: non-finite value {v!r}")
    if not ok.all() and (x == np.round(x)).all() and (np.abs(x) < 2**53).all() and \
            not pc.any(pc.match_substring(col, ".")).as_py():
        return x.astype(np.int64), 0, False
    return x, (int(dec[ok].max()) if ok.any() and scale >= 0 else scale), False


def _one_of(columns: Any, exclude: Any) -> None:
    """``columns`` and ``exclude`` together: an error (``columns`` alone decided, silently)."""
    if columns and exclude:
        raise ValueError("give columns (the ones kept) or exclude (the ones left out), not both")


def read_csv(path: str | Path, columns: list[str | int] | None = None,
             exclude: list[str | int] | None = None, *, skip_rows: int | None = None,
             comment: str | None = None, delimiter: str | None = None,
             decimals: Literal["float", "scaled"] = "float",
             output: Literal["channels", "numpy", "pandas", "polars", "arrow"] = "channels") -> Any:
    """Read the numeric columns of a CSV file, one channel per column (pyarrow's CSV reader).

    Lines above the header (a station line, ``#`` comments) are detected where
    unambiguous, or skipped with ``skip_rows``; the delimiter is detected among
    ``, \\t ; |``. The first line after them is a header when it has a field
    that is not a number and does not look like the lines below it. Columns
    whose first non-empty cell is not a number (a timestamp, a text label) are
    skipped, and listed in ``skipped``, unless asked for in ``columns``, which
    is then an error. A UTF-8 BOM, CRLF or CR line endings and quoted fields
    (RFC 4180) are read as such.

    Parameters
    ----------
    path : str or Path
    columns : sequence of str or int, optional
        Columns to read, by header name or 0-based index; default: every
        numeric column.
    exclude : sequence of str or int, optional
        Columns to leave out (by name or index) when ``columns`` is not given.
    skip_rows : int, optional
        Lines above the header to skip; default detected.
    comment : str, optional
        Lines starting with it are skipped wherever they are; default ``"#"``
        when the first line starts with ``#``.
    delimiter : str, optional
        Field delimiter; default detected.
    decimals : {"float", "scaled"}
        Decimal columns as float64 (the nearest double to each value), or as
        exact int64 counts of ``10**-scale`` (``scales`` gives the scale;
        a column that needs more than 18 digits at one scale stays float64).
    output : {"channels", "numpy", "pandas", "polars", "arrow"}, default "channels"
        What to return. The table forms hold the same columns as
        ``channels``, under their names and with their dtypes (int64, uint64
        for integers above int64's range, or float64; integer columns are
        exact up to 20 digits, wider ones are float64), rows in file order:

        - ``"channels"``: a :class:`CsvChannels`;
        - ``"numpy"``: a structured array, one field per column;
        - ``"pandas"``: a ``pandas.DataFrame``; ``df.attrs`` holds
          ``path``, ``scales``, ``scaled``, ``skipped`` and ``preamble``;
        - ``"polars"``: a ``polars.DataFrame``;
        - ``"arrow"``: a ``pyarrow.Table``; the field of a scaled column
          (``decimals="scaled"``) carries its scale as metadata
          ``{b"scale": b"<decimals>"}``.

        pandas and polars are imported only when asked for.

    Returns
    -------
    CsvChannels, numpy.ndarray, pandas.DataFrame, polars.DataFrame or pyarrow.Table
        As ``output`` says.

    Raises
    ------
    CsvError
        On a missing, non-numeric or non-finite value in a numeric column
        (names file, line and column), a requested column that is missing or
        not numeric, a row with another number of fields (names the line), or
        a file with no data rows.
    OSError
        If the file cannot be read.
    ValueError
        On an unknown ``output``, or for ``"numpy"`` and ``"polars"``
        (which need unique names), two columns with one name.
    ImportError
        If ``output`` is ``"pandas"`` or ``"polars"`` and that library is
        not installed.

    Examples
    --------
    >>> from signals import read_csv
    >>> df = read_csv("examples/data/mitbih208_ecg.csv", output="pandas")  # doctest: +SKIP
    """
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(map(repr, _OUTPUTS))}, got {output!r}")
    table = _read_csv(str(path), columns, exclude, skip_rows, comment, delimiter, decimals)
    return table if output == "channels" else _as_output(table, output)


_OUTPUTS = ("channels", "numpy", "pandas", "polars", "arrow")


def _as_output(t: CsvChannels, output: str) -> Any:
    """The channels of ``t`` as a table of kind ``output`` (see :func:`read_csv`)."""
    names = [str(n) for n in t.names]
    if output in ("numpy", "polars"):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{t.path}: column name(s) {dup} occur more than once; a {output} "
                             f"table needs unique names (select columns by index, or use "
                             f"output='pandas' or 'arrow')")
    if output == "numpy":
        out = np.empty(len(t.channels[0]), dtype=[(n, c.dtype) for n, c in zip(names, t.channels)])
        for n, c in zip(names, t.channels):
            out[n] = c
        return out
    if output == "pandas":
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("read_csv(output='pandas') needs pandas: pip install pandas") from None
        df = pd.DataFrame(dict(enumerate(t.channels)), copy=False)
        df.columns = pd.Index(names)
        df.attrs.update(path=t.path, scales=list(t.scales), scaled=list(t.scaled),
                        skipped=list(t.skipped), preamble=list(t.preamble))
        return df
    fields = [pa.field(n, pa.from_numpy_dtype(c.dtype),
                       metadata={b"scale": str(sc).encode()} if scaled else None)
              for n, c, sc, scaled in zip(names, t.channels, t.scales, t.scaled)]
    table = pa.Table.from_arrays([pa.array(c) for c in t.channels], schema=pa.schema(fields))
    if output == "arrow":
        return table
    try:
        import polars as pl
    except ImportError:
        raise ImportError("read_csv(output='polars') needs polars: pip install polars") from None
    return pl.from_arrow(table, rechunk=False)


def _read_csv(path: str, columns: list[str | int] | None, exclude: list[str | int] | None,
              skip_rows: int | None, comment: str | None, delimiter: str | None,
              decimals: str) -> CsvChannels:
    import pyarrow.compute as pc  # (25 ms to import: where needed)
    with open(path, "rb") as f:
        data = f.read()
    s = sniff(data, skip_rows=skip_rows, comment=comment, delimiter=delimiter, path=path)
    names = s.names
    cols = parse_table(s, path)
    if not cols or len(cols[0]) == 0:
        raise CsvError(f"{path}: no data rows" + (" after the header" if s.header is not None else ""))
    _one_of(columns, exclude)
    if columns is not None and len(columns):
        wanted = _resolve(list(columns), names, path, "column")
        explicit = True
    else:
        dropped = set(_resolve(list(exclude or []), names, path, "excluded column"))
        wanted = [i for i in range(len(names)) if i not in dropped]
        explicit = False
    out_names, channels, skipped, scales, scaled = [], [], [], [], []
    for c in wanted:
        name, col = names[c], cols[c]
        if wanted.count(c) == 1:
            cols[c] = None  # free each column's text once read
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        lens = np.diff(_binary_buffers(col)[0][:1001])
        r0 = int(np.argmax(lens > 0)) if (lens > 0).any() else -1
        if r0 < 0:
            nonempty = pc.filter(col, pc.greater(pc.binary_length(col), 0))
            first = bytes(nonempty[0].as_py()).decode("utf-8", "replace").strip() if len(nonempty) else ""
        else:
            first = bytes(col[r0].as_py()).decode("utf-8", "replace").strip()
        if first and not _first_float(first):
            if explicit:
                r = int(np.argmax(np.diff(_binary_buffers(col)[0]) > 0))
                raise CsvError(f"{path}, line {_line_of(s, r)}, column {name!r}: the column is not "
                               f"numeric (value {first!r})")
            skipped.append(name)
            continue
        x, scale, sc = _column(col, name, s, path, decimals)
        channels.append(x)
        out_names.append(name)
        scales.append(scale)
        scaled.append(sc)
    if not channels:
        raise CsvError(f"{path}: no numeric columns to read"
                       + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return CsvChannels(path, out_names, channels, skipped, s.header is not None, scales, scaled,
                       [x.decode("utf-8", "replace") for x in s.preamble])


def read_npy(f: Any, size: int) -> np.ndarray:
    """An array of the NumPy format (``.npy``) from the binary file object ``f`` that holds
    ``size`` bytes, its data checked against them before anything is allocated (numpy
    allocates what the header declares before it reads: 144 bytes declaring ``(2**40,)``
    asked for 8 TiB).

    Raises
    ------
    ValueError
        Not an ``.npy`` header, a header declaring more bytes than ``size`` holds, or an
        array that ``numpy.load(..., allow_pickle=False)`` refuses (objects).
    """
    start = f.tell()
    version = np.lib.format.read_magic(f)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f"NumPy format version {version} is not read")
    # (version 3 differs from 2 only in the header's encoding: UTF-8 for field names)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
        np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(f)
    need, have = int(np.prod(shape, dtype=object)) * dtype.itemsize, size - (f.tell() - start)
    if need > have:
        raise ValueError(f"its header declares {dtype} of shape {shape} ({need:,} bytes), "
                         f"the file holds {max(have, 0):,} bytes of data")
    f.seek(start)
    return np.lib.format.read_array(f, allow_pickle=False)


def npz_arrays(data: bytes, path: str) -> list[tuple[str, np.ndarray]]:
    """An ``.npz``'s arrays, ``(key, array)`` in member order, the keys as ``numpy.load`` gives
    them (``NAME.npy`` -> ``NAME``).

    Raises
    ------
    ValueError
        Naming ``path``: not a zip, a member that is no array (a folder, a text file), an
        encrypted one, two members of one key (``x`` and ``x.npy``, which ``numpy.load``
        reads as one), or an array that ``numpy.load`` would refuse (objects).
    """
    arrays, seen = [], set()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                name = info.filename
                key = name[:-4] if name.endswith(".npy") else name
                if key in seen:
                    raise ValueError(f"two members are the array {key!r} (numpy.load reads one "
                                     f"of them for both)")
                seen.add(key)
                with z.open(info) as f:
                    if info.is_dir() or f.read(6) != b"\x93NUMPY":
                        raise ValueError(f"member {name!r} is not a NumPy array (.npy)")
                    f.seek(0)
                    try:
                        arrays.append((key, read_npy(f, info.file_size)))
                    except ValueError as e:
                        raise ValueError(f"member {name!r}: {e}") from None
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, NotImplementedError,
            RuntimeError, zlib.error) as e:
        # (NotImplementedError: a member compressed with a method zipfile does not read;
        # RuntimeError: an encrypted one; zlib.error: a damaged deflated one)
        raise ValueError(f"{path}: not a readable npz file ({e})") from None
    return arrays


def read_signal(path: str | Path, columns: list[str | int] | None = None,
                exclude: list[str | int] | None = None, **csv_options) -> CsvChannels:
    """Read channels from a CSV, NumPy ``.npz``/``.npy``, PCM ``.wav`` file, or a recording.

    ``.npz``: every 1-D array is a channel named by its key, every 2-D array
    (channels, samples) gives channels ``key:0``, ``key:1``, ...; ``.npy``
    likewise. ``.wav``: 8/16/24/32/64-bit integer PCM or 32/64-bit float (plain
    or WAVE_FORMAT_EXTENSIBLE), channels ``ch0, ch1, ...``, in the file's
    sample type (24-bit as int32), as ``ubpe compress`` reads them. A recording (Parquet/Arrow, EDF/BDF, WFDB
    ``.hea``, by its suffix): the channels of
    :func:`signals.formats.read_recording` (its units, rates and scaling
    are there). ``columns``/``exclude``
    select by name or index, as for CSV; ``csv_options`` (``skip_rows``,
    ``comment``, ``delimiter``, ``decimals``) go to ``read_csv``.

    Raises
    ------
    CsvError
        On an unknown column, a non-numeric array, or an unsupported WAV.
    """
    if "output" in csv_options:
        raise TypeError("read_signal returns CsvChannels; for a table use read_csv(..., output=...)")
    path = Path(path)
    suffix = path.suffix.lower()
    from . import formats
    if suffix in formats.SUFFIXES:  # (a CSV parse of these gave 'line 2: 3 fields, expected 1')
        rec = formats.read_recording(path, columns, exclude)
        n = len(rec.names)
        return CsvChannels(str(path), list(rec.names), list(rec.channels), list(rec.skipped),
                           True, [0] * n, [False] * n, [])
    if suffix in (".csv", ".txt", ".tsv") or suffix not in (".npz", ".npy", ".wav"):
        return read_csv(path, columns=columns, exclude=exclude, **csv_options)
    names, chans = [], []
    if suffix in (".npz", ".npy"):
        if suffix == ".npz":
            try:
                arrays = dict(npz_arrays(path.read_bytes(), str(path)))
            except ValueError as e:
                raise CsvError(str(e)) from None
        else:
            try:
                with open(path, "rb") as f:
                    arrays = {path.stem: read_npy(f, path.stat().st_size)}
            except (ValueError, EOFError) as e:
                raise CsvError(f"{path}: not a readable npy file ({e})") from None
        for key, arr in arrays.items():
            if arr.dtype.kind not in "iufb":
                raise CsvError(f"{path}: array {key!r} is not numeric ({arr.dtype})")
            if arr.ndim == 1:
                names.append(key)
                chans.append(arr)
            elif arr.ndim == 2:  # channels along the shorter axis, as ubpe compress takes them
                rows = arr if arr.shape[0] <= arr.shape[1] else arr.T
                names += [f"{key}:{i}" for i in range(rows.shape[0])]
                chans += list(rows)
            else:
                raise CsvError(f"{path}: array {key!r} has shape {arr.shape}; expected 1-D or 2-D")
    else:  # a WAV file, read as ubpe compress reads it (every PCM and float kind it codes)
        from .files import split_wav
        try:
            cols = split_wav(Path(path).read_bytes(), str(path))[0]
        except ValueError as e:
            raise CsvError(str(e)) from None
        names, chans = [n for n, _ in cols], [c for _, c in cols]
    return pick_channels(str(path), names, chans, columns, exclude)


def pick_channels(path: str, names: list[str], chans: list[np.ndarray],
                  columns: list[str | int] | None = None,
                  exclude: list[str | int] | None = None) -> CsvChannels:
    """Named channels (of an array or WAV file, or of a container made from them) as
    :class:`CsvChannels`, picked by ``columns`` or ``exclude`` (names or 0-based indices).

    Raises
    ------
    CsvError
        On a non-finite float sample, a pick that names no channel, or both picks given.
    """
    for c, x in zip(names, chans):
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            i = int(np.argmax(~np.isfinite(x)))
            raise CsvError(f"{path}, channel {c!r}, sample {i}: non-finite value {x[i]}")
    _one_of(columns, exclude)
    if columns:
        idx = _resolve(columns, names, path, "channel")
    else:
        dropped = set(_resolve(exclude or [], names, path, "excluded channel"))
        idx = [i for i in range(len(names)) if i not in dropped]
    return CsvChannels(path, [names[i] for i in idx], [np.asarray(chans[i]) for i in idx],
                       [], header=False, scales=[0 if chans[i].dtype.kind in "iu" else -1 for i in idx],
                       scaled=[False] * len(idx))
