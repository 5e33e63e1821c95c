"""Exact CSV tables: bytes in, integer columns and blobs out, and the same bytes back.

``encode_csv`` splits a CSV file into

* a JSON ``layout``: the lines above the header, the header text exactly, the
  delimiter, line ending, BOM, quoting, and for each column its kind and format;
* ``int_columns``: one int64 array per coded column, ready for the signal
  pipeline (decimals as exact integer counts of ``10**-scale``, timestamps as
  integer counts of their finest unit, categories as dictionary codes);
* ``blobs``: dictionaries, free text, exception cells and anything else the
  exact reconstruction needs, for a general-purpose compressor.

``decode_csv`` rebuilds the file. The encoder runs the decoder on its own
output and compares it with the input byte for byte: a cell that would not
print back identically (``1.50`` in a column printed with one decimal, ``-0``,
``1e3``, an empty cell, ``NaN``, a 19-digit integer, a word in a numeric
column) is stored as an exception, verbatim; a row that would not come back
(an odd quoting, a stray line ending) is stored whole; and a file that still
would not come back is stored whole. Nothing is changed silently.

The file is split into rows and fields by pyarrow's CSV reader (Apache Arrow,
https://arrow.apache.org/docs/python/csv.html); numbers and timestamps are
converted and printed back by numba kernels. The dialect follows RFC 4180
(https://www.rfc-editor.org/rfc/rfc4180): fields quoted with ``"``, a quote
inside a quoted field doubled.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ubpe._jit import njit

if TYPE_CHECKING:
    import pyarrow as pa
else:
    class _Arrow:
        """``pyarrow``, imported where one of its names is first used: Arrow costs about 50 ms
        to import, and decoding a CSV without text columns, an array or a WAV file never uses
        it. (Thread-safe: the import system locks the module while one thread imports it;
        ``importlib.util.LazyLoader`` is not, before Python 3.12.)"""

        def __getattr__(self, name: str) -> Any:
            import pyarrow
            return getattr(pyarrow, name)

    pa = _Arrow()

__all__ = ["CsvError", "CsvParts", "encode_csv", "decode_csv", "sniff", "parse_table", "Sniffed"]

BOM = b"\xef\xbb\xbf"
UTF16_TEXT = ("UTF-16 text (its byte-order mark); ubpe reads CSV files in UTF-8 or another "
              "one-byte-a-character encoding (convert it, e.g. iconv -f UTF-16 -t UTF-8)")
LAYOUT_VERSION = 1
_DELIMITERS = (",", "\t", ";", "|")
_MAX_DIGITS = 18          # an int64 holds every 18-digit decimal
_MAX_DICT = 65536         # categories beyond this are coded as free text
_SAMPLE_LINES = 64


class CsvError(ValueError):
    """A CSV file cannot be read as requested; the message names file, line, column."""


# ----------------------------------------------------------------------------------------------
# the parts


@dataclass
class CsvParts:
    """A CSV file split into a JSON layout, int64 columns and byte blobs.

    Attributes
    ----------
    layout : dict
        Plain JSON (str, int, bool, list, dict): the dialect, the text above
        and of the header, and one entry per column (``kind``, ``scale``,
        ``format``, where its values, exceptions and dictionary are kept).
    int_columns : list of (str, ndarray)
        ``(name, values)``; each ``values`` is int64 of shape ``(n_rows,)``
        for a column's values and per-cell side data, or shorter for
        exception row numbers. Code them with the signal pipeline.
    blobs : list of bytes
        Dictionaries, free text, exception cells, whole rows kept verbatim.
        Code them with a general-purpose compressor.
    """

    layout: dict
    int_columns: list[tuple[str, np.ndarray]] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list)

    def describe(self, lossy: bool = False) -> list[dict[str, Any]]:
        """One summary per column, for ``inspect`` (``lossy``: the file's header has a
        ``max_error``).

        Returns
        -------
        list of dict
            Keys ``name``; ``kind``: ``decimal`` (exact integers at ``scale``;
            scale 0 for integers), ``time`` (int64 counts of ``unit``),
            ``category`` (dictionary codes), ``text`` (kept verbatim for a
            general-purpose compressor); ``scale`` (decimals stored, for
            ``decimal``, else ``None``); ``format`` (how cells are printed back:
            ``fixed``, ``trim``, ``digits``, ``exponent``, or a time template such
            as ``YYYY-MM-DD hh:mm:ss.fff``); ``exceptions`` (cells kept verbatim
            because they would not print back exactly: empty, NaN, ``-0``, more
            than 18 digits, a word); ``exact`` (``False`` for a decimal column
            rounded under ``max_error``, ``None`` where a lossy file written
            before this key does not say, else ``True``: what is not coded is
            kept verbatim). A file kept whole gives one entry of kind ``raw``
            whose ``format`` says why.
        """
        lay = self.layout
        if lay.get("kind") == "raw":
            return [{"name": "(whole file)", "kind": "raw", "scale": None,
                     "format": lay.get("reason", ""), "exceptions": 0, "exact": True}]
        out = []
        for c in lay["columns"]:
            fmt = c.get("format", "")
            if c["kind"] == "category":
                fmt = f"{c.get('n_categories', 0)} categories"
            exact = (not c["rounded"] if "rounded" in c
                     else None if lossy and c["kind"] == "decimal" else True)
            out.append({"name": c["name"], "kind": c["kind"], "scale": c.get("scale"),
                        "format": fmt, "exceptions": c.get("n_exceptions", 0), "exact": exact})
        return out

    @property
    def n_rows(self) -> int:
        """Number of data rows (0 for a file kept whole)."""
        return int(self.layout.get("n_rows", 0))


# ----------------------------------------------------------------------------------------------
# numba kernels: decimal scan and print


@njit(cache=True)
def _scan_decimals(offsets, data):  # pragma: no cover - compiled
    """Parse canonical decimals ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?`` cell by cell.

    Leading spaces are skipped and counted. Returns (digits, dec, ok, lead):
    the digits without the point as an integer (signed), the number of
    decimals, whether the cell is canonical, has at most 18 digits and is not
    a negative zero, and the number of leading spaces.
    """
    n = offsets.size - 1
    digits = np.zeros(n, np.int64)
    dec = np.zeros(n, np.int64)
    ok = np.zeros(n, np.bool_)
    lead = np.zeros(n, np.int64)
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        while a < b and data[a] == 32:
            a += 1
        lead[i] = a - offsets[i]
        if a == b:
            continue
        neg = False
        if data[a] == 45:  # '-'
            neg = True
            a += 1
            if a == b:
                continue
        # integer part
        c = data[a]
        if c < 48 or c > 57:
            continue
        if c == 48 and a + 1 < b and data[a + 1] != 46:
            continue  # a leading zero
        v = 0
        nd = 0
        good = True
        j = a
        while j < b:
            c = data[j]
            if c == 46:
                break
            if c < 48 or c > 57:
                good = False
                break
            v = v * 10 + (c - 48) if nd < _MAX_DIGITS else v
            nd += 1
            j += 1
        if not good:
            continue
        d = 0
        if j < b:  # a point
            j += 1
            if j == b:
                continue  # "5."
            while j < b:
                c = data[j]
                if c < 48 or c > 57:
                    good = False
                    break
                v = v * 10 + (c - 48) if nd < _MAX_DIGITS else v
                nd += 1
                d += 1
                j += 1
            if not good:
                continue
        if nd > _MAX_DIGITS:
            continue
        if neg and v == 0:
            continue  # negative zero prints as "0"
        digits[i] = -v if neg else v
        dec[i] = d
        ok[i] = True
    return digits, dec, ok, lead


@njit(cache=True)
def _print_decimals(values, dec, scale, skip, lead, width):  # pragma: no cover - compiled
    """Print ``values / 10**scale`` with ``dec[i]`` decimals; skipped cells are empty.

    Each cell gets ``lead`` leading spaces, or with ``width`` > 0 is padded on
    the left with spaces to ``width`` characters.

    Returns (offsets int64 of shape (n + 1,), data uint8).
    """
    n = values.size
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    offsets = np.zeros(n + 1, np.int64)
    out = np.empty(n * (22 + max(lead, width)), np.uint8)
    tmp = np.empty(24, np.uint8)
    o = 0
    for i in range(n):
        offsets[i] = o
        if skip[i]:
            continue
        v = values[i]
        d = dec[i]
        if v == -9223372036854775807 - 1 or d < 0 or d > scale:
            raise ValueError("corrupt CSV parts: a decimal value out of range")
        q = -v if v < 0 else v
        if d < scale:
            q //= p10[scale - d]
        k = 24
        if d > 0:
            for _ in range(d):
                k -= 1
                tmp[k] = 48 + q % 10
                q //= 10
            k -= 1
            tmp[k] = 46
        while True:
            k -= 1
            tmp[k] = 48 + q % 10
            q //= 10
            if q == 0:
                break
        if v < 0:
            k -= 1
            tmp[k] = 45
        pad = lead if width == 0 else max(0, width - (24 - k))
        for _ in range(pad):
            out[o] = 32
            o += 1
        for t in range(k, 24):
            out[o] = tmp[t]
            o += 1
    offsets[n] = o
    return offsets, out[:o]


@njit(cache=True)
def _decimal_values(digits, dec, scale, as_float):  # pragma: no cover - compiled
    """Scaled int64 values (``digits * 10**(scale - dec)``) or float64 (``digits / 10**dec``).

    Returns (ints, floats, exact): ``exact`` is False when a scaled value would
    need more than 18 digits, or a float's digits exceed 2**53 (then one
    division is not the correctly rounded value of the text).
    """
    n = digits.size
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    ints = np.zeros(0 if as_float else n, np.int64)
    floats = np.zeros(n if as_float else 0, np.float64)
    for i in range(n):
        v = digits[i]
        if as_float:
            if abs(v) >= 2**53:
                return ints, floats, False
            floats[i] = v / float(p10[dec[i]])
        else:
            if abs(v) >= p10[18 - scale + dec[i]]:
                return ints, floats, False
            ints[i] = v * p10[scale - dec[i]]
    return ints, floats, True


@njit(cache=True)
def _scale_column(digits, dec, ok, scale):  # pragma: no cover - compiled
    """Values at one scale, the previous good value in cells that are not ok.

    Cells whose value would need more than 18 digits at ``scale`` are marked
    not ok (in place). Returns (values int64, number of ok cells with ``scale``
    decimals).
    """
    n = digits.size
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    values = np.zeros(n, np.int64)
    last = np.int64(0)
    first = True
    n_fixed = 0
    for i in range(n):
        if ok[i]:
            v = digits[i]
            if abs(v) >= p10[18 - scale + dec[i]]:
                ok[i] = False
            else:
                last = v * p10[scale - dec[i]]
                n_fixed += dec[i] == scale
                if first:
                    values[:i] = last
                    first = False
        values[i] = last
    return values, n_fixed


@njit(cache=True)
def _trailing_zeros(values, scale):  # pragma: no cover - compiled
    """Decimals each value needs at ``scale`` (trailing zeros dropped)."""
    n = values.size
    need = np.empty(n, np.int64)
    for i in range(n):
        v = abs(values[i])
        k = scale
        while k > 0 and v % 10 == 0:
            v //= 10
            k -= 1
        need[i] = k
    return need


# ----------------------------------------------------------------------------------------------
# arrow helpers


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int32 or int64 of shape (n + 1,), starting at 0, data uint8) of a binary array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    odt: Any = np.int64 if large else np.int32
    n = len(arr)
    bufs = arr.buffers()
    if bufs[1] is None:
        return np.zeros(n + 1, odt), np.zeros(0, np.uint8)
    offs = np.frombuffer(bufs[1], odt, n + 1, arr.offset * np.dtype(odt).itemsize)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    base = int(offs[0])
    if base:
        offs = offs - odt(base)
    return offs, data[base:base + int(offs[-1])]


def _int_values(arr: pa.Array) -> np.ndarray:
    """An integer array without nulls as int64, read from its buffer (``Array.to_numpy``
    imports pandas: about 0.4 s and 50 MB in a process that had not)."""
    if arr.null_count or not pa.types.is_integer(arr.type):  # pragma: no cover - not made here
        return np.asarray(arr.to_numpy(zero_copy_only=False), np.int64)
    width = arr.type.bit_width // 8
    kind = "i" if pa.types.is_signed_integer(arr.type) else "u"
    return np.frombuffer(arr.buffers()[1], f"<{kind}{width}", len(arr),
                         arr.offset * width).astype(np.int64)


def _arrow_ints(x: np.ndarray) -> pa.Array:
    """An int64 arrow array over ``x`` (``pa.array`` of a NumPy array imports pandas)."""
    x = np.ascontiguousarray(x, np.int64)
    return pa.Array.from_buffers(pa.int64(), x.size, [None, pa.py_buffer(x)])


def _arrow_mask(m: np.ndarray) -> pa.Array:
    """A boolean arrow array of ``m`` (bits packed, least significant first, as Arrow's)."""
    m = np.asarray(m, np.bool_)
    return pa.Array.from_buffers(pa.bool_(), m.size,
                                 [None, pa.py_buffer(np.packbits(m, bitorder="little"))])


def _from_buffers(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """A large_binary array over int64 ``offsets`` (n + 1,) into ``data`` (no copy)."""
    n = offsets.size - 1
    return pa.Array.from_buffers(pa.large_binary(), n, [
        None, pa.py_buffer(np.ascontiguousarray(offsets, np.int64)), pa.py_buffer(data)])


def _pack(items: pa.Array | list[bytes]) -> bytes:
    """Byte strings as one blob: count (uint64), lengths (uint32 each), data."""
    if isinstance(items, list):
        lens = np.array([len(x) for x in items], np.uint32)
        data = b"".join(items)
    else:
        offs, arr = _binary_buffers(items)
        lens = np.diff(offs).astype(np.uint32)
        data = arr.tobytes()
    return np.uint64(lens.size).tobytes() + lens.tobytes() + data


def _unpack(blob: bytes) -> pa.Array:
    """Inverse of ``_pack``: a binary array."""
    return _from_buffers(*_unpack_buffers(blob))


def _unpack_buffers(blob: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``_pack``: the offsets (int64, n + 1) and data (uint8) of its strings."""
    n = int(np.frombuffer(blob, np.uint64, 1)[0])
    lens = np.frombuffer(blob, np.uint32, n, 8).astype(np.int64)
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offs[1:])
    data = np.frombuffer(blob, np.uint8, offset=8 + 4 * n)
    if data.size != offs[-1]:
        raise ValueError("corrupt CSV blob: lengths do not match the data")
    return offs, data


def _ffill(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Fill invalid cells with the previous valid value (the first valid one at the start)."""
    if valid.all() or not valid.any():
        return np.where(valid, values, 0).astype(np.int64)
    idx = np.where(valid, np.arange(values.size), 0)
    np.maximum.accumulate(idx, out=idx)
    first = int(np.argmax(valid))
    idx[:first] = first
    return values[idx]


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


# ----------------------------------------------------------------------------------------------
# the front end: BOM, line ending, lines above the header, delimiter, header


@dataclass
class Sniffed:
    """What ``sniff`` finds in a CSV file before the body is parsed.

    Attributes
    ----------
    bom : bool
        The file starts with a UTF-8 byte-order mark.
    eol : str
        The line ending of most lines: ``"\\n"``, ``"\\r\\n"`` or ``"\\r"``.
    final_newline : bool
        The last line ends with a line ending.
    preamble : list of bytes
        Lines above the header (metadata, comments), each with its line ending.
    header : bytes or None
        The header line with its line ending, exactly; ``None`` without one.
    names : list of str
        Column names (``col<i>`` without a header).
    delimiter : str
    text : bytes
        The file without its BOM, with a line ending added to the last line when
        it lacks one; or, when comment or blank lines were taken out of the
        body, the body alone.
    start : int
        Where the body starts in ``text``: the data rows, each ending with a line
        ending, without comment and blank lines.
    body_line : int
        1-based line number of the first body line in the file.
    inserted : list of (int, bytes)
        Comment and blank lines inside the body: (number of body rows above it, the line).
    comment : str or None
    """

    bom: bool
    eol: str
    final_newline: bool
    preamble: list[bytes]
    header: bytes | None
    names: list[str]
    delimiter: str
    text: bytes
    start: int
    body_line: int
    inserted: list[tuple[int, bytes]]
    comment: str | None

    @property
    def body(self) -> bytes:
        """The body as bytes (a copy)."""
        return self.text[self.start:]

    @functools.cached_property
    def has_quote(self) -> bool:
        """Whether the body holds a quote character."""
        return self.text.find(b'"', self.start) >= 0


def _fields(line: bytes, delimiter: str) -> list[str]:
    text = _s(line).rstrip("\r\n")
    try:
        return next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False), [])
    except csv.Error:
        return text.split(delimiter)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _pattern(fields: list[str]) -> list[str]:
    return ["e" if not f.strip() else "n" if _is_number(f) else "t" for f in fields]


def _head_lines(text: bytes, start: int, count: int) -> list[tuple[int, bytes]]:
    """Up to ``count`` lines from byte ``start``: (start offset, line with its ending).

    A line ending inside a quoted field (an odd number of quotes before it on
    the line) does not end the line.
    """
    out: list[tuple[int, bytes]] = []
    pos = start
    n = len(text)
    while pos < n and len(out) < count:
        end, quotes = pos, 0  # (the quotes counted once each: a stray one costs one pass)
        while True:
            j = text.find(b"\n", end)
            k = text.find(b"\r", end, j if j >= 0 else n)
            was = end
            if k >= 0 and (j < 0 or k + 1 < j):   # a lone CR ends the line
                end = k + 1
            else:
                end = n if j < 0 else j + 1
            quotes += text.count(b'"', was, end)
            if end >= n or quotes % 2 == 0 or end - pos > 1 << 20:
                break
        out.append((pos, text[pos:end]))
        pos = end
    return out


def _utf16(data: bytes) -> bool:
    """Whether ``data`` starts as UTF-16 text: a byte-order mark, then a NUL among the next 256
    bytes (the other byte of an ASCII character: a digit, a comma, a line end). A file in a
    one-byte encoding that starts with "ÿþ" holds no NUL; UTF-32 (little-endian) has two right
    after its mark."""
    head = data[2:258]
    return (data[:2] == b"\xff\xfe" and head[:2] != b"\0\0" or data[:2] == b"\xfe\xff") \
        and b"\0" in head


def count_lines(text: bytes) -> int:
    """The line ends of ``text`` as a CSV reader counts them: ``\n``, ``\r\n`` or ``\r``."""
    n = text.count(b"\n")
    if b"\r" not in text:  # (most files; a memchr, where each count is a pass of its own)
        return n
    return n + text.count(b"\r") - text.count(b"\r\n")


def check_dialect(delimiter: str | None, comment: str | None, path: str = "<bytes>") -> None:
    """CsvError unless ``delimiter`` is one character other than a quote or line break, and
    ``comment`` is one character other than those and the delimiter (either may be None)."""
    if delimiter is not None and (len(delimiter) != 1 or delimiter in '"\r\n'):
        raise CsvError(f"{path}: the delimiter must be one character other than a quote or line "
                       f"break, not {delimiter!r}")
    if comment is not None and (len(comment) != 1 or comment in '"\r\n' or comment == delimiter):
        raise CsvError(f"{path}: the comment character must be one character other than a quote, "
                       f"a line break or the delimiter, not {comment!r}")


def sniff(data: bytes, *, skip_rows: int | None = None, comment: str | None = None,
          delimiter: str | None = None, path: str = "<bytes>", first_line: int = 1) -> Sniffed:
    """Find the dialect, the lines above the header and the header of a CSV file.

    Parameters
    ----------
    data : bytes
        The whole file.
    skip_rows : int, optional
        Lines above the header (or above the data, without a header) to keep
        aside as metadata. Default: detected, where unambiguous: the leading
        lines whose field count differs from that of every line below them
        (the station line of an NREL TMY3 file), after leading comment lines.
    comment : str, optional
        Lines starting with this string are comments, kept aside wherever they
        are. Default: ``"#"`` if the first line starts with ``#``, else none.
    delimiter : str, optional
        Default: detected among ``, \\t ; |``: the first that splits the
        sampled lines into the same number (more than one) of fields.
    path : str
        Named in error messages.
    first_line : int
        The line number, in the file, of ``data``'s first line (a frame of a
        stream: the lines of the file before it, less those of the header
        copy in front of it), for the line numbers of error messages.

    Returns
    -------
    Sniffed

    Raises
    ------
    CsvError
        If the file is empty or UTF-16 text, ``skip_rows`` leaves no line, or
        the delimiter is not one character (other than a quote or line break).
    """
    check_dialect(delimiter, comment, path)
    if first_line == 1 and _utf16(data):  # (its rows misread: a field count error on line 2)
        raise CsvError(f"{path}: {UTF16_TEXT}")
    bom = data.startswith(BOM)
    text = data[3:] if bom else data
    if not text[:4096].strip() and not text.strip():
        raise CsvError(f"{path}: the file is empty")
    # the line ending of most lines of the head; rows that end otherwise are kept whole by encode_csv
    head_text = text[:1 << 16]
    n_cr = head_text.count(b"\r")
    n_lf = head_text.count(b"\n")
    n_crlf = head_text.count(b"\r\n") if n_cr else 0
    if n_lf == 0 and n_cr:
        eol = "\r"
    elif n_crlf * 2 > n_lf:
        eol = "\r\n"
    else:
        eol = "\n"
    any_cr = bool(n_cr) or b"\r" in text
    final_newline = text.endswith((b"\n", b"\r"))
    if not final_newline:
        text = text + _b(eol)
    if comment is None and text.startswith(b"#"):
        comment = "#"
    cm = _b(comment) if comment else None

    head = _head_lines(text, 0, (skip_rows or 0) + 4 * _SAMPLE_LINES)
    i = 0
    preamble: list[bytes] = []
    if skip_rows is not None:
        if skip_rows > len(head) - 1 and len(head) <= skip_rows:
            raise CsvError(f"{path}: skip_rows={skip_rows} skips every line ({len(head)} lines)")
        preamble = [ln for _, ln in head[:skip_rows]]
        i = skip_rows
    while i < len(head) and cm is not None and head[i][1].startswith(cm):
        preamble.append(head[i][1])
        i += 1
    rest = [(o, ln) for o, ln in head[i:]
            if ln.strip(b"\r\n") and not (cm is not None and ln.startswith(cm))]
    if not rest:
        raise CsvError(f"{path}: no lines below the {len(preamble)} skipped or comment lines")
    sample = rest[:_SAMPLE_LINES]
    if delimiter is None:
        # the first candidate that splits every sampled line alike, else the lower half alike
        tail = sample[len(sample) // 2:] if len(sample) > 2 else sample
        found: list[str | None] = [None, None]
        for which, part in enumerate((sample, tail)):
            for d in _DELIMITERS:
                if any(_b(d) in ln for _, ln in part):
                    counts = {len(_fields(ln, d)) for _, ln in part}
                    if len(counts) == 1 and counts.pop() > 1:
                        found[which] = d
                        break
        delimiter = found[0] or found[1] or ","
    counts_all = [len(_fields(ln, delimiter)) for _, ln in sample]
    if skip_rows is None and len(counts_all) > 2:
        # leading lines whose field count differs from that of every line below them
        width = counts_all[-1]
        k = 0
        while k < len(counts_all) and counts_all[k] != width:
            k += 1
        below = len(counts_all) - k
        if 0 < k <= 8 and below >= 3 and below > k and all(c == width for c in counts_all[k:]):
            first_off = sample[k][0]
            preamble += [ln for o, ln in head[i:] if o < first_off]
            i = next(j for j, (o, _) in enumerate(head) if o == first_off)
    # the first line after the preamble: a header?
    start = head[i][0] if i < len(head) else len(text)
    lines = [(o, ln) for o, ln in head[i:]
             if ln.strip(b"\r\n") and not (cm is not None and ln.startswith(cm))]
    # blank/comment lines between the preamble and the header belong to the preamble
    if lines and lines[0][0] > start:
        preamble += [ln for o, ln in head[i:] if o < lines[0][0]]
        start = lines[0][0]
    header: bytes | None = None
    first = _fields(lines[0][1], delimiter)
    pat = _pattern(first)
    if "t" in pat:
        nxt = [_pattern(_fields(ln, delimiter)) for _, ln in lines[1:3]]
        if not nxt or any(p != pat for p in nxt) or all(p == "t" for p in pat):
            header = lines[0][1]
    if header is not None:
        names = [f.strip() for f in first]
        start += len(header)
    else:
        names = [f"col{j}" for j in range(len(first))]
    body_line = first_line + sum(len(ln) > 0 for ln in preamble) + (
        0 if header is None else count_lines(header) or 1)  # (quoted cells may span lines)
    inserted: list[tuple[int, bytes]] = []
    blank = text.startswith((b"\n", b"\r"), start) or text.find(b"\n\n", start) >= 0
    if any_cr and not blank:
        blank = text.find(b"\n\r\n", start) >= 0 or text.find(b"\r\r", start) >= 0
    has_comment = cm is not None and (text.startswith(cm, start) or text.find(b"\n" + cm, start) >= 0
                                      or text.find(b"\r" + cm, start) >= 0)
    if blank or has_comment:
        kept: list[bytes] = []
        for ln in text[start:].splitlines(keepends=True):
            if (cm is not None and ln.startswith(cm)) or not ln.strip(b"\r\n"):
                inserted.append((len(kept), ln))
            else:
                kept.append(ln)
        text, start = b"".join(kept), 0
    return Sniffed(bom, eol, final_newline, preamble, header, names, delimiter, text, start, body_line,
                   inserted, comment)


def _ends_in_quotes(text: str, delimiter: str) -> bool:
    """Whether ``text`` ends inside a quoted field (a quote that never closes), as Python's
    CSV reader in strict mode finds it ("unexpected end of data")."""
    try:
        for _ in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True):
            pass
    except csv.Error as e:
        return "unexpected end of data" in str(e)
    return False


def _ragged_line(s: Sniffed, path: str) -> CsvError:
    """The error for the first row whose field count differs from the header's."""
    width = len(s.names)
    text = _s(s.body)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=s.delimiter, strict=False)
    ins = [p for p, _ in s.inserted]
    try:
        end = 0  # (the line the row before ended on)
        for r, row in enumerate(reader):
            start, end = end + 1, reader.line_num
            if len(row) != width:
                line = s.body_line + start - 1 + sum(1 for p in ins if p <= r)
                if next(reader, None) is None and _ends_in_quotes(text, s.delimiter):
                    return CsvError(f"{path}, line {line}: a quote opens a field that never "
                                    f"closes: is a closing quote missing?")
                return CsvError(f"{path}, line {line}: {len(row)} fields, expected {width}")
    except csv.Error as e:
        return CsvError(f"{path}: cannot split into fields ({e})")
    return CsvError(f"{path}: the rows cannot be split into {width} fields")


