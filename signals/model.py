"""A signal tokenizer: per-channel quantizers feeding one shared UBPE vocabulary."""

from __future__ import annotations

import math

import numpy as np

from ubpe import Tokenizer, split_documents
from ubpe.serialization import FormatError, check_document, content_id, read_document, write_document

from .quantize import QUANTIZERS, UniformQuantizer, quantizer_from_dict

FORMAT = "ubpe.signal-model"
# 2: files carry a checksum and a content id (ubpe.serialization); version 1 is still read
VERSION = 2


class SignalModel:
    """Quantize each channel, then tokenize all channels with one UBPE vocabulary.

    Parameters
    ----------
    n_levels : int, default 1024
        Quantizer levels per channel, which is the tokenizer's alphabet size.
    vocab_size : int, default 4096
        Tokenizer vocabulary size, alphabet included.
    n_candidates : int, default 8
        Merges considered per training round (see :class:`ubpe.Tokenizer`).
    min_frequency : int, default 2
        Minimum pair count for a merge.
    doc_length : int or None, default None
        Samples per training document; None makes each channel one document.
    progress : bool or None
        Progress bar while training (None: only on a terminal).

    Attributes
    ----------
    channel_names_ : list of str
    quantizers_ : list of UniformQuantizer, one per channel
    tokenizer_ : ubpe.Tokenizer
    """

    def __init__(self, n_levels: int = 1024, vocab_size: int = 4096, *, n_candidates: int = 8,
                 min_frequency: int = 2, doc_length: int | None = None, progress=None):
        self.n_levels = n_levels
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.min_frequency = min_frequency
        self.doc_length = doc_length
        self.progress = progress

    def fit(self, channels, names=None) -> SignalModel:
        """Fit one quantizer per channel and the tokenizer on all of them.

        Parameters
        ----------
        channels : sequence of array-like, each of shape (n_samples_i,)
            The channels, of any lengths (int or float, finite).
        names : sequence of str, optional

        Raises
        ------
        ValueError
            If there are no samples, a value is non-finite, or a parameter
            is out of range (``vocab_size < n_levels``, ``doc_length < 2``).
        """
        channels = [np.asarray(c) for c in channels]
        if not channels or sum(c.size for c in channels) == 0:
            raise ValueError("no samples to train on")
        if self.doc_length is not None and self.doc_length < 2:
            raise ValueError(f"doc_length must be at least 2 samples, got {self.doc_length}")
        self.tokenizer_ = Tokenizer(self.n_levels, self.vocab_size,
                                    n_candidates=self.n_candidates,
                                    min_frequency=self.min_frequency, progress=self.progress)
        self.channel_names_ = list(names) if names is not None else [
            f"ch{i}" for i in range(len(channels))]
        self.quantizers_ = []
        docs = []
        for name, c in zip(self.channel_names_, channels):
            if c.size == 0:
                raise ValueError(f"channel {name!r} is empty")
            try:
                q = UniformQuantizer(self.n_levels).fit(c)
            except ValueError as e:
                raise ValueError(f"channel {name!r}: {e}") from None
            self.quantizers_.append(q)
            docs.extend(split_documents(q.encode(c), self.doc_length))
        self.tokenizer_.fit(docs)
        return self

    def encode(self, channels, *, method: str = "merges", beam: int = 8) -> list[np.ndarray]:
        """Quantize and tokenize each channel; one int32 token array per channel.

        ``method`` and ``beam`` are passed to :meth:`ubpe.Tokenizer.encode`.
        """
        return [np.concatenate(docs)
                for docs in self.encode_documents(channels, method=method, beam=beam)]

    def encode_documents(self, channels, *, method: str = "merges", top_n: int = 1,
                         beam: int = 8) -> list[list]:
        """Per channel, the encoding of each of its documents (``doc_length`` samples).

        Each entry is what :meth:`ubpe.Tokenizer.encode` returns for that
        document: an array, or with ``top_n > 1`` a list of (array, score).
        """
        self._check_channels(channels)
        out: list[list] = []
        for q, c in zip(self.quantizers_, channels):
            docs = split_documents(q.encode(np.asarray(c)), self.doc_length)
            if top_n > 1:
                out.append(self.tokenizer_.encode_top_n_batch(docs, top_n, beam=beam))
            else:
                out.append(self.tokenizer_.encode_batch(docs, method=method, beam=beam))
        return out

    def decode(self, token_channels) -> list[np.ndarray]:
        """Token arrays back to (quantized) samples, one float64 array per channel."""
        self._check_channels(token_channels)
        return [q.decode(self.tokenizer_.decode(t))
                for q, t in zip(self.quantizers_, token_channels)]

    def _check_channels(self, channels):
        if not hasattr(self, "quantizers_"):
            raise RuntimeError("this SignalModel is not fitted yet; call fit() or load()")
        if len(channels) != len(self.quantizers_):
            raise ValueError(f"expected {len(self.quantizers_)} channels, got {len(channels)}")

    def get_params(self) -> dict:
        return {"n_levels": self.n_levels, "vocab_size": self.vocab_size,
                "n_candidates": self.n_candidates, "min_frequency": self.min_frequency,
                "doc_length": self.doc_length}

    def to_dict(self) -> dict:
        """The fitted model as a JSON-ready document (what :meth:`save` writes, unsealed)."""
        if not hasattr(self, "quantizers_"):
            raise RuntimeError("this SignalModel is not fitted yet; call fit() or load()")
        return {"format": FORMAT, "version": VERSION, "params": self.get_params(),
                "channels": [{"name": n, "quantizer": q.to_dict()}
                             for n, q in zip(self.channel_names_, self.quantizers_)],
                "tokenizer": self.tokenizer_.to_dict()}

    def content_id(self) -> str:
        """The model's content id, ``"sha256:"`` and 64 hex digits.

        The same as the ``content_id`` field of the file :meth:`save` writes
        (see :func:`ubpe.serialization.content_id`): a container or a log can
        name the exact model it was made with.
        """
        return content_id(self.to_dict())

    def save(self, path) -> None:
        """Write the model (quantizers, tokenizer, settings) as one JSON file, atomically.

        The file is a ``ubpe.signal-model`` document of version 2, with a
        checksum and a content id over its canonical content (see
        :mod:`ubpe.serialization`).
        """
        d = self.to_dict()
        write_document(path, d.pop("format"), d.pop("version"), d)

    @classmethod
    def load(cls, path) -> SignalModel:
        """Read a model written by :meth:`save` (format version 1 or 2).

        Sizes are checked before allocation: the quantizers' level counts
        against ``n_levels``, the tokenizer against the document and the
        limits of :func:`ubpe.serialization.get_limits`.

        Raises
        ------
        FormatError
            If the file is not a signal model, is of a newer version, fails
            its checksum (version 2), or holds inconsistent or oversized
            content (names the file and the reason).
        """
        return cls.from_dict(read_document(path, FORMAT, VERSION), source=str(path))

    @classmethod
    def from_dict(cls, doc: dict, source="signal model") -> SignalModel:
        """Rebuild a fitted model from :meth:`to_dict` output; see :meth:`load`."""
        check_document(doc, FORMAT, VERSION, source)
        try:
            params = doc["params"]
            if not isinstance(params, dict):
                raise TypeError("'params' is not an object")
            m = cls(**params, progress=False)
            n_levels = m.n_levels
            if not isinstance(n_levels, int) or isinstance(n_levels, bool) or n_levels < 2:
                raise ValueError(f"n_levels must be an integer >= 2, got {n_levels!r}")
            if m.doc_length is not None and (not isinstance(m.doc_length, int)
                                             or m.doc_length < 2):
                raise ValueError(f"doc_length must be null or an integer >= 2, got {m.doc_length!r}")
            channels = doc["channels"]
            if not isinstance(channels, list) or not channels:
                raise ValueError("'channels' must be a non-empty list")
            names = []
            for i, ch in enumerate(channels):
                if not isinstance(ch, dict) or not isinstance(ch.get("name"), str):
                    raise ValueError(f"channel {i} has no name")
                _check_quantizer(ch.get("quantizer"), n_levels, f"channel {ch['name']!r}")
                names.append(ch["name"])
            if len(set(names)) != len(names):
                raise ValueError("two channels have the same name")
            tok_doc = doc["tokenizer"]
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"{source}: malformed signal model ({type(e).__name__}: {e})") \
                from None
        tok = Tokenizer.from_dict(tok_doc, source=f"{source}: tokenizer")
        if tok.alphabet_size != n_levels:
            raise FormatError(f"{source}: the tokenizer's alphabet ({tok.alphabet_size:,}) is not "
                              f"n_levels ({n_levels:,})")
        try:
            m.quantizers_ = [quantizer_from_dict(ch["quantizer"]) for ch in channels]
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            raise FormatError(f"{source}: malformed signal model ({e})") from None
        m.channel_names_ = names
        m.tokenizer_ = tok
        return m


