"""Reversible integer transforms: prediction residuals that are cheaper to code.

- :class:`Delta`: k-th order differences.
- :class:`FixedPredictor`: FLAC's fixed polynomial predictors of orders 0-4
  (FLAC format specification, "SUBFRAME_FIXED"), the order chosen per block
  by the least sum of absolute residuals.
- :class:`LinearPredictor`: per block, the better of those and a quantized
  linear predictor fitted to the block (FLAC's "SUBFRAME_LPC": Levinson-
  Durbin on the windowed autocorrelation, integer coefficients and a shift).

The fixed predictor of order k predicts ``x[i]`` from ``x[i-1..i-k]`` with
binomial weights, so its residual is the k-th difference. Both transforms
use the same warm-up: sample ``i < k`` gets the order-``i`` residual. Blocks
are predicted from the samples before them, so a block change costs nothing.
Inverses are exact on int64; residuals map to non-negative symbols with the
zigzag map (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .stage import Stage, register, stage_from_config

MAX_ORDER = 4
# predictor weights for x[i-1], x[i-2], ... (binomial, alternating signs)
_WEIGHTS = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [2, -1, 0, 0], [3, -3, 1, 0], [4, -6, 4, -1]],
                    np.int64)


def zigzag(r: np.ndarray) -> np.ndarray:
    """Signed residuals to non-negative symbols: 0,-1,1,-2,... -> 0,1,2,3,..."""
    r = np.asarray(r, np.int64)
    return (r << 1) ^ (r >> 63)


def unzigzag(z: np.ndarray) -> np.ndarray:
    """Inverse of :func:`zigzag`."""
    z = np.asarray(z, np.int64)
    return (z.view(np.uint64) >> np.uint64(1)).view(np.int64) ^ -(z & 1)  # logical shift


def differences(x: np.ndarray, order: int) -> np.ndarray:
    """k-th differences with warm-up: element ``i < order`` holds the order-``i`` one."""
    y = np.array(x, np.int64)
    for j in range(1, order + 1):
        y[j:] = y[j:] - y[j - 1:-1].copy()
    return y


@njit(cache=True)
def _predict_inverse(residual, orders, block_size):
    n = residual.shape[0]
    x = np.empty(n, np.int64)
    for i in range(n):
        k = min(orders[i // block_size], i)
        p = 0
        for j in range(k):
            p += _WEIGHTS[k, j] * x[i - 1 - j]
        x[i] = residual[i] + p
    return x




class Predictor(Stage):
    """A reversible integer predictor: samples to residuals plus side information."""

    def encode(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length as ``x``) and side information (uint8)."""
        raise NotImplementedError

    def decode(self, residual, side) -> np.ndarray:
        """Exact inverse of :meth:`encode`: the samples, int64."""
        raise NotImplementedError


