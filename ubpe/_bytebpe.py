"""Compiled byte-level BPE for text: pre-tokens to ids, ids to bytes, tiktoken ranks to merges.

Every kernel releases the GIL (``nogil``), so a thread pool runs them in
parallel. Ids stay in numpy arrays end to end.

Encoding a pre-token (tiktoken's scheme, ``tiktoken/src/lib.rs``): if its
bytes are one token, that token (a hash table over the bytes of every
token, verified byte by byte); otherwise BPE over its bytes, merging the
adjacent pair of lowest rank, leftmost first, until none is left. The
merge loop is a linear scan for short pre-tokens and a heap for long ones.
A small table of recent multi-token pre-tokens and their ids (a cache,
per call) saves repeating the merges of a frequent word.
"""

from __future__ import annotations

import numpy as np

from ._engine import _heap_pop, _heap_push, _new_table
from ._jit import njit
from ._pretokenize import split_utf8

_MASK = np.int64(0xFFFFFFFF)
_NONE = np.int64(1) << 62
#: Pre-tokens longer than this use the heap merge loop.
_LINEAR_MAX = 64
#: Slots of the per-call cache of multi-token pre-tokens (a power of two).
_CACHE_SLOTS = 1 << 14
#: Longest pre-token (bytes) that the cache keeps.
_CACHE_MAX_BYTES = 32


@njit(cache=True, inline="always")
def _hash_bytes(buf, a, b):
    """FNV-1a over ``buf[a:b]``, finished with a multiplicative mix (never -1)."""
    h = np.uint64(0xCBF29CE484222325)
    for k in range(a, b):
        h = (h ^ np.uint64(buf[k])) * np.uint64(0x100000001B3)
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit(cache=True)
def build_vocab_table(exp_start, exp_flat):
    """Hash table from the bytes of every token to its id, one int64 per slot.

    Parameters are the token expansions of :class:`ubpe.Tokenizer`
    (``_exp_start`` (n + 1,), ``_exp_flat`` int32). A slot holds the high 34
    bits of the bytes' hash, their length (capped at 255) and the token id:
    ``hash >> 29 << 29 | length << 21 | id`` (-1 empty). Returns the table,
    its bit count and the tokens' bytes as uint8.
    """
    n = exp_start.shape[0] - 1
    flat = exp_flat.astype(np.uint8)
    table, _, bits = _new_table(n)
    mask = (1 << bits) - 1
    for t in range(n):
        h = _hash_bytes(flat, exp_start[t], exp_start[t + 1])
        s = h & mask
        while table[s] != -1:
            s = (s + 1) & mask
        length = min(exp_start[t + 1] - exp_start[t], 255)
        table[s] = ((h >> 29) << 29) | (np.int64(length) << 21) | np.int64(t)
    return table, bits, flat


@njit(cache=True, inline="always")
def _whole_token(buf, a, b, h, vt, vbits, exp_start, flat):
    """The token whose bytes are ``buf[a:b]`` (hash ``h``), or -1."""
    mask = (1 << vbits) - 1
    s = h & mask
    want = ((h >> 29) << 8) | min(b - a, 255)
    while vt[s] != -1:
        v = vt[s]
        if (v >> 21) == want:
            t = v & 0x1FFFFF
            s0 = exp_start[t]
            if exp_start[t + 1] - s0 == b - a:
                same = True
                for k in range(b - a):
                    if flat[s0 + k] != buf[a + k]:
                        same = False
                        break
                if same:
                    return t
        s = (s + 1) & mask
    return -1


#: Token ids and ranks must stay below 2**21 to pack a pair and its rank in one int64.
MAX_TOKENS = 1 << 21
#: Bits of the filter that rejects most absent pairs without touching the table
#: (2**21 bits, 256 KiB: stays in cache while the table does not).
_FILTER_BITS = 21
_B21 = np.int64(21)
_M21 = np.int64((1 << 21) - 1)


@njit(cache=True, inline="always")
def _pair_slot(key, bits):
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))


@njit(cache=True, inline="always")
def _filter_bit(key):
    return np.int64((np.uint64(key) * np.uint64(0xC2B2AE3D27D4EB4F)) >> np.uint64(64 - _FILTER_BITS))


