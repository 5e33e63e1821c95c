"""Context mixing over symbols: the strongest (and slowest) entropy stage.

A sequence of ranks ``0..m-1`` (indices into its sorted distinct values) is
coded symbol by symbol. Each symbol's residual ``z`` (the rank itself, or
its zigzagged difference from the previous rank, or from the rank nearest
to the linear extrapolation of the previous two values) is binarised: its
bit length in unary, then its bits below the leading one. Every binary
decision is predicted by adaptive models whose contexts are hashed into one
table, each slot holding a slow (count-based rate) and a fast probability:
order 0; the previous one and two residuals; the previous one to four
values; the bit lengths of the last three residuals. A match model predicts
the symbol that followed the last occurrence of the last five values, with
a confidence learned per match length. The predictions are mixed in the
logistic domain by a single-layer network trained online (a weight set per
decision and match state), refined by an adaptive probability map in the
context of the previous value, and drive a binary arithmetic coder. This is
the design of the PAQ family of context-mixing compressors (M. Mahoney,
"Adaptive weighing of context models for lossless data compression",
Florida Tech. CS-2005-16, 2005; lpaq1, zpaq), applied to symbols instead of
bytes. It wins where values repeat in patterns that a linear predictor does
not see (appliance power, daily cycles of irradiance).

Everything is integer arithmetic (the logistic function is a fixed
33-point interpolation table), so the decoder reproduces the encoder's
probabilities exactly on every machine. Memory: one table of ``2**tbits``
5-byte slots, ``tbits <= MAX_TBITS``, chosen from the symbol count. Speed:
about 0.5-2 M symbols/s either way, so only the strongest level uses it.
"""

from __future__ import annotations

import numpy as np

from ubpe._jit import njit

from . import predict as P

MAX_TBITS = 22
MAX_NB = 16  # at most 2**16 distinct symbols
MIN_DECISION_BITS = 0.99 * -np.log2(4095 / 4096)  # a symbol is at least one decision
N_HASHED = 8  # order 0; residual orders 1, 2; value orders 1, 2, 3, 4; residual magnitudes
N_INPUTS = 2 * N_HASHED + 2  # bias, a slow and a fast probability per hashed context, match
MATCH_INPUT = N_INPUTS - 1
MATCH_STATES = 32
WEIGHT_SHIFT = 13
FAST_RATE = 32768  # the fast probabilities move half way to each bit
LPC_LIMIT = 1 << 62  # zigzagged residuals of the block predictor stay below this
NO_BLOCKS = np.zeros(1, np.int64)
NO_COEFS = np.zeros((1, 1), np.int64)
APM_CONTEXTS = 1 << 12
APM_RATE = 1 << 11
MATCH_MIN = 4  # the value context of the longest order; the match model hashes it and one more
LEARNING_RATE = 2

# 4096 / (1 + exp(-(i - 16) / 2)), i = 0..32, rounded: the logistic function at 33 points,
# interpolated linearly in between (stretch domain: 8 fractional bits, range +-2047)
_SQUASH_POINTS = np.array([1, 2, 4, 6, 10, 17, 27, 45, 74, 120, 194, 311, 488, 747, 1102, 1546,
                           2048, 2550, 2994, 3349, 3608, 3785, 3902, 3976, 4022, 4051, 4069, 4079,
                           4086, 4090, 4092, 4094, 4095], np.int64)


@njit(cache=True, inline="always")
def _squash(d, t):
    if d > 2047:
        return 4095
    if d < -2047:
        return 1
    w = d & 127
    i = (d >> 7) + 16
    return (t[i] * (128 - w) + t[i + 1] * w + 64) >> 7


@njit(cache=True)
def _stretch_table(t):
    """The inverse of :func:`_squash` on 0..4095 (the smallest d whose squash reaches p)."""
    out = np.zeros(4096, np.int64)
    pi = 0
    for x in range(-2047, 2048):
        v = _squash(x, t)
        for j in range(pi, v + 1):
            out[j] = x
        pi = v + 1
    for j in range(pi, 4096):
        out[j] = 2047
    return out


