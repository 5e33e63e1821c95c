"""Recordings in the formats sensor people hold: Parquet/Arrow, EDF/BDF, WFDB (``ubpe[formats]``).

:func:`read_recording` reads any of them (and, through
:func:`signals.read_signal`, CSV, ``.npz``/``.npy`` and ``.wav``) into a
:class:`Recording`: channel names, the samples, each channel's physical unit,
sampling rate and digital-to-physical scaling. Where the file stores
integers (EDF, BDF, WFDB), the channels are those integers, so that
:func:`signals.compress` keeps them exactly, and :meth:`Recording.physical`
gives the values in physical units: ``physical = gain * digital + offset``.

Format references:

- EDF: Kemp et al., "A simple format for exchange of digitized polygraphic
  recordings", Electroencephalogr. Clin. Neurophysiol. 82 (1992); EDF+ and
  BDF through pyedflib (https://pyedflib.readthedocs.io). Per signal:
  ``gain = (physical_max - physical_min) / (digital_max - digital_min)``,
  ``offset = physical_min - gain * digital_min``.
- WFDB: PhysioNet's header and signal files
  (https://wfdb.readthedocs.io/en/latest/wfdb.html), through the ``wfdb``
  package: ``physical = (digital - baseline) / adc_gain``.
- Parquet (https://parquet.apache.org/docs/) and Arrow IPC / Feather
  (https://arrow.apache.org/docs/format/Columnar.html), through pyarrow.
  Columns are channels; a field's metadata may carry ``unit`` (or
  ``units``), ``sampling_rate`` (or ``rate``, ``fs``), ``gain`` and
  ``offset``, which are kept.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .arraylike import as_channels

__all__ = ["Recording", "Scaling", "read_recording", "read_parquet", "read_arrow", "read_edf",
           "read_wfdb", "SUFFIXES"]


@dataclass(frozen=True)
class Scaling:
    """Digital-to-physical scaling of one channel: ``physical = gain * digital + offset``."""

    gain: float
    offset: float = 0.0

    def to_physical(self, digital: np.ndarray) -> np.ndarray:
        """Physical values, float64, same shape as ``digital``."""
        return self.gain * np.asarray(digital, np.float64) + self.offset

    def to_digital(self, physical: np.ndarray) -> np.ndarray:
        """Nearest digital values, int64 (the inverse of :meth:`to_physical` on its image)."""
        return np.round((np.asarray(physical, np.float64) - self.offset) / self.gain).astype(
            np.int64)

    def to_dict(self) -> dict[str, float]:
        """``{"gain": ..., "offset": ...}``, JSON-ready."""
        return {"gain": float(self.gain), "offset": float(self.offset)}


@dataclass
class Recording:
    """Channels read from a file, with what is needed to write them back.

    Attributes
    ----------
    path : str
    names : list of str
        One per channel.
    channels : list of ndarray, each (n_samples_c,)
        Integers where the file stores integers (EDF/BDF/WFDB digital
        values), else the file's numbers.
    units : list of str or None
        Physical unit per channel (``"mV"``, ``"uV"``...), None if unknown.
    rates : list of float or None
        Sampling rate per channel in Hz, None if unknown.
    scaling : list of Scaling or None
        Digital-to-physical scaling per channel; None where the channel
        already holds physical values.
    skipped : list of str
        Columns of the file that are not channels (text, timestamps of a
        Parquet or Arrow table): not read, so not kept by ``ubpe compress``.
    annotations : list of [onset s, duration s, text]
        An EDF+/BDF+ file's annotations (a duration of -1: none given).

    Names are made distinct: a name that an earlier channel has takes ``#2``,
    ``#3``... (EDF labels and WFDB names may repeat; channels are picked and
    written back by name).
    """

    path: str
    names: list[str]
    channels: list[np.ndarray]
    units: list[str | None] = field(default_factory=list)
    rates: list[float | None] = field(default_factory=list)
    scaling: list[Scaling | None] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    annotations: list[list] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.channels)
        self.units = list(self.units) or [None] * n
        self.rates = list(self.rates) or [None] * n
        self.scaling = list(self.scaling) or [None] * n
        if not (len(self.names) == len(self.units) == len(self.rates) == len(self.scaling) == n):
            raise ValueError("names, units, rates and scaling need one entry per channel")
        originals, taken = {str(n) for n in self.names}, set()
        for i, name in enumerate(map(str, self.names)):
            unique, k = name, 1
            while unique in taken or (k > 1 and unique in originals):  # (not a later one's own)
                k += 1
                unique = f"{name}#{k}"
            taken.add(unique)
            self.names[i] = unique

    def physical(self, i: int) -> np.ndarray:
        """Channel ``i`` in physical units (float64; the samples as they are when unscaled)."""
        s = self.scaling[i]
        return self.channels[i] if s is None else s.to_physical(self.channels[i])

    def metadata(self) -> list[dict[str, Any]]:
        """Per channel ``{"name", "unit", "rate", "scaling"}``: plain JSON for a container."""
        return [{"name": n, "unit": u, "rate": r, "scaling": None if s is None else s.to_dict()}
                for n, u, r, s in zip(self.names, self.units, self.rates, self.scaling)]

    def select(self, columns: list[str | int] | None = None,
               exclude: list[str | int] | None = None) -> Recording:
        """The channels picked by name or index (``columns``), or all but ``exclude``.

        Raises
        ------
        ValueError
            On an unknown name or an index out of range.
        """
        def index(spec: str | int) -> int:
            if isinstance(spec, int) or (isinstance(spec, str) and spec.isdigit()
                                         and spec not in self.names):
                i = int(spec)
                if not 0 <= i < len(self.names):
                    raise ValueError(f"{self.path}: channel index {i} out of range "
                                     f"(0..{len(self.names) - 1})")
                return i
            if spec not in self.names:
                raise ValueError(f"{self.path}: no channel {spec!r}; channels: "
                                 f"{', '.join(self.names)}")
            return self.names.index(spec)
        if columns and exclude:
            raise ValueError("give columns (the ones kept) or exclude (the ones left out), "
                             "not both")
        if columns:
            keep = list(dict.fromkeys(index(c) for c in columns))  # (a channel named twice: once)
        else:
            drop = {index(c) for c in exclude or []}
            keep = [i for i in range(len(self.names)) if i not in drop]
        return Recording(self.path, [self.names[i] for i in keep], [self.channels[i] for i in keep],
                         [self.units[i] for i in keep], [self.rates[i] for i in keep],
                         [self.scaling[i] for i in keep], list(self.skipped),
                         list(self.annotations))


def _need(module: str, extra: str = "formats") -> Any:
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"reading this file needs {module.split('.')[0]}: "
                          f"pip install 'ubpe[{extra}]' ({e})") from None


def _meta_value(meta: dict[bytes, bytes] | None, *keys: str) -> str | None:
    if not meta:
        return None
    for k in keys:
        v = meta.get(k.encode())
        if v is not None:
            return v.decode()
    return None


def _from_arrow_table(table: Any, path: str) -> Recording:
    numeric: list[int] = []  # (by index: a name may repeat, and take "#2" in the Recording)
    skipped: list[str] = []
    pa = _need("pyarrow")
    for i, f in enumerate(table.schema):
        t = f.type
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            numeric.append(i)
        else:
            skipped.append(f.name)
    if not numeric:
        raise ValueError(f"{path}: no numeric column (columns: {', '.join(table.column_names)})")
    try:
        chans, names = as_channels(table.select(numeric))
    except ValueError as e:  # (a null: named after its file)
        raise ValueError(f"{path}: {e}") from None
    assert names is not None
    units, rates, scaling = [], [], []
    for i in numeric:
        meta = table.schema.field(i).metadata
        units.append(_meta_value(meta, "unit", "units"))
        rate = _meta_value(meta, "sampling_rate", "rate", "fs")
        rates.append(float(rate) if rate is not None else None)
        gain = _meta_value(meta, "gain")
        scaling.append(None if gain is None else
                       Scaling(float(gain), float(_meta_value(meta, "offset") or 0.0)))
    return Recording(path, names, chans, units, rates, scaling, skipped)


def read_parquet(path: str | Path) -> Recording:
    """Read a Parquet file: each numeric column is a channel; text columns are skipped.

    Returns
    -------
    Recording
        Units, rates and scaling from each field's metadata when present.

    Raises
    ------
    ValueError
        If no column is numeric, or a column holds nulls.
    ImportError
        Without pyarrow (``pip install 'ubpe[formats]'``).
    """
    pq = _need("pyarrow.parquet")
    try:  # (a file's own reader: the dataset reader of read_table refuses repeated names;
        # a folder, as Spark writes one, is a dataset)
        table = pq.read_table(path) if Path(path).is_dir() else pq.ParquetFile(path).read()
    except _need("pyarrow").ArrowException as e:
        raise ValueError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") \
            from None
    return _from_arrow_table(table, str(path))


STREAM_MARK = b"\xff\xff\xff\xff"  # the first bytes of an Arrow IPC stream (format 0.15 on)


def read_arrow(path: str | Path) -> Recording:
    """Read Arrow data: an IPC file (Feather v2, ``.arrow``), a Feather v1 file, or an IPC
    stream (``.arrows``; it starts with the stream's continuation marker, four 0xFF bytes:
    the Arrow columnar format's "Encapsulated message format"); as :func:`read_parquet`."""
    feather = _need("pyarrow.feather")
    pa = _need("pyarrow")
    try:  # (the bytes read once: a named pipe cannot be opened twice)
        data = pa.py_buffer(Path(path).read_bytes())
        table = _need("pyarrow.ipc").open_stream(data).read_all() \
            if data[:4].to_pybytes() == STREAM_MARK else feather.read_table(pa.BufferReader(data))
    except _need("pyarrow").ArrowException as e:
        raise ValueError(f"{path}: not a readable Arrow file ({str(e).splitlines()[0]})") \
            from None
    return _from_arrow_table(table, str(path))


def read_edf(path: str | Path) -> Recording:
    """Read an EDF, EDF+ or BDF file: digital samples, with units, rates and scaling.

    Returns
    -------
    Recording
        ``channels`` are the stored integers (int32: 16-bit for EDF, 24-bit
        for BDF); :meth:`Recording.physical` applies the header's scaling;
        ``annotations`` holds an EDF+/BDF+ file's annotations.

    Raises
    ------
    OSError
        If pyedflib cannot open the file.
    ValueError
        If a signal's digital range is empty (its scaling divides by zero).
    ImportError
        Without pyedflib.
    """
    pyedflib = _need("pyedflib")
    with _c_output("pyedflib"):  # (its C code prints some faults with printf)
        reader = pyedflib.EdfReader(str(path))
    try:
        if reader.signals_in_file == 0:
            raise ValueError(f"{path}: the file holds no signals (annotations only)")
        names: list[str] = []
        chans: list[np.ndarray] = []
        units: list[str | None] = []
        rates: list[float | None] = []
        scaling: list[Scaling | None] = []
        for i in range(reader.signals_in_file):
            names.append(reader.getLabel(i).strip() or f"ch{i}")
            chans.append(np.asarray(reader.readSignal(i, digital=True)).astype(np.int32))
            units.append(reader.getPhysicalDimension(i).strip() or None)
            try:
                rates.append(float(reader.getSampleFrequency(i)))
            except ZeroDivisionError:
                raise ValueError(f"{path}: the header declares data records of 0 seconds, "
                                 f"so that no signal has a rate") from None
            dmin, dmax = reader.getDigitalMinimum(i), reader.getDigitalMaximum(i)
            pmin, pmax = reader.getPhysicalMinimum(i), reader.getPhysicalMaximum(i)
            if dmax == dmin:
                raise ValueError(f"{path}: signal {i} ({names[-1]!r}) declares the digital "
                                 f"range {dmin}..{dmax}, which scales to nothing")
            gain = (pmax - pmin) / (dmax - dmin)
            scaling.append(Scaling(gain, pmin - gain * dmin))
        onsets, durations, texts = reader.readAnnotations()
        notes = [[float(o), float(d), str(t)] for o, d, t in zip(onsets, durations, texts)]
    finally:
        reader.close()
    return Recording(str(path), names, chans, units, rates, scaling, annotations=notes)


def read_wfdb(path: str | Path) -> Recording:
    """Read a WFDB record (``NAME.hea`` with its signal files): digital samples and scaling.

    Parameters
    ----------
    path : path
        The record's header ``NAME.hea`` or the record name without suffix.

    Returns
    -------
    Recording
        ``channels`` are the stored integers (int64), every sample of a
        channel recorded at a multiple of the frame rate (its rate: the
        multiple of ``fs``); the scaling is ``(digital - baseline) / adc_gain``.

    Raises
    ------
    OSError, ValueError
        If wfdb cannot read the record.
    ImportError
        Without wfdb.
    """
    wfdb = _need("wfdb")
    p = Path(path)
    record_name = str(p.with_suffix("")) if p.suffix in (".hea", ".dat") else str(p)
    try:  # (smooth_frames=False: a channel of several samples a frame keeps them all)
        _one_scaling(wfdb, record_name, path)
        rec = wfdb.rdrecord(record_name, physical=False, smooth_frames=False)
    except (OSError, ValueError) as e:
        if isinstance(e, OSError) or str(e).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable WFDB record ({type(e).__name__}: {e})") from None
    except Exception as e:  # noqa: BLE001 (wfdb's parser raises what it meets: TypeError...)
        raise ValueError(f"{path}: not a readable WFDB record ({type(e).__name__}: {e})") from None
    names = [str(n) if n is not None else f"ch{i}" for i, n in enumerate(rec.sig_name)]
    scaling: list[Scaling | None] = [Scaling(1.0 / float(g), -float(b) / float(g))
                                     for g, b in zip(rec.adc_gain, rec.baseline)]
    per_frame = list(rec.samps_per_frame or [1] * len(names))
    return Recording(str(path), names, [np.asarray(c).astype(np.int64) for c in rec.e_d_signal],
                     [str(u) for u in rec.units], [float(rec.fs) * k for k in per_frame],
                     scaling)


def _one_scaling(wfdb: Any, record_name: str, path: Any) -> None:
    """ValueError where a header's number of samples is not a count
    (:func:`_sample_count_field`), or where a multi-segment record's segments scale their
    samples otherwise (gain, baseline, units): wfdb joins their digital samples under the
    first one's."""
    _sample_count_field(Path(record_name + ".hea"), f"{record_name}.hea")
    head = wfdb.rdheader(record_name)
    if not hasattr(head, "seg_name"):
        return
    folder = Path(record_name).parent
    seen: dict[str, tuple] = {}  # signal name -> (gain, baseline, units), as wfdb maps them
    for seg in head.seg_name:
        if seg == "~":  # (a null segment: a gap)
            continue
        s = wfdb.rdheader(str(folder / seg))
        _sample_count_field(folder / f"{seg}.hea", f"{path}: segment {seg!r} ({seg}.hea)")
        if hasattr(s, "seg_name") or not s.sig_name:  # (a layout segment, or no signal)
            continue
        for name, g, b, u in zip(s.sig_name, s.adc_gain or [], s.baseline or [],
                                 s.units or [None] * len(s.sig_name)):
            scale = (float(g), float(b), u)
            if seen.setdefault(name, scale) != scale:
                raise ValueError(f"{path}: the segments of this multi-segment record scale "
                                 f"the samples of {name!r} otherwise (segment {seg!r}: gain "
                                 f"{scale[0]:g}, baseline {scale[1]:g}, {scale[2]}; before it "
                                 f"{seen[name][0]:g}, {seen[name][1]:g}, {seen[name][2]}): "
                                 f"compress each segment's record")


def _sample_count_field(header: Path, where: str) -> None:
    """ValueError where the record line of a WFDB header (its first line that is not a
    comment) has a number of samples (its fourth field) that is not a count: wfdb's parser
    takes ``-5`` as no number at all, and reads the signal file to its end."""
    try:
        with open(header, encoding="latin-1") as f:
            first = next(((i, s) for i, s in enumerate(f, 1)
                          if s.strip() and not s.lstrip().startswith("#")), None)
    except OSError:
        return  # (wfdb's own reading names what is missing)
    if first is None:
        return
    number, line = first
    fields = line.split()
    if len(fields) >= 4 and not (fields[3].isascii() and fields[3].isdigit()):  # (not '¹²')
        raise ValueError(f"{where}, line {number}: the number of samples "
                         f"{fields[3]!r} is not a count (a whole number, at least 0)")


@contextlib.contextmanager
def _c_output(library: str) -> Iterator[None]:
    """What a C library prints on the process's standard output (file descriptor 1) for a
    while, taken aside and given as a warning (the command line shows it on standard error,
    on a line of its own): it must not land in the output of ``ubpe compress -c``."""
    import tempfile
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # (no standard output)
        yield
        return
    with tempfile.TemporaryFile() as aside:
        try:
            os.dup2(aside.fileno(), 1)
            yield
        finally:
            with contextlib.suppress(Exception):  # (C's buffered printf output)
                import ctypes
                ctypes.CDLL(None).fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
            aside.seek(0)
            said = aside.read(4096).decode("utf-8", "replace").strip()
            if said:
                warnings.warn(f"{library}: {said}", stacklevel=3)


def record_files(path: str | Path, _seen: set | None = None) -> list[Path]:
    """The files a recording is read from: a WFDB header and the signal files it names (a
    multi-segment record's: its segments' headers and theirs), else the file itself (what its
    size counts)."""
    p = Path(path)
    seen = set() if _seen is None else _seen
    seen.add(p.name)
    if p.suffix.lower() != ".hea":
        return [p]
    names: list[str] = []
    try:  # (a header line of a signal: its file name first; '#' comments, the record line first)
        lines = [ln for ln in p.read_text(errors="replace").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
        names = [ln.split()[0] for ln in lines[1:]]
    except OSError:
        pass
    out = [p]
    for n in dict.fromkeys(names):
        if p.with_name(n).is_file():
            out.append(p.with_name(n))
        elif n + ".hea" not in seen and p.with_name(n + ".hea").is_file():
            out += record_files(p.with_name(n + ".hea"), seen)  # (a segment's record)
    return list(dict.fromkeys(out))


SUFFIXES = {".parquet": read_parquet, ".pq": read_parquet, ".arrow": read_arrow,
            ".arrows": read_arrow, ".feather": read_arrow, ".ipc": read_arrow, ".edf": read_edf,
            ".bdf": read_edf, ".hea": read_wfdb}


def read_recording(path: str | Path, columns: list[str | int] | None = None,
                   exclude: list[str | int] | None = None) -> Recording:
    """Read a recording of any supported format, chosen by the file's suffix.

    Parameters
    ----------
    path : path
        ``.parquet``/``.pq``, ``.arrow``/``.arrows``/``.feather``/``.ipc``, ``.edf``,
        ``.bdf``, ``.hea`` (WFDB), or what :func:`signals.read_signal` reads
        (CSV, ``.npz``/``.npy``, ``.wav``).
    columns, exclude : list of str or int, optional
        Channels to keep or drop, by name or 0-based index.

    Returns
    -------
    Recording

    Raises
    ------
    ValueError
        On an unknown channel; what the reader raises on a bad file.
    ImportError
        When the format's optional package is missing.
    """
    reader = SUFFIXES.get(Path(path).suffix.lower())
    if reader is not None:
        return reader(path).select(columns, exclude)
    from .readers import read_signal
    t = read_signal(path, columns=columns, exclude=exclude)
    return Recording(str(path), list(t.names), list(t.channels))
