"""The batch API: encode_batch(num_threads), encode_to_numpy, encode_padded."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubpe import Tokenizer


@pytest.fixture(scope="module")
def tok(ecg_codes):
    docs = [ecg_codes[i:i + 500].astype(np.int64) for i in range(0, 10000, 500)]
    return Tokenizer(256, 600, n_candidates=8, progress=False).fit(docs)


@pytest.fixture(scope="module")
def docs(ecg_codes):
    c = ecg_codes.astype(np.int64)
    return [c[i:i + n] for i, n in zip(range(0, 19000, 700), [0, 1, 5, 300, 700, 2] * 10)]


@pytest.mark.parametrize("method", ["merges", "shortest", "weighted"])
@pytest.mark.parametrize("num_threads", [1, 2, 3, None])
def test_threads_give_what_encode_gives(tok, docs, method, num_threads):
    expected = [tok.encode(d, method=method) for d in docs]
    got = tok.encode_batch(docs, method=method, num_threads=num_threads)
    assert len(got) == len(docs)
    assert all(g.dtype == np.int32 and np.array_equal(g, e) for g, e in zip(got, expected))


def test_encode_to_numpy_is_csr(tok, docs):
    ids, off = tok.encode_to_numpy(docs, num_threads=2)
    assert off.dtype == np.int64 and ids.dtype == np.int32
    assert off[0] == 0 and off[-1] == ids.size and off.size == len(docs) + 1
    for i, d in enumerate(docs):
        assert np.array_equal(ids[off[i]:off[i + 1]], tok.encode(d))


def test_empty_batch(tok):
    ids, off = tok.encode_to_numpy([], num_threads=2)
    assert ids.size == 0 and off.tolist() == [0]
    assert tok.encode_batch([]) == []


def test_bad_num_threads(tok, docs):
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_batch(docs, num_threads=0)


def test_error_names_document(tok):
    with pytest.raises(ValueError, match="document 1, position 2"):
        tok.encode_batch([np.array([1, 2]), np.array([0, 1, 999])], num_threads=2)


# ------------------------------------------------------------- padding
@pytest.fixture
def small():
    """alphabet {0,1,2}, one merge (0,1) -> 3: encodings are easy to write by hand."""
    return Tokenizer.from_merges(3, [[0, 1]])


def test_padding_longest_by_hand(small):
    ids, mask = small.encode_padded([[0, 1, 2], [2], [0, 1, 0, 1, 2, 2]])
    pad = 4  # n_tokens_
    assert ids.tolist() == [[3, 2, pad, pad], [2, pad, pad, pad], [3, 3, 2, 2]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]


def test_padding_max_length_truncation_and_sides(small):
    batch = [[0, 1, 2], [0, 1, 0, 1, 2, 2]]  # encodings [3, 2] and [3, 3, 2, 2]
    ids, mask = small.encode_padded(batch, max_length=3, padding="max_length", truncation=True,
                                    pad_id=-1)
    assert ids.tolist() == [[3, 2, -1], [3, 3, 2]] and mask.tolist() == [[1, 1, 0], [1, 1, 1]]
    ids, mask = small.encode_padded(batch, max_length=3, padding="max_length", truncation=True,
                                    pad_id=-1, padding_side="left", truncation_side="left")
    assert ids.tolist() == [[-1, 3, 2], [3, 2, 2]] and mask.tolist() == [[0, 1, 1], [1, 1, 1]]
    ids, _ = small.encode_padded(batch, max_length=3, truncation=True)  # longest after the cut
    assert ids.shape == (2, 3)
    ids, _ = small.encode_padded(batch, max_length=2, truncation=False)  # HF: no cut, no error
    assert ids.shape == (2, 4)


def test_padding_errors(small):
    with pytest.raises(ValueError, match="needs max_length"):
        small.encode_padded([[0]], padding="max_length")
    with pytest.raises(ValueError, match="truncation=True"):
        small.encode_padded([[0, 1, 2, 2]], max_length=2, padding="max_length")
    with pytest.raises(ValueError, match="padding must be"):
        small.encode_padded([[0]], padding="do_not_pad")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), max_size=12), max_size=6),
       st.integers(0, 8), st.sampled_from(["longest", "max_length"]), st.booleans(),
       st.sampled_from(["right", "left"]), st.sampled_from(["right", "left"]))
def test_padded_matches_encode(batch, max_length, padding, truncation, pside, tside):
    small = Tokenizer.from_merges(3, [[0, 1], [3, 2]])
    encs = [small.encode(np.array(d, np.int64)) for d in batch]
    if truncation:
        encs = [e[:max_length] if tside == "right" else e[max(e.size - max_length, 0):]
                for e in encs]
    width = max_length if padding == "max_length" else max((e.size for e in encs), default=0)
    if any(e.size > width for e in encs):
        with pytest.raises(ValueError):
            small.encode_padded(batch, max_length=max_length, padding=padding,
                                truncation=truncation)
        return
    ids, mask = small.encode_padded(batch, max_length=max_length, padding=padding,
                                    truncation=truncation, padding_side=pside,
                                    truncation_side=tside, pad_id=-7)
    assert ids.shape == mask.shape == (len(batch), width)
    for row, m, e in zip(ids, mask, encs):
        assert m.sum() == e.size
        assert np.array_equal(row[m == 1], e) and (row[m == 0] == -7).all()
        real = np.flatnonzero(m)
        if real.size:
            assert (real[0] == 0) if pside == "right" else (real[-1] == width - 1)


def test_padding_true_is_longest_and_false_points_to_encode_batch():
    """Hugging Face's padding=True (the longest) was a ValueError."""
    from ubpe import Tokenizer
    tok = Tokenizer(4, 7, n_candidates=1).fit([np.array([0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2])])
    docs = [np.array([0, 1]), np.array([0])]
    a, b = tok.encode_padded(docs, padding=True), tok.encode_padded(docs)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="use encode_batch"):
        tok.encode_padded(docs, padding=False)
