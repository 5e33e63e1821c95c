"""The compiled text path: pre-tokenizers equal to ``regex``, kernels, tiktoken's API, threads."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ubpe import FormatError
from ubpe._pretokenize import KINDS, split, unicode_tables
from ubpe.text import PATTERNS, ByteTokenizer

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent
pytestmark = pytest.mark.filterwarnings("ignore:the corpus supports only:UserWarning")
EOT = "<|endoftext|>"

#: characters where the patterns' alternatives meet: contractions in both cases and the
#: long s that (?i) folds to s, CR/LF/slash, spaces of several kinds, digits, marks,
#: modifier letters (Lm: both "upper" and "lower" in o200k), titlecase (Lt), emoji, CJK
_EDGES = st.text(alphabet=st.sampled_from(list(
    "aB1 \t\r\n'sSlLdDvVeErRmMtT\u017f\u0130\u00a0\u2028\u3000\x1c\x85\x0b\x0c7日😀\u0301"
    "ǅⅫ½²-./!ʰ\u02b0Ωω")), max_size=60)
_ANY = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60)


def read(name):
    return (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(_EDGES, _ANY))
def test_compiled_pretokenizer_splits_exactly_as_regex(name, text):
    assert split(text, name) == regex.findall(PATTERNS[name], text)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_compiled_pretokenizer_on_real_text(name):
    text = read("mixed_scripts.txt") + read("kjv_150k.txt")[:30_000] + "\r\n  \n 12345 x  "
    assert split(text, name) == regex.findall(PATTERNS[name], text)


@pytest.mark.parametrize("name, text, expected", [
    ("gpt2", "I'm  ok\n", ["I", "'m", " ", " ok", "\n"]),
    ("cl100k", "DON'T 12345\r\n\r\nx  ", ["DON", "'T", " ", "123", "45", "\r\n\r\n", "x", "  "]),
    ("o200k", "HELLOworld's /a/\n", ["HELLOworld's", " /", "a", "/\n"]),
    ("llama3", "a  \n b", ["a", "  \n", " b"]),
])
def test_compiled_pretokenizer_golden(name, text, expected):
    assert split(text, name) == expected == regex.findall(PATTERNS[name], text)


def test_unicode_tables_follow_regex():
    flags, fold = unicode_tables()
    assert flags.shape == (0x110000,) and flags.dtype == np.uint8
    assert flags[ord("a")] & 1 and flags[ord("٣")] & 2 and flags[0x3000] & 4
    assert not flags[0x1C] & 4  # \s in regex is White_Space: no U+001C
    assert fold[0x17F] & 1 and fold[ord("S")] & 1 and not fold[ord("x")]


@pytest.fixture(scope="module")
def models():
    """One small model per named pattern, trained on mixed text."""
    corpus = [read("shakespeare_150k.txt")[:40_000], read("mixed_scripts.txt") * 3,
              "2013-2021 12345 3.14159 " * 50]
    return {name: ByteTokenizer(700, pattern=name, special_tokens=[EOT, "<|pad|>"]).fit(corpus)
            for name in PATTERNS}


@pytest.fixture(scope="module")
def encs(models):
    """The same models as ``tiktoken.Encoding``s."""
    pytest.importorskip("tiktoken")
    return {name: tok.to_tiktoken() for name, tok in models.items()}


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(_EDGES, _ANY))
def test_compiled_encode_matches_regex_path_and_tiktoken(models, encs, name, text):
    tok = models[name]
    via_regex = ByteTokenizer(pattern="(?:" + PATTERNS[name] + ")")
    via_regex.tokenizer_ = tok.tokenizer_
    via_regex._finish(tok.byte_ids_, tok.special_tokens_)
    assert via_regex.compiled_pattern is None and tok.compiled_pattern == name
    ids = tok.encode(text, disallowed_special=())
    assert ids == via_regex.encode(text, disallowed_special=())
    assert tok.decode(ids) == text
    # tiktoken's Rust regex knows another Unicode version than the regex module: code points
    # unassigned in Python's own tables (hypothesis drew U+3D000, a letter for regex 2026.11
    # and not for tiktoken) may be classed otherwise (ByteTokenizer.to_tiktoken)
    import unicodedata
    if not any(unicodedata.category(c) == "Cn" for c in text):
        assert encs[name].encode(text, disallowed_special=()) == ids


def test_long_pieces_use_the_heap_and_agree(models, encs):
    tok = models["cl100k"]
    text = "x" * 5000 + " " * 3000 + "?!" * 700 + "日本" * 400
    assert tok.encode(text) == encs["cl100k"].encode(text)


def test_tiktoken_surface(models, encs):
    tok = models["cl100k"]
    enc = encs["cl100k"]
    texts = [read("kjv_150k.txt")[:3000], read("mixed_scripts.txt"), "", "a", f"x{EOT}y"]
    arr = tok.encode_to_numpy(texts[0])
    assert arr.dtype == np.uint32 and arr.tolist() == tok.encode(texts[0])
    assert np.array_equal(arr, enc.encode_to_numpy(texts[0]))
    plain = [t.replace(EOT, "") for t in texts]
    assert tok.encode_batch(plain, num_threads=2) == enc.encode_batch(plain, num_threads=2)
    assert tok.encode_batch(texts, num_threads=2, allowed_special="all") == \
        enc.encode_batch(texts, num_threads=2, allowed_special="all")
    assert tok.encode_ordinary_batch(texts, num_threads=2) == enc.encode_ordinary_batch(texts)
    batch = tok.encode_ordinary_batch(texts)
    assert tok.decode_batch(batch, num_threads=2) == enc.decode_batch(batch) == texts
    assert tok.decode_bytes_batch(batch) == [t.encode() for t in texts]
    assert [a.tolist() for a in tok.encode_to_numpy_batch(plain)] == tok.encode_batch(plain)
    assert tok.count_tokens(texts[0]) == len(enc.encode(texts[0]))
    assert tok.token_byte_values() == enc.token_byte_values()
    for t in (0, 1, 255, 300, tok.tokenizer_.n_tokens_ - 1, tok.special_tokens_[EOT]):
        assert tok.decode_single_token_bytes(t) == enc.decode_single_token_bytes(t)
    with pytest.raises(KeyError):
        tok.decode_single_token_bytes(tok.n_vocab + 5)
    ids = enc.encode(texts[1])
    assert tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)
    assert tok.decode_with_offsets(ids) == enc.decode_with_offsets(ids)
    assert tok.encode_single_token(" the") == enc.encode_single_token(" the")
    assert tok.encode_single_token(EOT) == enc.encode_single_token(EOT)
    with pytest.raises(KeyError):
        tok.encode_single_token("not one token at all")
    assert tok.n_vocab == enc.n_vocab and tok.max_token_value == enc.max_token_value
    assert tok.eot_token == enc.eot_token and tok.special_tokens_set == enc.special_tokens_set
    assert tok.is_special_token(tok.eot_token) and not tok.is_special_token(5)


def test_encode_with_offsets_matches_huggingface(models, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = models["o200k"]
    tok.to_huggingface(tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    text = read("mixed_scripts.txt") + " naïve café 👩‍👩‍👧 12345"
    ids, spans = tok.encode_with_offsets(text)
    enc = hf.encode(text)
    assert ids == enc.ids
    assert [tuple(s) for s in spans.tolist()] == enc.offsets
    ids_b, spans_b = tok.encode_with_offsets(text, unit="byte")
    data = text.encode()
    assert ids_b == ids and b"".join(data[a:b] for a, b in spans_b.tolist()) == data
    assert [tok.decode_single_token_bytes(i) for i in ids] == \
        [data[a:b] for a, b in spans_b.tolist()]
    with pytest.raises(ValueError, match="unit must be"):
        tok.encode_with_offsets(text, unit="word")


def test_special_ids_with_gaps_save_and_load(tmp_path, models):
    tok = models["gpt2"]
    n = tok.tokenizer_.n_tokens_
    gapped = ByteTokenizer.from_tiktoken(tok.mergeable_ranks(), pattern="gpt2",
                                         special_tokens={EOT: n + 1, "<|fim|>": n + 20})
    assert gapped.n_vocab == n + 21 and gapped.eot_token == n + 1
    text = f"hello{EOT} world<|fim|>"
    ids = gapped.encode(text, allowed_special="all")
    assert ids[-1] == n + 20 and gapped.decode(ids) == text
    with pytest.raises(ValueError, match=f"token id {n} is not in the vocabulary"):
        gapped.decode([1, n])
    gapped.save(tmp_path / "g.json")
    back = ByteTokenizer.load(tmp_path / "g.json")
    assert back.special_tokens_ == gapped.special_tokens_
    assert back.encode(text, allowed_special="all") == ids
    with pytest.raises(FormatError, match="special token ids must be distinct"):
        ByteTokenizer.from_tiktoken(tok.mergeable_ranks(), special_tokens={EOT: 5})


def test_ranks_file_errors_name_the_line(tmp_path):
    p = tmp_path / "r.tiktoken"
    lines = [f"{__import__('base64').b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    p.write_text("\n".join(lines[:10] + ["QQ=A 10"] + lines[11:]) + "\n")
    with pytest.raises(FormatError, match="line 11: expected 'base64-token rank'"):
        ByteTokenizer.from_tiktoken(p)
    p.write_text("\n".join(lines) + "\n")
    assert ByteTokenizer.from_tiktoken(p).tokenizer_.n_tokens_ == 256
    p.write_text("\n".join(lines + ["YWJj 256"]) + "\n")  # "abc": no merge forms it
    with pytest.raises(FormatError, match="rank 256"):
        ByteTokenizer.from_tiktoken(p)


@settings(max_examples=100, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=9), max_size=40))
def test_vectorised_ranks_reader_matches_base64(tmp_path_factory, tokens):
    import base64

    from ubpe.text import _read_ranks
    tokens = list(dict.fromkeys(tokens))
    p = tmp_path_factory.mktemp("r") / "r.tiktoken"
    p.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens))
                 or "\n")
    if not tokens:
        with pytest.raises(FormatError):
            _read_ranks(p)
        return
    flat, lengths, ranks = _read_ranks(p)
    assert flat.tobytes() == b"".join(tokens)
    assert lengths.tolist() == [len(t) for t in tokens]
    assert ranks.tolist() == list(range(len(tokens)))


def test_threaded_fit_counts_as_one_thread(tmp_path):
    files = [DATA / "shakespeare_150k.txt", DATA / "kjv_150k.txt"]
    one = ByteTokenizer(600, pattern="o200k").fit(files)
    two = ByteTokenizer(600, pattern="o200k").fit(files, workers=2)
    assert np.array_equal(one.tokenizer_.merges_, two.tokenizer_.merges_)
    assert one.count_pretokens([read("kjv_150k.txt")]) == \
        __import__("collections").Counter(regex.findall(PATTERNS["o200k"], read("kjv_150k.txt")))


def _readme_text_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Text"):]
    return section[section.index("```python") + len("```python"): section.index("```\n", 10)]


@pytest.mark.slow
def test_readme_text_example_runs_as_a_script(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(_readme_text_example(), encoding="utf-8")
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def test_kinds_cover_the_named_patterns():
    assert set(KINDS) == set(PATTERNS)


def test_unicode_tables_disk_cache(tmp_path, monkeypatch):
    from ubpe import _pretokenize
    monkeypatch.setenv("UBPE_CACHE", str(tmp_path))
    monkeypatch.setattr(_pretokenize, "_TABLES", None)
    flags, fold = unicode_tables()  # built, then written
    files = list(tmp_path.glob("unicode-tables-regex-*.npz"))
    assert len(files) == 1
    monkeypatch.setattr(_pretokenize, "_TABLES", None)
    again, fold2 = unicode_tables()  # read back
    assert np.array_equal(again, flags) and np.array_equal(fold2, fold)
    files[0].write_bytes(b"not an npz")  # a damaged cache is rebuilt, not an error
    monkeypatch.setattr(_pretokenize, "_TABLES", None)
    assert np.array_equal(unicode_tables()[0], flags)