@njit(cache=True)
def _rates():
    r = np.zeros(256, np.int64)
    for k in range(256):
        r[k] = 131072 // (2 * k + 3)  # 1 / (k + 1.5), 16 fractional bits
    return r


@njit(cache=True)
def _hash(a, b):
    h = (a * 0x2F0B4C2D + b + 1) * 0x9E3779B1
    return (h ^ (h >> 29)) & 0xFFFFFFFFFFFF


@njit(cache=True)
def _bitlen(z):
    e = 0
    while z:
        e += 1
        z >>= 1
    return e


@njit(cache=True)
def _predict(sym, i, order, m, u):
    """The rank nearest to the value extrapolated from the previous values (0 for order 0)."""
    if order == 0 or i < order:
        return 0
    if order == 1:
        return sym[i - 1]
    v = 2 * u[sym[i - 1]] - u[sym[i - 2]]
    lo = 0
    hi = m - 1
    if v <= u[0]:
        return 0
    if v >= u[hi]:
        return hi
    while hi - lo > 1:  # u[lo] < v < u[hi]
        mid = (lo + hi) >> 1
        if u[mid] <= v:
            lo = mid
        else:
            hi = mid
    return lo if v - u[lo] <= u[hi] - v else hi


@njit(cache=True, inline="always")
def _zz(r):
    return 2 * r if r >= 0 else -2 * r - 1


