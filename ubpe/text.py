"""Byte-level BPE for text, on the UBPE core (UTF-8 bytes as an alphabet of 256).

Text is cut into pre-tokens by a regular expression, each pre-token is
encoded on its own, and special tokens are never split or merged: GPT-2's
design (Radford et al., 2019, "Language Models are Unsupervised Multitask
Learners"), as in tiktoken and Hugging Face ``tokenizers``. The named
patterns (``gpt2``, ``cl100k``, ``o200k``, ``llama3``) run on compiled
scanners that cut exactly as the ``regex`` package does
(:mod:`ubpe._pretokenize`); any other pattern goes through ``regex``. Pieces
and ids stay in numpy arrays, encoded by GIL-free numba kernels
(:mod:`ubpe._bytebpe`), so the batch methods run in parallel threads.

The interface is tiktoken's ``Encoding`` (same names and semantics), plus
offsets as Hugging Face gives them. Models interchange with both:
:meth:`ByteTokenizer.to_tiktoken`, :meth:`ByteTokenizer.from_tiktoken`,
:meth:`ByteTokenizer.to_huggingface` (the pattern translated to Oniguruma's
dialect by :func:`to_oniguruma`).
"""

from __future__ import annotations

import base64
import codecs
import json
import os
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np
import regex

from . import _bytebpe, _pretokenize
from .serialization import FormatError, plain_params, read_document, write_document
from .tokenizer import NotFittedError, Tokenizer

FORMAT = "ubpe.text-tokenizer"
VERSION = 2  # 1: checksum optional (written without one at first); 2: checksum required

#: Named pre-tokenization patterns (from tiktoken's ``openai_public`` and
#: llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_LLAMA3``).
PATTERNS = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
    "o200k": "|".join([
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]),
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",  # noqa: E501
}

def _byte_chars() -> list[str]:
    """GPT-2's reversible map from bytes to printable characters (HF ByteLevel)."""
    keep = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + extra))
            extra += 1
    return out


_BYTE_TABLE = {i: c for i, c in enumerate(_byte_chars())}


_BYTE_TABLE = {i: c for i, c in enumerate(_byte_chars())}

#: Threads of the batch methods unless told otherwise (tiktoken's default).
DEFAULT_THREADS = 8


def _as_set(value, specials: frozenset) -> frozenset:
    if isinstance(value, str) and value != "all":
        raise ValueError(f"expected a set of special tokens or 'all', got the string {value!r} "
                         f"(write {{{value!r}}} for that one token)")
    return specials if value == "all" else frozenset(value)


