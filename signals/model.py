"""A signal tokenizer: per-channel quantizers feeding one shared UBPE vocabulary."""

from __future__ import annotations

import numpy as np

from ubpe import Tokenizer, split_documents
from ubpe.serialization import FormatError, read_document, write_document

from .quantize import UniformQuantizer, quantizer_from_dict

FORMAT = "ubpe.signal-model"
VERSION = 1


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

    def save(self, path) -> None:
        """Write the model (quantizers, tokenizer, settings) as one JSON file, atomically."""
        write_document(path, FORMAT, VERSION, {
            "params": self.get_params(),
            "channels": [{"name": n, "quantizer": q.to_dict()}
                         for n, q in zip(self.channel_names_, self.quantizers_)],
            "tokenizer": self.tokenizer_.to_dict()})

    @classmethod
    def load(cls, path) -> SignalModel:
        """Read a model written by :meth:`save`.

        Raises
        ------
        FormatError
            If the file is not a signal model or is of a newer version.
        """
        doc = read_document(path, FORMAT, VERSION)
        try:
            m = cls(**doc["params"], progress=False)
            m.channel_names_ = [c["name"] for c in doc["channels"]]
            m.quantizers_ = [quantizer_from_dict(c["quantizer"]) for c in doc["channels"]]
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"{path}: malformed signal model ({e})") from None
        m.tokenizer_ = Tokenizer.from_dict(doc["tokenizer"], source=f"{path}: tokenizer")
        return m
