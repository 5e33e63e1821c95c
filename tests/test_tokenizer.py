import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubpe import FormatError, Tokenizer, _engine
from ubpe._reference import encode_reference, fit_reference, select_candidates
from ubpe.tokenizer import _flatten_documents


def _flat(docs):
    return _engine.layout(*_flatten_documents([np.asarray(d, np.int64) for d in docs], 2**30))


def fit_quiet(tok, corpus, counts=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tok.fit(corpus, counts)


def test_classic_golden_aaabdaaabac():
    # a=0 b=1 c=2 d=3; Wikipedia's example: aa -> Z, ab -> Y, ZY -> X gives "XdXac"
    doc = [0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2]
    tok = Tokenizer(4, 7).fit([doc])
    assert tok.merges_.tolist() == [[0, 0, 4], [0, 1, 5], [4, 5, 6]]
    assert tok.counts_.tolist() == [4, 2, 2]  # (a,a) occurs at 4 overlapping positions
    assert tok.encode(doc).tolist() == [6, 3, 6, 0, 2]
    assert tok.decode([6, 3, 6, 0, 2]).tolist() == doc


def test_run_of_one_symbol_merges_left_to_right():
    tok = Tokenizer(2, 3, min_frequency=1).fit([[1, 1, 1]])
    assert tok.merges_.tolist() == [[1, 1, 2]]
    assert tok.encode([1, 1, 1]).tolist() == [2, 1]
    assert tok.encode([1, 1, 1, 1, 1]).tolist() == [2, 2, 1]


def test_select_candidates_rules_by_hand():
    ranked = [((0, 1), 10), ((1, 2), 9), ((3, 4), 8), ((5, 6), 7), ((7, 8), 6)]
    count = {(0, 1): 10, (1, 2): 9, (3, 4): 8, (4, 0): 8, (5, 6): 7, (1, 5): 3, (7, 8): 6}
    # (1,2) shares token 1; (3,4) would destroy border pair (4,0), as frequent as itself
    assert [p for p, _ in select_candidates(ranked, count)] == [(0, 1), (5, 6), (7, 8)]


def test_one_round_obeys_collision_rules():
    # documents of length 2 carry exactly one pair each; counts give their frequency
    docs = [[0, 1], [1, 2], [3, 4], [4, 0], [5, 6], [1, 5], [7, 8]]
    counts = [10, 9, 8, 8, 7, 3, 6]
    tok = Tokenizer(9, 12, n_candidates=6).fit(docs, counts)
    # one round: (0,1) first; (1,2) and (4,0) share a token; (3,4) loses to border (4,0)
    assert tok.merges_[:, :2].tolist() == [[0, 1], [5, 6], [7, 8]]
    assert tok.counts_.tolist() == [10, 7, 6]
    # IDF over the 51 weighted documents, ids ordered by weight (most widespread first)
    assert np.allclose(tok.weights_, np.log(52 / np.array([11, 8, 7])))
    assert tok.merges_[:, 2].tolist() == [9, 10, 11]


def test_n_candidates_one_is_classic_bpe(ecg_codes):
    docs = [ecg_codes[:3000], ecg_codes[3000:6000]]
    tok = Tokenizer(256, 320).fit(docs)
    ref = fit_reference([d.tolist() for d in docs], [1, 1], 256, 64, 1, 2)
    # classic BPE: one merge per round, the most frequent pair (ties: smallest pair)
    assert [(m.left, m.right, m.count) for m in ref] == _by_rank(tok)
    for m, prev in zip(ref[1:], ref):
        assert m.count <= prev.count


def _by_rank(tok):
    """Merges in creation numbering (token = alphabet_size + rank)."""
    a = tok.alphabet_size
    back = {int(t): a + r for r, t in enumerate(tok.merges_[:, 2])}
    f = lambda t: back.get(int(t), int(t))
    return [(f(l), f(r), int(c)) for (l, r, _), c in zip(tok.merges_, tok.counts_)]


@pytest.mark.parametrize("n_candidates", [1, 3, 16])
def test_engine_matches_reference_on_real_signal(ecg_codes, n_candidates):
    docs = [ecg_codes[i:i + 1000] for i in range(0, 8000, 1000)]
    tok = Tokenizer(256, 400, n_candidates=n_candidates)
    got = tok._train(*_flat(docs), np.ones(len(docs), np.int64), 144)
    ref = fit_reference([d.tolist() for d in docs], [1] * len(docs), 256, 144, n_candidates, 2)
    assert [tuple(r) for r in got.tolist()] == [tuple(m) for m in ref]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), alphabet=st.integers(2, 6), n_candidates=st.integers(1, 6),
       extra=st.integers(0, 25), min_frequency=st.integers(1, 3))
