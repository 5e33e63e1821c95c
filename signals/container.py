"""The ``.ubpe`` container's framing: sections, varints, checksums, limits.

The byte layout is specified in ``docs/format.md`` (section 1 for the
version-2 container, 3 for streams, 4 for packets); this module is its one
implementation. It knows nothing of samples: the header is JSON, a channel
payload is opaque bytes (``signals/channel.py`` fills it), a blob is zstd.

Every reader here checks a declared size against the bytes that remain, and
against the fixed limits below, before it allocates anything; every failure
raises :class:`SignalFormatError` naming the section and the byte offset.
"""

from __future__ import annotations

import json
import lzma
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import numpy as np
import zstandard
from numpy.typing import ArrayLike

from ubpe.serialization import FormatError

MAGIC = b"UBPE-SIG"
VERSION = 2
STREAM_MAGIC = b"UBPE-STR"
PACKET_STREAM_MAGIC = b"UBPE-PKT"

MAX_HEADER_BYTES = 64 << 20
MAX_BLOB_BYTES = 1 << 30
MAX_SAMPLES = 1 << 40
MAX_COLUMNS = 65536
MAX_VERBATIM_BYTES = 64 << 20  # a file stored whole (flags bit 0), decompressed

# zstd raw-content dictionary for the header (docs/format.md, section 1):
# the JSON keys of a typical header, so that a short recording pays a few
# bytes for them. Part of format version 2: never change it.
HEADER_DICT_V2 = zstandard.ZstdCompressionDict(
    b'{"source":"array","shape":[1024],"columns":[{"name":"ch0","kind":"samples","n":1024,'
    b'"dtype":"<i8","map":{"kind":"int","offset":0},"max_error":0,"payload":0,"extra":null}],'
    b'"sections":["C","B"],"model":null,"csv":null,"wav":null,"meta":{}}'
    b'{"kind":"decimal","scale":1,"dtype":"<f8"}{"kind":"ieee"}{"kind":"uniform"'
    b'"kind":"text""source":"csv""source":"arrays""source":"wav","axis":1,'
    b'"delimiter":",","newline":"\\r\\n","header":"preamble"',
    dict_type=zstandard.DICT_TYPE_RAWCONTENT)

SECTION_KINDS = b"HCBE"
FLAG_STORED_WHOLE = 1  # flags bit 0: a CSV file stored whole (no sections)


class SignalFormatError(FormatError):
    """A ``.ubpe`` file is foreign, truncated, corrupted, or of a newer version."""


# ---------------------------------------------------------------- varints
def write_varints(values: ArrayLike) -> bytes:
    """Non-negative integers as unsigned LEB128 varints.

    Parameters
    ----------
    values : array-like of int, shape (n,)
        Each in ``[0, 2**63)``.
    """
    out = bytearray()
    for v in np.asarray(values, np.int64).tolist():
        if v < 0:
            raise ValueError(f"a varint must be non-negative, got {v}")
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


def read_varints(buf: bytes, n: int) -> np.ndarray:
    """Exactly ``n`` LEB128 varints filling ``buf``; int64 array of shape (n,).

    Raises
    ------
    SignalFormatError
        If ``buf`` holds another number of varints, or one longer than 9 bytes.
    """
    if n > len(buf):
        raise SignalFormatError(f"a table declares {n} values in {len(buf)} bytes")
    out, v, shift = [], 0, 0
    for byte in buf:
        v |= (byte & 0x7F) << shift
        shift += 7
        if shift > 63:
            raise SignalFormatError("a varint is longer than 9 bytes")
        if byte < 0x80:
            out.append(v)
            v, shift = 0, 0
    if len(out) != n or shift:
        raise SignalFormatError(f"a table holds {len(out)} values, expected {n}")
    return np.array(out, np.int64)


def read_varint(buf: bytes, pos: int, what: str = "varint") -> tuple[int, int]:
    """One varint at ``buf[pos:]``; returns ``(value, next position)``.

    Raises
    ------
    SignalFormatError
        If the buffer ends inside the varint, or it is longer than 10 bytes.
    """
    v = shift = 0
    while True:
        if pos >= len(buf):
            raise SignalFormatError(f"truncated {what} at byte {pos}")
        byte = buf[pos]
        pos += 1
        v |= (byte & 0x7F) << shift
        if byte < 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            raise SignalFormatError(f"{what} at byte {pos} is longer than 10 bytes")


