"""Benchmarks against the reference tools, run by hand (never by CI).

    .venv/bin/pip install -e ".[bench]"
    .venv/bin/python bench/run.py [--data ../shared/data] [--repeat 3] [--only NAME ...]

Every figure is measured in this run, on real data from the shared data
folder, as the median of ``--repeat`` runs after one warm-up (numba's
compiled code is loaded from its cache on first use). Ratios compare ubpe
with a baseline timed in the same run:

- ``ubpe-cython`` / ``ubpe-native`` 0.3.0, the reference UBPE (Python >= 3.12:
  the suite makes its own venv for them in ``bench/.baseline-venv``);
  each suite runs in a fresh process;
- Hugging Face ``tokenizers`` with one thread (``RAYON_NUM_THREADS=1``), and
  ``sentencepiece`` with one thread, for text.

The table is printed and written to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers is imported
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import numpy as np  # noqa: E402

from signals import UniformQuantizer  # noqa: E402
from ubpe import Tokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BASELINE_VENV = HERE / ".baseline-venv"
BASELINE_PACKAGES = ["ubpe-cython==0.3.0", "ubpe-native==0.3.0", "numpy"]


# --------------------------------------------------------------- utilities
def median_time(fn, repeat, warmup=True):
    """Median wall time of ``fn()`` over ``repeat`` runs; returns (seconds, last result)."""
    if warmup:
        fn()
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def find_python312():
    """A Python >= 3.12 that actually runs (pyenv shims may not)."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    cands = [str(v / "bin" / "python") for v in sorted(root.glob("3.1[2-9]*"))]
    cands += [p for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    for p in cands:
        ok = subprocess.run([p, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                            capture_output=True).returncode == 0
        if ok:
            return p
    return None


def baseline_python():
    """The venv with the reference UBPE packages, created on first use."""
    py = BASELINE_VENV / "bin" / "python"
    if not py.exists():
        base = find_python312()
        if base is None:
            raise SystemExit("the reference UBPE needs Python >= 3.12; none found "
                             "(looked for python3.12 on PATH and under pyenv)")
        subprocess.run([base, "-m", "venv", str(BASELINE_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *BASELINE_PACKAGES], check=True)
    return str(py)


def run_baseline(impl, kind, docs, alphabet_size, n_tokens, n_candidates, repeat):
    """Time ubpe-cython or ubpe-native in its own venv; returns its JSON answer."""
    task = {"impl": impl, "kind": kind, "docs": [list(map(int, d)) for d in docs],
            "alphabet_size": int(alphabet_size), "n_tokens": int(n_tokens),
            "n_candidates": int(n_candidates), "repeat": int(repeat)}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(task, f)
    try:
        out = subprocess.run([baseline_python(), str(HERE / "_baseline_ubpe.py"), f.name],
                             check=True, capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return json.loads(out.stdout.strip().splitlines()[-1])


class Table:
    def __init__(self):
        self.rows = []

    def add(self, bench, what, ours, baseline, ratio, target, note=""):
        row = (bench, what, ours, baseline, ratio, target, note)
        self.rows.append(row)
        print(" | ".join(str(c) for c in row), flush=True)

    def markdown(self):
        head = ("benchmark", "measure", "ubpe", "baseline", "ratio", "target", "note")
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in self.rows]
        return "\n".join(lines)


# -------------------------------------------------------------------- data
def load_text(data, name, n_bytes=None):
    text = (data / "text" / name).read_text(encoding="utf-8")
    if n_bytes is not None:
        text = text.encode()[:n_bytes].decode("utf-8", errors="ignore")
    return text


def char_corpus(text):
    """Lines as documents, characters as the alphabet (ids by sorted character)."""
    lines = [line for line in text.split("\n") if line]
    alphabet = sorted(set("".join(lines)))
    lut = np.zeros(0x110000, np.int32)
    lut[[ord(c) for c in alphabet]] = np.arange(len(alphabet))
    docs = [lut[np.frombuffer(line.encode("utf-32-le"), np.uint32)] for line in lines]
    return docs, len(alphabet)


def word_corpus(text):
    """Whitespace-split words as documents of UTF-8 bytes, stored once with counts."""
    words = Counter(text.split())
    docs = [np.frombuffer(w.encode(), np.uint8) for w in words]
    return docs, np.fromiter(words.values(), np.int64, len(words)), list(words)


def ecg_codes(data, n_levels=1024):
    x = np.load(data / "signals" / "mitbih208_ecg.npz")["ecg"]
    return UniformQuantizer(n_levels).fit(x).encode(x)


def accel_codes(data, n_levels=1024):
    a = np.loadtxt(data / "signals" / "daphnet_S06R02E0_accel.csv", delimiter=",",
                   skiprows=1, usecols=range(1, 10))
    return [UniformQuantizer(n_levels).fit(c).encode(c) for c in a.T]


def tiled_documents(codes, total, doc_length):
    tiled = np.tile(codes, total // codes.size + 1)[:total]
    return [tiled[i:i + doc_length] for i in range(0, total, doc_length)]


def n_tokens_encoded(tok, docs, counts=None):
    lengths = np.array([len(e) for e in tok.encode_batch(docs)])
    return int(lengths.sum() if counts is None else (lengths * counts).sum())


# -------------------------------------------------------------- HF helpers
def gpt2_byte_chars():
    """GPT-2's reversible byte -> printable character map (used by HF ByteLevel)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def hf_train_words(lines, vocab_size):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    return tok


def hf_merges_as_bytes(hf_tok):
    inv = {c: b for b, c in gpt2_byte_chars().items()}
    merges = json.loads(hf_tok.to_str())["model"]["merges"]
    as_bytes = lambda s: bytes(inv[c] for c in s)
    return [(as_bytes(a), as_bytes(b)) for a, b in (m if isinstance(m, list) else m.split(" ")
                                                     for m in merges)]


def ours_merges_as_bytes(tok):
    return [(bytes(tok.decode([l]).astype(np.uint8)), bytes(tok.decode([r]).astype(np.uint8)))
            for l, r, _ in tok.merges_.tolist()]


def encode_words(tok, text):
    """Our text encoding for the word benchmark: split, encode each distinct word once."""
    words = text.split()
    uniq = {}
    for w in words:
        if w not in uniq:
            uniq[w] = len(uniq)
    enc = tok.encode_batch([np.frombuffer(w.encode(), np.uint8) for w in uniq])
    lengths = np.array([len(e) for e in enc])
    return int(lengths[[uniq[w] for w in words]].sum())


# ------------------------------------------------------------- benchmarks
def bench_fit_chars(t, data, repeat):
    """Fit, characters as the alphabet, 2 MB of Shakespeare, 5,000 tokens, 50 candidates."""
    docs, a = char_corpus(load_text(data, "shakespeare_complete.txt", 2_000_000))
    ours, _ = median_time(lambda: Tokenizer(a, 5000, n_candidates=50).fit(docs), repeat)
    cy = run_baseline("cython", "fit", docs, a, 5000, 50, repeat)["seconds"]
    t.add("fit chars 2 MB Shakespeare, V=5000, nc=50", "seconds", f"{ours:.3f}", f"{cy:.2f} (ubpe-cython)",
          f"{cy / ours:.0f}x faster", ">= 100x")
    small, a2 = char_corpus(load_text(data, "shakespeare_complete.txt", 200_000))
    ours2, _ = median_time(lambda: Tokenizer(a2, 5000, n_candidates=50).fit(small), repeat)
    nat = run_baseline("native", "fit", small, a2, 5000, 50, 1)["seconds"]
    t.add("fit chars 200 kB Shakespeare, V=5000, nc=50", "seconds", f"{ours2:.3f}",
          f"{nat:.2f} (ubpe-native, 1 run)", f"{nat / ours2:.0f}x faster", "")


def bench_fit_words(t, data, repeat):
    """Fit, bytes, whitespace words as documents, 5 MB, 8,192 tokens, vs HF one thread."""
    import sentencepiece as spm
    for name, n in (("shakespeare_complete.txt", 5_000_000), ("kjv_bible.txt", None)):
        text = load_text(data, name, n)
        lines = text.split("\n")
        mb = len(text.encode()) / 1e6
        hf_s, hf_tok = median_time(lambda: hf_train_words(lines, 8192), repeat)
        results = {}
        for nc in (1, 50):
            def fit():
                docs, counts, _ = word_corpus(text)  # counting words is part of the fit
                return Tokenizer(256, 8192, n_candidates=nc).fit(docs, counts)
            s, tok = median_time(fit, repeat)
            docs, counts, _ = word_corpus(text)
            results[nc] = (s, tok, n_tokens_encoded(tok, docs, counts))
            t.add(f"fit bytes, words, {mb:.1f} MB {name}, V=8192, nc={nc}", "seconds", f"{s:.3f}",
                  f"{hf_s:.3f} (HF tokenizers, 1 thread)", f"{hf_s / s:.2f}x faster",
                  ">= 1x" if nc == 1 else ">= 3x")
        same = ours_merges_as_bytes(results[1][1]) == hf_merges_as_bytes(hf_tok)
        hf_tokens = sum(len(e.ids) for e in hf_tok.encode_batch(lines))
        t.add(f"tokens on {name} (training text), V=8192", "tokens", f"nc=1: {results[1][2]:,}; "
              f"nc=50: {results[50][2]:,}", f"{hf_tokens:,} (HF)",
              f"nc=50/nc=1 = {results[50][2] / results[1][2]:.4f}", "<= 1.03",
              "nc=1 merges identical to HF's" if same else "nc=1 merges differ from HF's")

        def spm_fit():
            with tempfile.TemporaryDirectory() as d:
                spm.SentencePieceTrainer.train(
                    sentence_iterator=iter(lines), model_prefix=f"{d}/m", model_type="bpe",
                    vocab_size=8192, num_threads=1, minloglevel=2, max_sentence_length=100000,
                    input_sentence_size=0, character_coverage=1.0)
        sp_s, _ = median_time(spm_fit, 1, warmup=False)
        t.add(f"fit {name}: sentencepiece BPE, V=8192 (context)", "seconds",
              f"{results[1][0]:.3f} (nc=1)", f"{sp_s:.3f} (sentencepiece, 1 thread, 1 run)",
              f"{sp_s / results[1][0]:.2f}x faster", "")
        # text encoding with the very same vocabulary (nc=1 model; merges checked above)
        ours_s, ours_n = median_time(lambda: encode_words(results[1][1], text), repeat)
        hf_enc_s, _ = median_time(lambda: hf_tok.encode_batch(lines), repeat)
        t.add(f"encode {name} ({mb:.1f} MB) with the nc=1 vocabulary", "MB/s",
              f"{mb / ours_s:.1f}", f"{mb / hf_enc_s:.1f} (HF encode_batch, 1 thread)",
              f"{hf_enc_s / ours_s:.2f}x faster", ">= 1x", f"{ours_n:,} tokens")


def bench_signal(t, data, repeat):
    """Fit on the ECG tiled to 10 M and 20 M samples; encode throughput on signals."""
    codes = ecg_codes(data)
    secs = {}
    for total in (10_000_000, 20_000_000):
        docs = tiled_documents(codes, total, 10_000)
        secs[total], tok = median_time(lambda: Tokenizer(1024, 4096, n_candidates=50).fit(docs),
                                       repeat)
        t.add(f"fit ECG tiled to {total / 1e6:.0f} M samples, docs of 10,000, V=4096, nc=50",
              "seconds", f"{secs[total]:.2f}", "", "", "< 10 s" if total == 10_000_000 else "")
    t.add("fit time 20 M / 10 M samples", "ratio", f"{secs[20_000_000] / secs[10_000_000]:.2f}",
          "", "", "<= 2.2")
    # encode throughput, ours vs ubpe-cython on the same data and settings
    docs = [codes[i:i + 10_000] for i in range(0, codes.size, 10_000)]
    for name, sig_docs in (("ECG 208", docs), ("Daphnet accel (9 ch)", accel_codes(data))):
        tok = Tokenizer(1024, 4096, n_candidates=50).fit(sig_docs)
        n = sum(d.size for d in sig_docs)
        big = sig_docs * max(1, 2_000_000 // n)
        s, _ = median_time(lambda: tok.encode_batch(big), repeat)
        ours_rate = sum(d.size for d in big) / s / 1e6
        cy = run_baseline("cython", "encode", sig_docs, 1024, 4096, 50, 1)
        cy_rate = n / cy["seconds"] / 1e6
        t.add(f"encode {name}, 1024 levels, V=4096", "M samples/s", f"{ours_rate:.1f}",
              f"{cy_rate:.3f} (ubpe-cython)", f"{ours_rate / cy_rate:.0f}x faster", ">= 5 M/s")
    # compression: n_candidates 50 vs 1 on the signal
    docs = tiled_documents(codes, 1_080_000, 10_000)
    n1 = n_tokens_encoded(Tokenizer(1024, 4096, n_candidates=1).fit(docs), docs)
    n50 = n_tokens_encoded(Tokenizer(1024, 4096, n_candidates=50).fit(docs), docs)
    t.add("tokens on ECG x10 (training data), V=4096", "tokens", f"nc=1: {n1:,}; nc=50: {n50:,}",
          "", f"nc=50/nc=1 = {n50 / n1:.4f}", "<= 1.03")


def bench_memory(t, data, repeat):
    """Peak memory of a fit on 10 M ECG samples, in a fresh process."""
    code = f"""
import numpy as np, resource, sys
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(HERE)!r})
import run
from ubpe import Tokenizer
docs = run.tiled_documents(run.ecg_codes(run.Path({str(data)!r})), 10_000_000, 10_000)
docs = [d.astype(np.int16) for d in docs]
Tokenizer(1024, 1100).fit(docs[:5])  # load compiled code first
before = int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])
Tokenizer(1024, 4096, n_candidates=50).fit(docs)
peak = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])
print(before, peak)
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.split()
    before, peak = int(out[0]) * 1024, int(out[1]) * 1024
    t.add("peak memory, fit on 10 M ECG samples (int16 input)", "bytes/symbol",
          f"{(peak - before) / 1e7:.1f} (fit) / {peak / 1e7:.1f} (process)", "", "", "<= 40",
          "fit = peak RSS minus RSS before the fit (corpus loaded)")