@njit(cache=True, inline="always")
def _pair_rank(pt, pbits, bp, left, right):
    """Rank of the merge ``(left, right)``, or ``_NONE``.

    Pairs of two bytes come from the direct table ``bp`` (65,536 entries);
    the others from ``pt``: a one-hash filter of 2**21 bits (after the slots)
    rejects most absent pairs, then open addressing with one int64 per slot,
    ``left << 42 | right << 21 | rank`` (-1 empty): one cache line per probe.
    """
    if left < 256 and right < 256:
        r = bp[(left << 8) | right]
        return _NONE if r < 0 else np.int64(r)
    key = (np.int64(left) << _B21) | np.int64(right)
    f = _filter_bit(key)
    if (pt[(np.int64(1) << pbits) + (f >> 6)] >> (f & 63)) & 1 == 0:
        return _NONE
    mask = (np.int64(1) << pbits) - 1
    s = _pair_slot(key, pbits)
    while True:
        v = pt[s]
        if v == -1:
            return _NONE
        if (v >> _B21) == key:
            return v & _M21
        s = (s + 1) & mask


@njit(cache=True, inline="always")
def _pair_insert(pt, pbits, bp, left, right, rank):
    """Add merge ``(left, right)`` of ``rank``; False if the pair is there already."""
    if left < 256 and right < 256:
        if bp[(left << 8) | right] >= 0:
            return False
        bp[(left << 8) | right] = rank
        return True
    key = (np.int64(left) << _B21) | np.int64(right)
    mask = (np.int64(1) << pbits) - 1
    s = _pair_slot(key, pbits)
    while pt[s] != -1:
        if (pt[s] >> _B21) == key:
            return False
        s = (s + 1) & mask
    pt[s] = (key << _B21) | np.int64(rank)
    f = _filter_bit(key)
    pt[(np.int64(1) << pbits) + (f >> 6)] |= np.int64(1) << (f & 63)
    return True


@njit(cache=True)
def _empty_pair_table(n):
    bits = 4
    while (1 << bits) < 2 * n + 2:
        bits += 1
    pt = np.full((1 << bits) + (1 << (_FILTER_BITS - 6)), -1, np.int64)
    pt[1 << bits:] = 0  # the filter words after the slots
    return pt, bits, np.full(65536, -1, np.int32)


@njit(cache=True)
def build_pair_table(left, right):
    """The merge table of :func:`_pair_rank` for merges ``(left[r], right[r])`` of rank ``r``."""
    pt, pbits, bp = _empty_pair_table(left.shape[0])
    for r in range(left.shape[0]):
        _pair_insert(pt, pbits, bp, left[r], right[r], r)
    return pt, pbits, bp


@njit(cache=True, inline="always")
def _merge_linear(tok, rk, m, pt, pbits, bp, new_token):
    """BPE on ``tok[:m]`` by a linear scan per merge; returns the new length."""
    for k in range(m - 1):
        rk[k] = _pair_rank(pt, pbits, bp, tok[k], tok[k + 1])
    while m > 1:
        best = _NONE
        bi = -1
        for k in range(m - 1):
            if rk[k] < best:
                best = rk[k]
                bi = k
        if bi < 0:
            break
        tok[bi] = new_token[best]
        for k in range(bi + 1, m - 1):
            tok[k] = tok[k + 1]
        for k in range(bi + 1, m - 2):
            rk[k] = rk[k + 1]
        m -= 1
        if bi > 0:
            rk[bi - 1] = _pair_rank(pt, pbits, bp, tok[bi - 1], tok[bi])
        if bi < m - 1:
            rk[bi] = _pair_rank(pt, pbits, bp, tok[bi], tok[bi + 1])
    return m


@njit(cache=True, inline="always")
def _merge_heap(tok, m, nxt, prv, heap, pt, pbits, bp, left, right, new_token):
    """BPE on ``tok[:m]`` with a heap of (rank, position); compacts ``tok``, returns the length."""
    hn = 0
    for i in range(m):
        nxt[i] = i + 1 if i + 1 < m else -1
        prv[i] = i - 1
    for i in range(m - 1):
        r = _pair_rank(pt, pbits, bp, tok[i], tok[i + 1])
        if r != _NONE:
            _heap_push(heap, hn, (r << 32) | i)
            hn += 1
    while hn > 0:
        v = _heap_pop(heap, hn)
        hn -= 1
        r = v >> 32
        i = v & _MASK
        if tok[i] != left[r]:
            continue
        j = nxt[i]
        if j < 0 or tok[j] != right[r]:
            continue
        tok[i] = new_token[r]
        tok[j] = -1
        q = nxt[j]
        nxt[i] = q
        if q >= 0:
            prv[q] = i
        h = prv[i]
        if h >= 0:
            r2 = _pair_rank(pt, pbits, bp, tok[h], tok[i])
            if r2 != _NONE:
                _heap_push(heap, hn, (r2 << 32) | h)
                hn += 1
        if q >= 0:
            r2 = _pair_rank(pt, pbits, bp, tok[i], tok[q])
            if r2 != _NONE:
                _heap_push(heap, hn, (r2 << 32) | i)
                hn += 1
    k = 0
    i = 0
    while i >= 0:
        tok[k] = tok[i]
        k += 1
        i = nxt[i]
    return k


