"""UBPE tokenizer: byte-pair encoding over any integer alphabet."""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _engine, _segment
from .serialization import (
    FormatError,
    check_document,
    get_limits,
    plain_params,
    read_document,
    write_document,
)

FORMAT = "ubpe.tokenizer"
# 2: files carry a checksum and a content id (ubpe.serialization); version 1 is still read
VERSION = 2


def split_documents(symbols: np.ndarray, doc_length: int | None) -> list[np.ndarray]:
    """Cut one sequence into documents of ``doc_length`` symbols (the last one shorter).

    Parameters
    ----------
    symbols : ndarray, shape (n,)
    doc_length : int or None
        None (or ``n <= doc_length``) keeps the sequence as one document.

    Returns
    -------
    list of ndarray
        Views into ``symbols``, in order; their concatenation is ``symbols``.
    """
    if doc_length is None or symbols.size <= doc_length:
        return [symbols]
    return [symbols[i: i + doc_length] for i in range(0, symbols.size, doc_length)]


class NotFittedError(ValueError, AttributeError):
    """A fitted attribute or method of a model that is not fitted yet (as scikit-learn's
    ``NotFittedError``, a ValueError and an AttributeError: ``hasattr(model, "n_tokens_")`` is
    False)."""


def _check_positive(name: str, v: Any) -> None:
    """ValueError unless ``v`` is an integer (not a bool) of at least 1."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be an integer of at least 1, got {v!r}")


def _as_symbols(doc: Any, d: int, alphabet_size: int) -> np.ndarray:
    """Document ``d`` as an array; a sequence of Python and numpy integers that numpy would
    promote to float64 (int64 with uint64) or hold as objects (beyond int64), as integers."""
    try:
        arr = np.asarray(doc)
    except OverflowError:  # (an int beyond 64 bits)
        arr = np.asarray(doc, dtype=object)
    if arr.dtype.kind in "fO" and arr.ndim == 1 and arr.size and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in doc):
        values = [int(v) for v in doc]
        out = [i for i, v in enumerate(values) if not 0 <= v < alphabet_size]
        if out:
            raise ValueError(f"document {d}, position {out[0]}: symbol {values[out[0]]} is "
                             f"outside the alphabet 0..{alphabet_size - 1}")
        return np.array(values, np.int64)
    return arr


def _flatten_documents(corpus, alphabet_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Check a corpus and concatenate it.

    Returns the symbols of all documents, shape (n_symbols,) int32, and the
    document offsets, shape (n_documents + 1,) int64. Raises ValueError or
    TypeError naming the document and position of the first bad symbol.
    """
    if isinstance(corpus, np.ndarray) and corpus.ndim == 1:
        raise TypeError("expected a sequence of documents (1-D arrays), got one 1-D array; "
                        "wrap it in a list")
    docs = [doc if type(doc) is np.ndarray else _as_symbols(doc, d, alphabet_size)
            for d, doc in enumerate(corpus)]
    if any(arr.ndim != 1 for arr in docs):
        d = next(d for d, arr in enumerate(docs) if arr.ndim != 1)
        raise ValueError(f"document {d}: expected a 1-D sequence, got shape {docs[d].shape}")
    if any(arr.dtype.kind not in "iu" and arr.size for arr in docs):
        d = next(d for d, arr in enumerate(docs) if arr.dtype.kind not in "iu" and arr.size)
        raise TypeError(f"document {d}: expected integers, got dtype {docs[d].dtype}")
    for d, arr in enumerate(docs):  # (uint64 with int64 would concatenate to float64)
        if arr.dtype == np.uint64:
            big = np.flatnonzero(arr >= alphabet_size)
            if big.size:
                raise ValueError(f"document {d}, position {big[0]}: symbol {arr[big[0]]} is "
                                 f"outside the alphabet 0..{alphabet_size - 1}")
            docs[d] = arr.astype(np.int64)
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([arr.size for arr in docs], out=offsets[1:])
    flat = np.concatenate(docs) if docs else np.empty(0, np.int64)
    if flat.size:
        bad = np.flatnonzero((flat < 0) | (flat >= alphabet_size))
        if bad.size:
            d = int(np.searchsorted(offsets, bad[0], side="right")) - 1
            raise ValueError(f"document {d}, position {bad[0] - offsets[d]}: symbol "
                             f"{flat[bad[0]]} is outside the alphabet 0..{alphabet_size - 1}")
    return flat.astype(np.int32), offsets


_PARALLEL_MIN_SYMBOLS = 1 << 16


