"""The byte-level text adapter, its interchange with tiktoken and Hugging Face, its CLI."""

import base64
import io
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ubpe import FormatError
from ubpe.cli import main
from ubpe.text import PATTERNS, ByteTokenizer

DATA = Path(__file__).parent / "data"
# tiny training texts learn fewer merges than asked; that warning is tested in test_tokenizer
pytestmark = pytest.mark.filterwarnings("ignore:the corpus supports only:UserWarning")
EOT = "<|endoftext|>"


def read(name):
    return (DATA / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def shakespeare_tok():
    tok = ByteTokenizer(1000, pattern="gpt2", special_tokens=[EOT])
    return tok.fit([DATA / "shakespeare_150k.txt", read("mixed_scripts.txt")])


def test_unmatched_text_is_never_dropped():
    tok = ByteTokenizer(300, pattern=r"\w+", min_frequency=1).fit(["the cat sat on the mat"])
    assert tok.pretokenize("the cat sat") == ["the", " ", "cat", " ", "sat"]
    assert tok.decode(tok.encode("the cat sat")) == "the cat sat"
    assert tok.decode(tok.encode("  ...!  ")) == "  ...!  "


@pytest.mark.parametrize("pattern", [*PATTERNS, None])
def test_named_patterns_round_trip_mixed_scripts(pattern):
    text = read("mixed_scripts.txt")
    tok = ByteTokenizer(400, pattern=pattern, min_frequency=1).fit([text])
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(ids) < len(text.encode())
    assert "".join(tok.pretokenize(text)) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_round_trip_arbitrary_unicode(shakespeare_tok, text):
    ids = shakespeare_tok.encode(text, disallowed_special=())
    assert shakespeare_tok.decode_bytes(ids) == text.encode("utf-8")
    assert shakespeare_tok.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200), ids=st.lists(st.integers(0, 1000), max_size=50))
def test_decode_bytes_is_exact_on_arbitrary_bytes(shakespeare_tok, data, ids):
    tok = shakespeare_tok
    assert tok.decode_bytes([tok.byte_ids_[b] for b in data]) == data
    assert tok.decode_bytes(ids) == b"".join(tok.token_bytes(i) for i in ids)
    assert tok.decode(ids) == tok.decode_bytes(ids).decode("utf-8", errors="replace")


def test_invalid_utf8_is_replaced():
    tok = ByteTokenizer(300, min_frequency=1).fit(["abc abc"])
    ids = [tok.byte_ids_[0xE2], tok.byte_ids_[ord("a")]]  # a truncated 3-byte sequence
    assert tok.decode_bytes(ids) == b"\xe2a"
    assert tok.decode(ids) == "\ufffda"
    with pytest.raises(ValueError, match="position 1: token id 99999 is not in the vocabulary"):
        tok.decode([1, 99999])


def test_special_tokens_follow_tiktoken_semantics(shakespeare_tok):
    tok = shakespeare_tok
    eot = tok.special_tokens_[EOT]
    assert eot == tok.tokenizer_.n_tokens_ == 1000
    text = f"To be{EOT}or not"
    with pytest.raises(ValueError, match=r"special token '<\|endoftext\|>' at character 5"):
        tok.encode(text)
    ids = tok.encode(text, allowed_special="all")
    assert ids.count(eot) == 1 and tok.decode(ids) == text
    ordinary = tok.encode(text, disallowed_special=())
    assert eot not in ordinary and tok.decode(ordinary) == text
    assert tok.encode_ordinary(text) == ordinary
    with pytest.raises(ValueError, match="not special tokens of this model"):
        tok.encode("x", allowed_special={"<|nope|>"})


def test_training_splits_on_special_tokens():
    body = "abcabcabc" + EOT
    tok = ByteTokenizer(290, pattern=None, special_tokens=[EOT], min_frequency=1).fit([body * 50])
    for i in range(256, tok.tokenizer_.n_tokens_):
        assert b"<|" not in tok.token_bytes(i) and b"|>" not in tok.token_bytes(i)
    # without the special token, its characters are ordinary pairs and get merged
    plain = ByteTokenizer(290, pattern=None, min_frequency=1).fit([body * 50])
    assert any(b"<|" in plain.token_bytes(i) for i in range(256, plain.tokenizer_.n_tokens_))


@pytest.mark.parametrize("name", ["shakespeare_150k.txt", "kjv_150k.txt"])
def test_tiktoken_and_huggingface_give_identical_ids(tmp_path, name):
    tiktoken = pytest.importorskip("tiktoken")
    tokenizers = pytest.importorskip("tokenizers")
    text = read(name)
    train, probe = text[:100_000], text[100_000:] + read("mixed_scripts.txt")
    tok = ByteTokenizer(2000, pattern="gpt2", special_tokens=[EOT]).fit([train])
    ours = tok.encode(probe)
    enc = tok.to_tiktoken()
    assert isinstance(enc, tiktoken.Encoding)
    assert enc.encode(probe) == ours
    tok.to_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert hf.encode(probe).ids == ours
    assert hf.decode(ours) == probe
    with_eot = probe[:500] + EOT + probe[500:1000]
    assert enc.encode(with_eot, allowed_special="all") == tok.encode(with_eot, allowed_special="all")
    assert hf.encode(with_eot).ids == tok.encode(with_eot, allowed_special="all")