class ByteTokenizer:
    """Byte-level BPE tokenizer for text, with tiktoken's interface.

    Parameters
    ----------
    vocab_size : int
        Ordinary tokens: the 256 bytes plus merged tokens. Special tokens get
        the ids after them.
    n_candidates : int, default 1
        Merges considered per training round (see :class:`ubpe.Tokenizer`);
        1 is classic BPE.
    pattern : str or None, default "gpt2"
        Pre-tokenization: a name in :data:`PATTERNS` ("gpt2", "cl100k",
        "o200k", "llama3"; these run on a compiled scanner that cuts exactly
        as ``regex`` does), any regular expression (``regex`` syntax), or
        None for no splitting. Text between matches is kept as pre-tokens of
        its own: nothing is ever dropped.
    special_tokens : sequence of str, default ()
        Strings such as ``"<|endoftext|>"`` that are never split or merged.
    min_frequency : int, default 2
        Minimum (weighted) pair count for a merge.
    progress : bool or None
        Progress bar while training (None: only on a terminal).
    name : str, default "ubpe"
        A name, as tiktoken's ``Encoding.name``.

    Attributes
    ----------
    tokenizer_ : ubpe.Tokenizer
        The core model over bytes, with ``token_order="rank"``.
    special_tokens_ : dict of str to int
        Special token ids (consecutive after the ordinary tokens, unless
        loaded with other ids by :meth:`from_tiktoken`).
    byte_ids_ : ndarray of shape (256,), int64
        Public id of each single byte (the identity unless loaded from a
        tiktoken file whose single-byte ranks are permuted).

    Notes
    -----
    Encoding follows tiktoken (``tiktoken/src/lib.rs``): a pre-token whose
    bytes are a token is that token, any other is merged pair by pair, lowest
    rank first. All kernels are compiled with numba and release the GIL, so
    the batch methods run in parallel threads.
    """

    def __init__(self, vocab_size: int = 8192, *, n_candidates: int = 1,
                 pattern: str | None = "gpt2", special_tokens: Iterable[str] = (),
                 min_frequency: int = 2, progress: bool | None = None, name: str = "ubpe"):
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.pattern = pattern
        self.special_tokens = tuple(special_tokens)
        self.min_frequency = min_frequency
        self.progress = progress
        self.name = name

    # ------------------------------------------------------------- helpers
    @property
    def pattern_str(self) -> str | None:
        """The regular expression used for pre-tokenization (None: no splitting)."""
        if self.pattern is None:
            return None
        return PATTERNS.get(self.pattern, self.pattern)

    @property
    def compiled_pattern(self) -> str | None:
        """The name of the compiled scanner used for the pattern, or None (``regex`` is used)."""
        pat = self.pattern_str
        return next((k for k, v in PATTERNS.items() if v == pat), None)

    def _compile(self) -> None:
        pat = self.pattern_str
        if pat is not None and pat not in PATTERNS and regex.fullmatch(r"[\w-]+", pat):
            key = regex.sub(r"[_-]|base$", "", pat.lower())
            near = [k for k in PATTERNS if k == key or k == key.replace("_", "")]
            raise ValueError(f"pattern {pat!r} is not a name (names are {', '.join(PATTERNS)}"
                             + (f"; did you mean {near[0]!r}?" if near else "")
                             + "), and as a regular expression it would match only itself")
        try:
            self._regex = regex.compile(pat) if pat is not None else None
        except regex.error as e:
            raise ValueError(f"invalid pre-tokenization pattern {pat!r}: {e}") from None
        self._special_regexes: dict[frozenset, regex.Pattern] = {}
        kind = self.compiled_pattern
        self._kind = -1 if kind is None else _pretokenize.KINDS[kind]

    def _ensure_compiled(self) -> None:
        if not hasattr(self, "_regex"):
            self._compile()

    def _bounds(self, data: bytes, text: str) -> np.ndarray:
        """Pre-token boundaries of ``text`` (its UTF-8 is ``data``) as byte offsets, int64."""
        if self._kind >= 0:
            flags, fold = _pretokenize.unicode_tables()
            return _pretokenize.split_utf8(np.frombuffer(data, np.uint8), flags, fold,
                                           self._kind)
        pieces = self._regex_pieces(text)
        bounds = np.zeros(len(pieces) + 1, np.int64)
        np.cumsum([len(p.encode("utf-8")) for p in pieces], out=bounds[1:])
        return bounds

    def _regex_pieces(self, text: str) -> list[str]:
        if self._regex is None:
            return [text] if text else []
        pieces, pos = [], 0
        for m in self._regex.finditer(text):
            if m.start() > pos:
                pieces.append(text[pos:m.start()])  # unmatched text is kept
            if m.end() > m.start():
                pieces.append(m.group())
            pos = m.end()
        if pos < len(text):
            pieces.append(text[pos:])
        return pieces

    def pretokenize(self, text: str) -> list[str]:
        """Cut ordinary text (no special tokens) into pre-tokens; ``"".join`` gives it back.

        Raises
        ------
        UnicodeEncodeError
            With a named pattern, if ``text`` holds a lone surrogate.
        """
        self._ensure_compiled()
        if self._kind >= 0:
            return _pretokenize.split(text, self.compiled_pattern)  # type: ignore[arg-type]
        return self._regex_pieces(text)

    def _special_regex(self, tokens: frozenset) -> regex.Pattern:
        """A regex of these special tokens, longest first (as Hugging Face's added tokens; the
        order of tiktoken's is unspecified), of the allowed or the disallowed ones alone, as
        tiktoken's: a longer token that is not in the set hides none of them."""
        self._ensure_compiled()
        found = self._special_regexes.get(tokens)
        if found is None:
            alternatives = sorted(tokens, key=lambda t: (-len(t), t))
            found = regex.compile("|".join(regex.escape(t) for t in alternatives))
            self._special_regexes[tokens] = found
        return found

    def _split_specials(self, text: str, allowed: frozenset) -> list[tuple[str, bool]]:
        """Cut text at the allowed special tokens: (segment, is_special) pairs."""
        if not allowed or not any(s in text for s in allowed):
            return [(text, False)] if text else []
        out, pos = [], 0
        for m in self._special_regex(allowed).finditer(text):
            if m.start() > pos:
                out.append((text[pos:m.start()], False))
            out.append((m.group(), True))
            pos = m.end()
        if pos < len(text):
            out.append((text[pos:], False))
        return out

    # ----------------------------------------------------------------- fit
    def _count_bytes(self, texts: Iterable[str]) -> dict[bytes, int]:
        """Pre-token counts of texts (split at special tokens first), keyed by UTF-8."""
        counts: dict[bytes, int] = {}
        allowed = frozenset(self.special_tokens)
        for text in texts:
            for segment, special in self._split_specials(text, allowed):
                if special:
                    continue
                data = segment.encode("utf-8")
                bounds = self._bounds(data, segment)
                first, n = _bytebpe.count_pieces(np.frombuffer(data, np.uint8), bounds)
                starts = bounds[first].tolist()
                ends = bounds[first + 1].tolist()
                for a, b, c in zip(starts, ends, n.tolist()):
                    key = data[a:b]
                    counts[key] = counts.get(key, 0) + c
        return counts

    def count_pretokens(self, texts: Iterable[str]) -> Counter:
        """Pre-token counts of texts, split at special tokens first.

        Returns
        -------
        collections.Counter of str to int
        """
        self._compile()
        return Counter({k.decode("utf-8"): v for k, v in self._count_bytes(texts).items()})

    def fit(self, corpus: Iterable, *, workers: int = 1) -> ByteTokenizer:
        """Train on texts and/or files.

        Parameters
        ----------
        corpus : iterable of str or os.PathLike
            A ``str`` is text; a path (``pathlib.Path``) is a UTF-8 file,
            read in chunks cut at a newline or special token, so no pre-token
            is split.
        workers : int, default 1
            Threads that pre-tokenize and count the files' chunks (the
            compiled kernels release the GIL; nothing is re-imported, so a
            plain script needs no ``if __name__ == "__main__"`` guard).

        Pre-tokens are counted once and trained on as documents with
        multiplicities; special tokens split the text and never enter pair
        counts.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If ``vocab_size < 256``, the pattern is invalid (or a named
            pattern's name with other case), a special token is empty, or a
            file is not UTF-8 (names the file and the byte).
        """
        if any(not s for s in self.special_tokens):
            raise ValueError("special tokens must be non-empty strings")
        self._compile()
        texts: list[str] = []
        files: list[os.PathLike] = []
        for item in corpus:
            (files if isinstance(item, os.PathLike) else texts).append(item)
        counts = self._count_bytes(texts)
        if files:
            for k, v in _count_files(self, files, workers).items():
                counts[k] = counts.get(k, 0) + v
        pieces = list(counts)
        docs = [np.frombuffer(p, np.uint8) for p in pieces]
        weights = np.fromiter(counts.values(), np.int64, len(pieces))
        self.tokenizer_ = Tokenizer(256, self.vocab_size, n_candidates=self.n_candidates,
                                    min_frequency=self.min_frequency, token_order="rank",
                                    progress=self.progress).fit(docs, weights)
        self._finish(np.arange(256))
        return self

    def _finish(self, byte_ids, special_ids: dict[str, int] | None = None) -> None:
        """Set the id maps once ``tokenizer_`` is fitted or loaded."""
        core = self.tokenizer_
        n = core.n_tokens_
        if core._alphabet != 256:
            raise ValueError(f"a text tokenizer's alphabet is the 256 byte values, not "
                             f"{core._alphabet}")
        self.byte_ids_ = np.asarray(byte_ids, np.int64)
        if self.byte_ids_.shape != (256,) or not np.array_equal(np.sort(self.byte_ids_),
                                                                np.arange(256)):
            raise ValueError("byte_ids must be a permutation of 0..255")
        self._to_public = np.arange(n, dtype=np.int64)
        self._to_public[:256] = self.byte_ids_
        self._to_internal = np.empty(n, np.int64)
        self._to_internal[self._to_public] = np.arange(n)
        if special_ids is None:  # (a token given twice has one id)
            special_ids = {s: n + i for i, s in enumerate(dict.fromkeys(self.special_tokens))}
        self.special_tokens = tuple(sorted(special_ids, key=special_ids.__getitem__))
        self.special_tokens_ = dict(special_ids)
        self._special_by_id = {i: s for s, i in self.special_tokens_.items()}
        self._special_set = frozenset(self.special_tokens_)
        if n > _bytebpe.MAX_TOKENS:
            raise ValueError(f"the text kernels take at most {_bytebpe.MAX_TOKENS:,} ordinary "
                             f"tokens, this model has {n:,}")
        vt, vbits, flat = _bytebpe.build_vocab_table(core._exp_start, core._exp_flat)
        pt, pbits, bp = _bytebpe.build_pair_table(core._left, core._right)
        starts = (core._exp_start.astype(np.int32) if core._exp_start[-1] < 2**31
                  else core._exp_start)
        self._kernel_args = (vt, vbits, starts, flat, pt, pbits, bp,
                             core._left, core._right, core._token, self._to_public)
        self._flat = flat
        # decode tables indexed by public id (the byte tokens may be permuted)
        lengths = np.diff(core._exp_start)[self._to_internal]
        starts = core._exp_start[self._to_internal]
        self._pub_len = lengths.astype(np.uint8 if lengths.max(initial=0) < 256 else np.int32)
        self._pub_start = starts.astype(np.int64)
        self._lengths: np.ndarray | None = None
        self._compile()

    @property
    def n_vocab(self) -> int:
        """Number of token ids: the largest id plus one (tiktoken's ``n_vocab``)."""
        return self.max_token_value + 1

    @property
    def max_token_value(self) -> int:
        """The largest token id, ordinary or special."""
        self._check_fitted()
        return max([self.tokenizer_.n_tokens_ - 1, *self.special_tokens_.values()])

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``.

        Raises
        ------
        KeyError
            If the model has no such special token.
        """
        self._check_fitted()
        return self.special_tokens_["<|endoftext|>"]

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens, as a set (tiktoken's name)."""
        return set(self.special_tokens)

    def is_special_token(self, token: int) -> bool:
        """Whether ``token`` is the id of a special token."""
        self._check_fitted()
        return token in self._special_by_id

    # -------------------------------------------------------------- encode
    def _encode_ordinary_array(self, text: str) -> np.ndarray:
        """Public ids (int32) of text without special tokens."""
        if not text:
            return np.empty(0, np.int32)
        data = text.encode("utf-8")
        buf = np.frombuffer(data, np.uint8)
        if self._kind >= 0:
            flags, fold = _pretokenize.unicode_tables()
            return _bytebpe.encode_text(buf, flags, fold, self._kind, *self._kernel_args)
        return _bytebpe.encode_pieces(buf, self._bounds(data, text), *self._kernel_args)

    def _check_special(self, text: str, allowed_special, disallowed_special, offset: int = 0
                       ) -> frozenset:
        """The allowed special tokens; raises if a disallowed one is in the text (its position
        counted from ``offset``: where ``text`` starts in what was given)."""
        self._check_fitted()
        specials = self._special_set
        allowed = _as_set(allowed_special, specials)
        unknown = allowed - specials
        if unknown:
            raise ValueError(f"not special tokens of this model: {sorted(unknown)}")
        disallowed = (specials - allowed if disallowed_special == "all"
                      else _as_set(disallowed_special, specials))
        if disallowed and any(s in text for s in disallowed):
            m = self._special_regex(frozenset(disallowed)).search(text)
            assert m is not None
            raise ValueError(
                f"text contains the special token {m.group()!r} at character "
                f"{m.start() + offset}; pass allowed_special to encode it as a special token, "
                f"or disallowed_special=() to encode it as ordinary text")
        return allowed

    def _encode_array(self, text: str, allowed_special, disallowed_special) -> np.ndarray:
        allowed = self._check_special(text, allowed_special, disallowed_special)
        parts = []
        for segment, special in self._split_specials(text, allowed):
            if special:
                parts.append(np.array([self.special_tokens_[segment]], np.int32))
            else:
                parts.append(self._encode_ordinary_array(segment))
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0, np.int32)

    def encode(self, text: str, *, allowed_special: AbstractSet[str] | str = frozenset(),
               disallowed_special: Collection[str] | str = "all") -> list[int]:
        """Encode text to token ids (tiktoken's semantics for special tokens).

        Parameters
        ----------
        text : str
        allowed_special : "all" or set of str, default empty
            Special tokens encoded as their ids.
        disallowed_special : "all" or set of str, default "all"
            Special tokens whose presence raises (default: every special
            token not allowed). Pass ``()`` to encode them as ordinary text.

        Returns
        -------
        list of int

        Raises
        ------
        ValueError
            If ``text`` contains a disallowed special token (names it and its
            character offset), or ``allowed_special`` names an unknown one.
        UnicodeEncodeError
            If ``text`` holds a lone surrogate (it has no UTF-8 form).
        """
        return self._encode_array(text, allowed_special, disallowed_special).tolist()

    def encode_to_numpy(self, text: str, *,
                        allowed_special: AbstractSet[str] | str = frozenset(),
                        disallowed_special: Collection[str] | str = "all") -> np.ndarray:
        """:meth:`encode` as an array, without building a Python list.

        Returns
        -------
        ndarray of shape (n_tokens,), uint32
            tiktoken's dtype; a view of the kernel's output, no copy.

        Raises
        ------
        ValueError, UnicodeEncodeError
            As :meth:`encode`.
        """
        return self._encode_array(text, allowed_special, disallowed_special).view(np.uint32)

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text with special tokens treated as ordinary text.

        Returns
        -------
        list of int

        Raises
        ------
        UnicodeEncodeError
            If ``text`` holds a lone surrogate.
        """
        self._check_fitted()
        return self._encode_ordinary_array(text).tolist()

    def count_tokens(self, text: str, *, allowed_special: AbstractSet[str] | str = frozenset(),
                     disallowed_special: Collection[str] | str = "all") -> int:
        """Number of tokens of ``text``: ``len(encode(text))`` without building a list.

        Raises
        ------
        ValueError, UnicodeEncodeError
            As :meth:`encode`.
        """
        return int(self._encode_array(text, allowed_special, disallowed_special).size)

    def _map(self, fn, items: Sequence, num_threads: int) -> list:
        if num_threads <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(num_threads, len(items))) as pool:
            return list(pool.map(fn, items))

    def encode_batch(self, text: Sequence[str], *, num_threads: int = DEFAULT_THREADS,
                     allowed_special: AbstractSet[str] | str = frozenset(),
                     disallowed_special: Collection[str] | str = "all") -> list[list[int]]:
        """Encode several texts in parallel threads (the kernels release the GIL).

        Parameters
        ----------
        text : sequence of str
        num_threads : int, default 8
            Threads; 1 encodes in the calling thread.
        allowed_special, disallowed_special
            As in :meth:`encode`.

        Returns
        -------
        list of list of int
            One list of ids per text, in order.
        """
        self._check_fitted()
        return self._map(lambda t: self._encode_array(t, allowed_special, disallowed_special)
                         .tolist(), list(text), num_threads)

    def encode_ordinary_batch(self, text: Sequence[str], *,
                              num_threads: int = DEFAULT_THREADS) -> list[list[int]]:
        """:meth:`encode_ordinary` of several texts in parallel threads.

        Parameters
        ----------
        text : sequence of str
        num_threads : int, default 8

        Returns
        -------
        list of list of int
        """
        self._check_fitted()
        return self._map(lambda t: self._encode_ordinary_array(t).tolist(), list(text),
                         num_threads)

    def encode_to_numpy_batch(self, text: Sequence[str], *, num_threads: int = DEFAULT_THREADS,
                              allowed_special: AbstractSet[str] | str = frozenset(),
                              disallowed_special: Collection[str] | str = "all"
                              ) -> list[np.ndarray]:
        """:meth:`encode_to_numpy` of several texts in parallel threads.

        Returns
        -------
        list of ndarray of shape (n_tokens_i,), uint32
        """
        self._check_fitted()
        return self._map(lambda t: self._encode_array(t, allowed_special, disallowed_special)
                         .view(np.uint32), list(text), num_threads)

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the one token whose text (or bytes) this is.

        Raises
        ------
        KeyError
            If no single token has exactly these bytes.
        """
        self._check_fitted()
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        data = np.frombuffer(text_or_bytes, np.uint8)
        if data.size:  # (an ordinary token first, then a special one, as tiktoken looks)
            ids = _bytebpe.encode_pieces(data, np.array([0, data.size], np.int64),
                                         *self._kernel_args)
            if ids.size == 1 and self.token_bytes(int(ids[0])) == bytes(text_or_bytes):
                return int(ids[0])
        special = {s.encode("utf-8"): i for s, i in self.special_tokens_.items()}
        if bytes(text_or_bytes) in special:  # (a special token, given as text or bytes)
            return special[bytes(text_or_bytes)]
        raise KeyError(text_or_bytes)

    def encode_with_offsets(self, text: str, *, unit: str = "char",
                            allowed_special: AbstractSet[str] | str = frozenset(),
                            disallowed_special: Collection[str] | str = "all"
                            ) -> tuple[list[int], np.ndarray]:
        """Token ids and the span of text each one covers (HF's ``Encoding.offsets``).

        Parameters
        ----------
        text : str
        unit : {"char", "byte"}, default "char"
            Offsets in characters of ``text`` (Python string indices) or in
            bytes of its UTF-8. A token that ends or starts inside a
            character (part of an emoji, say) spans that whole character, as
            in Hugging Face ``tokenizers``.
        allowed_special, disallowed_special
            As in :meth:`encode`.

        Returns
        -------
        ids : list of int
        offsets : ndarray of shape (n_tokens, 2), int64
            ``(start, end)`` per token, end exclusive.

        Raises
        ------
        ValueError
            If ``unit`` is neither, or as :meth:`encode`.
        """
        if unit not in ("char", "byte"):
            raise ValueError(f"unit must be 'char' or 'byte', got {unit!r}")
        ids = self._encode_array(text, allowed_special, disallowed_special)
        lengths = self.token_lengths()[ids.astype(np.int64)]
        ends = np.cumsum(lengths)
        starts = ends - lengths
        if unit == "char" and ids.size:
            data = np.frombuffer(text.encode("utf-8"), np.uint8)
            char_of_byte = np.cumsum((data & 0xC0) != 0x80) - 1
            starts = char_of_byte[starts]
            ends = char_of_byte[ends - 1] + 1
        return ids.tolist(), np.column_stack([starts, ends]).astype(np.int64)

    def encode_iterable(self, chunks: Iterable[str], *,
                        allowed_special: AbstractSet[str] | str = frozenset(),
                        disallowed_special: Collection[str] | str = "all") -> Iterator[int]:
        """Encode a stream of text chunks (a file's lines, say) lazily.

        Yields the same ids as ``encode("".join(chunks), ...)`` while holding
        back only what the text that follows may still change: the last two
        pre-tokens, a special token that a longer one may still extend, and
        the start of what may be a special token. Each pre-token is cut once
        (the held text is cut again only when it has doubled: a chunk at a
        time of one long pre-token costs linear time). This holds for
        patterns whose matches look at most one pre-token ahead, as the
        named ones do; a custom pattern that looks further (digits grouped
        from the right by a lookahead, say) may be cut otherwise.

        Raises
        ------
        ValueError
            As :meth:`encode`, when the text read so far holds a disallowed
            special token.
        """
        self._check_fitted()
        kw: dict[str, Any] = {"allowed_special": allowed_special,
                              "disallowed_special": disallowed_special}
        buf, next_try, offset = "", 0, 0
        for chunk in chunks:
            buf += chunk
            if len(buf) < next_try:
                continue
            cut, ids = self._stable_prefix(buf, offset, **kw)
            if cut:
                yield from ids
                buf, next_try, offset = buf[cut:], 0, offset + cut
            else:
                next_try = 2 * len(buf)
        if buf:
            self._check_special(buf, allowed_special, disallowed_special, offset)
            yield from self.encode(buf, **kw)

    def _stable_prefix(self, buf: str, offset: int = 0, **kw) -> tuple[int, list[int]]:
        """``(cut, ids)``: a prefix of ``buf`` that no text after it can encode otherwise, and
        its ids (0 and [] if none); ``offset``: where ``buf`` starts in the stream."""
        allowed = self._check_special(buf, kw["allowed_special"], kw["disallowed_special"],
                                      offset)
        # a special token that the text read so far may still complete across a cut (one that
        # counts: allowed, or disallowed and so an error)
        disallowed = kw["disallowed_special"]
        counted = allowed | (self._special_set - allowed if disallowed == "all"
                             else _as_set(disallowed, self._special_set))

        def may_complete(cut: int) -> bool:
            return any(len(buf) - j < len(t) and t.startswith(buf[j:])
                       for t in counted for j in range(max(0, cut - len(t) + 1), cut))
        longest = max((len(t) for t in self.special_tokens), default=0)
        done, pos, ordinary_end = 0, 0, len(buf)
        for segment, special in self._split_specials(buf, allowed):
            if special:
                if pos + longest <= len(buf):  # (no longer special token can extend it)
                    done = pos + len(segment)
                else:
                    ordinary_end = pos
                    break
            pos += len(segment)
        if done and may_complete(done):  # (one may start inside the special token emitted)
            return 0, []
        ids = self._encode_array(buf[:done], allowed, ()).tolist() if done else []
        # the ordinary text after it: its pre-tokens in this buffer, the last two held back
        pieces = self.pretokenize(buf[done:ordinary_end])
        keep = len(pieces) - 2
        # a special token after the cut ends the ordinary text there, and a run of whitespace
        # at the end of a text is cut otherwise (gpt2's \s++$: "\n\n" before it is one
        # pre-token, two before "<"): then the cut also follows a pre-token that is not all
        # whitespace
        while allowed and keep > 0 and pieces[keep - 1].isspace():
            keep -= 1
        if keep <= 0:
            return done, ids
        cut = ordinary_end - sum(len(p) for p in pieces[keep:])
        if may_complete(cut):
            return done, ids
        data = buf[done:cut].encode("utf-8")
        bounds = np.zeros(keep + 1, np.int64)
        np.cumsum([len(p.encode("utf-8")) for p in pieces[:keep]], out=bounds[1:])
        ids += _bytebpe.encode_pieces(np.frombuffer(data, np.uint8), bounds,
                                      *self._kernel_args).tolist()
        return cut, ids

    # -------------------------------------------------------------- decode
    def token_lengths(self) -> np.ndarray:
        """Length in bytes of every token id, shape (n_vocab,), int64 (0 for unused ids)."""
        self._check_fitted()
        lengths: np.ndarray | None = getattr(self, "_lengths", None)
        if lengths is None:
            lengths = np.zeros(self.n_vocab, np.int64)
            lengths[self._to_public] = self.tokenizer_.token_lengths()
            for s, i in self.special_tokens_.items():
                lengths[i] = len(s.encode("utf-8"))
            self._lengths = lengths
        return lengths

    def _check_ids(self, ids: np.ndarray) -> None:
        n = self.tokenizer_.n_tokens_
        bad = (ids < 0) | (ids >= n)
        if bad.any():
            bad &= ~np.isin(ids, np.fromiter(self._special_by_id, np.int64,
                                             len(self._special_by_id)))
        pos = np.flatnonzero(bad)
        if pos.size:
            raise ValueError(f"position {pos[0]}: token id {ids[pos[0]]} is not in the "
                             f"vocabulary (0..{n - 1} and special ids "
                             f"{sorted(self._special_by_id)})")

    def decode_bytes(self, tokens: Sequence[int] | np.ndarray) -> bytes:
        """Exact bytes of token ids (special tokens as their UTF-8 strings).

        Raises
        ------
        ValueError
            If an id is not in the vocabulary (names it and its position), or
            ``tokens`` is not one-dimensional.
        TypeError
            If the ids are not integers (floats are not truncated).
        """
        self._check_fitted()
        ids = _as_ids(tokens)
        out, stop = _bytebpe.decode_public(ids, self._pub_len, self._pub_start, self._flat)
        if stop < 0:
            return out.tobytes()
        self._check_ids(ids)
        n = self.tokenizer_.n_tokens_
        core = self.tokenizer_
        special = np.flatnonzero(ids >= n)
        if not special.size:
            return _bytebpe.decode_ids(self._to_internal[ids], core._exp_start,
                                       self._flat).tobytes()
        parts, start = [], 0
        for k in [*special.tolist(), ids.size]:
            if k > start:
                parts.append(_bytebpe.decode_ids(self._to_internal[ids[start:k]],
                                                 core._exp_start, self._flat).tobytes())
            if k < ids.size:
                parts.append(self._special_by_id[int(ids[k])].encode("utf-8"))
            start = k + 1
        return b"".join(parts)

    def decode(self, tokens: Sequence[int] | np.ndarray, errors: str = "replace") -> str:
        """Text of token ids; invalid UTF-8 becomes U+FFFD (``errors`` as in bytes.decode)."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token id.

        Raises
        ------
        KeyError
            If the id is not in the vocabulary (tiktoken raises KeyError too).
        """
        self._check_fitted()
        if token in self._special_by_id:
            return self._special_by_id[token].encode("utf-8")
        if not 0 <= token < self.tokenizer_.n_tokens_:
            raise KeyError(token)
        t = int(self._to_internal[token])
        s = self.tokenizer_._exp_start
        return self._flat[s[t]: s[t + 1]].tobytes()

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token id (see :meth:`decode_single_token_bytes`).

        Raises
        ------
        ValueError
            If the id is not in the vocabulary (as in earlier versions).
        """
        try:
            return self.decode_single_token_bytes(token_id)
        except KeyError:
            raise ValueError(f"token id {token_id} is not in the vocabulary") from None

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token id.

        Raises
        ------
        KeyError
            If an id is not in the vocabulary.
        """
        return [self.decode_single_token_bytes(t) for t in _as_ids(tokens).tolist()]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Text of token ids and the character index where each token starts.

        tiktoken's rule: a token that starts inside a multi-byte character
        gets the index of that character.

        Raises
        ------
        UnicodeDecodeError
            If the bytes are not valid UTF-8 (tiktoken decodes strictly here).
        ValueError
            If an id is not in the vocabulary.
        """
        data = self.decode_bytes(tokens)
        text = data.decode("utf-8")
        ids = np.asarray(tokens, np.int64).reshape(-1)
        lengths = self.token_lengths()[ids]
        starts = np.cumsum(lengths) - lengths
        arr = np.frombuffer(data, np.uint8)
        cont = (arr & 0xC0) == 0x80
        lead = np.concatenate([[0], np.cumsum(~cont)])
        inside = np.zeros(ids.size, bool)
        nonempty = lengths > 0
        inside[nonempty] = cont[starts[nonempty]]
        return text, np.maximum(lead[starts] - inside, 0).tolist()

    def decode_batch(self, batch: Sequence[Sequence[int]], *, errors: str = "replace",
                     num_threads: int = DEFAULT_THREADS) -> list[str]:
        """:meth:`decode` of several id sequences in parallel threads.

        Parameters
        ----------
        batch : sequence of sequences of int (or int arrays)
        errors : str, default "replace"
        num_threads : int, default 8

        Returns
        -------
        list of str

        Raises
        ------
        ValueError
            If an id is not in the vocabulary.
        """
        self._check_fitted()
        return self._map(lambda ids: self.decode(ids, errors=errors), list(batch), num_threads)

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *,
                           num_threads: int = DEFAULT_THREADS) -> list[bytes]:
        """:meth:`decode_bytes` of several id sequences in parallel threads.

        Returns
        -------
        list of bytes

        Raises
        ------
        ValueError
            If an id is not in the vocabulary.
        """
        self._check_fitted()
        return self._map(self.decode_bytes, list(batch), num_threads)

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary token, sorted (tiktoken's ``token_byte_values``)."""
        return sorted(self.mergeable_ranks())

    def _check_fitted(self) -> None:
        if not hasattr(self, "tokenizer_"):
            raise NotFittedError("this ByteTokenizer is not fitted yet; call fit() or load()")

    # ----------------------------------------------------------- save/load
    def save(self, path: str | os.PathLike) -> None:
        """Write the model as one versioned JSON file, atomically."""
        self._check_fitted()
        write_document(path, FORMAT, VERSION, {
            "pattern": self.pattern, "pattern_str": self.pattern_str,
            "special_tokens": self.special_tokens_,
            "byte_ids": self.byte_ids_.tolist(),
            "params": plain_params({"vocab_size": self.vocab_size,
                                    "n_candidates": self.n_candidates,
                                    "min_frequency": self.min_frequency,
                                    # (the default left out: older readers know no name)
                                    **({"name": self.name} if self.name != "ubpe" else {})}),
            "tokenizer": self.tokenizer_.to_dict()})

    @classmethod
    def load(cls, path: str | os.PathLike) -> ByteTokenizer:
        """Read a model written by :meth:`save`.

        Raises
        ------
        FormatError
            If the file is not a ubpe text tokenizer or is of a newer version.
        """
        return cls._from_document(read_document(path, FORMAT, VERSION), str(path))

    @classmethod
    def _from_document(cls, doc: dict, path: str) -> ByteTokenizer:
        """:meth:`load` of a document already read and checked (``path`` names it)."""
        try:
            core = doc["tokenizer"]
            if core["params"]["alphabet_size"] != 256:  # (before the core's tables are built)
                raise FormatError(f"{path}: a text tokenizer's alphabet is the 256 byte values, "
                                  f"this file's is {core['params']['alphabet_size']!r}")
            if 256 + len(core["merges"]) > _bytebpe.MAX_TOKENS:
                raise FormatError(f"{path}: {len(core['merges']):,} merges; the text kernels "
                                  f"take at most {_bytebpe.MAX_TOKENS:,} ordinary tokens")
            specials = {str(k): int(v) for k, v in doc["special_tokens"].items()}
            tok = cls(**doc["params"], pattern=doc["pattern"])
            tok.tokenizer_ = Tokenizer.from_dict(doc["tokenizer"], source=f"{path}: tokenizer")
            _check_special_ids(specials, tok.tokenizer_.n_tokens_)
            tok._finish(doc["byte_ids"], specials)
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as e:
            raise FormatError(f"{path}: malformed text tokenizer ({e})") from None
        return tok

    # --------------------------------------------------------- interchange
    def mergeable_ranks(self) -> dict[bytes, int]:
        """tiktoken's ``mergeable_ranks``: the bytes of every ordinary token -> its id.

        Raises
        ------
        ValueError
            If two tokens have the same bytes (tiktoken cannot express that).
        """
        self._check_fitted()
        flat = self._flat.tobytes()
        s = self.tokenizer_._exp_start.tolist()
        public = self._to_public.tolist()
        ranks = {flat[s[t]: s[t + 1]]: public[t] for t in range(len(public))}
        if len(ranks) < len(public):
            seen: dict[bytes, int] = {}
            for t in range(len(public)):
                b = flat[s[t]: s[t + 1]]
                if b in seen:
                    raise ValueError(f"token ids {seen[b]} and {public[t]} have the same "
                                     f"bytes {b!r}")
                seen[b] = public[t]
        return ranks

    def to_tiktoken(self, name: str | None = None) -> Any:
        """A ``tiktoken.Encoding`` with this model's ranks, pattern and special tokens.

        It gives this model's ids wherever the two regex engines class the
        text's characters alike: this tokenizer reads ``\\p{L}`` and the other
        classes through the ``regex`` module's Unicode tables, tiktoken
        through those of its Rust regex crate, and a code point assigned in
        one Unicode version and not the other (U+3D000, a letter for
        ``regex`` 2026.11, unassigned for tiktoken 0.14) may be cut otherwise.

        Raises
        ------
        ValueError
            If the model has no pre-tokenization pattern (tiktoken needs one),
            or its pattern leaves text unmatched (tiktoken drops such text,
            this tokenizer encodes it), found on a probe of every character
            of the Basic Multilingual Plane and a few words and spaces.
        """
        import tiktoken
        if self.pattern_str is None:
            raise ValueError("tiktoken needs a pre-tokenization pattern; this model has none")
        gap = _unmatched(self.pattern_str)
        if gap is not None:
            raise ValueError(f"the pattern leaves {gap!r} unmatched, which tiktoken would drop "
                             f"(this tokenizer encodes it): add an alternative that matches "
                             f"every character, such as |\\s+|.")
        return tiktoken.Encoding(name or self.name, pat_str=self.pattern_str,
                                 mergeable_ranks=self.mergeable_ranks(),
                                 special_tokens=dict(self.special_tokens_))

    def save_tiktoken(self, path: str | os.PathLike) -> None:
        """Write a tiktoken ranks file: ``base64(token bytes) rank`` per line."""
        from .serialization import atomic_write_bytes
        lines = [f"{base64.b64encode(b).decode()} {r}" for b, r in self.mergeable_ranks().items()]
        atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())

    @classmethod
    def from_tiktoken(cls, ranks: dict[bytes, int] | str | os.PathLike, *,
                      pattern: str | None = "cl100k",
                      special_tokens: dict[str, int] | None = None,
                      name: str = "ubpe") -> ByteTokenizer:
        """Build a tokenizer from tiktoken ranks, recovering the merges.

        Parameters
        ----------
        ranks : dict of bytes to int, or path of a ranks file
            ``base64-token rank`` per line; ranks must be 0..n-1 with the 256
            single bytes first (in any order: their permutation is kept in
            ``byte_ids_``).
        pattern : str, default "cl100k"
        special_tokens : dict of str to int, optional
            Ids at or above ``n`` (gaps allowed, as cl100k's ``<|endoftext|>``
            at 100257 after 100256 ordinary tokens).
        name : str, default "ubpe"

        Each token's merge is found by running BPE on its bytes with only
        the lower ranks (minbpe's ``recover_merges``), in one compiled pass.

        Raises
        ------
        FormatError
            On a malformed file, ranks that are not 0..n-1, special ids that
            collide or fall among the ordinary ones, or a token that no pair
            of lower-ranked tokens forms.
        """
        if isinstance(ranks, dict):
            flat = np.frombuffer(b"".join(ranks), np.uint8)
            lengths = np.fromiter(map(len, ranks), np.int64, len(ranks))
            try:
                values = np.fromiter(ranks.values(), np.int64, len(ranks))
            except (OverflowError, TypeError, ValueError) as e:
                raise FormatError(f"tiktoken ranks must be integers 0..n-1 ({e})") from None
        else:
            flat, lengths, values = _read_ranks(ranks)
        n = len(values)
        order = np.argsort(values, kind="stable")
        if not np.array_equal(values[order], np.arange(n)):
            raise FormatError("tiktoken ranks must be 0..n-1 without gaps")
        # the tokens' bytes in rank order
        starts = np.cumsum(lengths) - lengths
        lengths = lengths[order]
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = flat[np.repeat(starts[order] - offsets[:-1], lengths) + np.arange(offsets[-1])]
        if n < 256 or not (lengths[:256] == 1).all():
            raise FormatError("the first 256 ranks must be the 256 single bytes")
        byte_ids = np.full(256, -1, np.int64)
        byte_ids[flat[:256]] = np.arange(256)
        if (byte_ids < 0).any():
            raise FormatError("the first 256 ranks must be the 256 single bytes")
        pairs, bad = _bytebpe.recover_merges(flat, offsets)
        if bad >= 0:
            token = flat[offsets[bad]: offsets[bad + 1]].tobytes()
            raw = flat.tobytes()
            same = [r for r in range(bad) if raw[offsets[r]:offsets[r + 1]] == token]
            if same:
                raise FormatError(f"rank {bad} ({token!r}) is the same token as rank {same[0]}")
            raise FormatError(f"rank {bad} ({token!r}) is not formed by two lower-ranked tokens")
        specials = dict(special_tokens or {})
        _check_special_ids(specials, n)
        tok = cls(n, pattern=pattern, name=name)
        # the merges are valid by construction (each part precedes its token): no re-check
        m = len(pairs)
        core = Tokenizer(256, n, token_order="rank", progress=False)
        core.n_documents_ = 0
        core._set_merges(np.column_stack([pairs, np.arange(256, n)]), np.zeros(m),
                         np.zeros(m, np.int64))
        tok.tokenizer_ = core
        tok._finish(byte_ids, specials)
        return tok

    def to_huggingface(self, path: str | os.PathLike) -> None:
        """Write a Hugging Face ``tokenizer.json`` (BPE model, Split + ByteLevel).

        ``tokenizers.Tokenizer.from_file(path)`` encodes text to the same ids.
        The pattern is translated to the Oniguruma dialect that ``tokenizers``
        uses (see :func:`to_oniguruma`). Needs the ``tokenizers`` package.

        Parameters
        ----------
        path : str or os.PathLike
            File to write, atomically (UTF-8 JSON).

        Raises
        ------
        NotFittedError
            If the model is not fitted.
        ValueError
            If a special token's text is also the byte-level name of an
            ordinary token (a JSON vocabulary cannot hold both), or the
            pattern has a construct that Oniguruma reads otherwise
            (:func:`to_oniguruma`).
        ImportError
            If ``tokenizers`` is not installed.
        """
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        from .serialization import atomic_write_bytes
        self._check_fitted()
        # every token's bytes in GPT-2's printable byte alphabet, in one pass
        core = self.tokenizer_
        flat = core._exp_flat.astype(np.uint8).tobytes().decode("latin-1").translate(_BYTE_TABLE)
        starts = core._exp_start.tolist()
        names = [flat[a:b] for a, b in zip(starts[:-1], starts[1:])]
        quoted = list(map(json.encoder.encode_basestring, names))
        ids = self._to_public.tolist()
        # special tokens go in the model's vocabulary too (as GPT-2's vocab.json has
        # <|endoftext|>): tokenizers takes an added token's id from there, and would
        # otherwise renumber it after the vocabulary, breaking ids with gaps (cl100k)
        known = set(names)
        for s, i in self.special_tokens_.items():
            if s in known:
                raise ValueError(f"special token {s!r} has the same text as an ordinary token "
                                 f"in GPT-2's byte alphabet; tokenizers cannot tell them apart")
            quoted.append(json.encoder.encode_basestring(s))
            ids.append(i)
        vocab = "{" + ",".join(map("{}:{}".format, quoted, ids)) + "}"
        name = names.__getitem__
        # merges as "left right" (the names hold no space: GPT-2's map moves it to U+0120)
        merges = json.dumps(list(map(" ".join, zip(map(name, core.merges_[:, 0].tolist()),
                                                   map(name, core.merges_[:, 1].tolist())))),
                            ensure_ascii=False)
        # the skeleton (pre-tokenizer, decoder, added tokens) from tokenizers itself
        hf = HFTokenizer(models.BPE(vocab={}, merges=[]))
        steps: list = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        if self.pattern_str is not None:
            steps.insert(0, pre_tokenizers.Split(Regex(to_oniguruma(self.pattern_str)),
                                                 behavior="isolated"))
        hf.pre_tokenizer = pre_tokenizers.Sequence(steps)
        hf.decoder = decoders.ByteLevel()
        hf.add_special_tokens([AddedToken(s, special=True) for s in self.special_tokens])
        doc = json.loads(hf.to_str())
        for entry in doc["added_tokens"]:
            entry["id"] = self.special_tokens_[entry["content"]]
        doc["model"]["vocab"] = "\0vocab\0"
        doc["model"]["merges"] = "\0merges\0"
        text = json.dumps(doc, ensure_ascii=False)
        text = text.replace('"\\u0000vocab\\u0000"', vocab, 1)
        text = text.replace('"\\u0000merges\\u0000"', merges, 1)
        atomic_write_bytes(path, text.encode("utf-8"))


