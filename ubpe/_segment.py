"""Encoders that search segmentations over the vocabulary (numba kernels).

Both walk a trie of token expansions (alphabet symbols), kept in the
open-addressing hash table of :mod:`ubpe._engine`: key ``node << 32 |
symbol`` -> child node. When two tokens expand to the same symbols, the trie
keeps the one of lower rank.

- :func:`shortest_docs`: dynamic programming over positions, exact: fewest
  tokens, ties broken by the lowest total rank (alphabet symbols rank 0, the
  merge of rank r ranks r + 1). O(n * depth) per document, depth being how
  far the trie matches from a position beyond the run of equal symbols that
  starts there (see "Runs" below).
- :func:`weighted_docs`: UBPE's tf-idf objective (the UBPE article and
  the reference ``ubpe`` package's encoder): maximise, over the distinct tokens t
  of an encoding, ``sum (1 + ln tf_t) * idf_t``; ties go to the shorter
  encoding. The objective is not additive over positions, so the search is a
  beam over suffixes, right to left: each start position keeps the ``beam``
  best encodings of the rest of the document. Each kept suffix stores its
  token counts in a persistent segment tree (a new version costs O(log V)
  nodes), so the exact score increment of prepending a token is known. It is
  exact whenever ``beam`` is at least the number of segmentations of every
  suffix (short documents); otherwise it is a heuristic that keeps more than
  the reference's ``top_n`` suffixes per position.

Runs. A vocabulary fitted on a signal that idles holds tokens of long runs of
one symbol (``c`` repeated 2,000 times): a plain trie walk from every position of
such a run goes as deep as the longest of them, O(run * longest token). Both
encoders instead take, at a position where a run of ``r`` equal symbols ``c``
starts, the tokens ``c^d`` (``d <= r``) from a list of those lengths, then walk
the trie from the node of ``c^r`` past the run's end (only a token that holds
the whole run can go on with another symbol). The edges are the same, in the
same order (ascending length), so the results are the same; the cost of a
position is the number of run tokens that fit plus the walk past the run.
"""

from __future__ import annotations

import math

import numpy as np

from ._engine import _find_slot, _key, _lookup, _new_table
from ._jit import njit

RUN_SKIP = 4  # the shortest run that the encoders take through the run tables (module docstring)


@njit(cache=True)
def build_trie(exp_start, exp_flat, rank):
    """Trie of every token's expansion, and its runs (module docstring, "Runs").

    Returns ``(keys, vals, bits, node_token, run_info, run_flat)``: the trie's
    hash table; ``node_token[node]``, the token of lowest rank that expands to
    the node's symbols (-1: none); for the node of a single symbol ``c``,
    ``run_info[node] = (off, depth, n_ends)``, where ``depth`` is the longest
    ``d`` such that ``c^d`` is a node, ``run_flat[off + d - 1]`` the node of
    ``c^d`` (``1 <= d <= depth``), and the ``n_ends`` values after those the
    lengths ``d`` (ascending) at which ``c^d`` is a token.
    """
    n_tokens = exp_start.shape[0] - 1
    keys, vals, bits = _new_table(exp_flat.shape[0] + 1)
    node_token = np.full(exp_flat.shape[0] + 1, -1, np.int32)
    n_nodes = 1
    for t in range(n_tokens):
        nd = 0
        for k in range(exp_start[t], exp_start[t + 1]):
            key = _key(nd, exp_flat[k])
            s = _find_slot(keys, bits, key)
            if keys[s] == key:
                nd = vals[s]
            else:
                keys[s] = key
                vals[s] = n_nodes
                nd = n_nodes
                n_nodes += 1
        if node_token[nd] < 0 or rank[t] < rank[node_token[nd]]:
            node_token[nd] = t
    run_info = np.zeros((n_nodes, 3), np.int64)
    run_sym = np.full(n_nodes, -1, np.int64)
    total = 0
    for t in range(n_tokens):  # every first symbol's run: its depth and number of tokens
        if exp_start[t + 1] == exp_start[t]:
            continue
        c = exp_flat[exp_start[t]]
        nd1 = _lookup(keys, vals, bits, _key(0, c))
        if run_sym[nd1] >= 0:
            continue
        run_sym[nd1] = c
        nd, depth, ends = nd1, 0, 0
        while nd >= 0:
            depth += 1
            ends += node_token[nd] >= 0
            nd = _lookup(keys, vals, bits, _key(nd, c))
        run_info[nd1, 0] = total
        run_info[nd1, 1] = depth
        run_info[nd1, 2] = ends
        total += depth + ends
    run_flat = np.empty(total, np.int64)
    for nd1 in range(n_nodes):  # then its nodes and token lengths
        c = run_sym[nd1]
        if c < 0:
            continue
        off, depth = run_info[nd1, 0], run_info[nd1, 1]
        e = off + depth
        nd = nd1
        for d in range(1, depth + 1):
            run_flat[off + d - 1] = nd
            if node_token[nd] >= 0:
                run_flat[e] = d
                e += 1
            nd = _lookup(keys, vals, bits, _key(nd, c))
    return keys, vals, bits, node_token[:n_nodes].copy(), run_info, run_flat


