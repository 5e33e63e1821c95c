"""Byte-level BPE for text, on the UBPE core (UTF-8 bytes as an alphabet of 256).

Text is cut into pre-tokens by a regular expression (the ``regex`` package),
each pre-token is encoded on its own, and special tokens are never split or
merged: GPT-2's design (Radford et al., 2019, "Language Models are
Unsupervised Multitask Learners"), as in tiktoken and Hugging Face
``tokenizers``. Models interchange with both: :meth:`ByteTokenizer.to_tiktoken`,
:meth:`ByteTokenizer.from_tiktoken`, :meth:`ByteTokenizer.to_huggingface`.
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import regex

from .serialization import FormatError, read_document, write_document
from .tokenizer import Tokenizer

FORMAT = "ubpe.text-tokenizer"
VERSION = 1

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

_CACHE_LIMIT = 200_000


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


class ByteTokenizer:
    """Byte-level BPE tokenizer for text.

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
        "o200k", "llama3"), any regular expression (``regex`` syntax), or
        None for no splitting. Text between matches is kept as pre-tokens of
        its own: nothing is ever dropped.
    special_tokens : sequence of str, default ()
        Strings such as ``"<|endoftext|>"`` that are never split or merged.
    min_frequency : int, default 2
        Minimum (weighted) pair count for a merge.
    progress : bool or None
        Progress bar while training (None: only on a terminal).

    Attributes
    ----------
    tokenizer_ : ubpe.Tokenizer
        The core model over bytes, with ``token_order="rank"``.
    special_tokens_ : dict of str to int
        Special token ids.
    byte_ids_ : ndarray of shape (256,), int64
        Public id of each single byte (the identity unless loaded from a
        tiktoken file whose single-byte ranks are permuted).
    """

    def __init__(self, vocab_size: int = 8192, *, n_candidates: int = 1, pattern="gpt2",
                 special_tokens=(), min_frequency: int = 2, progress=None):
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.pattern = pattern
        self.special_tokens = tuple(special_tokens)
        self.min_frequency = min_frequency
        self.progress = progress

    # ------------------------------------------------------------- helpers
    @property
    def pattern_str(self) -> str | None:
        """The regular expression used for pre-tokenization (None: no splitting)."""
        if self.pattern is None:
            return None
        return PATTERNS.get(self.pattern, self.pattern)

    def _compile(self):
        pat = self.pattern_str
        try:
            self._regex = regex.compile(pat) if pat is not None else None
        except regex.error as e:
            raise ValueError(f"invalid pre-tokenization pattern {pat!r}: {e}") from None
        specials = sorted(self.special_tokens, key=len, reverse=True)
        self._special_regex = (regex.compile("|".join(regex.escape(s) for s in specials))
                               if specials else None)
        self._cache = {}

    def pretokenize(self, text: str) -> list[str]:
        """Cut ordinary text (no special tokens) into pre-tokens; ``"".join`` gives it back."""
        if not hasattr(self, "_regex"):
            self._compile()
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

    def _split_specials(self, text: str, allowed) -> list[tuple[str, bool]]:
        """Cut text at the allowed special tokens: (segment, is_special) pairs."""
        if not allowed or self._special_regex is None:
            return [(text, False)] if text else []
        out, pos = [], 0
        for m in self._special_regex.finditer(text):
            if m.group() not in allowed:
                continue
            if m.start() > pos:
                out.append((text[pos:m.start()], False))
            out.append((m.group(), True))
            pos = m.end()
        if pos < len(text):
            out.append((text[pos:], False))
        return out

    # ----------------------------------------------------------------- fit
    def count_pretokens(self, texts: Iterable[str]) -> Counter:
        """Pre-token counts of texts, split at special tokens first."""
        self._compile()
        counts: Counter = Counter()
        for text in texts:
            for segment, special in self._split_specials(text, set(self.special_tokens)):
                if not special:
                    counts.update(self.pretokenize(segment))
        return counts

    def fit(self, corpus: Iterable, *, workers: int = 1) -> ByteTokenizer:
        """Train on texts and/or files.

        Parameters
        ----------
        corpus : iterable of str or os.PathLike
            A ``str`` is text; a path (``pathlib.Path``) is a UTF-8 file,
            read in chunks cut at a newline or special token, so no pre-token
            is split.
        workers : int, default 1
            Processes for pre-tokenizing files.

        Pre-tokens are counted once and trained on as documents with
        multiplicities; special tokens split the text and never enter pair
        counts.

        Raises
        ------
        ValueError
            If ``vocab_size < 256``, the pattern is invalid, or a special
            token is empty.
        UnicodeDecodeError
            If a file is not UTF-8.
        """
        if any(not s for s in self.special_tokens):
            raise ValueError("special tokens must be non-empty strings")
        self._compile()
        counts: Counter = Counter()
        texts: list[str] = []
        files: list[os.PathLike] = []
        for item in corpus:
            (files if isinstance(item, os.PathLike) else texts).append(item)
        counts.update(self.count_pretokens(texts))
        if files:
            counts.update(_count_files(self, files, workers))
        pieces = list(counts)
        docs = [np.frombuffer(p.encode("utf-8"), np.uint8) for p in pieces]
        weights = np.fromiter((counts[p] for p in pieces), np.int64, len(pieces))
        self.tokenizer_ = Tokenizer(256, self.vocab_size, n_candidates=self.n_candidates,
                                    min_frequency=self.min_frequency, token_order="rank",
                                    progress=self.progress).fit(docs, weights)
        self._finish(np.arange(256))
        return self

    def _finish(self, byte_ids):
        """Set the id maps once ``tokenizer_`` is fitted or loaded."""
        n = self.tokenizer_.n_tokens_
        self.byte_ids_ = np.asarray(byte_ids, np.int64)
        self._to_public = np.arange(n, dtype=np.int64)
        self._to_public[:256] = self.byte_ids_
        self._to_internal = np.empty(n, np.int64)
        self._to_internal[self._to_public] = np.arange(n)
        self.special_tokens_ = {s: n + i for i, s in enumerate(self.special_tokens)}
        self._special_by_id = {i: s for s, i in self.special_tokens_.items()}
        self._compile()

    @property
    def n_vocab(self) -> int:
        """Ordinary plus special tokens."""
        return self.tokenizer_.n_tokens_ + len(self.special_tokens_)

    # -------------------------------------------------------------- encode
    def _encode_ordinary(self, text: str, out: list) -> None:
        pieces = self.pretokenize(text)
        cache = self._cache
        missing = list({p for p in pieces if p not in cache})
        if missing:
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            enc = self.tokenizer_.encode_batch(
                [np.frombuffer(p.encode("utf-8"), np.uint8) for p in missing])
            for p, ids in zip(missing, enc):
                cache[p] = self._to_public[ids].tolist()
        for p in pieces:
            out.extend(cache[p])

    def encode(self, text: str, *, allowed_special=frozenset(),
               disallowed_special="all") -> list[int]:
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
            character offset).
        """
        self._check_fitted()
        allowed = set(self.special_tokens) if allowed_special == "all" else set(allowed_special)
        unknown = allowed - set(self.special_tokens)
        if unknown:
            raise ValueError(f"not special tokens of this model: {sorted(unknown)}")
        disallowed = (set(self.special_tokens) - allowed if disallowed_special == "all"
                      else set(disallowed_special))
        if disallowed and self._special_regex is not None:
            for m in self._special_regex.finditer(text):
                if m.group() in disallowed:
                    raise ValueError(
                        f"text contains the special token {m.group()!r} at character "
                        f"{m.start()}; pass allowed_special to encode it as a special token, "
                        f"or disallowed_special=() to encode it as ordinary text")
        out: list[int] = []
        for segment, special in self._split_specials(text, allowed):
            if special:
                out.append(self.special_tokens_[segment])
            else:
                self._encode_ordinary(segment, out)
        return out

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text with special tokens treated as ordinary text."""
        return self.encode(text, disallowed_special=())

    def encode_batch(self, texts, **kwargs) -> list[list[int]]:
        """Encode several texts; keyword options as in :meth:`encode`."""
        return [self.encode(t, **kwargs) for t in texts]

    def encode_iterable(self, chunks: Iterable[str], **kwargs) -> Iterator[int]:
        """Encode a stream of text chunks (a file's lines, say) lazily.

        Yields the same ids as ``encode("".join(chunks))`` while holding only
        a few pre-tokens of text back: the last two pre-tokens of what has
        been read may still change with the text that follows, everything
        before them cannot.
        """
        self._check_fitted()
        buf = ""
        for chunk in chunks:
            buf += chunk
            cut = self._safe_cut(buf)
            if cut:
                yield from self.encode(buf[:cut], **kwargs)
                buf = buf[cut:]
        if buf:
            yield from self.encode(buf, **kwargs)

    def _safe_cut(self, text: str) -> int:
        """A prefix length after which more text cannot change the encoding.

        All but the last two pre-tokens, and never right after the start of
        what could be a special token (it may complete in the next chunk).
        """
        pieces = self.pretokenize(text)
        if len(pieces) <= 2:
            return 0
        cut = len(text) - len(pieces[-1]) - len(pieces[-2])
        for s in self.special_tokens:
            if any(text[:cut].endswith(s[:k]) for k in range(1, len(s))):
                return 0
        return cut

    # -------------------------------------------------------------- decode
    def decode_bytes(self, ids) -> bytes:
        """Exact bytes of token ids (special tokens as their UTF-8 strings).

        Raises
        ------
        ValueError
            If an id is not in the vocabulary (names it and its position).
        """
        self._check_fitted()
        ids = np.asarray(ids, np.int64).reshape(-1)
        n = self.tokenizer_.n_tokens_
        bad = np.flatnonzero((ids < 0) | (ids >= self.n_vocab))
        if bad.size:
            raise ValueError(f"position {bad[0]}: token id {ids[bad[0]]} is not in the "
                             f"vocabulary 0..{self.n_vocab - 1}")
        special = np.flatnonzero(ids >= n)
        parts, start = [], 0
        for k in list(special) + [ids.size]:
            if k > start:
                parts.append(self.tokenizer_.decode(self._to_internal[ids[start:k]])
                             .astype(np.uint8).tobytes())
            if k < ids.size:
                parts.append(self._special_by_id[int(ids[k])].encode("utf-8"))
            start = k + 1
        return b"".join(parts)

    def decode(self, ids, errors: str = "replace") -> str:
        """Text of token ids; invalid UTF-8 becomes U+FFFD (``errors`` as in bytes.decode)."""
        return self.decode_bytes(ids).decode("utf-8", errors=errors)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token id."""
        return self.decode_bytes([token_id])

    def _check_fitted(self):
        if not hasattr(self, "tokenizer_"):
            raise RuntimeError("this ByteTokenizer is not fitted yet; call fit() or load()")

    # ----------------------------------------------------------- save/load
    def save(self, path) -> None:
        """Write the model as one versioned JSON file, atomically."""
        self._check_fitted()
        write_document(path, FORMAT, VERSION, {
            "pattern": self.pattern, "pattern_str": self.pattern_str,
            "special_tokens": self.special_tokens_,
            "byte_ids": self.byte_ids_.tolist(),
            "params": {"vocab_size": self.vocab_size, "n_candidates": self.n_candidates,
                       "min_frequency": self.min_frequency},
            "tokenizer": self.tokenizer_.to_dict()})

    @classmethod
    def load(cls, path) -> ByteTokenizer:
        """Read a model written by :meth:`save`.

        Raises
        ------
        FormatError
            If the file is not a ubpe text tokenizer or is of a newer version.
        """
        doc = read_document(path, FORMAT, VERSION)
        try:
            specials = sorted(doc["special_tokens"], key=doc["special_tokens"].get)
            tok = cls(**doc["params"], pattern=doc["pattern"], special_tokens=specials)
            tok.tokenizer_ = Tokenizer.from_dict(doc["tokenizer"], source=f"{path}: tokenizer")
            tok._finish(doc["byte_ids"])
        except (KeyError, TypeError, ValueError) as e:
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
        ranks: dict[bytes, int] = {}
        for i in range(self.tokenizer_.n_tokens_):
            b = self.token_bytes(i)
            if b in ranks:
                raise ValueError(f"token ids {ranks[b]} and {i} have the same bytes {b!r}")
            ranks[b] = i
        return ranks

    def to_tiktoken(self, name: str = "ubpe"):
        """A ``tiktoken.Encoding`` with this model's ranks, pattern and special tokens.

        Raises
        ------
        ValueError
            If the model has no pre-tokenization pattern (tiktoken needs one).
        """
        import tiktoken
        if self.pattern_str is None:
            raise ValueError("tiktoken needs a pre-tokenization pattern; this model has none")
        return tiktoken.Encoding(name, pat_str=self.pattern_str,
                                 mergeable_ranks=self.mergeable_ranks(),
                                 special_tokens=dict(self.special_tokens_))

    def save_tiktoken(self, path) -> None:
        """Write a tiktoken ranks file: ``base64(token bytes) rank`` per line."""
        from .serialization import atomic_write_bytes
        lines = [f"{base64.b64encode(b).decode()} {r}" for b, r in self.mergeable_ranks().items()]
        atomic_write_bytes(path, ("\n".join(lines) + "\n").encode())

    @classmethod
    def from_tiktoken(cls, ranks, *, pattern="cl100k", special_tokens=None) -> ByteTokenizer:
        """Build a tokenizer from tiktoken ranks, recovering the merges.

        Parameters
        ----------
        ranks : dict of bytes to int, or path of a ranks file
            ``base64-token rank`` per line; ranks must be 0..n-1 with the 256
            single bytes first (in any order: their permutation is kept in
            ``byte_ids_``).
        pattern : str, default "cl100k"
        special_tokens : dict of str to int, optional
            Their ids must follow the ordinary tokens.

        Each token's merge is found by running BPE on its bytes with only
        the lower ranks (minbpe's ``recover_merges``).

        Raises
        ------
        FormatError
            On a malformed file, ranks that are not 0..n-1, or a token that no
            pair of lower-ranked tokens forms.
        """
        if not isinstance(ranks, dict):
            ranks = _read_ranks(ranks)
        by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
        if [r for _, r in by_rank] != list(range(len(by_rank))):
            raise FormatError("tiktoken ranks must be 0..n-1 without gaps")
        if sorted(len(b) for b, _ in by_rank[:256]) != [1] * 256:
            raise FormatError("the first 256 ranks must be the 256 single bytes")
        byte_ids = np.empty(256, np.int64)
        for b, r in by_rank[:256]:
            byte_ids[b[0]] = r
        internal = {bytes([b]): b for b in range(256)}  # token bytes -> internal id
        merges = []
        for token, r in by_rank[256:]:
            parts = _bpe_parts(ranks, token, r)
            if parts is None:
                raise FormatError(f"rank {r} ({token!r}) is not formed by two lower-ranked tokens")
            merges.append([internal[parts[0]], internal[parts[1]], r])
            internal[token] = r
        specials = dict(special_tokens or {})
        if sorted(specials.values()) != list(range(len(ranks), len(ranks) + len(specials))):
            raise FormatError(f"special token ids must follow the ordinary tokens "
                              f"({len(ranks)}..)")
        m = len(merges)
        tok = cls(256 + m, pattern=pattern, special_tokens=sorted(specials, key=lambda s: specials[s]))
        tok.tokenizer_ = Tokenizer.from_dict({
            "format": "ubpe.tokenizer", "version": 1,
            "params": {"alphabet_size": 256, "vocab_size": 256 + m, "n_candidates": 1,
                       "min_frequency": 2, "token_order": "rank"},
            "n_documents": 0, "merges": merges, "weights": [0.0] * m, "counts": [0] * m})
        tok._finish(byte_ids)
        return tok

    def to_huggingface(self, path) -> None:
        """Write a Hugging Face ``tokenizer.json`` (BPE model, Split + ByteLevel).

        ``tokenizers.Tokenizer.from_file(path)`` encodes text to the same ids.
        Needs the ``tokenizers`` package.
        """
        from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer
        self._check_fitted()
        chars = _byte_chars()
        as_chars = lambda b: "".join(chars[x] for x in b)
        vocab = {as_chars(self.token_bytes(i)): i for i in range(self.tokenizer_.n_tokens_)}
        m = self.tokenizer_.merges_
        to_bytes = lambda t: self.tokenizer_.decode([t]).astype(np.uint8).tobytes()
        merges = [(as_chars(to_bytes(left)), as_chars(to_bytes(right)))
                  for left, right, _ in m.tolist()]
        hf = HFTokenizer(models.BPE(vocab=vocab, merges=merges))
        steps: list = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        if self.pattern_str is not None:
            steps.insert(0, pre_tokenizers.Split(Regex(self.pattern_str), behavior="isolated"))
        hf.pre_tokenizer = pre_tokenizers.Sequence(steps)
        hf.decoder = decoders.ByteLevel()
        hf.add_special_tokens([AddedToken(s, special=True) for s in self.special_tokens])
        from .serialization import atomic_write_bytes
        atomic_write_bytes(path, hf.to_str().encode())


def _bpe_parts(ranks, token: bytes, max_rank: int):
    """Run BPE on ``token`` with ranks below ``max_rank``; its two final parts."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < max_rank and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            return None
        parts[best: best + 2] = [parts[best] + parts[best + 1]]
    return tuple(parts) if len(parts) == 2 else None


def _read_ranks(path) -> dict[bytes, int]:
    ranks = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
            except ValueError as e:
                raise FormatError(f"{path}, line {n}: expected 'base64-token rank' ({e})") from None
    return ranks


def _chunks(path, special_tokens, size=1 << 22) -> Iterator[str]:
    """Read a UTF-8 file in pieces cut where no pre-token can span the cut.

    A cut goes right before a special token, or right after a newline that
    is followed by a non-space character (the named patterns never join a
    newline with what follows it then).
    """
    boundary = regex.compile("|".join([r"\n(?=\S)"] + [regex.escape(s) for s in special_tokens]))
    with open(path, encoding="utf-8", newline="") as f:
        rest = ""
        while True:
            block = f.read(size)
            if not block:
                if rest:
                    yield rest
                return
            text = rest + block
            cut = 0
            for m in boundary.finditer(text, max(0, len(text) - size)):
                cut = m.start() + 1 if m.group() == "\n" else m.start()
            if cut <= 0:
                rest = text
                continue
            yield text[:cut]
            rest = text[cut:]


def _count_chunk(args):
    tok, chunk = args
    return tok.count_pretokens([chunk])


def _count_files(tok: ByteTokenizer, files, workers: int) -> Counter:
    """Pre-token counts of files, over chunks cut at newlines or special tokens."""
    counts: Counter = Counter()
    chunks = (c for f in files for c in _chunks(Path(f), tok.special_tokens))
    if workers <= 1:
        for c in chunks:
            counts.update(tok.count_pretokens([c]))
        return counts
    import multiprocessing as mp
    light = ByteTokenizer(pattern=tok.pattern, special_tokens=tok.special_tokens)
    with mp.get_context("spawn").Pool(workers) as pool:
        for part in pool.imap_unordered(_count_chunk, ((light, c) for c in chunks)):
            counts.update(part)
    return counts
