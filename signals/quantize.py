"""Quantizers: float signals to integer alphabets and back.

Every quantizer follows scikit-learn's conventions: parameters in
``__init__`` (``get_params(deep=True)``/``set_params``, so
``sklearn.base.clone`` works), ``fit(X)`` learns per-channel state
(attributes ending in ``_``), ``encode``/``transform`` give int32 codes,
``decode``/``inverse_transform`` give float64 values. ``X`` is 1-D
``(n_samples,)`` (one channel) or 2-D ``(n_samples, n_features)``,
scikit-learn's axis order: each column is a channel, fitted on its own.
Any array-like is taken, pandas Series and DataFrames included.
``to_dict``/``quantizer_from_dict`` make a plain JSON-ready config
(numcodecs style); saved quantizers do not depend on the axis order.

Scalar quantization theory: Gersho & Gray, "Vector Quantization and Signal
Compression" (1992), ch. 5-6.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ubpe.serialization import get_limits
from ubpe.tokenizer import NotFittedError

from .stage import register


def _as_channels(x, name="x"):
    """View input (n_samples,) or (n_samples, n_features) as (n_channels, n_samples).

    Also reports whether it was 1-D. pandas objects become NumPy arrays
    (a DataFrame's columns are its features).
    """
    if hasattr(x, "tocsr") or hasattr(x, "todense") and not hasattr(x, "to_numpy"):
        raise TypeError(f"{name}: sparse input is not supported (signals are dense); pass "
                        f"{name}.toarray()")
    if hasattr(x, "to_numpy") and not isinstance(x, np.ndarray):
        x = x.to_numpy()
    x = np.asarray(x)
    if x.dtype == object:  # (numbers in an object array, as pandas may give them)
        try:
            x = x.astype(np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must be numeric, got objects that are not numbers ({e})") from None
    if x.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n_samples,) or 2-D (n_samples, n_features), "
                         f"got shape {x.shape}")
    if np.iscomplexobj(x):
        raise ValueError(f"{name}: Complex data not supported (quantize the real and imaginary "
                         f"parts as two features)")
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must be numeric, got dtype {x.dtype}")
    if x.ndim == 2 and x.shape[1] > x.shape[0] and x.shape[1] > 64:
        warnings.warn(f"{name} has shape {x.shape}: more features than samples. Quantizers take "
                      f"(n_samples, n_features), scikit-learn's order; transpose a "
                      f"(n_channels, n_samples) array", UserWarning, stacklevel=3)
    return (x[None, :], True) if x.ndim == 1 else (x.T, False)


def _check_finite(x2):
    if np.issubdtype(x2.dtype, np.floating):
        bad = ~np.isfinite(x2)
        if bad.any():
            ch, i = np.argwhere(bad)[0]
            raise ValueError(f"channel {ch}, sample {i}: non-finite value {x2[ch, i]} (NaN or inf)")


_EXACT = 2**53  # integers up to this magnitude are exact in float64
_HALF_EXACT = 2**52  # and their half-integer bin edges up to this one


def _deviation(back: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """``back - x2`` in float64 (``back``: decoded, float64): for integers beyond 2**53, from
    the input's exact high and low parts (``x2`` cast to float64 would round them, and a
    value changed by less than that rounding would measure 0)."""
    if x2.dtype.kind not in "iu" or x2.dtype.itemsize < 8 or not x2.size or max(
            abs(int(x2.min())), abs(int(x2.max()))) < _EXACT:
        return back - x2
    high = (x2 >> 32) << 32  # (32 significant bits: exact in float64)
    return (back - high.astype(np.float64)) - (x2 - high).astype(np.float64)


def _midpoints(lo: Any, hi: Any) -> Any:
    """``(lo + hi) / 2`` elementwise, as quantizers saved before computed it (so that a
    reloaded codebook is the fitted one, subnormals included); where the sum overflows (near
    1.8e308), ``lo / 2 + hi / 2``."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        m = (lo + hi) / 2
    return np.where(np.isfinite(m), m, lo / 2 + hi / 2)