def parse_table(s: Sniffed, path: str = "<bytes>", *, threads: bool = True) -> list[pa.ChunkedArray]:
    """Split the body of a sniffed CSV into fields with pyarrow: one binary array per column.

    Parameters
    ----------
    s : Sniffed
    path : str
        Named in error messages.
    threads : bool
        Parse blocks on pyarrow's thread pool (faster with idle cores; each
        thread's blocks and allocator cache cost memory: about 20-50 MB more
        on an 8 MiB piece of CSV).

    Returns
    -------
    list of pyarrow.ChunkedArray
        Binary arrays of the fields' text (quotes removed), one per column,
        each of length ``n_rows``; empty fields are empty, never null.

    Raises
    ------
    CsvError
        On a row with a different number of fields (names file and line).
    """
    width = len(s.names)
    if s.start >= len(s.text):
        return [pa.chunked_array([], pa.binary()) for _ in range(width)]
    names = [f"c{j}" for j in range(width)]
    has_quote = s.has_quote
    import pyarrow.csv as pacsv  # (where Arrow is imported in full: before its thread pool runs)
    block = 1 << 20
    while True:
        try:
            table = pacsv.read_csv(
                pa.BufferReader(pa.py_buffer(s.text)[s.start:]),
                read_options=pacsv.ReadOptions(column_names=names, block_size=block,
                                               use_threads=threads),
                parse_options=pacsv.ParseOptions(delimiter=s.delimiter,
                                                 quote_char='"' if has_quote else False,
                                                 double_quote=True, newlines_in_values=has_quote,
                                                 ignore_empty_lines=False),
                convert_options=pacsv.ConvertOptions(column_types={c: pa.binary() for c in names},
                                                     strings_can_be_null=False,
                                                     quoted_strings_can_be_null=False))
            break
        except pa.ArrowInvalid as e:
            body = len(s.text) - s.start
            if "straddl" in str(e) and block <= body:  # a row longer than a block: larger blocks
                block = min(4 * block, body + 1)
                continue
            if "columns" in str(e):
                raise _ragged_line(s, path) from None
            raise CsvError(f"{path}: cannot parse the rows ({e})") from None
    return [table.column(j) for j in range(width)]