@njit(cache=True, inline="always")
def _run_lengths(tokens, s, n, run):
    """``run[i]``: the number of symbols equal to ``tokens[s + i]`` from ``i`` on (< ``n``)."""
    if n > 0:
        run[n - 1] = 1
    for i in range(n - 2, -1, -1):
        run[i] = run[i + 1] + 1 if tokens[s + i] == tokens[s + i + 1] else 1


@njit(cache=True)
def _run_tokens(keys, vals, bits, run_info, run_flat, c, r):
    """At a run of ``r`` symbols ``c`` (``build_trie``'s run tables): ``(off, depth, stop)``, the
    lengths ``d <= r`` of the tokens ``c^d`` being ``run_flat[off + depth:stop]`` (ascending;
    the node of ``c^d`` is ``run_flat[off + d - 1]``). A binary search over the lengths."""
    nd1 = _lookup(keys, vals, bits, _key(0, c))
    off, depth = run_info[nd1, 0], run_info[nd1, 1]
    lo, hi = off + depth, off + depth + run_info[nd1, 2]
    while lo < hi:  # the first length above r
        mid = (lo + hi) >> 1
        if run_flat[mid] <= r:
            lo = mid + 1
        else:
            hi = mid
    return off, depth, lo


@njit(cache=True, inline="always")
def _relax(cnt, rsum, back, blen, i, j, t, rank):
    """The edge from position ``i`` to ``j`` through token ``t`` (shortest_docs' run tokens)."""
    c = cnt[i] + 1
    r = rsum[i] + rank[t]
    if c < cnt[j] or (c == cnt[j] and r < rsum[j]):
        cnt[j] = c
        rsum[j] = r
        back[j] = t
        blen[j] = j - i


@njit(cache=True)  # (batch encoding runs it in threads: kernels release the GIL)
def shortest_docs(tokens, offsets, keys, vals, bits, node_token, run_info, run_flat, rank):
    """Fewest-token segmentation of every document (ties: lowest total rank)."""
    n_docs = offsets.shape[0] - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    cnt = np.empty(longest + 1, np.int64)
    rsum = np.empty(longest + 1, np.int64)
    back = np.empty(longest + 1, np.int32)
    blen = np.empty(longest + 1, np.int64)
    run = np.empty(longest + 1, np.int64)
    out = np.empty(tokens.shape[0], np.int32)
    out_off = np.zeros(n_docs + 1, np.int64)
    nout = 0
    big = np.int64(1) << 62
    for d in range(n_docs):
        s, e = offsets[d], offsets[d + 1]
        n = e - s
        cnt[: n + 1] = big
        cnt[0] = 0
        rsum[0] = 0
        _run_lengths(tokens, s, n, run)
        for i in range(n):
            nd, k0 = 0, i
            r = run[i]
            if r >= RUN_SKIP:  # a run of r symbols c: the tokens c^d (d <= r), then past the run
                off, depth, stop = _run_tokens(keys, vals, bits, run_info, run_flat, tokens[s + i], r)
                for q in range(off + depth, stop):
                    dl = run_flat[q]
                    _relax(cnt, rsum, back, blen, i, i + dl, node_token[run_flat[off + dl - 1]],
                           rank)
                if r > depth:
                    continue  # no token holds the whole run
                nd, k0 = run_flat[off + r - 1], i + r
            for k in range(k0, n):
                nd = _lookup(keys, vals, bits, _key(nd, tokens[s + k]))
                if nd < 0:
                    break
                t = node_token[nd]
                if t < 0:
                    continue
                c = cnt[i] + 1
                rs = rsum[i] + rank[t]
                if c < cnt[k + 1] or (c == cnt[k + 1] and rs < rsum[k + 1]):
                    cnt[k + 1] = c
                    rsum[k + 1] = rs
                    back[k + 1] = t
                    blen[k + 1] = k + 1 - i
        m = cnt[n]
        j = n
        for q in range(m - 1, -1, -1):
            out[nout + q] = back[j]
            j -= blen[j]
        nout += m
        out_off[d + 1] = nout
    return out[:nout], out_off