@njit(cache=True)
def cm_code(sym, n, m, order, u, tbits, buf, decode, limit, lpc, block, kinds, orders, shifts,
            coefs):
    """Code (``decode=False``) or decode ``n`` symbols in ``0..m-1``.

    Each symbol's residual ``z`` (the symbol itself for ``order`` 0, else the
    zigzagged difference from the order-1 or clamped order-2 extrapolation)
    is binarised as its bit length in unary (``e`` ones, then a zero unless
    ``e`` is the largest possible) and its ``e - 1`` bits below the leading
    one, most significant first. Encoding reads ``sym`` and writes ``buf``;
    it stops and returns ``(-1, True)`` once ``limit`` bytes are written (the
    caller keeps a smaller alternative). Decoding reads ``buf`` and writes
    ``sym``; there ``limit`` is the most binary decisions the code may hold.
    Returns ``(bytes used, ok)``; decoding is not ok when it would read past
    ``buf``, leaves bytes unread, makes more than ``limit`` decisions, or
    decodes a symbol outside ``0..m-1``.

    With ``lpc``, ``sym`` holds the samples themselves (any int64 whose
    residuals stay below 2**62 in magnitude) and the prediction is the block
    predictor of :mod:`signals.predict` (``block``, ``kinds``, ``orders``,
    ``shifts``, ``coefs`` as mode 4 stores them); ``m`` and ``u`` are unused.
    """
    t = _SQUASH_POINTS
    st = _stretch_table(t)
    rate = _rates()
    emax = 63 if lpc else _bitlen(2 * m)
    size = 1 << tbits
    mask = size - 1
    slow = np.full(size, 32768, np.uint16)
    fast = np.full(size, 32768, np.uint16)
    cnt = np.zeros(size, np.uint8)
    mprob = np.full(2 * MATCH_STATES, 32768, np.uint16)
    mcnt = np.zeros(2 * MATCH_STATES, np.uint8)
    n_sets = (2 * emax + 2) * 3
    w = np.full((n_sets, N_INPUTS), (1 << 16) // 4, np.int64)
    hsize = 1 << min(tbits, 20)
    last = np.full(hsize, -1, np.int64)
    apm = np.zeros(APM_CONTEXTS * 33, np.int64)
    for a in range(APM_CONTEXTS):
        for b in range(33):
            apm[a * 33 + b] = _squash((b - 16) * 128, t) * 16
    x1 = 0
    x2 = 0xFFFFFFFF
    x = 0
    pos = 0
    nbuf = buf.shape[0]
    if decode:
        if nbuf < 4:
            return 0, False
        for _ in range(4):
            x = (x << 8) | int(buf[pos])
            pos += 1
    inputs = np.zeros(N_INPUTS, np.int64)
    idx = np.zeros(N_HASHED + 1, np.int64)
    hs = np.zeros(N_HASHED + 1, np.int64)
    ptr = -1
    mlen = 0
    z1 = 0
    z2 = 0
    z3 = 0
    nd = 0
    for i in range(n):
        p1 = sym[i - 1] if i >= 1 else -1
        p2 = sym[i - 2] if i >= 2 else -1
        p3 = sym[i - 3] if i >= 3 else -1
        hs[1] = 0
        hs[2] = _hash(1, z1)
        hs[3] = _hash(_hash(2, z1), z2)
        hs[4] = _hash(3, p1)
        hs[5] = _hash(_hash(4, p1), p2)
        hs[6] = _hash(_hash(_hash(5, p1), p2), p3)
        h6 = hs[6]
        for j in range(4, MATCH_MIN + 1):
            h6 = _hash(h6, sym[i - j] if i >= j else -1)
        hs[7] = h6
        hs[8] = _hash(6, (_bitlen(z1) * 32 + _bitlen(z2)) * 32 + _bitlen(z3))
        if lpc:
            blk = i // block
            pred = P._lpc_predict(sym, i, kinds[blk], orders[blk], shifts[blk], coefs, blk)
        else:
            pred = _predict(sym, i, order, m, u)
        ez = -1  # the residual the match model expects
        if ptr >= 0 and mlen > 0:
            ez = sym[ptr] - pred
            ez = ez if order == 0 and not lpc else _zz(ez)
            if ez >= LPC_LIMIT or ez < 0:
                ez = -1
        ee = _bitlen(ez) if ez >= 0 else -1
        z = 0
        e = 0
        if not decode:
            z = sym[i] - pred
            z = z if order == 0 and not lpc else _zz(z)
            if z < 0 or z >= LPC_LIMIT:
                return -1, False  # the caller checked the residuals: not reached
            e = _bitlen(z)
        # decisions: unary bit length (node 1 + j), then mantissa (node 64 + partial bits)
        j = 0
        k = 0  # mantissa bits known
        part = 1
        unary = True
        while True:
            if unary:
                if j >= emax:
                    e = j
                    unary = False
                    if e <= 1:
                        break
                    continue
                node = 1 + j
                eb = (1 if ee > j else 0) if ez >= 0 else -1
                cls = j
            else:
                if k >= e - 1:
                    break
                node = 64 + (e << 20) + part
                eb = -1
                if ez >= 0 and ee == e and (ez >> (e - 1 - k)) == part:
                    eb = (ez >> (e - 2 - k)) & 1
                cls = emax + 1 + k
            mstate = 0 if ez < 0 else (1 if eb < 0 else 2)
            mctx = 0
            if eb >= 0:
                mctx = 2 * min(mlen, MATCH_STATES - 2) + 2 + eb
            ws = cls * 3 + mstate
            inputs[0] = 256
            for q in range(1, N_HASHED + 1):
                h = (hs[q] + node * 0x5BD1E995) & mask
                idx[q] = h
                inputs[q] = st[slow[h] >> 4]
                inputs[q + N_HASHED] = st[fast[h] >> 4]
            inputs[MATCH_INPUT] = st[mprob[mctx] >> 4]
            dot = 0
            for q in range(N_INPUTS):
                dot += w[ws, q] * inputs[q]
            p0 = _squash(dot >> 16, t)
            # secondary estimation: the mixed probability refined in the context of the
            # previous symbol and the decision (interpolated between 33 buckets)
            sp = st[p0] + 2048
            lo = sp >> 7
            wa = sp & 127
            actx = ((p1 * 0x2F0B4C2D + node * 0x9E3779B1) >> 7) & (APM_CONTEXTS - 1)
            ai = actx * 33 + lo
            pa = (apm[ai] * (128 - wa) + apm[ai + 1] * wa) >> 11
            p = (p0 + 3 * pa) >> 2
            if p < 1:
                p = 1
            if p > 4095:
                p = 4095
            xmid = x1 + ((x2 - x1) >> 12) * p
            if decode:
                nd += 1
                if nd > limit:  # more decisions than the code's bits can hold: inconsistent
                    return pos, False
            if decode:
                y = 1 if x <= xmid else 0
            elif unary:
                y = 1 if e > j else 0
            else:
                y = (z >> (e - 2 - k)) & 1
            if y:
                x2 = xmid
            else:
                x1 = xmid + 1
            while ((x1 ^ x2) & 0xFF000000) == 0:
                if decode:
                    if pos >= nbuf:
                        return pos, False
                    x = ((x << 8) & 0xFFFFFFFF) | int(buf[pos])
                else:
                    if pos >= limit:
                        return -1, True
                    buf[pos] = x2 >> 24
                pos += 1
                x1 = (x1 << 8) & 0xFFFFFFFF
                x2 = ((x2 << 8) & 0xFFFFFFFF) | 255
            aj = ai + (wa >> 6)
            apm[aj] += ((y * 65535 - apm[aj]) * APM_RATE) >> 16
            err = ((y << 12) - p0) * LEARNING_RATE
            for q in range(N_INPUTS):
                w[ws, q] += (inputs[q] * err) >> WEIGHT_SHIFT
            for q in range(1, N_HASHED + 1):
                h = idx[q]
                c = cnt[h]
                slow[h] += ((y * 65535 - slow[h]) * rate[c]) >> 16
                fast[h] += ((y * 65535 - fast[h]) * FAST_RATE) >> 16
                if c < 255:
                    cnt[h] = c + 1
            c = mcnt[mctx]
            mprob[mctx] += ((y * 65535 - mprob[mctx]) * rate[c]) >> 16
            if c < 255:
                mcnt[mctx] = c + 1
            if unary:
                if y:
                    j += 1
                else:
                    e = j
                    unary = False
                    if e <= 1:
                        break
            else:
                part = (part << 1) | y
                k += 1
        if unary or e <= 1:
            zz = e  # 0 or 1: the bit length says it all
        else:
            zz = part
        if decode:
            if order == 0 and not lpc:
                v = zz
            else:
                v = pred + ((zz >> 1) ^ -(zz & 1))
            if not lpc and (v < 0 or v >= m):
                return pos, False
            sym[i] = v
        v = sym[i]
        z3 = z2
        z2 = z1
        z1 = zz
        # the match model: follow the match, or look the context up
        ptr, mlen = P.follow_match(sym, i, ptr, mlen)
        if i + 1 >= MATCH_MIN:
            hm = _hash(hs[7], v) & (hsize - 1)
            if ptr < 0:
                cand = last[hm]
                if cand >= 0:
                    ptr = cand
                    mlen = 1
            last[hm] = i + 1
    if decode:
        return pos, pos == nbuf
    for _ in range(4):  # flush x1: the decoder then ends with x = x1, inside [x1, x2]
        if pos >= limit:
            return -1, True
        buf[pos] = (x1 >> 24) & 255
        x1 = (x1 << 8) & 0xFFFFFFFF
        pos += 1
    return pos, True


def table_bits(n: int, m: int) -> int:
    """The probability table's size (log2) for ``n`` symbols in ``0..m-1``."""
    return int(min(MAX_TBITS, max(12, (n * (2 * m).bit_length()).bit_length() + 1)))


def _max_decisions(code: bytes) -> int:
    """The most binary decisions a code of this length can hold (each costs at least
    ``-log2(4095/4096)`` bits): decoding stops past it, so its time is bounded by the input."""
    return int((8 * len(code) + 64) / MIN_DECISION_BITS) + 1


def cm_encode(sym: np.ndarray, values: np.ndarray, order: int, limit: int) -> bytes | None:
    """Code ranks with context mixing; None once the code exceeds ``limit`` bytes.

    Parameters
    ----------
    sym : ndarray of int64, shape (n,)
        Ranks, each in ``0..m-1``.
    values : ndarray of int64, shape (m,)
        The increasing values the ranks stand for (the extrapolations are
        made on them), ``1 <= m <= 2**MAX_NB``.
    order : {0, 1, 2}
        The extrapolation whose residual is binarised: 0 codes the rank
        itself, 1 its difference from the previous rank, 2 its difference
        from the rank nearest to the linear extrapolation of the previous two
        values.
    limit : int
        Give up (return None) past this many bytes.

    Returns
    -------
    bytes or None
        The arithmetic code.
    """
    sym = np.ascontiguousarray(sym, np.int64)
    u = np.ascontiguousarray(values, np.int64)
    buf = np.zeros(max(limit, 0) + 8, np.uint8)
    used, _ = cm_code(sym, sym.size, u.size, order, u, table_bits(sym.size, u.size), buf, False,
                      max(limit, 0), False, 1, NO_BLOCKS, NO_BLOCKS, NO_BLOCKS, NO_COEFS)
    return None if used < 0 else buf[:used].tobytes()


def cm_decode(code: bytes, n: int, values: np.ndarray, order: int) -> np.ndarray:
    """Inverse of :func:`cm_encode`: ``n`` ranks into ``values`` (int64).

    Raises
    ------
    ValueError
        If the alphabet or ``order`` is out of range, the code cannot hold
        ``n`` symbols (each decision costs at least ``-log2(4095/4096)``
        bits), or it is inconsistent (shorter or longer than the symbols
        need, or a rank outside the alphabet).
    """
    u = np.ascontiguousarray(values, np.int64)
    m = u.size
    if not 1 <= m <= 1 << MAX_NB or order not in (0, 1, 2):
        raise ValueError(f"context mixing over {m} symbols, order {order}")
    if n * MIN_DECISION_BITS > 8 * len(code) + 64:
        raise ValueError(f"{n} symbols cannot fit in {len(code)} bytes of context-mixing code")
    sym = np.zeros(n, np.int64)
    buf = np.frombuffer(code, np.uint8).copy()
    _, ok = cm_code(sym, n, m, order, u, table_bits(n, m), buf, True, _max_decisions(code), False,
                    1, NO_BLOCKS, NO_BLOCKS, NO_BLOCKS, NO_COEFS)
    if not ok:
        raise ValueError("inconsistent context-mixing code")
    return sym


def cm_encode_lpc(x: np.ndarray, block: int, params: tuple, limit: int) -> bytes | None:
    """Code samples with context mixing over the residuals of a block predictor.

    Parameters
    ----------
    x : ndarray of int64, shape (n,)
    block : int
        Samples per predictor block.
    params : tuple of ndarray
        ``(kinds, orders, shifts, coefs)`` per block, as
        :func:`signals.predict.block_lpc_analyze` returns them.
    limit : int
        Give up (return None) past this many bytes.

    Returns
    -------
    bytes or None
        The arithmetic code; None also where a residual reaches 2**61 in
        magnitude (the binarisation's bound).
    """
    x = np.ascontiguousarray(x, np.int64)
    kinds, orders, shifts, coefs = params
    buf = np.zeros(max(limit, 0) + 8, np.uint8)
    used, ok = cm_code(x, x.size, 1, 0, NO_BLOCKS, table_bits(x.size, 1 << MAX_NB), buf, False,
                       max(limit, 0), True, block, kinds, orders, shifts, coefs)
    return None if used < 0 or not ok else buf[:used].tobytes()


def cm_decode_lpc(code: bytes, n: int, block: int, params: tuple) -> np.ndarray:
    """Inverse of :func:`cm_encode_lpc`: ``n`` samples (int64).

    Raises
    ------
    ValueError
        If the code cannot hold ``n`` samples, or is inconsistent.
    """
    if n * MIN_DECISION_BITS > 8 * len(code) + 64:
        raise ValueError(f"{n} samples cannot fit in {len(code)} bytes of context-mixing code")
    kinds, orders, shifts, coefs = params
    x = np.zeros(n, np.int64)
    buf = np.frombuffer(code, np.uint8).copy()
    _, ok = cm_code(x, n, 1, 0, NO_BLOCKS, table_bits(n, 1 << MAX_NB), buf, True,
                    _max_decisions(code), True, block,
                    kinds, orders, shifts, coefs)
    if not ok:
        raise ValueError("inconsistent context-mixing code")
    return x