def bench_encoders(t, data, repeat):
    """Tokens per symbol for each encoder; shortest's speed; weighted vs the reference."""
    shakespeare, a_chars = char_corpus(load_text(data, "shakespeare_complete.txt", 1_000_000))
    x = np.load(data / "signals" / "mitbih208_ecg.npz")["ecg"]
    ecg = UniformQuantizer(256).fit(x).encode(x)
    ecg_docs = [ecg[i:i + 10_000] for i in range(0, ecg.size, 10_000)]
    corpora = {"ECG 208 (256 levels)": (ecg_docs, 256),
               "Daphnet accel (256 levels)": (accel_codes(data, 256), 256),
               "Shakespeare 1 MB (chars)": (shakespeare, a_chars)}
    for name, (docs, alphabet) in corpora.items():
        n = sum(d.size for d in docs)
        for vocab in (1024, 8192):
            tok = Tokenizer(alphabet, vocab, n_candidates=50).fit(docs)
            per = {m: sum(len(e) for e in tok.encode_batch(docs, method=m)) / n
                   for m in tok.METHODS}
            t.add(f"tokens per symbol, {name}, V={vocab}", "tokens/symbol",
                  "; ".join(f"{m} {v:.4f}" for m, v in per.items()), "", "",
                  "shortest <= merges", f"n_candidates=50, training data; {tok.n_tokens_} "
                  f"tokens learned")
    # shortest and weighted throughput on signals
    tok = Tokenizer(256, 8192, n_candidates=50).fit(ecg_docs)
    big = ecg_docs * 20
    n = sum(d.size for d in big)
    for m in tok.METHODS:
        s, _ = median_time(lambda: tok.encode_batch(big, method=m), repeat)
        t.add(f"encode ECG x20 ({n / 1e6:.1f} M samples), V=8192, method {m}", "M samples/s",
              f"{n / s / 1e6:.1f}", "", "", ">= 5 M/s" if m == "shortest" else "")
    # long runs of one value under tokens of such runs (an idle sensor): the run tables of
    # ubpe/_segment.py (a plain trie walk took about a minute here)
    tok = Tokenizer(2, 17, min_frequency=1).fit([np.zeros(65536, np.int64), np.array([0, 1, 1, 0])])
    zeros = np.zeros(50_000, np.int64)
    s_merges, _ = median_time(lambda: tok.encode(zeros), repeat)
    for m in ("shortest", "weighted"):
        s, _ = median_time(lambda: tok.encode(zeros, method=m), repeat)
        t.add(f"encode 50,000 zeros, tokens 0^2 .. 0^32768 (V=17), method {m}", "seconds",
              f"{s:.4f}", f"{s_merges:.4f} (method merges)", f"{s / s_merges:.1f}x merges' time")
    # weighted vs the reference UBPE encoder, on the reference's own model and data
    docs = [ecg[i:i + 2000] for i in range(0, 40_000, 2000)]
    ref = run_baseline("cython", "weighted", docs, 256, 1024, 50, 1)
    ours_s, (ids, scores) = median_time(lambda: weighted_on_reference(ref["model"], docs),
                                        repeat)
    ref_total = sum(reference_score(ref["model"], e) for e in ref["encodings"])
    ours_total = sum(reference_score(ref["model"], e) for e in ids)
    n = sum(d.size for d in docs)
    t.add("weighted top_n=1 on ubpe-cython's own UBPE model, ECG 40,000 samples, V=1024",
          "score (sum)", f"{ours_total:.1f}", f"{ref_total:.1f} (ubpe-cython encode)",
          f"{ours_total / ref_total:.5f}", ">= 1",
          f"tokens: ours {sum(map(len, ids)):,}, reference {sum(map(len, ref['encodings'])):,}")
    t.add("weighted top_n=1 speed, same model and data", "M samples/s", f"{n / ours_s / 1e6:.2f}",
          f"{n / ref['seconds'] / 1e6:.4f} (ubpe-cython, 1 run)",
          f"{ref['seconds'] / ours_s:.0f}x faster", ">= 100x")