def varint(v: int) -> bytes:
    """One non-negative integer as a LEB128 varint."""
    return write_varints([v])


# ---------------------------------------------------------------- zstd with limits
def zstd_compress(raw: bytes, *, level: int = 19,
                  dict_data: zstandard.ZstdCompressionDict | None = None) -> bytes:
    """One zstd frame with its content size in the frame header."""
    if dict_data is None:
        return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(raw)
    return zstandard.ZstdCompressor(level=level, write_content_size=True, dict_data=dict_data,
                                    write_dict_id=False).compress(raw)


def zstd_decompress(frame: bytes, limit: int, what: str, *,
                    dict_data: zstandard.ZstdCompressionDict | None = None) -> bytes:
    """Decompress one zstd frame whose declared content size is at most ``limit``.

    Raises
    ------
    SignalFormatError
        If the frame is damaged, does not declare its size, declares more
        than ``limit`` bytes, or decodes to another size.
    """
    try:
        params = zstandard.get_frame_parameters(frame)
    except zstandard.ZstdError as e:
        raise SignalFormatError(f"{what}: not a zstd frame ({e})") from None
    size = params.content_size
    if size == zstandard.CONTENTSIZE_UNKNOWN or size == zstandard.CONTENTSIZE_ERROR:
        raise SignalFormatError(f"{what}: the zstd frame does not declare its size")
    if size > limit:
        raise SignalFormatError(f"{what}: declares {size:,} bytes, above the limit of {limit:,}")
    try:
        dec = zstandard.ZstdDecompressor(dict_data=dict_data) if dict_data is not None else \
            zstandard.ZstdDecompressor()
        raw = dec.decompress(frame, max_output_size=size)
    except zstandard.ZstdError as e:
        raise SignalFormatError(f"{what}: damaged zstd frame ({e})") from None
    if len(raw) != size:
        raise SignalFormatError(f"{what}: decoded {len(raw)} bytes, {size} declared")
    return raw


# ---------------------------------------------------------------- sections
@dataclass
class Section:
    """One section of a version-2 container: its kind (``b"H"``...), body and offset."""

    kind: bytes
    body: bytes
    offset: int


def write_section(kind: bytes, body: bytes) -> bytes:
    """``kind:u8 length:u32 body crc:u32`` (docs/format.md, section 1)."""
    if len(body) >= 1 << 32:
        raise ValueError(f"a section holds at most 4 GiB, got {len(body):,} bytes")
    head = kind + struct.pack("<I", len(body))
    return head + body + struct.pack("<I", zlib.crc32(body, zlib.crc32(head)))


def write_container(header: dict, sections: list[tuple[bytes, bytes]], n_values: int) -> bytes:
    """A whole version-2 container.

    Parameters
    ----------
    header : dict
        The JSON header (its ``sections`` key is set here from ``sections``).
    sections : list of (kind, body)
        The ``C`` (channel payload) and ``B`` (blob, already framed by
        :func:`blob`) sections, in order.
    n_values : int
        Sum of the columns' ``n``, stored in the end section.
    """
    header = {**header, "sections": [k.decode() for k, _ in sections]}
    text = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    if len(text) > MAX_HEADER_BYTES:  # (a reader refuses it: say so before anything is written)
        raise ValueError(f"the container's header would take {len(text):,} bytes, above the "
                         f"{MAX_HEADER_BYTES:,} a reader takes (a quantizer's codebook is held "
                         f"there: use fewer levels)")
    out = [MAGIC, struct.pack("<HH", VERSION, 0),
           write_section(b"H", zstd_compress(text, dict_data=HEADER_DICT_V2))]
    out += [write_section(k, b) for k, b in sections]
    out.append(write_section(b"E", struct.pack("<IQ", len(sections) + 1, n_values)))
    return b"".join(out)


def blob(raw: bytes, level: int = 19) -> bytes:
    """The body of a ``B`` section: ``raw_size:varint`` and one zstd frame."""
    return varint(len(raw)) + zstd_compress(raw, level=level)


def read_blob(body: bytes, what: str = "blob") -> bytes:
    """Inverse of :func:`blob`, with the size checked before decompressing."""
    size, pos = read_varint(body, 0, what)
    if size > MAX_BLOB_BYTES:
        raise SignalFormatError(f"{what}: declares {size:,} bytes, above the limit")
    raw = zstd_decompress(body[pos:], min(size, MAX_BLOB_BYTES), what)
    if len(raw) != size:
        raise SignalFormatError(f"{what}: {len(raw)} bytes decoded, {size} declared")
    return raw