def _design_scaled(design, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``design(x)`` (a quantizer's edges and codebook), run on ``x`` scaled by a power of two
    where its values pass 2**500 (variances, means and centres near 1e308 overflow), then
    scaled back; the outer edges are the channel's min and max (a value far below the
    largest may not survive the scaling)."""
    top = float(np.max(np.abs(x)))
    shift = max(0, math.frexp(top)[1] - 500)
    if not shift:
        return design(x)
    edges, codebook = design(np.ldexp(x, -shift))
    edges = np.ldexp(edges, shift)
    edges[0], edges[-1] = x.min(), x.max()
    return edges, np.clip(np.ldexp(codebook, shift), edges[:-1], edges[1:])


def float_bounds(dtype: np.dtype) -> tuple[float, float]:
    """The least and greatest float64 within an integer dtype's range: ``float(2**63 - 1)`` is
    2**63, which an int64 cast would wrap to -2**63."""
    info = np.iinfo(dtype)
    lo, hi = float(info.min), float(info.max)  # (info.min: a power of two or 0, exact)
    return lo, hi if hi <= info.max else float(np.nextafter(hi, -np.inf))


def _representable(codebook: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The codebook rounded to values that ``dtype`` holds (integers for an integer dtype,
    within its range): what the fitted data's dtype can give back (a WAV or ``.npy``
    written as it came)."""
    if dtype.kind in "iu":
        return np.clip(np.rint(codebook), *float_bounds(dtype))
    if dtype.kind == "f" and dtype.itemsize < 8:
        return codebook.astype(dtype).astype(np.float64)
    return codebook


class Quantizer:
    """Base class: per-channel bin edges and a codebook (one value per bin).

    Subclasses define ``_design(x)`` returning ``(edges, codebook)`` for one
    channel: ``edges`` of shape (k + 1,) increasing, spanning the channel's
    range, ``codebook`` of shape (k,) with each entry inside its bin, k <=
    ``n_levels``.

    Attributes
    ----------
    bin_edges_ : list of ndarray, one per channel, shape (k_c + 1,)
        In signal units; values outside ``[edges[0], edges[-1]]`` are an
        error in ``encode`` (never clipped silently).
    codebook_ : list of ndarray, one per channel, shape (k_c,)
        Reconstruction value of each code.
    max_error_ : ndarray of shape (n_channels,)
        Guaranteed bound on ``|decode(encode(x)) - x|`` for values in range.
    lossless_ : ndarray of shape (n_channels,), bool
        Channels reconstructed exactly: integer input below 2**52 in
        magnitude spanning at most ``n_levels`` values (one code per value),
        or a constant channel. Such a channel encodes only the values it was
        fitted on (any other value is an error, never rounded).
    n_features_in_ : int
        Channels seen by :meth:`fit`.
    dtype_ : numpy.dtype
        The dtype the codebook's values are held in: float64 after
        :meth:`fit`, the data's after :meth:`round_to`.
    """

    kind = "base"

    def __init__(self, n_levels: int = 1024):
        self.n_levels = n_levels

    # -- fitting
    def fit(self, x: ArrayLike, y: Any = None) -> Quantizer:
        """Design one quantizer per channel.

        Parameters
        ----------
        x : array-like, shape (n_samples,) or (n_samples, n_features)
            Finite samples; each column is a channel.
        y : ignored
            For scikit-learn pipelines.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On a non-finite value (names channel and sample), an empty signal,
            a channel whose range (max - min) is beyond float64, a bad
            parameter (``n_levels`` outside 2..``Limits.max_alphabet``, 2**24 by
            default, ...), or bins of all channels together above that limit
            (a loader refuses them: about 24 bytes a bin).

        Notes
        -----
        Integers of 2**52 or more in magnitude are never lossless (float64 bin
        edges round them); beyond 2**53 their ``max_error_`` counts the input's
        own rounding to float64.
        """
        self._check_params()
        x2, _ = _as_channels(x)
        if x2.shape[1] == 0:
            raise ValueError("cannot fit a quantizer on an empty signal (0 samples)")
        if x2.shape[0] == 0:
            raise ValueError(f"cannot fit a quantizer on 0 feature(s) (shape={x2.T.shape}) while "
                             f"a minimum of 1 is required.")
        _check_finite(x2)
        integer = np.issubdtype(x2.dtype, np.integer)
        self.bin_edges_, self.codebook_, lossless = [], [], []
        bins = 0  # (of the channels so far: checked after each, so that at most one channel's
        # tables are made beyond the limit)
        for c, ch in enumerate(x2):
            lo, hi = ch.min(), ch.max()
            if integer:
                lo, hi = int(lo), int(hi)  # (Python ints: hi - lo does not wrap in int8..int64)
            elif not np.isfinite(float(hi) - float(lo)):
                raise ValueError(f"channel {c}: its range {lo!r}..{hi!r} is wider than float64 "
                                 f"holds; scale the signal first")
            small = integer and max(-lo, hi) < _HALF_EXACT  # (2**52 + 0.5 is no double)
            if small and hi - lo + 1 <= self.n_levels:
                codebook = np.arange(hi - lo + 1, dtype=np.float64) + lo
                edges = np.append(codebook - 0.5, hi + 0.5)
                lossless.append(True)
            elif lo == hi and (small or not integer):  # a constant channel
                f = float(lo)
                edges, codebook = (np.array([f - 0.5, f + 0.5]) if integer
                                   else np.array([f, f])), np.array([f])
                lossless.append(True)
            elif float(lo) == float(hi):  # integers beyond 2**52 that one double holds
                f = float(lo)
                u = float(np.spacing(abs(f)))
                edges, codebook = np.array([f - u, f + u]), np.array([f])
                lossless.append(False)
            else:
                edges, codebook = _design_scaled(self._design, ch.astype(np.float64))
                lossless.append(False)
            self.bin_edges_.append(edges)
            self.codebook_.append(codebook)
            bins += edges.size - 1  # (a channel's tables take at most n_levels bins: checked)
            check_bins(bins)
        self.lossless_ = np.array(lossless)
        self.dtype_ = np.dtype(np.float64)
        self.n_features_in_ = x2.shape[0]
        self._set_bounds()
        return self

    def round_to(self, dtype: Any) -> Quantizer:
        """Round the codebook to values that ``dtype`` holds, for data written back in it.

        A WAV or ``.npy`` file gives its samples back in their own dtype: a
        float codebook value cast there would move by up to one unit more
        than ``max_error_`` says. After this, the codebook holds integers (an
        integer dtype) or that dtype's floats, and ``max_error_`` is the
        bound for such data (for integer data: the farthest integer of each
        bin from its value). Saved with the quantizer (``to_dict``).

        Parameters
        ----------
        dtype : numpy dtype
            The data's dtype (integer or float).

        Returns
        -------
        self
        """
        self._check_fitted()
        self.dtype_ = np.dtype(dtype)
        self.codebook_ = [c if ll else _representable(c, self.dtype_)
                          for c, ll in zip(self.codebook_, self.lossless_)]
        self._set_bounds()
        return self

    def _check_params(self) -> None:
        most = get_limits().max_alphabet
        if (isinstance(self.n_levels, bool) or not isinstance(self.n_levels, (int, np.integer))
                or not 2 <= self.n_levels <= most):
            raise ValueError(f"n_levels must be an integer in 2..{most:,} (Limits.max_alphabet: "
                             f"about 24 bytes a level), got {self.n_levels!r}")

    def _set_bounds(self):
        # the larger distance from a codebook value to either edge of its bin (a value rounded
        # to the data's dtype may lie outside it); for integer data (round_to), to the farthest
        # integer of the bin ([e_i, e_i+1), the last one closed); beyond 2**53 the input's own
        # rounding to float64 (up to half a spacing) adds to the bins' error: a spacing more
        integer = getattr(self, "dtype_", np.dtype(np.float64)).kind in "iu"
        bounds = []
        for e, c, ll in zip(self.bin_edges_, self.codebook_, self.lossless_):
            if ll:
                bounds.append(0.0)
                continue
            if integer:
                first, last = np.ceil(e[:-1]), np.ceil(e[1:]) - 1
                last[-1] = np.floor(e[-1])
                held = first <= last  # (bins that hold an integer)
                b = float(np.max(np.maximum(np.abs(c - first), np.abs(last - c))[held],
                                 initial=0.0))
            else:
                b = float(np.max(np.maximum(np.abs(c - e[:-1]), np.abs(e[1:] - c))))
            top = max(abs(e[0]), abs(e[-1]))  # (below the largest double: its spacing is inf)
            bounds.append(b + (float(np.spacing(min(top, np.nextafter(np.inf, 0) / 2)))
                               if top > _EXACT else 0.0))
        self.max_error_ = np.array(bounds)

    def _design(self, x):
        raise NotImplementedError

    def _check_fitted(self):
        if not hasattr(self, "lossless_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def _check_channels(self, x2):
        if x2.shape[0] != len(self.lossless_):
            raise ValueError(f"X has {x2.shape[0]} features, but {type(self).__name__} is "
                             f"expecting {len(self.lossless_)} features as input (one per "
                             f"channel; Reshape your data: a 1-D array is one channel)")

    @property
    def n_codes_(self) -> np.ndarray:
        """Codes used per channel (the alphabet size a tokenizer needs), shape (n_channels,)."""
        self._check_fitted()
        return np.array([len(c) for c in self.codebook_])

    # -- coding
    def encode(self, x: ArrayLike) -> np.ndarray:
        """Map samples to integer codes.

        Parameters
        ----------
        x : array-like, shape (n_samples,) or (n_samples, n_features)

        Returns
        -------
        ndarray of the same shape as ``x``, int32, values in ``[0, n_codes_)``

        Raises
        ------
        ValueError
            If a value is non-finite or outside the fitted range, or, on a
            lossless channel, not one of the values it codes exactly (an
            integer channel given 2.5): names the channel and sample.
        """
        self._check_fitted()
        x2, one_d = _as_channels(x)
        self._check_channels(x2)
        _check_finite(x2)
        codes = np.empty(x2.shape, np.int32)
        for c, (row, edges, book, exact) in enumerate(zip(x2, self.bin_edges_, self.codebook_,
                                                          self.lossless_)):
            # (exactly the fitted values: every integer of an integer channel, a constant's
            # value; a float constant saved before this rule, as a bin of width 1 whose centre
            # reloads a few ulps off, within 4 ulps of it, any other value refused)
            tol = (4 * float(np.spacing(abs(book[0]))) if exact and len(book) == 1
                   and edges[0] < edges[-1] and book[0] != np.rint(book[0]) else 0.0)
            lo, hi = (book[0] - tol, book[-1] + tol) if exact else (edges[0], edges[-1])
            bad = (row < lo) | (row > hi)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"channel {c}, sample {i}: value {row[i]} is outside the "
                                 f"fitted range [{lo}, {hi}]")
            if exact:  # only the fitted values: anything else would come back changed
                k = np.minimum(np.searchsorted(book, row), len(book) - 1)
                bad = np.abs(book[k] - row) > tol
                if bad.any():
                    i = int(np.argmax(bad))
                    what = (f"the constant {book[0]!r}" if len(book) == 1
                            else f"the integers {int(lo)}..{int(hi)}")
                    raise ValueError(f"channel {c}, sample {i}: value {float(row[i])!r} is not one of "
                                     f"the values this lossless channel codes ({what}, exactly: "
                                     f"never rounded); round the data first, or fit a lossy "
                                     f"quantizer (fewer levels than the channel's values)")
                codes[c] = k
            else:
                codes[c] = np.searchsorted(edges[1:-1], row, side="right")
        return codes[0] if one_d else codes.T

    def decode(self, codes: ArrayLike) -> np.ndarray:
        """Map codes back to codebook values, float64, same shape as ``codes``.

        Raises
        ------
        ValueError
            If a code is outside ``[0, n_codes_)`` (names channel and sample).
        """
        self._check_fitted()
        c2, one_d = _as_channels(codes, "codes")
        self._check_channels(c2)
        out = np.empty(c2.shape, np.float64)
        for c, (row, book) in enumerate(zip(c2, self.codebook_)):
            bad = (row < 0) | (row >= len(book))
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"channel {c}, sample {i}: code {row[i]} is not in 0..{len(book) - 1}")
            out[c] = book[row]
        return out[0] if one_d else out.T

    def error(self, x: ArrayLike) -> np.ndarray:
        """Measured maximum absolute reconstruction error per channel, shape (n_channels,)."""
        x2, _ = _as_channels(x)
        back = self.decode(self.encode(x2.T)).T
        return np.abs(_deviation(back, x2)).max(axis=1) if x2.shape[1] else np.zeros(x2.shape[0])

    def error_stats(self, x: ArrayLike) -> dict:
        """Max, RMS and mean absolute reconstruction error per channel, and SNR in dB."""
        x2, _ = _as_channels(x)
        d = _deviation(self.decode(self.encode(x2.T)).T, x2)
        rms = np.sqrt((d ** 2).mean(axis=1))
        power = (x2.astype(float) - x2.mean(axis=1, keepdims=True)).var(axis=1)
        with np.errstate(divide="ignore"):
            snr = 10 * np.log10(power / rms ** 2)
        return {"max": np.abs(d).max(axis=1), "rms": rms, "mean_abs": np.abs(d).mean(axis=1),
                "snr_db": snr}

    # -- scikit-learn transformer API
    def transform(self, x: ArrayLike) -> np.ndarray:
        """:meth:`encode` under scikit-learn's name."""
        return self.encode(x)

    def inverse_transform(self, codes: ArrayLike) -> np.ndarray:
        """:meth:`decode` under scikit-learn's name."""
        return self.decode(codes)

    def fit_transform(self, x: ArrayLike, y: Any = None) -> np.ndarray:
        """``fit(x).transform(x)``."""
        return self.fit(x).encode(x)

    # -- parameters and serialization
    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters, as given (scikit-learn's ``get_params``; no sub-estimators)."""
        return {"n_levels": self.n_levels}

    def set_params(self, **params) -> Quantizer:
        """Set constructor parameters (scikit-learn's ``set_params``); returns self.

        Raises
        ------
        ValueError
            On a name that is not a constructor parameter.
        """
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}; "
                                 f"valid: {', '.join(valid)}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (a transformer of 2-D input; 1-D is taken too), for pipelines.

        Needs scikit-learn >= 1.6 when called; ubpe itself does not import it.
        """
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(preserves_dtype=[]),
                    input_tags=InputTags(two_d_array=True))

    def _json_params(self) -> dict:
        """get_params() as plain JSON numbers."""
        return {k: (float(v) if isinstance(v, (float, np.floating)) else int(v))
                for k, v in self.get_params().items()}

    def _json_state(self) -> dict:
        """The fitted state every kind saves: the lossless flags, and the data's dtype where
        it rounds the codebook (absent: float64, as quantizers saved before it)."""
        d: dict[str, Any] = {"lossless": self.lossless_.tolist()}
        dtype = getattr(self, "dtype_", np.dtype(np.float64))
        if dtype != np.float64 and not self.lossless_.all():
            d["dtype"] = dtype.newbyteorder("<").str
        return d

    def to_dict(self) -> dict:
        """Plain, JSON-ready configuration and fitted state."""
        self._check_fitted()
        return {"kind": self.kind, **self._json_params(), **self._json_state(),
                "bin_edges": [e.tolist() for e in self.bin_edges_],
                "codebook": [c.tolist() for c in self.codebook_]}

    @classmethod
    def from_dict(cls, d: dict) -> Quantizer:
        """Rebuild a fitted quantizer from :meth:`to_dict` (any kind)."""
        return quantizer_from_dict(d)

    def get_config(self) -> dict:
        """The stage protocol's name (``signals/stage.py``) for :meth:`to_dict`."""
        return self.to_dict()

    @classmethod
    def from_config(cls, config: dict) -> Quantizer:
        """The stage protocol's name for :meth:`from_dict`."""
        return quantizer_from_dict(config)

    def _load_state(self, d):
        self.lossless_ = np.asarray(d["lossless"], bool)
        self.dtype_ = _saved_dtype(d)
        self.n_features_in_ = len(self.lossless_)
        check_bins(declared_bins(d))
        self.bin_edges_ = [np.asarray(e, np.float64) for e in d["bin_edges"]]
        self.codebook_ = [np.asarray(c, np.float64) for c in d["codebook"]]
        self._set_bounds()


