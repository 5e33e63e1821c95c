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
block of an append-only pool, already in ascending order. The most frequent pairs come from a max-heap
with lazy re-evaluation: counts only fall after a pair is pushed, so a popped
entry whose stored count is out of date is pushed back with its true count
(the incremental pair counts of Hugging Face ``tokenizers``' BPE trainer,
``tokenizers/src/models/bpe/trainer.rs``, and of Stanford CS336's BPE
assignment).

Encoding keeps, per document, a linked list of symbols and a min-heap of
``(rank, position)`` over adjacent pairs (llama.cpp's BPE encoder,
``llm_tokenizer_bpe`` in ``src/llama-vocab.cpp``): O(n log n) per document.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

_MASK = np.int64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _key(left, right):
    return (np.int64(left) << 32) | np.int64(right)


@njit(cache=True)
def _grow(a, need):
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, a.shape[0] * 3 // 2 + 64), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


# --- open-addressing hash table: int64 key -> int64 value, -1 marks empty ---

@njit(cache=True, inline="always")
def _slot(k, bits):
    return np.int64((np.uint64(k) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - bits))


@njit(cache=True, inline="always")
def _find_slot(keys, bits, k):
    """Slot holding ``k``, or the empty slot where it would go."""
    mask = (1 << bits) - 1
    s = _slot(k, bits)
    while keys[s] != k and keys[s] != -1:
        s = (s + 1) & mask
    return s


@njit(cache=True, inline="always")
def _lookup(keys, vals, bits, k):
    s = _find_slot(keys, bits, k)
    return vals[s] if keys[s] == k else -1


@njit(cache=True)
def _new_table(n):
    bits = 4
    while (1 << bits) < 2 * n + 2:
        bits += 1
    return np.full(1 << bits, -1, np.int64), np.empty(1 << bits, np.int64), bits


@njit(cache=True)
def _reserve(keys, vals, bits, n):
    """Rehash into a larger table if ``n`` entries would fill it past half."""
    if 2 * n + 2 <= keys.shape[0]:
        return keys, vals, bits
    nk, nv, nb = _new_table(n)
    for s in range(keys.shape[0]):
        if keys[s] != -1:
            t = _find_slot(nk, nb, keys[s])
            nk[t] = keys[s]
            nv[t] = vals[s]
    return nk, nv, nb


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


# --- training ---------------------------------------------------------------

@njit(cache=True)
def layout(tok, offsets):
    """Node rows and document ids for a flat corpus (see :func:`init_training`)."""
    n = tok.shape[0]
    node = np.empty((n, 4), np.int32)
    doc = np.empty(n, np.int32)
    for d in range(offsets.shape[0] - 1):
        s, e = offsets[d], offsets[d + 1]
        for i in range(s, e):
            node[i, 0] = tok[i]
            node[i, 1] = i + 1 if i + 1 < e else -1
            node[i, 2] = i - 1 if i > s else -1
            doc[i] = d
    return node, doc


# Hot loops live in kernels that take fixed-size arrays; arrays grow only
# between kernel calls (numba optimises a loop poorly when an array it uses
# may be reallocated inside it).

