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

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import regex

from ._jit import njit

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
    by the ``regex`` version, with a SHA-256 of the tables: a cache file that
    is unreadable, damaged or of another layout is rebuilt; an unwritable
    cache directory is not an error.
    """
    global _TABLES
    if _TABLES is None:
        path = _cache_dir() / f"unicode-tables-regex-{regex.__version__}-v2.npz"
        try:
            with np.load(path, allow_pickle=False) as z:
                flags, fold, digest = z["flags"], z["fold"], str(z["sha256"])
            if flags.shape != (0x110000,) or flags.dtype != np.uint8 or fold.dtype != np.uint8 \
                    or fold.ndim != 1 or _digest(flags, fold) != digest:
                raise ValueError("damaged tables")
            _TABLES = (flags, fold)
        except Exception:  # noqa: BLE001 (any damage of a cache file: rebuild it)
            _TABLES = _build_tables()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz",
                                                 delete=False) as f:
                    np.savez(f, flags=_TABLES[0], fold=_TABLES[1],
                             sha256=np.array(_digest(*_TABLES)))
                try:
                    os.replace(f.name, path)
                except OSError:  # (a folder in the way, say: leave no temporary file behind)
                    os.unlink(f.name)
            except OSError:
                pass
    return _TABLES


def _digest(flags: np.ndarray, fold: np.ndarray) -> str:
    return hashlib.sha256(flags.tobytes() + b"|" + fold.tobytes()).hexdigest()


# ------------------------------------------------------------------ kernels
# The scanners walk the UTF-8 bytes themselves: positions are byte offsets of
# character starts, a character is decoded where its class is needed, and
# stepping back skips continuation bytes. CR, LF and "/" are ASCII, and ASCII
# bytes never occur inside a multi-byte character, so they are tested on bytes.

@njit(cache=True)
def _cp(buf, i):
    """The code point starting at byte ``i`` (valid UTF-8)."""
    b = np.int32(buf[i])
    if b < 0x80:
        return b
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int32(buf[i + 1]) & 0x3F)
    if b < 0xF0:
        return (((b & 0x0F) << 12) | ((np.int32(buf[i + 1]) & 0x3F) << 6)
                | (np.int32(buf[i + 2]) & 0x3F))
    return (((b & 0x07) << 18) | ((np.int32(buf[i + 1]) & 0x3F) << 12)
            | ((np.int32(buf[i + 2]) & 0x3F) << 6) | (np.int32(buf[i + 3]) & 0x3F))


@njit(cache=True)
def _len(buf, i):
    """Bytes of the character starting at ``i``."""
    b = buf[i]
    if b < 0x80:
        return 1
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 3
    return 4


@njit(cache=True)
def _prev(buf, i):
    """Start of the character that ends right before byte ``i``."""
    i -= 1
    while (buf[i] & 0xC0) == 0x80:
        i -= 1
    return i


@njit(cache=True)
def _fl(buf, i, flags):
    """Class flags of the character at ``i``."""
    b = buf[i]
    if b < 0x80:
        return flags[b]
    return flags[_cp(buf, i)]


@njit(cache=True)
def _is(fold, c, k, folded):
    """Whether code point ``c`` is letter ``k`` of "sdmtlver" (case-folded or lower ASCII)."""
    if folded:
        return c < fold.shape[0] and (fold[c] >> k) & 1 == 1
    return c == ord("sdmtlver"[k])


@njit(cache=True)
def _contraction(buf, n, i, fold, folded):
    """Bytes of ``'s 'd 'm 't 'll 've 're`` at ``i`` (``buf[i]`` is an apostrophe), or 0."""
    j = i + 1
    if j >= n:
        return 0
    c1 = _cp(buf, j)
    j += _len(buf, j)
    if (_is(fold, c1, 0, folded) or _is(fold, c1, 1, folded) or _is(fold, c1, 2, folded)
            or _is(fold, c1, 3, folded)):
        return j - i
    if j >= n:
        return 0
    c2 = _cp(buf, j)
    if ((_is(fold, c1, 4, folded) and _is(fold, c2, 4, folded))
            or (_is(fold, c1, 5, folded) and _is(fold, c2, 6, folded))
            or (_is(fold, c1, 7, folded) and _is(fold, c2, 6, folded))):
        return j + _len(buf, j) - i
    return 0