class UniformQuantizer(Quantizer):
    """``n_levels`` equal bins over each channel's range; decodes to bin centres.

    The error is at most half a bin, ``(max - min) / (2 n_levels)``. Integer
    channels whose range spans at most ``n_levels`` values pass through
    losslessly. Saved as ``(min, max)`` per channel, not as a codebook.
    """

    kind = "uniform"

    def _design(self, x):
        edges = np.linspace(x.min(), x.max(), self.n_levels + 1)
        return edges, _midpoints(edges[:-1], edges[1:])

    @property
    def step_(self) -> np.ndarray:
        """Bin width per channel, in signal units, shape (n_channels,)."""
        self._check_fitted()
        return np.array([e[1] - e[0] for e in self.bin_edges_])

    def to_dict(self) -> dict:
        self._check_fitted()
        return {"kind": self.kind, **self._json_params(), **self._json_state(),
                "range": [[e[0], e[-1], len(e) - 1] for e in self.bin_edges_]}

    def _load_state(self, d):
        self.lossless_ = np.asarray(d["lossless"], bool)
        self.dtype_ = _saved_dtype(d)
        self.n_features_in_ = len(self.lossless_)
        check_bins(declared_bins(d))  # (before the edges are allocated)
        self.bin_edges_ = [np.linspace(lo, hi, k + 1) for lo, hi, k in d["range"]]
        centres = [_midpoints(e[:-1], e[1:]) for e in self.bin_edges_]
        self.codebook_ = [np.array([e[0]]) if e[0] == e[-1] else  # a constant float channel
                          c if ll else _representable(c, self.dtype_)
                          for e, c, ll in zip(self.bin_edges_, centres, self.lossless_)]
        self._set_bounds()