# ----------------------------------------------------------------------------------------------
# per-column coding


def _raw_fields(line: bytes, delimiter: bytes) -> list[tuple[bool, bytes]]:
    """(quoted, text) for each field of one physical line."""
    out: list[tuple[bool, bytes]] = []
    i, n = 0, len(line.rstrip(b"\r\n"))
    d = delimiter[0]
    while True:
        if i < n and line[i] == 34:
            j = i + 1
            while j < n:
                if line[j] == 34:
                    if j + 1 < n and line[j + 1] == 34:
                        j += 2
                        continue
                    break
                j += 1
            out.append((True, line[i:j + 1]))
            i = j + 1
            while i < n and line[i] != d:
                i += 1
        else:
            j = i
            while j < n and line[j] != d:
                j += 1
            out.append((False, line[i:j]))
            i = j
        if i >= n:
            break
        i += 1
    return out


def _quote_modes(s: Sniffed) -> list[str]:
    """``"all"`` for columns whose sampled fields are all quoted, else ``"needed"``."""
    width = len(s.names)
    if not s.has_quote:
        return ["needed"] * width
    seen = [0] * width
    quoted = [0] * width
    for ln in s.text[s.start:s.start + (1 << 16)].splitlines()[:200]:
        f = _raw_fields(ln, _b(s.delimiter))
        if len(f) != width:
            continue
        for j, (q, _) in enumerate(f):
            seen[j] += 1
            quoted[j] += q
    return ["all" if seen[j] and quoted[j] == seen[j] else "needed" for j in range(width)]


class _Builder:
    """Collects int columns and blobs while the layout is written."""

    def __init__(self) -> None:
        self.int_columns: list[tuple[str, np.ndarray]] = []
        self.blobs: list[bytes] = []

    def col(self, name: str, values: np.ndarray) -> int:
        self.int_columns.append((name, np.ascontiguousarray(values, np.int64)))
        return len(self.int_columns) - 1

    def blob(self, b: bytes) -> int:
        self.blobs.append(b)
        return len(self.blobs) - 1


