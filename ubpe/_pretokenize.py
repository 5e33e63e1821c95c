"""Compiled pre-tokenizers for the named patterns (numba over UTF-8 bytes).

Each scanner cuts text exactly where Python's ``regex`` cuts it with the
pattern of the same name in :data:`ubpe.text.PATTERNS` (``gpt2``,
``cl100k``, ``o200k``, ``llama3``; the patterns of tiktoken's
``openai_public`` and llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_LLAMA3``). The
property tests in ``tests/test_text_fast.py`` compare them on arbitrary
Unicode.

How a scanner is derived from its pattern: at each position the pattern's
alternatives are tried in order, and for each one the first match that a
backtracking engine finds is worked out in closed form. For example
``\\s+(?!\\S)`` on a whitespace run ``[i, j)`` gives the whole run if it
reaches the end of the text, else the run less its last character if that
leaves one, else nothing; ``\\s*[\\r\\n]`` gives the run up to and including
its last line break. Possessive quantifiers (``++``, ``?+``) only remove
backtracking that could not succeed anyway in these patterns.

Character classes come from a table of flags per code point, built from the
``regex`` module itself (so its Unicode version is the one matched) and kept
on disk under ``~/.cache/ubpe`` (or ``$UBPE_CACHE``) keyed by the ``regex``
version.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import regex
from numba import njit

#: Flag bits of the code point table.
LETTER, NUMBER, SPACE, UPPERISH, LOWERISH = 1, 2, 4, 8, 16
#: Classes of the table, as ``regex`` character classes.
_CLASSES = {LETTER: r"\p{L}", NUMBER: r"\p{N}", SPACE: r"\s",
            UPPERISH: r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
            LOWERISH: r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"}
#: Letters of the contractions, matched case-insensitively by cl100k, o200k, llama3.
_FOLD_LETTERS = "sdmtlver"

#: Pattern names with a compiled scanner, and their kernel numbers.
KINDS = {"gpt2": 0, "cl100k": 1, "o200k": 2, "llama3": 3}

_TABLES: tuple[np.ndarray, np.ndarray] | None = None


def _build_tables() -> tuple[np.ndarray, np.ndarray]:
    """Flags of every code point, and the case-folding table of the contraction letters."""
    cps = np.arange(0x110000, dtype=np.uint32)
    cps[0xD800:0xE000] = 0  # lone surrogates never reach a scanner (no UTF-8 for them)
    text = cps.tobytes().decode("utf-32-le")
    flags = np.zeros(0x110000, np.uint8)
    for bit, cls in _CLASSES.items():
        for m in regex.finditer(cls + "+", text):
            flags[m.start():m.end()] |= bit
    flags[0] = 0
    for bit, cls in _CLASSES.items():  # U+0000 itself
        if regex.fullmatch(cls, "\0"):
            flags[0] |= bit
    fold_cps = {c: [m.start() for m in regex.finditer(f"(?i:{c})", text)]
                for c in _FOLD_LETTERS}
    fold = np.zeros(max(max(v) for v in fold_cps.values()) + 1, np.uint8)
    for k, c in enumerate(_FOLD_LETTERS):
        fold[fold_cps[c]] |= 1 << k
    return flags, fold


def _cache_dir() -> Path:
    return Path(os.environ.get("UBPE_CACHE") or Path.home() / ".cache" / "ubpe")


def unicode_tables() -> tuple[np.ndarray, np.ndarray]:
    """The class flags of every code point and the contraction case-folding table.

    Returns
    -------
    flags : ndarray of shape (0x110000,), uint8
        Bits :data:`LETTER` (``\\p{L}``), :data:`NUMBER` (``\\p{N}``),
        :data:`SPACE` (``\\s``), :data:`UPPERISH` (``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``)
        and :data:`LOWERISH` (``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]``), as the
        installed ``regex`` module reads them.
    fold : ndarray of shape (k,), uint8
        Bit ``j`` of ``fold[c]`` is set when code point ``c`` matches
        ``(?i:x)`` for the ``j``-th letter ``x`` of ``"sdmtlver"`` (so
        U+017F LATIN SMALL LETTER LONG S is an ``s``).

    Built once per process (about 0.3 s), then read from a disk cache keyed
    by the ``regex`` version; an unwritable cache directory is not an error.
    """
    global _TABLES
    if _TABLES is None:
        path = _cache_dir() / f"unicode-tables-regex-{regex.__version__}.npz"
        try:
            with np.load(path) as z:
                _TABLES = (z["flags"], z["fold"])
        except (OSError, KeyError, ValueError):
            _TABLES = _build_tables()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz",
                                                 delete=False) as f:
                    np.savez(f, flags=_TABLES[0], fold=_TABLES[1])
                os.replace(f.name, path)
            except OSError:
                pass
    return _TABLES


# ------------------------------------------------------------------ kernels

@njit(cache=True, nogil=True)
def decode_utf8(buf):
    """Code points of valid UTF-8 and the byte offset of each, plus the end.

    Returns ``cps`` int32 (n,) and ``starts`` int64 (n + 1,).
    """
    nb = buf.shape[0]
    cps = np.empty(nb, np.int32)
    starts = np.empty(nb + 1, np.int64)
    n = 0
    i = 0
    while i < nb:
        b = np.int32(buf[i])
        starts[n] = i
        if b < 0x80:
            cps[n] = b
            i += 1
        elif b < 0xE0:
            cps[n] = ((b & 0x1F) << 6) | (np.int32(buf[i + 1]) & 0x3F)
            i += 2
        elif b < 0xF0:
            cps[n] = (((b & 0x0F) << 12) | ((np.int32(buf[i + 1]) & 0x3F) << 6)
                      | (np.int32(buf[i + 2]) & 0x3F))
            i += 3
        else:
            cps[n] = (((b & 0x07) << 18) | ((np.int32(buf[i + 1]) & 0x3F) << 12)
                      | ((np.int32(buf[i + 2]) & 0x3F) << 6) | (np.int32(buf[i + 3]) & 0x3F))
            i += 4
        n += 1
    starts[n] = nb
    return cps[:n], starts[:n + 1]


@njit(cache=True, inline="always")
def _is(fold, c, k, folded):
    """Whether code point ``c`` is letter ``k`` of "sdmtlver" (case-folded or lower ASCII)."""
    if folded:
        return c < fold.shape[0] and (fold[c] >> k) & 1 == 1
    return c == ord("sdmtlver"[k])


@njit(cache=True, inline="always")
def _contraction(cps, n, i, fold, folded):
    """Length of ``'s 'd 'm 't 'll 've 're`` at ``i`` (``cps[i]`` is an apostrophe), or 0."""
    if i + 1 >= n:
        return 0
    c1 = cps[i + 1]
    if (_is(fold, c1, 0, folded) or _is(fold, c1, 1, folded) or _is(fold, c1, 2, folded)
            or _is(fold, c1, 3, folded)):
        return 2
    if i + 2 >= n:
        return 0
    c2 = cps[i + 2]
    if ((_is(fold, c1, 4, folded) and _is(fold, c2, 4, folded))
            or (_is(fold, c1, 5, folded) and _is(fold, c2, 6, folded))
            or (_is(fold, c1, 7, folded) and _is(fold, c2, 6, folded))):
        return 3
    return 0