_ATOM = regex.compile(r"""
    (?P<group>\((?P<head>\?(?:[:=!>]|<[=!]|[a-zA-Z-]+:)?)?
       (?P<body>(?:\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|[^()\\\[]|(?&group))*)\))
  | (?P<other>\\[pPx]\{[^}]*\}|\\.|\[\^?\]?(?:\\.|[^\]\\])*\]|.)
""", regex.VERBOSE | regex.DOTALL)
_POSSESSIVE_INTERVAL = regex.compile(r"\{\d+(?:,\d*)?\}\+")
# the anchors of Python's regex (no MULTILINE flag) as Oniguruma (Ruby syntax) writes them
_ONIG_ANCHORS = {"^": r"\A", "$": r"\Z", r"\Z": r"\z"}
_ONIG_DIFFERENT = {r"\h": "a hex digit", r"\H": "not a hex digit", r"\N": "not a newline",
                   r"\X": "an extended grapheme cluster by another table", r"\R": "a line break",
                   r"\K": "keep", r"\G": "the search start",
                   r"\w": "a word character: other numbers such as ² and ½ too",
                   r"\W": "not a word character: other numbers such as ² and ½ excluded",
                   r"\b": "a word boundary, by its own \\w", r"\B": "not a word boundary, by its own \\w"}