class QuantileQuantizer(Quantizer):
    """Equal-frequency bins (edges at the empirical quantiles); codebook = bin means.

    Every code is about equally frequent, which maximises the entropy of the
    codes for a given ``n_levels``. Repeated quantiles are merged, so a
    channel with few distinct values gets fewer bins.
    """

    kind = "quantile"

    def _design(self, x):
        edges = np.unique(np.quantile(x, np.linspace(0, 1, self.n_levels + 1)))
        return edges, _bin_means(x, edges)


class GaussianQuantizer(Quantizer):
    """SAX-style breakpoints: equiprobable bins under a normal fitted to each channel.

    Breakpoints are ``mean + std * Phi^-1(k / n_levels)`` (``scipy.stats.norm``;
    Lin et al., 2003, "A Symbolic Representation of Time Series"); the outer
    edges are the channel's min and max. The codebook holds each bin's mean.
    """

    kind = "gaussian"

    def _design(self, x):
        from scipy import stats  # here, not at import: scipy.stats takes about 1 s to load
        inner = x.mean() + x.std() * stats.norm.ppf(np.arange(1, self.n_levels) / self.n_levels)
        inner = inner[(inner > x.min()) & (inner < x.max())]
        edges = np.unique(np.concatenate([[x.min()], inner, [x.max()]]))
        return edges, _bin_means(x, edges)


