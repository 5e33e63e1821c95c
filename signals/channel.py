"""One channel of integers in, one self-contained payload out (and back).

The payload codes any 1-D int64 array exactly, whatever its values (the full
int64 range included), with memory bounded by the sample count times a small
constant (no allocation grows with the value range). Pipeline (mode 4):

1. prediction (:mod:`signals.predict`, int64 wrap-around arithmetic, inverted
   exactly): per block, FLAC's fixed predictors or a quantized LPC; an LZP
   match model (the sample that followed the last occurrence of the recent
   context) where repeats pay; an NLMS + sign-LMS cascade over the LPC
   residual where it pays;
2. zigzag, then the bounded "hybrid integer" split of each residual into a
   token and raw bits (:func:`signals.entropy.hybrid_split`; the escape for
   any value);
3. rANS over the tokens with one static table per context; the context is
   the recent residual magnitude (bit lengths of the last three, or a moving
   average), crossed with the match model's state.

Sparse value sets (few distinct values far apart) are first mapped to ranks
(mode 5). Levels 0-9 trade speed for size (:data:`PRESETS`). A
:class:`ChannelModel` (:func:`fit_channel_model`) holds a predictor and
tables trained on a corpus, so that short packets carry no tables (mode 3).

The payload describes its own stage choices; ``n`` (the sample count) is kept
by the container, not in the payload. Every size and count read from a
payload is checked against the bytes that remain before anything is
allocated; a payload cannot claim more samples than ``(16 * words + 64) /
MIN_TOKEN_BITS`` (no token costs less: :func:`signals.entropy.min_token_bits`).

Payload layout (byte 0 is the mode; LEB128 varints)::

    0 RAW      n little-endian int64
    1 CONST    the value, zigzag varint
    2 CODED    (first layout, still decoded) LinearPredictor/FixedPredictor section,
               hybrid byte, contexts, table, rANS words, raw bits
    3 MODEL    rANS words (varint count, u16 each), raw bits; predictor, match
               model and tables from the ChannelModel
    4 CODED2   block size (varint), predictor side (varint length; per block: kind,
               order[, shift, int16 coefficients]), match context length, match
               run, hash bits, cascade flag (4 bytes), hybrid byte (k << 4 | msb),
               n_contexts, thresholds (n_contexts - 1 bytes), match buckets,
               context kind, table width (varint), table codes (varint length,
               signed exp-Golomb deltas of log-scale codes), rANS words (varint
               count, u16 each), raw bits (the rest: exactly the bytes the tokens need)
    5 RANKED   distinct values (varint count m, varint length, a payload of their
               differences with m samples), then a payload of the ranks (n samples)
    6 CM       distinct values as in mode 5, then the extrapolation order (1 byte,
               0..2), then the ranks coded by context mixing (:mod:`signals.cm`; the
               rest of the payload is the arithmetic code); levels from CM_LEVEL
    7 CM_LPC   block size (varint), predictor side (varint length; as mode 4), then the
               samples coded by context mixing over the block predictor's residuals
               (:func:`signals.cm.cm_encode_lpc`; the rest of the payload); levels
               from CM_LEVEL
    8 MODEL_VOCAB  with a model whose vocabulary stage was kept: the count of token ids
               (varint), rANS words (varint count, u16 each) of the ids under the model's
               one id table, raw bits; the ids expand (the model's UBPE merges) to the
               hybrid tokens of mode 3
    9 MODEL_RANKED  with a model whose ranked stage was kept: distinct values as in mode 5
               (varint count m >= 2, varint length, a payload of their differences with
               m samples under the stage's values model), then a payload of the ranks
               (n samples) under its ranks model; both payloads of modes 0, 1 or 3
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import math
import operator
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ubpe._jit import bind, njit, numba_ref

from . import cm as CM
from . import entropy as E
from . import predict as P

clz64 = numba_ref("signals._intrinsics", "clz64")
ctz64 = numba_ref("signals._intrinsics", "ctz64")
popcount64 = numba_ref("signals._intrinsics", "popcount64")

MATCH_ROWS = 4

RAW, CONST, CODED, MODEL, CODED2, RANKED, CM_MODE, CM_LPC, MODEL_VOCAB = 0, 1, 2, 3, 4, 5, 6, 7, 8
MODEL_RANKED = 9
DEFAULT_LEVEL = 5
MAX_EMA_SHIFT = 8
MATCH_PROBE = 1 << 16  # samples on which the default levels compare match-model candidates
MATCH_SCREEN = 1 << 14  # samples on which a match candidate must show a gain to be compared
MATCH_KEEP = 0.9  # ... and at least this fraction of the best candidate's gain there
LMS_PROBE = 1 << 14  # samples on which the default levels choose the adaptive cascade
LMS_MIN_GAIN = 0.15  # levels 4-5 keep the cascade where it saves this (estimated bits/sample)
VOCAB_MIN_GAIN = 0.02  # a model keeps its vocabulary stage where it saves this (bits/sample)
RANK_MIN_GAIN = 0.02  # a model keeps its ranked stage where it saves this (bits/sample)
SLOW_MIN_GAIN = 0.02  # a model keeps an LPC above FAST_LPC_ORDER, or more than FAST_CONTEXTS
# contexts, where it saves this (bits/sample) over the best candidate within them
FAST_LPC_ORDER = 16  # (an LPC of order 32 decodes about 1.3x slower than one of order 16)
FAST_CONTEXTS = 8  # (a decode table of at most 256 KB without the match model: 1.1-1.3x faster
# than 12-16 contexts on ECG 208)
EST_CONTEXTS = 6  # contexts of the quick size estimate that compares candidates
MAX_TBITS = 16  # match-model hash table: at most 2**16 entries (512 KiB, cache-friendly)
SMALL_INPUT, SMALL_LEVEL_FROM, SMALL_LEVEL = 32768, 4, 7  # short inputs at levels 4-6: a
# bounded candidate search (_encode_small), not level 7's full one
RANK_LEVEL = 3  # levels from here try the distinct-value dictionary (mode 5)
CM_LEVEL = 9  # levels from here try context mixing over the ranks (mode 6)
MAX_LEVEL = 9


@dataclass(frozen=True)
class _Preset:
    predictor: str  # "fixed" or "linear"
    block_size: int
    lpc_orders: tuple[int, ...]
    contexts: tuple[int, ...]  # context counts tried
    hybrid: tuple[tuple[int, int], ...]  # (k, msb) tried
    match: tuple[tuple[int, int], ...] = ()  # (context length, run before use) tried
    search: bool = False  # choose the match model by coded size (else by estimated gain)
    lms: bool = False  # try the adaptive cascade after the LPC (signals.predict.LMS_VARIANTS)
    ctx: tuple[int, ...] = (0, 3)  # context kinds tried: 0 recent bit lengths, s > 0 average (decay 2**-s)
    max_lag: int = 0  # lag (period) predictors 2..max_lag tried per block
    lms_gain: float = 0.0  # the cascade is kept where it saves at least this (estimated bits
    # per sample on the probe, LMS_PROBE): the decoder spends on it more than on the rest


_M3 = ((1, 0), (2, 0), (2, 1))
_M = ((1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (4, 0), (8, 0))
PRESETS = {
    0: _Preset("fixed", 1024, (), (1,), ((4, 2),)),
    1: _Preset("fixed", 1024, (), (1, 4, 8), ((4, 2),)),
    2: _Preset("linear", 4096, (8,), (1, 4, 8), ((4, 2),), ((2, 0),)),
    3: _Preset("linear", 4096, (16,), (1, 4, 8, 12), ((4, 2),), _M3, max_lag=16),
    4: _Preset("linear", 4096, (8, 16), (1, 4, 8, 12), ((4, 2),), _M3, lms=True, max_lag=32,
               lms_gain=LMS_MIN_GAIN),
    5: _Preset("linear", 4096, (8, 16, 32), (1, 4, 8, 12, 16), ((4, 2),), _M3, lms=True,
               max_lag=32, lms_gain=LMS_MIN_GAIN),
    6: _Preset("linear", 4096, (8, 16, 24, 32), (1, 4, 8, 12, 16), ((4, 2), (3, 2)), _M,
               lms=True, max_lag=64),
    7: _Preset("linear", 4096, (8, 16, 24, 32), (1, 2, 4, 6, 8, 12, 16, 24),
               ((4, 2), (3, 2), (5, 2)), _M, search=True, lms=True, max_lag=128),
    8: _Preset("linear", 4096, (8, 16, 24, 32), (1, 2, 4, 6, 8, 12, 16, 20, 24, 32),
               ((4, 2), (3, 2), (5, 2), (4, 3)), _M + ((16, 0),), search=True, lms=True,
               max_lag=256),
    9: _Preset("linear", 4096, (4, 8, 12, 16, 20, 24, 28, 32), (1, 2, 4, 6, 8, 12, 16, 20, 24, 32),
               ((2, 2), (3, 2), (4, 2), (5, 2), (6, 2), (4, 3), (3, 1)),
               _M + ((16, 0), (6, 1), (3, 1)), search=True, lms=True, max_lag=512),
}


# ------------------------------------------------------------------ bytes
def _varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class _Reader:
    """Bounds-checked reader over a payload: every failure is a ValueError."""

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ValueError(f"payload truncated at byte {self.pos}")
        v = self.data[self.pos]
        self.pos += 1
        return v

    def varint(self, limit: int = 1 << 63) -> int:
        v, shift = 0, 0
        while True:
            b = self.byte()
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
            if shift > 63:
                raise ValueError(f"overlong varint at byte {self.pos}")
        if v > limit:
            raise ValueError(f"declared size {v} at byte {self.pos} exceeds its bound {limit}")
        return v

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.remaining():
            raise ValueError(f"payload declares {n} bytes at byte {self.pos}, "
                             f"{self.remaining()} remain")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


# ------------------------------------------------------------- predictors
_PRED_FIXED, _PRED_LINEAR = 1, 2


def _predict(x: np.ndarray, preset: _Preset) -> tuple[np.ndarray, bytes]:
    """Residuals and the predictor section."""
    if preset.predictor == "fixed":
        pf = P.FixedPredictor(preset.block_size)
        r, side = pf.encode(x)
        head = bytes([_PRED_FIXED]) + _varint(preset.block_size)
    else:
        pl = P.LinearPredictor(preset.block_size, preset.lpc_orders)
        r, side = pl.encode(x)
        head = bytes([_PRED_LINEAR]) + _varint(preset.block_size)
    return r, head + np.asarray(side, np.uint8).tobytes()


def _unpredict(r: np.ndarray, section: bytes) -> np.ndarray:
    rd = _Reader(section)
    kind = rd.byte()
    block = rd.varint(1 << 24)
    if block < 1:
        raise ValueError("predictor block size 0")
    side = np.frombuffer(section[rd.pos:], np.uint8)
    if kind == _PRED_FIXED:
        return P.FixedPredictor(block).decode(r, side)
    if kind == _PRED_LINEAR:
        return P.LinearPredictor(block).decode(r, side)
    raise ValueError(f"unknown predictor kind {kind}")


# ------------------------------------------------------------ entropy part
def _thresholds(stat: np.ndarray, n_contexts: int) -> np.ndarray:
    """Bin edges (strictly increasing, 1..255) cutting ``stat`` into about equal bins."""
    if n_contexts <= 1 or stat.size == 0:
        return np.zeros(0, np.int64)
    cdf = np.cumsum(np.bincount(stat, minlength=E.CTX_RANGE))
    qs = np.searchsorted(cdf, np.arange(1, n_contexts) * (stat.size / n_contexts), side="right")
    return np.unique(np.clip(qs.astype(np.int64), 1, 255))


def _fit_tables(tokens: np.ndarray, stat: np.ndarray, width: int, contexts) -> tuple:
    """Best (bits, thresholds, codes, freqs) over the context counts tried."""
    best: Any = None
    for c in contexts:
        th = _thresholds(stat, c)
        cmap = E.context_map(th)
        nc = th.size + 1
        counts = np.bincount(cmap[stat] * width + tokens, minlength=nc * width).reshape(nc, width)
        q = E.quantize_counts(counts)
        f = E.freqs_from_code_rows(q)
        table = E.write_codes(q)
        bits = E.coded_bits(counts, f) + 8 * (len(table) + nc)
        if best is None or bits < best[0]:
            best = (bits, th, q, f, table)
    return best


def _entropy_part(z: np.ndarray, preset: _Preset) -> bytes:
    """The hybrid/context/rANS sections for zigzagged residuals ``z`` (uint64)."""
    best: Any = None
    for k, msb in preset.hybrid:
        tokens, nbits = E.hybrid_split(z, k, msb)
        width = int(tokens.max()) + 1
        bl = E.token_bitlen(k, msb, width)
        stat = E.context_stat(tokens, bl)
        bits, th, q, f, table = _fit_tables(tokens, stat, width, preset.contexts)
        bits += float(nbits.sum(dtype=np.int64))
        if best is None or bits < best[0]:
            best = (bits, k, msb, tokens, nbits, stat, th, f, table, width)
    _, k, msb, tokens, nbits, stat, th, f, table, width = best
    cum, _ = E.build_tables(f)
    words = E.rans_encode_ctx(tokens, stat, E.context_map(th), f, cum)
    raw, total = E.pack_raw_bits(z, nbits)
    return b"".join([bytes([k << 4 | msb, th.size + 1]), th.astype(np.uint8).tobytes(),
                     _varint(width), _varint(len(table)), table.tobytes(),
                     _varint(words.size), words.astype("<u2").tobytes(),
                     raw.astype("<u8").tobytes()[:(total + 7) // 8]])


def _decode_tokens(rd: _Reader, n: int, k: int, msb: int, cmap, freqs, cum, lookup) -> np.ndarray:
    """rANS words and raw bits from ``rd`` to zigzagged residuals (uint64)."""
    n_words = rd.varint(rd.remaining() // 2)
    words = np.frombuffer(rd.take(2 * n_words), "<u2").astype(np.uint16)
    if n * E.MIN_TOKEN_BITS > 16 * n_words + 64:
        raise ValueError(f"{n} samples cannot fit in {n_words} rANS words")
    bl = E.token_bitlen(k, msb, freqs.shape[1])
    tokens, ok = E.rans_decode_ctx(words, n, bl, cmap, freqs, cum, lookup)
    if not ok:
        raise ValueError("inconsistent rANS stream")
    need = int(E.token_raw_bits(k, msb, freqs.shape[1])[tokens].sum())
    rest = rd.take(rd.remaining())
    if len(rest) != (need + 7) // 8:
        raise ValueError(f"raw bits: {len(rest)} bytes, the tokens need {(need + 7) // 8}")
    raw = np.frombuffer(rest + bytes(-len(rest) % 8), "<u8").astype(np.uint64)
    z, ok = E.hybrid_merge(tokens, k, msb, raw, need)
    if not ok:
        raise ValueError("inconsistent raw bits")
    return z


# ------------------------------------------------------ fused mode-4 coding
@njit(cache=True, inline="always")
def _token_value(ent, raw, bpos, nb):
    """The zigzagged residual of a token: the high part from its decode-table entry
    ``ent``, then its ``nb`` raw low bits, read at bit ``bpos`` of ``raw`` (uint64 words,
    least significant bit first; at least ``bpos // 64 + 2`` of them: the word after the
    one that holds ``bpos`` is read too, its bits shifted out where not needed)."""
    one = np.uint64(1)
    w = bpos >> np.uint64(6)
    o = bpos & np.uint64(63)
    v = (raw[w] >> o) | ((raw[w + one] << one) << (np.uint64(63) - o))
    return ((ent >> np.uint64(48)) << nb) | (v & ((one << nb) - one))


@njit(cache=True, inline="always")
def _rans_residual(words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc, fmin):
    """The next residual of a rANS token stream and its raw bits (match model off).

    ``crow``: the first decode-table slot of each context's row; the state
    (``st``, ``wpos``, ``bpos``, the last three token bit lengths ``b1..b3``,
    the statistic ``acc`` of context kind ``ctxk`` > 0, the least table
    frequency met ``fmin``) comes in and goes out: returns ``(r, state...)``.
    Nothing is checked here: every read stays in bounds (the next word at a
    clamped index, the raw bits at a clamped position), and
    :func:`_stream_ok` of the state says afterwards whether every token so
    far was consistent (no empty table slot met, no word or raw bit read
    past the end); past an inconsistent token the state is meaningless. The
    renormalisation does not branch (it is taken at random, every few
    tokens): the next word is shifted in where the state is below ``RANS_L``.
    """
    mask = np.uint64(E.SCALE - 1)
    sb = np.uint64(E.SCALE_BITS)
    one = np.uint64(1)
    nw = words.shape[0]
    ctx = 2 * b1 + b2 + b3 if ctxk == 0 else E.ema_stat_fast(acc, ctxk)
    ent = dtab[crow[ctx] | (st & mask)]
    f = ent & np.uint64(E.DT_FREQ_MASK)
    fmin = min(fmin, f)
    st = f * (st >> sb) + ((ent >> np.uint64(13)) & mask)
    under = st < np.uint64(E.RANS_L)
    nxt = np.uint64(words[min(wpos, nw - 1)])
    u = np.uint64(under)
    st = (st << (u << np.uint64(4))) | (nxt & (np.uint64(0) - u))
    wpos += int(under)
    nb = (ent >> np.uint64(32)) & np.uint64(63)
    z = _token_value(ent, raw, min(bpos, tb), nb)  # raw holds two words past tb
    bpos += nb
    b3 = b2
    b2 = b1
    b1 = np.int64((ent >> np.uint64(40)) & np.uint64(127))
    if ctxk:
        acc = E.ema_update(acc, z, ctxk)
    return np.int64(z >> one) ^ -np.int64(z & one), st, wpos, bpos, b1, b2, b3, acc, fmin


@njit(cache=True, inline="always")
def _stream_ok(fmin, wpos, nw, bpos, tb):
    """Whether every token that :func:`_rans_residual` decoded so far was consistent: no
    empty table slot (frequency 0), no word past the ``nw`` words (a word is read past the
    last only where the state needs one more), no raw bit past the ``tb`` bits (positions
    only grow, so that their last values decide)."""
    return fmin != 0 and wpos <= nw and bpos <= tb


@njit(cache=True, inline="always")
def _stream_end(st, wpos, nw, bpos, total_bits):
    """Whether a rANS stream was used up exactly: every word read, the state back at its
    initial ``RANS_L``, and fewer than 8 raw bits left (the padding of the last byte)."""
    return wpos == nw and st == np.uint64(E.RANS_L) and total_bits - np.int64(bpos) < 8


# the least frequency met before any token: above every table's (at most SCALE)
_NO_FMIN = np.uint64(1 << 13)


@njit(cache=True, inline="always")
def _residual(res, i, words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc, fmin):
    """``res[i]``, or where ``res`` is None :func:`_rans_residual` (same returns)."""
    if res is None:
        return _rans_residual(words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc,
                              fmin)
    return res[i], st, wpos, bpos, b1, b2, b3, acc, fmin


@njit(cache=True)
def _decode_residuals(words, raw, total_bits, n, cmap, dtab, ctxk):
    """The residuals of a rANS token stream and its raw bits (match model off):
    ``(r, ok)``, as :func:`_rans_residual` decodes them one by one."""
    r = np.empty(n, np.int64)
    nw = words.shape[0]
    if nw < 2:
        return r, False
    st = (np.uint64(words[0]) << np.uint64(16)) | np.uint64(words[1])
    wpos = 2
    bpos = np.uint64(0)
    b1 = np.int64(0)
    b2 = np.int64(0)
    b3 = np.int64(0)
    acc = 0
    crow = cmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
    tb = np.uint64(total_bits)
    fmin = _NO_FMIN
    for i in range(n):
        r[i], st, wpos, bpos, b1, b2, b3, acc, fmin = _rans_residual(
            words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc, fmin)
        if (i & 255) == 255 and not _stream_ok(fmin, wpos, nw, bpos, tb):
            return r, False
    return r, _stream_ok(fmin, wpos, nw, bpos, tb) and _stream_end(st, wpos, nw, bpos, total_bits)


_RING = 64  # float64 copies of the newest samples (see _blocks), each written twice
_FLOAT_MIN_ORDER = 16  # below, the int64 sum of the older terms is as fast (order 12) or faster
_FLOAT_LIM = np.int64(1 << 31)  # samples below this in magnitude, and coefficients of at most
# 2**15 (at most 28 terms): every product and partial sum of an LPC sum is an integer below
# 2**51, exact in float64 in any order of summation (as the encoder's signals.predict sums)


@njit(cache=True, inline="always")
def _blocks(x, res, words, raw, total_bits, crow, dtab, ctxk, block, kinds, orders, shifts, coefs,
            sd):
    """:func:`_decode_blocks`; with ``sd`` (a constant) each residual passes through the
    inverse of the sign-data LMS (:func:`signals.predict.sign_data_step`) first.

    An LPC of order ``_FLOAT_MIN_ORDER`` or more sums its older terms in float64 (4 lanes at
    a time, ``signals._intrinsics.dot16`` up to order 20, else ``dot32``, over the 16 or 32
    samples before the newest four: the coefficients in the last ``order - 4`` places, zeros
    before them) where that sum is exact: coefficients of at most 2**15, and no sample among
    the ``order`` before of ``_FLOAT_LIM`` or more in magnitude (else the int64 sum, the same
    integers). The samples' float64 copies are kept in a ring of ``_RING`` slots, each written
    at ``i % _RING`` and ``_RING`` after it, so that the 32 before any sample are contiguous.
    (The Seattle temperature model's order-32 LPC with its entropy decoder: 16.5 -> 12.6 ns a
    sample; speech packets of 1024 with LPCs of order 16 / 24 / 32: 1.03x / 1.10x / 1.14x as
    fast; below order 16 the int64 sum is as fast or faster.)"""
    n = x.shape[0]
    nw = words.shape[0]
    if res is None and nw < 2:
        return x, False
    st = (np.uint64(words[0]) << np.uint64(16)) | np.uint64(words[1]) if nw >= 2 else np.uint64(0)
    wpos = 2
    bpos = np.uint64(0)
    b1 = np.int64(0)
    b2 = np.int64(0)
    b3 = np.int64(0)
    acc = 0
    tb = np.uint64(total_bits)
    fmin = _NO_FMIN
    # one allocation: the LPC's coefficients, the filter's state, the float coefficients, the ring
    buf = np.zeros(32 + 12 + 32 + 2 * _RING, np.int64)  # (zero bits: 0.0, so that the ring's
    # slots not yet written, read times a zero coefficient, add nothing)
    cr = buf[:32]
    sdv = buf[32:44].view(np.int16)
    cf = buf[44:76].view(np.float64)
    ring = buf[76:].view(np.float64)
    newest = avg = np.int64(0)
    x4 = x3 = x2 = x1 = np.int64(0)  # the four newest samples
    last_big = -(1 << 62)  # the last sample of _FLOAT_LIM or more in magnitude
    for b in range((n + block - 1) // block):  # checked once a block (the reads stay in bounds)
        s = b * block
        e = min(n, s + block)
        kind, order, shift = kinds[b], orders[b], shifts[b]
        lpc = kind == 1 and order > 4
        head = min(e, max(s, order + 4 if lpc else order))
        fl = False
        nf = 32
        if lpc:
            for q in range(order):  # reversed: cr[q] multiplies x[i - order + q]
                cr[q] = coefs[b, order - 1 - q]
            k4, k3, k2, k1 = cr[order - 4], cr[order - 3], cr[order - 2], cr[order - 1]
            fl = order >= _FLOAT_MIN_ORDER
            for q in range(order - 4):
                fl &= (cr[q] <= 32768) & (cr[q] >= -32768)
        elif kind == 1:  # an LPC of order <= 4, as the fixed ones: on the newest samples only
            k1, k2, k3, k4 = [coefs[b, j] if j < order else 0 for j in range(4)]
        else:  # FLAC's fixed predictors, or a lag (not in registers)
            k1, k2, k3, k4 = P._WEIGHTS[min(order, P.MAX_ORDER)]
        if fl:
            nf = 16 if order <= 20 else 32  # the float sum's taps
            cf[:] = 0.0
            for q in range(order - 4):
                cf[nf - (order - 4) + q] = float(cr[q])
            for j in range(max(0, s - 36), s):  # the ring: the samples before the block
                v = x[j]
                ring[j & (_RING - 1)] = ring[(j & (_RING - 1)) + _RING] = float(v)
                if v >= _FLOAT_LIM or v <= -_FLOAT_LIM:
                    last_big = j
        sh = shift if kind == 1 else 0
        delta = kind == 0 and order == 1  # the commonest: FLAC's first-order predictor
        c = cr[:max(order - 4, 0)]
        for i in range(s, head):  # the block's first samples (the signal's: warm-up)
            r, st, wpos, bpos, b1, b2, b3, acc, fmin = _residual(
                res, i, words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc, fmin)
            if sd:
                r, newest, avg = P.sign_data_step(sdv, r, newest, avg)
            v = r + P._lpc_predict(x, i, kind, order, shift, coefs, b)
            x[i] = v
            x4, x3, x2, x1 = x3, x2, x1, v
            if fl:
                ring[i & (_RING - 1)] = ring[(i & (_RING - 1)) + _RING] = float(v)
                if v >= _FLOAT_LIM or v <= -_FLOAT_LIM:
                    last_big = i
        if delta:  # a loop of its own: fewer values live in it (its stack spills cost 5-10%)
            for i in range(head, e):
                r, st, wpos, bpos, b1, b2, b3, acc, fmin = _residual(
                    res, i, words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc,
                    fmin)
                if sd:
                    r, newest, avg = P.sign_data_step(sdv, r, newest, avg)
                x1 += r
                x[i] = x1
            x4 = x[e - 4] if e >= 4 else np.int64(0)
            x3 = x[e - 3] if e >= 3 else np.int64(0)
            x2 = x[e - 2] if e >= 2 else np.int64(0)
            head = e
        if fl and head - last_big > order:  # float sums while the samples stay below the limit
            start = e
            for i in range(head, e):
                r, st, wpos, bpos, b1, b2, b3, acc, fmin = _residual(
                    res, i, words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc,
                    fmin)
                if sd:
                    r, newest, avg = P.sign_data_step(sdv, r, newest, avg)
                if nf == 16:
                    a = np.int64(P._dot16(cf, ring, (i - 20) & (_RING - 1)))
                else:
                    a = np.int64(P._dot32(cf, ring, (i - 36) & (_RING - 1)))
                v = r + ((a + k4 * x4 + k3 * x3 + k2 * x2 + k1 * x1) >> shift)
                ring[i & (_RING - 1)] = ring[(i & (_RING - 1)) + _RING] = float(v)
                x[i] = v
                x4, x3, x2, x1 = x3, x2, x1, v
                if v >= _FLOAT_LIM or v <= -_FLOAT_LIM:  # the rest of the block in int64
                    start = i + 1
                    break
            head = start
        for i in range(head, e):
            r, st, wpos, bpos, b1, b2, b3, acc, fmin = _residual(
                res, i, words, raw, tb, dtab, crow, ctxk, st, wpos, bpos, b1, b2, b3, acc, fmin)
            if sd:
                r, newest, avg = P.sign_data_step(sdv, r, newest, avg)
            if kind == 2:
                v = r + x[i - order]
            elif lpc:
                past = x[i - order:i - 4]
                a = np.int64(0)
                for q in range(order - 4):
                    a += c[q] * past[q]
                v = r + ((a + k4 * x4 + k3 * x3 + k2 * x2 + k1 * x1) >> shift)
            else:
                v = r + ((k1 * x1 + k2 * x2 + k3 * x3 + k4 * x4) >> sh)
            x[i] = v
            x4, x3, x2, x1 = x3, x2, x1, v
        if not _stream_ok(fmin, wpos, nw, bpos, tb):
            return x, False
    return x, res is not None or _stream_end(st, wpos, nw, bpos, total_bits)


@njit(cache=True)
def _decode_blocks(x, res, words, raw, total_bits, crow, dtab, ctxk, block, kinds, orders, shifts,
                   coefs):
    """Samples from the residuals of the block predictor (match model off), in one pass.

    ``x`` (int64, shape ``(n,)``) receives the samples. The residuals are
    ``res`` (int64, ``n`` of them) or, where ``res`` is None, the rANS words
    and raw bits (``dtab``: :func:`signals.entropy.decode_table` of the rows,
    ``crow``: the first slot of each context's row, ``cmap << SCALE_BITS``;
    ``raw`` of at least ``total_bits // 64 + 2`` words). The same integers as
    ``x[i] = r[i] + _lpc_predict(x, i, ...)`` sample by sample; an LPC of order
    above 4 keeps its four newest samples in registers (the vector part of the
    dot product reads samples stored four iterations ago at the latest). One
    pass lets the CPU overlap the entropy decoder's dependency chain with the
    predictors'. Returns ``(x, ok)``; ``ok`` is False where the stream is
    inconsistent (a token that :func:`_decode_fused`'s loop refuses: the rest of
    its block is decoded first, every read within bounds) or not used up.
    """
    return _blocks(x, res, words, raw, total_bits, crow, dtab, ctxk, block, kinds, orders, shifts,
                   coefs, False)


@njit(cache=True)
def _decode_blocks_sd(x, words, raw, total_bits, crow, dtab, ctxk, block, kinds, orders, shifts,
                      coefs):
    """:func:`_decode_blocks` from the rANS stream of a payload with the adaptive cascade's
    variant 4: each token's residual through the inverse of the sign-data LMS, then the
    block predictor, in the same pass (the three dependency chains overlap)."""
    return _blocks(x, None, words, raw, total_bits, crow, dtab, ctxk, block, kinds, orders,
                   shifts, coefs, True)


@njit(cache=True)
def _decode_plain(words, raw, total_bits, n, cmap, dtab, block, kinds, orders, shifts, coefs, lms,
                  ctxk):
    """:func:`_decode_fused` with the match model off: one pass of :func:`_decode_blocks`
    (with the sign-data LMS, of :func:`_decode_blocks_sd`), or with an NLMS cascade three
    (entropy, cascade, predictor: that cascade runs faster alone)."""
    if lms == 0 or lms == 4:
        crow = cmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
        if lms == 0:
            return _decode_blocks(np.empty(n, np.int64), None, words, raw, total_bits, crow, dtab,
                                  ctxk, block, kinds, orders, shifts, coefs)
        return _decode_blocks_sd(np.empty(n, np.int64), words, raw, total_bits, crow, dtab, ctxk,
                                 block, kinds, orders, shifts, coefs)
    r, ok = _decode_residuals(words, raw, total_bits, n, cmap, dtab, ctxk)
    if not ok:
        return r, False
    return _decode_blocks(r, P.cascade_inverse(r, lms), _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0,
                          block, kinds, orders, shifts, coefs)[0], True


# what _decode_blocks takes for the rANS stream where it is given the residuals
_NO_WORDS = np.zeros(2, np.uint16)
_NO_RAW = np.zeros(1, np.uint64)
_NO_CROW = np.zeros(1, np.uint64)


def inverse_blocks(r: np.ndarray, block: int, kinds: np.ndarray, orders: np.ndarray,
                   shifts: np.ndarray, coefs: np.ndarray, lms: int = 0) -> np.ndarray:
    """Samples from the residuals ``r`` (int64, shape ``(n,)``) of the adaptive cascade
    ``lms`` (0: none) and the block predictor (``kinds``, ``orders``, ``shifts``: shape
    ``(n_blocks,)``; ``coefs``: ``(n_blocks, 32)``): :func:`_decode_blocks` given the
    residuals."""
    if lms:
        r = P.cascade_inverse(r, lms)
    return _decode_blocks(np.empty(r.shape[0], np.int64), r, _NO_WORDS, _NO_RAW, 0, _NO_CROW,
                          _NO_RAW, 0, block, kinds, orders, shifts, coefs)[0]


@njit(cache=True)
def _decode_fused(words, raw, total_bits, n, cmap, nc, dtab, block, kinds, orders, shifts, coefs,
                  mh, t, tbits, lms=0, ctxk=0):
    """rANS tokens -> raw bits -> residuals -> samples; returns (x, ok).

    ``dtab``: :func:`signals.entropy.decode_table` of the rows; ``raw`` holds
    at least ``total_bits // 64 + 2`` words. With the match model off,
    :func:`_decode_plain`; with it on, :func:`_fused_into` (the table row of a sample
    depends on the samples before it).
    """
    if mh == 0:
        return _decode_plain(words, raw, total_bits, n, cmap, dtab, block, kinds, orders, shifts,
                             coefs, lms, ctxk)
    x = np.empty(n, np.int64)
    return x, _fused_into(x, np.empty(1 << tbits, np.int64), words, raw, total_bits, cmap, nc,
                          dtab, block, kinds, orders, shifts, coefs, mh, t, tbits, lms, ctxk)


@njit(cache=True)
def _fused_into(x, table, words, raw, total_bits, cmap, nc, dtab, block, kinds, orders, shifts,
                coefs, mh, t, tbits, lms, ctxk):
    """:func:`_decode_fused` with the match model on (``mh`` > 0: with ``mh`` 0 every sample
    would hash to slot 0, past an empty table), into ``x`` (int64, its ``n`` samples),
    with ``table`` (int64, at least ``2**tbits`` entries, the first ``2**tbits`` overwritten)
    as the match model's hash table: whether the stream was consistent. (The packet decoders
    pass their output's slice and one table for all packets, in place of an array and a
    table a packet and a copy: at packets of 256 samples, the batch decoder 18.5 -> 16.3 ns
    a sample on ACSF1, 16.7 -> 11.2 on PLAID.)"""
    n = x.shape[0]
    acc = 0
    if lms >= P._CASCADE_TABLE.shape[0]:  # (the readers refuse a cascade with the match model)
        return False
    lb = np.zeros(2 * P.LMS_MAX_ORDER + 2 * n if lms else 0, np.int64)  # (one allocation)
    w1 = lb[:P.LMS_MAX_ORDER]
    w2 = lb[P.LMS_MAX_ORDER:2 * P.LMS_MAX_ORDER]
    e1 = lb[2 * P.LMS_MAX_ORDER:2 * P.LMS_MAX_ORDER + n]
    e2 = lb[2 * P.LMS_MAX_ORDER + n:]
    m1, d1, m2, mu = P._CASCADE_TABLE[lms]
    nw = words.shape[0]
    if nw < 2:
        return False
    st = (np.uint64(words[0]) << np.uint64(16)) | np.uint64(words[1])
    wpos = 2
    mask = np.uint64(E.SCALE - 1)
    sb = np.uint64(E.SCALE_BITS)
    low = np.uint64(E.RANS_L)
    one = np.uint64(1)
    fmask = np.uint64(E.DT_FREQ_MASK)
    tb = np.uint64(total_bits)
    bpos = np.uint64(0)
    b1 = np.int64(0)
    b2 = np.int64(0)
    b3 = np.int64(0)
    size = 1 << tbits
    table[:size] = -1
    hmask = size - 1
    ptr = -1
    mlen = 0
    n_blocks = (n + block - 1) // block
    for blk in range(n_blocks):
        kind, order, shift = kinds[blk], orders[blk], shifts[blk]
        for i in range(blk * block, min(n, (blk + 1) * block)):
            h = -1
            if i >= mh:
                h = P._hash(x, i, mh, hmask)
                if ptr < 0:
                    ptr = table[h]
                    mlen = 0
            use = ptr >= 0 and mlen >= t
            row = cmap[2 * b1 + b2 + b3] if ctxk == 0 else cmap[E.ema_stat_fast(acc, ctxk)]
            if use:
                row += nc * P._bucket(mlen, t)
            ent = dtab[(np.uint64(row) << sb) | (st & mask)]
            f = ent & fmask
            if f == 0:
                return False
            st = f * (st >> sb) + ((ent >> np.uint64(13)) & mask)
            if st < low:
                if wpos >= nw:
                    return False
                st = (st << np.uint64(16)) | np.uint64(words[wpos])
                wpos += 1
            # the token's residual and context state, as in _rans_residual (written out: through a
            # shared inline helper the one-pass decoder ran about 7% slower)
            nb = (ent >> np.uint64(32)) & np.uint64(63)
            if bpos + nb > tb:
                return False
            z = _token_value(ent, raw, bpos, nb)
            bpos += nb
            b3 = b2
            b2 = b1
            b1 = np.int64((ent >> np.uint64(40)) & np.uint64(127))
            if ctxk:
                acc = E.ema_update(acc, z, ctxk)
            r = np.int64(z >> one) ^ -np.int64(z & one)
            if lms:  # not made by the encoders (the cascade runs with the match model off)
                e2[i] = r + P._lms_predict(e2, i, w2, m2)
                P._sign_update(e2, i, w2, r, m2, mu)
                e1[i] = e2[i] + P._lms_predict(e1, i, w1, m1)
                P._nlms_update(e1, i, w1, e2[i], m1, d1)
                r = e1[i]
            if use:
                pred = x[ptr]
            else:
                pred = P._lpc_predict(x, i, kind, order, shift, coefs, blk)
            x[i] = r + pred
            ptr, mlen = P.follow_match(x, i, ptr, mlen)
            if h >= 0:
                table[h] = i
    return _stream_end(st, wpos, nw, bpos, total_bits)


@njit(cache=True)
def _fine_hist(tokens, z, bitlen, mb, n_mb, width, ctxk):
    """Counts per (match bucket, context statistic, token): the statistic of kind ``ctxk``
    (0: :func:`signals.entropy.context_stat`, else :func:`signals.entropy.context_stat_ema`)
    computed on the fly, so that no statistic array is built for a candidate; and the
    histogram of the statistic."""
    h = np.zeros((n_mb, E.CTX_RANGE, width), np.int64)
    shist = np.zeros(E.CTX_RANGE, np.int64)
    b1 = 0
    b2 = 0
    b3 = 0
    acc = 0
    for i in range(tokens.shape[0]):
        s = 2 * b1 + b2 + b3 if ctxk == 0 else E.ema_stat_fast(acc, ctxk)
        t = tokens[i]
        h[mb[i], s, t] += 1
        shist[s] += 1
        if ctxk == 0:
            b3 = b2
            b2 = b1
            b1 = bitlen[t]
        else:
            acc = E.ema_update(acc, z[i], ctxk)
    return h, shist


# c log2 c for the counts below 2**13 (a row's entropy is tot log2 tot - sum c log2 c)
_CLOG2C = np.array([0.0] + [c * math.log2(c) for c in range(1, 1 << 13)])


@njit(cache=True)
def _est_rows(counts, nr, width):
    """The empirical entropy (bits) of the ``nr`` rows of ``counts`` (int64, shape
    ``(nr, width)``), summed, plus 8 bits a row that holds a count and 5 a nonzero count."""
    bits = 0.0
    for r in range(nr):
        tot = 0
        clc = 0.0  # sum of c log2 c
        k = 0
        for j in range(width):
            c = counts[r, j]
            if c:
                tot += c
                k += 1
                clc += _CLOG2C[c] if c < _CLOG2C.shape[0] else c * np.log2(np.float64(c))
        if tot:
            bits += 8.0 + 5.0 * k + (tot * np.log2(np.float64(tot)) - clc)
    return bits


@njit(cache=True)
def _quantile_map(shist, n, n_ctx):
    cmap = np.zeros(E.CTX_RANGE, np.int64)
    c = 0
    run = 0
    for s in range(E.CTX_RANGE):
        cmap[s] = c
        run += shist[s]
        if run * n_ctx >= (c + 1) * n and c < n_ctx - 1:
            c += 1
    return cmap


@njit(cache=True)
def _est_bits(z, mb, n_mb, ema, n_ctx):
    """Estimated coded bits of zigzagged residuals ``z``: hybrid split (4, 2), ``n_ctx``
    contexts at quantiles of the statistic, crossed with the match buckets; the empirical
    entropy of each row plus the raw bits and about 5 bits per table entry. The better of the
    two context kinds: recent bit lengths, and the moving average of decay ``2**-ema``.

    The per-sample arrays are as narrow as their values (a token < 256, a statistic < 2**16):
    with int64 arrays the kernel ran 3x slower (28 against 8 ns a sample, 42k samples)."""
    n = z.shape[0]
    tokens = np.empty(n, np.uint8)
    st0 = np.empty(n, np.uint16)
    st1 = np.empty(n, np.uint16)
    h0 = np.zeros(E.CTX_RANGE, np.int64)
    h1 = np.zeros(E.CTX_RANGE, np.int64)
    raw = np.int64(0)
    b1 = np.int64(0)
    b2 = np.int64(0)
    b3 = np.int64(0)
    acc = 0
    width = 1
    for i in range(n):
        v = z[i]
        s0 = 2 * b1 + b2 + b3
        s1 = E.ema_stat_fast(acc, ema)
        bl = 64 - np.int64(clz64(v))  # the bit length of v
        if v < np.uint64(16):
            t = np.int64(v)
        else:
            nb = bl - 3
            t = 16 + ((bl - 5) << 2) + np.int64((v >> np.uint64(nb)) & np.uint64(3))
            raw += nb
        tokens[i] = t
        if t >= width:
            width = int(t) + 1
        st0[i] = s0
        st1[i] = s1
        h0[s0] += 1
        h1[s1] += 1
        b3 = b2
        b2 = b1
        b1 = bl
        acc = E.ema_update(acc, v, ema)
    c0 = _quantile_map(h0, n, n_ctx)
    c1 = _quantile_map(h1, n, n_ctx)
    nr = n_mb * n_ctx
    k0 = np.zeros((nr, width), np.int64)
    k1 = np.zeros((nr, width), np.int64)
    for i in range(n):
        m = np.int64(mb[i]) * n_ctx
        t = tokens[i]
        k0[m + c0[st0[i]], t] += 1
        k1[m + c1[st1[i]], t] += 1
    return float(raw) + min(_est_rows(k0, nr, width), _est_rows(k1, nr, width))


# the code of a count below 2**13 and log2 of a frequency (1..SCALE), by the C library's log2
# (the function numba's np.log2 calls: the same floats as the kernels computed them; numpy's
# own log2 may differ in the last bit)
_LOG2_INT = np.array([0.0] + list(map(math.log2, range(1, max(1 << 13, E.SCALE + 1)))))
_QCODE = np.minimum(1 + np.rint(4 * _LOG2_INT[:1 << 13]), E.MAX_QCODE).astype(np.int64)
_QCODE[0] = 0
_LOG2_FREQ = _LOG2_INT[:E.SCALE + 1].copy()
del _LOG2_INT


@njit(cache=True)
def _quantize_counts(counts):
    """:func:`signals.entropy.quantize_counts` (numba; codes of counts below 2**13 from a
    table)."""
    q = np.zeros(counts.shape, np.int64)
    for i in range(counts.shape[0]):
        for j in range(counts.shape[1]):
            c = counts[i, j]
            if c > 0:
                if c < _QCODE.shape[0]:
                    q[i, j] = _QCODE[c]
                else:
                    q[i, j] = min(1 + np.int64(np.rint(4 * np.log2(np.float64(c)))), E.MAX_QCODE)
    return q


@njit(cache=True)
def _coded_bits(counts, freqs):
    """:func:`signals.entropy.coded_bits` (the same sum in the same order; log2 of the
    frequencies from a table)."""
    total = 0.0
    for c in range(counts.shape[0]):
        for s in range(counts.shape[1]):
            if counts[c, s]:
                f = freqs[c, s]
                if f <= 0 or f > E.SCALE:
                    if f == 0:
                        return np.inf
                    total += counts[c, s] * (E.SCALE_BITS - np.log2(f))
                else:
                    total += counts[c, s] * (E.SCALE_BITS - _LOG2_FREQ[f])
    return total


@njit(cache=True)
def _stat_prefix(fine, shist):
    """The statistics that occur (``shist > 0``, increasing) and the running sums of their
    counts per (bucket, token) of :func:`_fine_hist`: ``pre[b, i]`` sums the first ``i``."""
    k = 0
    for v in shist:
        k += v > 0
    stats = np.empty(k, np.int64)
    k = 0
    for st in range(shist.shape[0]):
        if shist[st] > 0:
            stats[k] = st
            k += 1
    n_mb, _, width = fine.shape
    pre = np.zeros((n_mb, k + 1, width), np.int64)
    for bk in range(n_mb):
        for i in range(k):
            for t in range(width):
                pre[bk, i + 1, t] = pre[bk, i, t] + fine[bk, stats[i], t]
    return stats, pre


@njit(cache=True)
def _tables_for(fine, shist, width, n_mb, n_contexts):
    """(bits, thresholds, freqs, table codes) with ``n_contexts`` bins (:func:`_thresholds`)."""
    stats, pre = _stat_prefix(fine, shist)
    return _tables_of(stats, pre, shist, width, n_mb, n_contexts)


@njit(cache=True)
def _tables_of(stats, pre, shist, width, n_mb, n_contexts):
    """:func:`_tables_for` from :func:`_stat_prefix` (the counts of a context bin: a difference
    of two running sums)."""
    n = 0
    for v in shist:
        n += v
    if n_contexts <= 1 or n == 0:
        th = np.zeros(0, np.int64)
    else:
        cdf = np.cumsum(shist)
        qs = np.searchsorted(cdf, np.arange(1, n_contexts) * (n / n_contexts), side="right")
        th = np.empty(qs.shape[0], np.int64)
        m = 0
        for j in range(qs.shape[0]):
            v = qs[j]
            if v < 1:
                v = 1
            if v > 255:
                v = 255
            if m == 0 or v != th[m - 1]:
                th[m] = v
                m += 1
        th = th[:m].copy()
    nc = th.shape[0] + 1
    counts = np.zeros((n_mb * nc, width), np.int64)
    lo = 0  # the occurring statistics of bin ci: stats[lo:hi]
    for ci in range(nc):
        hi = lo
        while hi < stats.shape[0] and (ci == nc - 1 or stats[hi] < th[ci]):
            hi += 1
        if hi > lo:
            for bk in range(n_mb):
                row = bk * nc + ci
                for t in range(width):
                    counts[row, t] = pre[bk, hi, t] - pre[bk, lo, t]
        lo = hi
    # per row, in the order of the rows: codes, frequencies, coded bits (the same sum in the
    # same order as signals.entropy.coded_bits) and table bits (as _codes_bytes); a row
    # without counts has zero codes and frequencies and 1 bit a code
    nr = n_mb * nc
    q = np.zeros((nr, width), np.int64)
    f = np.zeros((nr, width), np.int64)
    total = 0.0
    code_bits = 0
    for c in range(nr):
        used = False
        for t in range(width):
            k = counts[c, t]
            if k > 0:
                used = True
                q[c, t] = _QCODE[k] if k < _QCODE.shape[0] else \
                    min(1 + np.int64(np.rint(4 * np.log2(np.float64(k)))), E.MAX_QCODE)
        if not used:
            code_bits += width
            continue
        f[c] = E.freqs_from_codes(q[c])
        prev = 0
        for t in range(width):
            k = counts[c, t]
            if k:
                fr = f[c, t]
                if fr == 0:
                    total = np.inf
                elif total != np.inf:
                    total += k * (E.SCALE_BITS - (_LOG2_FREQ[fr] if fr <= E.SCALE
                                                  else np.log2(fr)))
            code_bits += _code_bits(q[c, t] - prev)
            prev = q[c, t]
    bits = total + 8 * (((code_bits + 7) >> 3) + nc)
    return bits, th, f, q


@njit(cache=True)
def _freqs_rows(q):
    """:func:`signals.entropy.freqs_from_code_rows`, rows of zero codes passed over (their
    frequencies are zeros)."""
    f = np.zeros(q.shape, np.int64)
    for c in range(q.shape[0]):
        for s in range(q.shape[1]):
            if q[c, s] > 0:
                f[c] = E.freqs_from_codes(q[c])
                break
    return f


@njit(cache=True, inline="always")
def _code_bits(d):
    """Bits of one table code's delta ``d`` along its row (:func:`signals.entropy.write_codes`):
    ``2 * nb + 1``, ``nb`` the bit length of its zigzag plus 1, minus 1."""
    u = (2 * d if d >= 0 else -2 * d - 1) + 1
    nb = 0
    while u > 1:
        u >>= 1
        nb += 1
    return 2 * nb + 1


@njit(cache=True)
def _codes_bytes(q):
    """``len(signals.entropy.write_codes(q))``, without writing them (:func:`_code_bits`)."""
    bits = 0
    for c in range(q.shape[0]):
        prev = 0
        for s in range(q.shape[1]):
            bits += _code_bits(q[c, s] - prev)
            prev = q[c, s]
    return (bits + 7) >> 3


@njit(cache=True)
def _best_tables(fine, shist, width, n_mb, contexts):
    """:func:`_tables_for` at each context count of ``contexts`` (the first of the fewest bits)."""
    stats, pre = _stat_prefix(fine, shist)
    return _best_tables_of(stats, pre, shist, width, n_mb, contexts)


@njit(cache=True)
def _stat_hist(tokens, z, bitlen, mb, n_mb, width, ctxk):
    """:func:`_stat_prefix` of :func:`_fine_hist` (and the histogram of the statistic) without
    the counts of the statistics that do not occur: (stats, running sums, histogram)."""
    n = tokens.shape[0]
    stat = np.empty(n, np.int64)
    shist = np.zeros(E.CTX_RANGE, np.int64)
    b1 = 0
    b2 = 0
    b3 = 0
    acc = 0
    for i in range(n):
        st = 2 * b1 + b2 + b3 if ctxk == 0 else E.ema_stat_fast(acc, ctxk)
        stat[i] = st
        shist[st] += 1
        if ctxk == 0:
            b3 = b2
            b2 = b1
            b1 = bitlen[tokens[i]]
        else:
            acc = E.ema_update(acc, z[i], ctxk)
    at = np.zeros(E.CTX_RANGE, np.int64)
    k = 0
    for st in range(E.CTX_RANGE):
        if shist[st] > 0:
            at[st] = k
            k += 1
    stats = np.empty(k, np.int64)
    for st in range(E.CTX_RANGE):
        if shist[st] > 0:
            stats[at[st]] = st
    pre = np.zeros((n_mb, k + 1, width), np.int64)
    for i in range(n):
        pre[mb[i], at[stat[i]] + 1, tokens[i]] += 1
    for bk in range(n_mb):
        for j in range(k):
            for t in range(width):
                pre[bk, j + 1, t] += pre[bk, j, t]
    return stats, pre, shist


@njit(cache=True)
def _best_tables_of(stats, pre, shist, width, n_mb, contexts):
    """:func:`_best_tables` from :func:`_stat_prefix` or :func:`_stat_hist`."""
    best = _tables_of(stats, pre, shist, width, n_mb, contexts[0])
    for j in range(1, contexts.shape[0]):
        cand = _tables_of(stats, pre, shist, width, n_mb, contexts[j])
        if cand[0] < best[0]:
            best = cand
    return best


def _rows_tables(fine, shist, width, n_mb, contexts):
    """Best (bits, thresholds, freqs, table codes) over the context counts tried, from the
    counts per (bucket, statistic, token) of :func:`_fine_hist`; the table bytes are
    ``signals.entropy.write_codes`` of the codes."""
    return _best_tables(fine, shist, width, n_mb, np.asarray(contexts, np.int64))


@njit(cache=True)
def _zigzag_u64(r):
    """:func:`signals.predict.zigzag` as uint64, one pass."""
    z = np.empty(r.shape[0], np.uint64)
    for i in range(r.shape[0]):
        v = r[i]
        z[i] = np.uint64((v << 1) ^ (v >> 63))
    return z


@njit(cache=True)
def _table_rows(tokens, z, bitlen, mb, cmap, nc, ctxk):
    """Table row of each token: its context (statistic of kind ``ctxk``, as in
    :func:`_fine_hist`, through ``cmap``) plus ``nc`` times its match bucket."""
    n = tokens.shape[0]
    rows = np.empty(n, np.int64)
    b1 = 0
    b2 = 0
    b3 = 0
    acc = 0
    for i in range(n):
        s = 2 * b1 + b2 + b3 if ctxk == 0 else E.ema_stat_fast(acc, ctxk)
        rows[i] = cmap[s] + nc * np.int64(mb[i])
        if ctxk == 0:
            b3 = b2
            b2 = b1
            b1 = bitlen[tokens[i]]
        else:
            acc = E.ema_update(acc, z[i], ctxk)
    return rows


@njit(cache=True)
def _split_tables(z, mb, n_mb, k, msb, contexts, ctxs):
    """The best tables of the hybrid split ``(k, msb)`` of ``z`` over the context counts
    ``contexts`` and context kinds ``ctxs`` (the first of the fewest bits):
    (bits, k, msb, tokens, raw bit counts, thresholds, freqs, codes, width, context kind,
    token bit lengths)."""
    tokens, nbits = E.hybrid_split(z, k, msb)
    width = np.int64(1)
    for i in range(tokens.shape[0]):
        width = max(width, np.int64(tokens[i]) + 1)
    bl = E.token_bitlen(k, msb, width)
    raw = np.int64(0)
    for i in range(nbits.shape[0]):
        raw += np.int64(nbits[i])
    stats, pre, shist = _stat_hist(tokens, z, bl, mb, n_mb, width, ctxs[0])
    bits, th, f, q = _best_tables_of(stats, pre, shist, width, n_mb, contexts)
    ctxk = ctxs[0]
    for j in range(1, ctxs.shape[0]):
        stats, pre, shist = _stat_hist(tokens, z, bl, mb, n_mb, width, ctxs[j])
        b2, th2, f2, q2 = _best_tables_of(stats, pre, shist, width, n_mb, contexts)
        if b2 < bits:
            bits, th, f, q, ctxk = b2, th2, f2, q2, ctxs[j]
    return bits + float(raw), k, msb, tokens, nbits, th, f, q, width, ctxk, bl


@njit(cache=True)
def _residual_tables(r, mb, n_mb, hybrid, contexts, ctxs):
    """:func:`_code_residuals`' choice in one kernel: the zigzagged ``r`` (uint64) and the
    :func:`_split_tables` of the first of the fewest bits over the splits ``hybrid`` (rows of
    (k, msb)), in the order tried."""
    z = _zigzag_u64(r)
    best = _split_tables(z, mb, n_mb, hybrid[0, 0], hybrid[0, 1], contexts, ctxs)
    for h in range(1, hybrid.shape[0]):
        cand = _split_tables(z, mb, n_mb, hybrid[h, 0], hybrid[h, 1], contexts, ctxs)
        if cand[0] < best[0]:
            best = cand
    return z, best


@njit(cache=True)
def _context_map(th):
    """:func:`signals.entropy.context_map` of increasing thresholds ``th`` in a kernel."""
    cmap = np.empty(E.CTX_RANGE, np.int64)
    c = 0
    for st in range(E.CTX_RANGE):
        while c < th.shape[0] and th[c] <= st:
            c += 1
        cmap[st] = c
    return cmap


@njit(cache=True)
def _put_varint(buf, pos, v):
    """Write ``v`` (>= 0) as a LEB128 varint at ``buf[pos]``; the position after it."""
    while v >= 0x80:
        buf[pos] = np.uint8((v & 0x7F) | 0x80)
        pos += 1
        v >>= 7
    buf[pos] = np.uint8(v)
    return pos + 1


@njit(cache=True, inline="always")
def _varint_len(v):
    """The bytes of ``v`` (>= 0) as :func:`_put_varint` writes it."""
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


@njit(cache=True)
def _section_bytes(z, mb, n_mb, k, msb, tokens, nbits, th, f, q, width, ctxk, bl):
    """The entropy sections of a mode-4 payload (hybrid byte, contexts, match buckets, context
    kind, table, rANS words, raw bits) from :func:`_split_tables`' choice, as uint8."""
    table = E.write_codes(q)
    nc = th.shape[0] + 1
    rows = _table_rows(tokens, z, bl, mb, _context_map(th), nc, ctxk)
    cum = np.zeros_like(f)
    for i in range(f.shape[0]):
        for j in range(1, f.shape[1]):
            cum[i, j] = cum[i, j - 1] + f[i, j - 1]
    words = E.rans_encode_rows(tokens, rows, f, cum)
    raw, total = E.pack_raw_bits(z, nbits)
    nraw = (total + 7) // 8
    buf = np.empty(48 + nc + table.shape[0] + 2 * words.shape[0] + nraw, np.uint8)
    buf[0] = np.uint8(k << 4 | msb)
    buf[1] = np.uint8(nc)
    for i in range(nc - 1):
        buf[2 + i] = np.uint8(th[i])
    pos = nc + 1
    buf[pos] = np.uint8(n_mb)
    buf[pos + 1] = np.uint8(ctxk)
    pos = _put_varint(buf, pos + 2, width)
    pos = _put_varint(buf, pos, table.shape[0])
    buf[pos:pos + table.shape[0]] = table
    pos = _put_varint(buf, pos + table.shape[0], words.shape[0])
    for i in range(words.shape[0]):
        buf[pos] = np.uint8(words[i] & 0xFF)
        buf[pos + 1] = np.uint8(words[i] >> 8)
        pos += 2
    for i in range(nraw):
        buf[pos + i] = np.uint8((raw[i >> 3] >> np.uint64(8 * (i & 7))) & np.uint64(0xFF))
    return buf[:pos + nraw]


