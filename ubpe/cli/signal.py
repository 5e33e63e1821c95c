"""ubpe compress, decompress, inspect: the .ubpe signal container."""

from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np

from signals import QUANTIZERS, SignalModel, codec, read_signal
from signals.predict import Delta
from ubpe.serialization import atomic_write_bytes

from ._common import split_list, write_csv


@click.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False,
                                                                  path_type=Path))
def inspect(model_path):
    """Describe a model from 'ubpe build' or a compressed file from 'ubpe compress'."""
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
    lengths = tok.token_lengths()[tok.alphabet_size:]
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


@click.command()
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
    t0 = time.perf_counter()
    model = SignalModel.load(model_path) if model_path else None
    if model is not None:
        table = read_signal(source, columns=model.channel_names_)
    else:
        table = read_signal(source, columns=split_list(columns), exclude=split_list(exclude))
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


@click.command()
@click.argument("source", metavar="IN.ubpe",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="CSV file to write.")
def decompress(source, output):
    """Decode a .ubpe file to CSV: the same columns, integers exact, floats as quantized."""
    data = source.read_bytes()
    values = codec.decompress(data)
    info = codec.inspect(data)
    channels = info["channels"]
    values = [values] if np.ndim(values) == 1 and len(channels) == 1 else list(values)
    write_csv(output, [c["name"] for c in channels], values,
               [c["quantizer"] is None for c in channels])