def _exceptions(b: _Builder, name: str, col: pa.Array, bad: np.ndarray, spec: dict) -> None:
    rows = np.flatnonzero(bad)
    spec["n_exceptions"] = int(rows.size)
    if rows.size:
        spec["exception_rows"] = b.col(f"{name}#exception_rows", rows)
        spec["exception_text"] = b.blob(_pack(col.take(_arrow_ints(rows))))


def _code_decimal(b: _Builder, name: str, col: pa.Array) -> dict | None:
    offs, data = _binary_buffers(col)
    digits, dec, ok, lead = _scan_decimals(offs, data)
    n = ok.size
    filled = max(1, int(np.count_nonzero(np.diff(offs))))  # empty cells are cheap exceptions
    if n == 0 or ok.sum() * 2 < filled:
        return None
    pad: dict[str, int] = {}
    if ok.any() and lead[ok].any():
        # leading spaces: the same count in every cell, or right-aligned to one width
        lens = np.diff(offs)
        counts = np.bincount(lead[ok])
        if counts.size == 1 or counts.max() == ok.sum():
            pad["lead"] = int(np.argmax(counts))
        elif (lens[ok] == lens[ok][0]).all():
            pad["width"] = int(lens[ok][0])
        else:
            pad["lead"] = int(np.argmax(counts))
            ok &= lead == pad["lead"]
        if max(pad.values()) >= 64:
            return None
    scale = int(dec[ok].max())
    values, n_fixed = _scale_column(digits, dec, ok, scale)
    n_ok = int(ok.sum())
    if n_ok * 2 < filled:
        return None
    spec: dict[str, Any] = {"kind": "decimal", "scale": scale, **pad}
    if n_fixed == n_ok:
        spec["format"] = "fixed"
    else:
        decs = dec[ok]
        need = _trailing_zeros(values[ok], scale)
        for k in (0, 1):
            if k <= scale and (decs == np.maximum(need, k)).all():
                spec["format"] = "trim"
                spec["min_decimals"] = k
                break
        else:
            spec["format"] = "digits"
            spec["decimals"] = b.col(f"{name}#decimals", _ffill(dec, ok))
    spec["values"] = b.col(name, values)
    _exceptions(b, name, col, ~ok, spec)
    return spec


_TIME_RE = re.compile(
    r"^(?:(?P<date>(?P<g1>D{4})(?P<s1>[-/.])(?P<g2>DD)(?P=s1)(?P<g3>DD)"
    r"|(?P<g1b>DD)(?P<s1b>[-/.])(?P<g2b>DD)(?P=s1b)(?P<g3b>D{4}))(?P<sep>[ T])?)?"
    r"(?P<time>(?P<h>D{1,2}):(?P<mi>DD)(?::(?P<sec>DD)(?:[.,](?P<frac>D{1,9}))?)?)?"
    r"(?P<tail>[^D]*)$")
_DAYS_IN_MONTH = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int64)
# field kinds, in the order a value is composed: year, month, day, hour, minute, second, fraction
_KINDS = "YMDhmsf"


@njit(cache=True)
def _days_from_civil(y, m, d):  # pragma: no cover - compiled
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-Compatible
    Low-Level Date Algorithms", https://howardhinnant.github.io/date_algorithms.html)."""
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    mp = m - 3 if m > 2 else m + 9
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@njit(cache=True)
def _time_compose(g, has_date, has_time, n_time, fdig):  # pragma: no cover - compiled
    """One value from its fields g[0..6] (Y M D h m s f), in the finest unit."""
    v = np.int64(0)
    if has_date:
        v = _days_from_civil(g[0], g[1], g[2])
    if has_time:
        v = v * 24 + g[3] if has_date else g[3]
        v = v * 60 + g[4]
        if n_time > 2:
            v = v * 60 + g[5]
        if n_time > 3:
            v = v * fdig + g[6]
    return v