def test_engine_matches_reference_random(data, alphabet, n_candidates, extra, min_frequency):
    docs = data.draw(st.lists(st.lists(st.integers(0, alphabet - 1), max_size=40), max_size=6))
    counts = data.draw(st.lists(st.integers(1, 4), min_size=len(docs), max_size=len(docs)))
    tok = Tokenizer(alphabet, alphabet + extra, n_candidates=n_candidates,
                    min_frequency=min_frequency)
    got = tok._train(*_flat(docs), np.asarray(counts, np.int64), extra)
    ref = fit_reference(docs, counts, alphabet, extra, n_candidates, min_frequency)
    assert [tuple(r) for r in got.tolist()] == [tuple(m) for m in ref]
    fit_quiet(tok, docs, counts)
    ranks = {(l, r): (i, t) for i, (l, r, t) in enumerate(tok.merges_.tolist())}
    probe = data.draw(st.lists(st.integers(0, alphabet - 1), max_size=60))
    for d in docs + [probe]:
        assert tok.encode(d).tolist() == encode_reference(d, ranks)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), alphabet=st.sampled_from([2, 3, 17, 256, 1000, 2**16, 2**20]),
       n_candidates=st.integers(1, 8))
def test_round_trip(data, alphabet, n_candidates):
    symbols = st.integers(0, alphabet - 1)
    # few distinct symbols, so that pairs repeat even in large alphabets
    pool = data.draw(st.lists(symbols, min_size=1, max_size=5))
    docs = data.draw(st.lists(st.lists(st.sampled_from(pool), max_size=50), max_size=5))
    tok = fit_quiet(Tokenizer(alphabet, alphabet + 20, n_candidates=n_candidates), docs)
    probes = docs + [[], [pool[0]], data.draw(st.lists(symbols, max_size=30))]
    for d in probes:
        enc = tok.encode(d)
        assert enc.dtype == np.int32 and len(enc) <= len(d)
        assert tok.decode(enc).tolist() == list(d)
    assert [x.tolist() for x in tok.decode_batch(tok.encode_batch(probes))] == probes


def test_trim_is_closed_and_no_worse_than_stopping(ecg_codes):
    docs = [ecg_codes[i:i + 2000] for i in range(0, 20000, 2000)]
    vocab = 256 + 300
    tok = Tokenizer(256, vocab, n_candidates=50).fit(docs)
    assert tok.n_tokens_ == vocab
    defined = set(range(256))
    for left, right, token in tok.merges_.tolist():  # closure, in rank order
        assert left in defined and right in defined
        defined.add(token)
    assert defined == set(range(vocab))
    # stopping at vocab_size: the first 300 merges of a longer run on the same corpus
    longer = Tokenizer(256, vocab + 200, n_candidates=50).fit(docs)
    stopped = Tokenizer.from_dict({**longer.to_dict(),
                                   "params": {**longer.to_dict()["params"], "vocab_size": vocab},
                                   "merges": _renumber(longer.merges_[:300], 256),
                                   "weights": longer.weights_[:300].tolist(),
                                   "counts": longer.counts_[:300].tolist()})
    ours = sum(len(e) for e in tok.encode_batch(docs))
    assert ours <= sum(len(e) for e in stopped.encode_batch(docs))
    # the last round really overshot, so the trim did something
    assert tok.counts_[-1] >= longer.counts_[300]


