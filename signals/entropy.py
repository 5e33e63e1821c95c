"""Entropy coding stage: token ids to rANS words and back.

Static (per channel) categorical models over the ids that occur, coded
with ``constriction``'s stack-based rANS coder (J. Duda, "Asymmetric
numeral systems", arXiv:1311.2540, 2013; R. Bamler, constriction,
https://bamler-lab.github.io/constriction/).
"""

from __future__ import annotations

import constriction
import numpy as np

from ubpe._jit import njit, numba_ref

clz64 = numba_ref("signals._intrinsics", "clz64")


def ans_encode(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rANS-code token ids with their own frequencies; returns (table ids, counts, words)."""
    if ids.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint32)
    table, symbols, counts = np.unique(ids, return_inverse=True, return_counts=True)
    coder = constriction.stream.stack.AnsCoder()
    if table.size > 1:
        model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
        coder.encode_reverse(symbols.astype(np.int32), model)
    return table, counts, coder.get_compressed()


def ans_decode(table: np.ndarray, counts: np.ndarray, words: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`ans_encode`: ``n`` token ids, int64."""
    if n == 0:
        return np.zeros(0, np.int64)
    if table.size == 1:
        return np.full(n, table[0], np.int64)
    model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
    symbols = constriction.stream.stack.AnsCoder(words).decode(model, n)
    return table[symbols]


# ---------------------------------------------------------------------------
# Bounded-alphabet coding of any uint64 value, with context-adaptive rANS.
#
# A value ``z`` (a zigzagged residual, any of the 2**64) becomes a token from a
# bounded alphabet and a few raw bits, the "hybrid integer" split of JPEG XL
# (ISO/IEC 18181-1, "HybridUint"; the same idea as pcodec's bins and FLAC's
# Rice escape): values below ``2**k`` are their own token; a larger value is
# coded as its bit length and its ``msb`` leading bits after the top one (the
# token), then its remaining low bits verbatim. The alphabet has at most
# ``2**k + (64 - k) * 2**msb`` tokens, whatever the value range.
#
# Tokens are rANS-coded with a static frequency table per context (rANS,
# J. Duda, arXiv:1311.2540; the 32-bit state / 16-bit word layout of
# F. Giesen's public-domain ``rans_word``). The context of a token is the
# recent residual magnitude, as in LOCO-I (Weinberger et al., IEEE TIP 2000)
# and MPEG-4 ALS: ``2*b[i-1] + b[i-2] + b[i-3]`` over the bit lengths ``b`` of
# the previous values, cut into ``C`` bins at thresholds chosen by the encoder.
# ---------------------------------------------------------------------------

SCALE_BITS = 12
SCALE = 1 << SCALE_BITS
RANS_L = 1 << 16
MAX_K = 12
MAX_MSB = 4
MAX_CONTEXTS = 32
CTX_RANGE = 4 * 64 + 1  # values of the context statistic 2*b1 + b2 + b3


def min_token_bits(f: int) -> float:
    """The fewest bits one token of frequency at most ``f`` (of ``SCALE``) adds to a
    rANS stream of this coder: a lower bound for checking a declared count
    against the bytes before allocating.

    Encoding a token takes the state ``x = q f + r`` to ``q SCALE + c + r``, with
    ``q >= RANS_L / SCALE`` after renormalisation (J. Duda, "Asymmetric numeral
    systems", arXiv:1311.2540; F. Giesen, "Interleaved entropy coders",
    arXiv:1402.3392). The growth is least for ``c = 0``, ``r = f - 1`` and the
    smallest ``q``, which is a little below ``SCALE / f``: ``-log2(f / SCALE)``
    is not a bound (a long run of the most frequent token costs less).
    """
    q = RANS_L // SCALE
    return float(np.log2((q * SCALE + f - 1) / ((q + 1) * f - 1)))


# smallest cost of one token in bits (the largest frequency is SCALE - 1)
MIN_TOKEN_BITS = min_token_bits(SCALE - 1)


def alphabet_size(k: int, msb: int) -> int:
    """Number of hybrid-integer tokens for parameters ``k``, ``msb`` (all of uint64)."""
    return (1 << k) + (64 - k) * (1 << msb)


@njit(cache=True, inline="always")
def _bitlen(v):
    """The bit length of a uint64 (0 for 0)."""
    return 64 - np.int64(clz64(v))


@njit(cache=True)
def hybrid_split(z, k, msb):
    """Tokens (int32), raw bit counts (uint8) for uint64 values ``z``."""
    n = z.shape[0]
    tokens = np.empty(n, np.int32)
    nbits = np.empty(n, np.uint8)
    direct = np.uint64(1) << np.uint64(k)
    for i in range(n):
        v = z[i]
        if v < direct:
            tokens[i] = np.int32(v)
            nbits[i] = 0
        else:
            e = _bitlen(v) - 1  # position of the top bit, >= k
            nb = e - msb
            m = (v >> np.uint64(nb)) & np.uint64((1 << msb) - 1)
            tokens[i] = np.int32((1 << k) + ((e - k) << msb) + np.int64(m))
            nbits[i] = nb
    return tokens, nbits


@njit(cache=True)
def pack_raw_bits(z, nbits):
    """The low ``nbits[i]`` bits of each ``z[i]``, LSB first, packed into uint64 words."""
    total = 0
    for i in range(z.shape[0]):
        total += nbits[i]
    buf = np.zeros((total + 63) // 64 + 1, np.uint64)
    pos = 0
    for i in range(z.shape[0]):
        nb = int(nbits[i])
        if nb == 0:
            continue
        v = z[i]
        if nb < 64:
            v &= (np.uint64(1) << np.uint64(nb)) - np.uint64(1)
        w = pos >> 6
        o = pos & 63
        buf[w] |= v << np.uint64(o)
        if o + nb > 64:
            buf[w + 1] |= v >> np.uint64(64 - o)
        pos += nb
    return buf[:(total + 63) // 64], total


@njit(cache=True)
def token_raw_bits(k, msb, n_tokens):
    """Raw bits that follow each token (int64 array of length ``n_tokens``)."""
    out = np.zeros(n_tokens, np.int64)
    for t in range(1 << k, n_tokens):
        e = k + ((t - (1 << k)) >> msb)
        out[t] = e - msb
    return out


@njit(cache=True)
def token_bitlen(k, msb, n_tokens):
    """Bit length of the values that each token stands for."""
    out = np.zeros(n_tokens, np.int64)
    for t in range(n_tokens):
        if t < (1 << k):
            out[t] = _bitlen(np.uint64(t))
        else:
            out[t] = k + ((t - (1 << k)) >> msb) + 1
    return out


@njit(cache=True)
def hybrid_merge(tokens, k, msb, raw, total_bits):
    """Inverse of :func:`hybrid_split` and :func:`pack_raw_bits`; returns (z, ok)."""
    n = tokens.shape[0]
    z = np.empty(n, np.uint64)
    pos = 0
    direct = 1 << k
    for i in range(n):
        t = np.int64(tokens[i])
        if t < direct:
            z[i] = np.uint64(t)
            continue
        e = k + ((t - direct) >> msb)
        nb = e - msb
        if e > 63 or pos + nb > total_bits:
            return z, False
        m = np.uint64((t - direct) & ((1 << msb) - 1))
        w = pos >> 6
        o = pos & 63
        v = raw[w] >> np.uint64(o)
        if o + nb > 64:
            v |= raw[w + 1] << np.uint64(64 - o)
        if nb < 64:
            v &= (np.uint64(1) << np.uint64(nb)) - np.uint64(1)
        top = (np.uint64(1) << np.uint64(msb)) | m
        z[i] = (top << np.uint64(nb)) | v
        pos += nb
    return z, pos == total_bits


@njit(cache=True)
def context_stat(tokens, bitlen):
    """Per token, ``2*b[i-1] + b[i-2] + b[i-3]`` over the bit lengths of earlier tokens."""
    n = tokens.shape[0]
    out = np.empty(n, np.int64)
    b1 = 0
    b2 = 0
    b3 = 0
    for i in range(n):
        out[i] = 2 * b1 + b2 + b3
        b3 = b2
        b2 = b1
        b1 = bitlen[tokens[i]]
    return out


def context_map(thresholds: np.ndarray) -> np.ndarray:
    """Context id of each context statistic value (0..CTX_RANGE-1) for bin thresholds."""
    return np.searchsorted(np.asarray(thresholds, np.int64), np.arange(CTX_RANGE),
                           side="right").astype(np.int64)


# 2**(j/4) * 2**12, rounded: table of the log-scale frequency code
_POW4 = np.array([4096, 4871, 5793, 6889], np.int64)
MAX_QCODE = 4 * 40 + 1


def quantize_counts(counts: np.ndarray) -> np.ndarray:
    """Counts to log-scale codes: 0 for 0, else ``1 + round(4 log2 count)`` (at most MAX_QCODE)."""
    c = np.asarray(counts, np.float64)
    q = np.zeros(c.shape, np.int64)
    nz = c > 0
    q[nz] = 1 + np.rint(4 * np.log2(c[nz])).astype(np.int64)
    return np.minimum(q, MAX_QCODE)


@njit(cache=True)
def freqs_from_codes(q):
    """Deterministic integer frequencies summing to SCALE from log-scale codes (one context).

    Every nonzero code gets a frequency of at least 1; all zero codes give all-zero output.
    """
    n = q.shape[0]
    cnt = np.zeros(n, np.int64)
    total = 0
    for s in range(n):
        if q[s] > 0:
            j = q[s] - 1
            cnt[s] = (_POW4[j & 3] << (j >> 2)) >> 12
            if cnt[s] < 1:
                cnt[s] = 1
            total += cnt[s]
    f = np.zeros(n, np.int64)
    if total == 0:
        return f
    # scale to SCALE in float64 (IEEE, deterministic), at least 1 each
    tot = 0
    for s in range(n):
        if cnt[s] > 0:
            v = np.int64(np.floor(cnt[s] * (SCALE / total)))
            f[s] = max(v, 1)
            tot += f[s]
    # fix the sum: adjust the largest frequencies
    while tot != SCALE:
        best = 0
        for s in range(n):
            if f[s] > f[best]:
                best = s
        if tot < SCALE:
            f[best] += SCALE - tot
            tot = SCALE
        else:
            take = min(tot - SCALE, f[best] - 1)
            if take <= 0:
                break
            f[best] -= take
            tot -= take
    # a single symbol holding all of SCALE would cost 0 bits: keep SCALE-1 at most,
    # so that every token costs something (bounds the samples a payload can claim)
    for s in range(n):
        if f[s] >= SCALE:
            f[s] = SCALE - 1
            # give the spare slot to a neighbour (it may have had a zero code)
            f[(s + 1) % n if n > 1 else s] += 1 if n > 1 else 0
    return f


def build_tables(freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative starts and slot -> symbol lookup for per-context frequency tables.

    Parameters
    ----------
    freqs : ndarray of int64, shape (n_contexts, n_tokens)
        Each row sums to SCALE (or to SCALE - 1 for a single-symbol row) or is all zero.

    Returns
    -------
    cum : ndarray of int64, shape (n_contexts, n_tokens)
    lookup : ndarray of int32, shape (n_contexts, SCALE); -1 marks unused slots.
    """
    cum = np.zeros_like(freqs)
    cum[:, 1:] = np.cumsum(freqs, axis=1)[:, :-1]
    lookup = np.full((freqs.shape[0], SCALE), -1, np.int32)
    for c in range(freqs.shape[0]):
        nz = np.flatnonzero(freqs[c])
        if nz.size:
            lookup[c, :int(freqs[c].sum())] = np.repeat(nz.astype(np.int32), freqs[c, nz])
    return cum, lookup


def rans_encode_ctx(tokens: np.ndarray, ctx: np.ndarray, cmap: np.ndarray, freqs: np.ndarray,
                    cum: np.ndarray) -> np.ndarray:
    """rANS-code tokens under per-context static tables; returns uint16 words (decode order).

    ``ctx`` holds the context statistic per token, ``cmap`` maps it to a table row:
    :func:`rans_encode_rows` with ``rows = cmap[ctx]``.
    """
    return rans_encode_rows(tokens, cmap[ctx], freqs, cum)


@njit(cache=True)
def rans_decode_ctx(words, n, bitlen, cmap, freqs, cum, lookup):
    """Inverse of :func:`rans_encode_ctx`, computing the contexts as it goes.

    Returns (tokens int32, ok); ``ok`` is False when the words are inconsistent.
    """
    tokens = np.empty(n, np.int32)
    nw = words.shape[0]
    if nw < 2:
        return tokens, False
    x = (np.uint64(words[0]) << np.uint64(16)) | np.uint64(words[1])
    pos = 2
    mask = np.uint64(SCALE - 1)
    b1 = 0
    b2 = 0
    b3 = 0
    for i in range(n):
        c = cmap[2 * b1 + b2 + b3]
        slot = x & mask
        s = lookup[c, slot]
        if s < 0:
            return tokens, False
        tokens[i] = s
        x = np.uint64(freqs[c, s]) * (x >> np.uint64(SCALE_BITS)) + slot - np.uint64(cum[c, s])
        if x < np.uint64(RANS_L):
            if pos >= nw:
                return tokens, False
            x = (x << np.uint64(16)) | np.uint64(words[pos])
            pos += 1
        b3 = b2
        b2 = b1
        b1 = bitlen[s]
    return tokens, pos == nw and x == np.uint64(RANS_L)


# One 64-bit entry per (row, slot) for the decoders: everything a decoded slot
# needs in one load. Bits 0-12: frequency (0 marks an unused slot), 13-24:
# slot - cumulative start, 32-37: raw bits that follow the token, 40-46: bit
# length of its values (the context statistic), 48-63: the value's top bits
# (the token itself below 2**k, else ``2**msb | mantissa``), which the raw
# bits extend: ``z = top << nb | raw``.
DT_FREQ_MASK = (1 << 13) - 1


@njit(cache=True)
def decode_table(freqs, k, msb):
    """Packed decode entries (uint64, ``n_rows * SCALE``, row-major) of frequency rows.

    The slots of a row are those of :func:`build_tables` (symbols in order,
    ``freqs[row, s]`` slots each); slots past a row's total stay 0.
    """
    n_rows, width = freqs.shape
    out = np.zeros(n_rows * SCALE, np.uint64)
    direct = 1 << k
    for c in range(n_rows):
        pos = 0
        for s in range(width):
            f = freqs[c, s]
            if f <= 0:
                continue
            if s < direct:
                nb = 0
                top = s
                bl = _bitlen(np.uint64(s))
            else:
                e = k + ((s - direct) >> msb)
                if e > 63:
                    pos += f  # never decodable: the slots stay 0 (an error when met)
                    continue
                nb = e - msb
                top = (1 << msb) | ((s - direct) & ((1 << msb) - 1))
                bl = e + 1
            for j in range(f):
                if pos + j >= SCALE:
                    break
                out[c * SCALE + pos + j] = (np.uint64(f) | (np.uint64(j) << np.uint64(13))
                                            | (np.uint64(nb) << np.uint64(32))
                                            | (np.uint64(bl) << np.uint64(40))
                                            | (np.uint64(top) << np.uint64(48)))
            pos += f
    return out


@njit(cache=True, inline="always")
def ema_stat_fast(acc, sh):
    """:func:`ema_stat` with the bit length from one ``ctlz`` (the decoders' hot loop)."""
    a = np.uint64(acc >> sh)
    if a == np.uint64(0):
        return 0
    b = 64 - np.int64(clz64(a))
    frac = np.int64(((a << np.uint64(2)) >> np.uint64(b - 1)) & np.uint64(3))
    return b * 4 + frac


@njit(cache=True)
def _put_bits(buf, pos, v, nb):
    for j in range(nb):
        if (v >> j) & 1:
            buf[pos >> 3] |= np.uint8(1 << (pos & 7))
        pos += 1
    return pos


@njit(cache=True)
def _get_bits(buf, pos, nb, limit):
    v = 0
    for j in range(nb):
        if pos >= limit:
            return -1, pos
        v |= ((buf[pos >> 3] >> (pos & 7)) & 1) << j
        pos += 1
    return v, pos


@njit(cache=True)
def write_codes(q):
    """Log-scale table codes (n_contexts, n_tokens), as signed exp-Golomb deltas along each row."""
    buf = np.zeros(q.size * 4 + 8, np.uint8)
    pos = 0
    for c in range(q.shape[0]):
        prev = 0
        for s in range(q.shape[1]):
            d = q[c, s] - prev
            prev = q[c, s]
            u = 2 * d if d >= 0 else -2 * d - 1  # zigzag
            u += 1
            nb = 0
            t = u
            while t > 1:
                t >>= 1
                nb += 1
            pos = _put_bits(buf, pos, 0, nb)  # nb zeros, then u in nb+1 bits (top bit first)
            for j in range(nb, -1, -1):
                pos = _put_bits(buf, pos, (u >> j) & 1, 1)
    return buf[:(pos + 7) >> 3].copy()


@njit(cache=True)
def read_codes(buf, n_contexts, n_tokens):
    """Inverse of :func:`write_codes`; returns (codes, bytes used, ok). Not ok also where a
    row has more than ``SCALE`` nonzero codes: each takes at least one of the ``SCALE``
    slots (:func:`freqs_from_codes`), so the row's frequencies could not sum to ``SCALE``."""
    q = np.zeros((n_contexts, n_tokens), np.int64)
    limit = buf.shape[0] * 8
    pos = 0
    for c in range(n_contexts):
        prev = 0
        used = 0
        for s in range(n_tokens):
            nb = 0
            while True:
                if pos >= limit or nb > 20:
                    return q, 0, False
                bit = (buf[pos >> 3] >> (pos & 7)) & 1
                if bit:
                    break
                nb += 1
                pos += 1
            u = 0
            for _ in range(nb + 1):
                if pos >= limit:
                    return q, 0, False
                u = (u << 1) | ((buf[pos >> 3] >> (pos & 7)) & 1)
                pos += 1
            u -= 1
            d = u >> 1 if (u & 1) == 0 else -((u + 1) >> 1)
            v = prev + d
            if v < 0 or v > MAX_QCODE:
                return q, 0, False
            q[c, s] = v
            prev = v
            used += v > 0
        if used > SCALE:
            return q, 0, False
    return q, (pos + 7) >> 3, True


@njit(cache=True)
def freqs_from_code_rows(q):
    """:func:`freqs_from_codes` for every row of ``q``."""
    f = np.zeros(q.shape, np.int64)
    for c in range(q.shape[0]):
        f[c] = freqs_from_codes(q[c])
    return f


@njit(cache=True)
def coded_bits(counts, freqs):
    """Bits that static tables ``freqs`` spend on ``counts`` (same shape); inf if a count has no slot."""
    total = 0.0
    for c in range(counts.shape[0]):
        for s in range(counts.shape[1]):
            if counts[c, s]:
                if freqs[c, s] == 0:
                    return np.inf
                total += counts[c, s] * (SCALE_BITS - np.log2(freqs[c, s]))
    return total


@njit(cache=True)
def rans_encode_rows(tokens, rows, freqs, cum):
    """rANS-code tokens, token ``i`` with table row ``rows[i]``; uint16 words in decode order."""
    out = np.empty(tokens.shape[0] + 2, np.uint16)
    return out[:rans_encode_rows_into(tokens, rows, freqs, cum, out)][::-1].copy()


@njit(cache=True)
def rans_encode_rows_into(tokens, rows, freqs, cum, out):
    """:func:`rans_encode_rows` into ``out`` (uint16, at least ``n + 2`` entries), its words
    in the encoder's order (the last word first in decode order); returns their count."""
    n = tokens.shape[0]
    pos = 0
    x = np.uint64(RANS_L)
    x_lim = np.uint64((RANS_L >> SCALE_BITS) << 16)
    for i in range(n - 1, -1, -1):
        c = rows[i]
        s = tokens[i]
        f = np.uint64(freqs[c, s])
        if x >= x_lim * f:
            out[pos] = np.uint16(x & np.uint64(0xFFFF))
            pos += 1
            x >>= np.uint64(16)
        x = ((x // f) << np.uint64(SCALE_BITS)) + (x % f) + np.uint64(cum[c, s])
    out[pos] = np.uint16(x & np.uint64(0xFFFF))
    out[pos + 1] = np.uint16(x >> np.uint64(16))
    return pos + 2


# Context statistic, second kind: the fractional log2 (2 bits) of an
# exponential moving average of the recent values, ``A += z - A >> sh``
# (LOCO-I's running magnitude, with a decay instead of a reset).
EMA_CLAMP = 1 << 40


@njit(cache=True, inline="always")
def ema_stat(acc, sh):
    a = np.uint64(acc >> sh)
    b = _bitlen(a)
    if b == 0:
        return 0
    frac = np.int64(((a << np.uint64(2)) >> np.uint64(b - 1)) & np.uint64(3))
    return b * 4 + frac


@njit(cache=True, inline="always")
def ema_update(acc, z, sh):
    zz = np.int64(z) if z < np.uint64(EMA_CLAMP) else EMA_CLAMP
    return acc + zz - (acc >> sh)


@njit(cache=True)
def context_stat_ema(z, sh):
    """Per value, :func:`ema_stat` of the average of the values before it (0..167)."""
    n = z.shape[0]
    out = np.empty(n, np.int64)
    acc = 0
    for i in range(n):
        out[i] = ema_stat(acc, sh)
        acc = ema_update(acc, z[i], sh)
    return out