_ONIG_DIFFERENT_IN_CLASS = (r"\w", r"\W", r"\h", r"\H")  # (\b is a backspace in both)


def to_oniguruma(pattern: str) -> str:
    """Translate a ``regex`` pattern to the Oniguruma dialect of HF ``tokenizers``, or refuse it.

    The two engines read possessive intervals differently: in Python's
    ``regex`` (and tiktoken's ``fancy-regex``), ``X{1,3}+`` is ``X{1,3}``
    made possessive; Oniguruma's default (Ruby) syntax reads it as
    ``(?:X{1,3})+``, any run of ``X`` (Oniguruma's ``doc/RE``: "{n,m}+ ...
    are possessive op. in ONIG_SYNTAX_JAVA and ONIG_SYNTAX_PERL only"). Each
    one becomes an atomic group ``(?>X{1,3})``, which means the same in both.
    Possessive ``?+``, ``*+``, ``++`` mean the same in both and are kept.
    Python's ``^``, ``$`` and ``\\Z`` (the start, the end or a final newline,
    the very end of the text) are Oniguruma's ``\\A``, ``\\Z`` and ``\\z``
    (its ``^`` and ``$`` match at every line).

    Parameters
    ----------
    pattern : str
        A pattern in ``regex`` syntax.

    Returns
    -------
    str
        The same language in Oniguruma's syntax; ``pattern`` itself when no
        construct differs.

    Raises
    ------
    ValueError
        On a construct that Oniguruma reads otherwise and that has no
        translation here: inline flags other than ``i`` and ``x`` (its ``m``
        is Python's ``s``), ``\\h``, ``\\H``, ``\\N``, ``\\X``, ``\\R``,
        ``\\K``, ``\\G``, and ``\\w``, ``\\W``, ``\\b``, ``\\B`` (Oniguruma's
        word characters include the other numbers, such as ² and ½), in a
        character class too.
    """
    out, pos = [], 0
    while pos < len(pattern):
        m = _ATOM.match(pattern, pos)
        assert m is not None  # the last branch matches any character
        if m.group("group") is not None:
            head, body = m.group("head") or "", m.group("body")
            if head == "?" and regex.fullmatch(r"[a-zA-Z-]+", body):
                flags = body  # (?flags)
            elif head[1:-1] and regex.fullmatch(r"[a-zA-Z-]+", head[1:-1]):
                flags = head[1:-1]  # (?flags:...)
            else:
                flags = ""
            if set(flags) - set("ix-"):
                raise ValueError(f"the pattern's inline flags {flags!r}: Oniguruma reads s and m "
                                 f"otherwise (only i and x mean the same in both)")
            atom = "(" + head + (body if flags == body else to_oniguruma(body)) + ")"
        else:
            atom = m.group("other")
            if atom in _ONIG_ANCHORS:  # Python's ^ and $ see the text's ends, Ruby's every line's
                atom = _ONIG_ANCHORS[atom]
            elif atom in _ONIG_DIFFERENT:
                raise ValueError(f"the pattern's {atom}: Oniguruma reads it otherwise "
                                 f"({_ONIG_DIFFERENT[atom]}); write the classes it means "
                                 f"with \\p{{...}}")
            elif atom.startswith("["):
                for e in regex.findall(r"\\.", atom):
                    if e in _ONIG_DIFFERENT_IN_CLASS:
                        raise ValueError(f"the pattern's {e} in {atom}: Oniguruma reads it "
                                         f"otherwise ({_ONIG_DIFFERENT[e]}); write the classes "
                                         f"it means with \\p{{...}}")
        pos = m.end()
        q = _POSSESSIVE_INTERVAL.match(pattern, pos) if atom not in "|*+?{}" else None
        if q:
            atom = f"(?>{atom}{q.group()[:-1]})"
            pos = q.end()
        out.append(atom)
    return "".join(out)