@njit(cache=True, inline="always")
def _run(cps, n, i, flags, bits):
    """End of the run of code points from ``i`` having any of ``bits``."""
    while i < n and flags[cps[i]] & bits:
        i += 1
    return i


@njit(cache=True, inline="always")
def _run_other(cps, n, i, flags):
    """End of the run from ``i`` of ``[^\\s\\p{L}\\p{N}]``."""
    while i < n and flags[cps[i]] & 7 == 0:
        i += 1
    return i


@njit(cache=True, inline="always")
def _run_breaks(cps, n, i, slash):
    """End of the run from ``i`` of ``[\\r\\n]`` (or ``[\\r\\n/]``)."""
    while i < n and (cps[i] == 10 or cps[i] == 13 or (slash and cps[i] == 47)):
        i += 1
    return i


@njit(cache=True, inline="always")
def _space_tail(cps, n, i, flags, dollar):
    """Whitespace at ``i``: ``\\s++$`` (if ``dollar``), ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``, ``\\s+``."""
    j = _run(cps, n, i, flags, 4)
    if j == n:
        if dollar:
            return n
    k = j - 1
    while k >= i:
        if cps[k] == 10 or cps[k] == 13:
            return k + 1
        k -= 1
    if j == n:
        return n
    if j - i >= 2:
        return j - 1
    return i + 1


@njit(cache=True, inline="always")
def _next_gpt2(cps, n, i, flags, fold):
    c = cps[i]
    f = flags[c]
    if c == 39:
        k = _contraction(cps, n, i, fold, False)
        if k:
            return i + k
    if c == 32 and i + 1 < n:
        f1 = flags[cps[i + 1]]
        if f1 & 1:
            return _run(cps, n, i + 1, flags, 1)
        if f1 & 2:
            return _run(cps, n, i + 1, flags, 2)
        if f1 & 7 == 0:
            return _run_other(cps, n, i + 1, flags)
    if f & 1:
        return _run(cps, n, i, flags, 1)
    if f & 2:
        return _run(cps, n, i, flags, 2)
    if f & 4 == 0:
        return _run_other(cps, n, i, flags)
    # \s++$ | \s+(?!\S) | \s
    j = _run(cps, n, i, flags, 4)
    if j == n:
        return n
    if j - i >= 2:
        return j - 1
    return i + 1