# --- persistent segment tree of token counts (node 0: the empty tree) --------

@njit(cache=True, inline="always")
def _pt_count(lc, rc, cnt, root, t, bits):
    cur = root
    for level in range(bits - 1, -1, -1):
        if cur == 0:
            return 0
        cur = rc[cur] if (t >> level) & 1 else lc[cur]
    return cnt[cur]


@njit(cache=True, inline="always")
def _pt_add(lc, rc, cnt, n_nodes, root, t, bits):
    """New version of ``root`` with one more ``t``; returns (new root, n_nodes)."""
    new_root = n_nodes
    old = root
    cur = n_nodes
    n_nodes += 1
    for level in range(bits - 1, -1, -1):
        cnt[cur] = cnt[old] + 1
        lc[cur] = lc[old]
        rc[cur] = rc[old]
        child = n_nodes
        n_nodes += 1
        if (t >> level) & 1:
            old = rc[old]
            rc[cur] = child
        else:
            old = lc[old]
            lc[cur] = child
        cur = child
    cnt[cur] = cnt[old] + 1
    lc[cur] = 0
    rc[cur] = 0
    return new_root, n_nodes


@njit(cache=True, inline="always")
def _better(s1, l1, s2, l2):
    # scores equal up to rounding (the same sum added in another order) are
    # ties, and ties go to the shorter encoding
    tol = 1e-9 * max(1.0, abs(s1), abs(s2))
    if abs(s1 - s2) <= tol:
        return l1 < l2
    return s1 > s2


@njit(cache=True, inline="always")
def _w_edge(t, j, first, count, h_score, h_len, h_root, lc, rc, cnt, tbits, weight,
            c_score, c_len, c_tok, c_tail, nc, beam):
    """Every kept suffix from ``j`` behind token ``t``, into the candidates of the current
    position (weighted_docs); the new number of candidates."""
    w = weight[t]
    for h in range(first[j], first[j] + count[j]):
        delta = 0.0
        if w > 0.0:
            c = _pt_count(lc, rc, cnt, h_root[h], t, tbits)
            delta = w if c == 0 else w * (math.log(c + 1.0) - math.log(c))
        sc = h_score[h] + delta
        ln = h_len[h] + 1
        if nc == beam and not _better(sc, ln, c_score[nc - 1], c_len[nc - 1]):
            continue
        q = nc if nc < beam else beam - 1
        while q > 0 and _better(sc, ln, c_score[q - 1], c_len[q - 1]):
            if q < beam:
                c_score[q] = c_score[q - 1]
                c_len[q] = c_len[q - 1]
                c_tok[q] = c_tok[q - 1]
                c_tail[q] = c_tail[q - 1]
            q -= 1
        c_score[q] = sc
        c_len[q] = ln
        c_tok[q] = t
        c_tail[q] = h
        if nc < beam:
            nc += 1
    return nc