def _renumber(merges, alphabet):
    """Give a prefix of merges compact ids alphabet..alphabet+m-1, keeping rank order."""
    ids = {t: alphabet + r for r, t in enumerate(merges[:, 2].tolist())}
    f = lambda t: ids.get(t, t)
    return [[f(l), f(r), f(t)] for l, r, t in merges.tolist()]


def test_token_ids_list_parts_first(ecg_codes):
    tok = Tokenizer(256, 600, n_candidates=8).fit([ecg_codes[i:i + 500]
                                                  for i in range(0, 20000, 500)])
    assert (tok.merges_[:, 2] > tok.merges_[:, 0]).all()
    assert (tok.merges_[:, 2] > tok.merges_[:, 1]).all()
    order = np.argsort(tok.merges_[:, 2])
    assert (np.diff(tok.weights_[order]) >= 0).all()


def test_deterministic_and_save_load(tmp_path, ecg_codes):
    docs = [ecg_codes[i:i + 4000] for i in range(0, 20000, 4000)]
    a = Tokenizer(256, 700, n_candidates=10).fit(docs)
    b = Tokenizer(256, 700, n_candidates=10).fit(docs)
    a.save(tmp_path / "a.json")
    b.save(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    c = Tokenizer.load(tmp_path / "a.json")
    assert c.to_dict()["params"] == a.to_dict()["params"]
    assert np.array_equal(c.merges_, a.merges_) and np.array_equal(c.weights_, a.weights_)
    for d in docs:
        assert np.array_equal(c.encode(d), a.encode(d))
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["format"] == "ubpe.tokenizer" and doc["version"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json"]  # no temp files


def test_load_rejects_foreign_and_newer_files(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps({"format": "something-else", "version": 1}))
    with pytest.raises(FormatError, match="format is 'something-else'"):
        Tokenizer.load(p)
    tok = Tokenizer(4, 7).fit([[0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2]])
    p.write_text(json.dumps({**tok.to_dict(), "version": 99}))
    with pytest.raises(FormatError, match="version 99 is newer"):
        Tokenizer.load(p)
    p.write_text("not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        Tokenizer.load(p)
    bad = tok.to_dict()
    bad["merges"] = [[0, 6, 4], [0, 1, 5], [4, 5, 6]]
    with pytest.raises(FormatError, match="merge rank 0"):
        Tokenizer.from_dict(bad)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"vocab_size \(3\) is smaller than the alphabet \(4\)"):
        Tokenizer(4, 3)
    with pytest.raises(ValueError, match="n_candidates must be >= 1"):
        Tokenizer(4, 8, n_candidates=0)
    tok = Tokenizer(4, 6)
    with pytest.raises(ValueError, match="document 1, position 2: symbol 9 is outside"):
        tok.fit([[0, 1], [1, 2, 9]])
    with pytest.raises(TypeError, match="expected integers"):
        tok.fit([[0.5, 1.0]])
    with pytest.raises(ValueError, match="not fitted"):  # (NotFittedError, as scikit-learn's)
        tok.encode([0])
    tok.fit([[0, 1, 0, 1, 0, 1]])
    with pytest.raises(ValueError, match="position 1: token id 6 is not in the vocabulary"):
        tok.decode([0, 6])
    with pytest.raises(ValueError, match="position 0: symbol -1"):
        tok.encode([-1, 0])


def test_small_corpus_warns_and_keeps_what_it_learned():
    with pytest.warns(UserWarning, match="supports only 1 merges"):
        tok = Tokenizer(3, 10).fit([[0, 1, 0, 1]])
    assert tok.n_tokens_ == 4
    assert tok.encode([0, 1, 0, 1]).tolist() == [3, 3]


def test_document_counts_equal_repeated_documents():
    docs = [[0, 1, 2, 0, 1], [2, 2, 1, 0], [1, 2, 1, 2]]
    counts = [3, 1, 2]
    a = Tokenizer(3, 8, n_candidates=2, min_frequency=1).fit(docs, counts)
    b = Tokenizer(3, 8, n_candidates=2, min_frequency=1).fit(
        [d for d, c in zip(docs, counts) for _ in range(c)])
    assert a.to_dict()["merges"] == b.to_dict()["merges"]
    assert np.allclose(a.weights_, b.weights_) and a.n_documents_ == 6


def test_a_changed_hyperparameter_does_not_change_the_fitted_alphabet():
    # (alphabet_size raised after fit let symbols past the tables in: wrong ids, then a segfault)
    tok = Tokenizer(4, 7, n_candidates=1).fit([np.array([0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2])])
    tok.alphabet_size = 1000
    for method in ("merges", "shortest", "weighted"):
        with pytest.raises(ValueError, match="outside"):
            tok.encode(np.array([0, 900, 0]), method=method)
    assert tok.n_tokens_ == 7 and tok.to_dict()["params"]["alphabet_size"] == 4


def test_beam_top_n_and_counts_are_checked():
    tok = Tokenizer(4, 7).fit([np.array([0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2])])
    doc = np.array([0, 0, 1])
    for beam in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="beam"):
            tok.encode(doc, method="weighted", beam=beam)
    with pytest.raises(ValueError, match="top_n"):
        tok.encode_top_n(doc, 1.5)
    docs = [np.array([0, 1, 0, 1]), np.array([1, 0])]
    for counts in (np.array([2**63, 1], np.uint64), [2**62, 2**62]):
        with pytest.raises(ValueError, match="counts"):
            Tokenizer(4, 7).fit(docs, counts=counts)


def test_a_huge_vocab_size_or_candidate_count_allocates_by_the_corpus():
    import tracemalloc
    docs = [np.array([0, 1, 0, 1, 2, 3] * 5)]
    tracemalloc.start()
    try:
        with pytest.warns(UserWarning, match="supports only"):
            tok = Tokenizer(4, 2**31 - 1, n_candidates=10**13).fit(docs)
        assert tracemalloc.get_traced_memory()[1] < 64 << 20
    finally:
        tracemalloc.stop()
    assert np.array_equal(tok.decode(tok.encode(docs[0])), docs[0])


def test_scikit_learn_conventions():
    from ubpe import NotFittedError
    tok = Tokenizer(4, 7)
    assert not hasattr(tok, "n_tokens_")  # (it raised RuntimeError)
    with pytest.raises(NotFittedError):
        tok.encode([0, 1])
    assert tok.get_params(deep=True)["progress"] is None
    assert tok.set_params(vocab_size=9, n_candidates=2) is tok and tok.n_candidates == 2
    with pytest.raises(ValueError, match="unknown parameter"):
        tok.set_params(beam=3)
    with pytest.raises(ValueError, match="vocab_size"):
        tok.set_params(vocab_size=2)
    assert tok.vocab_size == 9  # (a refused value is not kept)
    clone = pytest.importorskip("sklearn.base").clone
    c = clone(tok)
    assert c is not tok and c.get_params() == tok.get_params()


def test_a_tokenizer_pickled_before_the_fitted_alphabet_still_encodes():
    import pickle
    tok = Tokenizer(4, 7).fit([np.array([0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2])])
    state = tok.__getstate__() if hasattr(tok, "__getstate__") else dict(tok.__dict__)
    state = dict(state)
    del state["_alphabet"]  # (as an object pickled before it existed)
    old = Tokenizer.__new__(Tokenizer)
    old.__setstate__(state)
    back = pickle.loads(pickle.dumps(old))
    assert back.n_tokens_ == 7 and back.encode([0, 0, 0, 1]).tolist() == tok.encode([0, 0, 0, 1]).tolist()


def test_empty_documents_do_not_cut_the_merges():
    """The merge cap counted each empty document as -1 pair: 97 blank documents beside one of
    100 symbols left 2 of its 4 merges, 99 left none (text corpora have blank lines)."""
    doc = np.array([0, 1, 2, 3] * 25)
    want = Tokenizer(4, 8).fit([doc]).merges_
    for n_empty in (97, 99, 1000):
        got = Tokenizer(4, 8).fit([doc] + [np.array([], int)] * n_empty)
        assert np.array_equal(got.merges_, want)


def test_saved_hyperparameters_are_the_fitted_ones_and_plain_ints(tmp_path):
    """numpy integers (a grid search's) made save() fail (not JSON serializable); set_params
    after fit wrote a vocab_size below the merges, a file that load() refused."""
    docs = [np.array([0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2, 1, 3, 1, 3, 2, 2, 2, 2])]
    tok = Tokenizer(np.int64(4), np.int64(8), n_candidates=np.int32(2)).fit(docs)
    tok.save(tmp_path / "np.json")
    assert Tokenizer.load(tmp_path / "np.json").get_params()["vocab_size"] == 8
    tok = Tokenizer(4, 8).fit(docs)
    tok.set_params(vocab_size=5)
    tok.save(tmp_path / "sp.json")
    back = Tokenizer.load(tmp_path / "sp.json")
    assert back.vocab_size == 8 and np.array_equal(back.merges_, tok.merges_)
    assert tok.fit(docs).to_dict()["params"]["vocab_size"] == 5  # (the next fit takes it)


def test_not_fitted_is_a_value_error_as_in_scikit_learn():
    from ubpe import NotFittedError
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)
    with pytest.raises(ValueError):
        Tokenizer(4, 8).encode([0])


