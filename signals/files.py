"""Whole files in, ``.ubpe`` containers out, and the same files back.

What comes back, by input kind:

* **CSV** (``.csv``, ``.tsv``, ``.txt``): the same bytes. The file is split
  by :func:`signals.table.encode_csv` into exact integer columns (decimal
  scales, timestamps, category codes), coded as channels, and blobs (text,
  exceptions), coded with zstd; its layout goes in the header.
* **WAV** (PCM): the same bytes. Every byte outside the ``data`` chunk
  (format, other chunks) is kept verbatim as a blob; the samples are coded
  as one channel each.
* **NumPy** ``.npy`` / ``.npz``: the same bytes. The arrays whose values
  the file holds as they are (an ``.npy``, the members of an ``.npz`` that
  the zip stores) are coded as channels; every other byte (``.npy``
  headers, the zip's headers and directory, members it stores deflated) is
  kept verbatim as a blob, the file's skeleton. A lossy file (``max_error``,
  a quantizer) is written anew: its arrays, within the bound (the zip's
  CRC-32s would not hold).
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from itertools import islice
from pathlib import Path
from typing import IO, Any

import numpy as np

from . import container, table
from .channel import check_level
from .codec import (
    DEFAULT_LEVEL,
    MAX_VALUES,
    _as_array,
    column_plans,
    decode_columns,
    encode_columns,
)
from .container import SignalFormatError
from .intmap import check_max_error
from .quantize import float_bounds
from .readers import npz_arrays, read_npy

CSV_SUFFIXES = (".csv", ".tsv", ".txt")
KINDS = ("csv", "wav", "npy", "npz")


@dataclass
class Decoded:
    """A decompressed file: its ``kind`` (one of :data:`KINDS`) and its bytes."""

    kind: str
    data: bytes
    suffix: str


def kind_of(path: str | Path, data: bytes | None = None) -> str:
    """The input kind of a file, from its suffix (or its first bytes).

    Raises
    ------
    ValueError
        For a file of none of the kinds in :data:`KINDS` (Parquet or Arrow data
        included: those are read from a file named with their suffix).
    """
    suffix = Path(path).suffix.lower()
    if suffix in CSV_SUFFIXES:
        return "csv"
    if suffix in (".wav", ".npy", ".npz"):
        return suffix[1:]
    if data is not None:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return "wav"
        if data[:6] == b"\x93NUMPY":
            return "npy"
        if data[:4] == b"PK\x03\x04":
            return "npz"
        parquet = data[:4] == b"PAR1" and b"\0" in data[4:1024]  # (its binary page header: a CSV
        # that starts with 'PAR1' holds no NUL)
        # (read as CSV: a field count error) an Arrow IPC file or Feather v2, an IPC stream (four
        # 0xFF bytes, which UTF-8 text never holds, then its first message's length, below
        # 2**24 here), Feather v1
        arrow = data[:8] == b"ARROW1\0\0" or data[:4] == b"\xff" * 4 and data[7:8] == b"\0" or \
            data[:4] == b"FEA1" and b"\0" in data[4:1024]
        if parquet or arrow:
            what, names = (("Parquet", ".parquet or .pq") if parquet else
                           ("Arrow", ".arrow, .arrows, .feather or .ipc"))
            raise ValueError((f"{path}: " if path else "") + f"{what} data; ubpe reads it from a "
                             f"file named {names}")
        return "csv"
    raise ValueError(f"{path}: unsupported input (expected .csv, .tsv, .txt, .wav, .npy or .npz)")


def compress_file(data: bytes, kind: str, *, path: str = "<bytes>", level: int = DEFAULT_LEVEL,
                  max_error: float | None = None, csv_options: dict | None = None,
                  channel_options: dict | None = None, model: Any = None,
                  quantizer: Any = None, allow_verbatim: bool = True) -> bytes:
    """Compress a whole file given as bytes.

    Parameters
    ----------
    data : bytes
        The file's content.
    kind : {"csv", "wav", "npy", "npz"}
    path : str
        Named in error messages.
    level : int
        Speed against size (see :func:`signals.channel.encode_channel`).
    max_error : float, optional
        Lossy coding, with ``max |x - x'| <= max_error`` (None or 0:
        lossless): the samples of arrays and WAV files, and the decimal
        columns of a CSV file (each cell printed with its decimals; every
        other cell, the header and the lines above it stay exact).
    csv_options : dict, optional
        ``skip_rows``, ``comment``, ``delimiter``, ``columns``, ``exclude``
        for :func:`signals.table.encode_csv`.
    channel_options : dict, optional
        Passed to :func:`signals.channel.encode_channel`.
    model : SignalModel, optional
        Code the columns the model knows (by name) against it.
    quantizer : Quantizer, optional
        Lossy coding of the samples of arrays and WAV files through this
        quantizer, fitted per channel.
    allow_verbatim : bool, default True
        A CSV file of at most :data:`VERBATIM_MAX_BYTES` is stored whole,
        coded by the smaller of zstd -19 and LZMA2 (xz's ``-9e``), where that
        is smaller than coding its columns (a short file of many columns:
        the column coding's tables and layout cost more than the cells; a
        file that repeats itself). Not tried where zstd's fastest level
        codes the file :data:`VERBATIM_PROBE` times larger than its columns.
        False: always code the columns.

    Returns
    -------
    bytes
        A version-2 container.

    Raises
    ------
    ValueError
        On input that cannot be read (the message names the file and where),
        a bad ``level`` or ``max_error``, or ``quantizer`` for a CSV file.
    """
    level, max_error = check_level(level), check_max_error(max_error)
    opts: dict[str, Any] = {"level": level, "channel_options": channel_options, "model": model}
    check_picks_apply(kind, csv_options, path, quantizer)
    if kind == "csv":
        out = _compress_csv(data, path, max_error, csv_options, opts)
        if allow_verbatim and len(data) <= VERBATIM_MAX_BYTES \
                and len(container.zstd_compress(data, level=1)) < VERBATIM_PROBE * len(out):
            whole = container.write_stored_whole(data)
            if len(whole) < len(out):
                return whole
        return out
    if kind == "wav":
        columns, head, tail, wav = split_wav(data, path)
        header = {"source": "wav", "wav": wav}
        return encode_columns(columns, header, blobs=[head, tail], max_error=max_error,
                              quantizer=quantizer, **opts)
    if kind in ("npy", "npz"):
        exact = max_error is None and quantizer is None
        columns, arrays, skeleton, kept = _split_arrays(data, kind, path, exact)
        # exact: the file's bytes ("members", not "arrays": a reader that knows no skeleton
        # refuses the file); lossy: the arrays, in a file written anew
        header = {"source": kind, "members" if exact else "arrays": arrays,
                  **({"kept": kept} if kept else {})}
        if kept:
            warnings.warn(f"{path}: kept as they are, not coded (stored deflated, not as numpy "
                          f"reads them, or not numbers): {', '.join(kept)}", stacklevel=2)
        return encode_columns(columns, header, blobs=[skeleton] if exact else [],
                              max_error=max_error, quantizer=quantizer, **opts)
    raise ValueError(f"unknown input kind {kind!r}; known: {', '.join(KINDS)}")


def check_picks_apply(kind: str, csv_options: dict | None, path: str,
                      quantizer: Any = None) -> None:
    """ValueError where ``columns``/``exclude`` are given for a file that is compressed whole
    (they were ignored: every array was kept), or a quantizer for a CSV file."""
    if kind == "csv" and quantizer is not None:
        raise ValueError(f"{path}: --quantizer applies to arrays and WAV files; for a CSV "
                         f"file, --max-error bounds the error of its decimal columns")
    picked = {k: v for k, v in (csv_options or {}).items() if k in ("columns", "exclude") and v}
    if kind != "csv" and picked:
        raise ValueError(f"{path}: {' and '.join(picked)} pick the columns of a CSV file or the "
                         f"channels of a Parquet, EDF or WFDB recording; a {kind} file is "
                         f"compressed whole, byte for byte")


# A CSV file this small is also tried stored whole (general-purpose coders), unless zstd's
# fastest level (about 0.3 ms for 128 KiB) codes it VERBATIM_PROBE times larger than its
# columns: zstd -19 and LZMA2 code the dev CSV files (their first 2-128 KiB) at most 2.9x
# smaller than zstd -1
VERBATIM_MAX_BYTES = 128 << 10
VERBATIM_PROBE = 4


def _compress_csv(data: bytes, path: str, max_error: float | None, csv_options: dict | None,
                  opts: dict, place: dict | None = None) -> bytes:
    """One CSV container; ``place``: a later frame's header keys (:func:`_frame_place`), its
    first ``frame_prefix`` bytes (a copy of the header line) coded but not given back."""
    parts = table.encode_csv(data, path=path, **(csv_options or {}))
    header: dict[str, Any] = {"source": "csv", "csv": parts.layout, **(place or {})}
    exact = encode_columns(list(parts.int_columns), header, blobs=parts.blobs, **opts)
    if max_error is None:
        return exact
    lossy_parts = _quantize_csv(parts, max_error)
    if lossy_parts is parts:
        return exact
    lossy = encode_columns(list(lossy_parts.int_columns),
                           {**header, "csv": lossy_parts.layout, "max_error": float(max_error)},
                           blobs=lossy_parts.blobs, **opts)
    # (binned cells do not always code smaller: an accelerometer on steps of about 9.8 binned
    # by 7 gives irregular steps; then the exact file, within any bound)
    return lossy if len(lossy) < len(exact) else exact


# ---------------------------------------------------------------- CSV larger than a frame
FRAME_BYTES = 8 << 20  # CSV text per frame of a stream: bounds the memory of both directions


def _cut(buf: bytes, start: int, force: bool = False) -> int:
    """The end (after a line end, at or after ``start``) of the longest prefix of ``buf`` made
    of whole lines and outside quotes; with ``force``, else the first line end past ``start``
    (past a stray quote, the rest of a file is inside quotes for a parser: the frame that
    holds it is coded as a small file with one is, the next ones start afresh); 0 if none.

    A line ends at ``\n``, or at ``\r`` in a text that has no ``\n`` (old Mac files). One pass
    over ``buf``: the quotes are counted once, then taken off line by line going back."""
    nl = b"\n" if b"\n" in buf else b"\r"
    last = end = buf.rfind(nl) + 1
    if last <= start:
        return 0
    if b'"' not in buf:
        return end
    quotes = buf.count(b'"', 0, end)
    while end > start:
        if quotes % 2 == 0:  # RFC 4180: quotes inside fields are doubled
            return end
        prev = buf.rfind(nl, 0, end - 1) + 1
        quotes -= buf.count(b'"', prev, end)
        end = prev
    return buf.find(nl, start) + 1 if force else 0


def csv_pieces(src: IO[bytes], first: bytes = b"", frame_bytes: int = FRAME_BYTES
               ) -> Iterator[bytes]:
    """Consecutive pieces of a CSV text of about ``frame_bytes`` each, cut after a newline
    outside quotes (a line longer than a piece stays whole); their concatenation is the input.

    Parameters
    ----------
    src : binary file object
        Read ``frame_bytes`` at a time.
    first : bytes
        Bytes already read from ``src`` (they come first).
    frame_bytes : int
        Target size of a piece, in bytes.
    """
    buf, first = first, b""  # held once, not for the generator's life
    eof = False
    while not eof or buf:
        while not eof and len(buf) < frame_bytes:
            more = src.read(frame_bytes)
            eof = not more
            buf += more
        if eof and len(buf) <= frame_bytes + frame_bytes // 2:
            cut = len(buf)
        else:  # (no cut outside quotes in 4 pieces' worth, or 2 at the end of the input: a
            # stray quote; cut at a line end anyway, so that its frame stays small; a buffer
            # grown past 1.5 pieces is cut within its first piece)
            start = min(len(buf) - 1, frame_bytes // 2)
            cut = (len(buf) > frame_bytes + frame_bytes // 2
                   and _cut(buf[:frame_bytes + 1], start)) or \
                _cut(buf, start, force=len(buf) >= (2 if eof else 4) * frame_bytes) or \
                (len(buf) if eof else 0)
        if not cut:  # no line ends in the second half: read on
            more = src.read(frame_bytes)
            eof = not more
            buf += more
            continue
        piece, buf = buf[:cut], buf[cut:]
        if piece:
            yield piece


def default_threads() -> int:
    """The worker processes that ``threads=0`` means: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _pool_context() -> Any:
    """Processes forked from this one on Linux (they start at once, with its modules and
    compiled kernels loaded; the pool is made before a frame is coded, while the threads
    that NumPy's BLAS and pyarrow start at import are idle, and both libraries reset their
    thread pools in a forked child), else started afresh (fork server or spawn: then, as
    for any multiprocessing, a script must guard its main code with
    ``if __name__ == "__main__"``)."""
    import multiprocessing as mp
    import sys
    methods = mp.get_all_start_methods()
    if sys.platform == "linux" and "fork" in methods:
        return mp.get_context("fork")
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


_CONTEXT: dict[str, Any] = {}  # a worker's fixed arguments (options, model), set once


def _set_context(ctx: dict[str, Any]) -> None:
    _CONTEXT.clear()
    _CONTEXT.update(ctx)


def _in_context(fn: Callable, args: tuple) -> Any:
    return fn(_CONTEXT, *args)


def _ordered_map(fn: Callable, ctx: dict[str, Any], jobs: Iterable[tuple], threads: int,
                 first_alone: bool = False, processes: bool = True) -> Iterator[Any]:
    """``fn(ctx, *job)`` for each job, in order, ``threads`` jobs at a time (so at most
    ``threads`` frames are held at a time: memory stays bounded). An error comes out in order,
    after the results before it. ``first_alone``: the first job runs here alone (what it puts
    in ``ctx`` reaches the others).

    ``processes``: this process takes one job of each round of ``threads`` and a pool of
    ``threads - 1`` processes the others (with numba's JIT the first job runs here alone, before
    the pool is made: forked workers then inherit the kernels it loaded; each process would
    otherwise load them, about 0.3 s of CPU; compiled kernels load in a few ms,
    ``ubpe/_jit.py``). Jobs are drawn from ``jobs`` a round at a time. Else a pool of
    ``threads`` threads in this process runs them (every kernel releases the GIL), the next
    job starting as soon as one is done."""
    from ubpe import _jit
    it = iter(jobs)
    alone = None if threads <= 1 else 1 if first_alone or (processes and _jit.mode() == "jit") else 0
    for job in islice(it, alone):
        result = fn(ctx, *job)
        del job  # not held while the next job is drawn
        yield result
    if threads <= 1:
        return
    if not processes:
        yield from _thread_map(fn, ctx, it, threads)
        return
    from concurrent.futures import ProcessPoolExecutor
    pool = None
    try:
        while batch := list(islice(it, threads)):
            if pool is None and len(batch) > 1:
                _jit.load()  # forked workers inherit the compiled kernels
                pool = ProcessPoolExecutor(threads - 1, mp_context=_pool_context(),
                                           initializer=_set_context, initargs=(ctx,))
            futures = [pool.submit(_in_context, fn, job) for job in batch[:-1]] if pool else []
            try:
                mine, error = fn(ctx, *batch[-1]), None
            except Exception as e:  # raised after the results of the jobs before it
                mine, error = None, e
            del batch
            for f in futures:
                yield f.result()
            del futures
            if error is not None:
                raise error
            yield mine
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _thread_map(fn: Callable, ctx: dict[str, Any], it: Iterator[tuple], threads: int
                ) -> Iterator[Any]:
    """The thread pool of :func:`_ordered_map`: ``threads`` jobs in flight, the results (and
    errors) taken in order."""
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor
    # (no _jit.load(): the threads share this process's modules, each loaded on first use,
    # under a lock; a decompress needs 4 of the 10)
    pending: deque[Future] = deque()
    with ThreadPoolExecutor(threads) as pool:
        try:
            for job in it:
                pending.append(pool.submit(fn, ctx, *job))
                del job
                if len(pending) >= threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


def _encode_piece(ctx: dict[str, Any], text: bytes, where: str, later: bool,
                  place: dict | None, first_line: int = 1) -> tuple[bytes, int]:
    """One frame of a CSV stream, and the values it holds. The first frame's choices, column by
    column (:func:`signals.codec.column_plans`), code the later frames (put in ``ctx`` here:
    the first frame is coded in this process, before the workers start), and its CRC-32 is
    their ``first_frame_crc``."""
    csv_options = {**ctx["later"], "first_line": first_line} if later else ctx["csv_options"]
    opts = {**ctx["opts"], "plans": ctx.get("plans")} if later else ctx["opts"]
    frame = _compress_csv(text, where, ctx["max_error"], csv_options, opts, place)
    header, sections, values = container.read_container(frame)
    if not later:
        ctx["plans"] = column_plans(header, sections)
        ctx["first_crc"] = zlib.crc32(frame)
    return frame, values


def _frame_place(prefix: int, index: int, first_crc: int) -> dict[str, int]:
    """A later frame's header keys (docs/format.md, section 3): the length of its copy of the
    file's head (dropped when decoded), its index in the stream, and the CRC-32 of the
    stream's first frame, so that a frame out of place (moved, missing, repeated, from
    another stream) is an error."""
    return {"frame_prefix": prefix, "frame_index": index, "first_frame_crc": first_crc}


def compress_csv_stream(src: IO[bytes], dst: IO[bytes], *, first: bytes = b"",
                        path: str = "<stream>", frame_bytes: int = FRAME_BYTES,
                        level: int = DEFAULT_LEVEL, max_error: float | None = None,
                        csv_options: dict | None = None, channel_options: dict | None = None,
                        model: Any = None, threads: int = 1) -> dict:
    """Compress a CSV text of any size in bounded memory, as a stream of containers.

    The text is cut into pieces of about ``frame_bytes`` (whole lines); each
    piece is one container of the stream (``docs/format.md``, section 3), so
    that memory is bounded by the piece, not the file, in both directions.
    The first piece holds the lines above the header and the header; every
    later piece is coded behind a copy of the header line (so that its
    columns are read as the first piece's are), which the decoder drops
    (the frame header's ``frame_prefix``). :func:`decompress_file_stream`
    gives back the same bytes.

    Parameters
    ----------
    src, dst : binary file objects
        The CSV text is read from ``src``; the stream is written to ``dst``.
    first : bytes
        Bytes already read from ``src``.
    frame_bytes : int
        Bytes of CSV text per frame (default 8 MiB).
    level, max_error, csv_options, channel_options, model
        As for :func:`compress_file`; ``skip_rows`` and ``comment`` apply
        to the first piece.
    threads : int
        Frames coded at a time, each in a worker process (0: one per CPU;
        1, the default: in this process). The stream is the same bytes
        whatever the number; memory grows with it (each worker holds a
        frame and its own copy of the codec).

    Returns
    -------
    dict
        ``frames``, ``bytes_in``, ``bytes_out`` and ``values`` (coded).

    Raises
    ------
    ValueError
        On input that cannot be read; the message names the file and the
        byte offset of the piece.
    """
    threads = default_threads() if threads == 0 else threads
    level, max_error = check_level(level), check_max_error(max_error)
    opts: dict[str, Any] = {"level": level, "channel_options": channel_options, "model": model}
    ctx: dict[str, Any] = {"opts": opts, "max_error": max_error, "csv_options": csv_options,
                           "later": {**(csv_options or {}), "skip_rows": 0, "comment": None}}
    sizes: list[int] = []

    def jobs(pieces: Iterator[bytes]) -> Iterator[tuple]:
        n_in, lines, prefix = 0, 0, b""  # (bytes and lines before the piece)
        for k, piece in enumerate(_with_header(pieces)):
            sizes.append(len(piece))
            if not k:
                s = first_sniff.pop("s", None)  # (None: coded as encode_csv codes it, whole)
                prefix = (s.header or b"") if s is not None else b""
                if s is not None:  # the later frames are read as the whole file would be:
                    # their '#' lines are comments where the file starts with one (or the
                    # option says so), as encode_csv reads them
                    ctx["later"].update(delimiter=s.delimiter, comment=(csv_options or {}).get(
                        "comment") or s.comment)
                job: tuple = (piece, path, False, None, 1)
            else:  # (the first frame is coded by now: _ordered_map's first_alone)
                job = (prefix + piece, f"{path} (the piece at byte {n_in:,})", True,
                       _frame_place(len(prefix), k, ctx["first_crc"]),
                       lines + 1 - table.count_lines(prefix))  # (its errors name the file's lines)
            lines += table.count_lines(piece)
            del piece  # the piece is held once while it is coded (in the job)
            yield job
            del job
            n_in += sizes[-1]

    sniff_options = {key: v for key, v in (csv_options or {}).items()
                     if key in ("skip_rows", "comment", "delimiter")}
    first_sniff: dict[str, Any] = {}  # what _with_header found in the first frame's text

    def _with_header(pieces: Iterator[bytes]) -> Iterator[bytes]:
        """The pieces, the first ones joined until they hold the header line and a line below
        it (lines above the header may be longer than a piece), up to ``4 * frame_bytes`` or
        16 MiB (more lines above the header than ``sniff`` looks at never hold one: such a
        text is then coded as ``encode_csv`` codes it, whole)."""
        first_piece = b""
        for piece in pieces:
            first_piece += piece
            try:
                first_sniff["s"] = table.sniff(first_piece, path=path, **sniff_options)
            except table.CsvError as e:
                if ("no lines below" in str(e) or "skips every line" in str(e)) and \
                        len(first_piece) < max(4 * frame_bytes, 16 << 20):
                    continue
                if table.UTF16_TEXT in str(e):  # (a file of one frame is stored as it is, its
                    # table unread; the later frames of a stream would be read as CSV)
                    raise
            break
        if first_piece:
            yield first_piece
        del first_piece
        yield from pieces

    container.write_stream_head(dst)
    out, n_frames, values = 10, 0, 0
    pieces = csv_pieces(src, first, frame_bytes)
    first = b""  # the caller's first bytes are held by the pieces alone
    for frame, n in _ordered_map(_encode_piece, ctx, jobs(pieces), threads, first_alone=True):
        container.write_stream_frame(dst, frame)
        values += n
        out += 8 + len(frame)
        n_frames += 1
    container.write_stream_end(dst, n_frames)
    return {"frames": n_frames, "bytes_in": sum(sizes), "bytes_out": out + 20, "values": values}


# bytes of samples per WAV frame: coding one holds about 50 bytes a sample (1 M int16 samples: a
# 20 MB WAV peaks at 120 MB, where one container took 549 MB), and frames of 1 M samples cost
# 0.03% more than one container of 10 M (bench/RESULTS.md)
WAV_FRAME_BYTES = 2 << 20


def wav_frames(src: IO[bytes], first: bytes, path: str, frame_bytes: int = WAV_FRAME_BYTES
               ) -> Iterator[tuple[bytes, int, int]]:
    """A WAV file cut into frames of about ``frame_bytes`` (whole sample frames), read from
    ``src`` a frame at a time: ``(frame, prefix, samples)`` triples, each frame a WAV file of
    its own. The first is the file's first bytes (its head and first samples: a file shorter
    than its data chunk declares). Every later one is a short head (``RIFF``, ``WAVE``, the
    file's fmt chunk, a data chunk declaring the frame's samples), ``prefix`` bytes long (the
    stream's ``frame_prefix``: dropped when decoded), then the frame's samples; the bytes after
    the samples (a partial sample frame, later chunks: any length) follow in frames of their
    own, of no samples. ``samples``: the file's sample frames before the frame's.
    The frames' bytes after their prefixes, joined, are the file.

    Raises
    ------
    ValueError
        Where ``first`` (the bytes read so far) does not hold the head up to the data chunk,
        or :func:`wav_layout` refuses it.
    """
    lay = wav_layout(first, path)
    if lay is None:
        raise ValueError(f"{path}: no data chunk in the first {len(first):,} bytes of the WAV "
                         f"file")
    block = lay.block
    step = max(block, frame_bytes - frame_bytes % block)
    rest = bytearray(first[lay.start:])
    left, done, eof = lay.size - lay.size % block, 0, False  # sample bytes declared, framed

    def fill(want: int) -> None:  # (a byte beyond ``want``: whether the file goes on)
        nonlocal eof, rest
        while len(rest) <= want and not eof:
            more = src.read(max(want + 1 - len(rest), 1 << 20))
            eof = not more
            rest += more

    def short_head(n: int) -> bytes:
        return (b"RIFF" + struct.pack("<I", 4 + len(lay.fmt) + 8 + n) + b"WAVE" + lay.fmt
                + b"data" + struct.pack("<I", n))

    while True:  # the samples
        want = min(step, left - done)
        fill(want)
        n = min(want, len(rest) - len(rest) % block)
        piece = bytes(rest[:n])
        del rest[:n]
        head = first[:lay.start] if not done else short_head(n)
        yield head + piece, (len(head) if done else 0), done // block
        done += n
        if n < want or done >= left or (eof and not rest):
            break
    while rest or not eof:  # the bytes after the samples
        fill(step)
        if not rest:
            return
        piece = bytes(rest[:step])
        del rest[:len(piece)]
        head = short_head(0)
        yield head + piece, len(head), done // block


def compress_wav_stream(src: IO[bytes], dst: IO[bytes], *, first: bytes = b"",
                        path: str = "<stream>", frame_bytes: int = WAV_FRAME_BYTES,
                        level: int = DEFAULT_LEVEL, max_error: float | None = None,
                        quantizer: Any = None, channel_options: dict | None = None,
                        model: Any = None) -> dict:
    """Compress a WAV file of any size in bounded memory, as a stream of containers.

    The file is cut into frames of about ``frame_bytes`` (:func:`wav_frames`); each is one
    container of the stream (``docs/format.md``, section 3), coded as :func:`compress_file`
    codes a WAV file, so that memory is bounded by the frame, not the file, in both
    directions. :func:`decompress_file_stream` gives back the same bytes.

    Parameters
    ----------
    src, dst : binary file objects
        The WAV file is read from ``src`` (after ``first``, the bytes already read from it,
        which hold at least its head); the stream is written to ``dst``.
    frame_bytes : int
        Bytes of samples per frame (default ``WAV_FRAME_BYTES``, 2 MiB).
    level, max_error, quantizer, channel_options, model
        As for :func:`compress_file` (a quantizer is fitted on each frame).

    Returns
    -------
    dict
        ``frames``, ``bytes_in``, ``bytes_out`` and ``values`` (coded).

    Raises
    ------
    ValueError
        On input that cannot be read (names the file and the frame's first sample and byte).
    """
    level, max_error = check_level(level), check_max_error(max_error)
    container.write_stream_head(dst)
    out, n_frames, values, n_in, first_crc = 10, 0, 0, 0, 0
    for frame, prefix, before in wav_frames(src, first, path, frame_bytes):
        where = path if not n_frames else f"{path} (the frame from sample {before:,}, byte {n_in:,})"
        columns, head, tail, wav = split_wav(frame, where, open_end=not n_frames)
        header: dict[str, Any] = {"source": "wav", "wav": wav}
        if n_frames:
            header.update(_frame_place(prefix, n_frames, first_crc))
        try:
            coded = encode_columns(columns, header, blobs=[head, tail], max_error=max_error,
                                   quantizer=quantizer, level=level,
                                   channel_options=channel_options, model=model)
        except ValueError as e:  # (a sample's index counts from the frame)
            raise ValueError(f"{where}: {e}") from None
        if not n_frames:
            first_crc = zlib.crc32(coded)
        n_in += len(frame) - prefix
        values += sum(c.size for _, c in columns)
        del frame, columns, head, tail
        container.write_stream_frame(dst, coded)
        out += 8 + len(coded)
        n_frames += 1
    container.write_stream_end(dst, n_frames)
    return {"frames": n_frames, "bytes_in": n_in, "bytes_out": out + 20, "values": values}


def _in_order(frames: Iterator[bytes]) -> Iterator[tuple[bytes | SignalFormatError]]:
    """Jobs of :func:`_decode_frame`: the frames, then the stream's read error (a truncated
    stream, a bad frame length) as a job of its own, so that it is raised in its place, after
    the frames before it are decoded (with ``threads`` > 1 the next frames are read before the
    current ones are decoded: a damaged frame before the break is named first, as with one)."""
    try:
        for f in frames:
            yield (f,)
    except SignalFormatError as e:
        yield (e,)


def _decode_frame(ctx: dict[str, Any], frame: bytes | SignalFormatError
                  ) -> tuple[Any, int, list[bytes], Any, tuple]:
    """A frame's source; for a CSV or WAV frame, the length of its copy of the file's head
    (``frame_prefix``), its bytes in pieces (that copy included; not joined: one copy less
    held), its WAV description (None for CSV), and its place: ``(frame_index,
    first_frame_crc, its own CRC-32)`` (None where a stream made before them has none).
    A read error (:func:`_in_order`) is raised here."""
    if isinstance(frame, SignalFormatError):
        raise frame
    if container.container_version(frame) == 1:  # (arrays: _write_frames names the reader)
        return "array", 0, [], None, (None, None, zlib.crc32(frame))
    header, columns, blobs = decode_columns(frame, ctx["model"],
                                            max_values=ctx.get("max_values", MAX_VALUES))
    source = header.get("source")
    place = (header.get("frame_index"), header.get("first_frame_crc"), zlib.crc32(frame))
    if source == "wav":
        try:
            head, tail = blobs
            pieces = [head, _wav_samples(header["wav"], columns), tail]
        except (KeyError, TypeError, ValueError) as e:
            raise SignalFormatError(f"header: inconsistent wav layout ({e})") from None
        return "wav", _frame_prefix(header, sum(map(len, pieces))), pieces, header["wav"], place
    if source != "csv":
        return source, 0, [], None, place
    pieces = blobs if header.get("verbatim") else table.decode_csv_pieces(table.CsvParts(
        header["csv"], [(c.name, c.values) for c in columns], blobs))
    del columns, blobs
    return "csv", _frame_prefix(header, sum(len(x) for x in pieces)), pieces, None, place


def _head(pieces: list[bytes], n: int) -> bytes:
    """The first ``n`` bytes of the concatenation of ``pieces``."""
    out, k = [], 0
    for x in pieces:
        if k >= n:
            break
        out.append(x[:n - k])
        k += len(out[-1])
    return b"".join(out)


def decompress_file_stream(src: IO[bytes], dst: IO[bytes], *, model: Any = None,
                           threads: int = 1, max_values: int = MAX_VALUES) -> dict:
    """Write back the file of a stream made by :func:`compress_csv_stream` (its CSV text) or
    :func:`compress_wav_stream` (its WAV bytes), frame by frame.

    Parameters
    ----------
    src, dst : binary file objects
        The stream is read from ``src``; the file is written to ``dst``.
    model : SignalModel, optional
        The model the stream was made with, if any.
    threads : int
        Frames decoded at a time, in a pool of as many threads (0: one per
        CPU; 1, the default: in the calling thread); the text is the same.
    max_values : int
        The most values a frame may declare (memory, as :func:`decompress_file`).
        Each frame in flight holds its values and its text (about 3x the
        frame's text).

    Returns
    -------
    dict
        ``frames`` and ``bytes_out``.

    Raises
    ------
    SignalFormatError
        On a damaged or truncated stream (the frames before the damage have
        been written by then: write ``dst`` to a temporary file), a frame
        that is neither CSV nor WAV or of another kind than the first, a CSV
        frame whose header copy differs from the first frame's header line,
        or a WAV frame of another description (rate, channels, sample type)
        or without its head copy; the message names the frame (counted
        from 0).
    """
    threads = default_threads() if threads == 0 else threads
    frames = _in_order(container.iter_stream_frames(src))
    try:
        n, out = _write_frames(_ordered_map(_decode_frame, {"model": model, "max_values": max_values},
                                            frames, threads, processes=False), dst)
    except SignalFormatError as e:  # (a frame's own message says where in the frame)
        done = getattr(e, "frames_done", 0)
        raise SignalFormatError(str(e) if str(e).startswith("frame ") else
                                f"frame {done}: {e}") from None
    return {"frames": n, "bytes_out": out}


def _write_frames(decoded: Iterator, dst: IO[bytes]) -> tuple[int, int]:
    """The bytes of the decoded CSV or WAV frames to ``dst``: ``(frames, bytes)``; an error
    carries the count of the frames written before it (``frames_done``)."""
    n, out, head, copy, kind, wav0, crc0 = 0, 0, b"", None, None, None, 0
    try:
        for source, p, pieces, wav, (index, first_crc, crc) in decoded:
            if n == 0 and source in ("csv", "wav"):
                kind, wav0, crc0 = source, wav, crc
            if source != kind:
                raise SignalFormatError(f"frame {n} holds {source!r} data, not "
                                        f"{kind or 'CSV or WAV'}; read it with "
                                        f"signals.decompress_stream")
            if n and first_crc is not None and first_crc != crc0:
                raise SignalFormatError(f"frame {n} belongs to another stream (its first frame "
                                        f"is not this one's)")
            if n and index is not None and index != n:
                raise SignalFormatError(f"frame {n} says it is frame {index} of its stream "
                                        f"(frames moved, missing or repeated)")
            if kind == "wav":  # (a later frame: a short head, then its samples or later bytes)
                if (p > 0) != (n > 0) or wav != wav0:
                    raise SignalFormatError(f"frame {n}: not the frame of this WAV file that its "
                                            f"place needs (head copy {p}, {wav})")
            elif n == 0:  # (held whole: the header line may lie below lines of any length)
                head = b"".join(pieces)
                if p:
                    raise SignalFormatError("the first frame of a CSV stream has a header copy")
            elif copy is None:
                copy = _head(pieces, p)
                if copy not in head:
                    raise SignalFormatError(f"frame {n}: its copy of the header line is not in "
                                            f"the first frame")
            elif _head(pieces, p) != copy:
                raise SignalFormatError(f"frame {n}: its copy of the header line differs from "
                                        f"the previous frames'")
            skip = p
            for x in pieces:
                if skip < len(x):
                    dst.write(memoryview(x)[skip:])
                out += max(0, len(x) - skip)
                skip = max(0, skip - len(x))
            del pieces
            n += 1
    except SignalFormatError as e:
        e.frames_done = n  # type: ignore[attr-defined]
        raise
    return n, out


def is_stream(data: bytes) -> bool:
    """Whether ``data`` starts like a stream of containers (``docs/format.md``, section 3)."""
    return data[:len(container.STREAM_MAGIC)] == container.STREAM_MAGIC


def compress_path(path: str | Path, **options: Any) -> bytes:
    """Compress the file at ``path``: :func:`compress_file` for the kinds it gives back
    byte for byte, else a recording read by :func:`signals.formats.read_recording`
    (Parquet/Arrow, EDF/BDF, WFDB), whose channels, names and per-channel unit,
    rate and digital-to-physical scaling (in the header's ``meta``) are kept. A
    recording's ``max_error`` bounds its digital values: the physical error is at most
    ``max_error`` times the magnitude of each channel's gain (its scaling's physical units a
    digital step).

    Parameters
    ----------
    path : str or Path
    **options
        As for :func:`compress_file`; of ``csv_options``, ``columns`` and
        ``exclude`` also pick the channels of a recording.

    A file of none of these suffixes is read by its first bytes (WAV, NumPy,
    else CSV), as the command line reads one.

    Raises
    ------
    ValueError
        On input that cannot be read.
    OSError
        If the file cannot be opened (a folder, no permission).
    ImportError
        When the format's optional reader is not installed (``ubpe[formats]``).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES or suffix in (".wav", ".npy", ".npz"):
        return compress_file(path.read_bytes(), kind_of(path), path=str(path), **options)
    from . import formats
    if suffix not in formats.SUFFIXES:  # (by its first bytes, as the command line reads it)
        data = path.read_bytes()
        return compress_file(data, kind_of(path, data), path=str(path), **options)
    picked = options.get("csv_options") or {}  # (its columns and exclude pick channels here too)
    whole = formats.read_recording(path)
    rec = whole.select(picked.get("columns"), picked.get("exclude"))
    if not rec.channels:
        raise ValueError(f"{path}: the columns and exclusions given leave no channel")
    left_out = [n for n in whole.names if n not in rec.names]
    opts = {k: v for k, v in options.items() if k not in ("csv_options", "path")}
    chans = [(n, np.asarray(c)) for n, c in zip(rec.names, rec.channels)]
    level = opts.pop("level", DEFAULT_LEVEL)
    header = {"source": "arrays", "shape": None, "meta": {
        "recording": rec.metadata(), "format": suffix[1:],
        **({"skipped": list(rec.skipped)} if rec.skipped else {}),
        **({"annotations": rec.annotations} if rec.annotations else {}),
        **({"left_out": left_out} if left_out else {})}}
    return encode_columns(chans, header, level=level, **opts)


def _quantize_csv(parts: table.CsvParts, max_error: float) -> table.CsvParts:
    """Lossy CSV: each decimal column's values rounded to a multiple of ``q`` units of its
    last decimal, ``q = 2 h + 1``, ``h = floor(max_error 10**scale)`` (less one for decimals
    where that is exactly the bound, which float arithmetic reads 1 ulp above it), so that every
    cell is printed as before
    (same decimals) within ``max_error``; cells kept verbatim (exceptions) and other columns
    stay exact. The bound is checked on the rebuilt file before it is returned.
    """
    ints = [np.array(v, copy=True) for _, v in parts.int_columns]
    changed = False
    # (a copy of the layout: each rounded column says by how much, for inspect; the exact
    # coding, kept where smaller, keeps the layout as it was)
    layout = {**parts.layout, "columns": [{**c, "rounded": 0} if c.get("kind") == "decimal"
                                          else dict(c) for c in parts.layout.get("columns", [])]}
    for col in layout["columns"]:
        if col.get("kind") != "decimal" or col.get("format") != "fixed" or \
                not isinstance(col.get("values"), int):
            continue
        # rounding to a multiple of q = 2h + 1 moves a value by at most h units: h, the most
        # the bound allows, in exact arithmetic (q was floor(2 E 10**scale): 1 for integers at
        # E = 1, where bins of 3 keep the bound)
        units = Fraction(max_error) * 10 ** int(col.get("scale", 0))
        h = math.floor(units)
        if int(col.get("scale", 0)) > 0 and units - h < Fraction(1, 10**9):
            h -= 1  # (a decimal error of exactly E reads as E + 1 ulp in float arithmetic)
        if h < 1:
            continue
        # a decimal column's integers have at most 18 digits (below 2**60): from h = 2**61 every
        # value rounds to 0 (within h), and q stays an int64 (h of 2**62 and above overflowed)
        h = min(h, 1 << 61)
        q = 2 * h + 1
        ints[col["values"]] = np.floor_divide(ints[col["values"]] + q // 2, q) * q
        col["rounded"] = h  # (units of the last decimal)
        changed = True
    if not changed:
        return parts
    out = table.CsvParts(layout, [(n, v) for (n, _), v in zip(parts.int_columns, ints)],
                         parts.blobs)
    for col in parts.layout.get("columns", []):  # the bound, checked
        if col.get("kind") == "decimal" and isinstance(col.get("values"), int):
            a = parts.int_columns[col["values"]][1]
            b = out.int_columns[col["values"]][1]
            err = np.abs(a - b).max(initial=0) / 10 ** int(col.get("scale", 0))
            if err > max_error:
                raise ValueError(f"column {col['name']!r}: error {err} above {max_error}")
    return out


def compress_packets_file(data: bytes, kind: str, model: Any, packet_size: int, *,
                          path: str = "<bytes>", csv_options: dict | None = None) -> bytes:
    """A packet stream (``docs/format.md``, section 4) of the model's channels in a file.

    Parameters
    ----------
    data : bytes
        The file's content (CSV, WAV, ``.npy`` or ``.npz``).
    kind : {"csv", "wav", "npy", "npz"}
    model : SignalModel
        Its codec part names the channels (a CSV's exact integer columns, or
        arrays and WAV channels by name) and codes them.
    packet_size : int
        Samples per packet (the last packet may be shorter); each packet
        decodes on its own given the model.

    Raises
    ------
    ValueError
        If the file lacks a channel of the model, the channels differ in length,
        or a CSV column of the model holds cells that are not numbers (nan,
        empty, text: a packet holds only the column's integers) or has
        other decimals than the model's training files (its ``csv_scale``).
    """
    if packet_size < 1:
        raise ValueError(f"packet size must be at least 1, got {packet_size}")
    if kind == "csv":
        parts = table.encode_csv(data, path=path, **(csv_options or {}))
        if not parts.layout.get("n_rows"):
            raise ValueError(f"{path}: no data rows after the header: no packets to write")
        columns = list(parts.int_columns)
        codec = getattr(model, "codec_", {})
        for col in parts.layout.get("columns", []):
            want = codec.get(col.get("name"), {}).get("csv_scale")
            if want is not None and (col.get("kind"), col.get("scale")) != ("decimal", want):
                have = (f"{col.get('scale')} digits after the point" if col.get("kind") ==
                        "decimal" else f"{col.get('kind')} cells")
                raise ValueError(
                    f"{path}: column {col['name']!r} has {have} here, {want} in the files the "
                    f"model was built on: its packets would hold other numbers; compress "
                    f"without --packet-size, or build the model on files like this one")
            if col.get("name") in codec and col.get("n_exceptions"):
                rows = dict(columns).get(f"{col['name']}#exception_rows")
                first = f" (the first in data row {int(rows[0]) + 1:,})" if rows is not None \
                    and rows.size else ""
                raise ValueError(
                    f"{path}: column {col['name']!r} has {col['n_exceptions']:,} cell(s) that are "
                    f"not numbers at its scale{first}, such as nan, an empty cell or text; a "
                    f"packet stream holds numbers only: compress without --packet-size")
    elif kind == "wav":
        columns = split_wav(data, path)[0]
    elif kind in ("npy", "npz"):
        columns = _split_arrays(data, kind, path, exact=False)[0]  # (every array; no skeleton)
    else:
        raise ValueError(f"unknown input kind {kind!r}; known: {', '.join(KINDS)}")
    by_name = dict(columns)
    names = list(getattr(model, "codec_", {}))
    if not names:
        raise ValueError(f"{path}: the model has no codec part (no channel kept one, or a model "
                         f"of version 1-2): packets need one; compress without --packet-size")
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(f"{path}: the model codes channels {', '.join(names)}, and a packet "
                         f"holds them all; the file lacks {', '.join(missing)} (a model built on "
                         f"files of other columns: build it on files of the same columns)")
    every = [c.get("name") for c in parts.layout.get("columns", [])] if kind == "csv" else \
        list(by_name)  # (a CSV's text and date columns too)
    wanted, left = set(names), []
    for nm in every:  # (a repeated name: its first column is the channel)
        if nm in wanted:
            wanted.discard(nm)
        else:
            left.append(str(nm) if nm not in names else f"{nm} (a second column of that name)")
    if left:  # (a packet holds the model's channels only: never dropped without a word)
        warnings.warn(f"{path}: left out of the packets, not channels of the model: "
                      f"{', '.join(left)}", stacklevel=2)
    chans = [np.asarray(by_name[nm]) for nm in names]  # (a list: each channel keeps its dtype)
    if len({c.size for c in chans}) != 1:
        raise ValueError(f"{path}: the model's channels differ in length in this file")
    n = chans[0].size
    # (a generator: write_packet_stream codes them in batches; a list of n / packet_size views
    # a channel held 1.3 GB for a 40 MB file at packet size 1)
    xs = ([c[i:i + packet_size] for c in chans] if len(names) > 1 else chans[0][i:i + packet_size]
          for i in range(0, n, packet_size))
    buf = io.BytesIO()
    model.write_packet_stream(xs, buf)
    return buf.getvalue()


def decompress_packets_file(data: bytes, model: Any, *, max_values: int = MAX_VALUES) -> Decoded:
    """The channels of a packet stream, concatenated, as a ``.npy`` file: shape (n,) or
    (n_channels, n), in the model's dtype (channels of several integer dtypes: the smallest
    that holds them all).

    Raises
    ------
    SignalFormatError
        On a stream made with another model (names both ids), a corrupted
        packet, a stream cut before its end marker, or more than ``max_values``
        values in all (the .npy is held whole).
    ValueError
        If the channels' dtypes have no common dtype that holds them exactly
        (int64 and uint64).
    """
    parts, n = [], 0
    for part in model.read_packet_stream(io.BytesIO(data)):
        n += sum(np.size(c) for c in part) if isinstance(part, list) else part.size
        if n > max_values:
            raise SignalFormatError(f"the packet stream holds more than max_values={max_values:,} "
                                    f"values (ubpe decompress --max-values)")
        parts.append(part)
    if parts and isinstance(parts[0], list):  # channels of different dtypes: one .npy dtype
        chans = [np.concatenate(c) for c in zip(*parts)]
        common = np.result_type(*chans)
        if common.kind == "f" and any(c.dtype.kind != "f" for c in chans):
            raise ValueError(f"the model's channels have dtypes {', '.join(str(c.dtype) for c in chans)}, "
                             f"which no .npy dtype holds exactly; read the stream with "
                             f"SignalModel.read_packet_stream")
        parts = [np.stack([c.astype(common) for c in chans])]
    axis = 0 if not parts or parts[0].ndim == 1 else 1
    arr = np.concatenate(parts, axis=axis) if parts else np.zeros(0, np.int64)
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return Decoded("npy", buf.getvalue(), ".npy")


def decompress_file(data: bytes, *, model: Any = None, max_values: int = MAX_VALUES) -> Decoded:
    """Give back the file that :func:`compress_file` compressed.

    ``max_values`` bounds the values that the container may declare (memory:
    about 8 bytes each), as :func:`signals.decompress` does.

    Raises
    ------
    SignalFormatError
        On a damaged, foreign or newer container. A container made from
        arrays by :func:`signals.compress` comes back as a ``.npy`` (one
        array) or ``.npz`` (a list of channels) file's bytes;
        :func:`signals.decompress` gives the arrays themselves.
    """
    header, columns, blobs = decode_columns(data, model, max_values=max_values)
    source = header.get("source")
    try:
        if source == "csv":
            return Decoded("csv", _csv_bytes(header, columns, blobs)[header.get("frame_prefix", 0):],
                           ".csv")
        if source == "wav":
            head, tail = blobs
            return Decoded("wav", head + _wav_samples(header["wav"], columns) + tail, ".wav")
        if source in ("npy", "npz") and "members" in header:  # the file's bytes, exactly
            if len(blobs) != 1:
                raise ValueError(f"{len(blobs)} blobs, one skeleton expected")
            arrays = _join_arrays(header["members"], [c.values for c in columns])
            return Decoded(source, _with_values(blobs[0], header["members"], arrays),
                           "." + source)
        if source in ("npy", "npz"):  # (lossy, or written before "members": the arrays in a
            # file written anew)
            arrays = _join_arrays(header["arrays"], [c.values for c in columns])
            buf = io.BytesIO()
            if source == "npy":
                np.save(buf, arrays[0][1], allow_pickle=False)
            else:
                _write_npz(buf, arrays)
            return Decoded(source, buf.getvalue(), "." + source)
        if source in ("array", "arrays"):  # made by signals.compress: arrays as .npy / .npz
            values = _as_array(header, columns)
            buf = io.BytesIO()
            if source == "array":
                np.save(buf, values, allow_pickle=False)
                return Decoded("npy", buf.getvalue(), ".npy")
            _write_npz(buf, [(c.name, c.values) for c in columns])
            return Decoded("npz", buf.getvalue(), ".npz")
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, SignalFormatError):
            raise
        raise SignalFormatError(f"header: inconsistent {source} layout ({e})") from None
    raise SignalFormatError(f"header: unknown source {source!r}")


def _csv_bytes(header: dict, columns: list, blobs: list[bytes]) -> bytes:
    """The CSV text of a container, its frame prefix included (checked)."""
    if header.get("verbatim"):  # (stored whole: checked by decode_columns)
        text = blobs[0]
    else:
        text = table.decode_csv(table.CsvParts(header["csv"],
                                               [(c.name, c.values) for c in columns], blobs))
    _frame_prefix(header, len(text))
    return text


def _frame_prefix(header: dict, size: int) -> int:
    """The header's ``frame_prefix`` (0 if none), checked against the ``size`` bytes decoded."""
    p = header.get("frame_prefix", 0)
    if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p <= size:
        raise SignalFormatError(f"header: frame_prefix {p!r} does not fit the "
                                f"{size:,} bytes decoded")
    return p


def _write_npz(fileobj: IO[bytes], arrays: list[tuple[str, np.ndarray]]) -> None:
    """An ``.npz`` as ``numpy.savez`` writes it (stored ``NAME.npy`` members), of any member
    names: ``np.savez(f, **arrays)`` drops a member named ``allow_pickle`` and refuses ``file``."""
    with zipfile.ZipFile(fileobj, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, a in arrays:
            with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)


# ---------------------------------------------------------------- WAV
# (format tag, bytes a sample) -> the samples' dtype; "i24": 3 bytes, held as int32
_WAV_KINDS = {(1, 1): "u1", (1, 2): "<i2", (1, 3): "i24", (1, 4): "<i4", (1, 8): "<i8",
              (3, 4): "<f4", (3, 8): "<f8"}


def _wav_samples(wav: dict, columns: list) -> bytes:
    """The data chunk's bytes from the decoded channels, checked against the header's
    description (a damaged or crafted dtype would write other bytes). A channel coded through
    a quantizer decodes as float64: its values, rounded to the nearest integer for integer
    PCM (a codebook in the data's dtype, since ``Quantizer.round_to``, holds integers)."""
    kind = wav.get("dtype") if isinstance(wav, dict) else None
    if kind not in _WAV_KINDS.values():
        raise ValueError(f"WAV sample type {kind!r}")
    held = np.dtype("<i4" if kind == "i24" else kind)

    def fits(c: Any) -> bool:
        return c.values.dtype == held or (c.values.dtype == np.float64 and isinstance(c.map, dict)
                                          and c.map.get("kind") == "quantizer")
    if len(columns) != wav.get("n_channels") or not all(fits(c) for c in columns):
        raise ValueError(f"the WAV header declares {wav.get('n_channels')!r} channels of {kind}, "
                         f"the file holds {len(columns)} of "
                         f"{', '.join(sorted({str(c.values.dtype) for c in columns}))}")
    if len({c.values.size for c in columns}) > 1:
        raise ValueError("WAV channels of different lengths")
    parts = []
    for c in columns:
        v = c.values
        if v.dtype != held and held.kind in "iu":
            bounds = float_bounds(held) if kind != "i24" else (-2.0**23, 2.0**23 - 1)
            v = np.clip(np.rint(v), *bounds)
        parts.append(v.astype(held))
    samples = np.stack(parts, axis=1) if parts else np.zeros((0, 0), held)
    if kind != "i24":
        return samples.tobytes()
    if samples.size and (samples.min() < -2**23 or samples.max() >= 2**23):
        raise ValueError("24-bit WAV samples beyond 24 bits")
    return samples.astype("<i4").view(np.uint8).reshape(*samples.shape, 4)[..., :3].tobytes()


WAV_UNKNOWN_SIZE = 1 << 62  # (the samples of a data chunk declaring 0 bytes: to the end)


@dataclass
class WavLayout:
    """Where a WAV file's samples lie: they start at byte ``start`` (the data chunk's body),
    and its data chunk declares ``size`` bytes (a data chunk that declares 0, as a recorder
    writing to a pipe leaves it, runs to the end of the file: ``size`` is then
    ``WAV_UNKNOWN_SIZE``); frames of ``block`` bytes (one sample of every
    channel); ``wav`` describes them (rate, channels, bits, dtype); ``fmt`` is the fmt chunk's
    bytes (its id, size and body)."""

    start: int
    size: int
    block: int
    wav: dict
    fmt: bytes


def _chunks_to_end(data: bytes, pos: int) -> bool:
    """Whether the bytes of ``data`` from ``pos`` are RIFF chunks (ids of printable ASCII) that
    end where ``data`` ends (a data chunk declaring 0 bytes, then a LIST chunk: an empty
    recording, not samples to the end of the file)."""
    while pos + 8 <= len(data):
        if not all(32 <= c < 127 for c in data[pos:pos + 4]):
            return False
        size = struct.unpack_from("<I", data, pos + 4)[0]
        pos += 8 + size + (size & 1)
    return pos in (len(data), len(data) + 1)  # (a last odd chunk without its pad byte)


def wav_layout(data: bytes, path: str, open_end: bool = True) -> WavLayout | None:
    """The :class:`WavLayout` of a WAV file from its first bytes, or None where its data chunk
    does not start within them. ``open_end``: a data chunk declaring 0 bytes runs to the end
    of the file, unless the bytes after it are chunks up to its end (else it holds none: the
    later frames of a stream that hold no samples).

    Raises
    ------
    ValueError
        Not a RIFF/WAVE file, a data chunk before a valid fmt chunk, or an encoding that
        ``ubpe`` does not code (names the file and the byte).
    """
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a RIFF/WAVE file")
    pos, fmt, fmt_chunk = 12, None, b""
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        if cid == b"fmt ":
            fmt = data[pos + 8:pos + 8 + size]
            fmt_chunk = data[pos:pos + 8 + size + (size & 1)]  # (and its pad byte)
        if cid == b"data":
            if fmt is None or len(fmt) < 16:
                raise ValueError(f"{path}: the data chunk at byte {pos} comes before a valid "
                                 f"fmt chunk")
            tag, n_ch, rate, _, block, bits = struct.unpack_from("<HHIIHH", fmt)
            if tag == 0xFFFE and len(fmt) >= 26:  # WAVE_FORMAT_EXTENSIBLE: the sub-format
                tag = struct.unpack_from("<H", fmt, 24)[0]
            if n_ch < 1 or block % n_ch:
                raise ValueError(f"{path}: the fmt chunk declares {n_ch} channels in blocks of "
                                 f"{block} bytes")
            width = block // n_ch
            if (tag, width) not in _WAV_KINDS or bits > 8 * width:
                raise ValueError(f"{path}: unsupported WAV encoding (format tag {tag}, "
                                 f"{bits} bits in {width} bytes); PCM 8/16/24/32/64-bit integer "
                                 f"and 32/64-bit float are supported")
            wav = {"rate": rate, "n_channels": n_ch, "bits": bits,
                   "dtype": _WAV_KINDS[(tag, width)]}
            open_size = size or (WAV_UNKNOWN_SIZE if open_end and not _chunks_to_end(
                data, pos + 8) else 0)
            return WavLayout(pos + 8, open_size, block, wav, fmt_chunk)
        pos += 8 + size + (size & 1)
    return None


def split_wav(data: bytes, path: str, open_end: bool = True
              ) -> tuple[list[tuple[str, np.ndarray]], bytes, bytes, dict]:
    """A WAV file's channels (``(name, samples)``, in the sample types of ``_WAV_KINDS``), and the
    bytes before and after its samples, and its description (rate, channels, bits, dtype);
    ``open_end`` as for :func:`wav_layout`."""
    lay = wav_layout(data, path, open_end)
    if lay is None:
        raise ValueError(f"{path}: no data chunk in the WAV file")
    start, block, n_ch, kind = lay.start, lay.block, lay.wav["n_channels"], lay.wav["dtype"]
    n = min(lay.size, len(data) - start) // block
    end = start + n * block
    if kind == "i24":  # three little-endian bytes, sign-extended into int32
        b = np.frombuffer(data[start:end], np.uint8).reshape(n, n_ch, 3).astype(np.int32)
        samples = b[..., 0] | (b[..., 1] << 8) | ((b[..., 2] ^ 128) - 128) * 65536
    else:
        samples = np.frombuffer(data[start:end], kind).reshape(n, n_ch)
    columns = [(f"ch{i}", samples[:, i].copy()) for i in range(n_ch)]
    return columns, data[:start], data[end:], lay.wav


# ---------------------------------------------------------------- NumPy
def _array_regions(data: bytes, kind: str, path: str, exact: bool = True
                   ) -> tuple[list[tuple[str, np.ndarray, int | None]], bytes, list[str]]:
    """The arrays of an ``.npy`` or ``.npz`` file whose values lie in it as they are, each with
    the offset of its values in the file; the file without those values (its skeleton: the
    ``.npy`` headers, the zip's headers, any other byte); and the names of the members kept
    in the skeleton as they are (stored deflated, bools of other bytes than 0 and 1, values
    inside another member's). Not ``exact`` (a lossy file, written anew: its zip's CRC-32s
    would not hold): every array, without offsets, and no skeleton.

    Raises
    ------
    ValueError
        Naming ``path``: a file that ``numpy.load`` would not read (:func:`read_npy`,
        :func:`signals.readers.npz_arrays`).
    """
    if not exact:
        if kind == "npz":
            return [(k, a, None) for k, a in npz_arrays(data, path)], b"", []
        try:
            return [("array", read_npy(io.BytesIO(data), len(data)), None)], b"", []
        except (ValueError, OSError, EOFError) as e:
            raise ValueError(f"{path}: not a readable npy file ({e})") from None
    kept: list[str] = []
    if kind == "npz":
        npz_arrays(data, path)  # (every member checked as numpy.load reads it)
        found = []
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for info in z.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if info.compress_type != zipfile.ZIP_STORED:
                    kept.append(key)  # (deflated: kept as it is, so that the file comes back
                    continue  # exact whatever zlib a reader has)
                name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
                start = info.header_offset + 30 + name_len + extra_len
                found.append((key, start, info.file_size))
        found.sort(key=lambda m: m[1])  # (in the file's order: the directory's may differ)
    else:
        found = [("array", 0, len(data))]
    arrays: list[tuple[str, np.ndarray, int | None]] = []
    cuts: list[tuple[int, int]] = []
    for key, start, size in found:
        f = io.BytesIO(data[start:start + size])
        try:
            a = read_npy(f, size)
        except (ValueError, OSError, EOFError) as e:
            raise ValueError(f"{path}: not a readable {kind} file ({e})") from None
        f.seek(0)
        version = np.lib.format.read_magic(f)  # (read_npy read the same header)
        (np.lib.format.read_array_header_1_0 if version == (1, 0) else
         np.lib.format.read_array_header_2_0)(f)
        at = start + f.tell()
        raw = a.tobytes(order="F" if a.ndim > 1 and a.flags.f_contiguous
                        and not a.flags.c_contiguous else "C")
        if data[at:at + len(raw)] != raw or (cuts and at < cuts[-1][1]) or (
                a.dtype.kind == "b" and raw and max(raw) > 1) or (  # (coded, a bool is 0 or 1)
                a.dtype.kind not in "iufb"):  # (text, dates: not a signal)
            kept.append(key)  # (kept in the skeleton, as it is)
            continue
        arrays.append((key, a, at))
        cuts.append((at, at + len(raw)))
    skeleton, pos = [], 0
    for a0, a1 in cuts:
        skeleton.append(data[pos:a0])
        pos = a1
    skeleton.append(data[pos:])
    return arrays, b"".join(skeleton), kept


def _split_arrays(data: bytes, kind: str, path: str, exact: bool = True
                  ) -> tuple[list[tuple[str, np.ndarray]], list[dict], bytes, list[str]]:
    """Arrays as 1-D columns, split along their shorter axis; their description (with the
    offset ``at`` of their values in the file, where ``exact``); the file's skeleton and the
    members kept in it (:func:`_array_regions`)."""
    arrays, skeleton, kept = _array_regions(data, kind, path, exact)
    columns, desc = [], []
    for name, a, at in arrays:
        if a.dtype.kind not in "iufb":
            raise ValueError(f"{path}: array {name!r} is not numeric ({a.dtype})")
        if a.ndim == 2:  # channels along the shorter axis, each coded as a signal
            axis = 0 if a.shape[0] <= a.shape[1] else 1
            rows = a if axis == 0 else a.T
            cols = [(f"{name}:{i}", np.ascontiguousarray(r)) for i, r in enumerate(rows)]
        else:
            axis = 0
            cols = [(name, a.reshape(-1))]
        desc.append({"name": name, "shape": list(a.shape), "dtype": a.dtype.str,
                     "axis": axis, "n_columns": len(cols), **({} if at is None else {"at": at}),
                     "fortran": bool(a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous)})
        columns += cols
    return columns, desc, skeleton, kept


def _with_values(skeleton: bytes, desc: list[dict], arrays: list[tuple[str, np.ndarray]]
                 ) -> bytes:
    """The file of :func:`_array_regions`: each array's values put back at its offset ``at``
    (checked: in order, within the file)."""
    out, pos, size = [], 0, len(skeleton) + sum(a.nbytes for _, a in arrays)
    end = 0  # (in the file)
    for d, (_, a) in zip(desc, arrays):
        at = d.get("at")
        if not isinstance(at, int) or isinstance(at, bool) or not end <= at <= size - a.nbytes:
            raise ValueError(f"array {d.get('name')!r}: its place {at!r} in the file")
        out.append(skeleton[pos:pos + at - end])
        pos += at - end
        out.append(a.tobytes(order="F" if d.get("fortran") else "C"))
        end = at + a.nbytes
    out.append(skeleton[pos:])
    return b"".join(out)


def _join_arrays(desc: list[dict], values: list[np.ndarray]) -> list[tuple[str, np.ndarray]]:
    out, k = [], 0
    for d in desc:
        n = int(d["n_columns"])
        if k + n > len(values):
            raise ValueError("fewer columns than the arrays need")
        parts = values[k:k + n]
        k += n
        dtype = np.dtype(d["dtype"])
        if dtype.kind not in "iufb":
            raise ValueError(f"array {d['name']!r}: dtype {dtype} is not numeric")
        shape = tuple(int(s) for s in d["shape"])
        if not parts:  # an empty array (a 2-D one with no row or no column splits into none)
            if math.prod(shape) != 0:
                raise ValueError(f"array {d['name']!r}: no columns for shape {shape}")
            a = np.zeros(shape, dtype)
        elif len(shape) == 2:
            if d["axis"] not in (0, 1) or isinstance(d["axis"], bool):
                raise ValueError(f"array {d['name']!r}: axis {d['axis']!r} (0 or 1)")
            a = np.stack(parts)
            a = a if d["axis"] == 0 else a.T
        else:
            a = parts[0].reshape(shape)
        a = a.astype(dtype, copy=False)
        if a.shape != shape:
            raise ValueError(f"array {d['name']!r}: shape {a.shape}, {shape} declared")
        # (np.ascontiguousarray would give a 0-d array one dimension)
        out.append((str(d["name"]), np.asfortranarray(a) if d.get("fortran") else
                    a if a.flags.c_contiguous else a.copy(order="C")))
    if k != len(values):
        raise ValueError("more columns than the arrays need")
    return out


def describe_header(data: bytes) -> dict:
    """The JSON header of a version-2 container (for ``inspect``), checked."""
    header, _, _ = container.read_container(data)
    return json.loads(json.dumps(header))