# ---------------------------------------------------------------- a file stored whole
VERBATIM_CODERS = ("zstd", "lzma2")  # by their byte in a file stored whole


def _lzma2_filters(size: int) -> list[dict]:
    # the dictionary spans the whole file (so a decoder needs no more memory than the file's
    # size, at least LZMA2's least, 4 KiB); lc=1, lp=0, pb=0 suit text (CSV)
    return [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME,
             "dict_size": max(size, 4096), "lc": 1, "lp": 0, "pb": 0}]


def write_stored_whole(raw: bytes) -> bytes:
    """A version-2 container that stores a CSV file whole (flags bit 0; docs/format.md,
    section 1): the preamble, ``source:u8 = 0`` (CSV), :func:`verbatim_body` and the CRC-32
    of every byte before it."""
    out = MAGIC + struct.pack("<HH", VERSION, FLAG_STORED_WHOLE) + b"\x00" + verbatim_body(raw)
    return out + struct.pack("<I", zlib.crc32(out))


def verbatim_body(raw: bytes) -> bytes:
    """``raw`` coded by the smaller of zstd (level 19) and LZMA2 (raw, as xz's ``-9e``), as
    ``coder:u8 raw_size:varint data`` (the body of a file stored whole).

    Parameters
    ----------
    raw : bytes
        At most :data:`MAX_VERBATIM_BYTES`.
    """
    if len(raw) > MAX_VERBATIM_BYTES:
        raise ValueError(f"a file stored whole holds at most {MAX_VERBATIM_BYTES:,} bytes")
    coded = [zstd_compress(raw), lzma.compress(raw, format=lzma.FORMAT_RAW,
                                               filters=_lzma2_filters(len(raw)))]
    k = min(range(len(coded)), key=lambda i: len(coded[i]))
    return bytes([k]) + varint(len(raw)) + coded[k]


def verbatim_coder(body: bytes) -> str:
    """The general-purpose coder (``"zstd"`` or ``"lzma2"``) of a :func:`verbatim_body`."""
    if not body or body[0] >= len(VERBATIM_CODERS):
        raise SignalFormatError(f"file stored whole: unknown coder "
                                f"{body[0] if body else None!r}")
    return VERBATIM_CODERS[body[0]]


def read_verbatim(body: bytes, what: str = "file stored whole") -> bytes:
    """Inverse of :func:`verbatim_body`: the size is checked against
    :data:`MAX_VERBATIM_BYTES` before anything is decompressed, and the data must decode to
    exactly that size with nothing left over.

    Raises
    ------
    SignalFormatError
        On an unknown coder, a size above the limit, damaged data, or another size.
    """
    coder = verbatim_coder(body)
    size, pos = read_varint(body, 1, what)
    if size > MAX_VERBATIM_BYTES:
        raise SignalFormatError(f"{what}: declares {size:,} bytes, above the limit of "
                                f"{MAX_VERBATIM_BYTES:,}")
    if coder == "zstd":
        raw = zstd_decompress(body[pos:], size, what)
        rest = zstandard.ZstdDecompressor().decompressobj()
        rest.decompress(body[pos:])  # (checked above: at most size bytes; to find its end)
        if len(raw) != size or rest.unused_data:
            raise SignalFormatError(f"{what}: the zstd frame does not decode to the {size:,} "
                                    f"bytes declared, and end there")
        return raw
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=[
        {"id": lzma.FILTER_LZMA2, "dict_size": max(size, 4096)}])
    try:
        raw = dec.decompress(body[pos:], max_length=size)
    except lzma.LZMAError as e:
        raise SignalFormatError(f"{what}: damaged LZMA2 data ({e})") from None
    if len(raw) != size or not dec.eof or dec.unused_data:
        raise SignalFormatError(f"{what}: the LZMA2 data does not decode to the {size:,} bytes "
                                f"declared, and end there")
    return raw