def reference_vocabulary(model):
    """Expansions, ranks and weights of a reference UBPE dump, as ubpe's arrays."""
    n = int(model["n_tokens"])
    mapper = {int(k): v for k, v in model["mapper"].items()}
    n = max(n, max(mapper, default=0) + 1)
    seqs = [mapper.get(t, [t]) for t in range(n)]
    start = np.zeros(n + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=start[1:])
    flat = np.concatenate([np.asarray(s, np.int32) for s in seqs])
    weight = np.zeros(n)
    for k, w in model["weights"].items():
        weight[int(k)] = w
    return start, flat, np.arange(n, dtype=np.int64), weight


def weighted_on_reference(model, docs):
    from ubpe import _segment
    from ubpe.tokenizer import _flatten_documents
    start, flat, rank, weight = reference_vocabulary(model)
    trie = _segment.build_trie(start, flat, rank)
    out, off, scores, first = _segment.weighted_docs(
        *_flatten_documents(docs, len(model["alphabet"])), *trie, weight, 8, 1)
    return [out[off[k]:off[k + 1]].tolist() for k in range(len(docs))], scores


def reference_score(model, ids):
    weight = {int(k): w for k, w in model["weights"].items()}
    tf = Counter(ids)
    return sum((1 + np.log(c)) * weight.get(t, 0.0) for t, c in tf.items())