_PROBE = ("Hello, World! 12345 the THE x\ny  \n\n\tz 'll \u00e9t\u00e9 \u6f22\u5b57 \U0001F600 "
          + "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x10000))))


def _unmatched(pattern: str) -> str | None:
    """The first text of :data:`_PROBE` (up to 12 characters) that ``pattern``'s matches skip."""
    pos = 0
    for m in regex.finditer(pattern, _PROBE):
        if m.start() > pos:
            return _PROBE[pos:min(m.start(), pos + 12)]
        pos = m.end()
    return _PROBE[pos:pos + 12] if pos < len(_PROBE) else None


def _as_ids(tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    """Token ids as a 1-D int64 array; TypeError for non-integers, ValueError for an id
    beyond int64 or more than one dimension."""
    ids = np.asarray(tokens)
    if ids.size == 0:
        return np.zeros(0, np.int64)
    if ids.ndim == 0:  # one id
        ids = ids.reshape(1)
    if ids.ndim != 1:
        raise ValueError(f"token ids must be one-dimensional, got shape {ids.shape}")
    if ids.dtype.kind not in "iu":
        if ids.dtype == object and all(isinstance(t, (int, np.integer))
                                       and not isinstance(t, (bool, np.bool_)) for t in ids):
            beyond = [k for k, t in enumerate(ids) if not -2**63 <= t < 2**63]
            if not beyond:  # (Python ints from pandas or JSON: int64 is exact)
                return ids.astype(np.int64)
            raise ValueError(f"position {beyond[0]}: token id {ids[beyond[0]]} is not in the "
                             f"vocabulary")
        raise TypeError(f"token ids must be integers, got {ids.dtype} values")
    if ids.dtype == np.uint64 and ids.max() >= 2**63:
        big = int(np.argmax(ids >= 2**63))
        raise ValueError(f"position {big}: token id {ids[big]} is not in the vocabulary")
    return ids.astype(np.int64, copy=False)


MAX_SPECIAL_GAP = 1 << 20  # special ids lie below n_tokens + this (cl100k's gap is 1)


def _check_special_ids(specials: dict[str, int], n: int) -> None:
    """Special tokens must be non-empty strings, their ids distinct, at or above ``n`` and
    below ``n + MAX_SPECIAL_GAP`` (an id sizes tables of ``n_vocab`` entries); raises
    FormatError."""
    if any(not isinstance(s, str) or not s for s in specials):
        raise FormatError("special tokens must be non-empty strings")
    ids = list(specials.values())
    if any(isinstance(i, bool) or not isinstance(i, int) or not n <= i < n + MAX_SPECIAL_GAP
           for i in ids) or len(set(ids)) < len(ids):
        raise FormatError(f"special token ids must be distinct integers in {n}..."
                          f"{n + MAX_SPECIAL_GAP - 1} (after the ordinary tokens), got {specials}")


_B64 = np.full(256, 255, np.uint8)
_B64[np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)] = \
    np.arange(64, dtype=np.uint8)
_B64[ord("=")] = 0


def _read_ranks_slow(path: str | os.PathLike) -> dict[bytes, int]:
    """A tiktoken ranks file line by line (names the first malformed line)."""
    ranks = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f.read().splitlines(), 1):  # (\n, \r\n or \r, as tiktoken)
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
                if not 0 <= int(rank) < 2**31:
                    raise ValueError(f"rank {int(rank)} is outside 0..2**31-1")
            except ValueError as e:
                raise FormatError(f"{path}, line {n}: expected 'base64-token rank' ({e})") \
                    from None
    return ranks