class MuLawQuantizer(Quantizer):
    """mu-law companding (ITU-T G.711): uniform bins in ``sign(v) ln(1 + mu |v|) / ln(1 + mu)``.

    ``v`` is the channel scaled to [-1, 1] around the centre of its range, so
    small values get fine bins and large ones coarse bins.

    Parameters
    ----------
    n_levels : int, default 1024
    mu : float, default 255
    """

    kind = "mulaw"

    def __init__(self, n_levels: int = 1024, mu: float = 255.0):
        super().__init__(n_levels)
        self.mu = mu

    def get_params(self, deep: bool = True) -> dict:
        return {"n_levels": self.n_levels, "mu": self.mu}

    def _check_params(self) -> None:
        super()._check_params()
        if (isinstance(self.mu, bool) or not isinstance(self.mu, (int, float, np.integer, np.floating))
                or not 0 < self.mu < np.inf):
            raise ValueError(f"mu must be a positive finite number, got {self.mu!r}")

    def _design(self, x):
        centre, half = float(_midpoints(x.min(), x.max())), (x.max() - x.min()) / 2
        y = np.linspace(-1.0, 1.0, self.n_levels + 1)
        expand = lambda y: centre + half * np.sign(y) * np.expm1(np.abs(y) * np.log1p(self.mu)) / self.mu
        # the inner edges strictly inside the range (a range of a few ulps, or denormals,
        # collapses them), each centre then clipped into its bin
        inner = expand(y[1:-1])
        edges = np.unique(np.concatenate([[x.min()], inner[(inner > x.min()) & (inner < x.max())],
                                          [x.max()]]))
        centres = expand((y[:-1] + y[1:]) / 2)[: len(edges) - 1]
        return edges, np.clip(centres, edges[:-1], edges[1:])