def bench_trim(t, data, repeat):
    """The vocabulary trim: ours vs the reference's (lowest IDF first, cascading) vs none."""
    x = np.load(data / "signals" / "mitbih208_ecg.npz")["ecg"]
    ecg = UniformQuantizer(256).fit(x).encode(x)
    ecg_docs = [ecg[i:i + 10_000] for i in range(0, ecg.size, 10_000)]
    shakespeare, a_chars = char_corpus(load_text(data, "shakespeare_complete.txt", 1_000_000))
    for name, (docs, alphabet) in {"ECG 208 (256 levels)": (ecg_docs, 256),
                                   "Shakespeare 1 MB (chars)": (shakespeare, a_chars)}.items():
        n = sum(d.size for d in docs)
        vocab = alphabet + 1024
        ours = Tokenizer(alphabet, vocab, n_candidates=50).fit(docs)
        untrimmed, reference = trim_variants(ours, docs)
        variants = {"ours (drop the last round's surplus)": ours,
                    f"none ({untrimmed.n_tokens_} tokens)": untrimmed,
                    "reference (lowest IDF first, cascade)": reference}
        for label, tok in variants.items():
            per = {m: sum(len(e) for e in tok.encode_batch(docs, method=m)) / n
                   for m in tok.METHODS}
            t.add(f"trim policy, {name}, V={vocab}: {label}", "tokens/symbol",
                  "; ".join(f"{m} {v:.4f}" for m, v in per.items()), "", "", "",
                  f"{tok.n_tokens_} tokens kept")