def test_tiktoken_ranks_with_permuted_bytes_recover_the_merges(tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    tok = ByteTokenizer(600, pattern="cl100k").fit([read("kjv_150k.txt")[:60_000]])
    ranks = tok.mergeable_ranks()
    perm = np.random.default_rng(0).permutation(256)  # single bytes in another order, as cl100k
    shuffled = {b: (int(perm[r]) if r < 256 else r) for b, r in ranks.items()}
    path = tmp_path / "ranks.tiktoken"
    ByteTokenizer.from_tiktoken(shuffled, pattern="cl100k").save_tiktoken(path)
    loaded = ByteTokenizer.from_tiktoken(path, pattern="cl100k")
    assert loaded.mergeable_ranks() == shuffled
    ref = tiktoken.Encoding("shuffled", pat_str=PATTERNS["cl100k"], mergeable_ranks=shuffled,
                            special_tokens={})
    probe = read("kjv_150k.txt")[60_000:80_000] + read("mixed_scripts.txt")
    assert loaded.encode(probe) == ref.encode(probe)
    assert loaded.decode(ref.encode(probe)) == probe
    # the merges are the original ones, in the internal byte numbering
    assert np.array_equal(loaded.tokenizer_.merges_, tok.tokenizer_.merges_)


def test_bad_ranks_files(tmp_path):
    p = tmp_path / "bad.tiktoken"
    p.write_text("not-base64!! 0\n")
    with pytest.raises(FormatError, match="line 1: expected 'base64-token rank'"):
        ByteTokenizer.from_tiktoken(p)
    lines = [f"{base64.b64encode(bytes([i])).decode()} {i}" for i in range(256)]
    p.write_text("\n".join(lines + ["YWI= 99999999999999999999999"]) + "\n")
    with pytest.raises(FormatError, match="line 257: .*outside 0..2"):  # (an OverflowError)
        ByteTokenizer.from_tiktoken(p)
    # two entries on a line, or one over two lines: refused, as tiktoken refuses them (the
    # file was split at every space and line end alike)
    for odd in (lines[:65] + [lines[65] + " " + lines[66]] + lines[67:],
                lines[:65] + lines[65].split() + lines[66:]):
        p.write_text("\n".join(odd) + "\n")
        with pytest.raises(FormatError, match="line 66: expected 'base64-token rank'"):
            ByteTokenizer.from_tiktoken(p)
    p.write_text("\n" + "\n".join(lines) + "\n\n")  # (blank lines pass, as in tiktoken)
    assert ByteTokenizer.from_tiktoken(p).n_vocab == 256
    for end in ("\r", "\r\n"):  # (CR-only line ends were refused: "line 1: too many values")
        p.write_bytes(end.join(lines).encode())
        assert ByteTokenizer.from_tiktoken(p).n_vocab == 256
    with pytest.raises(FormatError, match="ranks must be 0..n-1"):
        ByteTokenizer.from_tiktoken({bytes([b]): b + 1 for b in range(256)})


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 5000), max_size=30))
def test_encode_iterable_matches_encode(shakespeare_tok, cuts):
    text = read("kjv_150k.txt")[:5000] + f" {EOT} " + read("mixed_scripts.txt")
    bounds = sorted(set(cuts + [0, len(text)]))
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    kw = {"allowed_special": "all"}
    assert list(shakespeare_tok.encode_iterable(chunks, **kw)) == shakespeare_tok.encode(text, **kw)


_PIECES = ["\n", "\n\n", "   ", " ", "A", "B", "'s", "'", "s", " x", "12", "\r\n", "é", "<|", EOT]


@settings(max_examples=600, deadline=None)
@example(parts=["A", "\n\n", "B", "\n"], cuts=[], special=False)
@example(parts=[EOT, "'", "s", " x"], cuts=[len(EOT) + 1], special=True)
@example(parts=["\n", "\n", EOT], cuts=[3], special=True)
@given(parts=st.lists(st.sampled_from(_PIECES), max_size=30),
       cuts=st.lists(st.integers(0, 200), max_size=12), special=st.booleans())