def container_version(data: bytes) -> int:
    """The format version of a container (checks the magic bytes only).

    Raises
    ------
    SignalFormatError
        If ``data`` does not start with ``b"UBPE-SIG"`` and a version.
    """
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise SignalFormatError("not a ubpe signal file (bad magic bytes)")
    if len(data) < len(MAGIC) + 2:
        raise SignalFormatError("truncated file: shorter than its fixed header")
    (version,) = struct.unpack_from("<H", data, len(MAGIC))
    if version < 1:
        raise SignalFormatError(f"ubpe signal format version {version} does not exist (the "
                                f"file is damaged)")
    if version > VERSION:
        raise SignalFormatError(f"ubpe signal format version {version} is newer than this "
                                f"ubpe reads (up to {VERSION}); upgrade ubpe")
    return version


def iter_sections(data: bytes) -> Iterator[Section]:
    """The checked sections of a version-2 container, ``E`` last.

    Raises
    ------
    SignalFormatError
        On a bad preamble, an unknown kind, a length past the end of the
        file, a checksum mismatch, bytes after ``E``, or a missing ``E``.
    """
    pos = len(MAGIC) + 4
    if _flags(data):
        raise SignalFormatError("a file stored whole has no sections")
    while True:
        if pos + 9 > len(data):
            raise SignalFormatError(f"truncated file: no complete section at byte {pos} "
                                    f"(the end marker is missing)")
        kind = data[pos:pos + 1]
        (length,) = struct.unpack_from("<I", data, pos + 1)
        if kind not in SECTION_KINDS:
            raise SignalFormatError(f"unknown section kind {kind!r} at byte {pos}")
        end = pos + 5 + length
        if end + 4 > len(data):
            raise SignalFormatError(f"truncated file: section {kind.decode()} at byte {pos} "
                                    f"declares {length:,} bytes, {len(data) - pos - 9:,} remain")
        (crc,) = struct.unpack_from("<I", data, end)
        if zlib.crc32(data[pos:end]) != crc:
            raise SignalFormatError(f"checksum mismatch in section {kind.decode()} at byte {pos}: "
                                    f"the file is corrupted")
        yield Section(kind, data[pos + 5:end], pos)
        pos = end + 4
        if kind == b"E":
            if pos != len(data):
                raise SignalFormatError(f"{len(data) - pos} unexpected bytes after the end "
                                        f"marker at byte {pos}")
            return


def _flags(data: bytes) -> int:
    """The flags of a version-2 container (preamble checked): 0, or :data:`FLAG_STORED_WHOLE`."""
    container_version(data)
    if len(data) < len(MAGIC) + 4:
        raise SignalFormatError("truncated file: shorter than its fixed header")
    (flags,) = struct.unpack_from("<H", data, len(MAGIC) + 2)
    if flags not in (0, FLAG_STORED_WHOLE):
        raise SignalFormatError(f"unknown flags {flags:#06x} at byte {len(MAGIC) + 2}")
    return flags