@njit(cache=True)
def encode_pieces(buf, bounds, vt, vbits, exp_start, flat, pt, pbits, bp,
                  left, right, new_token, to_public):
    """Public token ids (int32) of the pre-tokens ``buf[bounds[k]:bounds[k+1]]``."""
    n_pieces = bounds.shape[0] - 1
    out = np.empty(buf.shape[0], np.int32)
    longest = 1
    for p in range(n_pieces):
        longest = max(longest, bounds[p + 1] - bounds[p])
    tok = np.empty(longest, np.int32)
    rk = np.empty(longest, np.int64)
    nxt = np.empty(longest, np.int32)
    prv = np.empty(longest, np.int32)
    heap = np.empty(3 * longest + 1, np.int64)
    # cache of multi-token pre-tokens: hash -> (start, length) of their ids in `out`
    ckeys = np.full(_CACHE_SLOTS, -1, np.int64)
    cstart = np.empty(_CACHE_SLOTS, np.int64)
    clen = np.empty(_CACHE_SLOTS, np.int64)
    cmask = _CACHE_SLOTS - 1
    no = 0
    for p in range(n_pieces):
        a = bounds[p]
        b = bounds[p + 1]
        m = b - a
        if m == 1:
            out[no] = buf[a]
            no += 1
            continue
        h = _hash_bytes(buf, a, b)
        t = _whole_token(buf, a, b, h, vt, vbits, exp_start, flat)
        if t >= 0:
            out[no] = t
            no += 1
            continue
        cached = False
        cs = h & cmask
        if m <= _CACHE_MAX_BYTES and ckeys[cs] == h:
            # verify: the cached ids must spell these bytes
            s0 = cstart[cs]
            pos = a
            cached = True
            for k in range(clen[cs]):
                u = out[s0 + k]
                for q in range(exp_start[u], exp_start[u + 1]):
                    if pos >= b or flat[q] != buf[pos]:
                        cached = False
                        break
                    pos += 1
                if not cached:
                    break
            if cached and pos == b:
                for k in range(clen[cs]):
                    out[no + k] = out[s0 + k]
                no += clen[cs]
                continue
            cached = False
        for k in range(m):
            tok[k] = buf[a + k]
        if m <= _LINEAR_MAX:
            m = _merge_linear(tok, rk, m, pt, pbits, bp, new_token)
        else:
            m = _merge_heap(tok, m, nxt, prv, heap, pt, pbits, bp, left, right, new_token)
        if b - a <= _CACHE_MAX_BYTES:
            ckeys[cs] = h
            cstart[cs] = no
            clen[cs] = m
        for k in range(m):
            out[no + k] = tok[k]
        no += m
    for k in range(no):
        out[k] = to_public[out[k]]
    return out[:no]


@njit(cache=True)
def encode_text(buf, flags, fold, kind, vt, vbits, exp_start, flat, pt, pbits, bp,
                left, right, new_token, to_public):
    """Pre-tokenize UTF-8 ``buf`` with compiled pattern ``kind`` and encode it (int32 ids)."""
    bounds = split_utf8(buf, flags, fold, kind)
    return encode_pieces(buf, bounds, vt, vbits, exp_start, flat, pt, pbits, bp,
                         left, right, new_token, to_public)


@njit(cache=True)
def decode_ids(ids, exp_start, flat):
    """Bytes (uint8) of internal token ids, concatenated."""
    total = 0
    for k in range(ids.shape[0]):
        total += exp_start[ids[k] + 1] - exp_start[ids[k]]
    out = np.empty(total, np.uint8)
    pos = 0
    for k in range(ids.shape[0]):
        t = ids[k]
        for q in range(exp_start[t], exp_start[t + 1]):
            out[pos] = flat[q]
            pos += 1
    return out