@njit(cache=True)
def _run(buf, n, i, flags, bits):
    """End of the run of characters from ``i`` having any of ``bits``."""
    while i < n:
        b = buf[i]
        if b < 0x80:
            if flags[b] & bits:
                i += 1
                continue
            return i
        if flags[_cp(buf, i)] & bits:
            i += _len(buf, i)
        else:
            return i
    return i


@njit(cache=True)
def _run_other(buf, n, i, flags):
    r"""End of the run from ``i`` of ``[^\s\p{L}\p{N}]``."""
    while i < n and _fl(buf, i, flags) & 7 == 0:
        i += _len(buf, i)
    return i


@njit(cache=True)
def _run_breaks(buf, n, i, slash):
    r"""End of the run from ``i`` of ``[\r\n]`` (or ``[\r\n/]``)."""
    while i < n and (buf[i] == 10 or buf[i] == 13 or (slash and buf[i] == 47)):
        i += 1
    return i


@njit(cache=True)
def _space_tail(buf, n, i, flags, dollar):
    r"""Whitespace at ``i``: ``\s++$`` (if ``dollar``), ``\s*[\r\n]+``, ``\s+(?!\S)``, ``\s+``."""
    j = _run(buf, n, i, flags, 4)
    if j == n and dollar:
        return n
    k = j - 1
    while k >= i:
        if buf[k] == 10 or buf[k] == 13:
            return k + 1
        k -= 1
    if j == n:
        return n
    last = _prev(buf, j)
    if last > i:  # two characters or more: all but the last
        return last
    return j


@njit(cache=True)
def _next_gpt2(buf, n, i, flags, fold):
    c = buf[i]
    f = _fl(buf, i, flags)
    if c == 39:
        k = _contraction(buf, n, i, fold, False)
        if k:
            return i + k
    if c == 32 and i + 1 < n:
        f1 = _fl(buf, i + 1, flags)
        if f1 & 1:
            return _run(buf, n, i + 1, flags, 1)
        if f1 & 2:
            return _run(buf, n, i + 1, flags, 2)
        if f1 & 7 == 0:
            return _run_other(buf, n, i + 1, flags)
    if f & 1:
        return _run(buf, n, i, flags, 1)
    if f & 2:
        return _run(buf, n, i, flags, 2)
    if f & 4 == 0:
        return _run_other(buf, n, i, flags)
    # \s++$ | \s+(?!\S) | \s
    j = _run(buf, n, i, flags, 4)
    if j == n:
        return n
    last = _prev(buf, j)
    if last > i:
        return last
    return j


@njit(cache=True)
def _digits(buf, n, i, flags):
    r"""``\p{N}{1,3}`` at ``i`` (a number character)."""
    j = i + _len(buf, i)
    for _ in range(2):
        if j < n and _fl(buf, j, flags) & 2:
            j += _len(buf, j)
        else:
            break
    return j


@njit(cache=True)
def _next_cl100k(buf, n, i, flags, fold, llama3):
    c = buf[i]
    f = _fl(buf, i, flags)
    if c == 39:
        k = _contraction(buf, n, i, fold, True)
        if k:
            return i + k
    # [^\r\n\p{L}\p{N}]?+\p{L}++  (llama3: the same without possessives)
    if f & 1:
        return _run(buf, n, i, flags, 1)
    if c != 10 and c != 13 and f & 2 == 0:
        j = i + _len(buf, i)
        if j < n and _fl(buf, j, flags) & 1:
            return _run(buf, n, j, flags, 1)
    if f & 2:
        return _digits(buf, n, i, flags)
    # ' ?[^\s\p{L}\p{N}]++[\r\n]*+'
    if c == 32 and i + 1 < n and _fl(buf, i + 1, flags) & 7 == 0:
        return _run_breaks(buf, n, _run_other(buf, n, i + 1, flags), False)
    if f & 7 == 0:
        return _run_breaks(buf, n, _run_other(buf, n, i, flags), False)
    return _space_tail(buf, n, i, flags, not llama3)