def read_container(data: bytes) -> tuple[dict, list[Section], int]:
    """Check a version-2 container; returns its header, ``C``/``B`` sections and value count.

    The section kinds are checked against the header's ``sections`` list,
    and the end section's count against the sections read. A file stored
    whole gives the header ``{"source": "csv", "verbatim": True, "columns":
    [], "sections": ["V"]}`` and one section ``V``, the body that
    :func:`read_verbatim` decodes (its CRC checked here).

    Raises
    ------
    SignalFormatError
        On any inconsistency (see :func:`iter_sections`).
    """
    if _flags(data) == FLAG_STORED_WHOLE:
        start = len(MAGIC) + 4
        if len(data) < start + 1 + 4:
            raise SignalFormatError("truncated file: shorter than a file stored whole")
        (crc,) = struct.unpack_from("<I", data, len(data) - 4)
        if zlib.crc32(data[:-4]) != crc:
            raise SignalFormatError("checksum mismatch in the file stored whole: the file is "
                                    "corrupted (or truncated)")
        if data[start] != 0:
            raise SignalFormatError(f"file stored whole: unknown source {data[start]} at byte "
                                    f"{start}")
        return ({"source": "csv", "verbatim": True, "columns": [], "sections": ["V"]},
                [Section(b"V", data[start + 1:-4], start + 1)], 0)
    sections = list(iter_sections(data))
    if sections[0].kind != b"H":
        raise SignalFormatError(f"the first section (byte {sections[0].offset}) is not the header")
    header_raw = zstd_decompress(sections[0].body, MAX_HEADER_BYTES, "header",
                                 dict_data=HEADER_DICT_V2)
    try:
        header = json.loads(header_raw)
    except ValueError as e:
        raise SignalFormatError(f"header at byte {sections[0].offset}: not JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("sections"), list) \
            or not isinstance(header.get("columns"), list):
        raise SignalFormatError("header: not a ubpe container header")
    body = sections[1:-1]
    kinds = [s.kind.decode() for s in body]
    if kinds != header["sections"]:
        raise SignalFormatError(f"header lists sections {''.join(map(str, header['sections']))}, "
                                f"the file holds {''.join(kinds)}")
    end = sections[-1]
    if len(end.body) != 12:
        raise SignalFormatError(f"end marker at byte {end.offset}: {len(end.body)} bytes, 12 expected")
    n_sections, n_values = struct.unpack("<IQ", end.body)
    if n_sections != len(sections) - 1:
        raise SignalFormatError(f"end marker at byte {end.offset}: {n_sections} sections "
                                f"declared, {len(sections) - 1} read")
    if len(header["columns"]) > MAX_COLUMNS:
        raise SignalFormatError(f"header: {len(header['columns'])} columns, above the limit")
    return header, body, n_values


# ---------------------------------------------------------------- streams
def write_stream_head(fileobj: IO[bytes]) -> None:
    """The magic and version of a stream of containers (docs/format.md, section 3)."""
    fileobj.write(STREAM_MAGIC + struct.pack("<H", VERSION))


def write_stream_frame(fileobj: IO[bytes], frame: bytes) -> None:
    """One frame of a stream: ``length:u64`` then the container."""
    if not frame:
        raise ValueError("a stream frame cannot be empty")
    fileobj.write(struct.pack("<Q", len(frame)))
    fileobj.write(frame)


def write_stream_end(fileobj: IO[bytes], n_frames: int) -> None:
    """The end marker of a stream: a zero length, the frame count and its CRC-32."""
    count = struct.pack("<Q", n_frames)
    fileobj.write(struct.pack("<Q", 0) + count + struct.pack("<I", zlib.crc32(count)))


def iter_stream_frames(fileobj: IO[bytes]) -> Iterator[bytes]:
    """The frames (containers, unchecked) of a stream, one at a time.

    Raises
    ------
    SignalFormatError
        On a foreign or newer stream, a frame length above the limit, or a
        stream that ends before its end marker or disagrees with it
        (truncated), when that point is reached.
    """
    head = fileobj.read(len(STREAM_MAGIC) + 2)
    if len(head) < len(STREAM_MAGIC) + 2 or head[:len(STREAM_MAGIC)] != STREAM_MAGIC:
        raise SignalFormatError("not a ubpe signal stream (bad magic bytes)")
    (version,) = struct.unpack("<H", head[len(STREAM_MAGIC):])
    if not 1 <= version <= VERSION:
        raise SignalFormatError(f"ubpe stream version {version} is newer than this ubpe reads")
    k = 0
    pos = len(head)
    while True:
        size = fileobj.read(8)
        if not size and version == 1:
            return  # version 1 had no end marker
        if len(size) < 8:
            raise SignalFormatError(f"truncated stream: it ends after {k} frames (byte {pos}), "
                                    f"before its end marker")
        (n,) = struct.unpack("<Q", size)
        if n == 0 and version >= 2:
            tail = fileobj.read(12)
            if len(tail) < 12 or struct.unpack("<I", tail[8:])[0] != zlib.crc32(tail[:8]):
                raise SignalFormatError(f"truncated or corrupted end marker of the stream at "
                                        f"byte {pos}")
            (count,) = struct.unpack("<Q", tail[:8])
            if count != k:
                raise SignalFormatError(f"the end marker at byte {pos} declares {count} frames, "
                                        f"{k} were read")
            if fileobj.read(1):  # (as a container names the bytes after its end section)
                raise SignalFormatError(f"unexpected bytes after the stream's end marker at byte "
                                        f"{pos + 20}")
            return
        if n > MAX_BLOB_BYTES * 4:
            raise SignalFormatError(f"frame {k} at byte {pos} declares {n:,} bytes, above the "
                                    f"limit")
        frame = fileobj.read(n)
        if len(frame) < n:
            raise SignalFormatError(f"truncated stream: frame {k} at byte {pos} has "
                                    f"{len(frame)} of {n} bytes")
        yield frame
        k += 1
        pos += 8 + n
