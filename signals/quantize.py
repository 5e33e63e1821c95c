"""Quantizers: float signals to integer alphabets and back."""

from __future__ import annotations

import numpy as np


def _as_channels(x, name="x"):
    """View input as (n_channels, n_samples); report whether it was 1-D."""
    x = np.asarray(x)
    if x.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (n_samples,) or 2-D (n_channels, n_samples), "
                         f"got shape {x.shape}")
    if not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise TypeError(f"{name} must be numeric, got dtype {x.dtype}")
    return (x[None, :], True) if x.ndim == 1 else (x, False)


def _check_finite(x2):
    if np.issubdtype(x2.dtype, np.floating):
        bad = ~np.isfinite(x2)
        if bad.any():
            ch, i = np.argwhere(bad)[0]
            raise ValueError(f"channel {ch}, sample {i}: non-finite value {x2[ch, i]}")


class UniformQuantizer:
    """Uniform scalar quantizer with ``n_levels`` equal bins per channel.

    ``fit`` learns each channel's range ``[min, max]`` and splits it into
    ``n_levels`` bins of width ``step = (max - min) / n_levels``; codes are
    bin indices and ``decode`` returns bin centres, so the reconstruction
    error is at most ``step / 2`` (Gersho & Gray, "Vector Quantization and
    Signal Compression", ch. 5). Integer input whose range spans at most
    ``n_levels`` values passes through losslessly (step 1, code = x - min).

    Parameters
    ----------
    n_levels : int, default 1024
        Alphabet size of the codes, 2..2**30.

    Attributes
    ----------
    min_ : ndarray of shape (n_channels,), float64
        Lower edge of each channel's range, in signal units.
    step_ : ndarray of shape (n_channels,), float64
        Bin width per channel, in signal units (1.0 for lossless channels).
    lossless_ : ndarray of shape (n_channels,), bool
        True where integer input passes through exactly.
    max_error_ : ndarray of shape (n_channels,), float64
        Guaranteed bound on ``|decode(encode(x)) - x|`` per channel, in
        signal units: ``step_ / 2``, or 0 for lossless channels.
    bin_edges_ : list of ndarray, each of shape (n_levels + 1,)
        Bin edges per channel, in signal units.
    """

    kind = "uniform"

    def __init__(self, n_levels: int = 1024):
        self.n_levels = n_levels

    def fit(self, x) -> "UniformQuantizer":
        """Learn the range of each channel.

        Parameters
        ----------
        x : array-like, shape (n_samples,) or (n_channels, n_samples)

        Raises
        ------
        ValueError
            On a non-finite value (names channel and sample), an empty
            channel, or ``n_levels`` outside 2..2**30.
        """
        if not isinstance(self.n_levels, (int, np.integer)) or not 2 <= self.n_levels <= 2**30:
            raise ValueError(f"n_levels must be an integer in 2..2**30, got {self.n_levels!r}")
        x2, _ = _as_channels(x)
        if x2.shape[1] == 0:
            raise ValueError("cannot fit a quantizer on an empty signal")
        _check_finite(x2)
        lo = x2.min(axis=1).astype(np.float64)
        hi = x2.max(axis=1).astype(np.float64)
        integer = np.issubdtype(x2.dtype, np.integer)
        self.lossless_ = np.full(len(lo), integer) & (hi - lo + 1 <= self.n_levels)
        const = hi == lo  # one bin centred on the value: decoded exactly
        self.step_ = np.where(self.lossless_ | const, 1.0, (hi - lo) / self.n_levels)
        self.min_ = np.where(const & ~self.lossless_, lo - 0.5, lo)
        self.max_error_ = np.where(self.lossless_ | const, 0.0, self.step_ / 2)
        return self

    @property
    def bin_edges_(self):
        self._check_fitted()
        k = np.arange(self.n_levels + 1)
        return [m + k * s for m, s in zip(self.min_, self.step_)]

    def _check_fitted(self):
        if not hasattr(self, "min_"):
            raise RuntimeError("this quantizer is not fitted yet; call fit() first")

    def _check_channels(self, x2):
        if x2.shape[0] != len(self.min_):
            raise ValueError(f"expected {len(self.min_)} channel(s), got {x2.shape[0]}")

    def encode(self, x) -> np.ndarray:
        """Map samples to integer codes.

        Parameters
        ----------
        x : array-like, shape (n_samples,) or (n_channels, n_samples)

        Returns
        -------
        ndarray of the same shape, dtype int32, values in ``[0, n_levels)``

        Raises
        ------
        ValueError
            If a value is non-finite or outside the fitted range (names the
            channel and sample; values are never clipped silently).
        """
        self._check_fitted()
        x2, one_d = _as_channels(x)
        self._check_channels(x2)
        _check_finite(x2)
        scaled = (x2 - self.min_[:, None]) / self.step_[:, None]
        codes = np.floor(scaled)
        lossy = ~self.lossless_
        # the top edge of the range belongs to the last bin
        top = lossy[:, None] & (codes == self.n_levels) & (scaled <= self.n_levels + 1e-9)
        codes[top] = self.n_levels - 1
        bad = (codes < 0) | (codes >= self.n_levels)
        if bad.any():
            ch, i = np.argwhere(bad)[0]
            raise ValueError(f"channel {ch}, sample {i}: value {x2[ch, i]} is outside the "
                             f"fitted range [{self.bin_edges_[ch][0]}, "
                             f"{self.bin_edges_[ch][-1]}]")
        codes = codes.astype(np.int32)
        return codes[0] if one_d else codes

    def decode(self, codes) -> np.ndarray:
        """Map codes back to bin centres (exact values for lossless channels).

        Returns
        -------
        ndarray of the same shape as ``codes``, float64, in signal units.
        """
        self._check_fitted()
        c2, one_d = _as_channels(codes, "codes")
        self._check_channels(c2)
        centre = np.where(self.lossless_, 0.0, 0.5)
        x = self.min_[:, None] + (c2 + centre[:, None]) * self.step_[:, None]
        return x[0] if one_d else x

    def error(self, x) -> np.ndarray:
        """Measured maximum absolute reconstruction error per channel, shape (n_channels,)."""
        x2, _ = _as_channels(x)
        back = self.decode(self.encode(x2))
        return np.abs(back - x2).max(axis=1) if x2.shape[1] else np.zeros(x2.shape[0])

    def to_dict(self) -> dict:
        """Plain, JSON-ready configuration and fitted state."""
        self._check_fitted()
        return {"kind": self.kind, "n_levels": int(self.n_levels),
                "min": self.min_.tolist(), "step": self.step_.tolist(),
                "lossless": self.lossless_.tolist(), "max_error": self.max_error_.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> "UniformQuantizer":
        q = cls(d["n_levels"])
        q.min_ = np.asarray(d["min"], np.float64)
        q.step_ = np.asarray(d["step"], np.float64)
        q.lossless_ = np.asarray(d["lossless"], bool)
        q.max_error_ = np.asarray(d["max_error"], np.float64)
        return q