def test_encode_iterable_matches_encode_at_blank_lines_and_special_tokens(
        shakespeare_tok, parts, cuts, special):
    """Line by line, gpt2's pattern gave "\n\n" one token where encode gives two, and the text
    after a special token was cut in the middle of "'s" (each prefix pre-tokenized alone)."""
    text = "".join(parts)
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    kw = {"allowed_special": "all"} if special else {"disallowed_special": ()}
    assert list(shakespeare_tok.encode_iterable(chunks, **kw)) == shakespeare_tok.encode(text, **kw)
    lines = text.splitlines(keepends=True)
    assert list(shakespeare_tok.encode_iterable(lines, **kw)) == shakespeare_tok.encode(text, **kw)


def test_encode_iterable_cuts_a_long_pretoken_a_logarithmic_number_of_times(
        shakespeare_tok, monkeypatch):
    """4 MB of one character in 4096-character chunks took 4.8 s (each chunk pre-tokenized the
    whole held text again); the held text is now cut again only when it has doubled."""
    calls = []
    pretokenize = shakespeare_tok.pretokenize
    monkeypatch.setattr(shakespeare_tok, "pretokenize", lambda t: calls.append(len(t))
                        or pretokenize(t))
    chunks = ["a" * 100] * 1000
    assert list(shakespeare_tok.encode_iterable(chunks)) == shakespeare_tok.encode("a" * 100_000)
    assert len(calls) <= 12 and sum(calls) <= 2 * 100_000


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k", "llama3"])
def test_file_chunks_count_the_pretokens_of_the_whole_text(tmp_path, monkeypatch, pattern):
    # (gpt2's \s++$ made the newlines at the end of each 4 MiB piece one pre-token: a file
    # trained another model than its text)
    import ubpe.text as ut
    text = (read("kjv_150k.txt")[:20_000] + "  \n\n  x" + f" {EOT}  y\n" + "x\n\n" * 700
            + "y \n\n\n" * 300 + f"z\n\n{EOT}" + read("kjv_150k.txt")[:5000].replace("\n", "\r\n")
            + read("mixed_scripts.txt"))
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode())
    tok = ByteTokenizer(300, pattern=pattern, special_tokens=[EOT])
    tok.count_pretokens([])  # (compiles its pattern)
    chunks = list(ut._chunks(path, [EOT], size=997))
    assert len(chunks) > 10 and "".join(c for c, _ in chunks) == text
    chunks_of = ut._chunks
    monkeypatch.setattr(ut, "_chunks", lambda p, s: chunks_of(p, s, size=997))
    want = tok._count_bytes([text])
    assert ut._count_files(tok, [path], 1) == want and ut._count_files(tok, [path], 2) == want


@pytest.mark.parametrize("special", ["\nA", "\nHuman:", "e\nA"])
def test_file_chunks_never_cut_a_special_token_that_holds_a_newline(tmp_path, monkeypatch,
                                                                     special):
    """A cut after a newline fell inside the special token "\nA" (`ubpe text train` failed
    with "ubpe: b'A'", a KeyError), and "\nHuman:" was counted as ordinary text."""
    import ubpe.text as ut
    text = "header\n" + "A line of text here\nHuman: hi there\n" * 300
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode())
    tok = ByteTokenizer(300, pattern="gpt2", special_tokens=[special])
    tok.count_pretokens([])
    chunks_of = ut._chunks
    for size in (97, 211, 997):
        chunks = list(chunks_of(path, [special], size=size))
        assert len(chunks) > 5 and "".join(c for c, _ in chunks) == text
        monkeypatch.setattr(ut, "_chunks", lambda p, s, n=size: chunks_of(p, s, size=n))
        assert ut._count_files(tok, [path], 1) == tok._count_bytes([text])


def test_allowed_special_tokens_inside_a_longer_one_that_is_not_allowed():
    """Split at the allowed tokens alone: "<|im|><|end|>" (itself a special token, not allowed)
    hid the two allowed ones, and 13 byte ids came out."""
    tok = ByteTokenizer(300, special_tokens=["<|im|>", "<|end|>", "<|im|><|end|>"],
                        progress=False).fit(["hello world"] * 9)
    im, end, both = (tok.special_tokens_[t] for t in ("<|im|>", "<|end|>", "<|im|><|end|>"))
    text = "a<|im|><|end|>b"
    assert tok.encode(text, allowed_special={"<|im|>", "<|end|>"}, disallowed_special=()) \
        == tok.encode("a") + [im, end] + tok.encode("b")
    assert tok.encode(text, allowed_special="all") == tok.encode("a") + [both] + tok.encode("b")
    # a disallowed token is found inside an allowed one too (as tiktoken's check does)
    with pytest.raises(ValueError, match="'<\\|im\\|>' at character 1"):
        tok.encode(text, allowed_special={"<|im|><|end|>"})
    with pytest.raises(ValueError, match="'<\\|end\\|>' at character 7"):
        tok.encode(text, allowed_special={"<|im|><|end|>", "<|im|>"})
    assert tok.decode(tok.encode(text, allowed_special={"<|end|>"}, disallowed_special=())) == text