def trim_variants(ours, docs):
    """The untrimmed vocabulary of the same training run, and the reference's trim of it."""
    a, vocab = ours.alphabet_size, ours.vocab_size
    params = ours.get_params()
    from ubpe.tokenizer import _flatten_documents
    tok, offsets = _flatten_documents(docs, a)
    node, doc = __import__("ubpe")._engine.layout(tok, offsets)
    raw = ours._train(node, doc, np.ones(len(docs), np.int64), vocab - a)  # all rounds, untrimmed
    n_docs = len(docs)
    idf = np.log((1 + n_docs) / (1 + raw[:, 4].astype(float)))

    def build(keep):
        rows = raw[keep]
        ids = {int(tk): a + r for r, tk in enumerate(rows[:, 2])}
        f = lambda x: ids.get(int(x), int(x))
        merges = [[f(l), f(r), f(tk)] for l, r, tk in rows[:, :3]]
        order = np.lexsort((np.arange(len(rows)), idf[keep]))
        new = {a + int(o): a + k for k, o in enumerate(order)}  # renumber by weight, as fit does
        merges = [[new.get(x, x) for x in m] for m in merges]
        return Tokenizer.from_dict({"format": "ubpe.tokenizer", "version": 1,
                                    "params": {**params, "vocab_size": a + len(rows)},
                                    "n_documents": n_docs, "merges": merges,
                                    "weights": idf[keep].tolist(),
                                    "counts": rows[:, 3].tolist()})
    untrimmed = build(np.ones(len(raw), bool))
    # reference: drop the lowest-IDF token and everything built from it, until <= vocab
    keep = np.ones(len(raw), bool)
    parts = {int(tk): (int(l), int(r)) for l, r, tk in raw[:, :3]}
    for i in np.argsort(idf, kind="stable"):
        if a + keep.sum() <= vocab:
            break
        if not keep[i]:
            continue
        dead = {int(raw[i, 2])}
        keep[i] = False
        for j in range(i + 1, len(raw)):  # rank order: parts come first
            l, r = parts[int(raw[j, 2])]
            if keep[j] and (l in dead or r in dead):
                keep[j] = False
                dead.add(int(raw[j, 2]))
    return untrimmed, build(keep)