@njit(cache=True)
def _count_initial_pairs(node, doc, doc_weight, start, tab_k, tab_v, tab_bits, p_key,
                         p_count, p_len, npairs):
    """Give positions ``start..`` their pair id until done or a table is full.

    Returns the next position to do and the number of pairs.
    """
    cap = min(p_key.shape[0], (tab_k.shape[0] - 2) // 2)
    n = node.shape[0]
    for i in range(start, n):
        j = node[i, 1]
        if j < 0:
            node[i, 3] = -1
            continue
        k = _key(node[i, 0], node[j, 0])
        s = _find_slot(tab_k, tab_bits, k)
        if tab_k[s] == k:
            pid = tab_v[s]
        else:
            if npairs == cap:
                return i, npairs
            pid = npairs
            npairs += 1
            tab_k[s] = k
            tab_v[s] = pid
            p_key[pid] = k
            p_count[pid] = 0
            p_len[pid] = 0
        node[i, 3] = pid
        p_count[pid] += doc_weight[doc[i]]
        p_len[pid] += 1
    return n, npairs


@njit(cache=True)
def init_training(node, doc, doc_weight, min_frequency):
    """Count all adjacent pairs; build the training state.

    ``node`` has one row per corpus position: token id, next and previous
    live position in the document (-1 at the edges), and the id of the pair
    starting there (-1: none), filled in here; one row keeps a merge's
    neighbours in one or two cache lines. Pair ``pid`` has key
    ``p_key[pid]``, weighted count ``p_count[pid]`` and positions
    ``pool[p_start[pid]:p_start[pid] + p_len[pid]]``. The hash table maps
    keys to pair ids; the heap holds ``(count, key)`` of mergeable pairs.
    Returns the state tuple that :func:`train_rounds` takes and returns.
    """
    n = node.shape[0]
    tab_k, tab_v, tab_bits = _new_table(4096)
    p_key = np.empty(4096, np.int64)
    p_count = np.empty(4096, np.int64)
    p_len = np.empty(4096, np.int64)
    npairs = 0
    i = 0
    while True:
        i, npairs = _count_initial_pairs(node, doc, doc_weight, i, tab_k, tab_v, tab_bits,
                                         p_key, p_count, p_len, npairs)
        if i == n:
            break
        tab_k, tab_v, tab_bits = _reserve(tab_k, tab_v, tab_bits, 2 * npairs)
        p_key = _grow(p_key, 2 * npairs)
        p_count = _grow(p_count, 2 * npairs)
        p_len = _grow(p_len, 2 * npairs)
    p_start = np.empty(p_key.shape[0], np.int64)
    total = 0
    for pid in range(npairs):
        p_start[pid] = total
        total += p_len[pid]
    pool = np.empty(total + total // 4 + 64, np.int32)
    fill = p_start[:npairs].copy()
    for i in range(n):
        pid = node[i, 3]
        if pid >= 0:
            pool[fill[pid]] = i
            fill[pid] += 1
    keep = p_count[:npairs] >= min_frequency
    hk = p_key[:npairs][keep].copy()
    hc = p_count[:npairs][keep].copy()
    hsize = hk.shape[0]
    for i in range(hsize // 2 - 1, -1, -1):
        _sift_down(hc, hk, hsize, i)
    return (tab_k, tab_v, tab_bits, npairs, p_key, p_count, p_start, p_len, npairs,
            pool, total, hc, hk, hsize)


@njit(cache=True)
def _pop_candidates(hc, hk, hsize, tab_k, tab_v, tab_bits, p_count, n_candidates,
                    min_frequency, cand_k, cand_c):
    """Pop the most frequent pairs (count desc, key asc) into cand_k/cand_c.

    Entries whose stored count is out of date are pushed back with their
    true count (counts only fall after a push). Returns (n found, heap size).
    """
    nc = 0
    while nc < n_candidates and hsize > 0:
        c, k = hc[0], hk[0]
        hsize -= 1
        if hsize > 0:
            hc[0], hk[0] = hc[hsize], hk[hsize]
            _sift_down(hc, hk, hsize, 0)
        true = p_count[_lookup(tab_k, tab_v, tab_bits, k)]
        if true != c:
            if true >= min_frequency:
                hc[hsize], hk[hsize] = true, k
                hsize += 1
                _sift_up(hc, hk, hsize - 1)
            continue
        cand_k[nc] = k
        cand_c[nc] = c
        nc += 1
    return nc, hsize


@njit(cache=True)
def _select(cand_k, cand_c, nc, chosen, tab_k, tab_v, tab_bits, p_count, hc, hk, hsize):
    """Collision filter (same rules as ``_reference.select_candidates``).

    Writes the chosen candidates' indices to ``chosen``; pushes the others
    back into the heap. Returns (n chosen, heap size).
    """
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
            b1 = _lookup(tab_k, tab_v, tab_bits, _key(r2, l1))
            b2 = _lookup(tab_k, tab_v, tab_bits, _key(r1, l2))
            if (b1 >= 0 and p_count[b1] >= c2) or (b2 >= 0 and p_count[b2] >= c2):
                ok = False
                break
        if ok:
            chosen[nchosen] = ci
            nchosen += 1
        else:
            hc[hsize], hk[hsize] = c2, k2
            hsize += 1
            _sift_up(hc, hk, hsize - 1)
    return nchosen, hsize


@njit(cache=True)
def _merge_pair(node, doc, doc_weight, pool, start, length, pid, x, p_key, p_count,
                new_pid, n_slots, npairs, buf_pid, buf_p, nbuf):
    """Merge every live occurrence of pair ``pid`` into token ``x``, left to right.

    New pairs get ids from ``npairs`` on; their positions are appended to
    ``buf_pid``/``buf_p``. Returns (npairs, nbuf, df).
    """
    x_first = npairs
    df = 0
    last_doc = -1
    for t in range(start, start + length):
        i = pool[t]
        if node[i, 3] != pid:  # stale: merged away or changed since filed
            continue
        j = node[i, 1]
        d = doc[i]
        w = doc_weight[d]
        h = node[i, 2]
        m = node[j, 1]
        if h >= 0:
            p_count[node[h, 3]] -= w
        p_count[pid] -= w
        if m >= 0:
            p_count[node[j, 3]] -= w
        node[i, 0] = x
        node[j, 0] = -1
        node[j, 3] = -1
        node[i, 3] = -1
        node[i, 1] = m
        if m >= 0:
            node[m, 2] = i
        # the new pairs (tok[h], x) and (x, tok[m]) are found through
        # new_pid, indexed by the neighbour token c: [c] for (c, x),
        # [n_slots + c] for (x, c), and (x, x) at [x]
        for side in range(2):
            if side == 0:
                if h < 0:
                    continue
                c, pos = node[h, 0], h
                slot = c
            else:
                if m < 0:
                    continue
                c, pos = node[m, 0], i
                slot = c if c == x else n_slots + c
            npid = new_pid[slot]
            if npid < 0:
                npid = npairs
                npairs += 1
                new_pid[slot] = npid
                p_key[npid] = _key(c, x) if slot < n_slots else _key(x, c)
                p_count[npid] = 0
            p_count[npid] += w
            node[pos, 3] = npid
            buf_pid[nbuf] = npid
            buf_p[nbuf] = pos
            nbuf += 1
        if d != last_doc:
            df += w
            last_doc = d
    for npid in range(x_first, npairs):  # reset new_pid for the next merge
        nl, nr = p_key[npid] >> 32, p_key[npid] & _MASK
        new_pid[nl if nr == x else n_slots + nr] = -1
    return npairs, nbuf, df


@njit(cache=True)
def _file_new_pairs(buf_pid, buf_p, nbuf, first_new, npairs, pool, pool_len, p_key,
                    p_count, p_start, p_len, tab_k, tab_v, tab_bits, n_table, hc, hk, hsize,
                    min_frequency):
    """File a round's new pairs: a block of positions each, table and heap entries.

    Pairs created this round have the fresh ids first_new..npairs-1, so a
    counting sort groups the buffer. Each new pair is created in the loop of
    its newer token, which visits positions in ascending order, so every
    block is sorted. Positions whose pair changed again later in the round
    stay in the block and are skipped when it is used. A pair's count only
    falls after its creation round, so a pair below ``min_frequency`` now can
    never be merged, nor block a candidate in the border check (candidates
    reach min_frequency): it needs neither the heap nor the table (most new
    pairs of a text corpus occur once). Returns (pool_len, n_table, hsize).
    """
    n_new = npairs - first_new
    fill = np.zeros(n_new + 1, np.int64)
    for t in range(nbuf):
        fill[buf_pid[t] - first_new + 1] += 1
    for g in range(n_new):
        p_start[first_new + g] = pool_len + fill[g]
        p_len[first_new + g] = fill[g + 1]
        fill[g + 1] += fill[g]
    for t in range(nbuf):
        g = buf_pid[t] - first_new
        pool[pool_len + fill[g]] = buf_p[t]
        fill[g] += 1
    for pid in range(first_new, npairs):
        if p_count[pid] >= min_frequency:
            n_table += 1
            ts = _find_slot(tab_k, tab_bits, p_key[pid])
            tab_k[ts] = p_key[pid]
            tab_v[ts] = pid
            hc[hsize], hk[hsize] = p_count[pid], p_key[pid]
            hsize += 1
            _sift_up(hc, hk, hsize - 1)
    return pool_len + nbuf, n_table, hsize


@njit(cache=True)
def train_rounds(node, doc, doc_weight, state, merges, n_done, next_token, n_merges,
                 n_candidates, min_frequency, max_rounds):
    """Run up to ``max_rounds`` training rounds; see ``_reference.fit_reference``.

    ``state`` comes from :func:`init_training` or a previous call. ``merges``
    rows are ``(left, right, token, count, df)``. Returns the new state,
    ``n_done``, ``next_token`` and ``finished`` (True when no pair reaches
    ``min_frequency`` any more).
    """
    (tab_k, tab_v, tab_bits, n_table, p_key, p_count, p_start, p_len, npairs,
     pool, pool_len, hc, hk, hsize) = state
    cand_k = np.empty(n_candidates, np.int64)
    cand_c = np.empty(n_candidates, np.int64)
    chosen = np.empty(n_candidates, np.int64)
    buf_pid = np.empty(1024, np.int64)
    buf_p = np.empty(1024, np.int32)
    n_slots = next_token + n_merges - n_done + n_candidates
    new_pid = np.full(2 * n_slots, -1, np.int64)
    finished = False
    rounds = 0
    while n_done < n_merges and rounds < max_rounds:
        rounds += 1
        nc, hsize = _pop_candidates(hc, hk, hsize, tab_k, tab_v, tab_bits, p_count,
                                    n_candidates, min_frequency, cand_k, cand_c)
        if nc == 0:
            finished = True
            break
        nchosen, hsize = _select(cand_k, cand_c, nc, chosen, tab_k, tab_v, tab_bits,
                                 p_count, hc, hk, hsize)
        nbuf = 0
        first_new = npairs
        for q in range(nchosen):
            k = cand_k[chosen[q]]
            pid = _lookup(tab_k, tab_v, tab_bits, k)
            start, length = p_start[pid], p_len[pid]
            need = npairs + 2 * length  # at most two new pairs per occurrence
            if need > p_key.shape[0]:
                p_key = _grow(p_key, need)
                p_count = _grow(p_count, need)
                p_start = _grow(p_start, need)
                p_len = _grow(p_len, need)
            buf_pid = _grow(buf_pid, nbuf + 2 * length)
            buf_p = _grow(buf_p, nbuf + 2 * length)
            x = next_token
            next_token += 1
            npairs, nbuf, df = _merge_pair(node, doc, doc_weight, pool, start, length, pid, x,
                                           p_key, p_count, new_pid, n_slots, npairs,
                                           buf_pid, buf_p, nbuf)
            merges[n_done, 0] = k >> 32
            merges[n_done, 1] = k & _MASK
            merges[n_done, 2] = x
            merges[n_done, 3] = cand_c[chosen[q]]
            merges[n_done, 4] = df
            n_done += 1
        n_new = npairs - first_new
        pool = _grow(pool, pool_len + nbuf)
        hc = _grow(hc, hsize + n_new)
        hk = _grow(hk, hsize + n_new)
        tab_k, tab_v, tab_bits = _reserve(tab_k, tab_v, tab_bits, n_table + n_new)
        pool_len, n_table, hsize = _file_new_pairs(
            buf_pid, buf_p, nbuf, first_new, npairs, pool, pool_len, p_key, p_count,
            p_start, p_len, tab_k, tab_v, tab_bits, n_table, hc, hk, hsize, min_frequency)
    state = (tab_k, tab_v, tab_bits, n_table, p_key, p_count, p_start, p_len, npairs,
             pool, pool_len, hc, hk, hsize)
    return state, n_done, next_token, finished


# --- encoding ---------------------------------------------------------------

@njit(cache=True)
def expansions(alphabet_size, left, right, token):
    """Alphabet symbols of every token id: ``flat[start[t]:start[t + 1]]``.

    ``left``/``right``/``token`` are the merges in rank order, so a token's
    parts are expanded before it.
    """
    n_tokens = alphabet_size + token.shape[0]
    length = np.ones(n_tokens, np.int64)
    for r in range(token.shape[0]):
        length[token[r]] = length[left[r]] + length[right[r]]
    start = np.zeros(n_tokens + 1, np.int64)
    for t in range(n_tokens):
        start[t + 1] = start[t] + length[t]
    flat = np.empty(start[n_tokens], np.int32)
    for t in range(alphabet_size):
        flat[t] = t
    for r in range(token.shape[0]):
        s = start[token[r]]
        for src in (left[r], right[r]):
            for k in range(start[src], start[src + 1]):
                flat[s] = flat[k]
                s += 1
    return start, flat


@njit(cache=True)
def build_rank_table(left, right):
    """Hash table: pair key -> rank."""
    keys, vals, bits = _new_table(left.shape[0])
    for r in range(left.shape[0]):
        k = _key(left[r], right[r])
        s = _find_slot(keys, bits, k)
        keys[s] = k
        vals[s] = r
    return keys, vals, bits


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


@njit(cache=True)  # (batch encoding runs it in threads: kernels release the GIL)
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