@njit(cache=True)
def decode_public(ids, lengths, starts, flat):
    """Bytes of ordinary token ids; ``(bytes, -1)``, or ``(empty, k)`` if ``ids[k]`` is the
    first id outside ``0..len(lengths)-1`` (a special or invalid id).

    The tables are indexed by public id: token ``u`` is
    ``flat[starts[u]:starts[u] + lengths[u]]`` (``lengths`` uint8 or int32, small
    enough to stay in cache for the first pass).
    """
    n = lengths.shape[0]
    total = 0
    for k in range(ids.shape[0]):
        u = ids[k]
        if u < 0 or u >= n:
            return np.empty(0, np.uint8), k
        total += lengths[u]
    out = np.empty(total, np.uint8)
    pos = 0
    for k in range(ids.shape[0]):
        u = ids[k]
        s = starts[u]
        for q in range(lengths[u]):
            out[pos + q] = flat[s + q]
        pos += lengths[u]
    return out, -1


@njit(cache=True)
def recover_merges(flat, offsets):
    """The merges behind tiktoken ranks (minbpe's ``recover_merges``, compiled).

    Parameters
    ----------
    flat : uint8 array
        The bytes of every token, in rank order.
    offsets : int64 array of shape (n + 1,)
        Token ``r`` is ``flat[offsets[r]:offsets[r+1]]``; ranks 0..255 are
        the single bytes.

    Returns
    -------
    pairs : int64 array of shape (n - 256, 2)
        The two parts of the token of rank ``256 + k``, in internal ids (byte
        value ``b`` is id ``b``; the token of rank ``r >= 256`` is id ``r``).
    bad : int
        The first rank whose token no two lower-ranked tokens form, or -1.

    Each token is encoded by BPE with the merges of lower rank only (those
    known when its turn comes); the last two parts left are its merge.
    """
    n = offsets.shape[0] - 1
    m = n - 256
    pairs = np.empty((max(m, 0), 2), np.int64)
    pt, pbits, bp = _empty_pair_table(max(m, 1))
    new_token = np.arange(256, 256 + max(m, 1)).astype(np.int32)
    longest = 2
    for r in range(256, n):
        longest = max(longest, offsets[r + 1] - offsets[r])
    tok = np.empty(longest, np.int32)
    rk = np.empty(longest, np.int64)
    for r in range(256, n):
        a = offsets[r]
        b = offsets[r + 1]
        if b - a < 2:
            return pairs, r
        for k in range(b - a):
            tok[k] = flat[a + k]
        k = _merge_linear(tok, rk, b - a, pt, pbits, bp, new_token)
        if k != 2:
            return pairs, r
        pairs[r - 256, 0] = tok[0]
        pairs[r - 256, 1] = tok[1]
        if not _pair_insert(pt, pbits, bp, tok[0], tok[1], r - 256):
            return pairs, r  # the same pair twice: a later rank is unreachable
    return pairs, -1


@njit(cache=True)
def count_pieces(buf, bounds):
    """Distinct pre-tokens ``buf[bounds[k]:bounds[k+1]]`` and how often each occurs.

    Returns ``first`` (int64: the index ``k`` of each distinct pre-token's
    first occurrence, in order of appearance) and ``counts`` (int64).
    """
    n_pieces = bounds.shape[0] - 1
    keys, vals, bits = _new_table(1024)
    mask = (1 << bits) - 1
    first = np.empty(n_pieces, np.int64)
    counts = np.zeros(n_pieces, np.int64)
    nd = 0
    for p in range(n_pieces):
        a = bounds[p]
        b = bounds[p + 1]
        h = _hash_bytes(buf, a, b)
        s = h & mask
        found = -1
        while keys[s] != -1:
            if keys[s] == h:
                d = vals[s]
                a0 = bounds[first[d]]
                if bounds[first[d] + 1] - a0 == b - a:
                    same = True
                    for k in range(b - a):
                        if buf[a0 + k] != buf[a + k]:
                            same = False
                            break
                    if same:
                        found = d
                        break
            s = (s + 1) & mask
        if found < 0:
            keys[s] = h
            vals[s] = nd
            first[nd] = p
            found = nd
            nd += 1
            if 2 * nd + 2 > keys.shape[0]:  # rehash into a table twice as large
                bits += 1
                mask = (1 << bits) - 1
                nk = np.full(1 << bits, -1, np.int64)
                nv = np.empty(1 << bits, np.int64)
                for q in range(keys.shape[0]):
                    if keys[q] != -1:
                        s2 = keys[q] & mask
                        while nk[s2] != -1:
                            s2 = (s2 + 1) & mask
                        nk[s2] = keys[q]
                        nv[s2] = vals[q]
                keys = nk
                vals = nv
        counts[found] += 1
    return first[:nd], counts[:nd]
