"""Reading numeric columns of CSV files as signal channels."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


class CsvError(ValueError):
    """A CSV file cannot be read as requested; the message names file, line, column."""


@dataclass
class CsvChannels:
    """Numeric columns of one CSV file.

    Attributes
    ----------
    path : str
    names : list of str
        Channel names: the header's, or ``"col<i>"`` (0-based) without a header.
    channels : list of ndarray, each of shape (n_rows,)
        int64 where every value is an integer literal, else float64.
    skipped : list of str
        Non-numeric columns left out because they were not asked for.
    header : bool
        Whether the first line was a header.
    """

    path: str
    names: list
    channels: list
    skipped: list = field(default_factory=list)
    header: bool = True


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _resolve(spec, names, path, what):
    """Map column names or 0-based indices to indices."""
    out = []
    for item in spec:
        item = item.strip() if isinstance(item, str) else item
        if isinstance(item, str) and item in names:
            out.append(names.index(item))
        elif isinstance(item, int) or (isinstance(item, str) and item.lstrip("-").isdigit()):
            i = int(item)
            if not 0 <= i < len(names):
                raise CsvError(f"{path}: {what} index {i} is out of range "
                               f"(the file has {len(names)} columns, 0..{len(names) - 1})")
            out.append(i)
        else:
            raise CsvError(f"{path}: no column named {item!r} "
                           f"(columns: {', '.join(names)})")
    return out


def read_csv(path, columns=None, exclude=None) -> CsvChannels:
    """Read the numeric columns of a CSV file, one channel per column.

    The first line is a header when any of its fields is not a number.
    Non-numeric columns (a timestamp, a text label) are skipped, and listed
    in ``skipped``, unless asked for in ``columns``, which is then an error.

    Parameters
    ----------
    path : str or Path
    columns : sequence of str or int, optional
        Columns to read, by header name or 0-based index; default: every
        numeric column.
    exclude : sequence of str or int, optional
        Columns to leave out (by name or index) when ``columns`` is not given.

    Returns
    -------
    CsvChannels

    Raises
    ------
    CsvError
        On a missing, non-numeric or non-finite value in a numeric column
        (names file, line and column), a requested column that is missing or
        not numeric, ragged rows, or a file with no data rows.
    OSError
        If the file cannot be read.
    """
    path = str(path)
    with open(path, newline="", encoding="utf-8") as f:
        rows = [(n, [v.strip() for v in row]) for n, row in enumerate(csv.reader(f), 1)
                if any(v.strip() for v in row)]
    if not rows:
        raise CsvError(f"{path}: the file is empty")
    first = rows[0][1]
    header = any(v and not _is_number(v) for v in first)
    names = first if header else [f"col{i}" for i in range(len(first))]
    data = rows[1:] if header else rows
    if not data:
        raise CsvError(f"{path}: no data rows after the header")
    for line, row in data:
        if len(row) != len(names):
            raise CsvError(f"{path}, line {line}: {len(row)} fields, expected {len(names)}")
    if columns is not None and len(columns):
        wanted = _resolve(columns, names, path, "column")
        explicit = True
    else:
        dropped = set(_resolve(exclude or [], names, path, "excluded column"))
        wanted = [i for i in range(len(names)) if i not in dropped]
        explicit = False
    out_names, channels, skipped = [], [], []
    for c in wanted:
        name = names[c]
        values = [row[c] for _, row in data]
        if values[0] and not _is_number(values[0]):
            if explicit:
                raise CsvError(f"{path}, line {data[0][0]}, column {name!r}: the column is not "
                               f"numeric (value {values[0]!r})")
            skipped.append(name)
            continue
        channels.append(_parse_column(values, data, path, name))
        out_names.append(name)
    if not channels:
        raise CsvError(f"{path}: no numeric columns to read"
                       + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
    return CsvChannels(path, out_names, channels, skipped, header)


def _parse_column(values, data, path, name) -> np.ndarray:
    arr = np.array(values)
    try:
        return arr.astype(np.int64)
    except (ValueError, OverflowError):
        pass
    for k, v in enumerate(values):  # find the first bad value to name it
        where = f"{path}, line {data[k][0]}, column {name!r}"
        if v == "":
            raise CsvError(f"{where}: missing value")
        if not _is_number(v):
            raise CsvError(f"{where}: {v!r} is not a number")
        if not np.isfinite(float(v)):
            raise CsvError(f"{where}: non-finite value {v!r}")
    return arr.astype(np.float64)


def read_signal(path, columns=None, exclude=None) -> CsvChannels:
    """Read channels from a CSV, NumPy ``.npz``/``.npy`` or PCM ``.wav`` file.

    ``.npz``: every 1-D array is a channel named by its key, every 2-D array
    (channels, samples) gives channels ``key:0``, ``key:1``, ...; ``.npy``
    likewise. ``.wav``: integer PCM (``wave`` module), channels
    ``ch0, ch1, ...``, in the file's sample width. ``columns``/``exclude``
    select by name or index, as for CSV.

    Raises
    ------
    CsvError
        On an unknown column, a non-numeric array, or an unsupported WAV.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".txt", ".tsv") or suffix not in (".npz", ".npy", ".wav"):
        return read_csv(path, columns=columns, exclude=exclude)
    names, chans = [], []
    if suffix in (".npz", ".npy"):
        arrays = dict(np.load(path)) if suffix == ".npz" else {path.stem: np.load(path)}
        for key, arr in arrays.items():
            if arr.dtype.kind not in "iuf":
                raise CsvError(f"{path}: array {key!r} is not numeric ({arr.dtype})")
            if arr.ndim == 1:
                names.append(key)
                chans.append(arr)
            elif arr.ndim == 2:
                names += [f"{key}:{i}" for i in range(arr.shape[0])]
                chans += list(arr)
            else:
                raise CsvError(f"{path}: array {key!r} has shape {arr.shape}; expected 1-D or 2-D")
    else:
        import wave
        try:
            with wave.open(str(path)) as w:
                width, n_ch = w.getsampwidth(), w.getnchannels()
                frames = w.readframes(w.getnframes())
        except (wave.Error, EOFError) as e:
            raise CsvError(f"{path}: not a PCM WAV file ({e})") from None
        if width not in (1, 2, 4):
            raise CsvError(f"{path}: {8 * width}-bit WAV is not supported (8, 16, 32 are)")
        pcm = np.frombuffer(frames, {1: "u1", 2: "<i2", 4: "<i4"}[width]).astype(np.int64)
        pcm = pcm.reshape(-1, n_ch).T
        names, chans = [f"ch{i}" for i in range(n_ch)], list(pcm)
    for c, x in zip(names, chans):
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            i = int(np.argmax(~np.isfinite(x)))
            raise CsvError(f"{path}, channel {c!r}, sample {i}: non-finite value {x[i]}")
    if columns:
        idx = _resolve(columns, names, str(path), "channel")
    else:
        dropped = set(_resolve(exclude or [], names, str(path), "excluded channel"))
        idx = [i for i in range(len(names)) if i not in dropped]
    return CsvChannels(str(path), [names[i] for i in idx], [np.asarray(chans[i]) for i in idx],
                       [], header=False)