@njit(cache=True)
def _time_decompose(v, g, has_date, has_time, n_time, fdig):  # pragma: no cover - compiled
    """Inverse of ``_time_compose``: fields into g (civil_from_days, ibid.)."""
    if has_time:
        if n_time > 3:
            g[6] = v % fdig
            v //= fdig
        if n_time > 2:
            g[5] = v % 60
            v //= 60
        g[4] = v % 60
        v //= 60
        if has_date:
            g[3] = v % 24
            v //= 24
        else:
            g[3] = v
    if has_date:  # in unsigned arithmetic, whole eras of 400 years added first
        z = v + 719468
        shift = 0 if z >= 0 else -z // 146097 + 1  # (dates before year 0)
        uz = np.uint64(z + shift * 146097)
        era = uz // np.uint64(146097)
        doe = uz - era * np.uint64(146097)
        yoe = (doe - doe // np.uint64(1460) + doe // np.uint64(36524)
               - doe // np.uint64(146096)) // np.uint64(365)
        doy = doe - (np.uint64(365) * yoe + yoe // np.uint64(4) - yoe // np.uint64(100))
        mp = np.int64((np.uint64(5) * doy + np.uint64(2)) // np.uint64(153))
        g[2] = np.int64(doy) - (153 * mp + 2) // 5 + 1
        g[1] = mp + 3 if mp < 10 else mp - 9
        g[0] = np.int64(yoe) + (np.int64(era) - shift) * 400 + (1 if g[1] <= 2 else 0)


@njit(cache=True)
def _time_write(out, o, template, fields, g):  # pragma: no cover - compiled
    """Write one cell at out[o:o + len(template)]; False if a field does not fit its width."""
    w = template.size
    for p in range(w):
        out[o + p] = template[p]
    for k in range(fields.shape[0]):
        a, e, kind = fields[k, 0], fields[k, 1], fields[k, 2]
        x = g[kind]
        if x < 0:
            return False
        for p in range(e - 1, a - 1, -1):
            out[o + p] = 48 + x % 10
            x //= 10
        if x != 0:
            return False
    return True


@njit(cache=True)
def _time_scan(offsets, data, template, isdig, fields, has_date, has_time, n_time,
               fdig):  # pragma: no cover - compiled
    """Values of cells that match the template and print back identically, and an ok mask."""
    n = offsets.size - 1
    w = template.size
    values = np.zeros(n, np.int64)
    ok = np.zeros(n, np.bool_)
    g = np.zeros(7, np.int64)
    for i in range(n):
        a = offsets[i]
        if offsets[i + 1] - a != w:
            continue
        good = True
        for p in range(w):
            c = data[a + p]
            if isdig[p]:
                if c < 48 or c > 57:
                    good = False
                    break
            elif c != template[p]:
                good = False
                break
        if not good:
            continue
        g[:] = 0
        for k in range(fields.shape[0]):
            x = 0
            for p in range(fields[k, 0], fields[k, 1]):
                x = x * 10 + (data[a + p] - 48)
            g[fields[k, 2]] = x
        # fields in range compose and decompose one to one (encode_csv checks the whole file anyway)
        if has_date:
            m = g[1]
            if m < 1 or m > 12 or g[2] < 1:
                continue
            y = g[0]
            leap = (y % 4 == 0 and y % 100 != 0) or y % 400 == 0
            dim = 29 if m == 2 and leap else _DAYS_IN_MONTH[m - 1]
            if g[2] > dim:
                continue
            if has_time and g[3] > 23:
                continue
        if has_time and (g[4] > 59 or (n_time > 2 and g[5] > 59)):
            continue
        values[i] = _time_compose(g, has_date, has_time, n_time, fdig)
        ok[i] = True
    return values, ok


@njit(cache=True)
def _time_print_all(values, template, fields, has_date, has_time, n_time, fdig,
                    skip):  # pragma: no cover - compiled
    """All cells printed into the template, (n * width) bytes; skipped cells stay the template."""
    n = values.size
    w = template.size
    out = np.empty(n * w, np.uint8)
    g = np.zeros(7, np.int64)
    for i in range(n):
        if skip[i]:
            for p in range(w):
                out[i * w + p] = template[p]
            continue
        _time_decompose(values[i], g, has_date, has_time, n_time, fdig)
        if not _time_write(out, i * w, template, fields, g):
            skip[i] = True  # does not fit: reported by the caller
    return out


def _time_fields(template: str) -> list[tuple[int, int, str]] | None:
    """(start, end, kind) of each field of a fixed-width date/time template (``D`` a digit)."""
    mt = _TIME_RE.match(template)
    if mt is None or not (mt["date"] or mt["time"]):
        return None
    if mt["date"] and mt["time"] and not mt["sep"]:
        return None
    out: list[tuple[int, int, str]] = []
    if mt["g1"]:
        out += [(*mt.span("g1"), "Y"), (*mt.span("g2"), "M"), (*mt.span("g3"), "D")]
    elif mt["g1b"]:
        out += [(*mt.span("g1b"), "?"), (*mt.span("g2b"), "?"), (*mt.span("g3b"), "Y")]
    for key, kind in (("h", "h"), ("mi", "m"), ("sec", "s"), ("frac", "f")):
        if mt[key]:
            out.append((*mt.span(key), kind))
    return out


def _time_args(fields: list, template: bytes) -> tuple[np.ndarray, np.ndarray, bool, bool, int, int]:
    kinds = [k for _, _, k in fields]
    arr = np.array([[a, e, _KINDS.index(k)] for a, e, k in fields], np.int64).reshape(-1, 3)
    has_date = "Y" in kinds
    n_time = sum(k in "hmsf" for k in kinds)
    fdig = 10 ** next((e - a for a, e, k in fields if k == "f"), 0)
    return (np.frombuffer(template, np.uint8), arr, has_date, n_time > 0, n_time, fdig)


def _time_label(fields: list, template: str) -> str:
    """The template with its fields spelled out: ``YYYY-MM-DD hh:mm:ss.ffffff``."""
    t = list(template)
    for a, e, k in fields:
        t[a:e] = k * (e - a)
    return "".join(t)


def _code_time(b: _Builder, name: str, col: pa.Array) -> dict | None:
    """A fixed-width date, time or date-time column as int64 counts of its finest unit."""
    offs, data = _binary_buffers(col)
    n = offs.size - 1
    if n == 0:
        return None
    lens = np.diff(offs)
    w = int(np.argmax(np.bincount(np.minimum(lens, 64))))
    if not 4 <= w < 64:
        return None
    first = int(np.argmax(lens == w))
    cell = data[offs[first]:offs[first] + w]
    isdig = (cell >= 48) & (cell <= 57)
    f = _time_fields("".join("D" if dg else chr(c) for dg, c in zip(isdig, cell)))
    if f is None:
        return None
    template = np.where(isdig, 48, cell).astype(np.uint8).tobytes()
    if any(k == "?" for _, _, k in f):
        # month/day/year or day/month/year: the one whose first field exceeds 12 somewhere
        rows = np.flatnonzero(lens == w)
        first_f = data[offs[rows][:, None] + np.arange(f[0][0], f[0][1])]
        over12 = ((first_f[:, 0].astype(np.int64) - 48) * 10 + first_f[:, 1] - 48 > 12).any()
        dmy = over12 or (template[2:3] in (b".", b"-"))
        f = [f[0][:2] + ("D" if dmy else "M",), f[1][:2] + ("M" if dmy else "D",), f[2]] + f[3:]
    args = _time_args(f, template)
    values, ok = _time_scan(offs, data, args[0], isdig, *args[1:])
    if ok.sum() * 2 < n:
        return None
    last = f[-1][2] if f[-1][2] in "hmsf" else "D"
    unit = {"D": "days", "m": "minutes", "s": "seconds"}.get(last, f"1e-{f[-1][1] - f[-1][0]} s")
    spec: dict[str, Any] = {"kind": "time", "template": _s(template), "fields": [list(x) for x in f],
                            "unit": unit, "format": _time_label(f, _s(template))}
    spec["values"] = b.col(name, _ffill(values, ok))
    _exceptions(b, name, col, ~ok, spec)
    return spec


def _time_format(spec: dict) -> tuple[bytes, list[tuple[int, int, str]]]:
    """A time column's template and fields, checked."""
    template = _b(spec["template"])
    if not 0 < len(template) < 64:
        raise ValueError("corrupt CSV parts: time template length")
    fields = [(int(a), int(e), str(k)) for a, e, k in spec["fields"]]
    if any(not 0 <= a < e <= len(template) or k not in _KINDS for a, e, k in fields):
        raise ValueError("corrupt CSV parts: time field outside its template")
    return template, fields


def _print_time(spec: dict, ints: list[np.ndarray], skip: np.ndarray, lo: int, hi: int) -> pa.Array:
    values = ints[spec["values"]][lo:hi]
    if values.size != skip.size:
        raise ValueError("corrupt CSV parts: time column length")
    template, fields = _time_format(spec)
    args = _time_args(fields, template)
    sk = skip.copy()
    data = _time_print_all(values, *args, sk)
    if (sk != skip).any():
        raise ValueError("corrupt CSV parts: a time value does not fit its template")
    w = len(template)
    return _from_buffers(np.arange(values.size + 1, dtype=np.int64) * w, data)


def _code_category(b: _Builder, name: str, col: pa.Array) -> dict:
    import pyarrow.compute as pc  # (25 ms to import: where needed)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    enc = pc.dictionary_encode(col)
    dictionary = enc.dictionary
    if len(dictionary) <= min(_MAX_DICT, max(16, len(col) // 4)):
        codes = _int_values(enc.indices)
        return {"kind": "category", "values": b.col(name, codes),
                "dictionary": b.blob(_pack(dictionary)), "n_categories": len(dictionary)}
    return {"kind": "text", "text": b.blob(_pack(col))}


@njit(cache=True)
def _scan_sci(offsets, data):  # pragma: no cover - compiled
    """Parse ``-?D(.D+)?[eE][+-]?D+`` cell by cell (printf's ``%e``, Python's ``repr``).

    Returns (mant, dm, ex, ewidth, esign, echar, ok): the mantissa digits as a
    signed integer, its decimals, the exponent, its digit count, its sign
    character (0, ``+`` or ``-``), the exponent letter, and whether the cell
    parsed (mantissa normalised, at most 18 digits, not a negative zero).
    """
    n = offsets.size - 1
    mant = np.zeros(n, np.int64)
    dm = np.zeros(n, np.int64)
    ex = np.zeros(n, np.int64)
    ewidth = np.zeros(n, np.int64)
    esign = np.zeros(n, np.uint8)
    echar = np.zeros(n, np.uint8)
    ok = np.zeros(n, np.bool_)
    for i in range(n):
        a = offsets[i]
        b = offsets[i + 1]
        if b - a < 3:
            continue
        neg = data[a] == 45
        if neg:
            a += 1
        c = data[a]
        if c < 48 or c > 57:
            continue
        v = c - 48
        a += 1
        d = 0
        if a < b and data[a] == 46:
            a += 1
            while a < b and 48 <= data[a] <= 57 and d < 18:
                v = v * 10 + (data[a] - 48)
                d += 1
                a += 1
            if d == 0:
                continue
        if a >= b or (data[a] != 101 and data[a] != 69):
            continue
        echar[i] = data[a]
        a += 1
        sg = 0
        if a < b and (data[a] == 43 or data[a] == 45):
            sg = data[a]
            a += 1
        e = 0
        w = 0
        while a < b and 48 <= data[a] <= 57 and w < 5:
            e = e * 10 + (data[a] - 48)
            w += 1
            a += 1
        if a != b or w == 0:
            continue
        first = v
        for _ in range(d):
            first //= 10
        if first == 0 and (v != 0 or neg):
            continue  # not normalised, or a negative zero
        if v == 0 and (e != 0 or sg == 45):
            continue
        mant[i] = -v if neg else v
        dm[i] = d
        ex[i] = -e if sg == 45 else e
        ewidth[i] = w
        esign[i] = sg
        ok[i] = True
    return mant, dm, ex, ewidth, esign, echar, ok


@njit(cache=True)
def _sci_values(mant, dm, ex, ok, scale):  # pragma: no cover - compiled
    """``mant * 10**(scale - dm + ex)`` (ok cells; others repeat the previous value)."""
    n = mant.size
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    values = np.zeros(n, np.int64)
    last = np.int64(0)
    first = True
    for i in range(n):
        if ok[i]:
            sh = scale - dm[i] + ex[i]
            v = mant[i]
            nd = 1
            q = abs(v)
            while q >= 10:
                q //= 10
                nd += 1
            if sh < 0 or nd + sh > 18:
                ok[i] = False
            else:
                last = v * p10[sh]
                if first:
                    values[:i] = last
                    first = False
        values[i] = last
    return values


@njit(cache=True)
def _print_sci(values, scale, dm, echar, plus, ewidth, skip):  # pragma: no cover - compiled
    """Print ``values / 10**scale`` as ``d.ddd<e><sign>dd`` with ``dm`` mantissa decimals."""
    n = values.size
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    offsets = np.zeros(n + 1, np.int64)
    out = np.empty(n * (dm + 12 + ewidth), np.uint8)
    o = 0
    for i in range(n):
        offsets[i] = o
        if skip[i]:
            continue
        v = values[i]
        if v == -9223372036854775807 - 1:
            raise ValueError("corrupt CSV parts: a value out of range")
        q = -v if v < 0 else v
        nd = 1
        t = q
        while t >= 10:
            t //= 10
            nd += 1
        e = 0 if q == 0 else nd - 1 - scale
        drop = nd - 1 - dm
        if drop > 0:
            q //= p10[drop]
        elif drop < 0:
            if -drop > 18 or q >= p10[18 + drop]:
                raise ValueError("corrupt CSV parts: a value out of range")
            q *= p10[-drop]
        if v < 0:
            out[o] = 45
            o += 1
        for k in range(dm, -1, -1):
            out[o + (k + 1 if k > 0 else 0)] = 48 + q % 10
            q //= 10
        if dm > 0:
            out[o + 1] = 46
            o += dm + 2
        else:
            o += 1
        out[o] = echar
        o += 1
        if e < 0:
            out[o] = 45
            o += 1
            e = -e
        elif plus:
            out[o] = 43
            o += 1
        w = 1
        t = e
        while t >= 10:
            t //= 10
            w += 1
        w = max(w, ewidth)
        for k in range(w - 1, -1, -1):
            out[o + k] = 48 + e % 10
            e //= 10
        o += w
    offsets[n] = o
    return offsets, out[:o]


def _code_sci(b: _Builder, name: str, col: pa.Array) -> dict | None:
    """A column in exponent form (``1.234560e-05``) as exact integers at one scale."""
    offs, data = _binary_buffers(col)
    mant, dm, ex, ewidth, esign, echar, ok = _scan_sci(offs, data)
    n = ok.size
    filled = max(1, int(np.count_nonzero(np.diff(offs))))
    if n == 0 or ok.sum() * 2 < filled:
        return None
    # the most common spelling: mantissa decimals, exponent letter, '+' or not, exponent width
    d0 = int(np.argmax(np.bincount(dm[ok])))
    e0 = int(np.argmax(np.bincount(echar[ok])))
    plus = bool((esign[ok & (ex >= 0)] == 43).sum() * 2 >= (ok & (ex >= 0)).sum())
    w0 = int(ewidth[ok].min())
    absx = np.abs(ex)
    natural = np.ones(n, np.int64)
    for k in range(1, 5):
        natural += absx >= 10 ** k
    ok &= (dm == d0) & (echar == e0) & (ewidth == np.maximum(natural, w0))
    ok &= np.where(ex >= 0, esign == (43 if plus else 0), esign == 45)
    if ok.sum() * 2 < filled:
        return None
    scale = int((dm - ex)[ok].max())
    if not 0 <= scale <= _MAX_DIGITS:
        return None
    values = _sci_values(mant, dm, ex, ok, scale)
    if ok.sum() * 2 < filled:
        return None
    spec: dict[str, Any] = {"kind": "decimal", "scale": scale, "format": "exponent",
                            "mantissa_decimals": d0, "exponent": chr(e0), "plus": plus,
                            "exponent_width": w0}
    spec["values"] = b.col(name, values)
    _exceptions(b, name, col, ~ok, spec)
    return spec


def _code_column(b: _Builder, name: str, col: pa.Array, numeric: bool) -> dict:
    spec = None
    if numeric:
        spec = _code_decimal(b, name, col)
        if spec is None:
            spec = _code_sci(b, name, col)
        if spec is None:
            spec = _code_time(b, name, col)
    if spec is None:
        spec = _code_category(b, name, col)
    return spec


def _decimal_format(spec: dict) -> tuple[int, int, int]:
    """A decimal column's scale and padding (lead, width), checked."""
    scale = int(spec["scale"])
    if not 0 <= scale <= _MAX_DIGITS:
        raise ValueError("corrupt CSV parts: scale outside 0..18")
    lead, width = int(spec.get("lead", 0)), int(spec.get("width", 0))
    if not (0 <= lead < 64 and 0 <= width < 64):
        raise ValueError("corrupt CSV parts: padding outside 0..63")
    return scale, lead, width


def _print_decimal(spec: dict, values: np.ndarray, cell_dec: np.ndarray | None, skip: np.ndarray
                   ) -> pa.Array:
    """Cells of a decimal column (``cell_dec``: their decimals, format ``digits``)."""
    scale, lead, width = _decimal_format(spec)
    if spec["format"] == "exponent":
        dm, ew = int(spec["mantissa_decimals"]), int(spec["exponent_width"])
        if not (0 <= dm <= 17 and 1 <= ew <= 5 and spec["exponent"] in ("e", "E")):
            raise ValueError("corrupt CSV parts: exponent format")
        offs, data = _print_sci(values, scale, dm, ord(spec["exponent"]), bool(spec["plus"]), ew, skip)
        return _from_buffers(offs, data)
    if spec["format"] == "fixed":
        dec = np.full(values.size, scale, np.int64)
    elif spec["format"] == "trim":
        dec = np.maximum(_trailing_zeros(values, scale), int(spec["min_decimals"]))
    else:
        assert cell_dec is not None
        dec = cell_dec
    offs, data = _print_decimals(values, dec, scale, skip, lead, width)
    return _from_buffers(offs, data)


def _check_rows(rows: np.ndarray, n: int, what: str) -> None:
    if rows.size and (rows[0] < 0 or rows[-1] >= n or (np.diff(rows) <= 0).any()):
        raise ValueError(f"corrupt CSV parts: {what} rows out of range or order")


class _ColumnPrinter:
    """Prints rows ``lo:hi`` of one column, exceptions applied (a large_binary array), or
    gives the program by which :func:`_print_rows` prints it."""

    def __init__(self, spec: dict, ints: list[np.ndarray], blobs: list[bytes], n: int) -> None:
        self.spec, self.ints, self.n = spec, ints, n
        kind = spec["kind"]
        if kind in ("decimal", "time", "category") and ints[spec["values"]].size != n:
            raise ValueError(f"corrupt CSV parts: column {spec.get('name')!r} length")
        self.rows = np.zeros(0, np.int64)
        if spec.get("n_exceptions"):
            self.rows = ints[spec["exception_rows"]]
            _check_rows(self.rows, n, "exception")
            self.exc = _unpack(blobs[spec["exception_text"]])
            if len(self.exc) != self.rows.size:
                raise ValueError("corrupt CSV parts: exception count")
        self.cell_dec: np.ndarray | None = None
        if kind == "category":
            self.dictionary = _unpack_buffers(blobs[spec["dictionary"]])  # (an Arrow array
            # only where printed through Arrow: a numeric file's decoding never imports it)
            codes = ints[spec["values"]]
            if codes.size and (codes.min() < 0 or codes.max() >= self.dictionary[0].size - 1):
                raise ValueError("corrupt CSV parts: category code out of range")
        elif kind == "text":
            self.text = _unpack(blobs[spec["text"]])
            if len(self.text) != n:
                raise ValueError(f"corrupt CSV parts: column {spec.get('name')!r} length")
        elif kind == "decimal":
            scale, _, _ = _decimal_format(spec)
            if spec["format"] not in ("fixed", "trim", "exponent"):
                dec = self.cell_dec = ints[spec["decimals"]]
                if dec.size != n or (dec.size and (dec.min() < 0 or dec.max() > scale)):
                    raise ValueError("corrupt CSV parts: per-cell decimals out of range")
        elif kind != "time":
            raise ValueError(f"corrupt CSV parts: unknown column kind {kind!r}")

    def __call__(self, lo: int, hi: int) -> pa.Array:
        spec, kind = self.spec, self.spec["kind"]
        k0, k1 = np.searchsorted(self.rows, [lo, hi])
        skip = np.zeros(hi - lo, np.bool_)
        skip[self.rows[k0:k1] - lo] = True
        if kind == "decimal":
            cell_dec = None if self.cell_dec is None else self.cell_dec[lo:hi]
            arr = _print_decimal(spec, self.ints[spec["values"]][lo:hi], cell_dec, skip)
        elif kind == "time":
            arr = _print_time(spec, self.ints, skip, lo, hi)
        elif kind == "category":
            arr = _from_buffers(*self.dictionary).take(_arrow_ints(self.ints[spec["values"]][lo:hi]))
        else:
            arr = self.text.slice(lo, hi - lo)
        if k1 > k0:
            import pyarrow.compute as pc  # (25 ms to import: where needed)
            arr = pc.replace_with_mask(arr, _arrow_mask(skip), self.exc.slice(k0, k1 - k0))
        return arr

    def program(self, tfields: list[list[int]], entries: list[bytes], quote: bool, scan: bool,
                delim: bytes) -> list[int] | None:
        """This column's row of a :func:`_print_rows` program from position 4 on, its kind
        first, for a column without exceptions: a category, or a decimal (not in exponent
        format) or time column whose cells need no scan for quoting; else None (printed as
        fields). A time template's fields (start and end in the template, field kind) and
        its other bytes (position, position + 1, ``_LITERAL`` + the byte) are appended to
        ``tfields``; a category's entries, quoted as they print, to ``entries``."""
        spec, kind = self.spec, self.spec["kind"]
        if self.rows.size or spec.get("format") == "exponent":
            return None
        if kind == "category":
            first = len(entries)
            offs, data = self.dictionary
            for a, b in zip(offs[:-1].tolist(), offs[1:].tolist()):
                x = data[a:b].tobytes()
                if quote or (scan and any(c in x for c in (b'"', delim, b"\r", b"\n"))):
                    x = b'"' + x.replace(b'"', b'""') + b'"'
                entries.append(x)
            return [_CATEGORY, first, max(map(len, entries[first:]), default=0)]
        if scan or kind not in ("decimal", "time"):
            return None
        if kind == "decimal":
            scale, lead, width = _decimal_format(spec)
            how = {"fixed": 0, "trim": 1}.get(spec["format"], 2)
            least = min(max(int(spec["min_decimals"]), 0), _MAX_DIGITS + 1) if how == 1 else 0
            return [_DECIMAL, scale, how, least, lead, width]
        template, fields = _time_format(spec)
        _, arr, has_date, has_time, n_time, fdig = _time_args(fields, template)
        first = len(tfields)
        tfields += arr.tolist()
        digit = np.zeros(len(template), np.bool_)
        for a, e, _ in fields:
            digit[a:e] = True
        tfields += [[i, i + 1, _LITERAL + c] for i, c in enumerate(template) if not digit[i]]
        return [_TIME, len(template), first, len(tfields), int(has_date), int(has_time), n_time,
                fdig]


# a column's program for _print_rows: one int64 row of _PROG_WIDTH, [kind, source row, quote_all,
# scan, ...] then by kind: _DECIMAL [scale, how (0 fixed, 1 trim, 2 per cell), least decimals or
# row of per-cell decimals, lead, width]; _TIME [width, first and end row of its fields,
# has_date, has_time, n_time, fdig]; _CATEGORY [first entry, longest entry]
_FIELD, _DECIMAL, _TIME, _CATEGORY = 0, 1, 2, 3  # printed fields, values, times, codes
_PROG_WIDTH = 12
_LITERAL = 256  # a time template's row of fields with a kind from here: a byte (kind - 256)


@njit(cache=True)
def _print_rows(n, prog, vals, decs, tfields, eoffs, edata, offs, d, delim,
                eol):  # pragma: no cover - compiled
    """CSV rows printed from their columns in one pass: (row offsets int64 (n + 1,), bytes uint8).

    ``n`` rows; column ``j`` is described by ``prog[j]`` (int64, ``_PROG_WIDTH`` wide): its
    kind, and for ``_FIELD`` the row of ``offs`` (int64 of shape (k, n + 1)) holding the
    offsets of its printed fields into ``d`` (uint8); for ``_DECIMAL`` and ``_TIME`` the row of
    ``vals`` (int64 of shape (m, n)) holding its values, and how they print (decimals: as
    ``_print_decimals``, from a row of ``decs`` for per-cell decimals; times: as
    ``_time_print_all``, a template's fields and other bytes in rows of ``tfields``); for
    ``_CATEGORY`` the row of ``vals`` holding its codes, each the index of an entry (after the
    column's first, ``prog[j, 4]``; the longest is ``prog[j, 5]`` bytes) of ``eoffs`` (int64)
    into ``edata`` (uint8): the category as printed, quoted where needed. A field is
    quoted when its column's quote_all is set or, for columns with scan set, it holds the
    delimiter, a quote, CR or LF (RFC 4180); quotes inside are doubled.

    The printing is written out in the loop, not in helper functions: a helper that takes
    arrays costs about three times as much per cell, in numba.

    Raises
    ------
    ValueError
        A decimal value or its decimals out of range, a time value that does not fit its
        template (corrupt parts).
    """
    ncol = prog.shape[0]
    p10 = np.ones(19, np.int64)
    for k in range(1, 19):
        p10[k] = p10[k - 1] * 10
    bound = n * (ncol - 1 + eol.size)  # every field's longest print, quoted
    for j in range(ncol):
        kind = prog[j, 0]
        if kind == _FIELD:
            o = offs[prog[j, 1]]
            bound += 2 * (o[n] - o[0]) + 2 * n
        elif kind == _DECIMAL:
            bound += n * (24 + max(prog[j, 7], prog[j, 8]))
        elif kind == _TIME:
            bound += n * (2 + prog[j, 4])
        else:
            bound += n * prog[j, 5]
    out = np.empty(bound, np.uint8)
    row_off = np.empty(n + 1, np.int64)
    g = np.zeros(7, np.int64)
    pairs = np.empty(200, np.uint8)  # "00" to "99"
    for k in range(100):
        pairs[2 * k] = 48 + k // 10
        pairs[2 * k + 1] = 48 + k % 10
    p = 0
    for i in range(n):
        row_off[i] = p
        for j in range(ncol):
            kind = prog[j, 0]
            src = prog[j, 1]
            quote = prog[j, 2] != 0
            if kind == _FIELD:
                a = offs[src, i]
                e = offs[src, i + 1]
                if not quote and prog[j, 3] != 0:
                    for t in range(a, e):
                        c = d[t]
                        if c == 34 or c == delim or c == 10 or c == 13:
                            quote = True
                            break
                if quote:
                    out[p] = 34
                    p += 1
                    for t in range(a, e):
                        out[p] = d[t]
                        p += 1
                        if d[t] == 34:
                            out[p] = 34
                            p += 1
                    out[p] = 34
                    p += 1
                else:
                    for t in range(a, e):
                        out[p] = d[t]
                        p += 1
            elif kind == _CATEGORY:
                c = prog[j, 4] + vals[src, i]
                for t in range(eoffs[c], eoffs[c + 1]):
                    out[p] = edata[t]
                    p += 1
            elif kind == _DECIMAL:
                if quote:
                    out[p] = 34
                    p += 1
                v = vals[src, i]
                scale = prog[j, 4]
                how = prog[j, 5]
                q = -v if v < 0 else v
                if how == 0:  # fixed
                    dec = scale
                elif how == 1:  # trim: the decimals v needs, at least prog[j, 6]
                    dec = scale
                    while dec > 0 and q % 10 == 0:
                        q //= 10
                        dec -= 1
                    dec = max(dec, prog[j, 6])
                    q = -v if v < 0 else v
                else:  # per cell
                    dec = decs[prog[j, 6], i]
                if v == -9223372036854775807 - 1 or dec < 0 or dec > scale:
                    raise ValueError("corrupt CSV parts: a decimal value out of range")
                uq = np.uint64(q)  # (unsigned: no floor-division fix-ups)
                if dec < scale:
                    uq //= np.uint64(p10[scale - dec])
                nd = 1  # digits: those of uq, and at least one before the point
                while nd < 19 and uq >= np.uint64(p10[nd]):
                    nd += 1
                nd = max(nd, dec + 1)
                size = nd + (1 if dec > 0 else 0) + (1 if v < 0 else 0)
                width = prog[j, 8]
                pad = prog[j, 7] if width == 0 else max(0, width - size)
                for _ in range(pad):
                    out[p] = 32
                    p += 1
                if v < 0:
                    out[p] = 45
                p += size
                e = p
                w = dec  # the decimals, then the point, then the digits before it
                for part in range(2):
                    while w >= 2:  # two digits at a time
                        r = 2 * (uq % np.uint64(100))
                        uq //= np.uint64(100)
                        e -= 2
                        out[e] = pairs[r]
                        out[e + 1] = pairs[r + 1]
                        w -= 2
                    if w:
                        e -= 1
                        out[e] = 48 + uq % np.uint64(10)
                        uq //= np.uint64(10)
                    if part == 0 and dec > 0:
                        e -= 1
                        out[e] = 46
                    w = nd - dec
                if quote:
                    out[p] = 34
                    p += 1
            else:
                if quote:
                    out[p] = 34
                    p += 1
                # _time_decompose, then _time_write's work
                _time_decompose(vals[src, i], g, prog[j, 7] != 0, prog[j, 8] != 0, prog[j, 9],
                                prog[j, 10])
                for f in range(prog[j, 5], prog[j, 6]):
                    kf = tfields[f, 2]
                    if kf >= _LITERAL:  # a byte of the template between the fields
                        out[p + tfields[f, 0]] = kf - _LITERAL
                        continue
                    x = g[kf]
                    if x < 0:
                        raise ValueError("corrupt CSV parts: a time value does not fit its template")
                    ux = np.uint64(x)
                    e = p + tfields[f, 1]
                    w = tfields[f, 1] - tfields[f, 0]
                    while w >= 2:  # two digits at a time
                        r = 2 * (ux % np.uint64(100))
                        ux //= np.uint64(100)
                        e -= 2
                        out[e] = pairs[r]
                        out[e + 1] = pairs[r + 1]
                        w -= 2
                    if w:
                        out[e - 1] = 48 + ux % np.uint64(10)
                        ux //= np.uint64(10)
                    if ux != 0:
                        raise ValueError("corrupt CSV parts: a time value does not fit its template")
                p += prog[j, 4]
                if quote:
                    out[p] = 34
                    p += 1
            if j < ncol - 1:
                out[p] = delim
                p += 1
            else:
                for t in range(eol.size):
                    out[p] = eol[t]
                    p += 1
    row_off[n] = p
    return row_off, out[:p]


def _stack_fields(cols: list[pa.Array], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of fields (binary arrays of length ``n``) as ``_print_rows`` takes them: int64
    offsets of shape (ncol, n + 1) into one uint8 array holding every column's bytes."""
    bufs = [_binary_buffers(c) for c in cols]
    offs = np.empty((len(bufs), n + 1), np.int64)
    base = 0
    for j, (o, d) in enumerate(bufs):
        np.add(o, base, out=offs[j], casting="unsafe")
        base += d.size
    data = np.concatenate([d for _, d in bufs]) if bufs else np.zeros(0, np.uint8)
    return offs, data  # one writable array: one signature


# ----------------------------------------------------------------------------------------------
# encode / decode


_CHUNK_BYTES = 1 << 20  # printed text per piece: small enough to stay in cache (faster than 8 MB,
# and the columns' printed fields, their offsets and the rows of a piece held at once are 1/8)


def _iter_body(layout: dict, ints: list[np.ndarray], blobs: list[bytes]) -> Iterator[bytes]:
    """The body, in pieces of about ``_CHUNK_BYTES``: rows printed, replaced rows and inserted
    lines put in."""
    eol = np.frombuffer(_b(layout["eol"]), np.uint8)
    n = int(layout["n_rows"])
    delim = _b(layout["delimiter"])
    specs = layout["columns"]
    if len(delim) != 1 or len(specs) != len(layout["quote"]) or not specs:
        raise ValueError("corrupt CSV parts: delimiter, quoting or columns")
    printers = [_ColumnPrinter(c, ints, blobs, n) for c in specs]
    quote_all = [q == "all" for q in layout["quote"]]
    # fields printed here hold no delimiter, quote or line break: no need to look
    scan = [not (c["kind"] in ("decimal", "time") and not c.get("n_exceptions")
                 and not any(ch in c.get("template", "") for ch in '"\r\n' + layout["delimiter"]))
            for c in specs]
    # the program of _print_rows: decimal and time columns printed by it, the others as fields
    prog = np.zeros((len(specs), _PROG_WIDTH), np.int64)
    tfields: list[list[int]] = []
    entries: list[bytes] = []
    as_fields: list[_ColumnPrinter] = []
    as_values: list[np.ndarray] = []
    cell_decs: list[np.ndarray] = []
    for j, pr in enumerate(printers):
        row = pr.program(tfields, entries, quote_all[j], scan[j], delim)
        if row is None:
            prog[j, :2] = _FIELD, len(as_fields)
            as_fields.append(pr)
        else:
            prog[j, 0], prog[j, 1], prog[j, 4:3 + len(row)] = row[0], len(as_values), row[1:]
            as_values.append(ints[pr.spec["values"]])
            if row[0] == _DECIMAL and pr.cell_dec is not None:
                prog[j, 6] = len(cell_decs)
                cell_decs.append(pr.cell_dec)
        prog[j, 2:4] = quote_all[j], scan[j]
    tfields_a = np.array(tfields, np.int64).reshape(-1, 3)
    entry_offs = np.zeros(len(entries) + 1, np.int64)
    np.cumsum([len(x) for x in entries], out=entry_offs[1:])
    entry_data = np.frombuffer(b"".join(entries), np.uint8).copy()  # (writable: one signature)
    rep_rows = np.zeros(0, np.int64)
    if layout.get("replaced"):
        rep_rows = ints[layout["replaced"]["rows"]]
        _check_rows(rep_rows, n, "replaced")
        rep_text = _unpack(blobs[layout["replaced"]["text"]])
        if len(rep_text) != rep_rows.size:
            raise ValueError("corrupt CSV parts: replaced row count")
    ins_pos = np.zeros(0, np.int64)
    if layout.get("inserted"):
        ins_pos = np.frombuffer(blobs[layout["inserted"]["pos"]], np.int64)
        ins_text = _unpack(blobs[layout["inserted"]["text"]])
        if ins_pos.size != len(ins_text) or (ins_pos.size and (
                ins_pos[0] < 0 or ins_pos[-1] > n or (np.diff(ins_pos) < 0).any())):
            raise ValueError("corrupt CSV parts: inserted lines out of range or order")
    # rows per piece, from the first rows' printed length; a category entry of megabytes (a
    # long text cell) caps them: the printer sizes its buffer by each column's longest entry
    cap = max(1, (64 << 20) // max(max((len(x) for x in entries), default=1), 1))
    step = min(4096, cap)
    lo = 0
    while True:
        hi = min(n, lo + step)
        if hi > lo:
            vals = np.empty((len(as_values), hi - lo), np.int64)
            for k, v in enumerate(as_values):
                vals[k] = v[lo:hi]
            decs = np.empty((len(cell_decs), hi - lo), np.int64)
            for k, v in enumerate(cell_decs):
                decs[k] = v[lo:hi]
            offs, data = _stack_fields([p(lo, hi) for p in as_fields], hi - lo)
            row_off, out = _print_rows(hi - lo, prog, vals, decs, tfields_a, entry_offs,
                                       entry_data, offs, data, delim[0], eol)
        else:
            row_off, out = np.zeros(1, np.int64), np.zeros(0, np.uint8)
        r0, r1 = np.searchsorted(rep_rows, [lo, hi])
        last = hi >= n
        i0, i1 = np.searchsorted(ins_pos, [lo, hi], side="left")
        if last:
            i1 = ins_pos.size
        if r1 == r0 and i1 == i0:
            yield out.tobytes()
        else:
            rows = _from_buffers(row_off, out)
            if r1 > r0:
                mask = np.zeros(hi - lo, np.bool_)
                mask[rep_rows[r0:r1] - lo] = True
                import pyarrow.compute as pc  # (25 ms to import: where needed)
                rows = pc.replace_with_mask(rows, _arrow_mask(mask), rep_text.slice(r0, r1 - r0))
            if i1 > i0:
                # a line inserted at position p goes before row p: sort keys 2p (lines), 2r + 1 (rows)
                keys = np.concatenate([np.arange(lo, hi, dtype=np.int64) * 2 + 1, ins_pos[i0:i1] * 2])
                order = np.argsort(keys, kind="stable")
                rows = pa.concat_arrays([rows, ins_text.slice(i0, i1 - i0)]).take(_arrow_ints(order))
            yield _binary_buffers(rows)[1].tobytes()
        if last:
            return
        if hi > lo and step < 1 << 20:
            step = min(cap, int(min(1 << 20, max(4096, _CHUNK_BYTES * (hi - lo) // max(1, out.size)))))
        lo = hi


def _iter_file(parts: CsvParts) -> Iterator[bytes]:
    """The file, in pieces: BOM, lines above the header, header, body (last line ending dropped
    when the file had none)."""
    lay = parts.layout
    if not isinstance(lay, dict) or lay.get("format") != "ubpe-csv" or lay.get("version") != LAYOUT_VERSION:
        raise ValueError("corrupt CSV parts: not a ubpe-csv layout of version 1")
    if lay["kind"] == "raw":
        if len(parts.blobs) != 1:
            raise ValueError("corrupt CSV parts: a raw layout holds one blob")
        yield bytes(parts.blobs[0])
        return
    ints = [np.asarray(c, np.int64) for _, c in parts.int_columns]
    head = b"".join([BOM if lay["bom"] else b""] + [_b(x) for x in lay["preamble"]]
                    + ([_b(lay["header"])] if lay["header"] is not None else []))
    held = head
    for piece in _iter_body(lay, ints, parts.blobs):
        if piece:
            if held:
                yield held
            held = piece
    if not lay["final_newline"]:
        eol = _b(lay["eol"])
        if not held.endswith(eol):
            raise ValueError("corrupt CSV parts: no final line ending to drop")
        held = held[:-len(eol)]
    if held:
        yield held


def _split_rows(body: bytes, eol: str) -> list[bytes]:
    """The body's rows, each with its line ending (quote-aware)."""
    buf = np.frombuffer(body, np.uint8)
    end_byte = 13 if eol == "\r" else 10
    ends = np.flatnonzero(buf == end_byte)
    if b'"' in body:
        parity = np.cumsum(buf == 34, dtype=np.int64)
        ends = ends[parity[ends] % 2 == 0]
    starts = np.concatenate([[0], ends[:-1] + 1]) if ends.size else np.zeros(0, np.int64)
    return [body[a:e + 1] for a, e in zip(starts.tolist(), ends.tolist())]


def _raw_parts(data: bytes, reason: str) -> CsvParts:
    return CsvParts({"format": "ubpe-csv", "version": LAYOUT_VERSION, "kind": "raw", "reason": reason},
                    [], [data])


def encode_csv(data: bytes, *, skip_rows: int | None = None, comment: str | None = None,
               delimiter: str | None = None, columns: list[str | int] | None = None,
               exclude: list[str | int] | None = None, path: str = "<bytes>",
               first_line: int = 1) -> CsvParts:
    """Split a CSV file into a layout, int64 columns and blobs, exactly.

    Parameters
    ----------
    data : bytes
        The whole CSV file.
    skip_rows, comment, delimiter
        As for ``sniff``: default detected.
    columns : list of str or int, optional
        Columns (header names or 0-based indices) to code as numbers or
        timestamps; the others are kept as categories or text. Default: every
        column that reads as numbers or timestamps.
    exclude : list of str or int, optional
        Columns never coded as numbers or timestamps.
    path : str
        Named in error messages.
    first_line : int
        As for ``sniff``: the line numbers of error messages.

    Returns
    -------
    CsvParts
        ``decode_csv(parts) == data``, checked before returning, piece by
        piece. ``int_columns`` are named after the header: ``<name>`` for a
        column's values (int64, shape (n_rows,)), ``<name>#decimals`` for
        per-cell decimals (format ``digits``), ``<name>#exception_rows`` for
        the rows of its exception cells (ascending), ``#replaced_rows`` for rows
        kept whole (quoting or a line ending that would not print back). A file
        that is not a table (empty, only comments), or whose rows mostly would
        not print back, is kept whole (layout ``kind`` ``raw``, one blob).

    Raises
    ------
    CsvError
        On a ragged row (a row with another number of fields than the header;
        the message names the line), an unknown column in ``columns`` or
        ``exclude``, or a ``delimiter`` or ``comment`` that is not one
        character (other than a quote or line break).

    Notes
    -----
    A decimal column's scale is the most digits after the point among its
    cells; exponent forms (``1.5e-05``) are scaled the same way. Values are
    exact integers, not floats, as in ALP's decimal encoding (Afroozeh et al.,
    "ALP: Adaptive Lossless floating-Point Compression", SIGMOD 2024), with
    exceptions kept verbatim. Dates are counted in days with the civil-calendar
    algorithms of H. Hinnant (https://howardhinnant.github.io/date_algorithms.html).
    """
    check_dialect(delimiter, comment, path)  # (a bad option is an error, not a raw file)
    rest = data.removeprefix(BOM)
    if not rest[:4096].strip() and not rest.strip():
        return _raw_parts(data, "empty")
    try:
        s = sniff(data, skip_rows=skip_rows, comment=comment, delimiter=delimiter, path=path,
                  first_line=first_line)
    except CsvError as e:  # no table in it (only comments, or every line skipped)
        return _raw_parts(data, str(e))
    cols = parse_table(s, path, threads=False)  # its memory matters more here than its speed
    width = len(s.names)
    numeric = [True] * width
    if columns:
        wanted = set(resolve_columns(columns, s.names, path, "column"))
        numeric = [j in wanted for j in range(width)]
    for j in resolve_columns(exclude or [], s.names, path, "excluded column"):
        numeric[j] = False
    n = len(cols[0]) if cols else 0
    b = _Builder()
    layout: dict[str, Any] = {
        "format": "ubpe-csv", "version": LAYOUT_VERSION, "kind": "table",
        "bom": s.bom, "eol": s.eol, "final_newline": s.final_newline,
        "preamble": [_s(x) for x in s.preamble],
        "header": None if s.header is None else _s(s.header),
        "delimiter": s.delimiter, "quote": _quote_modes(s), "n_rows": n, "columns": []}
    taken: set[str] = set()
    for j, name in enumerate(s.names):
        col, cols[j] = cols[j], None  # free each column's text once it is coded
        key = name if name and name not in taken else f"{name}#{j}"
        taken.add(key)
        spec = _code_column(b, key, col, numeric[j])
        del col
        layout["columns"].append({"name": name, **spec})
    if s.inserted:
        layout["inserted"] = {"pos": b.blob(np.array([p for p, _ in s.inserted], np.int64).tobytes()),
                              "text": b.blob(_pack([ln for _, ln in s.inserted]))}
    parts = CsvParts(layout, b.int_columns, b.blobs)
    try:
        if _same(parts, data):
            return parts
    except (ValueError, pa.ArrowException) as e:  # pragma: no cover - a bug guard
        return _raw_parts(data, f"layout failed to decode ({e})")
    # rows that do not print back: keep them whole
    body = s.body
    orig = _split_rows(body, s.eol)
    mine = _split_rows(_body_of(parts), s.eol)
    if len(orig) != n or len(mine) != n:
        return _raw_parts(data, "rows could not be matched")
    bad = [r for r in range(n) if orig[r] != mine[r]]
    if len(bad) > max(16, n // 10):
        return _raw_parts(data, f"{len(bad)} of {n} rows do not print back")
    layout["replaced"] = {"rows": b.col("#replaced_rows", np.array(bad, np.int64)),
                          "text": b.blob(_pack([orig[r] for r in bad]))}
    parts = CsvParts(layout, b.int_columns, b.blobs)
    if not _same(parts, data):  # pragma: no cover - a bug guard
        return _raw_parts(data, "verification failed")
    return parts


def _same(parts: CsvParts, data: bytes) -> bool:
    """Whether the parts decode to ``data``, compared piece by piece."""
    pos = 0
    for piece in _iter_file(parts):
        end = pos + len(piece)
        if end > len(data) or data[pos:end] != piece:  # a slice and memcmp: faster than memoryview's compare
            return False
        pos = end
    return pos == len(data)


def _body_of(parts: CsvParts) -> bytes:
    lay = dict(parts.layout)
    lay.pop("inserted", None)
    lay.pop("replaced", None)
    ints = [c for _, c in parts.int_columns]
    return b"".join(_iter_body(lay, ints, parts.blobs))


def decode_csv(parts: CsvParts) -> bytes:
    """Rebuild the CSV file from its parts.

    Parameters
    ----------
    parts : CsvParts
        As made by ``encode_csv`` (or read back from a container).

    Returns
    -------
    bytes
        The original file, byte for byte.

    Raises
    ------
    ValueError
        If the parts are inconsistent (a count, index or code out of range):
        corrupt input, never a silently wrong file.
    """
    try:
        return _decode(parts)
    except (pa.ArrowException, KeyError, TypeError, IndexError, AttributeError, OverflowError) as e:
        raise ValueError(f"corrupt CSV parts: {type(e).__name__}: {e}") from None


def decode_csv_pieces(parts: CsvParts) -> list[bytes]:
    """The file of :func:`decode_csv` in pieces of about 1 MB (their concatenation), without
    the copy that joins them.

    Raises
    ------
    ValueError
        As :func:`decode_csv`.
    """
    try:
        return list(_iter_file(parts))
    except (pa.ArrowException, KeyError, TypeError, IndexError, AttributeError, OverflowError) as e:
        raise ValueError(f"corrupt CSV parts: {type(e).__name__}: {e}") from None


def _decode(parts: CsvParts) -> bytes:
    return b"".join(_iter_file(parts))


def resolve_columns(spec: list[str | int], names: list[str], path: str, what: str) -> list[int]:
    """Map column names or 0-based indices (ints or digit strings) to indices.

    Parameters
    ----------
    spec : list of str or int
        Header names (matched after stripping spaces) or 0-based indices.
    names : list of str
        The file's column names.
    path, what : str
        Named in error messages (``what``: "column", "excluded column", ...).

    Returns
    -------
    list of int

    Raises
    ------
    CsvError
        For a name not in ``names`` or an index out of range.
    """
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
            raise CsvError(f"{path}: no column named {item!r} (columns: {', '.join(names)})")
    return out


def dumps_layout(layout: dict) -> bytes:
    """The layout as compact ASCII JSON bytes (for a container section).

    Parameters
    ----------
    layout : dict
        ``CsvParts.layout``.

    Returns
    -------
    bytes
        ``json.loads`` gives the layout back; strings that held bytes not valid
        in UTF-8 travel as ``\\udcXX`` escapes (Python's surrogateescape).
    """
    return json.dumps(layout, separators=(",", ":"), ensure_ascii=True).encode()