def test_encode_iterable_streams_lines_of_punctuation_with_special_tokens_allowed():
    """With a special token allowed, a line such as "----\n" (one pre-token ending in a
    newline) held the whole stream back: 10 MB read before the first id."""
    t = read("shakespeare_150k.txt")[:50000]
    tok = ByteTokenizer(300, pattern="cl100k", special_tokens=[EOT], progress=False).fit([t])
    read_so_far = []

    def lines():
        for k in range(200_000):
            read_so_far.append(k)
            yield "----\n"
    next(tok.encode_iterable(lines(), allowed_special="all"))
    assert len(read_so_far) < 100
    # a special token that starts with a newline held every line after "\n" (allowed or not)
    two = ByteTokenizer(300, pattern="cl100k", special_tokens=[EOT, "\n\n"],
                        progress=False).fit([t])
    for kw in ({"allowed_special": "all"}, {"disallowed_special": ()}):
        read_so_far.clear()
        next(two.encode_iterable(lines(), **kw))
        assert len(read_so_far) < 100


def test_encode_iterable_raises_where_encode_raises_and_says_where():
    """A disallowed special token starting inside an allowed one that was already emitted
    went unseen (ids, no error); an error's position counted from the held text."""
    tok = ByteTokenizer(300, special_tokens=["\n\n", "\n#"], progress=False).fit(
        ["# title\n\nsome text\n"] * 3)
    for chunks in (["intro\n\n", "# Title\n"], list("intro\n\n# Title\n")):
        with pytest.raises(ValueError, match="special token .{3}#. at character 6;"):
            list(tok.encode_iterable(chunks, allowed_special={"\n\n"}))
    with pytest.raises(ValueError, match="special token .{3}#. at character 105;"):
        list(tok.encode_iterable(["x" * 100] + list("intro\n#")))
    with pytest.raises(ValueError, match="special token .{3}#. at character 105;"):
        tok.encode("x" * 100 + "intro\n#")  # (the same place)


def test_file_training_with_a_special_token_that_overlaps_itself(tmp_path):
    """A run of 4,000 newlines with the special token "\n\n" raised RecursionError."""
    text = "Some text." + "\n" * 4001 + "More text.\n" + "a " + "-" * 4000 + " b\n"
    p = tmp_path / "t.txt"
    p.write_text(text)
    for special in ("\n\n", "--"):
        a = ByteTokenizer(260, special_tokens=[special], progress=False, min_frequency=1)
        b = ByteTokenizer(260, special_tokens=[special], progress=False, min_frequency=1)
        assert np.array_equal(a.fit([text]).tokenizer_.merges_, b.fit([p]).tokenizer_.merges_)


def test_tiktoken_habits_for_special_tokens(shakespeare_tok):
    eot = shakespeare_tok.special_tokens_[EOT]
    assert shakespeare_tok.encode_single_token(EOT) == eot
    assert shakespeare_tok.encode_single_token(EOT.encode()) == eot  # (a KeyError, as bytes)
    with pytest.raises(ValueError, match="write {'<|endoftext|>'}"):  # (read letter by letter)
        shakespeare_tok.encode(EOT, allowed_special=EOT)
    with pytest.raises(ValueError, match="got the string"):
        shakespeare_tok.encode(EOT, disallowed_special=EOT)
    # an ordinary token of the same bytes as a special one comes first, as in tiktoken
    word = shakespeare_tok.decode_single_token_bytes(300)
    both = ByteTokenizer.from_tiktoken(shakespeare_tok.mergeable_ranks(), pattern="gpt2",
                                       special_tokens={word.decode(): 2000})
    assert both.encode_single_token(word) == both.encode_single_token(word.decode()) == 300


def test_save_load_and_parallel_files(tmp_path):
    files = [DATA / "shakespeare_150k.txt", DATA / "kjv_150k.txt"]
    one = ByteTokenizer(800, n_candidates=8, special_tokens=[EOT]).fit(files)
    two = ByteTokenizer(800, n_candidates=8, special_tokens=[EOT]).fit(files, workers=2)
    assert np.array_equal(one.tokenizer_.merges_, two.tokenizer_.merges_)
    one.save(tmp_path / "m.json")
    back = ByteTokenizer.load(tmp_path / "m.json")
    text = read("mixed_scripts.txt")
    assert back.encode(text) == one.encode(text) and back.special_tokens_ == one.special_tokens_
    (tmp_path / "m.json").write_text('{"format": "ubpe.text-tokenizer", "version": 7}')
    with pytest.raises(FormatError, match="version 7 is newer"):
        ByteTokenizer.load(tmp_path / "m.json")