@register
class Delta(Predictor):
    """k-th order delta coding.

    Parameters
    ----------
    order : int, default 1
        0 leaves the signal unchanged.
    """

    kind = "delta"

    def __init__(self, order: int = 1):
        if not 0 <= order <= 8:
            raise ValueError(f"delta order must be in 0..8, got {order}")
        self.order = order

    def encode(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length) and side information (empty)."""
        return differences(x, self.order), np.zeros(0, np.uint8)

    def decode(self, residual, side=None) -> np.ndarray:
        """Exact inverse of :meth:`encode`, int64."""
        y = np.array(residual, np.int64)
        for j in range(self.order, 0, -1):
            y[j - 1:] = np.cumsum(y[j - 1:])
        return y

    def get_params(self) -> dict:
        return {"order": self.order}


@register
class FixedPredictor(Predictor):
    """FLAC's fixed predictors, order 0..``max_order`` chosen per block.

    Parameters
    ----------
    block_size : int, default 256
        Samples per block; each block stores its order (one byte).
    max_order : int, default 4
    """

    kind = "fixed_predictor"

    def __init__(self, block_size: int = 256, max_order: int = MAX_ORDER):
        if not 0 <= max_order <= MAX_ORDER:
            raise ValueError(f"max_order must be in 0..{MAX_ORDER}, got {max_order}")
        if block_size < 1:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.block_size = block_size
        self.max_order = max_order

    def encode(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length) and the order of each block (uint8)."""
        x = np.asarray(x, np.int64)
        if x.size == 0:
            return x.copy(), np.zeros(0, np.uint8)
        cands = np.stack([differences(x, k) for k in range(self.max_order + 1)])
        starts = np.arange(0, x.size, self.block_size)
        cost = np.add.reduceat(np.abs(cands.astype(np.float64)), starts, axis=1)
        orders = np.argmin(cost, axis=0).astype(np.uint8)  # ties: the lower order
        block = np.arange(x.size) // self.block_size
        return cands[orders[block], np.arange(x.size)], orders

    def decode(self, residual, orders) -> np.ndarray:
        """Exact inverse of :meth:`encode`, int64.

        Raises
        ------
        ValueError
            If ``orders`` does not hold one valid order per block.
        """
        residual = np.asarray(residual, np.int64)
        orders = np.asarray(orders, np.int64)
        n_blocks = -(-residual.size // self.block_size)
        if orders.shape != (n_blocks,) or (orders.size and orders.max() > MAX_ORDER):
            raise ValueError(f"expected {n_blocks} block orders in 0..{MAX_ORDER}")
        return _predict_inverse(residual, orders, self.block_size)

    def get_params(self) -> dict:
        return {"block_size": self.block_size, "max_order": self.max_order}


@njit(cache=True)
def _lpc_residual(x, start, end, coefs, shift, out):
    order = coefs.shape[0]
    for i in range(start, end):
        if i < order:
            out[i - start] = x[i]  # warm-up at the start of the signal: no prediction
        else:
            acc = 0
            for j in range(order):
                acc += coefs[j] * x[i - 1 - j]
            out[i - start] = x[i] - (acc >> shift)


@njit(cache=True)
def _linear_inverse(residual, kinds, orders, shifts, coefs, block_size):
    n = residual.shape[0]
    x = np.empty(n, np.int64)
    for i in range(n):
        b = i // block_size
        p = 0
        if kinds[b] == 0:  # fixed predictor
            k = min(orders[b], i)
            for j in range(k):
                p += _WEIGHTS[k, j] * x[i - 1 - j]
        elif i >= orders[b]:
            for j in range(orders[b]):
                p += coefs[b, j] * x[i - 1 - j]
            p >>= shifts[b]
        x[i] = residual[i] + p
    return x


def _bits(e) -> float:
    """Estimated bits to code residuals (about their Laplacian entropy)."""
    return float(np.log2(1.0 + np.abs(e.astype(np.float64))).sum() + e.size)


@register
class LinearPredictor(Predictor):
    """Per block, FLAC's fixed predictors or a quantized LPC, whichever codes cheaper.

    For each block the candidates are the fixed orders 0-4 and linear
    predictors of ``lpc_orders`` fitted to the block (plus ``max(lpc_orders)``
    samples before it): autocorrelation of the Hann-windowed samples, Levinson-
    Durbin (``scipy.linalg.solve_toeplitz``), coefficients rounded to
    ``precision`` bits with a right shift. The residual is computed in
    integers, so the inverse is exact. The choice minimises the estimated
    bits, ``sum log2(1 + |e|)`` plus the coefficients.

    Parameters
    ----------
    block_size : int, default 4096
    lpc_orders : tuple of int, default (8, 16, 24, 32)
    precision : int, default 14
        Bits of the largest quantized coefficient (2..15; stored as int16).
    """

    kind = "linear_predictor"

    def __init__(self, block_size: int = 4096, lpc_orders=(8, 16, 24, 32), precision: int = 14):
        if not 2 <= precision <= 15:
            raise ValueError(f"precision must be in 2..15 bits (coefficients are int16), "
                             f"got {precision}")
        if block_size < 1:
            raise ValueError(f"block_size must be positive, got {block_size}")
        if any(not 1 <= o <= 32 for o in lpc_orders):
            raise ValueError(f"LPC orders must be in 1..32, got {lpc_orders}")
        self.block_size = block_size
        self.lpc_orders = tuple(int(o) for o in lpc_orders)
        self.precision = precision

    def _lpc(self, x, s, e, order):
        from scipy.linalg import solve_toeplitz
        seg = x[max(0, s - order):e].astype(np.float64)
        if seg.size <= order + 1:
            return None
        w = seg * np.hanning(seg.size)
        r = np.array([w[: w.size - k] @ w[k:] for k in range(order + 1)])
        if r[0] <= 0:
            return None
        r[0] *= 1 + 1e-9  # keeps the Toeplitz system well conditioned
        try:
            a = solve_toeplitz(r[:order], r[1:])
        except np.linalg.LinAlgError:
            return None
        top = np.abs(a).max()
        if not np.isfinite(top) or top == 0:
            return None
        shift = int(np.clip(self.precision - 1 - np.ceil(np.log2(top)), 0, 30))
        coefs = np.round(a * (1 << shift)).astype(np.int64)
        if np.abs(coefs).max() > 32767:  # ill-conditioned fit: does not fit int16
            return None
        out = np.empty(e - s, np.int64)
        _lpc_residual(x, s, e, coefs, shift, out)
        return coefs, shift, out

    def encode(self, x) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length) and per-block parameters as bytes (uint8)."""
        x = np.asarray(x, np.int64)
        fixed = [differences(x, k) for k in range(MAX_ORDER + 1)]
        residual = np.empty_like(x)
        side = bytearray()
        for s in range(0, x.size, self.block_size):
            e = min(s + self.block_size, x.size)
            best = min((_bits(fixed[k][s:e]), k) for k in range(MAX_ORDER + 1))
            choice = ("fixed", best[1], None, None, fixed[best[1]][s:e])
            for order in self.lpc_orders:
                fit = self._lpc(x, s, e, order)
                if fit is not None:
                    bits = _bits(fit[2]) + 16 * order + 24
                    if bits < best[0]:
                        best = (bits, order)
                        choice = ("lpc", order, fit[0], fit[1], fit[2])
            kind, order, coefs, shift, res = choice
            residual[s:e] = res
            if coefs is None:
                side += bytes([0, order])
            else:
                side += bytes([1, order, shift]) + coefs.astype("<i2").tobytes()
        return residual, np.frombuffer(bytes(side), np.uint8)

    def decode(self, residual, side) -> np.ndarray:
        """Exact inverse of :meth:`encode`, int64.

        Raises
        ------
        ValueError
            If the side information does not describe every block.
        """
        residual = np.asarray(residual, np.int64)
        n_blocks = -(-residual.size // self.block_size)
        side = bytes(np.asarray(side, np.uint8))
        kinds = np.zeros(n_blocks, np.int64)
        orders = np.zeros(n_blocks, np.int64)
        shifts = np.zeros(n_blocks, np.int64)
        coefs = np.zeros((n_blocks, 32), np.int64)
        pos = 0
        try:
            for b in range(n_blocks):
                kinds[b], orders[b] = side[pos], side[pos + 1]
                pos += 2
                if kinds[b] == 1:
                    shifts[b] = side[pos]
                    k = orders[b]
                    coefs[b, :k] = np.frombuffer(side[pos + 1:pos + 1 + 2 * k], "<i2")
                    pos += 1 + 2 * k
                elif kinds[b] != 0 or orders[b] > MAX_ORDER:
                    raise ValueError
        except (IndexError, ValueError):
            raise ValueError(f"predictor parameters do not describe {n_blocks} blocks") from None
        if pos != len(side):
            raise ValueError(f"predictor parameters do not describe {n_blocks} blocks")
        return _linear_inverse(residual, kinds, orders, shifts, coefs, self.block_size)

    def get_params(self) -> dict:
        return {"block_size": self.block_size,
                "lpc_orders": list(self.lpc_orders), "precision": self.precision}


@register
class Identity(Predictor):
    """No transform (codes go to the tokenizer as they are)."""

    kind = "none"

    def encode(self, x):
        return np.asarray(x, np.int64), np.zeros(0, np.uint8)

    def decode(self, residual, side=None):
        return np.asarray(residual, np.int64)

    def get_params(self) -> dict:
        return {}


def predictor_from_config(config: dict) -> Predictor:
    """Rebuild a predictor from its ``get_config()``; ValueError on an unknown kind."""
    return stage_from_config(config, "predictor")


# ----------------------------------------------------- a corpus-wide predictor
WARMUP_ORDER = 2


@njit(cache=True)
def model_lpc_residual(x, coefs, shift, out):
    """Residual of one fixed LPC (``(coefs . x[i-1..i-p]) >> shift``); int64, wrap-around.

    Sample ``i < p`` uses FLAC's fixed predictor of order ``min(i, 2)``.
    """
    p = coefs.shape[0]
    for i in range(x.shape[0]):
        if i < p or p == 0:
            k = min(i, WARMUP_ORDER)
            acc = 0
            for j in range(k):
                acc += _WEIGHTS[k, j] * x[i - 1 - j]
            out[i] = x[i] - acc
        else:
            acc = 0
            for j in range(p):
                acc += coefs[j] * x[i - 1 - j]
            out[i] = x[i] - (acc >> shift)


@njit(cache=True)
def model_lpc_inverse(r, coefs, shift, out):
    """Exact inverse of :func:`model_lpc_residual` (writes the samples into ``out``)."""
    p = coefs.shape[0]
    for i in range(r.shape[0]):
        if i < p or p == 0:
            k = min(i, WARMUP_ORDER)
            acc = 0
            for j in range(k):
                acc += _WEIGHTS[k, j] * out[i - 1 - j]
            out[i] = r[i] + acc
        else:
            acc = 0
            for j in range(p):
                acc += coefs[j] * out[i - 1 - j]
            out[i] = r[i] + (acc >> shift)


def fit_lpc_corpus(xs: list[np.ndarray], order: int, precision: int = 14) -> tuple[np.ndarray, int]:
    """Least-squares LPC over several recordings, quantized to integers.

    Parameters
    ----------
    xs : list of 1-D int64 arrays
    order : int
        0..32; 0 gives an empty predictor (fixed order-2 prediction everywhere).
    precision : int
        Bits of the largest quantized coefficient.

    Returns
    -------
    coefs : ndarray of int64, shape (order,) or (0,) when the fit fails
    shift : int

    Notes
    -----
    Normal equations of the lagged samples (covariance method), solved with
    ``numpy.linalg.lstsq``; quantization as FLAC's LPC (shift so that the
    largest coefficient has ``precision`` bits).
    """
    if order < 1:
        return np.zeros(0, np.int64), 0
    R = np.zeros((order, order))
    b = np.zeros(order)
    for x in xs:
        if x.size <= order + 1:
            continue
        xf = x.astype(np.float64)
        xf = xf - xf.mean()
        lag = np.lib.stride_tricks.sliding_window_view(xf, order + 1)[:, ::-1]
        R += lag[:, 1:].T @ lag[:, 1:]
        b += lag[:, 1:].T @ lag[:, 0]
    if not np.isfinite(R).all() or R.trace() <= 0:
        return np.zeros(0, np.int64), 0
    a = np.linalg.lstsq(R + 1e-9 * R.trace() * np.eye(order), b, rcond=None)[0]
    top = np.abs(a).max()
    if not np.isfinite(top) or top == 0:
        return np.zeros(0, np.int64), 0
    shift = int(np.clip(precision - 1 - np.ceil(np.log2(top)), 0, 30))
    coefs = np.round(a * (1 << shift)).astype(np.int64)
    if np.abs(coefs).max() >= 1 << 20:
        return np.zeros(0, np.int64), 0
    return coefs, shift