@njit(cache=True)
def _o200k_words(buf, n, s, flags, first):
    """End of ``[UPPERISH]*[LOWERISH]+`` (first) or ``[UPPERISH]+[LOWERISH]*`` at ``s``, or -1."""
    u = _run(buf, n, s, flags, 8)
    if first:
        if u < n and _fl(buf, u, flags) & 16:
            return _run(buf, n, u, flags, 16)
        k = u
        while k > s:
            k = _prev(buf, k)
            if _fl(buf, k, flags) & 16:
                return k + _len(buf, k)
        return -1
    if u == s:
        return -1
    return _run(buf, n, u, flags, 16)


@njit(cache=True)
def _o200k_suffix(buf, n, e, fold):
    """``e`` plus the optional contraction ``(?i:'s|'t|'re|'ve|'m|'ll|'d)`` at ``e``."""
    if e < n and buf[e] == 39:
        e += _contraction(buf, n, e, fold, True)
    return e


@njit(cache=True)
def _next_o200k(buf, n, i, flags, fold):
    c = buf[i]
    f = _fl(buf, i, flags)
    # the two word alternatives, each with the optional [^\r\n\p{L}\p{N}] prefix
    # tried first (greedy), then without it
    prefix = c != 10 and c != 13 and f & 3 == 0
    after = i + _len(buf, i)
    if prefix and after < n:
        e = _o200k_words(buf, n, after, flags, True)
        if e >= 0:
            return _o200k_suffix(buf, n, e, fold)
    if f & 24:  # a word can start here only with an UPPERISH or LOWERISH character
        e = _o200k_words(buf, n, i, flags, True)
        if e >= 0:
            return _o200k_suffix(buf, n, e, fold)
    if prefix and after < n:
        e = _o200k_words(buf, n, after, flags, False)
        if e >= 0:
            return _o200k_suffix(buf, n, e, fold)
    if f & 8:
        e = _o200k_words(buf, n, i, flags, False)
        if e >= 0:
            return _o200k_suffix(buf, n, e, fold)
    if f & 2:
        return _digits(buf, n, i, flags)
    if c == 32 and i + 1 < n and _fl(buf, i + 1, flags) & 7 == 0:
        return _run_breaks(buf, n, _run_other(buf, n, i + 1, flags), True)
    if f & 7 == 0:
        return _run_breaks(buf, n, _run_other(buf, n, i, flags), True)
    return _space_tail(buf, n, i, flags, False)


@njit(cache=True)
def split_utf8(buf, flags, fold, kind):
    """Pre-token boundaries of UTF-8 ``buf`` under pattern ``kind`` (see :data:`KINDS`).

    Returns the byte offsets, int64 (n_pieces + 1,), from 0 to ``len(buf)``.
    """
    n = buf.shape[0]
    bounds = np.empty(n // 4 + 16, np.int64)  # grown as needed: text has ~4 bytes per piece
    bounds[0] = 0
    m = 1
    i = 0
    while i < n:
        if m == bounds.shape[0]:
            grown = np.empty(min(2 * m, n + 1), np.int64)
            grown[:m] = bounds
            bounds = grown
        if kind == 0:
            i = _next_gpt2(buf, n, i, flags, fold)
        elif kind == 1:
            i = _next_cl100k(buf, n, i, flags, fold, False)
        elif kind == 2:
            i = _next_o200k(buf, n, i, flags, fold)
        else:
            i = _next_cl100k(buf, n, i, flags, fold, True)
        bounds[m] = i
        m += 1
    return bounds[:m]


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
