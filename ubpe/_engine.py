"""Fast training and encoding kernels (numba).

Same results as :mod:`ubpe._reference`, bit for bit; the tests compare them.

Training keeps the corpus as one flat array of token ids with a doubly
linked list over live positions (``nxt``/``prv``, ``-1`` at document
edges), so merging a pair touches only its occurrences and their two
neighbours, never the whole corpus. For every distinct adjacent pair it keeps
the weighted count and a sorted list of the positions where it started when
it was created (stale entries are skipped on use). A pair's positions are all
created in one round: the initial pairs before the first round, every later
pair in the round that created its newer token, since a new adjacency always
involves a token created in that round. So each list is written once, as one
block of an append-only pool. The most frequent pairs come from a max-heap
with lazy re-evaluation: counts only fall after a pair is pushed, so a popped
entry whose stored count is out of date is pushed back with its true count
(the incremental scheme of the seed notes ``bpe_trainer_tinystories.txt`` and
``cs336_bpe_notes.txt``).

Encoding keeps, per document, a linked list of symbols and a min-heap of
``(rank, position)`` over adjacent pairs (llama.cpp's encoder, seed
``llama_cpp_bpe.txt``): O(n log n) per document.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

_MASK = np.int64(0xFFFFFFFF)
_NONE = np.int64(-1)


@njit(cache=True, inline="always")
def _key(left, right):
    return (np.int64(left) << 32) | np.int64(right)


@njit(cache=True, inline="always")
def _get(index, k):
    if k in index:
        return index[k]
    return _NONE


@njit(cache=True)
def _grow(a, need):
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, a.shape[0] * 3 // 2 + 64), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


# --- max-heap of (count, key): larger count first, then smaller key ---------

@njit(cache=True, inline="always")
def _above(c1, k1, c2, k2):
    return c1 > c2 or (c1 == c2 and k1 < k2)


@njit(cache=True)
def _sift_down(hc, hk, n, i):
    c, k = hc[i], hk[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _above(hc[child + 1], hk[child + 1], hc[child], hk[child]):
            child += 1
        if not _above(hc[child], hk[child], c, k):
            break
        hc[i], hk[i] = hc[child], hk[child]
        i = child
    hc[i], hk[i] = c, k


@njit(cache=True)
def _sift_up(hc, hk, i):
    c, k = hc[i], hk[i]
    while i > 0:
        parent = (i - 1) // 2
        if not _above(c, k, hc[parent], hk[parent]):
            break
        hc[i], hk[i] = hc[parent], hk[parent]
        i = parent
    hc[i], hk[i] = c, k


@njit(cache=True)
def init_training(tok, nxt, doc, doc_weight):
    """Count all adjacent pairs and build the position pool and the heap."""
    n = tok.shape[0]
    index = Dict.empty(key_type=types.int64, value_type=types.int64)
    pid_of = np.full(n, -1, dtype=np.int32)
    cap = 1024
    p_key = np.empty(cap, np.int64)
    p_count = np.empty(cap, np.int64)
    p_len = np.empty(cap, np.int64)
    npairs = 0
    for i in range(n):
        j = nxt[i]
        if j < 0:
            continue
        k = _key(tok[i], tok[j])
        pid = _get(index, k)
        if pid < 0:
            pid = npairs
            npairs += 1
            index[k] = pid
            if npairs > p_key.shape[0]:
                p_key = _grow(p_key, npairs)
                p_count = _grow(p_count, npairs)
                p_len = _grow(p_len, npairs)
            p_key[pid] = k
            p_count[pid] = 0
            p_len[pid] = 0
        pid_of[i] = pid
        p_count[pid] += doc_weight[doc[i]]
        p_len[pid] += 1
    p_start = np.empty(p_key.shape[0], np.int64)
    total = 0
    for pid in range(npairs):
        p_start[pid] = total
        total += p_len[pid]
    pool = np.empty(total + total // 2 + 64, np.int32)
    fill = p_start[:npairs].copy()
    for i in range(n):
        pid = pid_of[i]
        if pid >= 0:
            pool[fill[pid]] = i
            fill[pid] += 1
    hk = p_key[:npairs].copy()
    hc = p_count[:npairs].copy()
    for i in range(npairs // 2 - 1, -1, -1):
        _sift_down(hc, hk, npairs, i)
    return index, p_key, p_count, p_start, p_len, npairs, pool, total, hc, hk, npairs


@njit(cache=True)
def train_rounds(tok, nxt, prv, doc, doc_weight, index, p_key, p_count,
                 p_start, p_len, npairs, pool, pool_len, hc, hk, hsize,
                 merges, n_done, next_token, n_merges, n_candidates,
                 min_frequency, max_rounds):
    """Run up to ``max_rounds`` training rounds; see ``_reference.fit_reference``.

    ``merges`` rows are ``(left, right, token, count, df)``. Returns the
    (possibly reallocated) state and ``finished``: True when no pair reaches
    ``min_frequency`` any more.
    """
    cand_k = np.empty(n_candidates, np.int64)
    cand_c = np.empty(n_candidates, np.int64)
    chosen = np.empty(n_candidates, np.int64)
    buf_k = np.empty(1024, np.int64)
    buf_p = np.empty(1024, np.int32)
    finished = False
    rounds = 0
    while n_done < n_merges and rounds < max_rounds:
        rounds += 1
        # 1. the n_candidates most frequent pairs, lazily re-evaluated
        nc = 0
        while nc < n_candidates and hsize > 0:
            c, k = hc[0], hk[0]
            hsize -= 1
            if hsize > 0:
                hc[0], hk[0] = hc[hsize], hk[hsize]
                _sift_down(hc, hk, hsize, 0)
            true = p_count[index[k]]
            if true != c:
                if true > 0:
                    hc[hsize], hk[hsize] = true, k
                    hsize += 1
                    _sift_up(hc, hk, hsize - 1)
                continue
            if c < min_frequency:
                hc[hsize], hk[hsize] = c, k
                hsize += 1
                _sift_up(hc, hk, hsize - 1)
                break
            cand_k[nc] = k
            cand_c[nc] = c
            nc += 1
        if nc == 0:
            finished = True
            break
        # 2. collision filter (same rules as _reference.select_candidates)
        nchosen = 0
        for ci in range(nc):
            k2, c2 = cand_k[ci], cand_c[ci]
            l2, r2 = k2 >> 32, k2 & _MASK
            ok = True
            for q in range(nchosen):
                k1 = cand_k[chosen[q]]
                l1, r1 = k1 >> 32, k1 & _MASK
                if l2 == l1 or l2 == r1 or r2 == l1 or r2 == r1:
                    ok = False
                    break
                b1 = _get(index, _key(r2, l1))
                b2 = _get(index, _key(r1, l2))
                if (b1 >= 0 and p_count[b1] >= c2) or (b2 >= 0 and p_count[b2] >= c2):
                    ok = False
                    break
            if ok:
                chosen[nchosen] = ci
                nchosen += 1
            else:  # not merged this round: back into the heap
                hc[hsize], hk[hsize] = c2, k2
                hsize += 1
                _sift_up(hc, hk, hsize - 1)
        # 3. merge every occurrence of each chosen pair, left to right
        nbuf = 0
        for q in range(nchosen):
            k = cand_k[chosen[q]]
            a, b = k >> 32, k & _MASK
            pid = index[k]
            start, length = p_start[pid], p_len[pid]
            need = npairs + 2 * length
            if need > p_key.shape[0]:
                p_key = _grow(p_key, need)
                p_count = _grow(p_count, need)
                p_start = _grow(p_start, need)
                p_len = _grow(p_len, need)
            buf_k = _grow(buf_k, nbuf + 2 * length)
            buf_p = _grow(buf_p, nbuf + 2 * length)
            x = next_token
            next_token += 1
            df = 0
            last_doc = -1
            for t in range(start, start + length):
                i = pool[t]
                if tok[i] != a:
                    continue
                j = nxt[i]
                if j < 0 or tok[j] != b:
                    continue
                d = doc[i]
                w = doc_weight[d]
                h = prv[i]
                m = nxt[j]
                if h >= 0:
                    p_count[index[_key(tok[h], a)]] -= w
                p_count[pid] -= w
                if m >= 0:
                    p_count[index[_key(b, tok[m])]] -= w
                tok[i] = x
                tok[j] = -1
                nxt[i] = m
                if m >= 0:
                    prv[m] = i
                for side in range(2):
                    if side == 0:
                        if h < 0:
                            continue
                        nk, pos = _key(tok[h], x), h
                    else:
                        if m < 0:
                            continue
                        nk, pos = _key(x, tok[m]), i
                    npid = _get(index, nk)
                    if npid < 0:
                        npid = npairs
                        npairs += 1
                        index[nk] = npid
                        p_key[npid] = nk
                        p_count[npid] = 0
                        p_len[npid] = 0
                    p_count[npid] += w
                    buf_k[nbuf] = nk
                    buf_p[nbuf] = pos
                    nbuf += 1
                if d != last_doc:
                    df += w
                    last_doc = d
            merges[n_done, 0] = a
            merges[n_done, 1] = b
            merges[n_done, 2] = x
            merges[n_done, 3] = cand_c[chosen[q]]
            merges[n_done, 4] = df
            n_done += 1
        # 4. file the round's new pairs: one sorted block of positions each
        order = np.argsort(buf_k[:nbuf], kind="mergesort")
        pool = _grow(pool, pool_len + nbuf)
        g = 0
        while g < nbuf:
            k = buf_k[order[g]]
            e = g
            while e < nbuf and buf_k[order[e]] == k:
                e += 1
            pid = index[k]
            a, b = k >> 32, k & _MASK
            p_start[pid] = pool_len
            positions = np.sort(buf_p[order[g:e]])
            for pos in positions:
                if tok[pos] == a and nxt[pos] >= 0 and tok[nxt[pos]] == b:
                    pool[pool_len] = pos
                    pool_len += 1
            p_len[pid] = pool_len - p_start[pid]
            if p_count[pid] > 0:
                hc = _grow(hc, hsize + 1)
                hk = _grow(hk, hsize + 1)
                hc[hsize], hk[hsize] = p_count[pid], k
                hsize += 1
                _sift_up(hc, hk, hsize - 1)
            g = e
    return (p_key, p_count, p_start, p_len, npairs, pool, pool_len, hc, hk,
            hsize, n_done, next_token, finished)


# --- encoding ---------------------------------------------------------------

@njit(cache=True, inline="always")
def _slot(k, bits):
    return np.int64((np.uint64(k) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))


@njit(cache=True)
def build_rank_table(left, right):
    """Open-addressing hash table: pair key -> rank (``-1`` marks empty)."""
    m = left.shape[0]
    bits = 4
    while (1 << bits) < 2 * m + 2:
        bits += 1
    keys = np.full(1 << bits, -1, np.int64)
    vals = np.empty(1 << bits, np.int32)
    mask = (1 << bits) - 1
    for r in range(m):
        k = _key(left[r], right[r])
        s = _slot(k, bits)
        while keys[s] != -1:
            s = (s + 1) & mask
        keys[s] = k
        vals[s] = r
    return keys, vals, bits


@njit(cache=True, inline="always")
def _lookup(keys, vals, bits, k):
    mask = (1 << bits) - 1
    s = _slot(k, bits)
    while True:
        kk = keys[s]
        if kk == k:
            return vals[s]
        if kk == -1:
            return -1
        s = (s + 1) & mask


@njit(cache=True, inline="always")
def _heap_push(heap, n, v):
    i = n
    while i > 0:
        parent = (i - 1) // 2
        if heap[parent] <= v:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = v


@njit(cache=True, inline="always")
def _heap_pop(heap, n):
    top = heap[0]
    n -= 1
    v = heap[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= v:
            break
        heap[i] = heap[child]
        i = child
    if n > 0:
        heap[i] = v
    return top


@njit(cache=True)
def encode_docs(tokens, offsets, keys, vals, bits, left, right, new_token):
    """Encode every document ``tokens[offsets[d]:offsets[d+1]]`` by rank.

    Returns the concatenated token ids and their offsets.
    """
    n_docs = offsets.shape[0] - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    tok = np.empty(longest, np.int32)
    nxt = np.empty(longest, np.int32)
    prv = np.empty(longest, np.int32)
    heap = np.empty(3 * longest + 1, np.int64)
    out = np.empty(tokens.shape[0], np.int32)
    out_off = np.empty(n_docs + 1, np.int64)
    out_off[0] = 0
    nout = 0
    for d in range(n_docs):
        s, e = offsets[d], offsets[d + 1]
        n = e - s
        hn = 0
        for i in range(n):
            tok[i] = tokens[s + i]
            nxt[i] = i + 1 if i + 1 < n else -1
            prv[i] = i - 1
        for i in range(n - 1):
            r = _lookup(keys, vals, bits, _key(tok[i], tok[i + 1]))
            if r >= 0:
                _heap_push(heap, hn, (np.int64(r) << 32) | i)
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
            m = nxt[j]
            nxt[i] = m
            if m >= 0:
                prv[m] = i
            h = prv[i]
            if h >= 0:
                r2 = _lookup(keys, vals, bits, _key(tok[h], tok[i]))
                if r2 >= 0:
                    _heap_push(heap, hn, (np.int64(r2) << 32) | h)
                    hn += 1
            if m >= 0:
                r2 = _lookup(keys, vals, bits, _key(tok[i], tok[m]))
                if r2 >= 0:
                    _heap_push(heap, hn, (np.int64(r2) << 32) | i)
                    hn += 1
        i = 0 if n > 0 else -1
        while i >= 0:
            out[nout] = tok[i]
            nout += 1
            i = nxt[i]
        out_off[d + 1] = nout
    return out[:nout], out_off