class LloydMaxQuantizer(Quantizer):
    """Minimum mean-squared-error codebook: 1-D k-means (Lloyd, 1982; Max, 1960).

    ``scipy.cluster.vq.kmeans2`` started from the uniform quantizer's bin
    centres, so its mean squared error is never above the uniform one (each
    Lloyd iteration can only lower it); edges are the midpoints between
    neighbouring codewords.

    Parameters
    ----------
    n_levels : int, default 1024
    max_iter : int, default 30

    Attributes
    ----------
    n_iter_ : int
        Lloyd iterations run (``max_iter``: ``kmeans2`` has no early stop).
    """

    kind = "lloydmax"

    def __init__(self, n_levels: int = 1024, max_iter: int = 30):
        super().__init__(n_levels)
        self.max_iter = max_iter

    def get_params(self, deep: bool = True) -> dict:
        return {"n_levels": self.n_levels, "max_iter": self.max_iter}

    def fit(self, x: ArrayLike, y: Any = None) -> LloydMaxQuantizer:
        super().fit(x, y)
        self.n_iter_ = self.max_iter  # (scipy's kmeans2 runs every iteration it is given)
        return self

    def _check_params(self) -> None:
        super()._check_params()
        if (isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer))
                or self.max_iter < 1):
            raise ValueError(f"max_iter must be an integer of at least 1, got {self.max_iter!r}")

    def _design(self, x):
        from scipy.cluster.vq import kmeans2  # loaded on first use, as scipy.stats above
        # k-means on the signal scaled to [-1, 1] (squared distances of values near 1e155
        # overflow: scipy's kmeans2 then crashes the process), scaled back
        centre = x.min() / 2 + x.max() / 2
        half = x.max() / 2 - x.min() / 2
        if not half > 0:  # two neighbouring subnormals: one bin
            return np.array([x.min(), x.max()]), np.array([centre])
        edges = np.linspace(-1.0, 1.0, self.n_levels + 1)
        init = _midpoints(edges[:-1], edges[1:])
        with warnings.catch_warnings():  # an empty cluster keeps its codeword: harmless
            warnings.simplefilter("ignore", UserWarning)
            book, _ = kmeans2(((x - centre) / half)[:, None], init[:, None], iter=self.max_iter,
                              minit="matrix", missing="warn")
        book = np.unique(centre + half * book[:, 0])
        book = book[(book >= x.min()) & (book <= x.max())]
        edges = np.concatenate([[x.min()], (book[:-1] + book[1:]) / 2, [x.max()]])
        keep = np.diff(edges) > 0
        return edges[np.concatenate([[True], keep])], book[keep]