def test_a_pickle_with_an_older_trie_encodes():
    """A tokenizer pickled after a "shortest" encode carried the trie tables of its version's
    kernels (4 arrays); the run tables' kernels take 6: a TypeError on every later encode."""
    import pickle
    tok = Tokenizer(3, 12, min_frequency=1).fit([[0] * 40 + [1, 2] * 5])
    doc = [0] * 20 + [1]
    want = tok.encode(doc, method="shortest")
    assert "_trie_cache" not in pickle.loads(pickle.dumps(tok)).__dict__ or \
        pickle.loads(pickle.dumps(tok))._trie_cache is None
    state = dict(tok.__dict__)
    state["_trie_cache"] = state["_trie_cache"][:4]  # (what an older version pickled)
    old = Tokenizer.__new__(Tokenizer)
    old.__setstate__(state)
    assert np.array_equal(old.encode(doc, method="shortest"), want)
    assert old.encode_top_n(doc, 2)


def test_ids_and_symbols_are_checked_as_everywhere():
    """score([-1]) wrapped to the last token's weight, score([1.9]) took id 1, score([99]) an
    IndexError; a document mixing int64 and uint64 scalars was refused as float64; a
    min_frequency beyond int64 overflowed inside the kernel."""
    tok = Tokenizer(4, 8).fit([[0, 1, 0, 1, 2, 3], [0, 1], [2, 3, 2, 3], [3, 3]] * 2)
    for bad, error, message in (([-1], ValueError, "position 0: token id -1 is not in"),
                                ([99], ValueError, "token id 99 is not in"),
                                ([1.9], TypeError, "token ids must be integers")):
        with pytest.raises(error, match=message):
            tok.score(bad)
    assert tok.encode([1, np.uint64(2)]).tolist() == tok.encode([1, 2]).tolist()
    assert [e.tolist() for e in tok.encode_batch([np.array([1]), np.array([3], np.uint64)])] \
        == [[1], [3]]
    with pytest.raises(ValueError, match="document 1, position 0: symbol 9 is outside"):
        tok.encode_batch([np.array([1]), np.array([9], np.uint64)])
    with pytest.raises(ValueError, match="position 1: symbol 18446744073709551616 is outside"):
        tok.encode([1, 2**64])
    assert tok.score([]) == tok.score(np.array([], np.int64)) == 0.0  # (an IndexError)
    with pytest.warns(UserWarning, match="only 0 merges"):
        assert Tokenizer(4, 8, min_frequency=2**64).fit([[1, 2, 1, 2]]).n_tokens_ == 4
