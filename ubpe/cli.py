"""The ``ubpe`` command line."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import click

import io

import numpy as np

from ._io import FormatError, atomic_write_bytes
from .tokenizer import Tokenizer

METHODS = Tokenizer.METHODS


def _split_list(value):
    if not value:
        return None
    return [v for v in (s.strip() for s in value.split(",")) if v]


class _UserErrors(click.Group):
    """Turn expected errors (bad input, bad files) into one line and exit 1."""

    def invoke(self, ctx):
        from signals import CsvError
        try:
            return super().invoke(ctx)
        except (CsvError, FormatError, ValueError, TypeError, OSError) as e:
            raise click.ClickException(str(e)) from None


@click.group(cls=_UserErrors)
@click.version_option(package_name="ubpe")
def main():
    """Universal byte-pair encoding for integer sequences and sensor signals."""


@main.command()
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Model file to write (JSON).")
@click.option("--columns", metavar="A,B,...",
              help="Columns to read, by header name or 0-based index, comma-separated. "
                   "Default: every numeric column.")
@click.option("--exclude", metavar="A,B,...",
              help="Columns to leave out (names or 0-based indices), e.g. a label column.")
@click.option("--levels", default=1024, show_default=True, type=click.IntRange(2, 2**30),
              help="Quantization levels per channel (the alphabet size). Integer channels "
                   "whose range fits are kept exactly.")
@click.option("--vocab-size", default=4096, show_default=True, type=click.IntRange(2),
              help="Vocabulary size in tokens, alphabet included.")
@click.option("--n-candidates", default=8, show_default=True, type=click.IntRange(1),
              help="Pairs considered per training round (1 = classic BPE).")
@click.option("--min-frequency", default=2, show_default=True, type=click.IntRange(1),
              help="Minimum number of occurrences for a pair to be merged.")
@click.option("--doc-length", type=click.IntRange(2), default=None,
              help="Samples per training document (IDF counts documents). "
                   "Default: each channel is one document.")
@click.option("--method", type=click.Choice(METHODS), default="merges", show_default=True,
              help="Encoder for the reported compression (see 'ubpe encode --help').")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def build(files, output, columns, exclude, levels, vocab_size, n_candidates, min_frequency,
          doc_length, method, quiet):
    """Train a UBPE vocabulary on the numeric columns of CSV FILES.

    Each selected column of each file is one channel. Every channel is
    quantized to LEVELS integer codes (error at most half a bin, reported in
    the units of the input), cut into documents, and one vocabulary is
    trained on all of them. Prints a summary; writes the model atomically.
    """
    from signals import SignalModel, read_csv

    t0 = time.perf_counter()
    tables = [read_csv(f, columns=_split_list(columns), exclude=_split_list(exclude))
              for f in files]
    names, channels = [], []
    for f, t in zip(files, tables):
        prefix = f"{f.stem}:" if len(files) > 1 else ""
        names += [prefix + n for n in t.names]
        channels += t.channels
    model = SignalModel(levels, vocab_size, n_candidates=n_candidates,
                        min_frequency=min_frequency, doc_length=doc_length,
                        progress=False if quiet else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(channels, names)
    tokens = model.encode(channels, method=method)
    model.save(output)
    wall = time.perf_counter() - t0

    n_samples = sum(c.size for c in channels)
    n_tokens = sum(t.size for t in tokens)
    n_docs = sum(len(range(0, c.size, doc_length)) if doc_length else 1 for c in channels)
    tok = model.tokenizer_
    echo = click.echo
    for w in caught:
        echo(f"warning: {w.message}", err=True)
    echo(f"files        {len(files)}: {', '.join(str(f) for f in files)}")
    for f, t in zip(files, tables):
        if t.skipped:
            echo(f"skipped      {f.name}: {', '.join(t.skipped)} (not numeric)")
    echo(f"channels     {len(channels)}")
    echo(f"samples      {n_samples:,}")
    echo(f"documents    {n_docs:,}")
    echo(f"vocabulary   {tok.n_tokens_:,} tokens ({levels:,} alphabet + "
         f"{len(tok.merges_):,} merges)")
    echo(f"compression  {n_samples / max(n_tokens, 1):.3f} samples per token "
         f"({n_tokens:,} tokens on the training data, method {method})")
    echo("max quantization error per channel (input units; 0 = lossless):")
    for name, q, c in zip(names, model.quantizers_, channels):
        echo(f"  {name:<28} {q.error(c)[0]:.6g}  (bound {q.max_error_[0]:.6g})")
    echo(f"wall time    {wall:.2f} s")
    echo(f"model        {output}")


def _write_csv(output, names, values, integer):
    """Write channels as CSV columns, atomically; exact integers where ``integer``."""
    lengths = {v.size for v in values}
    if len(lengths) > 1:
        raise ValueError(f"channels have different lengths ({sorted(lengths)}); "
                         f"one CSV needs equal lengths")
    cols = [np.asarray(v).astype(np.int64).astype(str) if i else np.char.mod("%.12g", v)
            for v, i in zip(values, integer)]
    text = ",".join(names) + "\n"
    if cols and cols[0].size:
        text += "\n".join(",".join(row) for row in zip(*cols)) + "\n"
    atomic_write_bytes(output, text.encode())
    click.echo(f"{len(values)} channels, {values[0].size if values else 0:,} samples; "
               f"wrote {output}")


def _method_options(f):
    f = click.option("--beam", default=8, show_default=True, type=click.IntRange(1),
                     help="Suffixes kept per position by the weighted search.")(f)
    f = click.option("--top-n", default=1, show_default=True, type=click.IntRange(1),
                     help="Encodings kept per document (method 'weighted' only); the "
                          "others are stored as alternatives.")(f)
    f = click.option("--method", type=click.Choice(METHODS), default="merges",
                     show_default=True,
                     help="merges: classic BPE by rank (what training saw). shortest: fewest "
                          "tokens, best for compression. weighted: UBPE's tf-idf objective, "
                          "for ML tokenization.")(f)
    return f


def _read_model_channels(model, files):
    """Read the model's channels (by name) from CSV files, in the model's order."""
    from signals import read_csv
    by_name = {}
    for f in files:
        prefix = f"{f.stem}:" if len(files) > 1 else ""
        t = read_csv(f, columns=[n[len(prefix):] for n in model.channel_names_
                                 if n.startswith(prefix)] or None)
        by_name.update({prefix + n: c for n, c in zip(t.names, t.channels)})
    missing = [n for n in model.channel_names_ if n not in by_name]
    if missing:
        raise ValueError(f"the input lacks the model's channels: {', '.join(missing)}")
    return [by_name[n] for n in model.channel_names_]


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Token file to write (.npz).")
@_method_options
def encode(model_path, files, output, method, top_n, beam):
    """Tokenize the channels of CSV FILES with a model from 'ubpe build'.

    Writes an .npz with, per channel NAME: 'tokens/NAME' (int32 token ids of
    the best encoding, documents concatenated) and 'offsets/NAME' (where each
    document starts). With --top-n K > 1: 'alt1/NAME'..'alt{K-1}/NAME', the
    k-th best encoding of each document (its best where it has fewer), and
    'scores/NAME', shape (n_documents, K).
    """
    from signals import SignalModel
    if top_n > 1 and method != "weighted":
        raise click.UsageError("--top-n above 1 needs --method weighted")
    model = SignalModel.load(model_path)
    channels = _read_model_channels(model, files)
    arrays = {}
    n_samples = n_tokens = 0
    for name, c, docs in zip(model.channel_names_, channels,
                             model.encode_documents(channels, method=method, top_n=top_n,
                                                    beam=beam)):
        ranked = [d if top_n > 1 else [(d, model.tokenizer_.score(d))] for d in docs]
        for k in range(top_n):
            pick = [r[min(k, len(r) - 1)][0] for r in ranked]
            arrays[f"{'tokens' if k == 0 else f'alt{k}'}/{name}"] = np.concatenate(pick)
        arrays[f"offsets/{name}"] = np.cumsum([0] + [len(r[0][0]) for r in ranked])[:-1]
        if top_n > 1:
            arrays[f"scores/{name}"] = np.array(
                [[r[min(k, len(r) - 1)][1] for k in range(top_n)] for r in ranked])
        n_samples += c.size
        n_tokens += arrays[f"tokens/{name}"].size
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(output, buf.getvalue())
    click.echo(f"{len(channels)} channels, {n_samples:,} samples -> {n_tokens:,} tokens "
               f"({n_samples / max(n_tokens, 1):.3f} samples per token, method {method}); "
               f"wrote {output}")


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("tokens_path", metavar="TOKENS.npz",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="CSV file to write.")
def decode(model_path, tokens_path, output):
    """Turn a token file from 'ubpe encode' back into a CSV of (quantized) samples.

    One column per channel, named as in the model; integer channels that
    were kept exactly are written as integers.
    """
    from signals import SignalModel
    model = SignalModel.load(model_path)
    try:
        with np.load(tokens_path) as z:
            tokens = [z[f"tokens/{n}"] for n in model.channel_names_]
    except KeyError as e:
        raise ValueError(f"{tokens_path}: no tokens for channel {e}; was it written by "
                         f"'ubpe encode' with this model?") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"{tokens_path}: not a token file ({e})") from None
    values = model.decode(tokens)
    lengths = {v.size for v in values}
    if len(lengths) > 1:
        raise ValueError(f"channels have different lengths ({sorted(lengths)}); "
                         f"one CSV needs equal lengths")
    _write_csv(output, model.channel_names_, values,
               [bool(q.lossless_[0]) for q in model.quantizers_])


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
def inspect(model_path):
    """Describe a model from 'ubpe build' or a compressed file from 'ubpe compress'."""
    from signals import SignalModel, codec
    with open(model_path, "rb") as f:
        head = f.read(len(codec.MAGIC))
    if head == codec.MAGIC:
        info = codec.inspect(model_path.read_bytes())
        n = sum(ch["n_samples"] for ch in info["channels"])
        click.echo(f"format       ubpe.signal, version {info['version']}, {info['bytes']:,} bytes")
        click.echo(f"channels     {len(info['channels'])}, {n:,} samples")
        click.echo(f"bits/sample  {info['bits_per_sample']:.3f}")
        click.echo(f"transform    {info['transform']}")
        click.echo(f"vocabulary   {info['alphabet_size']:,} symbols + {info['n_merges']:,} merges")
        for ch in info["channels"]:
            q = ch["quantizer"] or "lossless"
            click.echo(f"  {ch['name']:<28} {ch['n_samples']:,} samples, {ch['n_tokens']:,} "
                       f"tokens, {q}, max error {ch['max_error']:.6g}")
        return
    model = SignalModel.load(model_path)
    tok = model.tokenizer_
    lengths = np.diff(tok._exp_start)[tok.alphabet_size:]
    echo = click.echo
    echo("format       ubpe.signal-model, version 1")
    echo(f"channels     {len(model.channel_names_)}: {', '.join(model.channel_names_)}")
    echo(f"quantizer    uniform, {model.n_levels:,} levels per channel")
    echo(f"vocabulary   {tok.n_tokens_:,} tokens ({tok.alphabet_size:,} alphabet + "
         f"{len(tok.merges_):,} merges), n_candidates {tok.n_candidates}")
    if lengths.size:
        echo(f"token length {lengths.mean():.2f} samples on average, longest {lengths.max():,}")
    echo(f"documents    {tok.n_documents_:,} in training"
         + (f", {model.doc_length:,} samples each" if model.doc_length else ", one per channel"))
    for name, q in zip(model.channel_names_, model.quantizers_):
        echo(f"  {name:<28} {q.kind}, {q.n_codes_[0]:,} codes, max error {q.max_error_[0]:.6g}"
             + (" (lossless)" if q.lossless_[0] else ""))


@main.command()
@click.argument("source", metavar="IN",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Compressed file to write (.ubpe).")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Reuse a model from 'ubpe build' (its quantizers and vocabulary).")
@click.option("--columns", metavar="A,B,...", help="Columns to read (names or 0-based indices).")
@click.option("--exclude", metavar="A,B,...", help="Columns to leave out.")
@click.option("--quantizer", type=click.Choice(["auto", "uniform", "quantile", "gaussian",
                                                "mulaw", "lloydmax"]),
              default="auto", show_default=True,
              help="auto: integer columns exactly, float columns uniform. Any other choice "
                   "quantizes every column (lossy).")
@click.option("--levels", default=1024, show_default=True, type=click.IntRange(2, 2**30),
              help="Quantization levels per channel.")
@click.option("--transform", type=click.Choice(["predictor", "delta", "none"]),
              default="predictor", show_default=True,
              help="predictor: FLAC's fixed predictors chosen per 256-sample block; "
                   "delta: first differences; none: codes as they are.")
@click.option("--vocab-size", default="auto", show_default=True,
              help="UBPE vocabulary size (residual alphabet included), or 'auto' to keep "
                   "the smallest file of 0, 64, 256 and 1024 merges.")
@click.option("--n-candidates", default=16, show_default=True, type=click.IntRange(1),
              help="Merges considered per training round.")
def compress(source, output, model_path, columns, exclude, quantizer, levels, transform,
             vocab_size, n_candidates):
    """Compress a signal file (CSV columns, .npz/.npy arrays, PCM .wav) into one .ubpe file.

    Integer channels are kept exactly (decompress gives them back bit for
    bit); float channels are quantized, with the error bound reported.
    """
    from signals import QUANTIZERS, SignalModel, codec, read_signal
    from signals.transform import Delta
    t0 = time.perf_counter()
    model = SignalModel.load(model_path) if model_path else None
    if model is not None:
        table = read_signal(source, columns=model.channel_names_)
    else:
        table = read_signal(source, columns=_split_list(columns), exclude=_split_list(exclude))
    if vocab_size != "auto":
        try:
            vocab_size = int(vocab_size)
        except ValueError:
            raise click.BadParameter("an integer or 'auto'", param_hint="--vocab-size") from None
    q = "auto" if quantizer == "auto" else QUANTIZERS[quantizer](levels)
    tf = {"predictor": "auto", "delta": Delta(1), "none": "none"}[transform]
    data = codec.compress(table.channels, quantizer=q, n_levels=levels, transform=tf,
                          vocab_size=vocab_size, n_candidates=n_candidates, model=model,
                          names=table.names)
    atomic_write_bytes(output, data)
    info = codec.inspect(data)
    n = sum(c.size for c in table.channels)
    raw = sum(c.size * (8 if c.dtype.kind == "f" else max(1, (int(np.abs(c).max()).bit_length() + 8) // 8))
              for c in table.channels)
    for f in table.skipped:
        click.echo(f"skipped      {f} (not numeric)")
    click.echo(f"channels     {len(table.channels)}, {n:,} samples")
    click.echo(f"size         {len(data):,} bytes, {info['bits_per_sample']:.3f} bits per sample "
               f"({raw / len(data):.1f}x smaller than the samples as binary)")
    worst = max((c["max_error"] for c in info["channels"]), default=0.0)
    click.echo(f"max error    {worst:.6g}" + (" (lossless)" if worst == 0 else ""))
    click.echo(f"vocabulary   {info['alphabet_size']:,} symbols + {info['n_merges']:,} merges")
    click.echo(f"wall time    {time.perf_counter() - t0:.2f} s")
    click.echo(f"wrote        {output}")


@main.command()
@click.argument("source", metavar="IN.ubpe",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="CSV file to write.")
def decompress(source, output):
    """Decode a .ubpe file to CSV: the same columns, integers exact, floats as quantized."""
    from signals import codec
    data = source.read_bytes()
    values = codec.decompress(data)
    info = codec.inspect(data)
    channels = info["channels"]
    values = [values] if np.ndim(values) == 1 and len(channels) == 1 else list(values)
    _write_csv(output, [c["name"] for c in channels], values,
               [c["quantizer"] is None for c in channels])


@main.group()
def text():
    """Byte-level BPE for text (UTF-8 bytes as the alphabet)."""


@text.command("train")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Model file to write (JSON).")
@click.option("--vocab-size", default=8192, show_default=True, type=click.IntRange(256),
              help="Ordinary tokens: 256 bytes plus merges (special tokens come after).")
@click.option("--n-candidates", default=1, show_default=True, type=click.IntRange(1),
              help="Pairs considered per training round (1 = classic BPE).")
@click.option("--pattern", default="gpt2", show_default=True,
              help="Pre-tokenization: gpt2, cl100k, o200k, llama3, a regular expression, "
                   "or 'none' for no splitting.")
@click.option("--special", multiple=True, metavar="TOKEN",
              help="A special token such as '<|endoftext|>' (repeatable).")
@click.option("--min-frequency", default=2, show_default=True, type=click.IntRange(1),
              help="Minimum number of occurrences for a pair to be merged.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1),
              help="Processes for pre-tokenizing the files.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def text_train(files, output, vocab_size, n_candidates, pattern, special, min_frequency,
               workers, quiet):
    """Train a byte-level tokenizer on UTF-8 text FILES."""
    from .text import ByteTokenizer
    t0 = time.perf_counter()
    tok = ByteTokenizer(vocab_size, n_candidates=n_candidates,
                        pattern=None if pattern == "none" else pattern,
                        special_tokens=special, min_frequency=min_frequency,
                        progress=False if quiet else None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok.fit([Path(f) for f in files], workers=workers)
    tok.save(output)
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)
    click.echo(f"trained {tok.n_vocab:,} tokens ({tok.tokenizer_.n_tokens_:,} ordinary + "
               f"{len(tok.special_tokens_)} special) on {len(files)} file(s) in "
               f"{time.perf_counter() - t0:.2f} s; wrote {output}")


def _read_text(source):
    if str(source) == "-":
        return click.get_text_stream("stdin").read()
    with open(source, encoding="utf-8") as f:
        return f.read()


@text.command("encode")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("source", metavar="[FILE|-]", default="-")
@click.option("--npy", type=click.Path(dir_okay=False, path_type=Path),
              help="Write all ids as one int32 .npy array instead of text lines.")
@click.option("--allow-special", is_flag=True,
              help="Encode special tokens in the text as special ids (else they are an error).")
def text_encode(model_path, source, npy, allow_special):
    """Encode a text file (or stdin): token ids, one line of ids per input line."""
    from .text import ByteTokenizer
    tok = ByteTokenizer.load(model_path)
    content = _read_text(source)
    kwargs = {"allowed_special": "all"} if allow_special else {}
    if npy:
        ids = np.asarray(tok.encode(content, **kwargs), np.int32)
        buf = io.BytesIO()
        np.save(buf, ids)
        atomic_write_bytes(npy, buf.getvalue())
        click.echo(f"{len(content.encode()):,} bytes -> {ids.size:,} tokens; wrote {npy}",
                   err=True)
        return
    for line in content.splitlines(keepends=True):
        click.echo(" ".join(map(str, tok.encode(line, **kwargs))))


@text.command("decode")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("source", metavar="[FILE|-]", default="-")
def text_decode(model_path, source):
    """Decode ids (lines from 'ubpe text encode', or a .npy file) back to text."""
    from .text import ByteTokenizer
    tok = ByteTokenizer.load(model_path)
    if str(source).endswith(".npy"):
        click.echo(tok.decode(np.load(source)), nl=False)
        return
    for n, line in enumerate(_read_text(source).splitlines(), 1):
        try:
            ids = [int(v) for v in line.split()]
        except ValueError:
            raise ValueError(f"{source}, line {n}: expected token ids separated by spaces") \
                from None
        try:
            click.echo(tok.decode(ids), nl=False)
        except ValueError as e:
            raise ValueError(f"{source}, line {n}: {e}") from None


@text.command("stats")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
def text_stats(model_path, files):
    """Bytes per token and vocabulary usage of a model on text FILES."""
    from .text import ByteTokenizer
    tok = ByteTokenizer.load(model_path)
    used = np.zeros(tok.n_vocab, bool)
    total_bytes = total_tokens = 0
    for f in files:
        content = _read_text(f)
        ids = np.asarray(tok.encode(content, disallowed_special=()), np.int64)
        used[ids] = True
        n_bytes = len(content.encode())
        total_bytes += n_bytes
        total_tokens += ids.size
        click.echo(f"{f}: {n_bytes:,} bytes, {ids.size:,} tokens, "
                   f"{n_bytes / max(ids.size, 1):.3f} bytes per token")
    click.echo(f"total: {total_bytes / max(total_tokens, 1):.3f} bytes per token; "
               f"{used.sum():,} of {tok.n_vocab:,} tokens used ({used.mean():.1%})")


if __name__ == "__main__":
    main()