_SPACE = np.zeros(256, bool)  # (what bytes.split() splits at)
_SPACE[list(b" \t\r\n\v\f")] = True


def _read_ranks(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tiktoken ranks file (``base64-token rank`` per line), decoded with numpy.

    Returns the bytes of all tokens concatenated (uint8), their lengths and
    their ranks (int64), in file order. Falls back to a line-by-line read
    to name the line when the file is malformed (raises FormatError).
    """
    with open(path, "rb") as f:
        data = f.read()
    parts = data.split()
    # two fields on every line that is not blank, as tiktoken reads them (two entries on a line
    # or one over two lines were taken): where a field starts, counted by line
    b = np.frombuffer(data, np.uint8)
    space = _SPACE[b]
    starts = np.flatnonzero(~space[1:] & space[:-1]) + 1
    if b.size and not space[0]:
        starts = np.concatenate(([0], starts))
    ends = np.flatnonzero((b == 10) | ((b == 13) & np.append(b[1:] != 10, True)))  # (\n, \r\n, \r)
    per_line = np.bincount(np.searchsorted(ends, starts))
    if ((per_line != 0) & (per_line != 2)).any():
        _read_ranks_slow(path)  # raises, naming the line
    codes, rank_text = parts[0::2], parts[1::2]
    if len(codes) != len(rank_text) or not codes:
        _read_ranks_slow(path)
        raise FormatError(f"{path}: expected 'base64-token rank' lines")
    lengths = np.fromiter(map(len, codes), np.int64, len(codes))
    chars = np.frombuffer(b"".join(codes), np.uint8)
    values = _B64[chars]
    try:
        ranks = np.array(rank_text).astype(np.int64)
    except (ValueError, OverflowError):
        ranks = None
    # padding: at most two '=' at the end of each token, none elsewhere
    ends = np.cumsum(lengths)
    pad = chars == ord("=")
    n_pad = pad[ends - 1].astype(np.int64) + np.where(lengths > 1, pad[ends - 2], False)
    pad_ok = pad.sum() == n_pad.sum() and not (pad[ends - 1] < pad[ends - 2]).any()
    if (ranks is None or (values == 255).any() or (lengths % 4).any() or not pad_ok
            or ((n_pad == 2) & (values[ends - 3] & 0x0F != 0)).any()
            or ((n_pad == 1) & (values[ends - 2] & 0x03 != 0)).any()):
        _read_ranks_slow(path)  # raises, naming the line
        raise FormatError(f"{path}: malformed ranks file")
    q = values.reshape(-1, 4).astype(np.uint32)
    word = (q[:, 0] << 18) | (q[:, 1] << 12) | (q[:, 2] << 6) | q[:, 3]
    out = np.empty((q.shape[0], 3), np.uint8)
    out[:, 0] = word >> 16
    out[:, 1] = (word >> 8) & 0xFF
    out[:, 2] = word & 0xFF
    decoded = out.reshape(-1)
    keep = np.ones(decoded.size, bool)
    last = ends // 4 * 3  # end of each token's decoded groups
    keep[last[n_pad >= 1] - 1] = False
    keep[last[n_pad == 2] - 2] = False
    return decoded[keep], lengths // 4 * 3 - n_pad, ranks


def _last_cut(text: str, lo: int, specials: regex.Pattern | None) -> int:
    """The last cut at or after ``lo``: before a special token, or after a newline
    followed by a non-space character (0 if none)."""
    cut = 0
    k = text.rfind("\n", lo, len(text) - 1)
    while k >= lo:
        if not text[k + 1].isspace():  # regex's \s is a subset of str.isspace
            cut = k + 1
            break
        k = text.rfind("\n", lo, k)
    if specials is not None:
        for m in specials.finditer(text, max(lo, cut)):
            cut = max(cut, m.start())
    return cut


def _before_special(text: str, cut: int, special_tokens) -> int:
    """``cut``, or the start of a special token that spans it (a newline inside one), or of
    one that the text's end cuts off (the next block may complete it): no special token is
    cut in two. (A loop, not a recursion: a run of a token that overlaps itself, such as
    "\n\n", would move the cut once per occurrence; a one-character token's run is jumped.)"""
    moved = True
    while moved:
        moved = False
        for s in special_tokens:
            for k in range(max(0, cut - len(s) + 1), cut):
                if text.startswith(s, k) or (len(text) - k < len(s) and s.startswith(text[k:])):
                    cut, moved = k, True
                    if len(set(s)) == 1:  # ("\n\n": to the start of its character's run at once)
                        cut -= len(text[:cut]) - len(text[:cut].rstrip(s[0]))
                    break
            if moved:
                break
    return cut


def _chunks(path, special_tokens, size=1 << 22) -> Iterator[tuple[str, str]]:
    """Read a UTF-8 file in pieces cut where no pre-token can span the cut: ``(piece,
    lookahead)`` pairs, ``lookahead`` the character after a cut at a newline ("" after the
    last piece or before a special token).

    A cut goes right before a special token, or right after a newline that
    is followed by a non-space character (the named patterns never join a
    newline with what follows it then). What follows still counts: a run of
    spaces at the end of a text is one pre-token (gpt2's ``\\s++$``), but two
    before a letter; so a piece is pre-tokenized with its lookahead after it,
    whose own pre-token is then left out (:func:`_count_piece`).
    """
    newline_special = any("\n" in s for s in special_tokens)
    by_length = [regex.escape(s) for s in sorted(special_tokens, key=lambda t: (-len(t), t))]
    # (the special tokens first: a newline that starts one is not a cut)
    boundary = regex.compile("|".join(by_length + [r"\n(?=\S)"]))
    specials = regex.compile("|".join(by_length)) if special_tokens else None
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read
    with open(path, "rb") as f:
        rest = ""
        while True:
            raw = f.read(size)
            pending = len(decoder.getstate()[0])
            try:
                block = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}, byte {offset - pending + e.start}: not UTF-8 "
                                 f"({e.reason})") from None
            offset += len(raw)
            if not raw:
                if rest:
                    yield rest, ""
                return
            text = rest + block
            lo = max(0, len(text) - size)
            if newline_special:  # a newline may sit inside a special token: one regex
                cut = 0
                for m in boundary.finditer(text, lo):
                    cut = m.start() + 1 if m.group() == "\n" else m.start()
            else:
                cut = _last_cut(text, lo, specials)
            cut = _before_special(text, cut, special_tokens)
            if cut <= 0:
                rest = text
                continue
            tail = text[cut:]
            if any(len(tail) < len(s) and s.startswith(tail) for s in special_tokens):
                rest = text  # (what follows the cut may be a special token: read on)
                continue
            before_special = specials is not None and specials.match(text, cut) is not None
            yield text[:cut], "" if before_special else text[cut]
            rest = tail