def _default_threads() -> int:
    """Threads for ``num_threads=None``: ``OMP_NUM_THREADS`` when set (Dask workers set it
    to 1, so that tasks do not oversubscribe the cores), else the CPU count."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)


def _balanced_groups(offsets: np.ndarray, k: int) -> list[tuple[int, int]]:
    """Cut documents ``0..n_docs`` into at most ``k`` runs of about equal symbol count."""
    n_docs = len(offsets) - 1
    if k <= 1 or n_docs <= 1:
        return [(0, n_docs)]
    targets = offsets[-1] * np.arange(1, k) / k
    cuts = np.unique(np.concatenate([[0], np.searchsorted(offsets, targets, side="left"),
                                     [n_docs]]))
    cuts = np.clip(cuts, 0, n_docs)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


class _Progress:
    """A one-line progress bar on a terminal; silent otherwise."""

    def __init__(self, total: int, enabled):
        self.total = total
        self.enabled = sys.stderr.isatty() if enabled is None else bool(enabled)
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        if self.enabled and self.total > 0:
            frac = min(done / self.total, 1.0)
            bar = "#" * int(30 * frac)
            sys.stderr.write(f"\rtraining [{bar:<30}] {done}/{self.total} merges "
                             f"{time.perf_counter() - self.start:.1f}s")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.total > 0:
            sys.stderr.write("\n")


class Tokenizer:
    """Byte-pair encoding over the integer alphabet ``0..alphabet_size-1``.

    Training follows UBPE (the article "UBPE Tokenizers. Creating a BPE
    tokenizer from scratch" by the author of the ``ubpe`` package on PyPI): each round
    merges several non-colliding pairs among the ``n_candidates`` most
    frequent ones, every merged token is weighted by its inverse document
    frequency, then the vocabulary is trimmed to exactly ``vocab_size`` and
    merged tokens are renumbered by weight. ``n_candidates=1`` is classic BPE
    (Sennrich et al., 2016).

    Parameters
    ----------
    alphabet_size : int
        Number of base symbols; documents hold integers in ``[0, alphabet_size)``.
        Any size from 2 to 2**30. Fitting holds about 24 bytes per symbol
        of the alphabet, whatever the corpus (2**24: 465 MB measured above the
        process before the fit, numba's compilation included; 2**30: about
        26 GB), and the ``"shortest"``/``"weighted"`` tables more.
    vocab_size : int
        Size of the final vocabulary, alphabet included (>= ``alphabet_size``).
    n_candidates : int, default 1
        Pairs considered per training round. The first is always merged; a
        later one only if it shares no token with a pair already chosen this
        round and neither border pair it would form with a chosen pair
        (its right token then their left, their right then its left) is at
        least as frequent as it.
    min_frequency : int, default 2
        A pair must occur at least this often (weighted) to be merged.
    token_order : {"weight", "rank"}, default "weight"
        How merged tokens are numbered: ``"weight"`` by IDF weight ascending
        (UBPE; most widespread first), ``"rank"`` in the order they were
        learned, so that token id ``alphabet_size + r`` is the merge of rank
        ``r`` (classic BPE; what tiktoken requires).
    progress : bool or None, default None
        Show a progress bar on stderr while fitting; None shows it only when
        stderr is a terminal.

    Attributes
    ----------
    merges_ : ndarray of shape (n_merges, 3), dtype int64
        ``(left, right, token)`` per merge, in rank order (the order they were
        learned); encoding applies merges in this order.
    weights_ : ndarray of shape (n_merges,), dtype float64
        IDF weight of each merge's token, ``ln((1 + n_documents) / (1 + df))``
        with ``df`` the (weighted) number of documents containing the token
        right after its creation. Aligned with ``merges_``.
    counts_ : ndarray of shape (n_merges,), dtype int64
        Weighted pair count when each merge was chosen.
    n_documents_ : int
        Weighted number of training documents.

    Notes
    -----
    Token ids: ``0..alphabet_size-1`` are the alphabet; merged tokens follow,
    by default ordered by weight ascending (most widespread first), ties by
    rank. A token's df never exceeds that of its two parts (once a pair is
    merged it never reappears), so this order also lists every token after
    its parts.
    """

    def __init__(self, alphabet_size: int, vocab_size: int, *, n_candidates: int = 1,
                 min_frequency: int = 2, token_order: str = "weight", progress=None):
        self.alphabet_size = alphabet_size
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.min_frequency = min_frequency
        self.token_order = token_order
        self.progress = progress
        self._check_params()

    def _check_params(self):
        for name in ("alphabet_size", "vocab_size", "n_candidates", "min_frequency"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"{name} must be an integer, got {v!r}")
        if not 2 <= self.alphabet_size <= 2**30:
            raise ValueError(f"alphabet_size must be in 2..2**30, got {self.alphabet_size}")
        if self.vocab_size < self.alphabet_size:
            raise ValueError(f"vocab_size ({self.vocab_size}) is smaller than the alphabet "
                             f"({self.alphabet_size}); it counts the alphabet plus merged tokens")
        if self.vocab_size > 2**31 - 1:
            raise ValueError(f"vocab_size must be below 2**31, got {self.vocab_size}")
        if self.n_candidates < 1:
            raise ValueError(f"n_candidates must be >= 1, got {self.n_candidates}")
        if self.min_frequency < 1:
            raise ValueError(f"min_frequency must be >= 1, got {self.min_frequency}")
        if self.token_order not in ("weight", "rank"):
            raise ValueError(f"token_order must be 'weight' or 'rank', got {self.token_order!r}")

    # ------------------------------------------------------------------ fit
    def fit(self, corpus: Sequence, counts: Sequence[int] | np.ndarray | None = None) -> Tokenizer:
        """Learn the merges from a corpus.

        Parameters
        ----------
        corpus : sequence of array-like of int, each of shape (n_i,)
            The documents. Pairs never cross document boundaries.
        counts : sequence of int, optional
            Multiplicity of each document (a repeated document, such as a word
            in text, is stored once). IDF counts documents with multiplicity.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If a document holds a symbol outside the alphabet (the message
            names the document and position), or ``counts`` is malformed.
        TypeError
            If a document is not of integer dtype.

        Notes
        -----
        Trimming: training runs whole rounds, so the last round can overshoot
        ``vocab_size``. The surplus merges are dropped from the end of the
        learned order: the lowest-count pairs of the last round. Nothing was
        built from them yet, so the vocabulary stays closed (every kept
        token's two parts are kept), and the result is exactly what stopping
        training at ``vocab_size`` gives. The reference UBPE drops the
        lowest-IDF tokens instead; those are the most widespread ones and
        carry most of the compression, so we do not.
        """
        self._check_params()
        tok, offsets = _flatten_documents(corpus, self.alphabet_size)
        n_docs = len(offsets) - 1
        if counts is None:
            weights = np.ones(n_docs, np.int64)
        else:
            weights = np.asarray(counts)
            if weights.size == 0:
                weights = weights.astype(np.int64)
            if weights.shape != (n_docs,) or not np.issubdtype(weights.dtype, np.integer):
                raise ValueError(f"counts must be {n_docs} integers, one per document")
            if weights.size and weights.min() < 1:
                raise ValueError(f"counts must be >= 1; document {int(np.argmin(weights))} "
                                 f"has count {weights.min()}")
            if weights.size and float(weights.astype(np.float64) @ np.diff(offsets).astype(np.float64)
                                      + weights.sum(dtype=np.float64)) >= 2.0**62:
                raise ValueError("counts too large: the weighted pair counts would overflow "
                                 "int64 (counts times document lengths must stay below 2**62)")
            weights = weights.astype(np.int64)
        # each merge shortens the corpus by at least one symbol: no more merges than pairs (the
        # tables are sized by the merges asked for)
        # (an empty document has no pair: it does not count as -1 of them)
        n_pairs = tok.size - int(np.count_nonzero(np.diff(offsets)))
        n_merges = min(self.vocab_size - self.alphabet_size, max(n_pairs, 0))
        n_cand = min(self.n_candidates, tok.size + 1)  # (no more distinct pairs than that)
        node, doc = _engine.layout(tok, offsets)
        del tok  # the node rows hold the tokens; keep peak memory down
        merges = self._train(node, doc, weights, n_merges, n_cand)
        if len(merges) < self.vocab_size - self.alphabet_size:
            warnings.warn(f"the corpus supports only {len(merges)} merges with min_frequency="
                          f"{self.min_frequency}; the vocabulary has "
                          f"{self.alphabet_size + len(merges)} tokens, not {self.vocab_size}",
                          stacklevel=2)
        merges = merges[:n_merges]  # the trim: see Notes
        self.n_documents_ = int(weights.sum())
        idf = np.log((1.0 + self.n_documents_) / (1.0 + merges[:, 4].astype(np.float64)))
        self._set_merges(merges[:, :3], idf, merges[:, 3])
        self._fitted_params = self._plain_params()  # (what to_dict writes until the next fit)
        return self

    def _plain_params(self) -> dict:
        return plain_params(self.get_params())

    def _train(self, node, doc, weights, n_merges, n_cand=None) -> np.ndarray:
        """Run the engine on a corpus laid out by ``_engine.layout`` (modified); ``n_cand``:
        candidates a round (default ``n_candidates``).

        Returns rows ``(left, right, token, count, df)`` in creation order.
        """
        n_cand = self.n_candidates if n_cand is None else n_cand
        merges = np.zeros((n_merges + n_cand, 5), np.int64)
        least = min(int(self.min_frequency), 2**62)  # (more than any pair's count: no merge)
        state = _engine.init_training(node, doc, weights, least)
        n_done, next_token = 0, self.alphabet_size
        progress = _Progress(n_merges, self.progress)
        rounds, finished = 1, False
        while n_done < n_merges and not finished:
            t0 = time.perf_counter()
            state, n_done, next_token, finished = _engine.train_rounds(
                node, doc, weights, state, merges, n_done, next_token, n_merges,
                n_cand, least, rounds)
            progress.update(n_done)
            if time.perf_counter() - t0 < 0.2:
                rounds *= 2
        progress.close()
        return merges[:n_done]

    def _set_merges(self, merges_by_rank, weights, counts):
        """Renumber merged tokens (see ``token_order``) and store the fitted state."""
        m = len(merges_by_rank)
        a = self.alphabet_size
        if self.token_order == "rank":
            order = np.arange(m)
        else:
            order = np.lexsort((np.arange(m), weights))  # ids by weight, then rank
        new_id = np.arange(a + m, dtype=np.int64)
        new_id[a + order] = a + np.arange(m)
        self.merges_ = new_id[merges_by_rank].reshape(m, 3) if m else np.zeros((0, 3), np.int64)
        self.weights_ = np.asarray(weights, np.float64)
        self.counts_ = np.asarray(counts, np.int64)
        self._build_tables()

    def __getstate__(self) -> dict:
        """Pickle without the segmentation encoders' trie (derived: built again on use)."""
        return {k: v for k, v in self.__dict__.items() if k != "_trie_cache"}

    def __setstate__(self, state: dict) -> None:
        """Unpickle; a tokenizer pickled before ``_alphabet`` existed was fitted on its
        ``alphabet_size``; the trie is built again on use (one pickled by an older version
        holds the tables of its own encoders)."""
        self.__dict__.update(state)
        if "merges_" in state:
            self._trie_cache = None
            if "_alphabet" not in state:
                self._alphabet = int(self.alphabet_size)

    def _build_tables(self):
        m = self.merges_
        # the alphabet the merges were fitted on: encoding checks symbols against it even if the
        # alphabet_size hyperparameter is changed afterwards (the tables are sized by it)
        self._alphabet = int(self.alphabet_size)
        self._left = m[:, 0].astype(np.int32)
        self._right = m[:, 1].astype(np.int32)
        self._token = m[:, 2].astype(np.int32)
        self._keys, self._vals, self._bits = _engine.build_rank_table(self._left, self._right)
        # expansion of every token id into alphabet symbols, for decode
        starts, flat = _engine.expansions(self._alphabet, self._left, self._right,
                                          self._token)
        self._exp_start, self._exp_flat = starts, flat
        n_tokens = self._alphabet + len(m)
        self._token_rank = np.zeros(n_tokens, np.int64)  # alphabet 0, merge of rank r: r + 1
        self._token_rank[m[:, 2]] = np.arange(1, len(m) + 1)
        self._token_weight = np.zeros(n_tokens, np.float64)
        self._token_weight[m[:, 2]] = self.weights_
        self._trie_cache = None

    @property
    def n_tokens_(self) -> int:
        """Actual vocabulary size (``vocab_size`` unless the corpus was too small)."""
        self._check_fitted()
        return self._alphabet + len(self.merges_)

    def _check_fitted(self):
        if not hasattr(self, "merges_"):
            raise NotFittedError("this Tokenizer is not fitted yet; call fit() or load()")

    # ------------------------------------------------------------ encoding
    METHODS = ("merges", "shortest", "weighted")

    def encode(self, doc: ArrayLike, *, method: str = "merges", beam: int = 8) -> np.ndarray:
        """Encode one document.

        Parameters
        ----------
        doc : array-like of int, shape (n,)
            Symbols in ``[0, alphabet_size)``.
        method : {"merges", "shortest", "weighted"}, default "merges"
            ``"merges"``: classic BPE, merges applied in rank order (a heap
            over pair positions, O(n log n); what training saw).
            ``"shortest"``: the fewest tokens over the vocabulary, ties broken
            by the lowest total rank (exact dynamic programming). Never longer
            than ``"merges"``; the choice for compression. Its time is
            O(n x d), ``d`` the mean number of symbols that the trie of token
            expansions matches from a position; at the start of a run of one
            value it takes the run's tokens from a list instead (a vocabulary
            fitted on idle stretches holds tokens thousands of symbols long:
            50,000 zeros under tokens up to 32,768 long encode in about 0.03 s).
            ``"weighted"``: UBPE's tf-idf objective, ``sum over distinct
            tokens of (1 + ln tf) * idf`` (alphabet symbols weigh 0), ties to
            the shorter encoding; a beam search, exact for short documents
            (see :mod:`ubpe._segment`). :meth:`encode_top_n` gives the
            runners-up too. Its time is that of ``"shortest"`` times the
            beam, and it holds about ``beam x (log2(vocab_size) + 1)`` tree
            nodes a symbol (about 1.3 KB a symbol at beam 8: encode long
            documents in pieces).
        beam : int, default 8
            With ``method="weighted"``, suffixes kept per position. Larger is
            slower and scores at least as high in practice.

        Returns
        -------
        ndarray of shape (m,), dtype int32
            Token ids.

        Raises
        ------
        ValueError
            If a symbol is outside the alphabet (names its position) or the
            method is unknown.
        TypeError
            If the symbols are not integers (floats, text).
        """
        return self.encode_batch([doc], method=method, beam=beam)[0]

    def encode_batch(self, docs: Sequence[ArrayLike], *, method: str = "merges", beam: int = 8,
                     num_threads: int | None = None) -> list[np.ndarray]:
        """Encode several documents, in parallel threads; one array per document.

        Parameters
        ----------
        docs : sequence of array-like of int, each of shape (n_i,)
            Symbols in ``[0, alphabet_size)``.
        method : {"merges", "shortest", "weighted"}, default "merges"
            As in :meth:`encode`.
        beam : int, default 8
            As in :meth:`encode`.
        num_threads : int, optional
            Threads to encode with; the documents are cut into that many
            groups of about equal total length, each encoded by a numba
            kernel that releases the GIL. None: ``OMP_NUM_THREADS`` threads
            (one per CPU core when unset) for a batch of at least 65,536
            symbols, else one. 1: the calling thread only.
            (tiktoken's ``encode_batch`` takes the same argument.)

        Returns
        -------
        list of ndarray, each of shape (m_i,), dtype int32
            Token ids, as :meth:`encode` gives for each document (views into
            one array: see :meth:`encode_to_numpy`).

        Raises
        ------
        ValueError
            If a symbol is outside the alphabet (names the document and
            position), the method is unknown, or ``num_threads < 1``.
        TypeError
            If a document's symbols are not integers.
        """
        out, out_off = self.encode_to_numpy(docs, method=method, beam=beam, num_threads=num_threads)
        return [out[out_off[i]: out_off[i + 1]] for i in range(len(out_off) - 1)]

    def encode_to_numpy(self, docs: Sequence[ArrayLike], *, method: str = "merges", beam: int = 8,
                        num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Encode several documents into one flat array of ids and its offsets.

        The ragged (CSR) form that Arrow list arrays and ML data loaders take,
        with no Python object per document. Document ``i`` is
        ``ids[offsets[i]:offsets[i + 1]]``. (tiktoken's ``encode_to_numpy``
        encodes one text; a 1-D integer array here already is one document's
        result of :meth:`encode`.)

        Parameters
        ----------
        docs, method, beam, num_threads
            As in :meth:`encode_batch`.

        Returns
        -------
        ids : ndarray of shape (n_tokens,), dtype int32
        offsets : ndarray of shape (n_docs + 1,), dtype int64
            ``offsets[0] == 0`` and ``offsets[-1] == n_tokens``.

        Raises
        ------
        ValueError, TypeError
            As in :meth:`encode_batch`.
        """
        self._check_fitted()
        if method not in self.METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(self.METHODS)}")
        _check_positive("beam", beam)
        if num_threads is not None and (not isinstance(num_threads, (int, np.integer))
                                        or num_threads < 1):
            raise ValueError(f"num_threads must be a positive integer or None, got {num_threads!r}")
        flat, offsets = _flatten_documents(docs, self._alphabet)
        n_docs = len(offsets) - 1
        if num_threads is None:
            big = flat.size >= _PARALLEL_MIN_SYMBOLS
            num_threads = _default_threads() if big else 1
        groups = _balanced_groups(offsets, min(int(num_threads), max(n_docs, 1)))
        if len(groups) <= 1:
            return self._encode_flat(flat, offsets, method, beam)
        parts = [(flat[offsets[a]: offsets[b]], offsets[a: b + 1] - offsets[a]) for a, b in groups]
        self._trie()  # build the shared tables once, before the threads read them
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=len(parts)) as pool:
            results = list(pool.map(lambda p: self._encode_flat(p[0], p[1], method, beam), parts))
        ids = np.concatenate([r[0] for r in results])
        out_off = np.zeros(n_docs + 1, np.int64)
        pos, base = 1, 0
        for _, off_g in results:
            out_off[pos: pos + len(off_g) - 1] = off_g[1:] + base
            pos += len(off_g) - 1
            base += int(off_g[-1])
        return ids, out_off

    def _encode_flat(self, flat, offsets, method, beam):
        """(ids, offsets) of documents already checked and flattened."""
        if method == "merges":
            return _engine.encode_docs(flat, offsets, self._keys, self._vals, self._bits, self._left,
                                       self._right, self._token)
        fn: Any  # (the trie's tables are passed as a tuple: mypy cannot count them)
        if method == "shortest":
            fn = _segment.shortest_docs
            return fn(flat, offsets, *self._trie(), self._token_rank)
        fn = _segment.weighted_docs
        out, out_off, _, doc_first = fn(flat, offsets, *self._trie(), self._token_weight, beam, 1)
        # top_n=1: one encoding per document (none for an empty one? keep its slot empty)
        firsts = doc_first[:-1]
        starts, ends = out_off[firsts], out_off[firsts + 1]
        lengths = ends - starts
        new_off = np.zeros(len(firsts) + 1, np.int64)
        np.cumsum(lengths, out=new_off[1:])
        idx = np.arange(int(new_off[-1])) - np.repeat(new_off[:-1] - starts, lengths)
        return out[idx], new_off

    def encode_padded(self, docs: Sequence[ArrayLike], *, max_length: int | None = None,
                      padding: str | bool = "longest",
                      truncation: bool = False, pad_id: int | None = None,
                      padding_side: str = "right", truncation_side: str = "right",
                      method: str = "merges", beam: int = 8,
                      num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Encode a batch into a padded matrix and its attention mask.

        The semantics of Hugging Face tokenizers' ``padding``,
        ``truncation`` and ``max_length`` (``tokenizer(batch, padding=...,
        truncation=..., max_length=..., return_tensors="np")``).

        Parameters
        ----------
        docs : sequence of array-like of int
            As in :meth:`encode_batch`.
        max_length : int, optional
            The length to pad to (``padding="max_length"``) and to truncate to
            (``truncation=True``).
        padding : {"longest", True, "max_length"}, default "longest"
            ``"longest"``: pad to the longest encoding in the batch (after
            truncation). ``"max_length"``: pad to ``max_length``.
        truncation : bool, default False
            Cut encodings longer than ``max_length`` tokens.
        pad_id : int, optional
            The id written in padded positions; default ``n_tokens_``, one past
            the vocabulary, so that it never collides with a real token.
        padding_side, truncation_side : {"right", "left"}, default "right"
            Where padding goes, and which end truncation cuts.
        method, beam, num_threads
            As in :meth:`encode_batch`.

        Returns
        -------
        ids : ndarray of shape (n_docs, length), dtype int32
        attention_mask : ndarray of shape (n_docs, length), dtype int32
            1 on real tokens, 0 on padding.

        Raises
        ------
        ValueError
            On ``padding="max_length"`` or ``truncation=True`` without
            ``max_length``; on an encoding longer than ``max_length`` with
            ``padding="max_length"`` and no truncation (a ragged batch);
            on an unknown ``padding`` or side.
        """
        if padding is True:  # (Hugging Face's True: "longest")
            padding = "longest"
        if padding not in ("longest", "max_length"):
            raise ValueError(f"padding must be 'longest' (or True) or 'max_length', got "
                             f"{padding!r}" + (" (for unpadded ids, use encode_batch)" if padding
                                               in (False, "do_not_pad") else ""))
        if padding_side not in ("right", "left") or truncation_side not in ("right", "left"):
            raise ValueError("padding_side and truncation_side must be 'right' or 'left'")
        if (padding == "max_length" or truncation) and max_length is None:
            raise ValueError(f"padding={padding!r}, truncation={truncation} needs max_length")
        if max_length is not None and max_length < 0:
            raise ValueError(f"max_length must be >= 0, got {max_length}")
        ids, off = self.encode_to_numpy(docs, method=method, beam=beam, num_threads=num_threads)
        lengths = np.diff(off)
        starts = off[:-1].copy()
        if truncation:
            assert max_length is not None
            cut = np.maximum(lengths - max_length, 0)
            if truncation_side == "left":
                starts += cut
            lengths = lengths - cut
        longest = int(lengths.max()) if lengths.size else 0
        if padding == "max_length":
            assert max_length is not None
            if longest > max_length:
                d = int(np.argmax(lengths))
                raise ValueError(f"document {d} has {longest} tokens, more than max_length="
                                 f"{max_length}; pass truncation=True")
            width = max_length
        else:
            width = longest
        n = len(lengths)
        pad = self.n_tokens_ if pad_id is None else int(pad_id)
        out = np.full((n, width), pad, np.int32)
        mask = np.zeros((n, width), np.int32)
        col = np.arange(width)
        real = col[None, :] < lengths[:, None]
        if padding_side == "left":
            real = real[:, ::-1]
        src = starts[:, None] + (col[None, :] - (width - lengths[:, None] if padding_side == "left"
                                                 else 0))
        out[real] = ids[src[real]]
        mask[real] = 1
        return out, mask

    def encode_top_n(self, doc: ArrayLike, top_n: int, *, beam: int = 8) -> list[tuple[np.ndarray, float]]:
        """The ``top_n`` best encodings of one document under UBPE's tf-idf objective.

        Parameters
        ----------
        doc : array-like of int, shape (n,)
        top_n : int
            Encodings to return (fewer when the document has fewer).
        beam : int, default 8
            Suffixes kept per position (raised to at least ``top_n``).

        Returns
        -------
        list of (ndarray of int32, float)
            ``(token ids, score)``, best first; the first equals
            ``encode(doc, method="weighted", beam=max(beam, top_n))``.

        Raises
        ------
        ValueError
            If ``top_n < 1`` or a symbol is outside the alphabet.
        """
        return self.encode_top_n_batch([doc], top_n, beam=beam)[0]

    def encode_top_n_batch(self, docs: Sequence[ArrayLike], top_n: int, *,
                           beam: int = 8) -> list[list[tuple[np.ndarray, float]]]:
        """:meth:`encode_top_n` for several documents."""
        self._check_fitted()
        _check_positive("top_n", top_n)
        _check_positive("beam", beam)
        flat, offsets = _flatten_documents(docs, self._alphabet)
        return self._weighted(flat, offsets, top_n, beam)

    def _weighted(self, flat, offsets, top_n, beam):
        out, out_off, scores, doc_first = _segment.weighted_docs(  # type: ignore[call-arg]
            flat, offsets, *self._trie(), self._token_weight, max(beam, top_n), top_n)
        return [[(out[out_off[k]: out_off[k + 1]], float(scores[k]))
                 for k in range(doc_first[d], doc_first[d + 1])]
                for d in range(len(offsets) - 1)]

    def expansion(self, token_id: int) -> np.ndarray:
        """The alphabet symbols that token ``token_id`` stands for, shape (length,), int32.

        Raises
        ------
        ValueError
            If the id is not in the vocabulary.
        """
        return self.decode(np.array([token_id], np.int64))

    def token_lengths(self) -> np.ndarray:
        """Length in alphabet symbols of every token id, shape (n_tokens_,), int64."""
        self._check_fitted()
        return np.diff(self._exp_start).astype(np.int64)

    def _trie(self):
        if self._trie_cache is None:
            self._trie_cache = _segment.build_trie(self._exp_start, self._exp_flat,
                                                   self._token_rank)
        return self._trie_cache

    def score(self, ids: ArrayLike) -> float:
        """UBPE's tf-idf score of an encoding: ``sum (1 + ln tf_t) * idf_t``.

        The sum runs over the distinct token ids ``t`` of ``ids``; alphabet
        symbols weigh 0.
        """
        tokens, tf = np.unique(self._checked_ids(ids), return_counts=True)
        return float(((1.0 + np.log(tf)) * self._token_weight[tokens]).sum())

    def _checked_ids(self, ids: ArrayLike) -> np.ndarray:
        """``ids`` as a 1-D integer array of vocabulary ids: ValueError naming the position of
        one outside it (or a shape other than 1-D), TypeError for ids that are not integers."""
        self._check_fitted()
        ids = np.asarray(ids)
        if ids.ndim != 1:
            raise ValueError(f"expected a 1-D sequence of token ids, got shape {ids.shape}")
        if ids.size == 0:
            return np.zeros(0, np.int64)
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"token ids must be integers, got dtype {ids.dtype}")
        bad = np.flatnonzero((ids < 0) | (ids >= self.n_tokens_))
        if bad.size:
            raise ValueError(f"position {bad[0]}: token id {ids[bad[0]]} is not in the "
                             f"vocabulary 0..{self.n_tokens_ - 1}")
        return ids

    def decode(self, ids: ArrayLike, *, max_length: int | None = None) -> np.ndarray:
        """Expand token ids back into alphabet symbols (exact inverse of encode).

        Parameters
        ----------
        ids : array-like of int, shape (m,)
        max_length : int, optional
            Refuse ids that expand to more symbols (checked before the output is
            allocated: a token can stand for a long run, so that a few ids can
            ask for gigabytes).

        Returns
        -------
        ndarray of shape (n,), dtype int32

        Raises
        ------
        ValueError
            If an id is not in the vocabulary (names the id and position),
            ``ids`` is not 1-D, or they expand to more than ``max_length``
            symbols.
        TypeError
            If the ids are not integers.
        """
        ids = self._checked_ids(ids)
        if ids.size == 0:
            return np.empty(0, np.int32)
        starts = self._exp_start[ids]
        lengths = self._exp_start[ids + 1] - starts
        out_pos = np.cumsum(lengths) - lengths
        total = int(out_pos[-1] + lengths[-1])
        if max_length is not None and total > max_length:
            raise ValueError(f"the {ids.size:,} token ids expand to {total:,} symbols, more "
                             f"than the {max_length:,} allowed")
        idx = np.arange(total) - np.repeat(out_pos - starts, lengths)
        return self._exp_flat[idx]

    def decode_batch(self, batch: Sequence[ArrayLike]) -> list[np.ndarray]:
        """Decode several token sequences; see :meth:`decode`."""
        return [self.decode(ids) for ids in batch]

    # ------------------------------------------------------------ save/load
    def get_params(self, deep: bool = True) -> dict:
        """Hyperparameters, as given to ``__init__`` (scikit-learn's ``get_params``; ``deep`` is
        accepted for its ``clone``: there are no nested estimators)."""
        return {"alphabet_size": self.alphabet_size, "vocab_size": self.vocab_size,
                "n_candidates": self.n_candidates, "min_frequency": self.min_frequency,
                "token_order": self.token_order, "progress": self.progress}

    def set_params(self, **params: Any) -> Tokenizer:
        """Set hyperparameters (scikit-learn's ``set_params``); they apply at the next
        :meth:`fit` (a fitted model keeps the alphabet it was fitted on).

        Raises
        ------
        ValueError
            On an unknown name, or a value that ``__init__`` refuses.
        """
        known = self.get_params()
        for k in params:
            if k not in known:
                raise ValueError(f"unknown parameter {k!r}; known: {', '.join(known)}")
        old = {k: getattr(self, k) for k in params}
        for k, v in params.items():
            setattr(self, k, v)
        try:
            self._check_params()
        except (TypeError, ValueError):
            for k, v in old.items():
                setattr(self, k, v)
            raise
        return self

    def to_dict(self) -> dict:
        """The fitted model as a plain JSON-ready dict (see :meth:`save`)."""
        self._check_fitted()
        fitted = getattr(self, "_fitted_params", None) or self._plain_params()
        return {"format": FORMAT, "version": VERSION,
                "params": {**{k: v for k, v in fitted.items() if k != "progress"},
                           "alphabet_size": self._alphabet},
                "n_documents": self.n_documents_,
                "merges": self.merges_.tolist(),
                "weights": [float(w) for w in self.weights_],
                "counts": self.counts_.tolist()}

    @classmethod
    def from_dict(cls, doc: dict, source: str = "tokenizer") -> Tokenizer:
        """Rebuild a fitted tokenizer from :meth:`to_dict` output.

        Every declared size is checked against the document itself and
        against :func:`ubpe.serialization.get_limits` before anything is
        allocated: the alphabet size, the number of merges (at most
        ``vocab_size - alphabet_size``), and the total length of the token
        expansions (a chain of merges can declare tokens of exponential
        length).

        Parameters
        ----------
        doc : dict
            A ``ubpe.tokenizer`` document, version 1 or 2; its checksum is
            verified where it has one.
        source : str
            Named in error messages.

        Raises
        ------
        FormatError
            On an unknown format, a newer version, a checksum mismatch,
            inconsistent content, or a size above the limits.
        """
        check_document(doc, FORMAT, VERSION, source)
        lim = get_limits()
        try:
            params = doc["params"]
            if not isinstance(params, dict):
                raise TypeError("'params' is not an object")
            tok = cls(**params, progress=False)
            lists = {k: doc[k] for k in ("merges", "weights", "counts")}
            for k, v in lists.items():
                if not isinstance(v, list):
                    raise TypeError(f"{k!r} is not a list")
            n_documents = doc["n_documents"]
            if (not isinstance(n_documents, (int, float)) or isinstance(n_documents, bool)
                    or not 0 <= n_documents < 2**63):
                raise ValueError(f"n_documents must be a non-negative number, got {n_documents!r}")
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"{source}: malformed tokenizer ({type(e).__name__}: {e})") from None
        a, m = tok.alphabet_size, len(lists["merges"])
        if a > lim.max_alphabet:
            raise FormatError(f"{source}: alphabet_size {a:,} is above the limit {lim.max_alphabet:,} "
                              f"(see ubpe.serialization.limits)")
        if m > tok.vocab_size - a:
            raise FormatError(f"{source}: {m:,} merges, more than vocab_size - alphabet_size "
                              f"({tok.vocab_size - a:,})")
        if len(lists["weights"]) != m or len(lists["counts"]) != m:
            raise FormatError(f"{source}: weights and counts must have one entry per merge")
        try:
            if m and not all(isinstance(v, int) and not isinstance(v, bool)
                             for row in lists["merges"] for v in row):
                raise TypeError("merges must hold integer token ids (not floats or booleans)")
            merges = np.asarray(lists["merges"], np.int64) if m else np.zeros((0, 3), np.int64)
            weights = np.asarray(lists["weights"], np.float64)
            counts = np.asarray(lists["counts"], np.int64)
        except (TypeError, ValueError, OverflowError) as e:
            raise FormatError(f"{source}: malformed tokenizer ({type(e).__name__}: {e})") from None
        if merges.shape != (m, 3) or weights.shape != (m,) or counts.shape != (m,):
            raise FormatError(f"{source}: merges must be [left, right, token] triples, weights "
                              f"and counts one number per merge")
        if m and not np.array_equal(np.sort(merges[:, 2]), np.arange(a, a + m)):
            raise FormatError(f"{source}: merged token ids must be {a}..{a + m - 1}")
        # topology and expansion lengths, in rank order, before the tables are built
        length = np.ones(a + m, np.int64)
        known = np.zeros(a + m, bool)
        known[:a] = True
        total, cap = a, lim.max_expansion
        pairs = set()
        for r, (left, right, token) in enumerate(merges.tolist()):
            if not (0 <= left < a + m and 0 <= right < a + m and known[left] and known[right]):
                raise FormatError(f"{source}: merge rank {r} (token id {token}) uses a token "
                                  f"that is not defined before it")
            if (left, right) in pairs:
                raise FormatError(f"{source}: merge rank {r} repeats the pair ({left}, {right})")
            pairs.add((left, right))
            known[token] = True
            length[token] = min(int(length[left]) + int(length[right]), cap + 1)
            total += int(length[token])
            if total > cap:
                raise FormatError(f"{source}: the tokens expand to more than {cap:,} symbols in "
                                  f"all, the limit (see ubpe.serialization.limits)")
        tok.merges_, tok.weights_, tok.counts_ = merges, weights, counts
        tok.n_documents_ = int(n_documents)
        tok._build_tables()
        tok._fitted_params = tok._plain_params()
        return tok

    @classmethod
    def from_merges(cls, alphabet_size: int, pairs: ArrayLike, *, token_order: str = "rank") -> Tokenizer:
        """A fitted tokenizer from merge pairs alone (no training).

        Parameters
        ----------
        alphabet_size : int
        pairs : array-like of int, shape (m, 2)
            ``(left, right)`` of each merge in rank order; merge ``r`` creates
            token id ``alphabet_size + r`` and may only use ids below it.
        token_order : {"rank"}
            Ids follow the rank order (weights are unknown, so all are 0).

        Raises
        ------
        FormatError
            If a merge uses a token that is not defined before it.
        """
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        m = len(pairs)
        doc = {"format": FORMAT, "version": VERSION,
               "params": {"alphabet_size": int(alphabet_size),
                          "vocab_size": int(alphabet_size) + m, "token_order": token_order},
               "n_documents": 0,
               "merges": np.column_stack([pairs, alphabet_size + np.arange(m)]).tolist(),
               "weights": [0.0] * m, "counts": [0] * m}
        return cls.from_dict(doc, source="merges")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model as one JSON file, atomically.

        The file holds ``format`` ("ubpe.tokenizer"), ``version``, the
        hyperparameters (alphabet size included), the merges in rank order as
        ``[left, right, token]``, the weights and counts aligned with them, and
        a checksum and content id (see :mod:`ubpe.serialization`).
        """
        d = self.to_dict()
        write_document(path, d.pop("format"), d.pop("version"), d)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Read a model written by :meth:`save` (format version 1 or 2).

        Raises
        ------
        FormatError
            If the file is not a ubpe tokenizer, is of a newer version, fails
            its checksum (version 2), is larger than the document limit, or
            declares sizes above the limits (see :meth:`from_dict`).
        """
        return cls.from_dict(read_document(path, FORMAT, VERSION), source=str(path))

    def __repr__(self):
        params = ", ".join(f"{k}={v}" for k, v in self.get_params().items())
        return f"Tokenizer({params})"