def bench_text(t, data, repeat):
    """Text adapter: compression and speed beside HF tokenizers and tiktoken, equivalence."""
    from tokenizers import Regex, models, pre_tokenizers, trainers
    from tokenizers import Tokenizer as HFTokenizer

    from ubpe.text import PATTERNS, ByteTokenizer
    for name in ("shakespeare_complete.txt", "kjv_bible.txt"):
        path = data / "text" / name
        text = path.read_text(encoding="utf-8")
        mb = len(text.encode()) / 1e6

        def hf_fit():
            hf = HFTokenizer(models.BPE())
            hf.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(PATTERNS["gpt2"]), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            hf.train([str(path)], trainers.BpeTrainer(
                vocab_size=8192, min_frequency=2, show_progress=False,
                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
            return hf
        hf_s, hf = median_time(hf_fit, repeat)
        hf_ids = hf.encode(text).ids
        fits = {}
        for nc in (1, 50):
            fits[nc] = median_time(lambda: ByteTokenizer(8192, n_candidates=nc, pattern="gpt2")
                                   .fit([path]), repeat)
        ours = fits[1][1]
        ids = ours.encode(text)
        for nc, (s, tok) in fits.items():
            n = len(ids) if nc == 1 else len(tok.encode(text))
            t.add(f"text {name} ({mb:.1f} MB), V=8192, gpt2 pattern, nc={nc}: bytes per token",
                  "bytes/token", f"{len(text.encode()) / n:.4f}",
                  f"{len(text.encode()) / len(hf_ids):.4f} (HF BpeTrainer)",
                  f"{len(hf_ids) / n:.4f}", "within 1% (>= 0.99)")
            t.add(f"text {name}: train, nc={nc}", "seconds", f"{s:.2f}",
                  f"{hf_s:.2f} (HF, 1 thread)", f"{hf_s / s:.2f}x faster", "")
        enc = ours.to_tiktoken()
        with tempfile.TemporaryDirectory() as d:
            ours.to_huggingface(f"{d}/tokenizer.json")
            hf_ours = HFTokenizer.from_file(f"{d}/tokenizer.json")
        same_tt = enc.encode(text) == ids
        same_hf = hf_ours.encode(text).ids == ids
        t.add(f"text {name}: nc=1 model exported, whole file", "identical ids",
              f"tiktoken {same_tt}, HF {same_hf}", "", "", "both True", f"{len(ids):,} tokens")
        ours_s, _ = median_time(lambda: ours.encode(text), repeat)
        tt_s, _ = median_time(lambda: enc.encode(text), repeat)
        hf_s2, _ = median_time(lambda: hf_ours.encode(text), repeat)
        t.add(f"text {name}: encode with the same model", "MB/s", f"{mb / ours_s:.1f}",
              f"tiktoken {mb / tt_s:.1f}; HF {mb / hf_s2:.1f} (1 thread)",
              f"{tt_s / ours_s:.2f}x tiktoken, {hf_s2 / ours_s:.2f}x HF", "")


def shared_signals(data):
    """Every signal in the shared folder as native integers: name -> (channels, rate)."""
    import wave
    sig = data / "signals"
    out = {}
    ecg = np.load(sig / "mitbih208_ecg.npz")["ecg"]
    out["ECG 208 (ADC units, 0.005 mV)"] = (np.round(ecg / 0.005).astype(np.int64)[None], 360)
    out["ECG pywt small"] = (np.load(sig / "pywt_ecg_small.npz")["data"].astype(np.int64)[None], 360)
    acc = np.loadtxt(sig / "daphnet_S06R02E0_accel.csv", delimiter=",", skiprows=1,
                     usecols=range(1, 10)).astype(np.int64)
    out["Daphnet accelerometer (9 ch)"] = (acc.T.copy(), 64)
    ppg = np.loadtxt(sig / "heartpy_ppg.csv", delimiter=",", skiprows=1, usecols=[1])
    out["PPG (heartpy)"] = (ppg.astype(np.int64)[None], 67)
    temp = np.loadtxt(sig / "seattle_temps.csv", delimiter=",", skiprows=1, usecols=[1])
    out["Seattle temperature (0.1 F)"] = (np.round(temp * 10).astype(np.int64)[None], 1)
    w = np.loadtxt(sig / "seattle_weather.csv", delimiter=",", skiprows=1, usecols=[1, 2, 3, 4])
    out["Seattle weather (4 ch, 0.1 units)"] = (np.round(w * 10).astype(np.int64).T.copy(), 1)
    pcm = []
    for f in sorted((sig / "librivox_speech_16k").glob("*.wav")):
        with wave.open(str(f)) as wf:
            pcm.append(np.frombuffer(wf.readframes(wf.getnframes()), "<i2").astype(np.int64))
    out["speech (LibriVox, 16 kHz)"] = (np.concatenate(pcm)[None], 16000)
    return out


REFERENCE_BITS = {  # from the issue, measured on these files
    "ECG 208 (ADC units, 0.005 mV)": {"zstd": 7.88, "xz": 6.42, "bz2": 5.46, "FLAC": 4.58},
    "Daphnet accelerometer (9 ch)": {"zstd": 8.44, "xz": 7.52, "bz2": 7.87, "FLAC": 9.11},
    "PPG (heartpy)": {"zstd": 9.05, "xz": 7.29, "bz2": 6.02, "FLAC": 3.85},
    "speech (LibriVox, 16 kHz)": {"zstd": 13.24, "xz": 12.02, "bz2": 11.49, "FLAC": 8.66},
}


def baseline_bits(x, rate):
    """Bits per sample of zstd -19, xz -9e, bz2 -9 and FLAC on the same integers."""
    import bz2
    import io
    import lzma

    import soundfile as sf
    import zstandard
    n = x.size
    raw = x.astype(np.int16).tobytes() if np.abs(x).max() < 2**15 else x.astype(np.int32).tobytes()
    out = {"zstd": len(zstandard.ZstdCompressor(level=19).compress(raw)) * 8 / n,
           "xz": len(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME)) * 8 / n,
           "bz2": len(bz2.compress(raw, 9)) * 8 / n}
    flac = 0
    for ch in x:  # one mono FLAC stream per channel (FLAC takes at most 8 channels)
        if np.abs(ch).max() >= 2**15:
            flac = float("nan")
            break
        buf = io.BytesIO()
        sf.write(buf, ch.astype(np.int16), max(rate, 1), format="FLAC", subtype="PCM_16",
                 compression_level=1.0)
        flac += len(buf.getvalue()) * 8
    out["FLAC"] = flac / n
    return out


def bench_startup(t, data, repeat):
    """``ubpe --help`` and ``import ubpe``: no numba compile, no scipy submodule, no signals."""
    exe = str(Path(sys.executable).parent / "ubpe")
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    t.add("ubpe --help", "s (median of 5)", f"{statistics.median(times):.3f}",
          f"{bare:.3f} (bare python)", "", "<= 0.3", "")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import ubpe"],
                         capture_output=True, text=True).stderr
    heavy = sorted({line.split("|")[-1].strip() for line in out.splitlines()
                    if "scipy." in line or "signals" in line})
    t.add("import ubpe", "scipy submodules / signals loaded", str(len(heavy)), "", "",
          "0", ", ".join(heavy[:5]))