def _count_piece(tok: ByteTokenizer, piece: str, lookahead: str) -> dict[bytes, int]:
    """Pre-token counts of ``piece`` as it lies in its file, before ``lookahead``.

    With a named pattern the lookahead is a pre-token of its own (a cut is a pre-token
    boundary), left out of the counts; other patterns promise nothing of the kind, and
    their pieces are counted alone (as a text that ends there)."""
    if not lookahead or tok._kind < 0:
        return tok._count_bytes([piece])
    counts = tok._count_bytes([piece + lookahead])
    key = lookahead.encode("utf-8")
    counts[key] -= 1
    if not counts[key]:
        del counts[key]
    return counts


def _count_files(tok: ByteTokenizer, files, workers: int) -> dict[bytes, int]:
    """Pre-token counts of files, over chunks cut at newlines or special tokens.

    With ``workers > 1`` the chunks are counted in a thread pool (the
    compiled kernels release the GIL); at most ``2 * workers`` chunks are in
    flight, so memory stays bounded.
    """
    counts: dict[bytes, int] = {}

    def add(part: dict[bytes, int]) -> None:
        for k, v in part.items():
            counts[k] = counts.get(k, 0) + v

    chunks = (c for f in files for c in _chunks(Path(f), tok.special_tokens))
    if workers <= 1:
        for c, la in chunks:
            add(_count_piece(tok, c, la))
        return counts
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(workers) as pool:
        pending: list = []
        for c, la in chunks:
            pending.append(pool.submit(_count_piece, tok, c, la))
            if len(pending) >= 2 * workers:
                add(pending.pop(0).result())
        for fut in pending:
            add(fut.result())
    return counts