def test_text_cli(tmp_path):
    r = CliRunner()
    model = tmp_path / "m.json"
    res = r.invoke(main, ["text", "train", str(DATA / "kjv_150k.txt"), "--vocab-size", "700",
                          "--special", EOT, "-q", "-o", str(model)])
    assert res.exit_code == 0, res.output
    src = tmp_path / "in.txt"
    src.write_text(read("mixed_scripts.txt"), encoding="utf-8")
    res = r.invoke(main, ["text", "encode", str(model), str(src)])
    assert res.exit_code == 0, res.output
    ids = tmp_path / "ids.txt"
    ids.write_text(res.output)
    res = r.invoke(main, ["text", "decode", str(model), str(ids)])
    assert res.exit_code == 0 and res.output == read("mixed_scripts.txt")
    res = r.invoke(main, ["text", "encode", str(model), str(src), "--npy", str(tmp_path / "a.npy")])
    assert res.exit_code == 0
    res = r.invoke(main, ["text", "decode", str(model), str(tmp_path / "a.npy")])
    assert res.output == read("mixed_scripts.txt")
    res = r.invoke(main, ["text", "stats", str(model), str(DATA / "kjv_150k.txt")])
    assert res.exit_code == 0 and "bytes per token" in res.output and "tokens used" in res.output
    src.write_text(f"a{EOT}b")
    res = r.invoke(main, ["text", "encode", str(model), str(src)])
    assert res.exit_code == 1 and "special token '<|endoftext|>' at character 1" in res.output


def test_text_cli_follows_the_file_habits_of_the_other_commands(tmp_path):
    """`ubpe text` as `ubpe compress`: summaries on stderr (none with -q), an existing output
    kept unless -f, an input never overwritten, -c for standard output, atomic writes."""
    r = CliRunner()
    corpus = DATA / "kjv_150k.txt"
    model = tmp_path / "m.json"
    res = r.invoke(main, ["text", "train", str(corpus), "--vocab-size", "400", "-o", str(model)])
    assert res.exit_code == 0 and res.stdout == "" and "trained 400 tokens" in res.stderr
    first = model.read_bytes()
    res = r.invoke(main, ["text", "train", str(corpus), "--vocab-size", "300", "-o", str(model)])
    assert res.exit_code == 1 and "exists; use -f" in res.stderr and model.read_bytes() == first
    res = r.invoke(main, ["text", "train", str(corpus), "--vocab-size", "300", "-q", "-f", "-o",
                          str(model)])
    assert res.exit_code == 0 and res.stdout == res.stderr == ""
    assert ByteTokenizer.load(model).n_vocab == 300
    res = r.invoke(main, ["text", "train", str(corpus), "-f", "-o", str(corpus)])
    assert res.exit_code == 1 and "is an input" in res.stderr
    res = r.invoke(main, ["text", "train", str(corpus), "--vocab-size", "300", "-q", "-c"])
    assert res.exit_code == 0 and res.stdout_bytes == model.read_bytes()
    res = r.invoke(main, ["text", "train", str(corpus)])
    assert res.exit_code == 2  # usage: no output named

    src = tmp_path / "in.txt"
    raw = "first line\r\nsecond, with CRLF\r\n\u00e9t\u00e9 \u2603\nno final newline".encode()
    src.write_bytes(raw)
    ids = tmp_path / "ids.txt"
    res = r.invoke(main, ["text", "encode", str(model), str(src), "-o", str(ids)])
    assert res.exit_code == 0 and res.stdout == "" and f"wrote {ids}" in res.stderr
    assert ids.read_text() == r.invoke(main, ["text", "encode", str(model), str(src)]).stdout
    res = r.invoke(main, ["text", "encode", str(model), str(src), "-o", str(ids)])
    assert res.exit_code == 1 and "exists; use -f" in res.stderr
    res = r.invoke(main, ["text", "encode", str(model), str(src), "-f", "-o", str(src)])
    assert res.exit_code == 1 and src.read_bytes() == raw
    res = r.invoke(main, ["text", "encode", str(model), str(src), "--npy", str(tmp_path / "a.npy"),
                          "-o", str(ids)])
    assert res.exit_code == 2
    back = tmp_path / "back.txt"
    res = r.invoke(main, ["text", "decode", str(model), str(ids), "-q", "-o", str(back)])
    assert res.exit_code == 0 and res.stdout == res.stderr == "" and back.read_bytes() == raw
    res = r.invoke(main, ["text", "decode", str(model), str(ids), "-o", str(back)])
    assert res.exit_code == 1 and back.read_bytes() == raw
    res = r.invoke(main, ["text", "decode", str(model), str(ids)])
    assert res.exit_code == 0 and res.stdout_bytes == raw