_PRESET_ARRAYS: dict[_Preset, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _preset_arrays(preset: _Preset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hybrid (k, msb) rows, context counts, context kinds) of ``preset`` as int64 arrays."""
    a = _PRESET_ARRAYS.get(preset)
    if a is None:
        a = _PRESET_ARRAYS[preset] = (np.array(preset.hybrid, np.int64).reshape(-1, 2),
                                      np.array(preset.contexts, np.int64),
                                      np.array(preset.ctx, np.int64))
    return a


def _code_residuals(r, mb, n_mb, preset: _Preset):
    """(estimated bits, entropy sections) for residuals ``r`` (int64, not empty) with match
    buckets ``mb``: the tables of the preset's hybrid splits, context counts and context kinds
    of the fewest bits, and a function that codes the sections with them (bytes)."""
    z, (bits, k, msb, tokens, nbits, th, f, q, width, ctxk, bl) = _residual_tables(
        r, mb, n_mb, *_preset_arrays(preset))

    def emit() -> bytes:
        return _section_bytes(z, mb, n_mb, k, msb, tokens, nbits, th, f, q, width, ctxk,
                              bl).tobytes()
    return bits, emit


def _encode_fused(x: np.ndarray, preset: _Preset, lpc: tuple | None = None,
                  plan: Plan | None = None) -> bytes:
    """Mode 4 at ``preset``; ``lpc``: the preset's block analysis of ``x`` and its runs, where
    already made (:func:`_own_estimate`); ``plan``: the match model, cascade and predictor kind
    to use, in place of their search."""
    block = preset.block_size
    if plan is not None:
        tbits = _tbits(x.size)
        params = _lpc_params(x, preset) if plan.lpc else _fixed_params(x, preset)
        kinds, ords, shifts, coefs = params
        r, mb = P.predict_fused(x, block, kinds, ords, shifts, coefs, plan.mh, plan.t, tbits)
        if plan.lms and not plan.mh:  # (the cascade runs with the match model off)
            r = P.cascade_forward(r, plan.lms)
        emit = _code_residuals(r, mb, 1 if plan.mh == 0 else P.MATCH_BUCKETS, preset)[1]
        side = P.block_side_bytes(*params)
        lms = 0 if plan.mh else plan.lms
        return _mode4(block, side, plan.mh, plan.t, tbits, lms, emit())
    runs: dict | None = None
    if lpc is None:
        kinds, ords, shifts, coefs = _lpc_params(x, preset)
    else:
        (kinds, ords, shifts, coefs), runs = lpc
    side = P.block_side_bytes(kinds, ords, shifts, coefs)
    tbits = _tbits(x.size)
    # the match model, where a pass with it saves estimated bits (else off)
    if preset.search:
        best: Any = None
        fixed = _fixed_params(x, preset)
        for params in ((kinds, ords, shifts, coefs), fixed):
            sd = P.block_side_bytes(*params)
            for mh, t in ((0, 0),) + preset.match:
                r, mb = P.predict_fused(x, block, params[0], params[1], params[2], params[3],
                                        mh, t, tbits)
                for lms in (0, *P.LMS_VARIANTS) if (mh == 0 and preset.lms) else (0,):
                    rr = P.cascade_forward(r, lms) if lms else r
                    bits, emit = _code_residuals(rr, mb, 1 if mh == 0 else P.MATCH_BUCKETS, preset)
                    bits += 8 * len(sd)
                    if best is None or bits < best[0]:
                        best = (bits, emit, mh, t, sd, lms)
        _, emit, mh, t, side, lms = best
    else:
        r, mb, mh, t, gain, lms = None, None, 0, 0, 0.0, 0
        # match candidates: screened by their estimated gain on a short prefix, then compared
        # by their estimated size (_est_bits) on a longer one; the winner runs on all
        scr = min(x.size, MATCH_SCREEN)
        if runs is not None and scr == x.size:
            screens = [runs[c][:3] for c in preset.match]
        else:
            screens = [P.predict_fused_gain(x[:scr], block, kinds, ords, shifts, coefs, mh_, t_,
                                            tbits) for mh_, t_ in preset.match]
        gains = [g for _, _, g in screens]
        top = max(gains, default=0.0)  # (a candidate well behind the best gain is not compared)
        cands = tuple(c for c, g in zip(preset.match, gains) if g > 0 and g >= MATCH_KEEP * top)
        side_lpc = side
        whole: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # probes of all of x
        if scr == x.size:  # the screen ran on all of x: its residuals serve the probes
            whole = {c: (r_, mb_) for c, (r_, mb_, _) in zip(preset.match, screens)}
            if runs is not None:
                whole[0, 0] = runs[0, 0][:2]
        if cands:
            pre = min(x.size, MATCH_PROBE)
            probe: Any = None
            for mh_, t_ in ((0, 0),) + cands:
                if pre == x.size and (mh_, t_) in whole:
                    r_, mb_ = whole[mh_, t_]
                else:
                    r_, mb_ = P.predict_fused(x[:pre], block, kinds, ords, shifts, coefs, mh_, t_,
                                              tbits)
                if pre == x.size:
                    whole[mh_, t_] = (r_, mb_)
                known = runs[mh_, t_][3] if runs is not None and pre == x.size else None
                b_ = _estimate(r_, mb_, 1 if mh_ == 0 else P.MATCH_BUCKETS) if known is None \
                    else known
                if probe is None or b_ < probe[0]:
                    probe = (b_, mh_, t_, mb_)
            _, mh, t, mbp = probe
        params = (kinds, ords, shifts, coefs)
        if mh and (mbp > 0).mean() > 0.5 and kinds.any():
            # the match model predicts most samples: LPC coefficients may not pay for themselves
            # (compared by the size estimate on the prefix; the winner runs on all)
            nbp = -(-pre // block)
            xp = x[:pre]
            fx = _fixed_params(xp, preset)
            e_lpc = probe[0] + 8 * len(P.block_side_bytes(kinds[:nbp], ords[:nbp], shifts[:nbp],
                                                          coefs[:nbp]))
            rp, mbq = P.predict_fused(xp, block, fx[0], fx[1], fx[2], fx[3], mh, t, tbits)
            if _estimate(rp, mbq, P.MATCH_BUCKETS) + 8 * len(P.block_side_bytes(*fx)) < e_lpc:
                if pre < x.size:
                    fx = _fixed_params(x, preset)
                params = fx
        if mh:
            if params[0] is kinds and (mh, t) in whole:  # the probe ran on all of x already
                r, mb = whole[mh, t]
                gain = _match_gain(whole[0, 0][0], r, mb)
            else:
                r, mb, gain = P.predict_fused_gain(x, block, params[0], params[1], params[2],
                                                   params[3], mh, t, tbits)
            if gain < 64.0:
                r, mb, mh, t = None, None, 0, 0
            else:
                side = P.block_side_bytes(*params)
        if r is None or (preset.lms and (mb > 0).mean() < 0.5):
            if (0, 0) in whole:
                r0, mb0 = whole[0, 0]
            else:
                r0, mb0 = P.predict_fused(x, block, kinds, ords, shifts, coefs, 0, 0, tbits)
            if r is None:
                r, mb = r0, mb0
            elif P.residual_cost(r0) < P.residual_cost(r):
                r, mb, mh, t, side = r0, mb0, 0, 0, side_lpc
            if preset.lms:
                # the cascade variant and whether it pays, from a prefix; the winner runs on all
                p = min(x.size, LMS_PROBE)
                cost = P.residual_cost(r[:p])
                need = cost - preset.lms_gain * p
                pick: Any = None
                # (a cost is >= 0: else none can pay); the sign-data LMS first, as it decodes in
                # about half the time: a slower NLMS variant must save 1% more to replace it
                for v in (4, 1, 3) if need > 0 else ():
                    r3 = P.cascade_forward(r0[:p], v)
                    c3 = P.residual_cost(r3)
                    if c3 < 0.99 * cost and c3 <= need:
                        pick, cost = (v, r3), c3
                if pick is not None:
                    lms, mh, t, mb, side = pick[0], 0, 0, mb0, side_lpc
                    r = pick[1] if p == x.size else P.cascade_forward(r0, lms)
        emit = _code_residuals(r, mb, 1 if mh == 0 else P.MATCH_BUCKETS, preset)[1]
    return _mode4(block, side, mh, t, tbits, lms, emit())


@njit(cache=True)
def _match_gain(r0, r, mb):
    """The gain of :func:`signals.predict.predict_fused_gain` from the block predictor's
    residuals ``r0`` and the match model's ``r``, ``mb`` (the same sum, in the same order)."""
    gain = 0.0
    for i in range(r.shape[0]):
        if mb[i]:
            gain += P._cost1p(r0[i]) - P._cost1p(r[i])
    return gain


def _fixed_params(x: np.ndarray, preset: _Preset) -> tuple:
    """The block predictors of ``x`` at ``preset`` without LPC: the fixed and lag predictors."""
    return P.block_lpc_analyze(x, preset.block_size, np.zeros(0, np.int64), 14, True, preset.max_lag)


def _tbits(n: int) -> int:
    """The match model's table bits for ``n`` samples."""
    return int(min(MAX_TBITS, max(10, int(n).bit_length() + 1)))


def _mode4(block: int, side: bytes, mh: int, t: int, tbits: int, lms: int, body: bytes) -> bytes:
    """A mode-4 payload: block size, block predictors, match model and cascade, coded residuals."""
    return b"".join([bytes([CODED2]), _varint(block), _varint(len(side)), side,
                     bytes([mh, t, tbits, lms]), body])


def _lpc_params(x: np.ndarray, preset: _Preset) -> tuple:
    """The block predictors (kinds, orders, shifts, coefficients) of ``x`` at ``preset``."""
    orders = np.array(preset.lpc_orders if preset.predictor == "linear" else (), np.int64)
    return P.block_lpc_analyze(x, preset.block_size, orders, 14, preset.search, preset.max_lag)


def _estimate(r: np.ndarray, mb: np.ndarray, n_mb: int) -> float:
    """Estimated coded bits of residuals ``r`` (:func:`_est_bits`, the better context kind)."""
    return _est_bits(_zigzag_u64(r), mb, n_mb, 3, EST_CONTEXTS)


def _encode_small(x: np.ndarray, preset: _Preset) -> bytes:
    """Mode 4 for a short input: a bounded search in place of level 7's.

    Candidates: two block predictors (the preset's LPC analysis, and the fixed and
    lag predictors alone), each with the cascade variants (kept only where they save
    the preset's ``lms_gain`` bits a sample, as for longer inputs), and with every match
    model of level 6 that shows a gain; each is estimated once (:func:`_est_bits`,
    one pass, no table fitting); the winner is coded with the
    preset's entropy search widened to level 6's hybrid splits and more contexts.
    The work is a fixed multiple of one level-5 pass.
    """
    block = preset.block_size
    tbits = _tbits(x.size)
    orders = np.array(sorted(set(preset.lpc_orders) | set(PRESETS[SMALL_LEVEL].lpc_orders)), np.int64)
    lpc = P.block_lpc_analyze(x, block, orders, 14, True,
                              preset.max_lag)
    fixed = _fixed_params(x, preset)
    same = all(np.array_equal(a, b) for a, b in zip(lpc, fixed))  # no block took an LPC
    best: Any = None
    for params in (lpc,) if same else (lpc, fixed):
        sd = 8 * len(P.block_side_bytes(*params))
        kp, op, sp, cp = params
        r0, mb0 = P.predict_fused(x, block, kp, op, sp, cp, 0, 0, tbits)
        cands: list[tuple[int, int, int, np.ndarray, np.ndarray]] = [(0, 0, 0, r0, mb0)]
        if preset.lms:
            cands += [(0, 0, v, P.cascade_forward(r0, v), mb0) for v in P.LMS_VARIANTS]
        for mh, t in _M:
            r, mb, gain = P.predict_fused_gain(x, block, kp, op, sp, cp, mh, t, tbits)
            if gain > 0:
                cands.append((mh, t, 0, r, mb))
        for mh, t, lms, r, mb in cands:
            bits = _estimate(r, mb, 1 if mh == 0 else P.MATCH_BUCKETS) + sd
            if lms:  # the cascade must save the preset's lms_gain a sample (as in _encode_fused)
                bits += preset.lms_gain * x.size
            if best is None or bits < best[0]:
                best = (bits, params, mh, t, lms, r, mb)
    _, params, mh, t, lms, r, mb = best
    wide = _Preset(preset.predictor, block, preset.lpc_orders, (1, 2, 4, 6, 8, 12, 16),
                   tuple(dict.fromkeys(preset.hybrid + ((4, 2), (3, 2)))), ctx=preset.ctx)
    side = P.block_side_bytes(*params)
    emit = _code_residuals(r, mb, 1 if mh == 0 else P.MATCH_BUCKETS, wide)[1]
    return _mode4(block, side, mh, t, tbits, lms, emit())


def _read_block_side(rd: _Reader, n: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray]:
    """The block size and the block predictor's (kinds, orders, shifts, coefs) of a payload of
    ``n`` samples (modes 4 and 7), each size checked against the bytes that hold it."""
    block = rd.varint(P.MAX_BLOCK)
    if block < 1:
        raise ValueError("predictor block size 0")
    n_blocks = -(-n // block)
    side = np.frombuffer(rd.take(rd.varint(rd.remaining())), np.uint8)
    if n_blocks > side.size // 2 + 1:
        raise ValueError(f"{n_blocks} predictor blocks cannot fit in {side.size} bytes")
    kinds, orders, shifts, coefs, ok = P.parse_block_side(side, n_blocks)
    if not ok:
        raise ValueError(f"predictor parameters do not describe {n_blocks} blocks")
    return block, kinds, orders, shifts, coefs


def _decode_fused_payload(rd: _Reader, n: int) -> np.ndarray:
    block, kinds, orders, shifts, coefs = _read_block_side(rd, n)
    mh, t, tbits, lms = rd.byte(), rd.byte(), rd.byte(), rd.byte()
    if mh > 32 or not 1 <= tbits <= MAX_TBITS:  # (a writer's at most: 2**24 took 128 MiB)
        raise ValueError(f"bad match parameters ({mh}, {t}, {tbits})")
    if lms > P.MAX_LMS or (lms and mh):
        raise ValueError(f"bad adaptive-filter flag {lms}")
    k, msb, nc, th = _read_hybrid_and_contexts(rd)
    n_mb, ctxk = rd.byte(), rd.byte()
    if n_mb != (1 if mh == 0 else P.MATCH_BUCKETS):
        raise ValueError(f"bad match bucket count {n_mb}")
    if ctxk > MAX_EMA_SHIFT:
        raise ValueError(f"bad context kind {ctxk}")
    width = rd.varint(E.alphabet_size(k, msb))
    if width < 1:
        raise ValueError("empty token table")
    table = np.frombuffer(rd.take(rd.varint(rd.remaining())), np.uint8)
    q, used, ok = E.read_codes(table, nc * n_mb, width)
    if not ok or used != table.size:
        raise ValueError("inconsistent token tables")
    f = E.freqs_from_code_rows(q)
    return _decode_words(rd, n, k, msb, E.context_map(th), nc, f, None, None,
                         block, kinds, orders, shifts, coefs, mh, t, tbits, lms, ctxk)


_DTAB_CACHE: dict[int, tuple[Any, int, int, np.ndarray]] = {}
_DTAB_LOCK = threading.Lock()


def _decode_table(f: np.ndarray, k: int, msb: int) -> np.ndarray:
    """:func:`signals.entropy.decode_table`, kept for the last few frequency arrays
    (a model's tables decode many packets)."""
    with _DTAB_LOCK:
        hit = _DTAB_CACHE.get(id(f))
        if hit is not None and hit[0]() is f and hit[1:3] == (k, msb):
            return hit[3]
    dtab = E.decode_table(f, k, msb)
    with _DTAB_LOCK:
        for key in [key for key, v in _DTAB_CACHE.items() if v[0]() is None]:
            del _DTAB_CACHE[key]  # tables of arrays gone (a mode-4 payload's own)
        if len(_DTAB_CACHE) >= 8:
            _DTAB_CACHE.pop(next(iter(_DTAB_CACHE)))
        _DTAB_CACHE[id(f)] = (weakref.ref(f), k, msb, dtab)
    return dtab


def _decode_words(rd, n, k, msb, cmap, nc, f, cum, lookup, block, kinds, orders, shifts, coefs,
                  mh, t, tbits, lms=0, ctxk=0) -> np.ndarray:
    """Samples from the rANS words and raw bits left in ``rd`` (modes 3 and 4).

    ``cum`` and ``lookup`` are not used (the decoder builds its packed table
    from ``f``); they stay in the signature for the callers.
    """
    n_words = rd.varint(rd.remaining() // 2)
    words = np.frombuffer(rd.take(2 * n_words), "<u2").astype(np.uint16)
    if n * E.MIN_TOKEN_BITS > 16 * n_words + 64:
        raise ValueError(f"{n} samples cannot fit in {n_words} rANS words")
    rest = rd.take(rd.remaining())
    raw = np.frombuffer(rest + bytes(-len(rest) % 8 + 16), "<u8").astype(np.uint64)
    dtab = _decode_table(f, k, msb)
    x, ok = _decode_fused(words, raw, 8 * len(rest), n, cmap, nc, dtab, block, kinds, orders,
                          shifts, coefs, mh, t, tbits, lms, ctxk)
    if not ok:
        raise ValueError("inconsistent rANS words or raw bits")
    return x


# ------------------------------------------------------------------ model
MODEL_TBITS = 10  # match-model hash table of a packet (1024 entries)
FALLBACK_LEVEL = 3  # the level of a packet's own coding, where the model codes it badly
SHORT_FALLBACK_LEVEL = 2  # the same for packets below OWN_TRY_SIZE (cheaper: no ranks, one match)
CONST_MAX = 1 << 16  # constant packets up to this size are coded as such (mode 1) by the batch
OWN_TRY_SIZE = 1024  # packets from this size also try their own coding where it may be smaller


def _fallback_level(level: int, n: int) -> int:
    return min(level, FALLBACK_LEVEL if n >= OWN_TRY_SIZE else SHORT_FALLBACK_LEVEL)


# each level's LPC orders (int64, shape (k,)) and match models (int64, shape (m, 2)) as kernels
# take them
_PRESET_ORDERS = {lv: np.array(p.lpc_orders if p.predictor == "linear" else (), np.int64)
                  for lv, p in PRESETS.items()}
_PRESET_MATCH = {lv: np.array(p.match, np.int64).reshape(-1, 2) for lv, p in PRESETS.items()}


@njit(cache=True)
def _own_analysis(x, block, orders, search, max_lag, match, tbits):
    """:func:`_own_estimate`'s work in one kernel: the block predictors (as
    :func:`_lpc_params` finds them, from the preset's ``orders``, ``search`` and ``max_lag``);
    the residuals ``r`` (int64, shape ``(m + 1, n)``) and match buckets ``mb`` (uint8, same
    shape) without a match model (row 0) and with each of the ``m`` of ``match`` (int64,
    shape ``(m, 2)``: context length, run before use); each one's estimated gain and bits
    (``gains``, ``ests``: float64, shape ``(m + 1,)``; ``ests`` nan for a match model whose
    gain is not positive); and the estimate: the least bits, the predictor side and 64 bits of
    header."""
    kinds, orders_, shifts, coefs = P.block_lpc_analyze(x, block, orders, 14, search, max_lag)
    m = match.shape[0]
    n = x.shape[0]
    r = np.empty((m + 1, n), np.int64)
    mb = np.empty((m + 1, n), np.uint8)
    gains = np.zeros(m + 1)
    ests = np.full(m + 1, np.nan)
    for j in range(m + 1):
        mh, t = (0, 0) if j == 0 else (match[j - 1, 0], match[j - 1, 1])
        rj, mbj, gains[j] = P.predict_fused_gain(x, block, kinds, orders_, shifts, coefs, mh, t,
                                                 tbits)
        r[j] = rj
        mb[j] = mbj
        if j == 0 or gains[j] > 0:
            ests[j] = _est_bits(_zigzag_u64(rj), mbj, 1 if j == 0 else P.MATCH_BUCKETS, 3,
                                EST_CONTEXTS)
    best = ests[0]
    for j in range(1, m + 1):
        if gains[j] > 0:
            best = min(best, ests[j])
    side = 0  # the length of P.block_side_bytes
    for b in range(kinds.shape[0]):
        side += 2 if kinds[b] == 0 else (4 if kinds[b] == 2 else 3 + 2 * orders_[b])
    return kinds, orders_, shifts, coefs, r, mb, gains, ests, best + 8 * side + 64


def _own_estimate(x: np.ndarray, level: int) -> tuple[float, tuple[tuple, dict]]:
    """Estimated bits of ``x`` (int64, contiguous) coded on its own at ``level`` (no tables
    fitted, no ranks): the block predictor, and each match model of the level that shows a
    gain, through :func:`_est_bits`; plus the predictor side and about 8 bytes of header. And
    what the coding at ``level`` takes again: the block predictors (:func:`_lpc_params`), and
    the residuals, match buckets, gain and estimate (None where no gain) of each match model
    of the level (and (0, 0), no match model) on all of ``x``. One kernel
    (:func:`_own_analysis`)."""
    pr = PRESETS[level]
    k, o, s, c, r, mb, gains, ests, est = _own_analysis(
        x, pr.block_size, _PRESET_ORDERS[level], pr.search, pr.max_lag, _PRESET_MATCH[level],
        _tbits(x.size))
    runs: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, float, float | None]] = {
        (0, 0): (r[0], mb[0], 0.0, float(ests[0]))}
    for j, (mh, t) in enumerate(pr.match, 1):
        runs[mh, t] = (r[j], mb[j], float(gains[j]), float(ests[j]) if gains[j] > 0 else None)
    return float(est), ((k, o, s, c), runs)


def _try_own(x: np.ndarray, coded: bytes, model: ChannelModel, level: int) -> bytes:
    """``coded`` (a packet's model payload) or its own coding, whichever is smaller; the own
    coding is tried only where the packet may gain from it (long packets, or costly under the
    model) and its estimate (:func:`_own_estimate`) is below the model payload, or its values
    are sparse (mode 5 may win; the estimate does not see it)."""
    if level <= 0 or not x.size:
        return coded
    if (x.size < OWN_TRY_SIZE or (model.own_gain is not None and model.own_gain < OWN_TRY_GAIN)) \
            and 8 * len(coded) <= model.fallback_bits * x.size + 64:
        return coded
    return _own_or(x, coded, level, model)


def _model_residuals(x: np.ndarray, model: ChannelModel) -> tuple[np.ndarray, np.ndarray]:
    """The residuals (int64) and match buckets (all 0) of ``x`` (int64) under the model's
    predictor and cascade, as one block, without its match model."""
    kinds, orders, shifts, coefs = model.block_params()
    r, mb = P.predict_fused(x, max(x.size, 1), kinds, orders, shifts, coefs, 0, 0, _tbits(x.size))
    return (P.cascade_forward(r, model.lms) if model.lms else r), mb


def _own_tables(x: np.ndarray, model: ChannelModel, res: tuple | None = None) -> bytes:
    """Mode 4 of ``x`` (int64) with the model's predictor (a fixed or lag one: no coefficients to
    carry) and cascade, no match model, and the packet's own tables (level 3's search); ``res``:
    :func:`_model_residuals` of ``x``, where already found."""
    r, mb = _model_residuals(x, model) if res is None else res
    emit = _code_residuals(r, mb, 1, PRESETS[FALLBACK_LEVEL])[1]
    return _mode4(max(x.size, 1), P.block_side_bytes(*model.block_params()), 0, 0, _tbits(x.size),
                  model.lms, emit())


@njit(cache=True)
def _own_tables_batch(x, offsets, sel, bounds, kinds, orders, shifts, coefs, lms, side, hybrid,
                      contexts, ctxs):
    """:func:`_own_tables` of the packets ``x[offsets[j]:offsets[j+1]]`` for ``j`` in ``sel``
    (each not empty), in one call: the payloads in one uint8 array and where each ends (int64,
    shape ``(len(sel) + 1,)``). ``bounds`` (int64, one per packet of ``sel``): a packet whose
    payload could not be shorter than its bound gets an empty one, its rANS coding skipped.
    That is decided from the tables' estimate (:func:`_residual_tables`' bits: the ideal code
    lengths under the tables, the tables and the raw bits). The coded body holds 48 bits more
    (six header bytes at least) and the rANS words at least 16 more than the code lengths
    its tokens took, which can fall short of the ideal by under ``-log2(1 - 1/16)`` = 0.0931
    bits a token (the state is at least 16 times the token's frequency when it is coded): so
    the payload is at least ``8 head + bits + 64 - 0.0931 n`` bits long (``head``: its mode-4
    header; the test takes 0.0932, a little more for the float sums' rounding). (A review
    built a packet of 5,000 samples, tokens ordered to keep the state low, whose body was 8
    bits shorter than the estimate: ``tests/data/crafted``.)
    ``side``: the model predictor's side bytes (uint8); ``hybrid``, ``contexts``, ``ctxs``:
    :func:`_preset_arrays` of ``FALLBACK_LEVEL``'s preset."""
    ends = np.zeros(sel.shape[0] + 1, np.int64)
    out = np.empty(1024, np.uint8)
    pos = 0
    for j in range(sel.shape[0]):
        a, b = offsets[sel[j]], offsets[sel[j] + 1]
        n = b - a
        tbits = 1
        while (n >> tbits) > 0:
            tbits += 1
        tbits = min(MAX_TBITS, max(10, tbits + 1))  # _tbits(n)
        r, mb = P.predict_fused(x[a:b], n, kinds, orders, shifts, coefs, 0, 0, tbits)
        if lms:
            r = P.cascade_forward(r, lms)
        z, best = _residual_tables(r, mb, 1, hybrid, contexts, ctxs)
        head = 5 + side.shape[0] + _varint_len(n) + _varint_len(side.shape[0])
        if 8 * head + best[0] + 64 - 0.0932 * n >= 8 * bounds[j]:
            ends[j + 1] = pos
            continue
        body = _section_bytes(z, mb, 1, best[1], best[2], best[3], best[4], best[5], best[6],
                              best[7], best[8], best[9], best[10])
        need = pos + 32 + side.shape[0] + body.shape[0]
        if need > out.shape[0]:
            grown = np.empty(max(need, 2 * out.shape[0]), np.uint8)
            grown[:pos] = out[:pos]
            out = grown
        out[pos] = np.uint8(CODED2)  # _mode4(n, side, 0, 0, tbits, lms, body)
        pos = _put_varint(out, pos + 1, n)
        pos = _put_varint(out, pos, side.shape[0])
        out[pos:pos + side.shape[0]] = side
        pos += side.shape[0]
        out[pos] = 0
        out[pos + 1] = 0
        out[pos + 2] = np.uint8(tbits)
        out[pos + 3] = np.uint8(lms)
        pos += 4
        out[pos:pos + body.shape[0]] = body
        pos += body.shape[0]
        ends[j + 1] = pos
    return out[:pos], ends


_UNMADE = object()  # (_own_or: the packet's own tables not made yet)
_NO_BOUNDS = np.zeros(0, np.int64)  # (_encode_model_batch: every payload coded)
_NO_BOUND = np.iinfo(np.int64).max >> 4  # (a packet's bound where any payload is kept)


def _own_tables_many(x: np.ndarray, offsets: np.ndarray, sel: list[int], model: ChannelModel,
                     bounds: list[int] | None = None) -> dict[int, bytes | None]:
    """{j: :func:`_own_tables` of packet ``j``} for ``j`` in ``sel`` (packets not empty) in one
    kernel call (:func:`_own_tables_batch`); with ``bounds`` (bytes, one per packet of
    ``sel``), None in place of a payload that the tables' estimate finds at least as long as
    its bound (not coded)."""
    if not sel:
        return {}
    kinds, orders, shifts, coefs = model.block_params()
    side = np.frombuffer(P.block_side_bytes(kinds, orders, shifts, coefs), np.uint8)
    b = np.full(len(sel), _NO_BOUND, np.int64) if bounds is None else np.array(bounds, np.int64)
    buf, ends = _own_tables_batch(x, offsets, np.array(sel, np.int64), b, kinds, orders, shifts,
                                  coefs, model.lms, side, *_preset_arrays(PRESETS[FALLBACK_LEVEL]))
    blob, e = buf.tobytes(), ends.tolist()
    return {j: blob[e[i]:e[i + 1]] if e[i + 1] > e[i] else None for i, j in enumerate(sel)}


@njit(cache=True)
def _distinct_ranks_batch(x, offsets):
    """Per packet ``x[offsets[j]:offsets[j+1]]`` (int64): the differences (order 1, the first
    value kept, as :func:`signals.predict.differences`) of its sorted distinct values, all
    packets' joined (int64), where each packet's start there (int64, shape
    ``(n_packets + 1,)``), and each sample's rank among its packet's distinct values (int64,
    the shape of ``x``)."""
    n_p = offsets.shape[0] - 1
    heads = np.empty(x.shape[0], np.int64)
    hoff = np.zeros(n_p + 1, np.int64)
    ranks = np.empty(x.shape[0], np.int64)
    for j in range(n_p):
        a, b = offsets[j], offsets[j + 1]
        hoff[j + 1] = hoff[j] + (_distinct_ranks(x[a:b], heads[hoff[j]:], ranks[a:b]) if b > a
                                 else 0)
    return heads[:hoff[n_p]], hoff, ranks


@njit(cache=True)
def _distinct_ranks(seg, heads, ranks):
    """For ``seg`` (int64, not empty): the differences of its sorted distinct values into
    ``heads`` (the first value kept), each sample's rank among them into ``ranks``, and their
    count. Through a bitmap of the span where it takes at most ``4 n + 1024`` words of 64 bits
    (a rank: the values in the words before, plus the set bits below in its word), else one
    sort of the indices."""
    n = seg.shape[0]
    lo = hi = seg[0]
    for v in seg:
        lo = min(lo, v)
        hi = max(hi, v)
    span = hi - lo  # (negative where it exceeds 2**63 - 1)
    m = 0
    one = np.uint64(1)
    if 0 <= span < 64 * (4 * n + 1024):
        bits = np.zeros((span >> 6) + 1, np.uint64)
        for v in seg:
            d = v - lo
            bits[d >> 6] |= one << np.uint64(d & 63)
        before = np.empty(bits.shape[0], np.int64)  # the distinct values in the words before
        prev = lo
        for w in range(bits.shape[0]):
            before[w] = m
            b = bits[w]
            while b:
                v = lo + (w << 6) + np.int64(ctz64(b))
                heads[m] = v - prev if m else lo
                prev = v
                m += 1
                b &= b - one
        for i in range(n):
            d = seg[i] - lo
            below = (one << np.uint64(d & 63)) - one
            ranks[i] = before[d >> 6] + np.int64(popcount64(bits[d >> 6] & below))
        return m
    order = np.argsort(seg)
    for i in range(n):
        v = seg[order[i]]
        if i == 0 or v != seg[order[i - 1]]:
            heads[m] = v - seg[order[i - 1]] if m else v
            m += 1
        ranks[order[i]] = m - 1
    return m


@njit(cache=True)
def _encode_ranked_batch(x, offsets, vk, vo, vs, vc, vmh, vt, vkk, vmsb, vbl, vcmap, vnc, vf, vcum,
                         vlms, rk, ro, rs, rc, rmh, rt, rkk, rmsb, rbl, rcmap, rnc, rf, rcum, rlms):
    """Mode-9 payloads of every packet ``x[offsets[j]:offsets[j+1]]`` (int64), concatenated
    (uint8) and where each starts (int64; an empty one for a packet of fewer than 2 distinct
    values): its distinct values' differences and its ranks coded by
    :func:`_encode_model_batch` under the ranked stage's values model (``v...``: block
    parameters, match model, hybrid split, token bit lengths, context map and count, tables,
    cascade) and ranks model (``r...``)."""
    heads, hoff, ranks = _distinct_ranks_batch(x, offsets)
    none = np.zeros(0, np.int64)  # (no bounds: no costs read)
    hb, ho = _encode_model_batch(heads, hoff, none, vk, vo, vs, vc, vmh, vt, MODEL_TBITS, vkk, vmsb,
                                 vbl, vcmap, vnc, vf, vcum, vlms, none.reshape(0, 1))
    rb, ro_ = _encode_model_batch(ranks, offsets, none, rk, ro, rs, rc, rmh, rt, MODEL_TBITS, rkk,
                                  rmsb, rbl, rcmap, rnc, rf, rcum, rlms, none.reshape(0, 1))
    n_p = offsets.shape[0] - 1
    out = np.empty(hb.shape[0] + rb.shape[0] + 21 * n_p, np.uint8)
    off = np.zeros(n_p + 1, np.int64)
    pos = 0
    for j in range(n_p):
        m = hoff[j + 1] - hoff[j]
        if m >= 2:
            out[pos] = np.uint8(MODEL_RANKED)
            pos = _put_varint(out, pos + 1, m)
            pos = _put_varint(out, pos, ho[j + 1] - ho[j])
            out[pos:pos + ho[j + 1] - ho[j]] = hb[ho[j]:ho[j + 1]]
            pos += ho[j + 1] - ho[j]
            out[pos:pos + ro_[j + 1] - ro_[j]] = rb[ro_[j]:ro_[j + 1]]
            pos += ro_[j + 1] - ro_[j]
        off[j + 1] = pos
    return out[:pos], off


def _ranked_payloads(x: np.ndarray, offsets: np.ndarray, model: ChannelModel, out: list[bytes]
                     ) -> list[bytes]:
    """``out`` (the payloads of the packets ``x[offsets[j]:offsets[j+1]]``, int64) with mode 9
    (the ``model``'s ranked stage, :func:`_encode_ranked_batch`) in place of each payload that
    it codes smaller."""
    encode_ranked = model.batch_kernels()[2]
    assert encode_ranked is not None
    buf, off = encode_ranked(x, offsets)
    ends = off.tolist()
    blob = None
    for j, (a, b) in enumerate(zip(ends, ends[1:])):
        if a < b < a + len(out[j]):
            blob = buf.tobytes() if blob is None else blob
            out[j] = blob[a:b]
    return out


def _own_or(x: np.ndarray, coded: bytes, level: int, model: ChannelModel | None = None,
            cheap: Any = _UNMADE) -> bytes:
    """:func:`_try_own` past its first tests: the own coding where estimated smaller.

    The search (:func:`_own_search`) runs at the fallback level (below ``OWN_SEARCH_LEVEL``,
    at most the model's ``own_level`` hint; without the hint, at most
    ``SHORT_FALLBACK_LEVEL`` where the model's ``own_gain`` is below ``OWN_GAIN_MIN``: its
    validation packets did not gain from their own coding, so that the packets that try it
    are the rare costly ones, and level 3's ranks and wider search saved at most 0.01% of the
    bits on the benchmark's sets at up to a third of the speed). Where the ``model``'s
    predictor has no coefficients (fixed or lag), the packet is also coded with that
    predictor and its own tables (:func:`_own_tables`, one pass): from ``OWN_SEARCH_LEVEL``
    beside the search, and below it, in packets of ``OWN_TRY_SIZE`` samples or more where the
    model's ``own_search`` hint is False, in its place wherever it costs at most the model's
    ``fallback_bits`` (the packet looks like the model's data; where the values are sparse,
    mode 5 is still tried, :func:`_ranked_or`). (A shorter packet's own tables rarely pay
    for the table that its decoder builds: there the search stays, as for costly packets.)
    The smallest payload is kept: the search's estimate is held against the smaller of the two
    before it (where own tables already beat the model payload, a search estimated between
    them is not coded). ``cheap``: :func:`_own_tables_many`'s result for ``x`` bounded by
    ``len(coded)`` (its payload, or None where estimated no shorter), where already made."""
    lv = _fallback_level(level, x.size)
    if model is not None and level < OWN_SEARCH_LEVEL:
        if model.own_level is not None:
            lv = min(lv, model.own_level)
        elif model.own_gain is not None and model.own_gain < OWN_GAIN_MIN:
            lv = min(lv, SHORT_FALLBACK_LEVEL)  # (own coding did not pay on the validation split)
    x64 = np.ascontiguousarray(x, np.int64)
    u = _sparse_values(x64) if lv >= RANK_LEVEL else None
    best = coded
    if model is not None and _own_cheap_first(x.size, level, model):
        quick = model.own_search is False and level < OWN_SEARCH_LEVEL and x.size >= OWN_TRY_SIZE
        if cheap is _UNMADE:
            cheap = _own_tables_many(x64, np.array([0, x64.size]), [0], model, [len(coded)])[0]
        best = cheap if cheap is not None and len(cheap) < len(coded) else coded
        if quick and 8 * len(best) <= model.fallback_bits * x.size + 64:
            return best if u is None else _ranked_or(x64, best, model, u)
    return _own_search(x64, best, lv, u)


def _own_search(x64: np.ndarray, coded: bytes, lv: int, u: np.ndarray | None) -> bytes:
    """The own coding of ``x64`` (int64, contiguous; ``u``: its sparse values, or None) at level
    ``lv`` where estimated smaller than ``coded`` and smaller, else ``coded``.

    Where the values are sparse (mode 5 may win), the ranks and the distinct values' differences
    are estimated too (:func:`_own_estimate`, whose analysis their coding then takes), and
    only the candidates whose estimate is near the better one are coded: mode 4 of ``x64`` where
    the ranks' estimate is at least ``RANK_SURE`` times its own, mode 5 where at most
    ``RANK_DOUBT`` times."""
    est, (lpc, runs) = _own_estimate(x64, lv)
    if u is None:
        if est >= 8 * len(coded):
            return coded
        own = _encode_plain(x64, lv, lpc=(lpc, runs), sparse=None)
        if own[0] == CONST and x64.size > CONST_MAX:
            return coded  # (decode_packets bounds a payload's count by its bytes)
        return own if len(own) < len(coded) else coded
    # (sparse values: x64 is not constant; the estimate knows nothing of mode 5 on its own)
    ranks, diffs = _ranks_heads(x64)
    e_body, body = _own_estimate(ranks, lv)
    e_ranked = e_body + 8 * (3 + len(_varint(u.size)))
    head: Any = None
    if e_ranked + 64 <= RANK_DOUBT * est:  # (a head's estimate is at least 64 bits)
        e_head, head = _own_estimate(diffs, min(lv, RANK_LEVEL))
        e_ranked += e_head
    else:
        e_ranked += 64
    fused = e_ranked >= RANK_SURE * est
    ranked = e_ranked <= RANK_DOUBT * est
    if not ranked and est >= 8 * len(coded):
        return coded
    cands: list[bytes] = []
    if fused:
        cands.append(_encode_plain(x64, lv, inner=True, lpc=(lpc, runs)))
    five = _encode_ranked(x64, lv, u, (ranks, diffs, body, head)) if ranked else None
    if five is not None:
        cands.append(five)
    own = min(cands, key=len)  # (the first of the shortest: mode 4 on a tie, as _encode_plain)
    if len(own) >= 1 + 8 * x64.size:
        own = bytes([RAW]) + x64.astype("<i8").tobytes()  # (as _encode_plain gives up)
    return own if len(own) < len(coded) else coded


def _ranked_or(x: np.ndarray, coded: bytes, model: ChannelModel, u: np.ndarray) -> bytes:
    """Mode 5 of ``x`` (int64, its sorted distinct values ``u``) with the ranks coded as
    :func:`_own_tables` codes a packet (the model's predictor, their own tables) and the
    distinct values' differences at ``RANK_LEVEL``, where the estimate (:func:`_est_bits` of
    the ranks' residuals and of the differences' own differences, plus the headers) is at
    most ``RANK_DOUBT`` times the bits of ``coded`` and it codes smaller; else ``coded``."""
    ranks, d = _ranks_heads(x)
    res = _model_residuals(ranks, model)
    e_head = 8 * (16 + len(_varint(u.size))) + _estimate(P.differences(d, 1),
                                                         np.zeros(d.size, np.uint8), 1)
    if _estimate(*res, 1) + e_head > RANK_DOUBT * 8 * len(coded):
        return coded
    head = _encode_plain(d, RANK_LEVEL, inner=True)
    five = b"".join([bytes([RANKED]), _varint(u.size), _varint(len(head)), head,
                     _own_tables(ranks, model, res)])
    return five if len(five) < len(coded) else coded


OWN_SEARCH_LEVEL = 6  # from this level, a packet's own coding searches its predictor also where
# the model's own_search hint says that its fixed or lag predictor with own tables serves
OWN_SEARCH_GAIN = 0.005  # the search must save this share of the model's validation bits more
# than the model's predictor with own tables, for the hint to ask for it
FALLBACK_QUANTILE = 0.98  # of the validation packets' cost: packets above it try their own coding
OWN_LEVEL_SLACK = 0.001  # a model's own_level hint: the lowest level whose validation bits are
# within this share of FALLBACK_LEVEL's
OWN_GAIN_MIN = 0.005  # a model's own_gain from it: own tables pay, fit_channel_model fits the
# own_level hint
OWN_TRY_GAIN = 0.01  # a model's own_gain below it: its long packets try their own coding only
# where costly (as short ones do). Trying costs 2-4x the model coding's time (ACSF1, packets of
# 1024: own_gain 0.85%, and every long packet trying saved 0.16% of the bits at half the speed)
OWN_PROBE, OWN_PROBE_WINS = 16, 2  # such a model's batches: every 16th long packet tries; the
# others too where 2 of those gained (and OWN_TRY_GAIN of their bytes)
# (A batch with 10% or more costly long packets, other data than the model's, used to let all
# of its long packets try, whatever the probes showed: on PLAID's packets of 1024 that saved
# 0.24% of the bytes at 0.79x the speed; the probes alone decide now.)
OWN_GAIN_SAMPLES = 1 << 16  # validation samples (at most) on which fit_channel_model measures it
RANK_SURE, RANK_DOUBT = 0.9, 1.05  # a sparse packet's own coding: mode 4 is coded too where the
# ranks' estimate is at least RANK_SURE times its own, mode 5 where at most RANK_DOUBT times


def _own_gain(m: ChannelModel, val: list[np.ndarray], size: int, level: int = DEFAULT_LEVEL
              ) -> tuple[float, float] | None:
    """The share of the model's bits that coding each packet of ``val`` with its own tables (as
    :func:`_try_own` would at ``level``, where smaller) saves, and the bits per sample then;
    None where
    ``val`` holds fewer than
    ``OWN_TRY_SIZE`` samples. The recordings are joined (many short recordings are streamed
    so) and cut in packets of ``size`` samples, or of all of them where fewer; at most
    ``OWN_GAIN_SAMPLES`` samples, in evenly spread packets."""
    joined = np.concatenate(val) if val else np.zeros(0, np.int64)
    if joined.size < OWN_TRY_SIZE:
        return None
    size = min(size, joined.size)
    pk = [p for p in _packets([joined], size) if p.size == size]
    budget = max(1, OWN_GAIN_SAMPLES // size)
    if len(pk) > budget:
        pk = [pk[i] for i in np.linspace(0, len(pk) - 1, budget).astype(int)]
    coded = encode_packets(pk, m, level=0)
    total = sum(map(len, coded))
    saved = total - sum(len(_own_or(p, c, level, m)) for p, c in zip(pk, coded))
    return round(saved / max(1, total), 4), 8 * (total - saved) / (size * len(pk))


def _read_hybrid_and_contexts(rd: _Reader) -> tuple[int, int, int, np.ndarray]:
    """The hybrid-integer byte, the context count and thresholds of a payload, checked."""
    hk = rd.byte()
    k, msb = hk >> 4, hk & 15
    if k > E.MAX_K or msb > min(k, E.MAX_MSB):
        raise ValueError(f"bad hybrid parameters k={k}, msb={msb}")
    nc = rd.byte()
    if not 1 <= nc <= E.MAX_CONTEXTS:
        raise ValueError(f"bad context count {nc}")
    th = np.frombuffer(rd.take(nc - 1), np.uint8).astype(np.int64)
    if th.size and (np.any(np.diff(th) <= 0) or th[0] < 1):
        raise ValueError("context thresholds are not increasing")
    return k, msb, nc, th


@dataclass
class ChannelModel:
    """A trained per-channel codec: predictor, match model and static entropy tables.

    Built by :func:`fit_channel_model`; payloads made with it
    (``encode_channel(x, model=m)``) carry no tables and decode only with it.

    Attributes
    ----------
    kind : int
        0: FLAC fixed predictor of order ``order``; 1: LPC; 2: lag, the sample
        ``order`` before (2..``MODEL_MAX_LAG``; the previous one for the first).
    order : int
    coefs : ndarray of int64, shape (order,)
        LPC coefficients for ``x[i-1], x[i-2], ...``; prediction ``(coefs . past) >> shift``.
    shift : int
    mh, t : int
        Match model: context length (0: off) and exact predictions before use.
    k, msb : int
        Hybrid-integer parameters of the tables.
    thresholds : ndarray of int64
        Context bin edges (n_contexts - 1).
    codes : ndarray of int64, shape (n_contexts * n_buckets, alphabet_size(k, msb))
        Log-scale frequency codes; every token has a nonzero code (the escape:
        any int64 input stays codable).
    fallback_bits : float
        Bits per sample above which a packet is also coded with its own
        tables (a high quantile of the validation packets' cost).
    lms : int
        0, or the variant of the adaptive cascade that follows the predictor
        (match model off): ``signals.predict.CASCADES`` (an NLMS, then a sign-sign
        LMS) or ``signals.predict.SIGN_DATA`` (one sign-data LMS).
    own_search : bool or None
        An encoder hint for a fixed or lag predictor: whether a packet's own
        coding searches a predictor of its own (True), or takes the model's
        predictor with its own tables (False; levels below
        ``OWN_SEARCH_LEVEL``, packets of ``OWN_TRY_SIZE`` samples or more that
        this codes at most at ``fallback_bits``). Chosen on the validation
        split: True where the search saves ``OWN_SEARCH_GAIN`` of the
        model's bits more. None (LPC models, and models fitted before the
        hint): the search.
    own_level : int or None
        An encoder hint: the level (1..``FALLBACK_LEVEL``) of a packet's own
        coding below ``OWN_SEARCH_LEVEL``, the lowest whose validation bits
        are within ``OWN_LEVEL_SLACK`` of ``FALLBACK_LEVEL``'s (level 3 adds
        the distinct-value ranks, mode 5, and a wider predictor search). None:
        ``FALLBACK_LEVEL`` for models fitted before the hint, and
        ``SHORT_FALLBACK_LEVEL`` for those whose own tables do not pay
        (``own_gain`` below ``OWN_GAIN_MIN``).
    ranked : tuple of two ChannelModel, or None
        The ranked stage (payload mode 9), kept where it lowered the
        validation bits: a packet may be coded as its sorted distinct values
        (their differences, under the first model) and each sample's rank
        among them (under the second), as mode 5 codes them with tables of
        its own. For values on a sparse grid (sensor readings scaled from ADC
        counts): the ranks keep the signal's shape without its gaps. Neither
        model has a ranked or vocabulary stage of its own.
    own_gain : float or None
        An encoder hint (payloads do not depend on it): the share of the
        validation bits, in packets of at least ``OWN_TRY_SIZE`` samples, that
        coding a packet with its own tables saved, where smaller. Below
        ``OWN_TRY_GAIN`` long packets try their own coding only as short ones
        do (above ``fallback_bits``); None (models fitted before the hint):
        every long packet may try it.
    stages_ : list of dict
        Set by :func:`fit_channel_model`: per stage (``stage``: predictor,
        match model, adaptive cascade, contexts) what was ``kept`` and its
        validation ``bits`` per sample, and the runner-up (``alternative``,
        ``bits_alternative``) among the candidates tried.
    """

    kind: int
    order: int
    coefs: np.ndarray
    shift: int
    mh: int
    t: int
    k: int
    msb: int
    thresholds: np.ndarray
    codes: np.ndarray
    fallback_bits: float = 64.0
    lms: int = 0
    merges: np.ndarray | None = None
    vcodes: np.ndarray | None = None
    own_gain: float | None = None
    own_search: bool | None = None
    own_level: int | None = None
    ranked: tuple[ChannelModel, ChannelModel] | None = None
    # built once, from the fields above (not init fields: dataclasses.replace builds them again)
    _tables: Any = field(default=None, init=False, repr=False, compare=False)
    _vtables: Any = field(default=None, init=False, repr=False, compare=False)
    _batch: Any = field(default=None, init=False, repr=False, compare=False)
    _kernels: Any = field(default=None, init=False, repr=False, compare=False)
    # how fit_channel_model chose each stage (not part of the config, nor of the content id)
    stages_: list = field(default_factory=list, repr=False, compare=False)

    @property
    def n_buckets(self) -> int:
        return 1 if self.mh == 0 else P.MATCH_BUCKETS

    def tables(self) -> tuple:
        """(context map, freqs, cum, lookup), built once."""
        if self._tables is None:
            f = E.freqs_from_code_rows(self.codes)
            cum, lookup = E.build_tables(f)
            self._tables = (E.context_map(self.thresholds), f, cum, lookup)
        return self._tables

    def vocab(self) -> tuple:
        """(tokenizer, freqs, cum, lookup, expansions) of the vocabulary stage, built once;
        the expansions: where each token id's tokens start in the second array (int64, one
        entry more than ids), and all of them, id after id (int64)."""
        if self._vtables is None:
            from ubpe import Tokenizer
            if self.merges is None or self.vcodes is None:
                raise ValueError("this channel model has no vocabulary stage")
            tok = Tokenizer.from_merges(E.alphabet_size(self.k, self.msb), self.merges)
            f = E.freqs_from_code_rows(self.vcodes)
            cum, lookup = E.build_tables(f)
            ids = np.arange(tok.n_tokens_)
            starts = np.concatenate([[0], np.cumsum(tok.token_lengths())]).astype(np.int64)
            self._vtables = (tok, f, cum, lookup, (starts, tok.decode(ids).astype(np.int64)))
        return self._vtables

    def batch_params(self) -> tuple:
        """What the packet kernels take besides the tables, built once: (kinds, orders,
        shifts, coefs, token bit lengths, context count, decode table, the fewest bits a
        token of the tables costs)."""
        if self._batch is None:
            cmap, f, _, _ = self.tables()
            fmax = min(int(f.max(initial=1)), E.SCALE - 1)
            self._batch = (*self.block_params(), E.token_bitlen(self.k, self.msb, f.shape[1]),
                           self.thresholds.size + 1, E.decode_table(f, self.k, self.msb),
                           E.min_token_bits(fmax))
        return self._batch

    def __getstate__(self) -> dict[str, Any]:
        """The fields to pickle: the bound kernels are left out (they do not pickle; the copy
        builds its own where it codes)."""
        return {**self.__dict__, "_kernels": None}

    def batch_kernels(self) -> tuple[Callable, Callable, Callable | None]:
        """The batch coder's kernels with this model's parameters bound (``ubpe._jit.bind``:
        each call checks only its own arguments), built once: ``encode(x, offsets, bounds)`` ->
        ``(buf, off)`` (:func:`_encode_model_batch`); ``decode(buf, offsets, ns)`` ->
        ``(x, off, status, n_bad)`` (:func:`_decode_model_batch`, or with a ranked stage
        :func:`_decode_ranked_model_batch`); ``encode_ranked(x, offsets)`` -> ``(buf, off)``
        (:func:`_encode_ranked_batch`), None without a ranked stage. (Built again where
        ``ranked`` was set since: :func:`fit_channel_model` sets it on a model that coded.)"""
        if self._kernels is None or self._kernels[0] is not self.ranked:
            cmap, f, cum, _ = self.tables()
            kinds, orders, shifts, coefs, bl, nc, dtab, min_bits = self.batch_params()
            costs = np.zeros(f.shape, np.int64)  # (a table entry's code length, 2**-16 bits)
            costs[f > 0] = np.floor((E.SCALE_BITS - np.log2(f[f > 0])) * 65536)
            encode = bind(_encode_model_batch, kinds, orders, shifts, coefs, self.mh, self.t,
                          MODEL_TBITS, self.k, self.msb, bl, cmap, nc, f, cum, self.lms, costs)
            if self.ranked is None:
                decode = bind(_decode_model_batch, kinds, orders, shifts, coefs, self.mh, self.t,
                              MODEL_TBITS, cmap, nc, dtab, self.lms, min_bits)
                encode_ranked = None
            else:
                dec, enc = [], []
                for sub in self.ranked:
                    scmap, sf, scum, _ = sub.tables()
                    sk, so, ss, sc, sbl, snc, sdtab, smin = sub.batch_params()
                    dec += [sk, so, ss, sc, sub.mh, sub.t, scmap, snc, sdtab, sub.lms, smin]
                    enc += [sk, so, ss, sc, sub.mh, sub.t, sub.k, sub.msb, sbl, scmap, snc, sf, scum,
                            sub.lms]
                decode = bind(_decode_ranked_model_batch, kinds, orders, shifts, coefs, self.mh,
                              self.t, cmap, nc, dtab, self.lms, min_bits, *dec)
                encode_ranked = bind(_encode_ranked_batch, *enc)
            self._kernels = (self.ranked, encode, decode, encode_ranked)
        return self._kernels[1:]

    def block_params(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(kinds, orders, shifts, coefs) of the predictor as one block."""
        c = np.zeros((1, 32), np.int64)
        c[0, :self.coefs.size] = self.coefs
        return (np.array([self.kind]), np.array([self.order]), np.array([self.shift]), c)

    def get_config(self) -> dict[str, Any]:
        """Plain JSON: ``{"kind": "channel_model", ...}``; the codes as base64 bytes."""
        return {"kind": "channel_model", "version": 1,
                "predictor": {"kind": self.kind, "order": self.order, "shift": self.shift,
                              "coefs": [int(c) for c in self.coefs]},
                "match": [self.mh, self.t], "cascade": int(self.lms), "k": self.k, "msb": self.msb,
                "thresholds": [int(t) for t in self.thresholds],
                "rows": int(self.codes.shape[0]), "fallback_bits": float(self.fallback_bits),
                "codes": base64.b64encode(self.codes.astype(np.uint8).tobytes()).decode()} | (
            {} if self.own_gain is None else {"own_gain": float(self.own_gain)}) | (
            {} if self.own_search is None else {"own_search": bool(self.own_search)}) | (
            {} if self.own_level is None else {"own_level": int(self.own_level)}) | (
            {} if self.merges is None or self.vcodes is None else {"vocabulary": {
                "merges": base64.b64encode(self.merges.astype("<i4").tobytes()).decode(),
                "codes": base64.b64encode(self.vcodes.astype(np.uint8).tobytes()).decode()}}) | (
            {} if self.ranked is None else {"ranked": {"values": self.ranked[0].get_config(),
                                                       "ranks": self.ranked[1].get_config()}})

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ChannelModel:
        """Rebuild from :meth:`get_config`.

        Raises
        ------
        ValueError
            On a config of another kind or version, or inconsistent values.
        """
        try:
            if config.get("kind") != "channel_model" or config.get("version") != 1:
                raise ValueError("not a version-1 channel model config")
            k, msb = _index(config["k"]), _index(config["msb"])
            if not (0 <= k <= E.MAX_K and 0 <= msb <= min(k, E.MAX_MSB)):
                raise ValueError(f"bad hybrid parameters k={k}, msb={msb}")
            pr = config["predictor"]
            kind, order, shift = _index(pr["kind"]), _index(pr["order"]), _index(pr["shift"])
            coefs = np.array([_index(c) for c in pr["coefs"]], np.int64)
            if kind == 0:
                if not 0 <= order <= P.MAX_ORDER or coefs.size:
                    raise ValueError("bad fixed predictor")
            elif kind == 1:
                if coefs.shape != (order,) or not 1 <= order <= 32 or not 0 <= shift <= 30 \
                        or np.abs(coefs).max() > 32767:
                    raise ValueError("bad LPC predictor")
            elif kind == 2:
                if not 2 <= order <= MODEL_MAX_LAG or coefs.size or shift:
                    raise ValueError("bad lag predictor")
            else:
                raise ValueError(f"unknown predictor kind {kind}")
            if len(config["match"]) != 2:
                raise ValueError("bad match parameters (a context length and a run)")
            mh, t = (_index(v) for v in config["match"])
            if not (0 <= mh <= 32 and 0 <= t <= 255):
                raise ValueError("bad match parameters")
            th = np.array([_index(v) for v in config["thresholds"]], np.int64)
            if th.size >= E.MAX_CONTEXTS or (th.size and (np.any(np.diff(th) <= 0) or th.min() < 1
                                                           or th.max() > 255)):
                raise ValueError("thresholds must be increasing in 1..255")
            rows = (th.size + 1) * (1 if mh == 0 else P.MATCH_BUCKETS)
            if _index(config["rows"]) != rows:
                raise ValueError(f"{config['rows']} table rows, expected {rows}")
            raw = base64.b64decode(config["codes"], validate=True)
            width = E.alphabet_size(k, msb)
            if len(raw) != rows * width:
                raise ValueError(f"codes: {len(raw)} bytes, expected {rows * width}")
            codes = np.frombuffer(raw, np.uint8).astype(np.int64).reshape(rows, width)
            if codes.max(initial=0) > E.MAX_QCODE or np.any(codes == 0):
                raise ValueError("codes out of range (every token needs a nonzero code)")
            if width > E.SCALE:  # (each code takes one of the SCALE slots at least)
                raise ValueError(f"{width} tokens a table row, above the {E.SCALE} slots")
            lms = _index(config.get("cascade", 0))
            if not 0 <= lms <= P.MAX_LMS or (lms and mh):
                raise ValueError("bad cascade flag")
            fb = float(config.get("fallback_bits", 64.0))
            if not 0 <= fb <= 64:
                raise ValueError("fallback_bits must be in 0..64")
            merges = vcodes = None
            if config.get("vocabulary") is not None:
                merges, vcodes = _read_vocabulary(config["vocabulary"], width, mh)
            own = config.get("own_gain")
            if own is not None:
                own = float(own)
                if not 0 <= own <= 1:
                    raise ValueError("own_gain must be in 0..1")
            search = config.get("own_search")
            if search is not None and not isinstance(search, bool):
                raise ValueError("own_search must be true or false")
            level = config.get("own_level")
            if level is not None and (type(level) is not int or not 1 <= level <= FALLBACK_LEVEL):
                raise ValueError(f"own_level must be an integer in 1..{FALLBACK_LEVEL}")
            ranked = None
            if config.get("ranked") is not None:
                cfg = config["ranked"]
                if not isinstance(cfg, dict) or set(cfg) != {"values", "ranks"}:
                    raise ValueError("ranked: a values model and a ranks model expected")
                subs = (cfg["values"], cfg["ranks"])
                if any(not isinstance(c, dict) or c.get("ranked") is not None
                       or c.get("vocabulary") is not None for c in subs):  # (checked first:
                    # no recursion into a forged nest)
                    raise ValueError("ranked: its models have neither a ranked nor a vocabulary "
                                     "stage")
                ranked = (cls.from_config(subs[0]), cls.from_config(subs[1]))
        except (KeyError, TypeError, AttributeError, OverflowError, binascii.Error) as e:
            raise ValueError(f"malformed channel model config ({type(e).__name__}: {e})") from None
        m = cls(kind, order, coefs, shift, mh, t, k, msb, th, codes, fb, lms, merges, vcodes, own,
                search, level, ranked)
        if merges is not None:
            try:  # its tables built now: the tokenizer's own checks (a pair merged twice,
                # expansions above the limits) at load, not at the first packet
                m.vocab()
            except ValueError as e:
                raise ValueError(f"vocabulary: {e}") from None
        return m

    def content_id(self) -> str:
        """SHA-256 (hex, first 16 digits) of the canonical JSON config."""
        blob = json.dumps(self.get_config(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _index(v: Any) -> int:
    """An integer of a model config (a Python or NumPy integer): ``operator.index``, which
    refuses a float or a string (TypeError), where ``int`` would truncate ``4.9`` to 4; and
    not a boolean (JSON's ``true`` is no count)."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"a boolean ({v}) where an integer belongs")
    return operator.index(v)


MAX_VOCAB_MERGES = 1 << 12  # merges of a model's vocabulary stage


def _read_vocabulary(cfg: dict, width: int, mh: int) -> tuple[np.ndarray, np.ndarray]:
    """The merges (rank order) and id codes of a config's vocabulary stage, checked."""
    if mh:
        raise ValueError("a vocabulary stage needs the match model off")
    raw = base64.b64decode(cfg["merges"], validate=True)
    if len(raw) % 8 or len(raw) // 8 > MAX_VOCAB_MERGES:
        raise ValueError(f"vocabulary: {len(raw)} bytes of merges")
    merges = np.frombuffer(raw, "<i4").astype(np.int64).reshape(-1, 2)
    limit = width + np.arange(merges.shape[0])  # merge r may use ids below width + r
    if merges.size and (merges.min() < 0 or np.any(merges.max(axis=1) >= limit)):
        raise ValueError("vocabulary: a merge uses a token not defined before it")
    vcodes = np.frombuffer(base64.b64decode(cfg["codes"], validate=True), np.uint8
                           ).astype(np.int64).reshape(1, -1)
    if vcodes.shape[1] != width + merges.shape[0] or np.any(vcodes == 0) or \
            vcodes.max(initial=0) > E.MAX_QCODE or vcodes.shape[1] > E.SCALE:
        raise ValueError("vocabulary: id codes do not match the merges, are out of range, or "
                         f"are more than the {E.SCALE} slots of the table")
    return merges, vcodes


def _rank_ordered(tok) -> np.ndarray:
    """A fitted tokenizer's merges as (left, right) pairs in rank order, ids renumbered so that
    merge r creates id ``alphabet + r`` (:meth:`ubpe.Tokenizer.from_merges`)."""
    a, m = tok.alphabet_size, tok.merges_
    to_rank = np.arange(a + len(m))
    to_rank[m[:, 2]] = a + np.arange(len(m))
    return to_rank[m[:, :2]].astype(np.int64)


def _fit_vocabulary(tokens: list[np.ndarray], width: int, size: int
                    ) -> tuple[np.ndarray, np.ndarray, Any]:
    """(merges, id codes, tokenizer) of a UBPE vocabulary of ``size`` ids over hybrid tokens."""
    import warnings

    from ubpe import Tokenizer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small corpus may learn fewer merges than asked
        fitted = Tokenizer(width, size, n_candidates=8, progress=False).fit(tokens)  # (a stage)
    merges = _rank_ordered(fitted)
    tok = Tokenizer.from_merges(width, merges)
    ids = [tok.encode(t, method="shortest") for t in tokens]
    counts = np.bincount(np.concatenate(ids), minlength=width + len(merges)) + 1  # no zero
    return merges, E.quantize_counts(counts[None, :].astype(np.int64)), tok


def _vocab_payload(z: np.ndarray, tokens: np.ndarray, nbits: np.ndarray, m: ChannelModel) -> bytes:
    """Mode 8: the hybrid tokens as vocabulary ids under the model's id table, raw bits."""
    return _vocab_bytes(m.vocab()[0].encode(tokens.astype(np.int64), method="shortest"), z, nbits, m)


def _vocab_batch(x: np.ndarray, offsets: np.ndarray, m: ChannelModel) -> list[bytes]:
    """:func:`encode_channel`'s model payloads (a constant, mode 8, or raw where smaller) of the
    packets ``x[offsets[j]:offsets[j+1]]`` under a model with a vocabulary stage, their token
    ids found in one call of the tokenizer (a call per packet cost about 40 us)."""
    starts = offsets.tolist()
    out: list[bytes] = []
    todo: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    for j, (a, b) in enumerate(zip(starts, starts[1:])):
        p = x[a:b]
        if 0 < p.size <= CONST_MAX and (p == p[0]).all():  # (as encode_channel codes it)
            const = _encode_plain(p, 0)
            out.append(const if len(const) < 1 + 8 * p.size else bytes([RAW]) + p.astype("<i8").tobytes())
            continue
        z, tokens, nbits, _, _ = _model_tokens(p, m)
        todo.append((j, z, tokens.astype(np.int64), nbits))
        out.append(b"")
    ids = m.vocab()[0].encode_batch([t for _, _, t, _ in todo], method="shortest", num_threads=1) \
        if todo else []
    for (j, z, _, nbits), i in zip(todo, ids):
        coded = _vocab_bytes(i, z, nbits, m)
        n = starts[j + 1] - starts[j]
        out[j] = coded if len(coded) < 1 + 8 * n else \
            bytes([RAW]) + x[starts[j]:starts[j + 1]].astype("<i8").tobytes()
    return out


def _vocab_bytes(ids: np.ndarray, z: np.ndarray, nbits: np.ndarray, m: ChannelModel) -> bytes:
    """Mode 8 of a packet's token ids (``ids``), its zigzagged residuals and raw bit counts."""
    _, f, cum, _, _ = m.vocab()
    words = E.rans_encode_rows(ids, np.zeros(ids.size, np.int64), f, cum)
    rb, total = E.pack_raw_bits(z, nbits)
    return b"".join([bytes([MODEL_VOCAB]), _varint(ids.size), _varint(words.size),
                     words.astype("<u2").tobytes(), rb.astype("<u8").tobytes()[:(total + 7) // 8]])


def _decode_vocab(rd: _Reader, n: int, m: ChannelModel) -> np.ndarray:
    if m.merges is None:
        raise ValueError("this payload needs a model with a vocabulary stage")
    tok, f, cum, lookup, _ = m.vocab()
    n_ids = rd.varint(n)
    n_words = rd.varint(rd.remaining() // 2)
    words = np.frombuffer(rd.take(2 * n_words), "<u2").astype(np.uint16)
    if n_ids * E.MIN_TOKEN_BITS > 16 * n_words + 64 or (n_ids == 0) != (n == 0):
        raise ValueError(f"{n_ids} token ids cannot fit in {n_words} rANS words, or hold {n} "
                         f"samples")
    ids, ok = E.rans_decode_ctx(words, n_ids, np.zeros(f.shape[1], np.int64),
                                np.zeros(E.CTX_RANGE, np.int64), f, cum, lookup)
    if not ok:
        raise ValueError("inconsistent rANS stream")
    ids = ids.astype(np.int64)
    if ids.size and (ids.max() >= tok.n_tokens_ or int(tok.token_lengths()[ids].sum()) != n):
        raise ValueError(f"the token ids do not expand to {n} samples")  # checked before expanding
    tokens = tok.decode(ids)
    need = int(E.token_raw_bits(m.k, m.msb, E.alphabet_size(m.k, m.msb))[tokens].sum())
    rest = rd.take(rd.remaining())
    if len(rest) != (need + 7) // 8:
        raise ValueError(f"raw bits: {len(rest)} bytes, the tokens need {(need + 7) // 8}")
    raw = np.frombuffer(rest + bytes(-len(rest) % 8 + 16), "<u8").astype(np.uint64)
    z, ok = E.hybrid_merge(tokens.astype(np.int32), m.k, m.msb, raw, need)
    if not ok:
        raise ValueError("inconsistent raw bits")
    return inverse_blocks(P.unzigzag(z.view(np.int64)), max(n, 1), *m.block_params(), m.lms)


def _model_tokens(x: np.ndarray, m: ChannelModel):
    """(z, tokens, raw bit counts, table rows) of one packet under model ``m``."""
    kinds, orders, shifts, coefs = m.block_params()
    r, mb = P.predict_fused(x, max(x.size, 1), kinds, orders, shifts, coefs, m.mh, m.t, MODEL_TBITS)
    if m.lms:
        r = P.cascade_forward(r, m.lms)
    z = P.zigzag(r).view(np.uint64)
    tokens, nbits = E.hybrid_split(z, m.k, m.msb)
    stat = E.context_stat(tokens, E.token_bitlen(m.k, m.msb, E.alphabet_size(m.k, m.msb)))
    return z, tokens, nbits, stat, mb


def _packets(xs: list[np.ndarray], size: int) -> list[np.ndarray]:
    return [x[i:i + size] for x in xs for i in range(0, x.size, size)]


def _fit_codes(stats, tokens, mbs, m: ChannelModel, n_contexts: int):
    """Thresholds and smoothed codes for model ``m`` from packet statistics."""
    width = E.alphabet_size(m.k, m.msb)
    stat = np.concatenate(stats)
    th = _thresholds(stat, n_contexts)
    nc = th.size + 1
    rows = E.context_map(th)[stat] + nc * np.concatenate(mbs).astype(np.int64)
    nr = nc * m.n_buckets
    counts = np.bincount(rows * width + np.concatenate(tokens), minlength=nr * width).reshape(nr, width)
    # escape: every token gets a small share (additive smoothing)
    codes = np.maximum(E.quantize_counts(counts.astype(np.float64) + 0.5), 1)
    return th, codes


def _packet_bits(model: ChannelModel, packets: list[np.ndarray]) -> float:
    """Coded bits of these packets under ``model`` (tables and raw bits; no framing)."""
    cmap, f, _, _ = model.tables()
    total = 0.0
    logs = E.SCALE_BITS - np.log2(np.maximum(f, 1))
    for p in packets:
        _, tokens, nbits, stat, mb = _model_tokens(p, model)
        rows = cmap[stat] + (model.thresholds.size + 1) * mb.astype(np.int64)
        total += float(logs[rows, tokens].sum()) + float(nbits.sum(dtype=np.int64)) + 32
    return total


def fit_channel_model(signals: list[np.ndarray], *, packet_size: int = 256,
                      lpc_orders: tuple[int, ...] = (2, 4, 8, 16, 32), max_lag: int = 64,
                      match: tuple[tuple[int, int], ...] = ((0, 0), (1, 0), (2, 0), (2, 1), (4, 0)),
                      contexts: tuple[int, ...] = (1, 2, 4, 8, 12, 16), k: int = 4, msb: int = 2,
                      validation: float = 0.25, max_samples: int = 400_000,
                      vocab_sizes: tuple[int, ...] = (2, 4),
                      min_cascade_gain: float = LMS_MIN_GAIN,
                      min_vocab_gain: float = VOCAB_MIN_GAIN,
                      min_slow_gain: float = SLOW_MIN_GAIN,
                      min_rank_gain: float | None = RANK_MIN_GAIN,
                      _sub: bool = False) -> ChannelModel:
    """Fit a channel model on a corpus of recordings of one kind of source.

    Every stage is chosen by the bits it spends on a validation split, coded
    in packets of ``packet_size`` as :func:`encode_channel` codes them:
    the predictor (FLAC fixed orders 1-3, an LPC of each order in
    ``lpc_orders`` fitted by least squares on the training split, or a lag:
    the sample one period before), the match
    model, and the number of contexts. The tables are then fitted on all of
    the data, with additive smoothing so that every token keeps a nonzero
    frequency (any int64 input stays codable).

    Parameters
    ----------
    signals : list of 1-D int64 arrays
        Training recordings (any lengths). At most ``max_samples`` are used
        (evenly spread packets), to bound the fitting time.
    packet_size : int, default 256
        The packet length the model is tuned for.
    lpc_orders, match, contexts, k, msb :
        Candidates tried: LPC orders, match-model (context length, run)
        pairs, context counts; the hybrid-integer parameters.
    max_lag : int, default 64
        Lag predictors ``x[i - L]`` for ``L`` in ``2..max_lag`` (at most
        ``MODEL_MAX_LAG``): the ``LAG_CANDIDATES`` of fewest estimated
        residual bits on the training split are tried beside the fixed and
        LPC predictors (periodic sources: appliance current and power,
        rotating machines). ``0`` or ``1``: none.
    validation : float, default 0.25
        Share held out for the choices: whole recordings where there are 4
        or more, else the end of each recording.
    vocab_sizes : tuple of int, default (2, 4)
        The vocabulary stage (match model off): UBPE vocabularies of these
        multiples of the token alphabet are fitted on the training tokens
        and kept where the ids, under one static table, code the validation
        split in fewer bits than the context tables (payload mode 8);
        ``()`` skips the stage.
    min_cascade_gain : float, default ``LMS_MIN_GAIN`` (0.15)
        The adaptive cascade is kept only where it saves at least this many
        bits/sample on the validation split, and an NLMS variant (1-3) over
        the sign-data LMS (variant 4) only where it saves this much more: an
        NLMS decodes about three times slower than the rest of a packet, so a
        small saving does not pay for it (the rule of levels 4-5 of
        :func:`encode_channel`). ``0`` keeps it wherever it saves anything.
    min_vocab_gain : float, default ``VOCAB_MIN_GAIN`` (0.02)
        The same for the vocabulary stage, whose packets decode one at a
        time, through the token ids (several times slower than those of the
        context tables).
    min_slow_gain : float, default ``SLOW_MIN_GAIN`` (0.02)
        The same for the candidates that slow the decoder down: an LPC above
        order ``FAST_LPC_ORDER`` (16), or more than ``FAST_CONTEXTS`` (8)
        contexts (32 KB of decode table each: past 8, the table no longer
        fits half of a 512 KB cache). Such a candidate is kept only where it
        saves this many bits/sample over the best of the others.
    min_rank_gain : float or None, default ``RANK_MIN_GAIN`` (0.02)
        The ranked stage (see :attr:`ChannelModel.ranked`): a model of the
        packets' sorted distinct values (their differences) and one of each
        sample's rank among them, both fitted as this function fits a model
        (on the training packets' values and ranks), kept where coding each
        validation packet the smaller way (mode 3 or 9) saves this many
        bits/sample. None skips it (as does a kept vocabulary stage).

    Returns
    -------
    ChannelModel

    Raises
    ------
    ValueError
        If ``signals`` holds no samples or a non-integer array.

    Notes
    -----
    LPC fitting: normal equations of the lagged samples (covariance method),
    quantized as FLAC quantizes LPC coefficients.
    """
    xs = []
    for sig in signals:
        a = np.asarray(sig)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
            raise ValueError("fit_channel_model takes 1-D integer arrays")
        if a.size:
            xs.append(a.view(np.int64) if a.dtype == np.uint64 else a.astype(np.int64))
    if not xs:
        raise ValueError("fit_channel_model needs at least one sample")
    if not (0 <= msb <= min(k, E.MAX_MSB) and k <= E.MAX_K) or E.alphabet_size(k, msb) > E.SCALE:
        raise ValueError(f"k={k}, msb={msb}: a model's table row holds every one of the "
                         f"{E.alphabet_size(k, msb) if 0 <= k <= 64 else '?'} tokens, at most "
                         f"{E.SCALE} (the rANS slots), with k <= {E.MAX_K}, msb <= min(k, "
                         f"{E.MAX_MSB})")
    if len(xs) >= 4:
        cut = max(1, int(round(len(xs) * (1 - validation))))
        train, val = xs[:cut], xs[cut:]
    else:
        train = [x[:max(1, int(x.size * (1 - validation)))] for x in xs]
        val = [x[max(1, int(x.size * (1 - validation))):] for x in xs]
        val = [v for v in val if v.size]
        if not val:
            val = train
    tr_p = _packets(train, packet_size)
    va_p = _packets(val, packet_size)
    budget = max(1, max_samples // packet_size)
    if len(tr_p) > budget:
        tr_p = [tr_p[i] for i in np.linspace(0, len(tr_p) - 1, budget).astype(int)]
    if len(va_p) > budget // 2:
        va_p = [va_p[i] for i in np.linspace(0, len(va_p) - 1, max(1, budget // 2)).astype(int)]
    preds = [(0, o, np.zeros(0, np.int64), 0) for o in (1, 2, 3)]
    for o in lpc_orders:
        c, sh = P.fit_lpc_corpus(train, o)
        if c.size == o:
            preds.append((1, o, c, sh))
    for lag in _lag_candidates(tr_p, min(max_lag, MODEL_MAX_LAG)):
        preds.append((2, lag, np.zeros(0, np.int64), 0))

    def fitted(kind: int, order: int, coefs: np.ndarray, shift: int, mh: int, t: int, nctx: int,
               train_packets: list[np.ndarray], lms: int = 0) -> ChannelModel:
        m = ChannelModel(kind, order, coefs, shift, mh, t, k, msb, np.zeros(0, np.int64),
                         np.ones((1, 1), np.int64), lms=lms)
        parts = [_model_tokens(p, m) for p in train_packets]
        th, codes = _fit_codes([q[3] for q in parts], [q[1] for q in parts], [q[4] for q in parts],
                               m, nctx)
        return ChannelModel(kind, order, coefs, shift, mh, t, k, msb, th, codes, lms=lms)

    n_val = max(1, sum(p.size for p in va_p))
    stages: list[dict] = []

    def stage(name: str, tried: list[tuple[float, str, Any]],
              slow: Callable[[Any], bool] | None = None, gain: float | None = None) -> Any:
        """Keep the candidate of fewest validation bits, or where that one is ``slow`` to decode,
        the best of the others unless it saves ``gain`` (default ``min_slow_gain``); record it
        and the runner-up."""
        gain = min_slow_gain if gain is None else gain
        tried = sorted(tried, key=lambda c: c[0])
        pick = tried[0]
        if slow is not None and slow(pick[2]):
            fast = [c for c in tried if not slow(c[2])]
            if fast and fast[0][0] - pick[0] < gain * n_val:
                pick = fast[0]
        entry = {"stage": name, "kept": pick[1], "bits": pick[0] / n_val}
        if len(tried) > 1:  # (the runner-up; a stage of one candidate has none)
            other = tried[1] if pick is tried[0] else tried[0]
            entry.update(alternative=other[1], bits_alternative=other[0] / n_val)
        if pick is not tried[0]:
            entry["min_gain"] = gain
        stages.append(entry)
        return pick

    tried: list = []
    for kind, order, coefs, shift in preds:  # predictor, with no match model and 8 contexts
        m = fitted(kind, order, coefs, shift, 0, 0, 8, tr_p)
        tried.append((_packet_bits(m, va_p), _predictor_name(m), m))
    plain, _, base = stage("predictor", tried, lambda m: m.kind == 1 and m.order > FAST_LPC_ORDER)
    tried = [(plain, "off", base)]
    for mh, t in match:  # then the match model
        if mh:
            m = fitted(base.kind, base.order, base.coefs, base.shift, mh, t, 8, tr_p)
            tried.append((_packet_bits(m, va_p), f"context {mh}, run {t}", m))
    bits, _, chosen = stage("match model", tried)
    if chosen.mh == 0:  # the adaptive cascade after the predictor
        tried = [(bits, "off", chosen)]
        for v in P.LMS_VARIANTS:
            m = fitted(chosen.kind, chosen.order, chosen.coefs, chosen.shift, 0, 0, 8, tr_p, lms=v)
            tried.append((_packet_bits(m, va_p), f"variant {v}", m))
        best = min(tried[1:], key=lambda c: c[0])
        if bits - best[0] >= min_cascade_gain * n_val:
            # an NLMS variant costs the decoder 17-21 ns a sample, the sign-data LMS about 2 more
            # than the entropy decoder alone: the NLMS must save what a cascade must save
            bits, _, chosen = stage("adaptive cascade", tried, lambda m: m.lms in P.CASCADES,
                                    min_cascade_gain)
        else:  # it saves too little for its decode time: off, the best variant as the runner-up
            stages.append({"stage": "adaptive cascade", "kept": "off", "bits": bits / n_val,
                           "alternative": best[1], "bits_alternative": best[0] / n_val,
                           "min_gain": min_cascade_gain})
    tried = []
    for nctx in contexts:  # then the context count
        m = fitted(chosen.kind, chosen.order, chosen.coefs, chosen.shift, chosen.mh, chosen.t, nctx,
                   tr_p, chosen.lms)
        tried.append((_packet_bits(m, va_p), str(nctx), (nctx, m.thresholds.size + 1)))
    # (slow by the contexts the tables keep: bins of too few samples merge)
    bits, _, (n_ctx, _) = stage("contexts", tried, lambda c: c[1] > FAST_CONTEXTS)
    c = chosen
    vocab = 0
    if c.mh == 0 and vocab_sizes:  # then a UBPE vocabulary over the residual tokens
        m = fitted(c.kind, c.order, c.coefs, c.shift, 0, 0, n_ctx, tr_p, c.lms)
        width = E.alphabet_size(k, msb)
        tr_tok = [_model_tokens(p, m)[1].astype(np.int64) for p in tr_p]
        va_tok = [_model_tokens(p, m) for p in va_p]
        tried = [(bits, "off", 0)]
        # (ids in one table row: at most its SCALE slots; multiples capped alike, fitted once)
        for size in sorted({min(mult * width, E.SCALE) for mult in vocab_sizes}):
            merges, vcodes, tok = _fit_vocabulary(tr_tok, width, size)
            logs = E.SCALE_BITS - np.log2(E.freqs_from_code_rows(vcodes)[0])
            cost = sum(float(logs[tok.encode(q[1].astype(np.int64), method="shortest")].sum())
                       + float(q[2].sum(dtype=np.int64)) + 32 for q in va_tok)
            tried.append((cost, f"{width + len(merges)} token ids", size))
        best = min(tried[1:], key=lambda c: c[0])
        if bits - best[0] >= min_vocab_gain * n_val:
            vocab = stage("vocabulary", tried)[2]
        else:  # it saves too little for its decode time (as the cascade)
            stages.append({"stage": "vocabulary", "kept": "off", "bits": bits / n_val,
                           "alternative": best[1], "bits_alternative": best[0] / n_val,
                           "min_gain": min_vocab_gain})
    m = fitted(c.kind, c.order, c.coefs, c.shift, c.mh, c.t, n_ctx, tr_p + va_p, c.lms)
    if vocab:
        toks = [_model_tokens(p, m)[1].astype(np.int64) for p in tr_p + va_p]
        m.merges, m.vcodes, _ = _fit_vocabulary(toks, E.alphabet_size(k, msb), vocab)
    elif min_rank_gain is not None and not _sub:
        sub = dict(lpc_orders=lpc_orders, max_lag=max_lag, match=match, contexts=contexts, k=k,
                   msb=msb, validation=validation, max_samples=max_samples,
                   min_cascade_gain=min_cascade_gain, min_slow_gain=min_slow_gain)
        m.ranked, entry = _fit_ranked(m, tr_p, va_p, packet_size, min_rank_gain, sub)
        if entry is not None:
            stages.append(entry)
    if m.ranked is None:
        per = [_packet_bits(m, [p]) / p.size for p in va_p if p.size]
    else:  # (the payloads' bytes: mode 3 or 9, the smaller)
        per = [8 * len(b) / p.size for b, p in zip(encode_packets(va_p, m, level=0), va_p)
               if p.size]
    m.fallback_bits = float(min(64.0, np.quantile(per, FALLBACK_QUANTILE))) if per else 64.0
    if _sub:  # (a ranked stage's model: coded as a model payload only, no own coding)
        m.stages_ = stages
        return m
    # the own-coding hint, measured with the tables of the training split alone (and no
    # vocabulary stage: its bits are the higher, so that the hint errs towards trying)
    mt = fitted(c.kind, c.order, c.coefs, c.shift, c.mh, c.t, n_ctx, tr_p, c.lms)
    mt.fallback_bits, mt.ranked = m.fallback_bits, m.ranked
    size = max(packet_size, OWN_TRY_SIZE)
    top = None  # (share saved, bits per sample) of a packet's own coding at FALLBACK_LEVEL
    if c.kind == 1:
        top = _own_gain(mt, val, size)
    else:  # (no coefficients to carry: a packet may take the model's predictor with its own
        # tables; the search of a predictor of its own is kept where it pays: own_search)
        mt.own_search = False
        quick = _own_gain(mt, val, size)
        mt.own_search = True
        full = _own_gain(mt, val, size)
        if quick is not None and full is not None:
            m.own_search = full[0] - quick[0] >= OWN_SEARCH_GAIN
            top = full if m.own_search else quick
            runs = [(quick[1], "the model's predictor"), (full[1], "a predictor search")]
            (bits, kept), (bits_alt, alt) = runs[::-1] if m.own_search else runs
            stages.append({"stage": f"a packet's own tables (packets of {size})", "kept": kept,
                           "bits": bits, "alternative": alt, "bits_alternative": bits_alt})
    m.own_gain = None if top is None else top[0]
    if top is not None and top[0] >= OWN_GAIN_MIN:
        # the level of a packet's own coding: the lowest whose validation bits are within
        # OWN_LEVEL_SLACK of FALLBACK_LEVEL's (a lower level tries fewer candidates)
        mt.own_search = m.own_search
        level, bits, other = FALLBACK_LEVEL, top[1], (0, 0.0)
        for lv in range(1, FALLBACK_LEVEL):
            low = _own_gain(mt, val, size, lv)
            other = (lv, low[1]) if low is not None else other
            if low is not None and low[1] <= top[1] * (1 + OWN_LEVEL_SLACK):
                level, bits, other = lv, low[1], (FALLBACK_LEVEL, top[1])
                break
        m.own_level = level
        stages.append({"stage": f"a packet's own coding (packets of {size})",
                       "kept": f"level {level}", "bits": bits,
                       "alternative": f"level {other[0]}", "bits_alternative": other[1]})
    m.stages_ = stages
    return m


def _fit_ranked(m: ChannelModel, tr_p: list[np.ndarray], va_p: list[np.ndarray], size: int,
                min_gain: float, sub: dict
                ) -> tuple[tuple[ChannelModel, ChannelModel] | None, dict | None]:
    """The ranked stage of ``m`` (:attr:`ChannelModel.ranked`; None where it saves less than
    ``min_gain`` bits/sample on the validation packets ``va_p``, coded in mode 3 or 9, the
    smaller, against mode 3 alone) and its stage line (None where the training packets' values
    are dense: the median gap between a packet's distinct values below 2). Its models are
    fitted by :func:`fit_channel_model` on the training packets' distinct values (differences,
    one packet each) and ranks (in packets of ``size``)."""
    parts = [p for p in tr_p if p.size]
    if not parts or not va_p:
        return None, None
    x = np.concatenate(parts)
    heads, hoff, ranks = _distinct_ranks_batch(x, _starts(p.size for p in parts))
    counts = np.diff(hoff)
    gaps = np.delete(heads, hoff[:-1][counts > 0])  # (the differences but each packet's first)
    if not gaps.size or np.median(gaps) < 2:  # dense values: the ranks are about the values
        return None, None
    n_val = max(1, sum(p.size for p in va_p))
    plain = sum(map(len, encode_packets(va_p, m, level=0)))
    entry: dict[str, Any] = {"stage": "distinct values and ranks", "kept": "off",
                             "bits": 8 * plain / n_val, "min_gain": min_gain}
    hs, he = hoff[:-1].tolist(), hoff[1:].tolist()
    ends = np.cumsum([p.size for p in parts]).tolist()
    values = fit_channel_model([heads[a:b] for a, b in zip(hs, he) if b > a], _sub=True,
                               packet_size=int(counts.max()), vocab_sizes=(), **sub)
    ranks_m = fit_channel_model([ranks[a:b] for a, b in zip([0] + ends, ends)], _sub=True,
                                packet_size=size, vocab_sizes=(), **sub)
    trial = ChannelModel.from_config(m.get_config() | {"ranked": {
        "values": values.get_config(), "ranks": ranks_m.get_config()}})
    both = sum(map(len, encode_packets(va_p, trial, level=0)))
    entry.update(alternative="on", bits_alternative=8 * both / n_val)
    if 8 * (plain - both) < min_gain * n_val:
        return None, entry
    entry.update(kept="on", bits=8 * both / n_val, alternative="off",
                 bits_alternative=8 * plain / n_val)
    return trial.ranked, entry


def _predictor_name(m: ChannelModel) -> str:
    return {0: "fixed order", 1: "LPC order", 2: "lag"}[m.kind] + f" {m.order}"


MODEL_MAX_LAG = 1024  # the longest lag (period) of a model's predictor
LAG_CANDIDATES = 2  # lags that fit_channel_model tries, the fewest estimated bits first


def _lag_candidates(packets: list[np.ndarray], max_lag: int) -> list[int]:
    """The ``LAG_CANDIDATES`` lags in ``2..max_lag`` whose residuals ``x[i] - x[i - lag]``
    cost the fewest estimated bits (:func:`signals.predict.residual_cost`) over ``packets``
    joined (the joints cost a few samples)."""
    x = np.concatenate(packets) if packets else np.zeros(0, np.int64)
    lags = range(2, min(max_lag, x.size - 1) + 1)
    cost = [(P.residual_cost(x[lag:] - x[:-lag]) / (x.size - lag), lag) for lag in lags]
    return [lag for _, lag in sorted(cost)[:LAG_CANDIDATES]]


# ---------------------------------------------------------- many packets
@njit(cache=True)
def _tokens_rows_raw(r, mb, k, msb, bl, cmap, nc, tokens, rows, raw):
    """The residuals ``r`` (int64, ``m`` of them) in one pass: zigzagged and split into hybrid
    tokens (into ``tokens[:m]``, int32, as :func:`signals.entropy.hybrid_split`), each token's
    table row (into ``rows[:m]``, int64: the context of :func:`signals.entropy.context_stat`
    over the token bit lengths ``bl``, through ``cmap``, plus ``nc`` times its match bucket
    ``mb``), and the raw bits packed as :func:`signals.entropy.pack_raw_bits` packs them (into
    ``raw``, uint64 words, least significant bit first; ``m + 1`` words hold them: at most 63
    bits a token). Returns the count of words and of raw bits."""
    m = r.shape[0]
    one = np.uint64(1)
    direct = one << np.uint64(k)
    top = np.uint64((1 << msb) - 1)
    b1 = b2 = b3 = np.int64(0)
    acc = np.uint64(0)  # the raw bits not yet in a word: ``used`` of them
    used = w = total = 0
    for i in range(m):
        v = r[i]
        z = np.uint64((v << 1) ^ (v >> 63))
        if z < direct:
            t = np.int64(z)
        else:
            e = E._bitlen(z) - 1
            nb = e - msb
            t = (1 << k) + ((e - k) << msb) + np.int64((z >> np.uint64(nb)) & top)
            low = z & ((one << np.uint64(nb)) - one)
            acc |= low << np.uint64(used)
            if used + nb >= 64:  # (used >= 1 here: nb <= 63)
                raw[w] = acc
                w += 1
                acc = low >> np.uint64(64 - used)
                used += nb - 64
            else:
                used += nb
            total += nb
        tokens[i] = t
        rows[i] = cmap[2 * b1 + b2 + b3] + nc * np.int64(mb[i])
        b3 = b2
        b2 = b1
        b1 = bl[t]
    if used:
        raw[w] = acc
        w += 1
    return w, total


@njit(cache=True)
def _encode_model_batch(x, offsets, bounds, kinds, orders, shifts, coefs, mh, t, tbits, k, msb, bl,
                        cmap, nc, freqs, cum, lms, costs):
    """Mode-3 payloads of every packet ``x[offsets[j]:offsets[j+1]]``, concatenated (mode 1
    for a constant packet, mode 0 where the model codes it above 64 bits a sample).

    ``bounds`` (int64, one per packet, or empty for none): a packet whose payload could not be
    shorter than its bound gets an empty one, its rANS coding skipped, where its tokens' code
    lengths (``costs``: int64, the shape of ``freqs``, each table entry's
    ``SCALE_BITS - log2 f`` times 2**16, rounded down) already say so: the payload holds 16
    bits of mode and word count, the raw bits, and rANS words at least 16 bits above the code
    lengths, which they undercut by under 0.0931 bits a token (see :func:`_own_tables_batch`);
    or, where shorter, the raw fallback of ``1 + 8 m`` bytes.
    """
    n_p = offsets.shape[0] - 1
    buf = np.empty(9 * x.shape[0] + 16 * n_p + 16, np.uint8)
    out_off = np.zeros(n_p + 1, np.int64)
    most = 1  # scratch for the longest packet, shared by all
    for j in range(n_p):
        most = max(most, offsets[j + 1] - offsets[j])
    tokens = np.empty(most, np.int32)
    rows = np.empty(most, np.int64)
    raw = np.empty(most + 1, np.uint64)
    words = np.empty(most + 2, np.uint16)
    pos = 0
    for j in range(n_p):
        seg = x[offsets[j]:offsets[j + 1]]
        m = seg.shape[0]
        same = m > 0
        for i in range(1, m):
            if seg[i] != seg[0]:
                same = False
                break
        u = (np.uint64(seg[0]) << np.uint64(1)) ^ np.uint64(seg[0] >> 63) if same else np.uint64(0)
        nb = 1
        while same and (u >> np.uint64(7 * nb)) > np.uint64(0) and nb < 10:
            nb += 1
        if same and nb < 8 * m and m <= CONST_MAX:  # a constant: mode 1, a zigzag varint
            buf[pos] = CONST
            pos += 1
            while u >= np.uint64(0x80):
                buf[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
                pos += 1
                u >>= np.uint64(7)
            buf[pos] = np.uint8(u)
            pos += 1
            out_off[j + 1] = pos
            continue
        r, mb = P.predict_fused(seg, max(m, 1), kinds, orders, shifts, coefs, mh, t, tbits)
        if lms:
            r = P.cascade_forward(r, lms)
        _, total = _tokens_rows_raw(r, mb, k, msb, bl, cmap, nc, tokens, rows, raw)
        if bounds.shape[0]:
            ideal = 0
            for i in range(m):
                ideal += costs[rows[i], tokens[i]]
            if min((ideal >> 16) + total + 32 - 0.0932 * m, 8 + 64 * m) >= 8 * bounds[j]:
                out_off[j + 1] = pos
                continue
        nw = E.rans_encode_rows_into(tokens[:r.shape[0]], rows, freqs, cum, words)
        vl = 1
        while nw >> (7 * vl) and vl < 10:
            vl += 1
        size = 1 + vl + 2 * nw + (total + 7) // 8  # as encode_channel measures it
        if size >= 1 + 8 * m:  # raw fallback
            buf[pos] = RAW
            pos += 1
            for i in range(m):
                v = seg[i]
                for b in range(8):
                    buf[pos] = np.uint8((v >> (8 * b)) & 0xFF)
                    pos += 1
        else:
            buf[pos] = MODEL
            pos = _put_varint(buf, pos + 1, nw)
            for i in range(nw - 1, -1, -1):  # (in decode order)
                buf[pos] = np.uint8(words[i] & 0xFF)
                buf[pos + 1] = np.uint8(words[i] >> 8)
                pos += 2
            for i in range((total + 7) // 8):
                buf[pos] = np.uint8((raw[i >> 3] >> np.uint64(8 * (i & 7))) & np.uint64(0xFF))
                pos += 1
        out_off[j + 1] = pos
    return buf[:pos], out_off


@njit(cache=True)
def _decode_model_batch(buf, offsets, ns, kinds, orders, shifts, coefs, mh, t, tbits, cmap, nc,
                        dtab, lms, min_bits):
    """Inverse of :func:`_encode_model_batch`: ``(x, out_off, status, n_bad)``; status per
    packet: 0 ok, 1 another mode (for the general reader), 2 damaged, 3 more samples than its
    bytes can hold; ``n_bad`` the packets of another status, or -1 (nothing decoded) where a
    sample count is negative. Only packets of status 0
    (and those found damaged while decoding) have room in ``x``: the counts are checked against
    the bytes before allocating, a model payload's with ``min_bits`` (the fewest bits a token
    of the model's tables costs); a constant above ``(16 size + 64) / MIN_TOKEN_BITS + 1``
    samples is refused here (the batch encoders code none)."""
    out_off, status, neg = _k_batch_room(buf, offsets, ns, min_bits, False)
    if neg:
        return np.zeros(0, np.int64), out_off, status, -1
    x = np.zeros(out_off[-1], np.int64)
    crow = cmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
    table = np.empty(1 << tbits if mh else 0, np.int64)
    for j in range(ns.shape[0]):
        if status[j] == 0:
            status[j] = _k_model_payload(buf, offsets[j], offsets[j + 1], x[out_off[j]:out_off[j + 1]],
                                         kinds, orders, shifts, coefs, mh, t, tbits, cmap, nc,
                                         dtab, lms, min_bits, crow, table)
    n_bad = 0
    for j in range(ns.shape[0]):
        n_bad += status[j] != 0
    return x, out_off, status, n_bad


@njit(cache=True)
def _decode_ranked_model_batch(buf, offsets, ns, kinds, orders, shifts, coefs, mh, t, cmap, nc,
                               dtab, lms, min_bits, vk, vo, vs, vc, vmh, vt, vcmap, vnc, vdtab,
                               vlms, vmin, rk, ro, rs, rc, rmh, rt, rcmap, rnc, rdtab, rlms, rmin):
    """:func:`_decode_model_batch` for a model with a ranked stage (its mode-9 payloads too, in
    the same pass): the model's parameters, then those of the stage's values model (``v...``)
    and ranks model (``r...``); a mode-9 packet that :func:`_k_ranked_payload` does not decode
    keeps its room and takes status 1 (the general reader decides)."""
    out_off, status, neg = _k_batch_room(buf, offsets, ns, min_bits, True)
    if neg:
        return np.zeros(0, np.int64), out_off, status, -1
    x = np.zeros(out_off[-1], np.int64)
    crow = cmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
    vcrow = vcmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
    rcrow = rcmap.astype(np.uint64) << np.uint64(E.SCALE_BITS)
    table = np.empty(1 << MODEL_TBITS if mh or vmh or rmh else 0, np.int64)
    plain = vmh == 0 and rmh == 0 and vlms == 0 and rlms == 0  # (parts pair up: _k_ranked_pair)
    n_p = ns.shape[0]
    paired = np.zeros(n_p, np.bool_)
    if plain:
        j = 0
        while j + 1 < n_p:
            a, e, f = offsets[j], offsets[j + 1], offsets[j + 2]
            if status[j] == 0 and status[j + 1] == 0 and buf[a] == MODEL_RANKED and \
                    buf[e] == MODEL_RANKED:
                done, s1, s2 = _k_ranked_pair(
                    buf, a, e, x[out_off[j]:out_off[j + 1]], f, x[out_off[j + 1]:out_off[j + 2]],
                    vk, vo, vs, vc, vmin, vcrow, vdtab, rk, ro, rs, rc, rmin, rcrow, rdtab)
                if done:
                    status[j], status[j + 1] = s1, s2
                    paired[j] = paired[j + 1] = True
                    j += 2
                    continue
            j += 1
    for j in range(n_p):
        if status[j] != 0 or paired[j]:
            continue
        a, e = offsets[j], offsets[j + 1]
        seg = x[out_off[j]:out_off[j + 1]]
        if buf[a] == MODEL_RANKED:
            status[j] = _k_ranked_payload(buf, a, e, seg, vk, vo, vs, vc, vmh, vt, vcmap, vnc,
                                          vdtab, vlms, vmin, vcrow, rk, ro, rs, rc, rmh, rt, rcmap,
                                          rnc, rdtab, rlms, rmin, rcrow, table)
        else:
            status[j] = _k_model_payload(buf, a, e, seg, kinds, orders, shifts, coefs, mh, t,
                                         MODEL_TBITS, cmap, nc, dtab, lms, min_bits, crow, table)
    n_bad = 0
    for j in range(ns.shape[0]):
        n_bad += status[j] != 0
    return x, out_off, status, n_bad


@njit(cache=True, inline="always")
def _k_batch_room(buf, offsets, ns, min_bits, ranked):
    """The first pass of :func:`_decode_model_batch`: where each packet's samples go
    (``out_off``), its status (0: to decode, with room; 1: for the general reader; 2: damaged;
    3: more samples than its bytes can hold), and whether a count is negative; ``ranked``: mode
    9 is decoded here too (a model with a ranked stage)."""
    n_p = ns.shape[0]
    out_off = np.zeros(n_p + 1, np.int64)
    status = np.zeros(n_p, np.int64)
    for j in range(n_p):
        if ns[j] < 0:
            return out_off, status, True
    for j in range(n_p):
        status[j] = _k_room_status(buf, offsets[j], offsets[j + 1], ns[j], min_bits, ranked)
        out_off[j + 1] = out_off[j] + (ns[j] if status[j] == 0 else 0)
    return out_off, status, False


@njit(cache=True, inline="always")
def _k_room_status(buf, a, e, n, min_bits, ranked):
    """The first-pass status of the payload ``buf[a:e]`` of ``n`` samples in a batch (see
    :func:`_k_batch_room`): 0 a raw payload of ``8 n`` bytes, a model payload whose bytes can
    hold ``n`` tokens, a constant (or, where ``ranked``, a mode-9 payload), to decode with room;
    1 another mode, for the general reader; 2 damaged; 3 more samples than its bytes hold."""
    size = e - a
    if size < 1:
        return 2
    mode = buf[a]
    if mode == RAW:  # (8 n would wrap from 2**60)
        return 0 if (size - 1) % 8 == 0 and (size - 1) // 8 == n else 2
    if mode == MODEL:  # 16 bits a word, at most (size - 1) / 2 words
        return 3 if n * min_bits > 8 * size + 64 else 0
    if n > (16 * size + 64) / E.MIN_TOKEN_BITS + 1:
        return 3
    return 0 if mode == CONST or (ranked and mode == MODEL_RANKED) else 1


@njit(cache=True, inline="always")
def _k_model_payload(buf, a, e, x, kinds, orders, shifts, coefs, mh, t, tbits, cmap, nc, dtab, lms,
                     min_bits, crow, table):
    """Decode the payload ``buf[a:e]`` (mode 0, 1 or 3; its mode byte and sizes checked as
    :func:`_decode_model_batch` checks them) into ``x`` (its ``n`` samples); the status: 0
    decoded, 1 for the general reader (a constant it refuses: it names the fault), 2 damaged.
    ``table``: the match model's hash table (int64, ``2**tbits`` entries), shared by the
    packets of a batch."""
    n = x.shape[0]
    mode = buf[a]
    if mode == RAW:
        for i in range(n):
            v = np.int64(0)
            for b in range(8):
                v |= np.int64(buf[a + 1 + 8 * i + b]) << (8 * b)
            x[i] = v
        return 0
    if mode == CONST:  # as _decode reads it: a zigzag varint below 2**64, nothing after
        u = np.uint64(0)
        sh = 0
        pos = a + 1
        ok = False
        while pos < e and sh <= 63:
            byte = np.uint64(buf[pos])
            pos += 1
            if sh == 63 and byte > np.uint64(1):
                break  # 2**64 or more
            u |= (byte & np.uint64(0x7F)) << np.uint64(sh)
            sh += 7
            if byte < np.uint64(0x80):
                ok = pos == e
                break
        if not ok or n < 1:
            return 1  # the general reader names what is wrong (room is kept)
        v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
        for i in range(n):
            x[i] = v
        return 0
    ok, words, raw, nraw = _k_model_stream(buf, a, e, n, min_bits)
    if not ok:
        return 2
    if mh == 0 and lms == 0:  # one pass, into its place in x
        _, ok = _decode_blocks(x, None, words, raw, 8 * nraw, crow, dtab, 0, max(n, 1), kinds,
                               orders, shifts, coefs)
    elif mh == 0 and lms == 4:  # the same, through the sign-data LMS (variant 4)
        _, ok = _decode_blocks_sd(x, words, raw, 8 * nraw, crow, dtab, 0, max(n, 1), kinds, orders,
                                  shifts, coefs)
    elif mh == 0:  # an NLMS cascade: _decode_plain's three passes
        seg, ok = _decode_plain(words, raw, 8 * nraw, n, cmap, dtab, max(n, 1), kinds, orders,
                                shifts, coefs, lms, 0)
        x[:] = seg
    else:
        ok = _fused_into(x, table, words, raw, 8 * nraw, cmap, nc, dtab, max(n, 1), kinds, orders,
                         shifts, coefs, mh, t, tbits, lms, 0)
    return 0 if ok else 2


@njit(cache=True, inline="always")
def _k_ranked_payload(buf, a, e, x, vk, vo, vs, vc, vmh, vt, vcmap, vnc, vdtab, vlms, vmin, vcrow,
                      rk, ro, rs, rc, rmh, rt, rcmap, rnc, rdtab, rlms, rmin, rcrow, table):
    """Decode the mode-9 payload ``buf[a:e]`` into ``x`` (its ``n`` samples): its two parts
    as :func:`_k_model_payload` decodes a payload, with the ranked stage's values model
    (``v...``: block parameters, match model, context map and count, decode table, cascade, the
    fewest bits a token costs, context rows) and ranks model (``r...``), and the match models'
    hash table (``2**MODEL_TBITS`` entries). The status: 0
    decoded; 1 where the layout, a part (each of mode 0, 1 or 3, as coded), the values or a rank
    would make :func:`_decode` refuse it, or where it might decode it otherwise (another mode
    inside): the general reader then decides and names the fault."""
    n = x.shape[0]
    good, m, pos, h = _k_ranked_head(buf, a, e, n, vmin, rmin)
    if not good:
        return 1
    d = np.empty(m, np.int64)
    if vmh == 0 and rmh == 0 and vlms == 0 and rlms == 0 and buf[pos] == MODEL and buf[h] == MODEL:
        # the commonest: both parts' token streams decoded in one loop (two independent
        # dependency chains, which the CPU overlaps), then each part's block predictor
        okv, wv, rv, nv = _k_model_stream(buf, pos, h, m, vmin)
        okr, wr, rr, nr = _k_model_stream(buf, h, e, n, rmin)
        if not (okv and okr):
            return 1
        resv, resr, ok = _two_streams(wv, rv, 8 * nv, vcrow, vdtab, m, wr, rr, 8 * nr, rcrow, rdtab, n)
        if not ok:
            return 1
        _decode_blocks(d, resv, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(m, 1), vk, vo, vs,
                       vc)
        _decode_blocks(x, resr, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(n, 1), rk, ro, rs,
                       rc)
    else:
        if _k_model_payload(buf, pos, h, d, vk, vo, vs, vc, vmh, vt, MODEL_TBITS, vcmap, vnc, vdtab,
                            vlms, vmin, vcrow, table) != 0:
            return 1
        if _k_model_payload(buf, h, e, x, rk, ro, rs, rc, rmh, rt, MODEL_TBITS, rcmap, rnc, rdtab,
                            rlms, rmin, rcrow, table) != 0:
            return 1
    return _k_ranked_values(x, d)


@njit(cache=True, inline="always")
def _k_ranked_head(buf, a, e, n, vmin, rmin):
    """The layout of the mode-9 payload ``buf[a:e]`` of ``n`` samples: ``(ok, m, pos, h)``, its
    ``m`` distinct values' part at ``buf[pos:h]`` and its ranks' part at ``buf[h:e]``; not ok
    where :func:`_k_ranked_payload` gives it status 1 (a count, a length or a part's room)."""
    m, pos, good = _k_varint(buf, a + 1, e, n)
    if not good or m < 2:
        return False, m, pos, pos
    ln, pos, good = _k_varint(buf, pos, e, e - pos)
    if not good or pos + ln >= e:
        return False, m, pos, pos
    h = pos + ln
    if _k_room_status(buf, pos, h, m, vmin, False) or _k_room_status(buf, h, e, n, rmin, False):
        return False, m, pos, h
    return True, m, pos, h


@njit(cache=True, inline="always")
def _k_ranked_values(x, d):
    """The samples of a mode-9 payload from its ranks (in ``x``) and its distinct values'
    differences ``d`` (both in place): the status, 1 where the values do not increase or a
    rank is out of range."""
    m = d.shape[0]
    acc = np.int64(0)
    for q in range(m):
        acc += d[q]  # (wraps as numpy's cumsum does)
        if q and acc <= d[q - 1]:
            return 1
        d[q] = acc  # the values, in place of their differences
    for q in range(x.shape[0]):
        v = x[q]
        if v < 0 or v >= m:
            return 1
        x[q] = d[v]
    return 0


@njit(cache=True, inline="always")
def _k_ranked_pair(buf, a, e, x1, f, x2, vk, vo, vs, vc, vmin, vcrow, vdtab, rk, ro, rs, rc, rmin,
                   rcrow, rdtab):
    """Two consecutive mode-9 payloads ``buf[a:e]`` and ``buf[e:f]`` (the stage's models with
    no match model and no cascade) decoded together: the two packets' ranks streams in one
    loop, then their values streams in another (:func:`_two_streams`: two dependency chains
    the CPU overlaps; one packet's values and ranks overlap only over its fewer distinct
    values). ``(done, status1, status2)``; not done (nothing to trust in ``x1``, ``x2``) where
    either payload is not of the common layout or either stream fails: each is then decoded
    alone (:func:`_k_ranked_payload`), which names its status. (Daphnet, packets of 256: the
    batch decoder 21.3 -> 17.2 ns a sample in a first measurement.)"""
    n1 = x1.shape[0]
    n2 = x2.shape[0]
    g1, m1, p1, h1 = _k_ranked_head(buf, a, e, n1, vmin, rmin)
    g2, m2, p2, h2 = _k_ranked_head(buf, e, f, n2, vmin, rmin)
    if not (g1 and g2 and buf[p1] == MODEL and buf[h1] == MODEL and buf[p2] == MODEL
            and buf[h2] == MODEL):
        return False, 1, 1
    okv1, wv1, rv1, nv1 = _k_model_stream(buf, p1, h1, m1, vmin)
    okr1, wr1, rr1, nr1 = _k_model_stream(buf, h1, e, n1, rmin)
    okv2, wv2, rv2, nv2 = _k_model_stream(buf, p2, h2, m2, vmin)
    okr2, wr2, rr2, nr2 = _k_model_stream(buf, h2, f, n2, rmin)
    if not (okv1 and okr1 and okv2 and okr2):
        return False, 1, 1
    res1, res2, ok = _two_streams(wr1, rr1, 8 * nr1, rcrow, rdtab, n1, wr2, rr2, 8 * nr2, rcrow,
                                  rdtab, n2)
    if not ok:
        return False, 1, 1
    d1, d2, ok = _two_streams(wv1, rv1, 8 * nv1, vcrow, vdtab, m1, wv2, rv2, 8 * nv2, vcrow,
                              vdtab, m2)
    if not ok:
        return False, 1, 1
    _decode_blocks(x1, res1, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(n1, 1), rk, ro, rs,
                   rc)
    _decode_blocks(x2, res2, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(n2, 1), rk, ro, rs,
                   rc)
    v1 = np.empty(m1, np.int64)
    v2 = np.empty(m2, np.int64)
    _decode_blocks(v1, d1, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(m1, 1), vk, vo, vs, vc)
    _decode_blocks(v2, d2, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0, max(m2, 1), vk, vo, vs, vc)
    return True, _k_ranked_values(x1, v1), _k_ranked_values(x2, v2)


@njit(cache=True, inline="always")
def _k_model_stream(buf, a, e, n, min_bits):
    """The rANS words and raw bits of the model payload (mode 3) ``buf[a:e]`` of ``n`` samples:
    ``(ok, words, raw, raw byte count)`` as :func:`_k_words_raw` gives them; not ok (the payload
    is damaged) where its word count's varint does not end in the payload, or its words would
    pass its end, or they cannot hold ``n`` tokens of at least ``min_bits`` bits."""
    pos = a + 1
    nw = 0
    shift = 0
    while True:
        if pos >= e or shift > 56:
            return False, _NO_WORDS[:0], _NO_RAW, 0
        b = buf[pos]
        pos += 1
        nw |= int(b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    if nw > (e - pos) // 2 or n * min_bits > 16 * nw + 64:  # (2 * nw would wrap from 2**62)
        return False, _NO_WORDS[:0], _NO_RAW, 0
    words, raw, nraw = _k_words_raw(buf, pos, nw, e)
    return True, words, raw, nraw


@njit(cache=True)
def _two_streams(wa, ra, total_a, crow_a, dtab_a, na, wb, rb, total_b, crow_b, dtab_b, nb):
    """The residuals of two independent rANS token streams (match model off, context kind 0),
    ``na`` of the first and ``nb`` of the second, decoded in one loop: the same integers as
    :func:`_decode_residuals` of each, in about the time of the longer one (a token's
    decode waits on the previous token's table entry; the two chains overlap in the CPU).
    Returns ``(res_a, res_b, ok)``: ok where both streams are consistent and used up
    exactly (every read stays in bounds either way)."""
    res_a = np.empty(na, np.int64)
    res_b = np.empty(nb, np.int64)
    nwa = wa.shape[0]
    nwb = wb.shape[0]
    if nwa < 2 or nwb < 2:
        return res_a, res_b, False
    sa = (np.uint64(wa[0]) << np.uint64(16)) | np.uint64(wa[1])
    sb = (np.uint64(wb[0]) << np.uint64(16)) | np.uint64(wb[1])
    tba = np.uint64(total_a)
    tbb = np.uint64(total_b)
    wpa = wpb = 2
    bpa = bpb = np.uint64(0)
    a1 = a2 = a3 = b1 = b2 = b3 = np.int64(0)
    acc_a = acc_b = 0
    fa = fb = _NO_FMIN
    both = min(na, nb)
    for i in range(both):
        res_a[i], sa, wpa, bpa, a1, a2, a3, acc_a, fa = _rans_residual(
            wa, ra, tba, dtab_a, crow_a, 0, sa, wpa, bpa, a1, a2, a3, acc_a, fa)
        res_b[i], sb, wpb, bpb, b1, b2, b3, acc_b, fb = _rans_residual(
            wb, rb, tbb, dtab_b, crow_b, 0, sb, wpb, bpb, b1, b2, b3, acc_b, fb)
    for i in range(both, na):
        res_a[i], sa, wpa, bpa, a1, a2, a3, acc_a, fa = _rans_residual(
            wa, ra, tba, dtab_a, crow_a, 0, sa, wpa, bpa, a1, a2, a3, acc_a, fa)
    for i in range(both, nb):
        res_b[i], sb, wpb, bpb, b1, b2, b3, acc_b, fb = _rans_residual(
            wb, rb, tbb, dtab_b, crow_b, 0, sb, wpb, bpb, b1, b2, b3, acc_b, fb)
    ok = (_stream_ok(fa, wpa, nwa, bpa, tba) and _stream_end(sa, wpa, nwa, bpa, total_a)
          and _stream_ok(fb, wpb, nwb, bpb, tbb) and _stream_end(sb, wpb, nwb, bpb, total_b))
    return res_a, res_b, ok


_MAX_LMS = P.MAX_LMS


@njit(cache=True, inline="always")
def _k_words_raw(buf, pos, nw, end):
    """The ``nw`` little-endian rANS words at ``buf[pos:]`` and the raw bits after them up to
    ``end`` (as uint64 words, two zero words past them): ``(words, raw, raw byte count)``."""
    words = np.empty(nw, np.uint16)
    for i in range(nw):
        words[i] = np.uint16(buf[pos + 2 * i]) | (np.uint16(buf[pos + 2 * i + 1]) << np.uint16(8))
    pos += 2 * nw
    nraw = end - pos
    raw = np.zeros((nraw + 7) // 8 + 2, np.uint64)
    for i in range(nraw):
        raw[i >> 3] |= np.uint64(buf[pos + i]) << np.uint64(8 * (i & 7))
    return words, raw, nraw


@njit(cache=True)
def _k_varint(buf, pos, end, limit):
    """(value, next position, ok) of the varint at ``buf[pos:end]`` as :meth:`_Reader.varint`
    reads it with ``limit``; not ok where that raises, and also (the general reader then
    decides) where a byte past the eighth carries bits."""
    v = 0
    shift = 0
    while True:
        if pos >= end or shift > 49:
            return 0, pos, False
        b = int(buf[pos])
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    return v, pos, v <= limit


@njit(cache=True)
def _k_fused(buf, pos, end, n):
    """:func:`_decode_fused_payload` of the mode-4 payload ``buf[pos:end]`` (past its mode byte)
    in one kernel: (samples, ok), ok False wherever the general reader raises (and it then
    names the fault)."""
    bad = np.zeros(0, np.int64)
    block, pos, ok = _k_varint(buf, pos, end, P.MAX_BLOCK)
    if not ok or block < 1:
        return bad, False
    n_blocks = -(-n // block)
    sl, pos, ok = _k_varint(buf, pos, end, end - pos)
    if not ok or sl > end - pos or n_blocks > sl // 2 + 1:
        return bad, False
    kinds, orders, shifts, coefs, ok = P.parse_block_side(buf[pos:pos + sl], n_blocks)
    pos += sl
    if not ok or end - pos < 6:
        return bad, False
    mh = np.int64(buf[pos])
    t = int(buf[pos + 1])
    tbits = int(buf[pos + 2])
    lms = int(buf[pos + 3])
    hk = int(buf[pos + 4])
    nc = int(buf[pos + 5])
    pos += 6
    if mh > 32 or tbits < 1 or tbits > MAX_TBITS or lms > _MAX_LMS or (lms != 0 and mh != 0):
        return bad, False
    k = hk >> 4
    msb = hk & 15
    if k > E.MAX_K or msb > min(k, E.MAX_MSB) or nc < 1 or nc > E.MAX_CONTEXTS \
            or nc - 1 > end - pos:
        return bad, False
    th = np.empty(nc - 1, np.int64)
    for i in range(nc - 1):
        th[i] = buf[pos + i]
        if (i == 0 and th[i] < 1) or (i > 0 and th[i] <= th[i - 1]):
            return bad, False
    pos += nc - 1
    if end - pos < 2:
        return bad, False
    n_mb = int(buf[pos])
    ctxk = int(buf[pos + 1])
    pos += 2
    if n_mb != (1 if mh == 0 else P.MATCH_BUCKETS) or ctxk > MAX_EMA_SHIFT:
        return bad, False
    width, pos, ok = _k_varint(buf, pos, end, (1 << k) + (64 - k) * (1 << msb))
    if not ok or width < 1:
        return bad, False
    tl, pos, ok = _k_varint(buf, pos, end, end - pos)
    if not ok or tl > end - pos:
        return bad, False
    q, used, ok = E.read_codes(buf[pos:pos + tl], nc * n_mb, width)
    if not ok or used != tl:
        return bad, False
    pos += tl
    f = E.freqs_from_code_rows(q)
    nw, pos, ok = _k_varint(buf, pos, end, (end - pos) // 2)
    if not ok or 2 * nw > end - pos or n * E.MIN_TOKEN_BITS > 16 * nw + 64:
        return bad, False
    words, raw, nraw = _k_words_raw(buf, pos, nw, end)
    cmap = _context_map(th)
    dtab = E.decode_table(f, k, msb)
    return _decode_fused(words, raw, 8 * nraw, n, cmap, nc, dtab, block, kinds, orders, shifts,
                         coefs, mh, t, tbits, lms, ctxk)


@njit(cache=True)
def _k_plain(buf, a, e, n):
    """(samples, ok) of the payload ``buf[a:e]`` of ``n`` samples where it is of mode 4, or of
    mode 5 over two of mode 4 (as :func:`_decode` reads them); ok False for any other (the
    general reader decodes those) and wherever the general reader raises."""
    bad = np.zeros(0, np.int64)
    if n < 0 or a >= e:
        return bad, False
    if buf[a] == CODED2:
        return _k_fused(buf, a + 1, e, n)
    if buf[a] != RANKED:
        return bad, False
    m, pos, ok = _k_varint(buf, a + 1, e, n)
    if not ok or m < 2:
        return bad, False
    hl, pos, ok = _k_varint(buf, pos, e, e - pos)
    if not ok or hl > e - pos or hl < 1 or buf[pos] != CODED2 or pos + hl >= e \
            or buf[pos + hl] != CODED2:
        return bad, False
    d, ok = _k_fused(buf, pos + 1, pos + hl, m)
    if not ok:
        return bad, False
    u = np.cumsum(d)
    for i in range(1, m):
        if u[i] <= u[i - 1]:
            return bad, False
    idx, ok = _k_fused(buf, pos + hl + 1, e, n)
    if not ok:
        return bad, False
    out = np.empty(n, np.int64)
    for i in range(n):
        r = idx[i]
        if r < 0 or r >= m:
            return bad, False
        out[i] = u[r]
    return out, True


@njit(cache=True)
def _decode_plain_batch(buf, offsets, ns, which):
    """:func:`_k_plain` of the packets ``which`` of a batch: (their samples, one array,
    offsets in it, ok per packet; a packet not ok has no samples there)."""
    segs = []
    ok = np.zeros(which.shape[0], np.bool_)
    for i in range(which.shape[0]):
        j = which[i]
        seg, ok[i] = _k_plain(buf, offsets[j], offsets[j + 1], ns[j])
        segs.append(seg)
    x, off = _joined(segs)
    return x, off, ok


@njit(cache=True, inline="always")
def _joined(segs):
    """The arrays ``segs`` (a list of int64 arrays) as one array, and where each starts."""
    off = np.zeros(len(segs) + 1, np.int64)
    for i in range(len(segs)):
        off[i + 1] = off[i] + segs[i].shape[0]
    x = np.empty(off[-1], np.int64)
    for i in range(len(segs)):
        x[off[i]:off[i + 1]] = segs[i]
    return x, off


@njit(cache=True)
def _with_segments(x, off, status, which, xs, xo, fine):
    """``x`` and ``off`` (as :func:`_decode_model_batch` gives them) with the samples
    ``xs[xo[i]:xo[i + 1]]`` of the packets ``which[i]`` in their places, where ``fine[i]``
    (their ``status`` set to 0): ``(x, off)``."""
    n_p = off.shape[0] - 1
    seg = np.full(n_p, -1, np.int64)
    for i in range(which.shape[0]):
        if fine[i]:
            seg[which[i]] = i
            status[which[i]] = 0
    off2 = np.zeros(n_p + 1, np.int64)
    for j in range(n_p):
        i = seg[j]
        off2[j + 1] = off2[j] + (xo[i + 1] - xo[i] if i >= 0 else off[j + 1] - off[j])
    x2 = np.empty(off2[n_p], np.int64)
    for j in range(n_p):
        i = seg[j]
        if i >= 0:
            x2[off2[j]:off2[j + 1]] = xs[xo[i]:xo[i + 1]]
        else:
            x2[off2[j]:off2[j + 1]] = x[off[j]:off[j + 1]]
    return x2, off2


@njit(cache=True)
def _k_vocab(buf, a, e, n, starts, flat, f, cum, lookup, k, msb, kinds, orders, shifts, coefs,
             lms):
    """(samples, ok) of the mode-8 payload ``buf[a:e]`` of ``n`` samples (as
    :func:`_decode_vocab` reads it; ``starts``, ``flat``: the expansions of the token ids, see
    :meth:`ChannelModel.vocab`): ok False wherever the general reader raises (it then names
    the fault)."""
    bad = np.zeros(0, np.int64)
    if a >= e or buf[a] != MODEL_VOCAB:
        return bad, False
    n_ids, pos, ok = _k_varint(buf, a + 1, e, n)
    if not ok:
        return bad, False
    n_words, pos, ok = _k_varint(buf, pos, e, (e - pos) // 2)
    if not ok or 2 * n_words > e - pos or n_ids * E.MIN_TOKEN_BITS > 16 * n_words + 64 \
            or (n_ids == 0) != (n == 0):
        return bad, False
    words, raw, nraw = _k_words_raw(buf, pos, n_words, e)
    ids, ok = E.rans_decode_ctx(words, n_ids, np.zeros(f.shape[1], np.int64),
                                np.zeros(E.CTX_RANGE, np.int64), f, cum, lookup)
    if not ok:
        return bad, False
    n_tok = starts.shape[0] - 1
    total = 0
    for i in range(n_ids):
        t = ids[i]
        if t < 0 or t >= n_tok:
            return bad, False
        total += starts[t + 1] - starts[t]
    if total != n:
        return bad, False
    tokens = np.empty(n, np.int32)
    j = 0
    for i in range(n_ids):
        for q in range(starts[ids[i]], starts[ids[i] + 1]):
            tokens[j] = flat[q]
            j += 1
    need = 0
    direct = 1 << k
    for i in range(n):
        if tokens[i] >= direct:
            need += k + ((tokens[i] - direct) >> msb) - msb
    if nraw != (need + 7) // 8:
        return bad, False
    z, ok = E.hybrid_merge(tokens, k, msb, raw, need)
    if not ok:
        return bad, False
    r = np.empty(n, np.int64)
    for i in range(n):
        r[i] = np.int64(z[i] >> np.uint64(1)) ^ -np.int64(z[i] & np.uint64(1))
    if lms:
        r = P.cascade_inverse(r, lms)
    return _decode_blocks(np.empty(n, np.int64), r, _NO_WORDS, _NO_RAW, 0, _NO_CROW, _NO_RAW, 0,
                          max(n, 1), kinds, orders, shifts, coefs)


@njit(cache=True)
def _decode_vocab_batch(buf, offsets, ns, which, starts, flat, f, cum, lookup, k, msb, kinds,
                        orders, shifts, coefs, lms):
    """:func:`_k_vocab` of the packets ``which`` of a batch, as :func:`_decode_plain_batch`."""
    segs = []
    ok = np.zeros(which.shape[0], np.bool_)
    for i in range(which.shape[0]):
        j = which[i]
        seg, ok[i] = _k_vocab(buf, offsets[j], offsets[j + 1], ns[j], starts, flat, f, cum,
                              lookup, k, msb, kinds, orders, shifts, coefs, lms)
        segs.append(seg if ok[i] else seg[:0])
    x, off = _joined(segs)
    return x, off, ok


def check_level(level: Any) -> int:
    """``level`` as an int, or ValueError unless it is an integer in ``0..MAX_LEVEL``
    (a float, a string or a bool is refused rather than truncated or looked up)."""
    if isinstance(level, bool) or not isinstance(level, int | np.integer) or not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be an integer in 0..{MAX_LEVEL}, got {level!r}")
    return int(level)


def encode_packets(packets: list[np.ndarray], model: ChannelModel, *, level: int = DEFAULT_LEVEL
                   ) -> list[bytes]:
    """:func:`encode_channel` with a model for many packets at once (one compiled loop).

    Parameters
    ----------
    packets : list of 1-D integer arrays
    model : ChannelModel
    level : int, default 5
        Packets whose model coding is far above the model's typical cost
        (``model.fallback_bits``), and packets of 1024 samples or more where
        the model's ``own_gain`` hint is absent or at least ``OWN_TRY_GAIN``
        (below it, where every ``OWN_PROBE``-th of them, tried first, saved
        ``OWN_TRY_GAIN`` of its bytes), are also coded on their own (at most
        at level 3) where a one-pass estimate of that coding is below the
        model payload; the smaller
        payload is kept (0: never).

    Returns
    -------
    list of bytes
        Payloads, each decodable with ``decode_channel(p, n, model=model)``:
        the same bytes as ``encode_channel(p, level=level, model=model)``, but
        for the long packets of a batch whose probes (above) found their own
        coding smaller: ``encode_channel`` of one packet does not try it under
        such a model. A constant packet (up to ``CONST_MAX`` samples) is coded
        as a constant (mode 1).
    """
    arrs = [np.asarray(p) for p in packets]
    if not arrs:
        return []
    dtypes = {a.dtype for a in arrs}
    if {a.ndim for a in arrs} != {1} or any(d.kind not in "iu" for d in dtypes):
        for a in arrs:
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise ValueError("packets are 1-D integer arrays")
    if len(dtypes) > 1:  # (numpy would take uint64 and int64 together to float64)
        arrs = [a.view(np.int64) if a.dtype == np.uint64 else a.astype(np.int64, copy=False)
                for a in arrs]
    x = np.concatenate(arrs)
    x = x.view(np.int64) if x.dtype == np.uint64 else x.astype(np.int64, copy=False)
    return _encode_batch(x, _starts(map(len, arrs)), model, level)


def _encode_batch(x: np.ndarray, offsets: np.ndarray, model: ChannelModel, level: int) -> list[bytes]:
    """:func:`encode_packets` of the packets ``x[offsets[j]:offsets[j+1]]`` (int64, checked)."""
    level = check_level(level)
    if model.merges is not None:  # token ids: the tokenizer's batch
        out = _vocab_batch(x, offsets, model)
        if model.ranked is not None:  # the distinct values and ranks, where smaller
            out = _ranked_payloads(x, offsets, model, out)
    elif model.ranked is None:
        buf, off = model.batch_kernels()[0](x, offsets, _NO_BOUNDS)
        blob = buf.tobytes()
        ends = off.tolist()
        out = [blob[a:b] for a, b in zip(ends, ends[1:])]
    else:  # the distinct values and ranks first: the model payload where it may be smaller
        encode_ranked = model.batch_kernels()[2]
        assert encode_ranked is not None
        rbuf, roff = encode_ranked(x, offsets)
        rlen = np.diff(roff)  # (the model payload is kept on a tie, as _ranked_payloads keeps it)
        buf, off = model.batch_kernels()[0](x, offsets, np.where(rlen > 0, rlen + 1, _NO_BOUND))
        blob, rblob = buf.tobytes(), rbuf.tobytes()
        ends, rends = off.tolist(), roff.tolist()
        out = [blob[a:b] if a < b and (c == d or b - a <= d - c) else rblob[c:d]
               for a, b, c, d in zip(ends, ends[1:], rends, rends[1:])]
    long_constants = set()  # (as encode_channel codes them, with no own coding tried)
    for j in np.flatnonzero(np.diff(offsets) > CONST_MAX).tolist() if x.size > CONST_MAX else ():
        p = x[offsets[j]:offsets[j + 1]]
        if (p == p[0]).all():
            out[j] = _long_constant(p)
            long_constants.add(j)
    if level > 0:  # the packets that may try their own coding (_try_own's first tests, at once)
        starts = offsets.tolist()
        fb = model.fallback_bits
        costly, long = [], []
        for j, (a, b) in enumerate(zip(starts, starts[1:])):
            if j in long_constants:
                continue
            if b > a and 8 * len(out[j]) > fb * (b - a) + 64:
                costly.append(j)
            elif b - a >= OWN_TRY_SIZE:
                long.append(j)
        if model.own_gain is not None and model.own_gain < OWN_TRY_GAIN and long:
            # the model's validation packets did not gain from it: in a batch of OWN_PROBE long
            # packets or more (costly ones aside), a few probes first (every OWN_PROBE-th), and
            # the other long packets only where they gain
            probes = long[::OWN_PROBE] if len(long) >= OWN_PROBE else []
            wins = saved = spent = 0
            for j in probes:
                own = _own_or(x[starts[j]:starts[j + 1]], out[j], level, model)
                wins += own is not out[j]
                saved += len(out[j]) - len(own)
                spent += len(out[j])
                out[j] = own
            if wins < OWN_PROBE_WINS or saved < OWN_TRY_GAIN * spent:
                long = []
            else:
                done = set(probes)
                long = [j for j in long if j not in done]
        todo = sorted(costly + long)
        # the packets that _own_or codes with the model's predictor and their own tables
        # first, in one kernel call
        first = [j for j in todo if _own_cheap_first(starts[j + 1] - starts[j], level, model)]
        cheap = _own_tables_many(x, offsets, first, model, [len(out[j]) for j in first])
        for j in todo:
            out[j] = _own_or(x[starts[j]:starts[j + 1]], out[j], level, model,
                             cheap.get(j, _UNMADE))
    return out


def _long_constant(x: np.ndarray) -> bytes:
    """A constant ``x`` (int64) of more than ``CONST_MAX`` samples under a model: mode 4 with a
    fixed predictor (every residual 0 but the first; about 130 bytes for 200,000 samples), as
    :func:`encode_channel` and :func:`encode_packets` code it. Mode 1 (a value, no count)
    would not pass the batch decoder's bound on the samples a payload's bytes can hold, and
    the model's tables coded such a constant in about 5 bits a sample."""
    out = _encode_fused(x, PRESETS[DEFAULT_LEVEL])
    return out if len(out) < 1 + 8 * x.size else bytes([RAW]) + x.astype("<i8").tobytes()


def _own_cheap_first(n: int, level: int, model: ChannelModel) -> bool:
    """Whether :func:`_own_or` codes a packet of ``n`` samples with the model's predictor and
    its own tables (:func:`_own_tables`) before any search."""
    return model.kind != 1 and n > 0 and (level >= OWN_SEARCH_LEVEL or (
        model.own_search is False and n >= OWN_TRY_SIZE))


def _starts(sizes) -> np.ndarray:
    """Where each of the consecutive parts of ``sizes`` (an iterable of int) starts, and
    where the last ends: int64, shape ``(len + 1,)`` (cheaper than ``np.cumsum`` of a list
    on the few packets of a call)."""
    return np.fromiter(itertools.accumulate(sizes, initial=0), np.int64)


def decode_packets(payloads: list[bytes], ns: ArrayLike, model: ChannelModel, *, on_error: str = "raise"
                   ) -> list[np.ndarray | None]:
    """:func:`decode_channel` with a model for many packets at once.

    Parameters
    ----------
    payloads : list of bytes
    ns : sequence of int
        Sample count of each packet.
    model : ChannelModel
    on_error : "raise" or "none"
        A damaged packet raises ValueError naming its index, or gives None
        in its place (the other packets still decode).

    Returns
    -------
    list of ndarray of int64 (or None for a damaged packet with ``on_error="none"``)
    """
    x, off, errors = _decode_batch(payloads, ns, model)
    ends = off.tolist()
    if not errors:  # views of one array (distinct memory each)
        return [x[a:b] for a, b in zip(ends, ends[1:])]
    out: list[np.ndarray | None] = []
    for j in range(len(payloads)):
        if j in errors:
            if on_error == "raise":
                raise ValueError(f"packet {j}: {errors[j]}")
            out.append(None)
        else:
            out.append(x[ends[j]:ends[j + 1]])
    return out


def _decode_batch(payloads: list[bytes], ns: ArrayLike, model: ChannelModel
                  ) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """The packets of :func:`decode_packets` as one array ``x`` (packet j is
    ``x[off[j]:off[j+1]]``; a damaged packet has no samples there, or what was decoded
    before its error), ``off``, and
    {index: error} of the damaged."""
    ns_a = np.asarray(ns, np.int64).reshape(-1)
    if ns_a.size != len(payloads):
        raise ValueError(f"{len(payloads)} payloads, {ns_a.size} sample counts")
    return _decode_joined(np.frombuffer(b"".join(payloads), np.uint8), _starts(map(len, payloads)),
                          ns_a, model)


def _decode_joined(buf: np.ndarray, offsets: np.ndarray, ns_a: np.ndarray, model: ChannelModel
                   ) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """:func:`_decode_batch` of the payloads ``buf[offsets[j]:offsets[j+1]]`` (``buf``: uint8,
    read-only, as the compiled kernels take it; ``offsets``, ``ns_a``: int64)."""
    # (the kernel bounds the allocation: a model payload of b bytes holds at most
    # (8 b + 64) / min_bits samples, any other (16 b + 64) / MIN_TOKEN_BITS + 1; the payloads
    # of other modes are given room only once the general reader has decoded them; with a
    # ranked stage, its mode-9 payloads in the same kernel, through the stage's two models)
    x, off, status, n_bad = model.batch_kernels()[1](buf, offsets, ns_a)
    if n_bad < 0:
        raise ValueError("negative sample count")
    errors: dict[int, str] = {}
    late: dict[int, np.ndarray] = {}  # decoded by the general reader, without room in x yet
    if n_bad:
        # modes 4 and 5 (over mode 4) in one kernel, mode 8 in another where the model has a
        # vocabulary stage; their samples take their room (and their status 0) in a third
        other = np.flatnonzero(status == 1)
        if other.size:
            xs, xo, fine = _decode_plain_batch(buf, offsets, ns_a, other)
            x, off = _with_segments(x, off, status, other, xs, xo, fine)
        if model.merges is not None and other.size:
            vocab = other[(status[other] == 1) & (buf[offsets[other]] == MODEL_VOCAB)]
            if vocab.size:
                _, f, cum, lookup, (starts, flat) = model.vocab()
                kinds, orders, shifts, coefs = model.batch_params()[:4]
                xs, xo, fine = _decode_vocab_batch(buf, offsets, ns_a, vocab, starts, flat, f,
                                                   cum, lookup, model.k, model.msb, kinds,
                                                   orders, shifts, coefs, model.lms)
                x, off = _with_segments(x, off, status, vocab, xs, xo, fine)
        for j in np.flatnonzero(status).tolist():  # the general reader (it names the fault)
            n = int(ns_a[j])
            try:
                if status[j] == 3:
                    raise ValueError(f"{n} samples cannot fit in {offsets[j + 1] - offsets[j]} "
                                     f"bytes")
                if status[j] == 2:
                    raise ValueError("damaged payload")
                try:
                    seg = decode_channel(buf[offsets[j]:offsets[j + 1]].tobytes(), n, model=model)
                except MemoryError:
                    raise ValueError(f"{n:,} samples: more than memory holds") from None
                if seg.shape != (n,):
                    raise ValueError(f"{seg.size} samples decoded, {n} declared")
                if off[j + 1] - off[j] == n:
                    x[off[j]:off[j + 1]] = seg
                else:
                    late[j] = seg
            except ValueError as e:
                errors[j] = str(e)
    if late:  # the packets decoded by the general reader take their room now
        ends = off.tolist()
        pieces = [late[j] if j in late else x[a:b]
                  for j, (a, b) in enumerate(zip(ends, ends[1:]))]
        off = _starts(p.size for p in pieces)
        x = np.concatenate(pieces) if pieces else x
    return x, off, errors


# ------------------------------------------------------------------ API
class Plan(NamedTuple):
    """The choices that coded a payload (:func:`payload_plan`), to code similar data with
    (:func:`encode_channel`'s ``plan``): the same mode, match model, cascade and predictor
    kind, without searching for them again. A CSV's later frames take the first frame's,
    column by column.

    Attributes
    ----------
    mode : int
        ``CODED2`` (4) or ``RANKED`` (5).
    bits : float
        Bits per sample of the payload it was taken from.
    mh, t, lms : int
        Mode 4: match model context and threshold (0: off), cascade variant (0: off).
    lpc : bool
        Mode 4: some block took an LPC (else the fixed and lag predictors alone).
    head, body : Plan or None
        Mode 5: the plans of the dictionary's differences and of the ranks.
    """

    mode: int
    bits: float
    mh: int = 0
    t: int = 0
    lms: int = 0
    lpc: bool = True
    head: Plan | None = None
    body: Plan | None = None


PLAN_SLACK, PLAN_SLACK_BITS = 1.25, 0.1  # a planned payload above PLAN_SLACK times its plan's
# bits per sample plus PLAN_SLACK_BITS (and 8 bytes): the search runs after all, and the smaller
# payload is kept (a tighter bound sent a tenth of the TMY3 columns to the search, for a few
# bytes each)


def payload_plan(payload: bytes, n: int) -> Plan | None:
    """The :class:`Plan` of a payload of ``n`` samples coded without a model in mode 4 or 5
    (None for any other mode, or a payload that does not parse)."""
    if n <= 0 or not payload:
        return None
    rd = _Reader(bytes(payload))
    try:
        mode = rd.byte()
        if mode == CODED2:
            _, kinds, _, _, _ = _read_block_side(rd, n)
            mh, t, _, lms = rd.take(4)
            if mh > 32 or lms > P.MAX_LMS or (lms and mh):  # (as the payload's reader)
                return None
            return Plan(CODED2, 8 * len(payload) / n, mh, t, lms, bool((kinds == 1).any()))
        if mode == RANKED:
            m = rd.varint(n)
            head = rd.take(rd.varint(rd.remaining()))
            body = rd.take(rd.remaining())
            return Plan(RANKED, 8 * len(payload) / n, head=payload_plan(head, m),
                        body=payload_plan(body, n))
    except ValueError:
        return None
    return None


def check_plan(plan: Any) -> None:
    """Raise ValueError unless ``plan`` is a :class:`Plan` whose choices a payload may hold
    (as its reader checks them): mode ``CODED2`` with integers ``0 <= mh <= 32``,
    ``0 <= t <= 255`` and ``lms`` 0 or one of ``signals.predict.LMS_VARIANTS`` (the coder
    drops the cascade where ``mh`` is not 0), or mode ``RANKED`` whose ``head`` and ``body``
    are such plans or None."""
    if not isinstance(plan, Plan):
        raise ValueError(f"a plan is a signals.channel.Plan, got {type(plan).__name__}")
    if plan.mode == RANKED:
        for part in (plan.head, plan.body):
            if part is not None:
                check_plan(part)
        return
    if plan.mode != CODED2:
        raise ValueError(f"a plan's mode is {CODED2} or {RANKED}, got {plan.mode!r}")
    fields = (plan.mh, plan.t, plan.lms)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in fields):
        raise ValueError(f"a plan's mh, t and lms are integers, got {fields}")
    if not (0 <= plan.mh <= 32 and 0 <= plan.t <= 255
            and (plan.lms == 0 or plan.lms in P.LMS_VARIANTS)):
        raise ValueError(f"a plan's choices (mh, t, lms) = {fields} are not a payload's")


def encode_channel(x: ArrayLike, *, level: int = DEFAULT_LEVEL, model: ChannelModel | None = None,
                   plan: Plan | None = None) -> bytes:
    """Code one channel of integers into a self-contained payload.

    Parameters
    ----------
    x : array-like of int, shape (n,)
        Any int64 values (the full range, constants, empty). uint64 data
        should be passed as its int64 bit pattern (``x.view(np.int64)``).
    level : int, default 5
        0 (fastest) .. 9 (smallest); see :data:`PRESETS`. Levels 4-6 code
        inputs shorter than 32768 samples with a bounded search (both
        block predictors, every cascade variant, level 6's match models,
        each estimated in one pass): a fixed multiple of a level-5 pass.
    model : ChannelModel, optional
        A trained model: the payload then holds only the coded residuals
        (for short packets); decode it with the same model.
    plan : Plan, optional
        The choices of an earlier payload of similar data (:func:`payload_plan`), used
        in place of the search at levels below 9: about a third of the time of a
        level-5 coding (one 8 MiB TMY3 frame: 0.09 against 0.30 s). Where the result
        codes more than ``PLAN_SLACK`` times the plan's bits per sample (plus
        ``PLAN_SLACK_BITS``), the search runs too and the smaller payload is kept.
        Ignored with ``model``.

    Returns
    -------
    bytes
        The payload; it does not store ``n``.

    Raises
    ------
    ValueError
        If ``x`` is not 1-D integer data, ``level`` is out of range, or ``plan`` names
        choices that no payload may hold (see :func:`check_plan`).
    """
    if plan is not None:
        check_plan(plan)
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"a channel is 1-D, got shape {x.shape}")
    if x.size and x.dtype.kind not in "iu":
        raise ValueError(f"a channel holds integers, got {x.dtype}")
    if x.dtype == np.uint64:
        x = x.view(np.int64)
    x = x.astype(np.int64)
    level = check_level(level)
    if model is not None:
        raw = bytes([RAW]) + x.astype("<i8").tobytes()
        if 0 < x.size and (x == x[0]).all():  # a constant, as encode_packets codes it
            const = _encode_plain(x, 0) if x.size <= CONST_MAX else _long_constant(x)
            return const if len(const) < len(raw) else raw
        z, tokens, nbits, stat, mb = _model_tokens(x, model)
        if model.merges is not None:  # the vocabulary stage, kept where it paid in training
            out = _vocab_payload(z, tokens, nbits, model)
        else:
            cmap, f, cum, _ = model.tables()
            rows = cmap[stat] + (model.thresholds.size + 1) * mb.astype(np.int64)
            words = E.rans_encode_rows(tokens, rows, f, cum)
            rb, total = E.pack_raw_bits(z, nbits)
            out = b"".join([bytes([MODEL]), _varint(words.size), words.astype("<u2").tobytes(),
                            rb.astype("<u8").tobytes()[:(total + 7) // 8]])
        if model.ranked is not None:  # the distinct values and ranks, where smaller
            out = _ranked_payloads(x, np.array([0, x.size], np.int64), model, [out])[0]
        out = _try_own(x, out, model, level)  # the packet's own tables, where smaller
        return out if len(out) < len(raw) else raw
    return _encode_plain(x, level, plan=plan)


_UNSEEN = object()  # (_encode_plain's sparse values: not yet looked for)


def _encode_plain(x: np.ndarray, level: int, inner: bool = False, lpc: tuple | None = None,
                  sparse: Any = _UNSEEN, plan: Plan | None = None) -> bytes:
    """Modes 0, 1, 4 and (unless ``inner``) 5 for int64 ``x``; ``lpc`` the level's block
    predictors of ``x`` and their runs (:func:`_own_estimate`) and ``sparse`` its
    :func:`_sparse_values`, where already found; ``plan``: see :func:`encode_channel`."""
    if x.size == 0:
        return bytes([RAW])
    if x.size == 1 or (x == x[0]).all():
        v = int(x[0])
        return bytes([CONST]) + _varint((v << 1) ^ (v >> 63) if v >= 0 else ((-v) << 1) - 1)
    if plan is not None and level < CM_LEVEL and lpc is None:
        planned = _encode_ranked(x, level, sparse, plan=plan) if plan.mode == RANKED and not inner \
            else _encode_fused(x, PRESETS[level], plan=plan) if plan.mode == CODED2 else None
        bound = (PLAN_SLACK * plan.bits + PLAN_SLACK_BITS) * x.size + 64
        if planned is not None and 8 * len(planned) <= bound:
            return planned if len(planned) < 1 + 8 * x.size else \
                bytes([RAW]) + x.astype("<i8").tobytes()
        if planned is not None:  # (the data changed: search, and keep the smaller)
            out = _encode_plain(x, level, inner, sparse=sparse)
            return out if len(out) <= len(planned) else planned
    if SMALL_LEVEL_FROM <= level < SMALL_LEVEL and x.size < SMALL_INPUT:
        out = _encode_small(x, PRESETS[level])  # a fixed set of candidates, each estimated once
    else:
        out = _encode_fused(x, PRESETS[level], lpc)
    if level >= RANK_LEVEL and not inner:
        ranked = _encode_ranked(x, level, sparse)
        if ranked is not None and len(ranked) < len(out):
            out = ranked
    if level >= CM_LEVEL and not inner:
        for mixed in (_encode_cm(x, level, len(out)), _encode_cm_lpc(x, level, len(out))):
            if mixed is not None and len(mixed) < len(out):
                out = mixed
    return out if len(out) < 1 + 8 * x.size else bytes([RAW]) + x.astype("<i8").tobytes()


@njit(cache=True)
def _span(x):
    """``max(x) - min(x)`` and ``min(x)`` of a non-empty int64 array; the span is -1 where it
    does not fit in int64."""
    lo = x[0]
    hi = x[0]
    for v in x:
        lo = min(lo, v)
        hi = max(hi, v)
    d = hi - lo  # wraps where the span exceeds 2**63 - 1
    return (d if d >= 0 else -1), lo


@njit(cache=True)
def _dense_distinct(x, lo, span):
    """The sorted distinct values of ``x`` (values in ``lo .. lo + span``), by presence flags."""
    seen = np.zeros(span + 1, np.bool_)
    for v in x:
        seen[v - lo] = True
    return np.flatnonzero(seen).astype(np.int64) + lo


def _dense(x: np.ndarray, per_sample: int) -> tuple[int, int] | None:
    """(min, span) of ``x`` where its span is at most ``per_sample`` times its size (plus 1024)."""
    span, lo = _span(x)
    return (int(lo), int(span)) if 0 <= span <= per_sample * x.size + 1024 else None


def _distinct(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` of a non-empty int64 array: by presence flags (bytes) where the span is
    at most 8 times the size, else by a sort (numpy's hash-based ``unique`` is slower)."""
    d = _dense(x, 8)
    if d is not None:
        return _dense_distinct(x, d[0], d[1])
    s = np.sort(x)
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _ranks_heads(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's rank among the sorted distinct values ``u`` of ``x`` (int64, not empty),
    and ``P.differences(u, 1)`` (the first value kept): :func:`_distinct_ranks`, int64 arrays of
    ``x``'s shape and of ``u``'s."""
    heads = np.empty(x.size, np.int64)
    ranks = np.empty(x.size, np.int64)
    return ranks, heads[:_distinct_ranks(x, heads, ranks)]


def _sparse_values(x: np.ndarray) -> np.ndarray | None:
    """The sorted distinct values of ``x`` where they are sparse enough for mode 5, else None."""
    if x.size > 4096:  # a quick look at a subsample (at most about 16k samples) first
        us = _distinct(x[::max(8, x.size >> 14)])
        if us.size < 2:
            return None
        gs = np.diff(us)
        if np.median(gs) < 2 and (us.size > x.size // 64 or gs.mean() < 4):
            return None  # dense already in the subsample (the whole set is denser still)
    u = _distinct(x)
    m = u.size
    if m < 2 or m > x.size // 4:
        return None
    dense = _dense_gaps(u)
    if dense < 0:  # (a span of 2**53 or more: numpy's float statistics of the gaps)
        gaps = np.diff(u)
        dense = int(np.median(gaps) < 2 and gaps.mean() < 4)
    return None if dense else u  # (dense already: ranks would only cost the dictionary)


@njit(cache=True)
def _dense_gaps(u):
    """Whether the gaps of increasing ``u`` (2 values or more) have a median below 2 and a mean
    below 4, as ``np.median(np.diff(u)) < 2 and np.diff(u).mean() < 4`` finds (1 or 0), counted
    on the integers; -1 where the span is 2**53 or more (or does not fit in int64), where those
    float statistics may round otherwise."""
    lo = u[0]
    hi = u[u.shape[0] - 1]
    if lo < 0 and hi > lo + (np.int64(1) << np.int64(53)):
        return -1  # (hi - lo might overflow)
    if hi - lo >= np.int64(1) << np.int64(53):
        return -1
    g = u.shape[0] - 1  # gaps, each at least 1
    ones = 0
    twos = 0
    for i in range(g):
        d = u[i + 1] - u[i]
        if d == 1:
            ones += 1
        elif d == 2:
            twos += 1
    # the median: the middle gap (odd count), or the mean of the two middle ones (even)
    if g % 2:
        low_median = ones > g // 2
    else:
        low_median = ones > g // 2 or (ones == g // 2 and twos > 0)
    return 1 if low_median and hi - lo < 4 * g else 0


def _encode_ranked(x: np.ndarray, level: int, sparse: Any = _UNSEEN,
                   parts: tuple | None = None, plan: Plan | None = None) -> bytes | None:
    """Mode 5, for sparse value sets: the sorted distinct values (their differences, coded as a
    channel) and each sample's index among them (coded as a channel); None where not sparse.
    ``sparse``: :func:`_sparse_values` of ``x``, where already found; ``parts``: the ranks,
    the differences and their analyses (:func:`_own_estimate` at ``level`` and at
    ``min(level, RANK_LEVEL)``), where already made; ``plan``: a mode-5 :class:`Plan`, whose
    parts code the differences and the ranks."""
    u = _sparse_values(x) if sparse is _UNSEEN else sparse
    if u is None:
        return None
    m = u.size
    if parts is None:
        ranks, d, body, head = *_ranks_heads(x), None, None
    else:
        ranks, d, body, head = parts
    head_b = _encode_plain(d, min(level, RANK_LEVEL), inner=True, lpc=head,
                           plan=plan.head if plan else None)
    body_b = _encode_plain(ranks, level, inner=True, lpc=body, plan=plan.body if plan else None)
    return b"".join([bytes([RANKED]), _varint(m), _varint(len(head_b)), head_b, body_b])


def _encode_cm(x: np.ndarray, level: int, limit: int) -> bytes | None:
    """Mode 6: the distinct values (as mode 5 keeps them) and the ranks coded by context
    mixing, at the extrapolation order that codes smallest; None where nothing beats
    ``limit`` bytes or the alphabet is too large."""
    u, ranks = np.unique(x, return_inverse=True)
    m = u.size
    if m < 2 or m > 1 << CM.MAX_NB:
        return None
    head = _encode_plain(P.differences(u, 1), min(level, RANK_LEVEL), inner=True)
    front = b"".join([bytes([CM_MODE]), _varint(m), _varint(len(head)), head])
    best = None
    for order in (0, 1, 2):
        code = CM.cm_encode(ranks.astype(np.int64), u, order, limit - len(front) - 1)
        if code is not None:
            best = front + bytes([order]) + code
            limit = len(best) - 1
    return best


def _encode_cm_lpc(x: np.ndarray, level: int, limit: int) -> bytes | None:
    """Mode 7: the level's block predictor (LPC or fixed, whichever codes smaller), its
    residuals coded by context mixing; None where nothing beats ``limit`` bytes."""
    preset = PRESETS[level]
    block = preset.block_size
    best = None
    for orders in (np.array(preset.lpc_orders, np.int64), np.zeros(0, np.int64)):
        params = P.block_lpc_analyze(x, block, orders, 14, True, preset.max_lag)
        side = P.block_side_bytes(*params)
        front = b"".join([bytes([CM_LPC]), _varint(block), _varint(len(side)), side])
        code = CM.cm_encode_lpc(x, block, params, limit - len(front))
        if code is not None:
            best = front + code
            limit = len(best) - 1
    return best


def _decode_cm_lpc(rd: _Reader, n: int) -> np.ndarray:
    block, kinds, orders, shifts, coefs = _read_block_side(rd, n)
    return CM.cm_decode_lpc(rd.take(rd.remaining()), n, block, (kinds, orders, shifts, coefs))


def _read_dictionary(rd: _Reader, n: int) -> np.ndarray:
    """The distinct values of a mode-5 or mode-6 payload (increasing int64)."""
    m = rd.varint(n)
    if m < 2:
        raise ValueError(f"a dictionary of {m} distinct values")
    head = rd.take(rd.varint(rd.remaining()))
    u = np.cumsum(_decode(head, m, None, inner=True))
    if np.any(u[1:] <= u[:-1]):
        raise ValueError("dictionary: distinct values are not increasing")
    return u


def _decode_cm(rd: _Reader, n: int) -> np.ndarray:
    u = _read_dictionary(rd, n)
    if u.size > 1 << CM.MAX_NB:
        raise ValueError(f"context mixing over {u.size} distinct values")
    order = rd.byte()
    return u[CM.cm_decode(rd.take(rd.remaining()), n, u, order)]


def _decode_ranked(rd: _Reader, n: int) -> np.ndarray:
    u = _read_dictionary(rd, n)
    m = u.size
    idx = _decode(rd.take(rd.remaining()), n, None, inner=True)
    if idx.size and (idx.min() < 0 or idx.max() >= m):
        raise ValueError("ranked payload: an index is out of range")
    return u[idx]


def decode_channel(payload: bytes, n: int, *, model: ChannelModel | None = None) -> np.ndarray:
    """Decode a payload of :func:`encode_channel` back to its ``n`` samples (int64).

    Parameters
    ----------
    payload : bytes
    n : int
        The sample count (kept by the container).
    model : ChannelModel, optional
        Needed for payloads made with a model.

    Returns
    -------
    ndarray of int64, shape (n,)

    Raises
    ------
    ValueError
        If the payload is truncated, inconsistent, made with a model not
        given, or cannot hold ``n`` samples. Sizes are checked against the
        bytes that remain before anything is allocated; but a constant (mode
        1, a value and no count) holds any ``n``, and its ``n`` samples are
        allocated as asked.
    """
    return _decode(payload, n, model)


def _decode(payload: bytes, n: int, model: ChannelModel | None, inner: bool = False) -> np.ndarray:
    payload = bytes(payload)
    n = int(n)
    if n < 0:
        raise ValueError(f"negative sample count {n}")
    rd = _Reader(payload)
    mode = rd.byte()
    if mode == RAW:
        body = rd.take(rd.remaining())
        if len(body) != 8 * n:
            raise ValueError(f"raw payload holds {len(body)} bytes, {8 * n} expected")
        return np.frombuffer(body, "<i8").astype(np.int64)
    if mode == CONST:
        u = rd.varint(1 << 64)
        if rd.remaining() or n < 1 or u >= 1 << 64:
            raise ValueError("malformed constant payload")
        v = (u >> 1) ^ -(u & 1)
        return np.full(n, v, np.int64)
    if mode == MODEL_VOCAB:
        if model is None:
            raise ValueError("this payload was made with a channel model; pass model=")
        return _decode_vocab(rd, n, model)
    if mode == MODEL:
        if model is None:
            raise ValueError("this payload was made with a channel model; pass model=")
        cmap, f, cum, lookup = model.tables()
        kinds, orders, shifts, coefs = model.block_params()
        return _decode_words(rd, n, model.k, model.msb, cmap, model.thresholds.size + 1, f, cum,
                             lookup, max(n, 1), kinds, orders, shifts, coefs, model.mh, model.t,
                             MODEL_TBITS, model.lms)
    if mode == CODED2:
        return _decode_fused_payload(rd, n)
    if mode == MODEL_RANKED:
        if model is None or model.ranked is None:
            raise ValueError("this payload was made with a channel model's ranked stage; pass "
                             "that model=")
        m = rd.varint(n)
        if m < 2:
            raise ValueError(f"a dictionary of {m} distinct values")
        head = rd.take(rd.varint(rd.remaining()))
        values = np.cumsum(_decode(head, m, model.ranked[0]))
        if np.any(values[1:] <= values[:-1]):
            raise ValueError("dictionary: distinct values are not increasing")
        idx = _decode(rd.take(rd.remaining()), n, model.ranked[1])
        if idx.size and (idx.min() < 0 or idx.max() >= m):
            raise ValueError("ranked payload: an index is out of range")
        return values[idx]
    if mode == RANKED:
        if inner:
            raise ValueError("a ranked payload cannot nest another")
        return _decode_ranked(rd, n)
    if mode == CM_MODE:
        if inner:
            raise ValueError("a context-mixing payload cannot nest another")
        return _decode_cm(rd, n)
    if mode == CM_LPC:
        return _decode_cm_lpc(rd, n)
    if mode != CODED:
        raise ValueError(f"unknown payload mode {mode}")
    pred = rd.take(rd.varint(rd.remaining()))
    k, msb, nc, th = _read_hybrid_and_contexts(rd)
    width = rd.varint(E.alphabet_size(k, msb))
    if width < 1:
        raise ValueError("empty token table")
    table = np.frombuffer(rd.take(rd.varint(rd.remaining())), np.uint8)
    q, used, ok = E.read_codes(table, nc, width)
    if not ok or used != table.size:
        raise ValueError("inconsistent token tables")
    f = E.freqs_from_code_rows(q)
    cum, lookup = E.build_tables(f)
    z = _decode_tokens(rd, n, k, msb, E.context_map(th), f, cum, lookup)
    return _unpredict(P.unzigzag(z.view(np.int64)), pred)