def _saved_dtype(d: dict) -> np.dtype:
    """The fitted data's dtype of a saved quantizer (float64 where it says none)."""
    try:
        dtype = np.dtype(d.get("dtype", "<f8"))
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "iuf":
        raise ValueError(f"bad quantizer dtype {d.get('dtype')!r}")
    return dtype


def _bin_means(x, edges):
    """Mean of the samples in each bin (the bin centre for an empty bin)."""
    idx = np.searchsorted(edges[1:-1], x, side="right")
    k = len(edges) - 1
    counts = np.bincount(idx, minlength=k)
    sums = np.bincount(idx, weights=x, minlength=k)  # (values below 2**500: _design_scaled)
    centres = _midpoints(edges[:-1], edges[1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
    return np.clip(means, edges[:-1], edges[1:])


QUANTIZERS = {cls.kind: cls for cls in (UniformQuantizer, QuantileQuantizer, GaussianQuantizer,
                                        MuLawQuantizer, LloydMaxQuantizer)}
for _cls in QUANTIZERS.values():  # findable by kind with the other stages
    register(_cls)


def declared_bins(d: dict) -> int:
    """The bins a quantizer's :meth:`~Quantizer.to_dict` declares, all channels together,
    counted without building anything (ValueError where its shape is not a quantizer's)."""
    try:
        if d.get("kind") == "uniform":
            ks = [r[2] for r in d["range"]]
            if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
                raise ValueError(f"a uniform quantizer's range declares {ks[:8]} bins"
                                 + (" ..." if len(ks) > 8 else ""))
            return sum(ks)
        return sum(len(e) - 1 for e in d["bin_edges"])
    except (KeyError, TypeError, IndexError):
        raise ValueError("not a quantizer's configuration") from None


def check_bins(n: int, what: str = "the quantizer's channels") -> None:
    """ValueError where quantizers (``what``) hold more than ``Limits.max_alphabet`` bins
    together: the one bound of a quantizer's, a model's and a container's quantizers, which
    their loaders check before allocating."""
    most = get_limits().max_alphabet
    if n > most:
        raise ValueError(f"{what} hold {n:,} bins together, above {most:,} "
                         f"(Limits.max_alphabet, about 24 bytes a bin: use fewer levels or "
                         f"channels, or raise it with ubpe.serialization.limits)")


def quantizer_from_dict(d: dict) -> Quantizer:
    """Rebuild a fitted quantizer from its ``to_dict()``.

    Raises
    ------
    ValueError
        On an unknown ``kind``.
    """
    cls = QUANTIZERS.get(str(d.get("kind")))
    if cls is None:
        raise ValueError(f"unknown quantizer kind {d.get('kind')!r}; known: {', '.join(QUANTIZERS)}")
    params = {k: d[k] for k in cls().get_params()}
    q = cls(**params)
    q._load_state(d)
    return q
