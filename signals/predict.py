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

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ubpe._jit import njit, numba_ref

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


def differences(x: ArrayLike, order: int) -> np.ndarray:
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

    def encode(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length as ``x``) and side information (uint8)."""
        raise NotImplementedError

    def decode(self, residual: ArrayLike, side: ArrayLike) -> np.ndarray:
        """Exact inverse of :meth:`encode`: the samples, int64."""
        raise NotImplementedError


MAX_BLOCK = 1 << 30  # a predictor's block size at most (a payload's too: docs/format.md)


def _checked_block_size(block_size: Any) -> int:
    """``block_size`` as an int, or ValueError unless it is an integer in 1..``MAX_BLOCK`` (a
    saved config's ``10**30`` reached the compiled kernels as a numba typing error)."""
    if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer) \
            or not 1 <= block_size <= MAX_BLOCK:
        raise ValueError(f"block_size must be an integer in 1..{MAX_BLOCK}, got {block_size!r}")
    return int(block_size)


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

    def encode(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Residuals (int64, same length) and side information (empty)."""
        return differences(x, self.order), np.zeros(0, np.uint8)

    def decode(self, residual: ArrayLike, side: ArrayLike | None = None) -> np.ndarray:
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
        self.block_size = _checked_block_size(block_size)
        self.max_order = max_order

    def encode(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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

    def decode(self, residual: ArrayLike, orders: ArrayLike) -> np.ndarray:
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
        block_size = _checked_block_size(block_size)
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

    def encode(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
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

    def decode(self, residual: ArrayLike, side: ArrayLike) -> np.ndarray:
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

    def encode(self, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(x, np.int64), np.zeros(0, np.uint8)

    def decode(self, residual: ArrayLike, side: ArrayLike | None = None) -> np.ndarray:
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


# ------------------------------------------- block LPC with an LZP match model
# The per-channel payload's predictor (signals.channel): per block, FLAC's
# fixed predictors or a quantized LPC (Levinson-Durbin on the Hann-windowed
# autocorrelation, FLAC format specification "SUBFRAME_LPC"), optionally
# overridden by a match model: as LZP (C. Bloom, "LZP: a new data compression
# algorithm", DCC 1996), the last position where the previous ``mh`` samples
# occurred predicts the next sample, once that match has predicted ``T``
# samples in a row exactly. All arithmetic is int64 with wrap-around, the
# same in both directions, so the inverse is exact for any values.

MATCH_BUCKETS = 4  # 0: no match in use; 1..3: match in use, by run length


@njit(cache=True)
def _levinson(r, order):
    """LPC coefficients of every order 1..order from autocorrelation ``r``; row p-1 holds order p."""
    a = np.zeros((order, order))
    err = r[0]
    errs = np.full(order, np.nan)
    cur = np.zeros(order)
    for p in range(order):
        if err <= 0:
            break
        acc = r[p + 1]
        for j in range(p):
            acc -= cur[j] * r[p - j]
        k = acc / err
        new = cur.copy()
        new[p] = k
        for j in range(p):
            new[j] = cur[j] - k * cur[p - 1 - j]
        cur = new
        err *= 1 - k * k
        errs[p] = err
        a[p, :p + 1] = cur[:p + 1]
    return a, errs


@njit(cache=True, inline="always")
def _lpc_predict(x, i, kind, order, shift, coefs, b):
    """The prediction of ``x[i]`` (int64, wrapping) by block ``b``'s predictor: a lag
    (kind 2: the sample ``order`` before, the previous one at the start), FLAC's fixed
    predictor of ``order`` (kind 0), or the LPC ``coefs[b, :order]`` with ``shift`` (kind 1;
    before sample ``order``, the fixed predictor of order ``min(i, WARMUP_ORDER)``).

    Written as one loop over the terms, with one exit: numba then keeps no reference count
    of ``x`` and ``coefs`` where this is inlined in a loop (with a return in each branch it
    took two each a call: an LPC of order 8 in a loop ran at 23 ns a sample, 5 this way)."""
    if kind == 2:
        nt, off, sh, src = (1 if i > 0 else 0), (order - 1 if i >= order else 0), 0, 0
    elif kind == 0 or i < order:
        nt, off, sh = min(order if kind == 0 else min(i, WARMUP_ORDER), i, MAX_ORDER), 0, 0
        src = 1
    else:
        nt, off, sh, src = order, 0, shift, 2
    acc = np.int64(0)
    for j in range(nt):
        w = np.int64(1) if src == 0 else (_WEIGHTS[nt, j] if src == 1 else coefs[b, j])
        acc += w * x[i - 1 - j - off]
    return acc >> sh


@njit(cache=True)
def _cost(e):
    a = abs(float(e))
    return np.log2(1.0 + a)


# log2(1 + k) for k in 0..4095, by the C library's log2 (the function numba's np.log2 calls):
# the very floats of the expression in :func:`_cost`; built without numba, so that importing
# this module compiles nothing (the CLI starts numba's target only when it needs it). A
# constant of the kernels below (frozen when they compile).
_LOG2_1P = np.array([math.log2(1.0 + k) for k in range(4096)])


@njit(cache=True, inline="always")
def _cost1p(v):
    """``np.log2(1.0 + abs(float(v)))`` of an int64, from a table for ``|v| < 4096`` (the same
    floats: the table holds that expression's values)."""
    if -4096 < v < 4096:
        return _LOG2_1P[abs(v)]
    return np.log2(1.0 + abs(float(v)))


_SUM_CAP = 1 << 36  # |residual| counted at most this much in the analysis sums (exact below it)


@njit(cache=True, inline="always")
def _abs_cap(d):
    a = (d ^ (d >> 63)) - (d >> 63)
    if a < 0 or a > _SUM_CAP:  # -2**63, or beyond the cap
        a = _SUM_CAP
    return a


@njit(cache=True)
def _fixed_sums(x, s, e, sums):
    """Sum of |residual| of the fixed predictors of orders 0..4 over ``x[s:e]`` (into ``sums``)."""
    dummy = np.zeros((1, 1), np.int64)
    t0 = 0
    t1 = 0
    t2 = 0
    t3 = 0
    t4 = 0
    lo = min(max(s, MAX_ORDER), e)
    for i in range(s, lo):  # warm-up at the signal start
        t0 += _abs_cap(x[i] - _lpc_predict(x, i, 0, 0, 0, dummy, 0))
        t1 += _abs_cap(x[i] - _lpc_predict(x, i, 0, 1, 0, dummy, 0))
        t2 += _abs_cap(x[i] - _lpc_predict(x, i, 0, 2, 0, dummy, 0))
        t3 += _abs_cap(x[i] - _lpc_predict(x, i, 0, 3, 0, dummy, 0))
        t4 += _abs_cap(x[i] - _lpc_predict(x, i, 0, 4, 0, dummy, 0))
    # views, so that the loop indices are plain non-negative counters (it vectorizes)
    xa = x[lo:e]
    xb = x[lo - 1:e - 1]
    xc = x[lo - 2:e - 2]
    xd = x[lo - 3:e - 3]
    xf = x[lo - 4:e - 4]
    for i in range(e - lo):
        a = xa[i]
        b = xb[i]
        c = xc[i]
        d = xd[i]
        f = xf[i]
        t0 += _abs_cap(a)
        t1 += _abs_cap(a - b)
        t2 += _abs_cap(a - 2 * b + c)
        t3 += _abs_cap(a - 3 * b + 3 * c - d)
        t4 += _abs_cap(a - 4 * b + 6 * c - 4 * d + f)
    sums[0] = t0
    sums[1] = t1
    sums[2] = t2
    sums[3] = t3
    sums[4] = t4


@njit(cache=True)
def _lag_sum(x, s, e, lag, limit=-1):
    """Sum of |x[i] - x[i - lag]| over ``x[s:e]`` (the previous sample before ``lag``); with
    ``limit`` >= 0, any value above ``limit`` once the sum exceeds it (chunks of 512 samples:
    the terms are >= 0, so the sum cannot come back below it)."""
    tot = 0
    lo = min(max(s, lag), e)
    for i in range(s, lo):
        tot += _abs_cap(x[i] - (x[i - 1] if i > 0 else 0))
    for c in range(lo, e, 512):
        if 0 <= limit < tot:
            return tot
        ce = min(e, c + 512)
        xa = x[c:ce]
        xb = x[c - lag:ce - lag]
        for i in range(ce - c):
            tot += _abs_cap(xa[i] - xb[i])
    return tot


@njit(cache=True)
def _lpc_sum(x, s, e, q, o, sh, limit=-1):
    """Sum of |residual| of the LPC ``q[0, :o] >> sh`` over ``x[s:e]``; with ``limit`` >= 0,
    any value above ``limit`` once the sum exceeds it (as :func:`_lag_sum`)."""
    tot = 0
    lo = min(max(s, o), e)
    for i in range(s, lo):
        tot += _abs_cap(x[i] - _lpc_predict(x, i, 1, o, sh, q, 0))
    cr = q[0, :o][::-1].copy()  # cr[j] weighs x[i - o + j]
    fl = o <= 32 and _fits_float_dot(x[lo - o:e], cr)
    res = np.empty(512, np.int64)
    for c in range(lo, e, 512):
        if 0 <= limit < tot:
            return tot
        ce = min(e, c + 512)
        xs = x[c - o:ce]
        if fl:  # the same residuals, through exact float64 sums
            rc = res[:ce - c]
            _lpc_residual_float(xs, cr, o, sh, x[c:ce], rc)
            for i in range(ce - c):
                tot += _abs_cap(rc[i])
            continue
        for i in range(ce - c):
            acc = 0
            for j in range(o):
                acc += cr[j] * xs[i + j]
            tot += _abs_cap(xs[i + o] - (acc >> sh))
    return tot


@njit(cache=True)
def _sum_limit(best, side, n):
    """The largest sum of |residual| over ``n`` samples at which a predictor of ``side`` bits
    may still cost less than ``best`` (``side + n log2(1 + sum / n) < best``), with a margin:
    a sum above it cannot; -1 (no limit) where the bound is not finite."""
    t = n * (np.exp2((best - side) / n) - 1.0)
    if not np.isfinite(t) or t >= 2.0 ** 62:
        return -1
    return max(np.int64(0), np.int64(t * (1.0 + 1e-9)) + 1)  # (t < 0: no sum but 0 may)


@njit(cache=True)
def _autocorr(seg, pmax):
    """``r[k] = sum_{i >= k} seg[i] * seg[i - k]``, k = 0..pmax, each summed in the order of i.

    The lags run side by side (the inner loop over k vectorizes), four samples i
    at a time, each lag's sum still taken in the order of i: the same
    floating-point result as one lag at a time. The products with ``seg[i - k]``
    for ``i < k`` read zeros of a reversed, padded copy (``+0.0`` added to a sum
    that starts at ``+0.0``: no change)."""
    m = seg.shape[0]
    L = (pmax // 8 + 1) * 8
    rev = np.zeros(m + L + 4)
    for t in range(m):
        rev[t + 4] = seg[m - 1 - t]  # rev[m + 3 - i + k] is seg[i - k] (0 for i < k)
    acc = np.zeros(L)
    i = 0
    while i + 4 <= m:
        w0 = seg[i]
        w1 = seg[i + 1]
        w2 = seg[i + 2]
        w3 = seg[i + 3]
        base = m + 3 - i
        v0 = rev[base:base + L]
        v1 = rev[base - 1:base - 1 + L]
        v2 = rev[base - 2:base - 2 + L]
        v3 = rev[base - 3:base - 3 + L]
        for k in range(L):
            a = acc[k]
            a += w0 * v0[k]
            a += w1 * v1[k]
            a += w2 * v2[k]
            a += w3 * v3[k]
            acc[k] = a
        i += 4
    while i < m:
        w = seg[i]
        base = m + 3 - i
        v = rev[base:base + L]
        for k in range(L):
            acc[k] += w * v[k]
        i += 1
    return acc[:pmax + 1].copy()


_HANN_SYNC = 64  # _hann computes cos and sin directly every this many samples


@njit(cache=True)
def _hann(m):
    """The Hann window ``0.5 - 0.5 cos(2 pi (i + 1/2) / m)``, ``i < m`` (float64, shape
    ``(m,)``): cos and sin computed every ``_HANN_SYNC`` samples and rotated by the angle
    step in between (a libm cos costs about 12 ns, a rotation about 1; the values agree with
    the direct ones to within 1e-13)."""
    w = np.empty(m)
    step = 2 * np.pi / m
    cd, sd = np.cos(step), np.sin(step)
    c = s = 0.0
    for i in range(m):
        if i % _HANN_SYNC == 0:
            a = step * (i + 0.5)
            c, s = np.cos(a), np.sin(a)
        else:
            c, s = c * cd - s * sd, s * cd + c * sd
        w[i] = 0.5 - 0.5 * c
    return w


@njit(cache=True)
def block_lpc_analyze(x, block, lpc_orders, precision, exact=True, max_lag=0):
    """Per block: kind (0 fixed, 1 LPC), order, shift and int16-range coefficients (numba).

    The choice minimises ``n log2(1 + mean |e|)`` plus 16 bits per coefficient.
    With ``exact`` False, only the LPC order with the least Levinson error
    (plus coefficient cost) is evaluated against the fixed predictors.
    Lags 2..``max_lag`` (kind 2: ``x[i - lag]``, a period) are candidates too.
    """
    n = x.shape[0]
    nb = (n + block - 1) // block
    kinds = np.zeros(nb, np.int64)
    orders = np.zeros(nb, np.int64)
    shifts = np.zeros(nb, np.int64)
    coefs = np.zeros((nb, 32), np.int64)
    pmax = 0
    omin = 1 << 30
    for o in lpc_orders:
        pmax = max(pmax, o)
        omin = min(omin, o)
    sums = np.zeros(MAX_ORDER + 1, np.int64)
    win = np.zeros(0)
    for b in range(nb):
        s = b * block
        e = min(n, s + block)
        # fixed orders 0..4: estimated bits from the mean absolute residual
        best = np.inf
        _fixed_sums(x, s, e, sums)
        for k in range(MAX_ORDER + 1):
            c = (e - s) * np.log2(1.0 + float(sums[k]) / (e - s))
            if c < best:
                best = c
                orders[b] = k
        # (a lag costs at least 16 bits and an LPC 16 * order + 24: none can beat a cheaper block)
        for lag in range(2, max_lag + 1 if best > 16.0 else 2):
            tot = float(_lag_sum(x, s, e, lag, _sum_limit(best, 16.0, e - s)))
            c = 16.0 + (e - s) * np.log2(1.0 + tot / (e - s))
            if c < best:
                best = c
                kinds[b] = 2
                orders[b] = lag
        if pmax == 0 or best <= 16.0 * omin + 24:
            continue
        lo = max(0, s - pmax)
        m = e - lo
        if m <= pmax + 1:
            continue
        if win.shape[0] != m:
            win = _hann(m)
        seg = np.empty(m)
        mean = 0.0
        for i in range(m):
            mean += float(x[lo + i])
        mean /= m
        for i in range(m):
            seg[i] = (float(x[lo + i]) - mean) * win[i]
        # autocorrelation, each lag summed in the order of i (lags side by side)
        r = _autocorr(seg, pmax)
        if not r[0] > 0 or not np.isfinite(r[0]):
            continue
        r[0] *= 1 + 1e-9
        a, errs = _levinson(r, pmax)
        pick = -1
        if not exact:  # one order, by the Levinson error and 16 bits per coefficient
            bestq = np.inf
            for o in lpc_orders:
                if errs[o - 1] > 0:
                    q_ = 0.5 * m * np.log2(errs[o - 1]) + 16.0 * o
                    if q_ < bestq:
                        bestq = q_
                        pick = o
        for o in lpc_orders:
            if not exact and o != pick:
                continue
            top = 0.0
            for j in range(o):
                top = max(top, abs(a[o - 1, j]))
            if not (top > 0) or not np.isfinite(top):
                continue
            sh = precision - 1 - int(np.ceil(np.log2(top)))
            sh = min(max(sh, 0), 30)
            q = np.zeros((1, 32), np.int64)
            ok = True
            for j in range(o):
                v = np.round(a[o - 1, j] * (1 << sh))
                if abs(v) > 32767:
                    ok = False
                q[0, j] = np.int64(v)
            if not ok:
                continue
            tot = float(_lpc_sum(x, s, e, q, o, sh, _sum_limit(best, 16.0 * o + 24, e - s)))
            c = 16.0 * o + 24 + (e - s) * np.log2(1.0 + tot / (e - s))
            if c < best:
                best = c
                kinds[b] = 1
                orders[b] = o
                shifts[b] = sh
                coefs[b] = q[0]
    return kinds, orders, shifts, coefs


# called once a sample: in the AOT build a call that passes an array costs more than the hash
@njit(cache=True, inline="always")
def _hash(x, i, mh, mask):
    h = 0
    for j in range(1, mh + 1):
        h = (h + x[i - j]) * 0x5BD1E995
        h ^= h >> 27
    return h & mask


@njit(cache=True, inline="always")
def _bucket(mlen, t):
    d = mlen - t
    if d < 4:
        return 1
    if d < 16:
        return 2
    return 3


_FLOAT_DOT = 1 << 31  # |samples| below this: an LPC sum (<= 32 coefficients of |c| <= 2**15) is
# exact in float64


@njit(cache=True)
def _fits_float_dot(xs, cr):
    """Whether every sample of ``xs`` is below ``_FLOAT_DOT`` in magnitude and every
    coefficient of ``cr`` at most 2**15."""
    ok = True
    for v in cr:
        ok &= (v <= 32768) & (v >= -32768)
    for v in xs:
        ok &= (v < _FLOAT_DOT) & (v > -_FLOAT_DOT)
    return ok


@njit(cache=True, fastmath=True)
def _float_lpc_sums(xf, cf, order, acc):
    # every product and partial sum is an integer below 2**51 in magnitude: exact in float64 in
    # any order of summation (so fastmath's reassociation changes nothing)
    for i in range(acc.shape[0]):
        a = 0.0
        for j in range(order):
            a += cf[j] * xf[i + j]
        acc[i] = a


@njit(cache=True)
def _lpc_residual_float(xs, cr, order, shift, xa, out):
    """``out[i] = xa[i] - (sum_j cr[j] * xs[i + j]) >> shift`` for ``|xs| < _FLOAT_DOT`` and
    int16 ``cr`` (at most 32): the sums in float64 (exact: below 2**51), vectorized."""
    xf = np.empty(xs.shape[0])
    for i in range(xs.shape[0]):
        xf[i] = float(xs[i])
    cf = np.empty(order)
    for j in range(order):
        cf[j] = float(cr[j])
    acc = np.empty(out.shape[0])
    _float_lpc_sums(xf, cf, order, acc)
    for i in range(out.shape[0]):
        out[i] = xa[i] - (np.int64(acc[i]) >> shift)


@njit(cache=True)
def _block_residual(x, s, e, kind, order, shift, coefs, b, r):
    """``r[i] = x[i] - _lpc_predict(x, i, kind, order, shift, coefs, b)`` for i in [s, e), the
    steady state over views (plain non-negative loop counters: it vectorizes)."""
    lo = min(max(s, order), e)
    for i in range(s, lo):  # warm-up at the signal start
        r[i] = x[i] - _lpc_predict(x, i, kind, order, shift, coefs, b)
    m = e - lo
    if m <= 0:
        return
    out = r[lo:e]
    xa = x[lo:e]
    if kind == 2:
        xl = x[lo - order:e - order]
        for i in range(m):
            out[i] = xa[i] - xl[i]
    elif kind == 1:
        cr = coefs[b, :order][::-1].copy()  # cr[j] weighs x[i - order + j]
        xs = x[lo - order:e]
        if order <= 32 and _fits_float_dot(xs, cr):
            _lpc_residual_float(xs, cr, order, shift, xa, out)
            return
        for i in range(m):
            acc = 0
            for j in range(order):
                acc += cr[j] * xs[i + j]
            out[i] = xa[i] - (acc >> shift)
    elif order == 0:
        for i in range(m):
            out[i] = xa[i]
    elif order == 1:
        x1 = x[lo - 1:e - 1]
        for i in range(m):
            out[i] = xa[i] - x1[i]
    elif order == 2:
        x1 = x[lo - 1:e - 1]
        x2 = x[lo - 2:e - 2]
        for i in range(m):
            out[i] = xa[i] - (2 * x1[i] - x2[i])
    elif order == 3:
        x1 = x[lo - 1:e - 1]
        x2 = x[lo - 2:e - 2]
        x3 = x[lo - 3:e - 3]
        for i in range(m):
            out[i] = xa[i] - (3 * x1[i] - 3 * x2[i] + x3[i])
    else:
        x1 = x[lo - 1:e - 1]
        x2 = x[lo - 2:e - 2]
        x3 = x[lo - 3:e - 3]
        x4 = x[lo - 4:e - 4]
        for i in range(m):
            out[i] = xa[i] - (4 * x1[i] - 6 * x2[i] + 4 * x3[i] - x4[i])


@njit(cache=True, inline="always")
def follow_match(x, i, ptr, mlen):
    """The match model after sample ``i``: ``(ptr, mlen)`` moved on where ``x[ptr]`` predicted
    ``x[i]``, else off (``(-1, 0)``); the encoders and decoders share it."""
    if ptr < 0:
        return ptr, mlen
    if x[ptr] == x[i]:
        return ptr + 1, mlen + 1
    return -1, 0


@njit(cache=True)
def predict_fused(x, block, kinds, orders, shifts, coefs, mh, t, tbits):
    """Residuals (int64) and match buckets (uint8) of the block LPC + match predictor.

    ``mh = 0`` turns the match model off (all buckets 0).
    """
    r, mb, _ = predict_fused_gain(x, block, kinds, orders, shifts, coefs, mh, t, tbits)
    return r, mb


@njit(cache=True)
def predict_fused_gain(x, block, kinds, orders, shifts, coefs, mh, t, tbits):
    """:func:`predict_fused`, plus the estimated bits the match model saves.

    The gain is ``sum log2(1 + |e_lpc|) - log2(1 + |e_match|)`` over the
    samples that the match model predicts.
    """
    n = x.shape[0]
    r = np.empty(n, np.int64)
    mb = np.zeros(n, np.uint8)
    gain = 0.0
    for b in range((n + block - 1) // block):
        _block_residual(x, b * block, min(n, (b + 1) * block), kinds[b], orders[b], shifts[b],
                        coefs, b, r)
    if mh == 0:
        return r, mb, gain
    size = 1 << tbits
    table = np.full(size, -1, np.int64)
    mask = size - 1
    ptr = -1
    mlen = 0
    for i in range(n):
        h = -1
        if i >= mh:
            h = _hash(x, i, mh, mask)
            if ptr < 0:
                ptr = table[h]
                mlen = 0
        if ptr >= 0 and mlen >= t:  # r[i] holds the block predictor's residual until here
            pred = x[ptr]
            mb[i] = _bucket(mlen, t)
            gain += _cost1p(r[i]) - _cost1p(x[i] - pred)
            r[i] = x[i] - pred
        ptr, mlen = follow_match(x, i, ptr, mlen)
        if h >= 0:
            table[h] = i
    return r, mb, gain


@njit(cache=True)
def parse_block_side(side, n_blocks):
    """Per-block parameters from their bytes: kind, order[, shift, int16 coefs]; (..., ok)."""
    kinds = np.zeros(n_blocks, np.int64)
    orders = np.zeros(n_blocks, np.int64)
    shifts = np.zeros(n_blocks, np.int64)
    coefs = np.zeros((n_blocks, 32), np.int64)
    pos = 0
    m = side.shape[0]
    for b in range(n_blocks):
        if pos + 2 > m:
            return kinds, orders, shifts, coefs, False
        kinds[b] = side[pos]
        orders[b] = side[pos + 1]
        pos += 2
        if kinds[b] == 0:
            if orders[b] > MAX_ORDER:
                return kinds, orders, shifts, coefs, False
        elif kinds[b] == 2:  # 2, 0, then the lag (u16: the byte after the kind is always 0)
            if pos + 2 > m or orders[b] != 0:
                return kinds, orders, shifts, coefs, False
            orders[b] = np.int64(side[pos]) | (np.int64(side[pos + 1]) << 8)
            pos += 2
            if orders[b] < 2:
                return kinds, orders, shifts, coefs, False
        elif kinds[b] == 1:
            o = orders[b]
            if o < 1 or o > 32 or pos + 1 + 2 * o > m:
                return kinds, orders, shifts, coefs, False
            shifts[b] = side[pos]
            if shifts[b] > 30:
                return kinds, orders, shifts, coefs, False
            pos += 1
            for j in range(o):
                v = np.int64(side[pos]) | (np.int64(side[pos + 1]) << 8)
                if v >= 32768:
                    v -= 65536
                coefs[b, j] = v
                pos += 2
        else:
            return kinds, orders, shifts, coefs, False
    return kinds, orders, shifts, coefs, pos == m


def block_side_bytes(kinds: np.ndarray, orders: np.ndarray, shifts: np.ndarray,
                     coefs: np.ndarray) -> bytes:
    """Inverse of :func:`parse_block_side`."""
    out = bytearray()
    for b in range(len(kinds)):
        if kinds[b] == 0:
            out += bytes([0, int(orders[b])])
        elif kinds[b] == 2:
            out += bytes([2, 0]) + int(orders[b]).to_bytes(2, "little")
        else:
            o = int(orders[b])
            out += bytes([1, o, int(shifts[b])]) + coefs[b, :o].astype("<i2").tobytes()
    return bytes(out)


# ------------------------------------------------- adaptive cascade (integers)
# After the block LPC, a cascade of two adaptive filters over the residual, as
# Monkey's Audio and WavPack cascade them (M. Ashland, Monkey's Audio "NNFilter";
# D. Bryant, WavPack "decorrelation passes"): a normalised LMS of order 16
# (step ``err / (sum |h| * NLMS_DIV)``), then a sign-sign LMS of order 32.
# Weights are int64 in Q12, clamped; every operation is integer, so the
# decoder reproduces the weights exactly.
LMS_SHIFT = 12
LMS_MAX_ORDER = 32
# variants (NLMS order, NLMS step divisor, sign-LMS order, sign-LMS step): fast to slow adaptation
CASCADES = {1: (16, 8, 32, 16), 2: (16, 32, 32, 4), 3: (32, 64, 32, 2)}
_CASCADE_TABLE = np.array([[0, 1, 0, 1], [16, 8, 32, 16], [16, 32, 32, 4], [32, 64, 32, 2]], np.int64)
# variant 4 (taps, shift): one sign-data LMS over the residual saturated to int16, with
# int16 weights and adapt values and an int32 dot product, as Monkey's Audio's NNFilter
# computes its filters (M. Ashland, Monkey's Audio, NNFilter.cpp): vectors of 16-bit lanes,
# so that the filter costs less than half the time of variant 1 a sample (on the speech of
# bench/RESULTS.md, for the same bits at level 5; it adapts more slowly from zero, so that
# short packets code better with variant 1). See _sign_data_ref for its arithmetic.
SIGN_DATA = {4: (16, 9)}
LMS_VARIANTS = (*CASCADES, *SIGN_DATA)  # every value of a payload's ``lms`` but 0
MAX_LMS = max(LMS_VARIANTS)
_CLAMP = 1 << 40
_WCLAMP = 1 << 30


@njit(cache=True, inline="always")
def _sat_abs(v):
    """``min(|v|, _CLAMP)`` (``-2**63`` included), without a branch: the sign of a residual
    is a coin toss, and a branch on it costs a misprediction every other sample."""
    s = v >> 63
    return np.int64(min(np.uint64((v ^ s) - s), np.uint64(_CLAMP)))


@njit(cache=True, inline="always")
def _clamp(v, lim):
    return min(max(v, -lim), lim)


@njit(cache=True, inline="always")
def _lms_predict(h, i, w, m):
    acc = 0
    for j in range(min(m, i)):
        acc += w[j] * h[i - 1 - j]
    return acc >> LMS_SHIFT


@njit(cache=True, inline="always")
def _nlms_update(h, i, w, r, m, div):
    m = min(m, i)
    en = 1
    for j in range(m):
        en += _sat_abs(h[i - 1 - j])
    step = (_clamp(r, _CLAMP) << LMS_SHIFT) // (en * div)
    for j in range(m):
        v = h[i - 1 - j]
        sg = (v > 0) - (v < 0)
        w[j] = _clamp(w[j] + sg * step, _WCLAMP)


@njit(cache=True, inline="always")
def _sign_update(h, i, w, r, m, mu):
    s = mu * ((r > 0) - (r < 0))
    for j in range(min(m, i)):
        v = h[i - 1 - j]
        w[j] = _clamp(w[j] + s * ((v > 0) - (v < 0)), _WCLAMP)


# The cascade kernels below keep the filter histories with LMS_MAX_ORDER zeros
# in front: a zero past sample adds nothing to a prediction, moves no weight
# (its sign is 0) and adds 0 to the NLMS energy, so every sample runs the
# full-length loops (no ``min(m, i)``) with the same integers as
# ``_lms_predict`` / ``_nlms_update`` / ``_sign_update`` over the unpadded
# history. Weights are kept reversed (``wr[q]`` is ``w[m - 1 - q]``) so that
# the dot products and updates walk both arrays forwards; the signs of the
# history are kept beside it, and the NLMS energy is a running sum. Integer
# sums wrap modulo 2**64, so their order does not change them.
@njit(cache=True, inline="always")
def _sign(v):
    return (v > 0) - (v < 0)


@njit(cache=True, inline="always")
def _dot(w, h, lo, m):
    hv = h[lo:lo + m]  # a view: its indices below are known >= 0 (no wrap-around test)
    acc = 0
    for q in range(m):
        acc += w[q] * hv[q]
    return acc >> LMS_SHIFT


@njit(cache=True, inline="always")
def _floordiv_pos(a, d):
    """``a // d`` (floor) for ``d > 0`` and ``|a| + d < 2**63``, through an unsigned division
    of the magnitude: LLVM divides in 32 bits where both operands fit, behind a branch
    on ``(a | d) >> 32``; a negative ``a`` would take the slow side of that branch at
    random (its sign), a magnitude takes the same side sample after sample. In the
    cascade ``|a| <= 2**52`` (a clamped residual, shifted) and ``d <= 2**51``."""
    neg = a < 0
    na = d - 1 - a if neg else a
    q = np.int64(np.uint64(na) // np.uint64(d))
    return -q if neg else q


@njit(cache=True, inline="always")
def _step_update(w, sg, lo, m, step):
    sv = sg[lo:lo + m]
    for q in range(m):  # sv[q] * step as a select (an int64 multiply is slow in vectors)
        sq = sv[q]
        w[q] = min(max(w[q] + (step if sq > 0 else (-step if sq < 0 else 0)), -_WCLAMP), _WCLAMP)


@njit(cache=True)
def _histories(m):
    """Four zeroed int64 arrays of length ``m``, cut from one allocation at staggered
    offsets: arrays that start at the same address modulo 4 KiB make the loads of
    one alias the stores of another in the CPU (a stall per sample)."""
    gap = m + 72
    buf = np.zeros(4 * gap, np.int64)
    return buf[0:m], buf[gap:gap + m], buf[2 * gap:2 * gap + m], buf[3 * gap:3 * gap + m]


@njit(cache=True, inline="always")
def _cascade_run(e1, m1, d1, m2, mu):
    n = e1.shape[0]
    pad = LMS_MAX_ORDER
    h1, s1, h2, s2 = _histories(n + pad)
    for i in range(n):
        h1[pad + i] = e1[i]
        s1[pad + i] = _sign(e1[i])
    e3 = np.empty(n, np.int64)
    w1 = np.zeros(LMS_MAX_ORDER, np.int64)
    w2 = np.zeros(LMS_MAX_ORDER, np.int64)
    en = 1
    for i in range(n):
        b = pad + i
        v2 = e1[i] - _dot(w1, h1, b - m1, m1)
        _step_update(w1, s1, b - m1, m1, _floordiv_pos(_clamp(v2, _CLAMP) << LMS_SHIFT, en * d1))
        en += _sat_abs(h1[b]) - _sat_abs(h1[b - m1])
        v3 = v2 - _dot(w2, h2, b - m2, m2)
        _step_update(w2, s2, b - m2, m2, mu * _sign(v3))
        h2[b] = v2
        s2[b] = _sign(v2)
        e3[i] = v3
    return e3


# one kernel per variant, its orders and steps constants (CASCADES): the compiler unrolls the
# filters' fixed-length loops
@njit(cache=True)
def _cascade_v1(e1):
    return _cascade_run(e1, 16, 8, 32, 16)


@njit(cache=True)
def _cascade_v2(e1):
    return _cascade_run(e1, 16, 32, 32, 4)


@njit(cache=True)
def _cascade_v3(e1):
    return _cascade_run(e1, 32, 64, 32, 2)


@njit(cache=True)
def cascade_forward(e1, variant=1):
    """LPC residual -> cascade residual (an NLMS, then a sign-sign LMS; see ``CASCADES``):
    the float64 path of :func:`_cascade_forward_fp` where it stays exact, else int64.
    Variant 4 is the sign-data LMS of ``SIGN_DATA`` (:func:`_sign_data_ref`). Raises
    ValueError for a variant not in ``LMS_VARIANTS``."""
    _check_variant(variant)
    if variant == 4:
        return _sign_data(e1, False)
    e3, ok = _cascade_forward_fp(e1, variant)
    if ok:
        return e3
    if variant == 1:
        return _cascade_v1(e1)
    if variant == 2:
        return _cascade_v2(e1)
    if variant == 3:
        return _cascade_v3(e1)
    m1, d1, m2, mu = _CASCADE_TABLE[variant]
    return _cascade_run(e1, m1, d1, m2, mu)


@njit(cache=True)
def _cascade_inverse_int(e3, variant):
    """Exact inverse of :func:`cascade_forward`, in int64 (any input)."""
    m1, d1, m2, mu = _CASCADE_TABLE[variant]
    n = e3.shape[0]
    pad = LMS_MAX_ORDER
    h1, s1, h2, s2 = _histories(n + pad)
    w1 = np.zeros(LMS_MAX_ORDER, np.int64)
    w2 = np.zeros(LMS_MAX_ORDER, np.int64)
    en = 1
    for i in range(n):
        b = pad + i
        r = e3[i]
        v2 = r + _dot(w2, h2, b - m2, m2)
        _step_update(w2, s2, b - m2, m2, mu * _sign(r))
        h2[b] = v2
        s2[b] = _sign(v2)
        v1 = v2 + _dot(w1, h1, b - m1, m1)
        _step_update(w1, s1, b - m1, m1, _floordiv_pos(_clamp(v2, _CLAMP) << LMS_SHIFT, en * d1))
        h1[b] = v1
        s1[b] = _sign(v1)
        en += _sat_abs(v1) - _sat_abs(h1[b - m1])
    return h1[pad:]


# The cascade's fast path (both directions) runs the same integers in float64:
# while every filter input and output stays below FP_LIMIT in magnitude, a product of a weight
# (|w| <= 2**30) and a past output is below 2**47 and a sum of 32 of them
# below 2**52, so every dot product, weight update (|w + step| < 2**53) and
# clamp is exact in any order of summation; float lanes take fused
# multiply-adds where int64 lanes need three-uop multiplies. The NLMS step's
# floor division is the floor of a float division (exact, see _fstep). The
# first value at or above the limit sends the whole input to the int64 kernels.
FP_LIMIT = 1 << 17
_FP_MATH = {"reassoc", "contract"}


# The filters' loops in float64 are the vector loops of signals._intrinsics (loads,
# multiplies and adds of 4 lanes, no alias checks or remainder loops), for the two
# orders that the variants use.
_dot16 = numba_ref("signals._intrinsics", "dot16")
_dot32 = numba_ref("signals._intrinsics", "dot32")
_step16 = numba_ref("signals._intrinsics", "step16")
_step32 = numba_ref("signals._intrinsics", "step32")
assert all(m in (16, 32) for v in CASCADES.values() for m in v[::2])
_sd16_forward = numba_ref("signals._intrinsics", "sign_data16_forward")
_sd16_inverse = numba_ref("signals._intrinsics", "sign_data16_inverse")
_sd16_step = numba_ref("signals._intrinsics", "sign_data16_step")
_as_int64_c = numba_ref("signals._intrinsics", "as_int64_c")
assert SIGN_DATA == {4: (16, 9)}  # the constants of those three kernels


@njit(cache=True, inline="always")
def _check_variant(variant):
    if variant < 1 or variant > MAX_LMS:
        raise ValueError("unknown adaptive cascade variant")


@njit(cache=True, inline="always")
def _sign_data(a, inverse):
    """Variant 4 over all of ``a`` (1-D integers, taken as int64: a copy where ``a`` is not
    contiguous int64; uint64 as its bit pattern): the vector kernels' whole loop."""
    src = _as_int64_c(a)
    out = np.empty(src.shape[0], np.int64)
    if inverse:
        _sd16_inverse(src, out)
    else:
        _sd16_forward(src, out)
    return out


@njit(cache=True, inline="always")
def sign_data_step(state, e, newest, avg):
    """One sample of variant 4's inverse, for a decoder that interleaves it with its entropy
    decoder: the signal's value ``x`` from the residual ``e`` (int64); returns
    ``(x, newest, avg)``, the state to pass to the next sample (``state``: int16, 48 values,
    zero at the first sample, updated in place; ``newest`` and ``avg`` 0 at the first). The
    same integers as :func:`cascade_inverse` sample by sample."""
    return _sd16_step(state, e, newest, avg)


@njit(cache=True)
def _sign_data_ref(a, m, shift, inverse):
    """The sign-data LMS of variant 4, written out over arrays: the readable twin of the
    kernels ``signals._intrinsics.sign_data16_forward`` / ``_inverse`` (tests compare them).

    ``a``: int64, shape ``(n,)``: the input (forward) or the residuals (inverse). Each
    sample ``x[i]`` is predicted from the ``m`` before it saturated to int16 (``h``):
    ``p = wrap32(sum w[q] h[q]) >> shift``, ``e[i] = x[i] - p`` (int64, wrapping).
    Then every weight moves by ``sgn(e[i])`` times the adapt value of its history sample
    (int16, wrapping). With ``xs`` the new sample saturated to int16, its adapt value is
    ``sgn(xs) * 32`` where ``|xs|`` is above 3 times the running average ``avg`` of ``|xs|``,
    ``* 16`` above 4/3 of it, else ``* 8`` (0 for 0), and halves when it reaches the ages 2, 3
    and 9 (in samples); ``avg += (|xs| - avg) >> 4``. Everything starts at zero.
    """
    n = a.shape[0]
    h = np.zeros(n + m, np.int64)  # saturated samples, oldest first
    d = np.zeros(n + m, np.int64)  # their adapt values
    w = np.zeros(m, np.int64)
    out = np.empty(n, np.int64)
    avg = 0
    for i in range(n):
        acc = 0
        for q in range(m):
            acc += w[q] * h[i + q]
        acc = ((acc + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)  # int32, wrapping
        p = acc >> shift
        if inverse:
            e = a[i]
            x = e + p
            out[i] = x
        else:
            x = a[i]
            e = x - p
            out[i] = e
        sg = (e > 0) - (e < 0)
        for q in range(m):
            w[q] = ((w[q] + sg * d[i + q] + (1 << 15)) & 0xFFFF) - (1 << 15)  # int16, wrapping
        xs = min(max(x, -32768), 32767)
        ax = abs(xs)
        mag = 32 if ax > 3 * avg else (16 if 3 * ax > 4 * avg else (8 if ax > 0 else 0))
        h[i + m] = xs
        d[i + m] = mag if xs > 0 else -mag
        for age in (2, 3, 9):
            if age <= m:
                d[i + m + 1 - age] >>= 1
        avg += (ax - avg) >> 4
    return out


@njit(cache=True, inline="always")
def _fdot(w, h, lo, m):
    return np.int64(_dot16(w, h, lo) if m == 16 else _dot32(w, h, lo)) >> LMS_SHIFT


@njit(cache=True, inline="always")
def _fstep_update(w, sg, lo, m, step):
    if m == 16:
        _step16(w, sg, lo, step, float(_WCLAMP))
    else:
        _step32(w, sg, lo, step, float(_WCLAMP))


@njit(cache=True, inline="always")
def _fstep(v2, en, d1):
    """The NLMS step ``(v2 << LMS_SHIFT) // (en * d1)`` of the float path, all in float64:
    for integers ``|a| < 2**53`` and ``0 < d < 2**53``, ``floor(fl(a / d))`` is ``a // d``
    (where ``d`` does not divide ``a``, ``a / d`` lies at least ``1 / d`` from every integer
    and the rounding moves it by at most ``2**-53 |a / d| < 1 / d``). Here ``|v2|`` is below
    ``FP_LIMIT`` (the clamp of the int64 kernels changes nothing) and ``en`` below
    ``LMS_MAX_ORDER * FP_LIMIT + 1``."""
    return np.floor(v2 * float(1 << LMS_SHIFT) / (en * d1))


_RING = 4096  # samples of history between two moves of its last LMS_MAX_ORDER to the front


@njit(cache=True)
def _fp_state(n):
    """The float64 state of both directions for ``n`` samples: the histories (values and
    signs of each filter's input), four rings of ``min(n, _RING)`` samples behind
    ``LMS_MAX_ORDER`` of the chunk before, cut at staggered offsets from one allocation
    (as :func:`_histories` cuts them), cache-resident whatever the input's length (and
    small for a packet); then the two filters' zeroed weights."""
    size = LMS_MAX_ORDER + min(n, _RING)
    gap = size + 72
    buf = np.zeros(4 * gap)
    return (buf[0:size], buf[gap:gap + size], buf[2 * gap:2 * gap + size],
            buf[3 * gap:3 * gap + size], np.zeros(LMS_MAX_ORDER), np.zeros(LMS_MAX_ORDER))


@njit(cache=True, inline="always")
def _fp_rings_turn(h1, s1, h2, s2):
    """Before the next chunk: the last ``LMS_MAX_ORDER`` samples of each ring to its front."""
    pad = LMS_MAX_ORDER
    h1[:pad] = h1[_RING:]
    s1[:pad] = s1[_RING:]
    h2[:pad] = h2[_RING:]
    s2[:pad] = s2[_RING:]


@njit(cache=True, fastmath=_FP_MATH)
def _cascade_inverse_fp(e3, variant):
    """:func:`_cascade_inverse_int` in float64 while the outputs stay below ``FP_LIMIT``:
    ``(x, True)``, or ``(unfinished, False)`` at the first output beyond it."""
    m1, d1, m2, mu = _CASCADE_TABLE[variant]
    n = e3.shape[0]
    h1, s1, h2, s2, w1, w2 = _fp_state(n)
    out = np.empty(n, np.int64)
    en = 1.0  # the NLMS energy, an integer (exact in float64 below 2**53)
    fd1 = float(d1)
    for c in range(0, n, _RING):
        if c:
            _fp_rings_turn(h1, s1, h2, s2)
        for i in range(c, min(n, c + _RING)):
            b = LMS_MAX_ORDER + i - c
            r = e3[i]
            v2 = r + _fdot(w2, h2, b - m2, m2)
            _fstep_update(w2, s2, b - m2, m2, float(mu * _sign(r)))
            if v2 >= FP_LIMIT or v2 <= -FP_LIMIT:
                return out, False
            h2[b] = v2
            s2[b] = _sign(v2)
            v1 = v2 + _fdot(w1, h1, b - m1, m1)
            _fstep_update(w1, s1, b - m1, m1, _fstep(float(v2), en, fd1))
            if v1 >= FP_LIMIT or v1 <= -FP_LIMIT:
                return out, False
            h1[b] = v1
            s1[b] = _sign(v1)
            out[i] = v1
            en += abs(float(v1)) - abs(h1[b - m1])
    return out, True


@njit(cache=True, fastmath=_FP_MATH)
def _cascade_forward_fp(e1, variant):
    """:func:`cascade_forward` in float64 (see ``FP_LIMIT``) where every input and every
    NLMS output stays below ``FP_LIMIT``: ``(e3, True)``, else ``(unfinished, False)``."""
    m1, d1, m2, mu = _CASCADE_TABLE[variant]
    n = e1.shape[0]
    out = np.empty(n, np.int64)
    for i in range(n):
        if e1[i] >= FP_LIMIT or e1[i] <= -FP_LIMIT:
            return out, False
    h1, s1, h2, s2, w1, w2 = _fp_state(n)
    en = 1.0  # the NLMS energy, an integer (exact in float64 below 2**53)
    fd1 = float(d1)
    for c in range(0, n, _RING):
        if c:
            _fp_rings_turn(h1, s1, h2, s2)
        for i in range(c, min(n, c + _RING)):
            b = LMS_MAX_ORDER + i - c
            x = e1[i]
            v2 = x - _fdot(w1, h1, b - m1, m1)
            if v2 >= FP_LIMIT or v2 <= -FP_LIMIT:
                return out, False
            _fstep_update(w1, s1, b - m1, m1, _fstep(float(v2), en, fd1))
            h1[b] = x
            s1[b] = _sign(x)
            en += abs(float(x)) - abs(h1[b - m1])
            v3 = v2 - _fdot(w2, h2, b - m2, m2)
            _fstep_update(w2, s2, b - m2, m2, float(mu * _sign(v3)))
            h2[b] = v2
            s2[b] = _sign(v2)
            out[i] = v3
    return out, True


@njit(cache=True)
def cascade_inverse(e3, variant=1):
    """Exact inverse of :func:`cascade_forward`: the float64 fast path, or the int64 kernel
    where an output reaches ``FP_LIMIT``. Raises ValueError for a variant not in
    ``LMS_VARIANTS``."""
    _check_variant(variant)
    if variant == 4:
        return _sign_data(e3, True)
    x, ok = _cascade_inverse_fp(e3, variant)
    return x if ok else _cascade_inverse_int(e3, variant)


@njit(cache=True)
def residual_cost(r):
    """Estimated bits of residuals: ``sum log2(1 + |r|)``."""
    c = 0.0
    for i in range(r.shape[0]):
        c += _cost1p(r[i])
    return c