@njit(cache=True)  # (batch encoding runs it in threads: kernels release the GIL)
def weighted_docs(tokens, offsets, keys, vals, bits, node_token, run_info, run_flat, weight,
                  beam, top_n):
    """Beam search for UBPE's tf-idf objective; see the module docstring.

    Returns the concatenated encodings (``top_n`` per document at most, best
    first), their offsets, their scores, and per document the offset of its
    first encoding in that list.
    """
    n_docs = offsets.shape[0] - 1
    n_tokens = weight.shape[0]
    tbits = 1
    while (1 << tbits) < n_tokens:
        tbits += 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    cap = (longest + 1) * beam + 1
    h_score = np.empty(cap)
    h_len = np.empty(cap, np.int64)
    h_tok = np.empty(cap, np.int32)
    h_tail = np.empty(cap, np.int64)
    h_root = np.empty(cap, np.int64)
    first = np.empty(longest + 1, np.int64)
    count = np.empty(longest + 1, np.int64)
    run = np.empty(longest + 1, np.int64)
    node_cap = cap * (tbits + 1) + 1
    lc = np.zeros(node_cap, np.int32)
    rc = np.zeros(node_cap, np.int32)
    cnt = np.zeros(node_cap, np.int32)
    c_score = np.empty(beam)
    c_len = np.empty(beam, np.int64)
    c_tok = np.empty(beam, np.int32)
    c_tail = np.empty(beam, np.int64)
    out_tok = []
    out_off = [0]
    out_score = []
    doc_first = np.zeros(n_docs + 1, np.int64)
    for d in range(n_docs):
        s, e = offsets[d], offsets[d + 1]
        n = e - s
        nh = 1
        n_nodes = 1
        first[n] = 0
        count[n] = 1
        h_score[0] = 0.0
        h_len[0] = 0
        h_tok[0] = -1
        h_tail[0] = -1
        h_root[0] = 0
        _run_lengths(tokens, s, n, run)
        for i in range(n - 1, -1, -1):
            nc = 0
            nd, k0 = 0, i
            r = run[i]
            if r >= RUN_SKIP:  # a run of r symbols c: the tokens c^d (d <= r), then past the run
                off, depth, stop = _run_tokens(keys, vals, bits, run_info, run_flat, tokens[s + i], r)
                for q in range(off + depth, stop):
                    dl = run_flat[q]
                    nc = _w_edge(node_token[run_flat[off + dl - 1]], i + dl, first, count, h_score,
                                 h_len, h_root, lc, rc, cnt, tbits, weight, c_score, c_len, c_tok,
                                 c_tail, nc, beam)
                nd, k0 = (run_flat[off + r - 1], i + r) if r <= depth else (0, n)
            for k in range(k0, n):
                nd = _lookup(keys, vals, bits, _key(nd, tokens[s + k]))
                if nd < 0:
                    break
                t = node_token[nd]
                if t >= 0:
                    nc = _w_edge(t, k + 1, first, count, h_score, h_len, h_root, lc, rc, cnt,
                                 tbits, weight, c_score, c_len, c_tok, c_tail, nc, beam)
            first[i] = nh
            count[i] = nc
            for q in range(nc):
                h = nh
                nh += 1
                h_score[h] = c_score[q]
                h_len[h] = c_len[q]
                h_tok[h] = c_tok[q]
                h_tail[h] = c_tail[q]
                if weight[c_tok[q]] > 0.0:
                    h_root[h], n_nodes = _pt_add(lc, rc, cnt, n_nodes, h_root[c_tail[q]],
                                                 c_tok[q], tbits)
                else:
                    h_root[h] = h_root[c_tail[q]]
        start = first[0] if n > 0 else 0
        found = count[0] if n > 0 else 1
        for h in range(start, start + min(top_n, found)):
            out_score.append(h_score[h])
            g = h
            while h_tok[g] >= 0:
                out_tok.append(h_tok[g])
                g = h_tail[g]
            out_off.append(len(out_tok))
        doc_first[d + 1] = len(out_score)
    return (np.array(out_tok, dtype=np.int32), np.array(out_off, dtype=np.int64),
            np.array(out_score), doc_first)