BENCHES = {"startup": bench_startup, "fit_chars": bench_fit_chars, "fit_words": bench_fit_words,
           "signal": bench_signal, "memory": bench_memory, "encoders": bench_encoders,
           "trim": bench_trim, "text": bench_text}

# the suites of the signal codec and the adapters: each its own script, printing markdown
SCRIPTS = {
    "recordings": ("recordings.py", "Whole recordings against pcodec, WavPack, FLAC, xz, zpaq"
                   " (issue 14)"),
    "packets": ("packets.py", "Trained models: packets against pcodec, FLAC, WavPack, zstd with a "
                "dictionary (issue 15)"),
    "csv_files": ("csv_files.py", "Whole CSV files, lossless, against xz -9e, zpaq -m5, pcodec "
                  "(issue 12)"),
    "interchannel": ("interchannel.py", "Inter-channel prediction on the multi-channel "
                     "recordings (issue 14)"),
    "vocab_stage": ("vocab_stage.py", "A UBPE vocabulary over the residual tokens of a trained "
                    "model (issue 15)"),
    "csv_stream": ("csv_stream.py", "Whole 50 MB CSV files through the CLI: speed and peak "
                   "memory against xz and zstd (issue 13)"),
    "floats": ("floats.py", "Float arrays, lossless, against pcodec (issue 12)"),
    "csv_speed": ("csv_speed.py", "CSV parsing speed against pandas (issue 12)"),
    "text_speed": ("text_speed.py", "Text encoding against tiktoken (issue 17)"),
    "ecosystem": ("ecosystem.py", "zarr codec against numcodecs Zstd, Blosc, pcodec; Dask "
                  "(issue 16)"),
}