def _check_quantizer(d, n_levels: int, where: str) -> None:
    """Check a quantizer's dict against ``n_levels`` before it allocates anything.

    Raises ``ValueError`` naming the channel.
    """
    if not isinstance(d, dict):
        raise ValueError(f"{where}: no quantizer")
    kind = d.get("kind")
    if kind not in QUANTIZERS:
        raise ValueError(f"{where}: unknown quantizer kind {kind!r}")
    if d.get("n_levels") != n_levels:
        raise ValueError(f"{where}: the quantizer has {d.get('n_levels')!r} levels, "
                         f"the model {n_levels}")
    lossless = d.get("lossless")
    if not (isinstance(lossless, list) and len(lossless) == 1
            and isinstance(lossless[0], bool)):
        raise ValueError(f"{where}: 'lossless' must be one boolean")

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if kind == "uniform":
        rng = d.get("range")
        if not (isinstance(rng, list) and len(rng) == 1 and isinstance(rng[0], list)
                and len(rng[0]) == 3):
            raise ValueError(f"{where}: 'range' must be one [min, max, bins] triple")
        lo, hi, k = rng[0]
        if not (number(lo) and number(hi) and lo < hi):
            raise ValueError(f"{where}: the range [{lo!r}, {hi!r}] is not two finite numbers, "
                             f"min < max")
        if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= n_levels):
            raise ValueError(f"{where}: {k!r} bins, expected 1..{n_levels}")
        return
    edges, book = d.get("bin_edges"), d.get("codebook")
    if not (isinstance(edges, list) and isinstance(book, list) and len(edges) == len(book) == 1
            and isinstance(edges[0], list) and isinstance(book[0], list)
            and 1 <= len(book[0]) <= n_levels and len(edges[0]) == len(book[0]) + 1):
        raise ValueError(f"{where}: bin edges and codebook must hold k + 1 and k numbers, "
                         f"k in 1..{n_levels}")
    if not all(number(v) for v in edges[0] + book[0]):
        raise ValueError(f"{where}: bin edges and codebook must be finite numbers")
