"""ubpe compress, decompress, inspect: the .ubpe signal container."""

from __future__ import annotations

import time

import click
import numpy as np

from signals import QUANTIZERS, SignalModel, codec, read_signal
from signals.predict import Delta
from ubpe.serialization import check_document, parse_json

from ._common import (
    BAD_INPUT,
    STDIO,
    Job,
    Reporter,
    csv_text,
    input_path,
    output_options,
    plan,
    read_input,
    run_jobs,
    split_list,
    strip_suffix_name,
    suffix_name,
    verbosity_options,
    write_output,
)

SUFFIX = ".ubpe"


def load_model(source: str) -> SignalModel:
    """A signal model from a file or stdin (``"-"``), checksum and limits checked."""
    if source != STDIO:
        return SignalModel.load(source)
    doc = check_document(parse_json(read_input(STDIO), "<stdin>"), "ubpe.signal-model", 2,
                         "<stdin>", checksum_since=2)
    return SignalModel.from_dict(doc, source="<stdin>")


def _inspect_document(doc: dict, where: str) -> None:
    echo = click.echo
    fmt, version = doc.get("format"), doc.get("version")
    if fmt == "ubpe.signal-model":
        model = SignalModel.from_dict(check_document(doc, fmt, 2, where, checksum_since=2),
                                      source=where)
        tok = model.tokenizer_
        lengths = tok.token_lengths()[tok.alphabet_size:]
        echo(f"format       ubpe.signal-model, version {version}")
        echo(f"content id   {model.content_id()}"
             + (" (checksum verified)" if "checksum" in doc else " (no checksum: version 1)"))
        echo(f"channels     {len(model.channel_names_)}: {', '.join(model.channel_names_)}")
        echo(f"quantizer    uniform, {model.n_levels:,} levels per channel")
        echo(f"vocabulary   {tok.n_tokens_:,} tokens ({tok.alphabet_size:,} alphabet + "
             f"{len(tok.merges_):,} merges), n_candidates {tok.n_candidates}")
        if lengths.size:
            echo(f"token length {lengths.mean():.2f} samples on average, longest {lengths.max():,}")
        echo(f"documents    {tok.n_documents_:,} in training"
             + (f", {model.doc_length:,} samples each" if model.doc_length else
                ", one per channel"))
        for name, q in zip(model.channel_names_, model.quantizers_):
            echo(f"  {name:<28} {q.kind}, {q.n_codes_[0]:,} codes, max error "
                 f"{q.max_error_[0]:.6g}" + (" (lossless)" if q.lossless_[0] else ""))
        return
    if fmt == "ubpe.tokenizer":
        from ubpe import Tokenizer
        from ubpe.serialization import content_id
        tok = Tokenizer.from_dict(check_document(doc, fmt, 2, where, checksum_since=2), where)
        echo(f"format       ubpe.tokenizer, version {version}")
        echo(f"content id   {content_id(doc)}"
             + (" (checksum verified)" if "checksum" in doc else " (no checksum: version 1)"))
        echo(f"vocabulary   {tok.n_tokens_:,} tokens ({tok.alphabet_size:,} alphabet + "
             f"{len(tok.merges_):,} merges), token order {tok.token_order}")
        return
    if fmt == "ubpe.text-tokenizer" and where != "<stdin>":
        from ubpe.text import ByteTokenizer
        bt = ByteTokenizer.load(where)
        echo(f"format       ubpe.text-tokenizer, version {version}")
        if "content_id" in doc:
            echo(f"content id   {doc['content_id']} (checksum verified)")
        echo(f"vocabulary   {bt.n_vocab:,} tokens ({bt.tokenizer_.n_tokens_:,} ordinary + "
             f"{len(bt.special_tokens_)} special), pattern {bt.pattern!r}")
        return
    raise ValueError(f"{where}: not a ubpe model or compressed file (format {fmt!r})")


@click.command()
@click.argument("sources", metavar="FILE...", nargs=-1, required=True)
@verbosity_options
def inspect(sources, report: Reporter):
    """Describe models from 'ubpe build' or compressed files from 'ubpe compress' ('-': stdin).

    The description goes to standard output.
    """
    def work(job: Job) -> None:
        data = read_input(job.source)
        if len(sources) > 1:
            click.echo(f"{job.name}:")
        if data[:len(codec.MAGIC)] == codec.MAGIC:
            info = codec.inspect(data)
            n = sum(ch["n_samples"] for ch in info["channels"])
            click.echo(f"format       ubpe.signal, version {info['version']}, "
                       f"{info['bytes']:,} bytes")
            click.echo(f"channels     {len(info['channels'])}, {n:,} samples")
            click.echo(f"bits/sample  {info['bits_per_sample']:.3f}")
            click.echo(f"transform    {info['transform']}")
            click.echo(f"vocabulary   {info['alphabet_size']:,} symbols + {info['n_merges']:,} merges")
            for ch in info["channels"]:
                q = ch["quantizer"] or "lossless"
                click.echo(f"  {ch['name']:<28} {ch['n_samples']:,} samples, {ch['n_tokens']:,} "
                           f"tokens, {q}, max error {ch['max_error']:.6g}")
            return
        _inspect_document(parse_json(data, job.name), job.name)

    run_jobs([Job(s, STDIO) for s in sources], report, work)


