"""The segmentation encoders: "shortest" and "weighted" (and "merges" for reference)."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubpe import Tokenizer


def fit(alphabet, extra, docs, n_candidates=2):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Tokenizer(alphabet, alphabet + extra, n_candidates=n_candidates,
                         min_frequency=1).fit(docs)


def segmentations(tok, doc):
    """Every way to write ``doc`` as a sequence of vocabulary tokens (brute force)."""
    exp = {tuple(tok.decode([t]).tolist()): t for t in range(tok.n_tokens_)}
    longest = max(map(len, exp))

    def rec(i):
        if i == len(doc):
            yield []
            return
        for L in range(1, min(longest, len(doc) - i) + 1):
            t = exp.get(tuple(doc[i:i + L]))
            if t is not None:
                for rest in rec(i + L):
                    yield [t] + rest
    return list(rec(0))


def tfidf(tok, ids):
    weight = {int(t): w for t, w in zip(tok.merges_[:, 2], tok.weights_)}
    tf = {}
    for t in ids:
        tf[t] = tf.get(t, 0) + 1
    return sum((1 + math.log(c)) * weight.get(t, 0.0) for t, c in tf.items())


corpus = st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=12), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(docs=corpus, extra=st.integers(0, 12), probe=st.lists(st.integers(0, 2), max_size=40))
def test_every_method_decodes_exactly_and_shortest_is_never_longer(docs, extra, probe):
    tok = fit(3, extra, docs)
    for d in docs + [probe, []]:
        by_merges = tok.encode(d)
        shortest = tok.encode(d, method="shortest")
        assert len(shortest) <= len(by_merges)
        for ids in (by_merges, shortest, tok.encode(d, method="weighted")):
            assert tok.decode(ids).tolist() == list(d)


@settings(max_examples=80, deadline=None)
@given(docs=corpus, extra=st.integers(1, 10), probe=st.lists(st.integers(0, 2), max_size=9))
def test_shortest_and_weighted_match_brute_force(docs, extra, probe):
    tok = fit(3, extra, docs)
    rank = tok._token_rank
    for d in docs[:2] + [probe]:
        d = d[:9]
        every = segmentations(tok, d)
        best_len = min(len(s) for s in every)
        got = tok.encode(d, method="shortest").tolist()
        assert len(got) == best_len
        assert sum(rank[got]) == min(sum(rank[s]) for s in every if len(s) == best_len)
        # weighted: a beam holding every suffix segmentation makes the search exact
        ids = tok.encode(d, method="weighted", beam=512).tolist()
        best = max(tfidf(tok, seg) for seg in every)
        assert tfidf(tok, ids) == pytest.approx(best, abs=1e-9)
        # ties go to the shorter encoding
        assert len(ids) == min(len(seg) for seg in every
                               if math.isclose(tfidf(tok, seg), best, abs_tol=1e-9))


@settings(max_examples=50, deadline=None)
@given(docs=corpus, extra=st.integers(1, 10), probe=st.lists(st.integers(0, 2), max_size=8),
       top_n=st.integers(2, 6))
def test_weighted_top_n_is_the_best_n_by_brute_force(docs, extra, probe, top_n):
    tok = fit(3, extra, docs)
    every = segmentations(tok, probe)
    got = tok.encode_top_n(probe, top_n, beam=512)
    assert len(got) == min(top_n, len(every))
    assert len({tuple(ids.tolist()) for ids, _ in got}) == len(got)  # distinct
    keys = sorted((-round(tfidf(tok, s), 9), len(s)) for s in every)[:len(got)]
    assert [(-round(score, 9), len(ids)) for ids, score in got] == keys
    for ids, score in got:
        assert tok.score(ids) == pytest.approx(score)
        assert tok.decode(ids).tolist() == probe


def test_score_by_hand():
    # aaabdaaabac: merges aa (id 4), ab (5), (aa)(ab) (6), one document -> every idf = ln(2/2) = 0
    tok = Tokenizer(4, 7).fit([[0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2]])
    assert tok.score([6, 3, 6, 0, 2]) == 0.0
    two = Tokenizer(3, 4, min_frequency=1).fit([[0, 1], [2, 2], [2, 2]])
    # (2,2) in 2 of 3 documents: idf ln(4/3); used twice: (1 + ln 2) ln(4/3)
    assert two.score([3, 3, 0]) == pytest.approx((1 + math.log(2)) * math.log(4 / 3))


def test_shortest_beats_merges_on_real_signal(ecg_codes):
    docs = [ecg_codes[i:i + 2000] for i in range(0, 20000, 2000)]
    tok = Tokenizer(256, 1024, n_candidates=16).fit(docs)
    merges = sum(len(e) for e in tok.encode_batch(docs))
    shortest = tok.encode_batch(docs, method="shortest")
    assert all(np.array_equal(tok.decode(e), d) for e, d in zip(shortest, docs))
    assert sum(len(e) for e in shortest) <= merges
    weighted = tok.encode_batch(docs, method="weighted")
    assert sum(tok.score(e) for e in weighted) >= sum(tok.score(e) for e in tok.encode_batch(docs))


def test_method_errors():
    tok = Tokenizer(4, 7).fit([[0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2]])
    with pytest.raises(ValueError, match="unknown method 'longest'"):
        tok.encode([0], method="longest")
    with pytest.raises(ValueError, match="top_n must be an integer of at least 1"):
        tok.encode_top_n([0], 0)


# Runs: both encoders take the tokens of a run of one symbol from the trie's run tables
# (ubpe/_segment.py, "Runs") at a run of RUN_SKIP symbols or more.
def shortest_twin(tok, doc):
    """(number of tokens, lowest total rank) of the fewest-token encodings: a plain dynamic
    programme over every token that matches at every position (the readable twin)."""
    exp = {tuple(tok.decode([t]).tolist()): t for t in range(tok.n_tokens_)}
    rank = tok._token_rank
    best = [(0, 0)] + [(math.inf, math.inf)] * len(doc)
    for i in range(len(doc)):
        for j in range(i + 1, len(doc) + 1):
            t = exp.get(tuple(doc[i:j]))
            if t is not None:
                best[j] = min(best[j], (best[i][0] + 1, best[i][1] + int(rank[t])))
    return best[len(doc)]


def runs_of(draw_pairs):
    return [s for sym, n in draw_pairs for s in [sym] * n]


run_docs = st.lists(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 40)), min_size=1,
                             max_size=6).map(runs_of), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(docs=run_docs, extra=st.integers(1, 30),
       probe=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 90)), max_size=5).map(runs_of))
def test_runs_shortest_matches_the_twin(docs, extra, probe):
    tok = fit(3, extra, docs, n_candidates=3)
    for d in docs + [probe]:
        got = tok.encode(d, method="shortest")
        assert tok.decode(got).tolist() == d
        assert (len(got), int(tok._token_rank[got].sum())) == shortest_twin(tok, d)


@settings(max_examples=40, deadline=None)
@given(docs=run_docs, extra=st.integers(1, 12),
       probe=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 8)), max_size=3).map(runs_of))
def test_runs_weighted_matches_brute_force(docs, extra, probe):
    tok = fit(3, extra, docs, n_candidates=2)
    probe = probe[:12]
    every = segmentations(tok, probe)
    ids = tok.encode(probe, method="weighted", beam=1024).tolist()
    best = max(tfidf(tok, seg) for seg in every)
    assert tfidf(tok, ids) == pytest.approx(best, abs=1e-9)
    assert len(ids) == min(len(seg) for seg in every
                           if math.isclose(tfidf(tok, seg), best, abs_tol=1e-9))


def test_runs_by_hand():
    # tokens 0^2, 0^4, 0^8 from one run of 16 zeros: 13 zeros take three tokens, 0^8 0^4 0
    # in some order (the same total rank)
    tok = Tokenizer(2, 5, min_frequency=1).fit([[0] * 16])
    lengths = tok.token_lengths()
    assert sorted(lengths.tolist()) == [1, 1, 2, 4, 8]
    assert sorted(lengths[tok.encode([0] * 13, method="shortest")].tolist()) == [1, 4, 8]
    # tokens 0^2, 0^2 1, 0^4 1 (no 0^4): of 8 zeros then a 1, the last 4 zeros and the 1 are
    # one token, found from the run of 4 zeros that starts at position 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (three merges exist, not four)
        tok = Tokenizer(2, 6, min_frequency=1).fit([[0, 0, 0, 0, 1]] * 3)
    assert [tok.decode([t]).tolist() for t in range(2, 5)] == [[0, 0], [0, 0, 1], [0, 0, 0, 0, 1]]
    assert tok.encode([0] * 8 + [1], method="shortest").tolist() == [2, 2, 4]
