"""Encoders that search segmentations over the vocabulary (numba kernels).

Both walk a trie of token expansions (alphabet symbols), kept in the
open-addressing hash table of :mod:`ubpe._engine`: key ``node << 32 |
symbol`` -> child node. When two tokens expand to the same symbols, the trie
keeps the one of lower rank.

- :func:`shortest_docs`: dynamic programming over positions, exact: fewest
  tokens, ties broken by the lowest total rank (alphabet symbols rank 0, the
  merge of rank r ranks r + 1). O(n * depth) per document, depth being how
  far the trie matches from a position.
- :func:`weighted_docs`: UBPE's tf-idf objective (seed ``ubpe_part1.txt``
  and the reference package's encoder): maximise, over the distinct tokens t
  of an encoding, ``sum (1 + ln tf_t) * idf_t``; ties go to the shorter
  encoding. The objective is not additive over positions, so the search is a
  beam over suffixes, right to left: each start position keeps the ``beam``
  best encodings of the rest of the document. Each kept suffix stores its
  token counts in a persistent segment tree (a new version costs O(log V)
  nodes), so the exact score increment of prepending a token is known. It is
  exact whenever ``beam`` is at least the number of segmentations of every
  suffix (short documents); otherwise it is a heuristic that keeps more than
  the reference's ``top_n`` suffixes per position.
"""

from __future__ import annotations

import math

import numpy as np

from ._engine import _find_slot, _key, _lookup, _new_table
from ._jit import njit


@njit(cache=True)
def build_trie(exp_start, exp_flat, rank):
    """Trie of every token's expansion; returns (keys, vals, bits, node_token)."""
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
    return keys, vals, bits, node_token[:n_nodes].copy()


@njit(cache=True)  # (batch encoding runs it in threads: kernels release the GIL)
def shortest_docs(tokens, offsets, keys, vals, bits, node_token, rank):
    """Fewest-token segmentation of every document (ties: lowest total rank)."""
    n_docs = offsets.shape[0] - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    cnt = np.empty(longest + 1, np.int64)
    rsum = np.empty(longest + 1, np.int64)
    back = np.empty(longest + 1, np.int32)
    blen = np.empty(longest + 1, np.int64)
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
        for i in range(n):
            nd = 0
            for k in range(i, n):
                nd = _lookup(keys, vals, bits, _key(nd, tokens[s + k]))
                if nd < 0:
                    break
                t = node_token[nd]
                if t < 0:
                    continue
                c = cnt[i] + 1
                r = rsum[i] + rank[t]
                if c < cnt[k + 1] or (c == cnt[k + 1] and r < rsum[k + 1]):
                    cnt[k + 1] = c
                    rsum[k + 1] = r
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


@njit(cache=True)  # (batch encoding runs it in threads: kernels release the GIL)
def weighted_docs(tokens, offsets, keys, vals, bits, node_token, weight, beam, top_n):
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
        for i in range(n - 1, -1, -1):
            nc = 0
            nd = 0
            for k in range(i, n):
                nd = _lookup(keys, vals, bits, _key(nd, tokens[s + k]))
                if nd < 0:
                    break
                t = node_token[nd]
                if t < 0:
                    continue
                w = weight[t]
                for h in range(first[k + 1], first[k + 1] + count[k + 1]):
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