def _raw_size(channels) -> int:
    """Bytes of the samples as binary (float64, or the smallest integer width)."""
    total = 0
    for c in channels:
        if c.dtype.kind == "f" or c.size == 0:
            total += c.size * 8
        else:
            big = max(abs(int(c.min())), abs(int(c.max())))
            total += c.size * max(1, (big.bit_length() + 8) // 8)
    return total


@click.command()
@click.argument("sources", metavar="FILE...", nargs=-1, required=True)
@output_options("Compressed file to write ('-': standard output). Default: each input's "
                "name with .ubpe added, in its folder (a/x.csv -> a/x.csv.ubpe).")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False),
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
def compress(sources, output, to_stdout, force, report: Reporter, model_path, columns, exclude,
             quantizer, levels, transform, vocab_size, n_candidates):
    """Compress signal files (CSV columns, .npz/.npy arrays, PCM .wav) into .ubpe files.

    FILE '-' reads standard input (CSV, or .npy/.npz/.wav by their magic
    bytes) and writes standard output unless -o is given. Integer channels
    are kept exactly (decompress gives them back bit for bit); float
    channels are quantized, with the error bound reported. Columns that are
    not numeric (a timestamp) are not stored: a warning names them.
    """
    if vocab_size != "auto":
        try:
            vocab_size = int(vocab_size)
        except ValueError:
            raise click.BadParameter("an integer or 'auto'", param_hint="--vocab-size") from None
    jobs = plan(sources, output=output, to_stdout=to_stdout, force=force,
                name_rule=lambda p: suffix_name(p, SUFFIX),
                other_inputs=[model_path] if model_path else [])
    model = None
    if model_path:
        try:
            model = load_model(model_path)
        except BAD_INPUT as e:
            report.error(model_path, e)
            report.exit()
    q = "auto" if quantizer == "auto" else QUANTIZERS[quantizer](levels)
    tf = {"predictor": "auto", "delta": Delta(1), "none": "none"}[transform]

    def work(job: Job) -> None:
        t0 = time.perf_counter()
        with input_path(job.source) as path:
            if model is not None:
                table = read_signal(path, columns=model.channel_names_)
            else:
                table = read_signal(path, columns=split_list(columns),
                                    exclude=split_list(exclude))
        for f in table.skipped:
            report.warn(f"{job.name}: column {f!r} is not numeric; it is not stored")
        data = codec.compress(table.channels, quantizer=q, n_levels=levels, transform=tf,
                              vocab_size=vocab_size, n_candidates=n_candidates, model=model,
                              names=table.names)
        write_output(job.output, data)
        info = codec.inspect(data)
        n = sum(c.size for c in table.channels)
        worst = max((c["max_error"] for c in info["channels"]), default=0.0)
        where = "standard output" if job.output == STDIO else job.output
        report.info(f"{job.name}: {len(table.channels)} channels, {n:,} samples -> "
                    f"{len(data):,} bytes, {info['bits_per_sample']:.3f} bits per sample "
                    + ("(lossless)" if worst == 0 else f"(max error {worst:.6g})")
                    + f"; wrote {where}")
        raw = _raw_size(table.channels)
        report.detail(f"  size         {raw / len(data):.1f}x smaller than the samples as binary "
                      f"({raw:,} bytes)")
        report.detail(f"  vocabulary   {info['alphabet_size']:,} symbols + "
                      f"{info['n_merges']:,} merges")
        for ch in info["channels"]:
            report.detail(f"  {ch['name']:<28} {ch['n_samples']:,} samples, "
                          f"{ch['quantizer'] or 'lossless'}, max error {ch['max_error']:.6g}")
        report.detail(f"  wall time    {time.perf_counter() - t0:.2f} s")

    run_jobs(jobs, report, work)


@click.command()
@click.argument("sources", metavar="FILE.ubpe...", nargs=-1, required=True)
@output_options("CSV file to write ('-': standard output). Default: each input's name "
                "without .ubpe, in its folder (a/x.csv.ubpe -> a/x.csv; a/x.wav.ubpe -> "
                "a/x.wav.csv).")
def decompress(sources, output, to_stdout, force, report: Reporter):
    """Decode .ubpe files to CSV: the same columns, integers exact, floats as quantized.

    FILE '-' reads standard input and writes standard output unless -o is given.
    """
    jobs = plan(sources, output=output, to_stdout=to_stdout, force=force,
                name_rule=lambda p: strip_suffix_name(p, SUFFIX, ".csv"), binary=False)

    def work(job: Job) -> None:
        data = read_input(job.source)
        values = codec.decompress(data)
        info = codec.inspect(data)
        channels = info["channels"]
        values = [values] if np.ndim(values) == 1 and len(channels) == 1 else list(values)
        write_output(job.output, csv_text([c["name"] for c in channels], values,
                                          [c["quantizer"] is None for c in channels]))
        where = "standard output" if job.output == STDIO else job.output
        n = sum(np.size(v) for v in values)
        report.info(f"{job.name}: {len(values)} channels, {n:,} samples; wrote {where}")

    run_jobs(jobs, report, work)


__all__ = ["compress", "decompress", "inspect", "load_model"]
