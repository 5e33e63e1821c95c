"""Readable pure-Python twin of the training and encoding engine.

This module defines *what* UBPE training and rank-order encoding compute.
The fast engine in :mod:`ubpe._engine` must produce identical merges and
identical encodings; the tests compare the two on random and real corpora.
Nothing here is tuned for speed: every training round recounts all pairs.

Training follows the UBPE fitting algorithm (the article "UBPE Tokenizers.
Creating a BPE tokenizer from scratch" by the author of the ``ubpe`` package
on PyPI), which extends classic BPE (Sennrich et al., 2016, "Neural Machine
Translation of Rare Words with Subword Units") with several merges per round.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple


class Merge(NamedTuple):
    """One learned merge, in creation (rank) order.

    ``token`` is the id the pair received when it was created
    (``alphabet_size + rank``); ``count`` the weighted number of pair
    occurrences when it was chosen; ``df`` the weighted number of documents
    that contained the new token right after its creation.
    """

    left: int
    right: int
    token: int
    count: int  # type: ignore[assignment]  # shadows tuple.count, on purpose
    df: int


def select_candidates(ranked, count):
    """Filter one round's candidates so that their merges never collide.

    Parameters
    ----------
    ranked : list of ((int, int), int)
        The round's most frequent pairs with their counts, best first
        (count descending, then pair ascending).
    count : Mapping[(int, int), int]
        Count of every adjacent pair in the corpus (missing pairs count 0).

    Returns
    -------
    list of ((int, int), int)
        The chosen pairs, in the order given. The first candidate is always
        chosen. A later pair ``(l2, r2)`` with count ``n2`` is chosen only if
        it shares no token with an already chosen pair ``(l1, r1)`` and both
        border pairs ``(r2, l1)`` and ``(r1, l2)`` occur fewer than ``n2``
        times (otherwise merging it would destroy a pair at least as good).
    """
    chosen = [ranked[0]]
    used = set(ranked[0][0])
    for (l2, r2), n2 in ranked[1:]:
        if l2 in used or r2 in used:
            continue
        if all(count.get((r2, l1), 0) < n2 and count.get((r1, l2), 0) < n2
               for (l1, r1), _ in chosen):
            chosen.append(((l2, r2), n2))
            used.update((l2, r2))
    return chosen


def fit_reference(corpus: Sequence[Sequence[int]], weights: Sequence[int],
                  alphabet_size: int, n_merges: int, n_candidates: int,
                  min_frequency: int) -> list[Merge]:
    """Learn merges until at least ``n_merges`` exist or no pair qualifies.

    Each round counts every adjacent pair (weighted by its document's
    weight), ranks pairs by (count descending, pair ascending), keeps the
    ``n_candidates`` best with count >= ``min_frequency``, filters them with
    :func:`select_candidates` and merges every chosen pair in every document,
    left to right. The last round may overshoot ``n_merges``; the caller
    trims. Returns the merges in creation order.
    """
    docs = [list(doc) for doc in corpus]
    merges: list[Merge] = []
    next_token = alphabet_size
    while len(merges) < n_merges:
        count: Counter = Counter()
        for doc, w in zip(docs, weights):
            for pair in zip(doc, doc[1:]):
                count[pair] += w
        ranked = heapq.nsmallest(n_candidates, count.items(),
                                 key=lambda kv: (-kv[1], kv[0]))
        ranked = [kv for kv in ranked if kv[1] >= min_frequency]
        if not ranked:
            break
        chosen = select_candidates(ranked, count)
        new_token = {}
        for pair, _ in chosen:
            new_token[pair] = next_token
            next_token += 1
        df: Counter = Counter()
        for i, (doc, w) in enumerate(zip(docs, weights)):
            out, seen, j = [], set(), 0
            while j < len(doc):
                token = new_token.get(tuple(doc[j:j + 2]))
                if token is None:
                    out.append(doc[j])
                    j += 1
                else:
                    out.append(token)
                    seen.add(token)
                    j += 2
            for token in seen:
                df[token] += w
            docs[i] = out
        for pair, n in chosen:
            token = new_token[pair]
            merges.append(Merge(pair[0], pair[1], token, n, df[token]))
    return merges


def encode_reference(doc: Sequence[int], ranks: dict) -> list[int]:
    """Encode one document by applying merges in rank order.

    ``ranks`` maps a pair ``(left, right)`` to ``(rank, token)``. While any
    adjacent pair has a rank, the lowest-rank pair is merged at every
    occurrence, left to right (minbpe's ``encode``).
    """
    ids = list(doc)
    while len(ids) >= 2:
        best = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, (float("inf"),))[0])
        if best not in ranks:
            break
        token = ranks[best][1]
        out, j = [], 0
        while j < len(ids):
            if j + 1 < len(ids) and (ids[j], ids[j + 1]) == best:
                out.append(token)
                j += 2
            else:
                out.append(ids[j])
                j += 1
        ids = out
    return ids
