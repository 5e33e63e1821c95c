"""A time-series tokenizer: Chronos' mean scaling and uniform bins, then a UBPE vocabulary.

Chronos (Ansari et al., "Chronos: Learning the Language of Time Series",
TMLR 2024, arXiv:2403.07815; the ``chronos-forecasting`` package's
``MeanScaleUniformBins``) gives every sample of a context window one token:

1. scale: ``s = mean(|x|)`` over the window (1 when that is 0);
2. quantize ``x / s`` into bins whose centres are ``linspace(low_limit,
   high_limit, n_bins)``, the boundaries halfway between centres (the outer
   two open), as ``torch.bucketize(..., right=True)`` does;
3. Chronos' token id is ``bin + n_special_tokens + 1`` (pad 0, EOS 1).

:class:`ChronosUBPETokenizer` does steps 1 and 2 the same way and then
applies a UBPE vocabulary trained on the bins, so one token covers one or
more samples. Decoding gives the bin centres times the scale: within half a
bin (``(high_limit - low_limit) / (2 (n_bins - 1))`` in scaled units) of the
input where ``x / s`` lies inside the limits.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ubpe import NotFittedError, Tokenizer

__all__ = ["ChronosUBPETokenizer", "mean_scale", "CHRONOS_N_BINS"]

# chronos-t5 defaults: n_tokens 4096, n_special_tokens 2, centres n_tokens - n_special - 1
CHRONOS_N_BINS = 4093


def mean_scale(window: np.ndarray) -> float:
    """Chronos' scale of a context window: the mean absolute value.

    1.0 when that is 0, NaN, or subnormal (below the smallest normal double,
    where dividing by it and multiplying back loses the precision of a bin).

    Parameters
    ----------
    window : ndarray, shape (n,)
        NaN samples (missing values) are left out of the mean.

    Returns
    -------
    float
    """
    w = np.asarray(window, np.float64)
    finite = w[np.isfinite(w)]
    with np.errstate(over="ignore"):
        s = float(np.abs(finite).mean()) if finite.size else 0.0
    if np.isinf(s):  # the sum overflows (values near 1e308): the mean of the values scaled down
        m = float(np.abs(finite).max())
        s = m * float(np.mean(np.abs(finite) / m))
    return s if np.isfinite(s) and s >= np.finfo(np.float64).tiny else 1.0


class ChronosUBPETokenizer:
    """Mean-scale each context window, quantize into uniform bins, apply a UBPE vocabulary.

    Parameters
    ----------
    n_bins : int, default 4093
        Bin centres (Chronos: ``n_tokens - n_special_tokens - 1``); the UBPE
        alphabet.
    low_limit, high_limit : float, default -15.0 and 15.0
        First and last bin centre, in scaled units; scaled values beyond them
        fall in the outer bins.
    context_length : int, default 512
        Samples per context window (Chronos' default): :meth:`fit` cuts the
        training series into windows of this length, and :meth:`encode` /
        :meth:`encode_batch` keep the last ``context_length`` samples of a
        longer window, as Chronos' ``context_input_transform`` does.
    vocab_size : int, default 8192
        UBPE vocabulary, the bins included.
    n_candidates : int, default 8
        UBPE merges per training round.
    method : {"shortest", "merges", "weighted"}, default "shortest"
        Encoder (see :meth:`ubpe.Tokenizer.encode`).

    Attributes
    ----------
    tokenizer_ : ubpe.Tokenizer
        Fitted by :meth:`fit`.
    centers_ : ndarray of shape (n_bins,), float64
        Bin centres, fixed by :meth:`fit` (``set_params`` afterwards does not
        move them: refit to change the bins).
    boundaries_ : ndarray of shape (n_bins - 1,), float64
        Inner bin boundaries (halfway between centres), fixed by :meth:`fit`.
    """

    def __init__(self, n_bins: int = CHRONOS_N_BINS, low_limit: float = -15.0,
                 high_limit: float = 15.0, context_length: int = 512, vocab_size: int = 8192,
                 n_candidates: int = 8, method: str = "shortest"):
        self.n_bins = n_bins
        self.low_limit = low_limit
        self.high_limit = high_limit
        self.context_length = context_length
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.method = method

    # scikit-learn conventions
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Constructor parameters (``deep`` is accepted for scikit-learn; there are no children)."""
        return {"n_bins": self.n_bins, "low_limit": self.low_limit,
                "high_limit": self.high_limit, "context_length": self.context_length,
                "vocab_size": self.vocab_size, "n_candidates": self.n_candidates,
                "method": self.method}

    def set_params(self, **params: Any) -> ChronosUBPETokenizer:
        """Set constructor parameters; returns self."""
        for k, v in params.items():
            if k not in self.get_params():
                raise ValueError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (no target; input: series), so that its checks
        (``check_is_fitted``) accept this object. Needs scikit-learn >= 1.6 when called."""
        from sklearn.utils import InputTags, Tags, TargetTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    input_tags=InputTags(one_d_array=True, two_d_array=False))

    def _grid(self, *, params: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(centres, inner boundaries)``: those fixed by :meth:`fit` (``centers_``,
        ``boundaries_``; a later ``set_params`` does not move the bins of a fitted
        vocabulary), else (or with ``params``) those of the parameters."""
        if hasattr(self, "centers_") and not params:
            return self.centers_, self.boundaries_
        c = np.linspace(self.low_limit, self.high_limit, self.n_bins)
        return c, (c[1:] + c[:-1]) / 2

    @property
    def half_bin(self) -> float:
        """Largest quantization error in scaled units, for values inside the limits."""
        c = self._grid()[0]
        return float(c[-1] - c[0]) / (2 * (c.size - 1))

    # ------------------------------------------------------------- quantize
    def quantize(self, window: Any) -> tuple[np.ndarray, float]:
        """Bins of one context window and its scale.

        Parameters
        ----------
        window : array-like, shape (n,)
            Finite samples (NaN is an error here: a UBPE token cannot be
            missing; Chronos pads those).

        Returns
        -------
        bins : ndarray of shape (n,), int64, in ``[0, n_bins)``
        scale : float

        Raises
        ------
        ValueError
            On a non-finite sample or a window that is not 1-D.
        """
        return self._quantize(window, self._grid()[1])

    @staticmethod
    def _quantize(window: Any, inner: np.ndarray) -> tuple[np.ndarray, float]:
        w = np.asarray(window, np.float64)
        if w.ndim != 1:
            raise ValueError(f"a context window is 1-D, got shape {w.shape}")
        if not np.isfinite(w).all():
            raise ValueError(f"sample {int(np.argmax(~np.isfinite(w)))}: non-finite value")
        s = mean_scale(w)
        # bucketize(right=True) over [-inf, inner..., +inf], minus one: bins from 0
        return np.searchsorted(inner, w / s, side="right").astype(np.int64), s

    def dequantize(self, bins: Any, scale: float) -> np.ndarray:
        """Bin centres times the scale, float64.

        Raises
        ------
        ValueError
            On a bin outside ``0..n_bins - 1`` (names its position).
        """
        centres = self._grid()[0]
        b = np.asarray(bins)
        if b.size and b.dtype.kind not in "iu":  # (1.7 was taken as bin 1)
            raise TypeError(f"bins must be integers, got dtype {b.dtype}")
        b = b.astype(np.int64)
        bad = (b < 0) | (b >= centres.size)
        if bad.any():
            i = int(np.argmax(bad.ravel()))
            raise ValueError(f"position {i}: bin {b.ravel()[i]} is not in 0..{centres.size - 1}")
        return centres[b] * scale

    def _windows(self, series: Any) -> list[np.ndarray]:
        x = np.asarray(series, np.float64)
        if x.ndim != 1:
            raise ValueError(f"a series is 1-D, got shape {x.shape} (fit takes a sequence of "
                             f"series: [x], not x)")
        n = self.context_length
        return [x[i:i + n] for i in range(0, x.size, n) if x[i:i + n].size]

    # ---------------------------------------------------------------- fit
    def fit(self, series: Sequence[Any], y: Any = None) -> ChronosUBPETokenizer:
        """Train the UBPE vocabulary on the bins of every context window.

        Parameters
        ----------
        series : sequence of array-like, each (n_samples_i,)
            Training series, cut into windows of ``context_length``.
        y : ignored
            For scikit-learn pipelines.

        Returns
        -------
        self
        """
        self._check_params()
        centres, inner = self._grid(params=True)  # (a refit takes the parameters' bins; a fit
        # that fails leaves the object as it was)
        docs = [self._quantize(w, inner)[0] for s in series for w in self._windows(s)]
        if not docs:
            raise ValueError("no samples to train on")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a small corpus supports fewer merges
            tokenizer = Tokenizer(self.n_bins, self.vocab_size, n_candidates=self.n_candidates,
                                  progress=False).fit(docs)
        self.tokenizer_, self.centers_, self.boundaries_ = tokenizer, centres, inner
        return self

    # ------------------------------------------------------------- coding
    def encode(self, window: Any) -> tuple[np.ndarray, float]:
        """Token ids of one context window and its scale.

        Parameters
        ----------
        window : array-like, shape (n,)
            Its last ``context_length`` samples are the context (Chronos).

        Returns
        -------
        ids : ndarray of shape (m,), int32, m <= min(n, context_length)
        scale : float

        Raises
        ------
        ubpe.NotFittedError
            If not fitted (a ValueError and an AttributeError, as scikit-learn's).
        """
        tok = self._tok()
        bins, s = self.quantize(self._context(window))
        return tok.encode(bins, method=self.method), s

    def encode_batch(self, windows: Sequence[Any], *, max_length: int | None = None,
                     padding: str = "longest", truncation: bool = False,
                     padding_side: str = "left", truncation_side: str = "left",
                     pad_id: int | None = None,
                     num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Padded token ids of several windows, their attention mask and scales.

        Parameters
        ----------
        windows : sequence of array-like, each (n_i,)
            Each one's last ``context_length`` samples are its context.
        max_length, padding, truncation, pad_id, num_threads
            As in :meth:`ubpe.Tokenizer.encode_padded` (padding id by default
            ``tokenizer_.n_tokens_``: an embedding then needs ``n_tokens_ +
            1`` rows).
        padding_side, truncation_side : {"left", "right"}, default "left"
            Chronos' sides: contexts are padded on the left, and truncation
            keeps the most recent tokens.

        Returns
        -------
        ids : ndarray (n_windows, length), int32
        attention_mask : ndarray (n_windows, length), int32
        scales : ndarray (n_windows,), float64
        """
        tok = self._tok()
        q = [self.quantize(self._context(w)) for w in windows]
        ids, mask = tok.encode_padded([b for b, _ in q], max_length=max_length, padding=padding,
                                      truncation=truncation, padding_side=padding_side,
                                      truncation_side=truncation_side, pad_id=pad_id,
                                      method=self.method, num_threads=num_threads)
        return ids, mask, np.array([s for _, s in q], np.float64)

    def decode(self, ids: Any, scale: float) -> np.ndarray:
        """Values of a window from its token ids and scale, float64 (bin centres x scale)."""
        return self.dequantize(self._tok().decode(ids), scale)

    def tokens_per_sample(self, series: Sequence[Any]) -> float:
        """Tokens per sample over every context window of ``series`` (Chronos: 1.0).

        Chronos adds one EOS token per window as well; this counts samples'
        tokens only, on both sides.
        """
        tok = self._tok()
        docs = [self.quantize(w)[0] for s in series for w in self._windows(s)]
        n = sum(d.size for d in docs)
        m = sum(e.size for e in tok.encode_batch(docs, method=self.method))
        return m / max(n, 1)

    def _context(self, window: Any) -> np.ndarray:
        w = np.asarray(window)
        return w[-self.context_length:] if w.ndim == 1 and w.size > self.context_length else w

    def _check_params(self) -> None:
        if not (isinstance(self.n_bins, (int, np.integer)) and self.n_bins >= 2):
            raise ValueError(f"n_bins must be an integer of at least 2, got {self.n_bins!r}")
        if not all(isinstance(v, (int, float, np.integer, np.floating))
                   and not isinstance(v, bool) for v in (self.low_limit, self.high_limit)) or \
                not (np.isfinite(self.low_limit) and np.isfinite(self.high_limit)
                     and self.low_limit < self.high_limit):
            raise ValueError(f"low_limit must be below high_limit, both finite; got "
                             f"{self.low_limit!r} and {self.high_limit!r}")
        if not (isinstance(self.context_length, (int, np.integer)) and self.context_length >= 1):
            raise ValueError(f"context_length must be an integer of at least 1, got "
                             f"{self.context_length!r}")
        if self.method not in Tokenizer.METHODS:  # (before the vocabulary is trained)
            raise ValueError(f"unknown method {self.method!r}; choose one of "
                             f"{', '.join(Tokenizer.METHODS)}")

    def _tok(self) -> Tokenizer:
        if not hasattr(self, "tokenizer_"):
            raise NotFittedError("this ChronosUBPETokenizer is not fitted yet; call fit() first")
        return self.tokenizer_
