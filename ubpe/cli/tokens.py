"""ubpe build, encode, decode: UBPE vocabularies over CSV channels."""

from __future__ import annotations

import io
import time
import warnings
from pathlib import Path

import click
import numpy as np

from signals import SignalModel, read_csv
from ubpe.serialization import atomic_write_bytes

from ._common import METHODS, method_options, split_list, write_csv


@click.command()
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

    t0 = time.perf_counter()
    tables = [read_csv(f, columns=split_list(columns), exclude=split_list(exclude))
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


def _read_model_channels(model, files):
    """Read the model's channels (by name) from CSV files, in the model's order."""
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


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Token file to write (.npz).")
@method_options
def encode(model_path, files, output, method, top_n, beam):
    """Tokenize the channels of CSV FILES with a model from 'ubpe build'.

    Writes an .npz with, per channel NAME: 'tokens/NAME' (int32 token ids of
    the best encoding, documents concatenated) and 'offsets/NAME' (where each
    document starts). With --top-n K > 1: 'alt1/NAME'..'alt{K-1}/NAME', the
    k-th best encoding of each document (its best where it has fewer), and
    'scores/NAME', shape (n_documents, K).
    """
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
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
    atomic_write_bytes(output, buf.getvalue())
    click.echo(f"{len(channels)} channels, {n_samples:,} samples -> {n_tokens:,} tokens "
               f"({n_samples / max(n_tokens, 1):.3f} samples per token, method {method}); "
               f"wrote {output}")


@click.command()
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
    write_csv(output, model.channel_names_, values,
               [bool(q.lossless_[0]) for q in model.quantizers_])