def test_text_cli_ids_are_the_encoding_of_the_whole_text(tmp_path, shakespeare_tok):
    # (each line was encoded alone: no token crossed a line end, and a special token holding a
    # newline was never found)
    r = CliRunner()
    model = tmp_path / "m.json"
    tok = ByteTokenizer(600, pattern="cl100k", special_tokens=["<s>\n</s>"]).fit([read("kjv_150k.txt")])
    tok.save(model)
    src = tmp_path / "in.txt"
    text = "To be\n\n\n\nor not\n" + read("mixed_scripts.txt") + "a\x0cb\x0bc\x1cd\u0085e\u2028f\rg\r\n"
    src.write_text(text, encoding="utf-8", newline="")
    res = r.invoke(main, ["text", "encode", str(model), str(src)])
    assert res.exit_code == 0, res.output
    assert [int(v) for v in res.stdout.split()] == tok.encode(text)
    assert res.stdout.count("\n") == len(res.stdout.splitlines())  # one line of ids per line end
    (tmp_path / "ids.txt").write_text(res.stdout)
    res = r.invoke(main, ["text", "decode", str(model), str(tmp_path / "ids.txt")])
    assert res.stdout_bytes == text.encode()
    src.write_text("a<s>\n</s>b\n")
    res = r.invoke(main, ["text", "encode", str(model), str(src), "--allow-special"])
    assert res.stdout.split()[1] == str(tok.special_tokens_["<s>\n</s>"])
    res = r.invoke(main, ["text", "encode", str(model), str(src)])
    assert res.exit_code == 1 and "--allow-special" in res.stderr and "allowed_special" not in res.stderr
    res = r.invoke(main, ["text", "encode", str(model), str(src), "--special-as-text"])
    assert [int(v) for v in res.stdout.split()] == tok.encode("a<s>\n</s>b\n", disallowed_special=())


def test_text_cli_decode_refuses_what_is_not_ids(tmp_path):
    r = CliRunner()
    model = tmp_path / "m.json"
    ByteTokenizer(300).fit([read("kjv_150k.txt")[:20000]]).save(model)
    np.save(tmp_path / "f.npy", np.array([72.7, 101.2]))
    res = r.invoke(main, ["text", "decode", str(model), str(tmp_path / "f.npy")])
    assert res.exit_code == 1 and "must be integers" in res.stderr  # (was 'He')
    for line in ("72 \u0663", "1_0", "99999999999999999999999"):
        (tmp_path / "ids.txt").write_text(line + "\n")
        res = r.invoke(main, ["text", "decode", str(model), str(tmp_path / "ids.txt")])
        assert res.exit_code == 1 and "line 1" in res.stderr, line
    np.save(tmp_path / "ok.npy", np.array([72, 105], np.int32))  # a .npy on standard input
    res = r.invoke(main, ["text", "decode", str(model), "-"],
                   input=(tmp_path / "ok.npy").read_bytes())
    assert res.exit_code == 0 and res.stdout == "Hi"
    res = r.invoke(main, ["text", "decode", str(model), "-"], input=b"72 x\n")  # (a review: "-")
    assert res.exit_code == 1 and "standard input, line 1: expected token ids" in res.stderr
    (tmp_path / "bad.txt").write_bytes(b"ab\n\xffcd")
    res = r.invoke(main, ["text", "train", str(tmp_path / "bad.txt"), "-o", str(tmp_path / "x.json")])
    assert res.exit_code == 1 and "bad.txt, byte 3: not UTF-8" in res.stderr
    res = r.invoke(main, ["text", "encode", str(model), str(tmp_path / "bad.txt")])
    assert res.exit_code == 1 and "bad.txt, line 2, byte 3: not UTF-8" in res.stderr


def test_decode_takes_integer_ids_only(shakespeare_tok):
    tok = shakespeare_tok
    assert tok.decode([72, 105]) == tok.decode(np.array([72, 105], np.uint16)) == "Hi"
    assert tok.decode([]) == ""
    for bad in ([104.7], np.array([72.0]), np.array([True]), ["72"]):
        with pytest.raises(TypeError):
            tok.decode(bad)
    with pytest.raises(ValueError, match="one-dimensional"):
        tok.decode(np.array([[72, 105]]))
    with pytest.raises(ValueError, match="18446744073709551615"):
        tok.decode(np.array([2**64 - 1], np.uint64))