def versions() -> str:
    """The commit and the versions of the libraries the figures depend on."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        commit += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    from importlib.metadata import PackageNotFoundError, version
    libs = []
    for name in ("numpy", "numba", "constriction", "zstandard", "pyarrow", "pcodec", "tiktoken",
                 "tokenizers", "pandas", "numcodecs", "zarr"):
        try:
            libs.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            libs.append(f"{name} (not installed)")
    tools = []
    for tool, flag in (("flac", "--version"), ("wavpack", "--version"), ("xz", "--version")):
        exe = shutil.which(tool)
        if exe:
            out = subprocess.run([exe, flag], capture_output=True, text=True)
            tools.append((out.stdout or out.stderr).splitlines()[0].strip() if
                         (out.stdout or out.stderr) else tool)
        else:
            tools.append(f"{tool} (not installed)")
    tools.append("zpaq" if shutil.which("zpaq") else "zpaq (not installed)")
    from ubpe._aot_build import status
    return (f"commit {commit}; machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, {platform.platform()}\n\n"
            f"libraries: {', '.join(libs)}\n\ntools: {'; '.join(tools)}\n\n"
            f"kernels (ubpe/_jit.py): {status()}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data",
                    help="the shared data folder (default: ../shared/data)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per figure (median)")
    ap.add_argument("--only", nargs="*", choices=sorted(BENCHES) + sorted(SCRIPTS),
                    help="run only these suites")
    ap.add_argument("--output", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--rows-json", type=Path, help=argparse.SUPPRESS)  # internal: child process
    args = ap.parse_args()
    if not (args.data / "signals").is_dir():
        print(f"skipped: {args.data}: shared data folder not found (pass --data); every suite "
              f"needs it", file=sys.stderr)
        return
    warnings.simplefilter("ignore", UserWarning)  # small corpora: the notes give the sizes
    table = Table()
    t0 = time.perf_counter()
    if args.rows_json:  # a child process: one suite, rows to a file
        for name in args.only:
            BENCHES[name](table, args.data, args.repeat)
        args.rows_json.write_text(json.dumps(table.rows))
        return
    sections = []
    for name in args.only or [*BENCHES, *SCRIPTS]:
        if name in SCRIPTS:  # a script suite: its markdown goes in its own section
            script, title = SCRIPTS[name]
            if not (HERE / script).exists():
                print(f"skipped: {script} not found", file=sys.stderr)
                continue
            print(f"== {name}: {script}", file=sys.stderr, flush=True)
            out = subprocess.run([sys.executable, str(HERE / script), "--data", str(args.data)]
                                 if name != "csv_files" else [sys.executable, str(HERE / script)],
                                 capture_output=True, text=True)
            body = out.stdout.strip() or "(no output)"
            if out.returncode:
                body += f"\n\nFAILED (exit {out.returncode}):\n\n```\n{out.stderr[-2000:]}\n```"
            notes = [line for line in out.stderr.splitlines() if line.startswith("skipped")]
            sections.append(f"## {title}\n\n`python bench/{script}`\n\n{body}\n"
                            + ("\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else ""))
            continue
        # each suite in a fresh process, so that no suite's memory or warm
        # caches colour another's figures
        with tempfile.TemporaryDirectory() as d:
            rows = Path(d) / "rows.json"
            subprocess.run([sys.executable, __file__, "--data", str(args.data), "--repeat",
                            str(args.repeat), "--only", name, "--rows-json", str(rows)],
                           check=True)
            for row in json.loads(rows.read_text()):
                table.rows.append(tuple(row))
    header = (f"# Benchmark results\n\n`python bench/run.py --repeat {args.repeat}`"
              f"{' --only ' + ' '.join(args.only) if args.only else ''}, "
              f"{time.strftime('%Y-%m-%d')}; medians of {args.repeat} runs after a warm-up "
              f"unless noted; total {time.perf_counter() - t0:.0f} s.\n\n{versions()}\n")
    core = "## Core: training, encoders, text adapter\n\n" + table.markdown() + "\n" \
        if table.rows else ""
    args.output.write_text(header + core + "\n".join(sections))
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