@njit(cache=True, inline="always")
def _digits(cps, n, i, flags):
    j = i + 1
    while j < n and j < i + 3 and flags[cps[j]] & 2:
        j += 1
    return j


@njit(cache=True, inline="always")
def _next_cl100k(cps, n, i, flags, fold, llama3):
    c = cps[i]
    f = flags[c]
    if c == 39:
        k = _contraction(cps, n, i, fold, True)
        if k:
            return i + k
    # [^\r\n\p{L}\p{N}]?+\p{L}++  (llama3: the same without possessives)
    if f & 1:
        return _run(cps, n, i, flags, 1)
    if c != 10 and c != 13 and f & 2 == 0 and i + 1 < n and flags[cps[i + 1]] & 1:
        return _run(cps, n, i + 1, flags, 1)
    if f & 2:
        return _digits(cps, n, i, flags)
    # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
    if c == 32 and i + 1 < n and flags[cps[i + 1]] & 7 == 0:
        return _run_breaks(cps, n, _run_other(cps, n, i + 1, flags), False)
    if f & 7 == 0:
        return _run_breaks(cps, n, _run_other(cps, n, i, flags), False)
    return _space_tail(cps, n, i, flags, not llama3)


@njit(cache=True, inline="always")
def _o200k_words(cps, n, s, flags, first):
    """End of ``[UPPERISH]*[LOWERISH]+`` (first) or ``[UPPERISH]+[LOWERISH]*`` at ``s``, or -1."""
    u = _run(cps, n, s, flags, 8)
    if first:
        if u < n and flags[cps[u]] & 16:
            return _run(cps, n, u, flags, 16)
        k = u - 1
        while k >= s:
            if flags[cps[k]] & 16:
                return k + 1
            k -= 1
        return -1
    if u == s:
        return -1
    return _run(cps, n, u, flags, 16)


@njit(cache=True, inline="always")
def _next_o200k(cps, n, i, flags, fold):
    c = cps[i]
    f = flags[c]
    prefix = c != 10 and c != 13 and f & 3 == 0  # [^\r\n\p{L}\p{N}]
    for alt in range(2):
        for s in range(i + 1 if prefix else i, i - 1, -1):
            if s >= n:
                continue
            e = _o200k_words(cps, n, s, flags, alt == 0)
            if e >= 0:
                if e < n and cps[e] == 39:
                    e += _contraction(cps, n, e, fold, True)
                return e
    if f & 2:
        return _digits(cps, n, i, flags)
    if c == 32 and i + 1 < n and flags[cps[i + 1]] & 7 == 0:
        return _run_breaks(cps, n, _run_other(cps, n, i + 1, flags), True)
    if f & 7 == 0:
        return _run_breaks(cps, n, _run_other(cps, n, i, flags), True)
    return _space_tail(cps, n, i, flags, False)


@njit(cache=True, nogil=True)
def split_cps(cps, flags, fold, kind):
    """Piece ends (code point indices) of ``cps`` under pattern ``kind`` (see :data:`KINDS`)."""
    n = cps.shape[0]
    ends = np.empty(n, np.int64)
    m = 0
    i = 0
    while i < n:
        if kind == 0:
            i = _next_gpt2(cps, n, i, flags, fold)
        elif kind == 1:
            i = _next_cl100k(cps, n, i, flags, fold, False)
        elif kind == 2:
            i = _next_o200k(cps, n, i, flags, fold)
        else:
            i = _next_cl100k(cps, n, i, flags, fold, True)
        ends[m] = i
        m += 1
    return ends[:m]


@njit(cache=True, nogil=True)
def split_utf8(buf, flags, fold, kind):
    """Piece boundaries of UTF-8 text as byte offsets, int64 (n_pieces + 1,), from 0."""
    cps, starts = decode_utf8(buf)
    ends = split_cps(cps, flags, fold, kind)
    bounds = np.empty(ends.shape[0] + 1, np.int64)
    bounds[0] = 0
    for k in range(ends.shape[0]):
        bounds[k + 1] = starts[ends[k]]
    return bounds


def split(text: str, kind: str) -> list[str]:
    """Pre-tokens of ``text`` under the named pattern ``kind`` (for tests and counting).

    Raises
    ------
    KeyError
        If ``kind`` has no compiled scanner.
    UnicodeEncodeError
        If ``text`` holds a lone surrogate (it has no UTF-8 form).
    """
    flags, fold = unicode_tables()
    data = text.encode("utf-8")
    bounds = split_utf8(np.frombuffer(data, np.uint8), flags, fold, KINDS[kind]).tolist()
    return [data[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:])]