def test_exports_refuse_what_the_other_engine_reads_otherwise(tmp_path):
    tok = ByteTokenizer(300, pattern=r"\w+", min_frequency=1).fit(["the cat sat on the mat"])
    with pytest.raises(ValueError, match="unmatched"):  # tiktoken would drop ', '
        tok.to_tiktoken()
    from ubpe.text import to_oniguruma
    assert to_oniguruma(r"\s+$|\s+(?!\S)|\S+") == r"\s+\Z|\s+(?!\S)|\S+"
    # (\w and \b: Oniguruma's word characters include ² and ½; "ma²" was one pre-token in
    # the exported tokenizer.json, two in ubpe and tiktoken)
    for pat in (r"(?s).{1,3}", r"\h+|\S", r"\X", r"(?m)^a|.", r"\w+|[^\w\s]+|\s+",
                r"\b\w+\b|\W", r"[\h]+|.", r"\Bx|."):
        with pytest.raises(ValueError, match="Oniguruma"):
            to_oniguruma(pat)
    assert to_oniguruma(r"[\b\s]|\p{L}+") == r"[\b\s]|\p{L}+"
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer as HF
    pat = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+$|\s+(?!\S)|\s"""
    tok = ByteTokenizer(400, pattern=pat).fit([read("kjv_150k.txt")[:30000]])
    tok.to_huggingface(tmp_path / "t.json")
    hf = HF.from_file(str(tmp_path / "t.json"))
    for s in ("To be  \nor not\n\n to be\n", "a  \n\n b\n \n", read("mixed_scripts.txt")):
        assert hf.encode(s).ids == tok.encode(s)  # ($ was every line's end in Oniguruma)


def test_crafted_special_tokens_and_ranks_are_refused(tmp_path):
    ranks = {bytes([b]): b for b in range(256)}
    for specials in ({"<x>": 2**40}, {"": 300}, {"<x>": 100}):
        with pytest.raises(FormatError, match="special"):
            ByteTokenizer.from_tiktoken(ranks, special_tokens=specials)
    with pytest.raises(FormatError, match="integers"):
        ByteTokenizer.from_tiktoken({**ranks, b"ab": 2**70})
    path = tmp_path / "r.tiktoken"
    import base64
    lines = [f"{base64.b64encode(bytes([b])).decode()} {b}" for b in range(256)]
    lines += [f"{base64.b64encode(b'ab').decode()} 256", f"{base64.b64encode(b'ab').decode()} 257"]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match="same token as rank 256"):
        ByteTokenizer.from_tiktoken(path)
    tok = ByteTokenizer(300, special_tokens=["<a>", "<a>", "<b>"]).fit([read("kjv_150k.txt")[:5000]])
    assert tok.special_tokens_ == {"<a>": 300, "<b>": 301}  # (a token given twice left a hole)
    with pytest.raises(ValueError, match="did you mean 'cl100k'"):
        ByteTokenizer(300, pattern="CL100K").fit(["abc"])


def test_a_damaged_unicode_table_cache_is_rebuilt(tmp_path, monkeypatch):
    import ubpe._pretokenize as pt
    monkeypatch.setenv("UBPE_CACHE", str(tmp_path))
    monkeypatch.setattr(pt, "_TABLES", None)
    good = pt.unicode_tables()
    (cache,) = tmp_path.rglob("unicode-tables-*.npz")
    for damage in (cache.read_bytes()[:1000], b"", None):
        if damage is None:  # a readable file with tables of another shape
            np.savez(cache, flags=np.zeros(5, np.uint8), fold=np.zeros(3, np.uint8), sha256=np.array("x"))
        else:
            cache.write_bytes(damage)
        monkeypatch.setattr(pt, "_TABLES", None)
        flags, fold = pt.unicode_tables()
        assert np.array_equal(flags, good[0]) and np.array_equal(fold, good[1])


def test_text_cli_missing_inputs_and_folders_are_bad_input(tmp_path):
    # (a missing model or training file was a usage error, exit 2; a missing output folder was
    # found after training, naming a temporary file)
    r = CliRunner()
    model = tmp_path / "m.json"
    ByteTokenizer(300).fit([read("kjv_150k.txt")[:5000]]).save(model)
    for args in (["encode", str(tmp_path / "none.json"), str(model)],
                 ["train", str(tmp_path / "none.txt"), "-o", str(tmp_path / "x.json")],
                 ["stats", str(model), str(tmp_path / "none.txt")]):
        res = r.invoke(main, ["text", *args])
        assert res.exit_code == 1 and "none." in res.stderr and "No such file" in res.stderr, args
    res = r.invoke(main, ["text", "train", str(DATA / "kjv_150k.txt"), "-o",
                          str(tmp_path / "nodir" / "x.json")])
    assert res.exit_code == 1 and "no folder" in res.stderr and ".tmp" not in res.stderr
    # a folder where a file is read: bad input, exit 1, as in the other commands (it was a
    # usage error here); '-' where a file is read ('-: No such file or directory', exit 1),
    # and the summary of --npy - (it said 'wrote -')
    for args in (["train", str(tmp_path), "-o", str(tmp_path / "y.json")],
                 ["stats", str(model), str(tmp_path)]):
        res = r.invoke(main, ["text", *args])
        assert res.exit_code == 1 and f"ubpe: {tmp_path}: Is a directory" in res.stderr, args
    for args in (["encode", "-", str(model)], ["train", "-", "-o", str(tmp_path / "y.json")]):
        res = r.invoke(main, ["text", *args], input="hello")
        assert res.exit_code == 2 and "standard input ('-') is not accepted" in res.output, args
    res = r.invoke(main, ["text", "encode", str(model), "--npy", "-"], input="hello")
    assert res.exit_code == 0 and "wrote standard output" in res.stderr
    assert np.load(io.BytesIO(res.stdout_bytes)).size > 0


@pytest.mark.parametrize("size", [7, 11, 16, 23, 40])
def test_file_chunks_wait_for_a_special_token_cut_by_a_read(tmp_path, monkeypatch, size):
    # (a read that ended inside '<|endoftext|>' right after a newline took '<' for the next
    # pre-token; an unnamed pattern's lookahead could be no pre-token at all: KeyError)
    import ubpe.text as ut
    text = "".join(f"ab{'x' * k}\n\n\n{EOT}y\n" for k in range(30))
    path = tmp_path / "t.txt"
    path.write_text(text)
    chunks_of = ut._chunks
    monkeypatch.setattr(ut, "_chunks", lambda p, s: chunks_of(p, s, size=size))
    tok = ByteTokenizer(300, special_tokens=[EOT])
    tok.count_pretokens([])
    assert ut._count_files(tok, [path], 1) == tok._count_bytes([text])
    for pattern in (None, r"\s*\w+|\s+"):  # no promise of equal counts: no error
        two = tmp_path / "two.txt"
        two.write_text("hello world\nfoo bar\n" * 3)
        ByteTokenizer(260, pattern=pattern, min_frequency=1).fit([two])


def test_more_mistakes_are_refused_and_ids_checked(tmp_path):
    for name in ("cl100k_base", "GPT-2", "o200k_base", "r50k_base"):
        with pytest.raises(ValueError, match="not a name"):
            ByteTokenizer(300, pattern=name).fit(["abc"])
    tok = ByteTokenizer(300).fit([read("kjv_150k.txt")[:5000]])
    with pytest.raises(TypeError):
        tok.decode_tokens_bytes([1.0])
    assert tok.decode_bytes(np.int64(104)) == b"h"  # one id, 0-d
    r = CliRunner()
    tok.save(tmp_path / "m.json")
    (tmp_path / "in.txt").write_bytes(b"hello\r\nworld")
    res = r.invoke(main, ["text", "encode", str(tmp_path / "m.json"), str(tmp_path / "in.txt")])
    assert res.stdout.splitlines()[0].endswith(" 10")  # a line ends after the \n, not the \r


def test_a_reader_that_goes_away_ends_the_command_quietly(shakespeare_tok, tmp_path):
    """`ubpe text encode m.json - | head -1` printed 'ubpe: [Errno 32] Broken pipe' and exited
    1; xz and zstd end quietly, as SIGPIPE ends them (status 141)."""
    import subprocess
    import sys
    shakespeare_tok.save(tmp_path / "m.json")
    r, w = os.pipe()
    os.close(r)  # (no reader at all: the first write fails)
    with open(w, "wb") as out:
        p = subprocess.run([sys.executable, "-m", "ubpe", "text", "encode",
                            str(tmp_path / "m.json"), "-"], input=b"hello world\n" * 20000,
                           stdout=out, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 141 and p.stderr == b""


def test_ids_of_python_ints_in_an_object_array_decode(shakespeare_tok):
    """An object array of in-range ints (pandas, JSON) raised a bare StopIteration; one of an
    id beyond int64 among numpy ints said 'token ids must be integers'."""
    ids = shakespeare_tok.encode("hello world")
    assert shakespeare_tok.decode(np.array(ids, dtype=object)) == "hello world"
    with pytest.raises(ValueError, match="position 1: token id 18446744073709551616"):
        shakespeare_tok.decode([np.int64(104), 2**64])


def test_numpy_hyperparameters_save(tmp_path):
    tok = ByteTokenizer(np.int64(300), progress=False).fit(["hello world " * 20])
    tok.save(tmp_path / "b.json")  # (a TypeError: int64 is not JSON serializable)
    assert ByteTokenizer.load(tmp_path / "b.json").vocab_size == 300
    assert ByteTokenizer.load(tmp_path / "b.json").name == "ubpe"
    tok.name = "mytok"  # (it came back "ubpe", and so did its tiktoken Encoding's)
    tok.save(tmp_path / "b.json")
    assert ByteTokenizer.load(tmp_path / "b.json").name == "mytok"


def test_a_reader_that_goes_away_after_some_output_ends_the_command_too(shakespeare_tok, tmp_path):
    """`ubpe text encode m.json f | head -1`: the output's one write returned the 64 KiB that
    the pipe took, without an error, and the command ended with status 0 and its summary."""
    import subprocess
    import sys
    shakespeare_tok.save(tmp_path / "m.json")
    (tmp_path / "in.txt").write_bytes(b"hello world\n" * 40000)
    p = subprocess.Popen([sys.executable, "-m", "ubpe", "text", "encode", str(tmp_path / "m.json"),
                          str(tmp_path / "in.txt")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(100)
    p.stdout.close()  # (the reader goes away with the rest of the output unread)
    assert p.wait(timeout=120) == 141 and p.stderr.read() == b""
