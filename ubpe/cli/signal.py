"""ubpe compress, decompress, inspect: the .ubpe signal container."""

from __future__ import annotations

import io
import json
import math
import sys
import time
from pathlib import Path
from typing import IO, Any, cast

import click
import numpy as np

import signals
import signals.formats
from signals import QUANTIZERS, SignalModel, container
from signals.codec import DEFAULT_LEVEL
from signals.model import stage_lines
from ubpe.serialization import check_document, parse_json

from ._common import (
    BAD_INPUT,
    CHAR,
    STDIO,
    BadInput,
    Job,
    Reporter,
    check_picks,
    csv_text,
    open_input,
    open_output,
    output_options,
    plan,
    read_input,
    run_jobs,
    split_list,
    start_numba,
    strip_suffix_name,
    suffix_name,
    threads_option,
    verbosity_options,
    write_output,
)

SUFFIX = ".ubpe"


def load_model(source: str) -> SignalModel:
    """A signal model from a file or stdin (``"-"``), checksum and limits checked."""
    if source != STDIO:
        return SignalModel.load(source)
    doc = check_document(parse_json(read_input(STDIO), "<stdin>"), "ubpe.signal-model", 3,
                         "<stdin>", checksum_since=2)
    return SignalModel.from_dict(doc, source="<stdin>")


def _model_or_exit(model_path: str | None, report: Reporter) -> SignalModel | None:
    """The model of ``--model`` (None without one); a bad model file ends the command (exit 1)."""
    if not model_path:
        return None
    try:
        return load_model(model_path)
    except BAD_INPUT as e:
        report.error(model_path, e)
        report.exit()
        raise  # not reached: exit() raises


def _inspect_document(doc: dict, where: str) -> None:
    echo = click.echo
    fmt, version = doc.get("format"), doc.get("version")
    if fmt == "ubpe.signal-model":
        model = SignalModel.from_dict(check_document(doc, fmt, 3, where, checksum_since=2),
                                      source=where)
        tok = model.tokenizer_
        lengths = tok.token_lengths()[tok.alphabet_size:]
        echo(f"format       ubpe.signal-model, version {version}")
        echo(f"content id   {model.content_id()}"
             + (" (checksum verified)" if "checksum" in doc else " (no checksum: version 1)"))
        echo(f"channels     {len(model.channel_names_)}: {', '.join(model.channel_names_)}")
        kinds = sorted({q.kind for q in model.quantizers_})
        echo(f"quantizer    {', '.join(kinds)}, {model.n_levels:,} levels per channel")
        echo(f"vocabulary   {tok.n_tokens_:,} tokens ({tok.alphabet_size:,} alphabet + "
             f"{len(tok.merges_):,} merges), n_candidates {tok.n_candidates}")
        if lengths.size:
            echo(f"token length {lengths.mean():.2f} samples on average, longest {lengths.max():,}")
        echo(f"documents    {tok.n_documents_:,} in training"
             + (f", {model.doc_length:,} samples each" if model.doc_length else
                ", one per recording of a channel"))
        for name, q in zip(model.channel_names_, model.quantizers_):
            echo(f"  {name:<28} {q.kind}, {q.n_codes_[0]:,} codes, max error "
                 f"{q.max_error_[0]:.6g}" + (" (lossless)" if q.lossless_[0] else ""))
        kept = [r for r in model.codec_report_ if r.get("kept")]
        echo(f"codec        {len(kept)} of {len(model.codec_report_)} channels coded against the "
             f"model (predictor and entropy tables), tuned for packets of "
             f"{model.packet_size:,} samples")
        for r in model.codec_report_:
            saved = (f", {r['bits_own']:.3f} -> {r['bits_model']:.3f} bits/sample held out in "
                     f"packets of {model.packet_size:,}"
                     if r.get("bits_own") is not None else "")
            echo(f"  {r['name']:<28} {'kept' if r.get('kept') else 'not kept'}{saved}"
                 + (f" ({r['reason']})" if r.get("reason") else ""))
            for line in stage_lines(r):
                echo(f"    {line}")
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
    if fmt == "ubpe.text-tokenizer":
        from ubpe.text import FORMAT, VERSION, ByteTokenizer
        bt = ByteTokenizer._from_document(check_document(doc, FORMAT, VERSION, where,
                                                         checksum_since=2), where)
        echo(f"format       ubpe.text-tokenizer, version {version}")
        if "content_id" in doc:
            echo(f"content id   {doc['content_id']} (checksum verified)")
        echo(f"vocabulary   {bt.n_vocab:,} tokens ({bt.tokenizer_.n_tokens_:,} ordinary + "
             f"{len(bt.special_tokens_)} special), pattern {bt.pattern!r}")
        return
    raise ValueError(f"{where}: not a ubpe model or compressed file (format {fmt!r})")


def _finite(v: float | None, param: click.Parameter) -> float | None:
    """A finite number, or the usage error (exit 2) that click's FloatRange lets nan and inf
    pass without."""
    if v is not None and not math.isfinite(v):
        raise click.BadParameter(f"{v} is not a finite number", param=param)
    return v


def _inspect_container(data: bytes) -> None:
    echo = click.echo
    info = signals.inspect(data)
    n = sum(ch["n_samples"] for ch in info["channels"])
    echo(f"format       ubpe.signal, version {info['version']}, {info['bytes']:,} bytes")
    if info.get("stored_whole"):
        echo(f"source       {info['source']}, stored whole ({info['stored_whole']}): smaller "
             f"than coding its columns; every byte exact")
        return
    if info["version"] >= 2:
        echo(f"source       {info['source']}" + (f", model {info['model']}" if info.get("model")
                                                 else ""))
    if info.get("csv_columns"):
        _echo_csv_columns(info["csv_columns"], info.get("max_error") or 0.0)
    if info.get("wav"):
        _echo_wav(info["wav"])
    if info.get("meta"):
        echo(f"meta         {json.dumps(info['meta'], ensure_ascii=False)}")
    echo(f"streams      {len(info['channels'])}, {n:,} values")
    echo(f"bits/value   {info['bits_per_sample']:.3f}" if n else "bits/value   - (no values)")
    for ch in info["channels"]:
        if info["version"] >= 2:
            echo(f"  {ch['name']:<28} {ch['n_samples']:,} x {ch['dtype']}, {ch['bytes']:,} bytes, "
                 f"{_mapping(info, ch)}")
        else:
            q = ch["quantizer"] or "lossless"
            echo(f"  {ch['name']:<28} {ch['n_samples']:,} samples, {q}, "
                 f"max error {ch['max_error']:.6g}")


def _mapping(info: dict, ch: dict) -> str:
    """A stream's mapping as ``inspect`` gives it, where a lossy CSV's decimal column was
    rounded said so: its stream holds the cells' integers exactly, after the CSV layer's
    rounding (a file written before the columns said which: every decimal column)."""
    rounded = {c["name"] for c in info.get("csv_columns") or [] if c["exact"] is False or (
        c["exact"] is None and c["kind"] == "decimal")}
    mapping = ch["mapping"]
    if ch["name"] in rounded and mapping.startswith("lossless"):
        mapping = (f"the integers of the cells, exact, after rounding within "
                   f"{info['max_error']:g}" + mapping[len("lossless"):])
    return mapping


def _echo_csv_columns(columns: list[dict], bound: float, where: str = "") -> None:
    """A CSV file's columns, as ``inspect`` describes them, and the bound of its cells."""
    echo = click.echo
    echo(f"csv columns  {len(columns)}{where}, " + (
        "every cell exact:" if not bound else
        f"decimal columns within {bound:g} (same decimals), every other cell exact:"))
    for c in columns:
        what = {"decimal": f"decimal, {c['scale']} digits after the point",
                "time": f"timestamp, {c['format']}", "category": "category codes",
                "text": "text (zstd)", "raw": "whole file verbatim"}.get(c["kind"], c["kind"])
        echo(f"  {c['name']:<28} {what}, {c['exceptions']:,} cells kept verbatim"
             + ("" if not bound else ", rounded" if c["exact"] is False
                else ", exact" if c["exact"] else ""))


def _echo_wav(w: dict) -> None:
    click.echo(f"wav          {w['rate']} Hz, {w['n_channels']} channel(s), {w['bits']} bits "
               f"({w['dtype']})")


def _inspect_stream(data: bytes) -> None:
    """A stream of containers: its frames, values and bits per value (every frame checked)."""
    frames = list(container.iter_stream_frames(io.BytesIO(data)))
    infos = [signals.inspect(f) for f in frames]
    n = sum(ch["n_samples"] for i in infos for ch in i["channels"])
    sources = sorted({str(i.get("source") or "arrays") for i in infos})
    version = int.from_bytes(data[len(container.STREAM_MAGIC):len(container.STREAM_MAGIC) + 2],
                             "little")  # (checked by iter_stream_frames)
    click.echo(f"format       ubpe.signal stream, version {version}, {len(data):,} bytes, "
               f"{len(frames)} frames of {', '.join(sources) or 'nothing'}")
    models = sorted({str(i["model"]) for i in infos if i.get("model")})
    if models:  # (decompressed only with it: --model)
        click.echo(f"model        {', '.join(models)} (decompress with --model)")
    click.echo(f"values       {n:,}")
    click.echo(f"bits/value   {8 * len(data) / n:.3f}" if n else "bits/value   - (no values)")
    worst = max([i["max_error"] if "max_error" in i else  # (a version-1 frame: its channels')
                 max([c["max_error"] for c in i["channels"]], default=0.0) for i in infos],
                default=0.0)
    if infos and infos[0].get("csv_columns"):
        _echo_csv_columns(infos[0]["csv_columns"], worst, " (in the first frame)")
    else:
        click.echo("max error    " + ("0: every value exact" if not worst else f"{worst:g}"))
    if infos and infos[0].get("wav"):
        _echo_wav(infos[0]["wav"])
    for k, (f, i) in enumerate(zip(frames, infos)):
        values = sum(ch["n_samples"] for ch in i["channels"])
        click.echo(f"  frame {k:<6} {len(f):,} bytes, {len(i['channels'])} streams, "
                   + (f"{i['bits_per_sample']:.3f} bits/value" if values else "no values"))


def _where(output: str) -> str:
    return "standard output" if output == STDIO else output


@click.command()
@click.argument("sources", metavar="FILE...", nargs=-1, required=True)
@verbosity_options
def inspect(sources, report: Reporter):
    """Describe models from 'ubpe build' or compressed files from 'ubpe compress' ('-': stdin).

    The description goes to standard output.
    """
    if list(sources).count(STDIO) > 1:
        raise click.UsageError("standard input ('-') can be read only once")

    def work(job: Job) -> None:
        data = read_input(job.source)
        if len(sources) > 1:
            click.echo(f"{job.name}:")
        if data[:len(container.MAGIC)] == container.MAGIC:
            _inspect_container(data)
            return
        if signals.files.is_stream(data):
            _inspect_stream(data)
            return
        if data[:len(container.PACKET_STREAM_MAGIC)] == container.PACKET_STREAM_MAGIC:
            from signals import packets as P
            head = len(container.PACKET_STREAM_MAGIC) + 2
            model_id = data[head:head + 16]
            # (its framing checked: lengths, end markers and their counts; a packet's own check
            # needs the model)
            sizes = [P.declared_samples(p) for p in P.read_packet_stream(io.BytesIO(data),
                                                                          model_id)]
            n = sum(max(k, 0) for k in sizes)
            click.echo(f"format       ubpe packet stream, {len(data):,} bytes; made with model "
                       f"{model_id.hex()} (the first 16 bytes of its content id)")
            click.echo(f"packets      {len(sizes):,}, {n:,} samples a channel in all "
                       f"(the framing checked; each packet's check needs the model: ubpe "
                       f"decompress --model)")
            return
        if not data.lstrip()[:1] == b"{":  # (no JSON document: say what it is not)
            what = ("a zip archive (a token file of 'ubpe encode' is read by 'ubpe decode')"
                    if data[:2] == b"PK" else "not a JSON object (a model is one)"
                    if data.lstrip()[:1] == b"[" else "neither JSON nor a ubpe container")
            raise ValueError(f"{job.name}: not a ubpe model or compressed file: {what}")
        _inspect_document(parse_json(data, job.name), job.name)

    run_jobs([Job(s, STDIO) for s in sources], report, work)


def _model_option(f):
    return click.option("--model", "model_path", type=click.Path(dir_okay=False),
                        help="A model from 'ubpe build': the channels it knows are coded "
                             "against it, and the file stores its content id (decompress "
                             "needs the same model).")(f)


@click.command()
@click.argument("sources", metavar="FILE...", nargs=-1, required=True)
@output_options("Compressed file to write ('-': standard output). Default: each input's "
                "name with .ubpe added, in its folder (a/x.csv -> a/x.csv.ubpe).")
@_model_option
@click.option("--level", default=DEFAULT_LEVEL, show_default=True, type=click.IntRange(0, 9),
              help="0 fastest .. 9 smallest, as xz's and zstd's presets (packets of "
                   "--packet-size are coded at the level their model was built with).")
@click.option("--max-error", type=click.FloatRange(0, min_open=True), default=None,
              callback=lambda ctx, param, v: _finite(v, param),
              help="Lossy: every value comes back within this absolute error (for a CSV: its "
                   "decimal columns, printed with the same decimals; other cells stay exact; for "
                   "an EDF, BDF or WFDB recording: its stored digital values, not the physical "
                   "units, which 'ubpe inspect' shows with each channel's scaling). "
                   "Default: lossless.")
@click.option("--quantizer", type=click.Choice(sorted(QUANTIZERS)), default=None,
              help="Lossy: quantize every channel of arrays and WAV files with this quantizer "
                   "(--levels levels); the bound is stored and shown by 'ubpe inspect'.")
@click.option("--levels", default=1024, show_default=True, type=click.IntRange(2, 2**24),
              help="Quantization levels per channel, with --quantizer (at most 2**24 bins "
                   "over all channels together).")
@click.option("--skip-rows", type=click.IntRange(0), default=None,
              help="CSV: lines above the header (kept exactly). Default: detected.")
@click.option("--comment", type=CHAR, default=None,
              help="CSV: lines starting with CHAR are comments (kept exactly).")
@click.option("--delimiter", type=CHAR, default=None, help="CSV: field delimiter. Default: "
              "detected.")
@click.option("--columns", metavar="A,B,...",
              help="CSV: columns to code as numbers (others are kept as text); a Parquet, "
                   "EDF or WFDB recording: the channels kept (the others are left out).")
@click.option("--exclude", metavar="A,B,...",
              help="CSV: columns never coded as numbers (kept as text); a Parquet, EDF or "
                   "WFDB recording: channels left out.")
@click.option("--packet-size", type=click.IntRange(1), default=None, metavar="N",
              help="With --model: write a packet stream of the model's channels, N samples per "
                   "packet, each packet decodable on its own given the model.")
@click.option("--workers", type=click.IntRange(1), default=None,
              help="Compress the files on a local Dask cluster of N worker processes, one task "
                   "per file (needs ubpe[dask]).")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Compress the files on this Dask scheduler (tcp://host:8786); inputs and "
                   "outputs must be on a file system the workers share.")
@threads_option("Compress the frames of a CSV larger than a frame (8 MiB)", "in N processes")
def compress(sources, output, to_stdout, force, report: Reporter, model_path, level, max_error,
             quantizer, levels, skip_rows, comment, delimiter, columns, exclude, packet_size,
             workers, scheduler, threads):
    """Compress files (CSV, .npy/.npz arrays, PCM .wav) into .ubpe files, losslessly.

    What comes back from 'ubpe decompress' is the same file: a CSV byte for
    byte (every column, the lines above the header, quoting, line endings);
    a WAV byte for byte; arrays with their names, dtypes and shapes. Lossy
    only with --max-error or --quantizer. Parquet/Arrow, EDF/BDF and WFDB
    recordings (ubpe[formats]) are kept as arrays with their units, rates and
    scaling. FILE '-' reads standard input and writes standard output unless
    -o is given.
    """
    start_numba()
    jobs = plan(sources, output=output, to_stdout=to_stdout, force=force,
                name_rule=lambda p: suffix_name(p, SUFFIX),
                other_inputs=[model_path] if model_path else [])
    model = _model_or_exit(model_path, report)
    check_picks(columns, exclude)
    csv_options = {"skip_rows": skip_rows, "comment": comment, "delimiter": delimiter,
                   "columns": split_list(columns), "exclude": split_list(exclude)}
    q = QUANTIZERS[quantizer](levels) if quantizer else None
    if max_error and q is not None:
        raise click.UsageError("--max-error and --quantizer exclude each other (a quantizer "
                               "sets its own error: --levels)")
    if packet_size is not None and model is None:
        raise click.UsageError("--packet-size needs --model (packets are coded against a model)")
    if packet_size is not None and (max_error or q is not None):
        raise click.UsageError("--packet-size packets are lossless (coded against the model); "
                               "--max-error and --quantizer do not apply to them")
    other = [j.source for j in jobs if j.source != STDIO
             and Path(j.source).suffix.lower() in signals.formats.SUFFIXES]
    if packet_size is not None and other:  # (it was left out, and a container written)
        raise click.UsageError(f"--packet-size takes CSV, WAV, .npy and .npz files, not "
                               f"{other[0]}")
    if workers or scheduler:
        if model is not None or q is not None or any(STDIO in (j.source, j.output) for j in jobs):
            raise click.UsageError("--workers/--scheduler take files (not '-'), without --model "
                                   "or --quantizer")
        from signals.parallel import compress_files
        for j in jobs:
            if j.refused is not None:
                report.error(j.output, ValueError(j.refused))
        jobs = [j for j in jobs if j.refused is None]
        done = compress_files([j.source for j in jobs], outputs=[j.output for j in jobs],
                              scheduler=scheduler, workers=workers, level=level,
                              max_error=max_error, csv_options=csv_options, errors="report",
                              force=True)  # (the jobs' own checks refused what exists without -f)
        for r in done:
            for w in r.get("warnings", ()):  # (raised in a worker: shown here, as ours are)
                report.warn(w)
            if "error" in r:
                report.error(r["source"], r["error"])
                continue
            what = (f"stored whole ({r['stored_whole']}): smaller than coding its columns"
                    if r.get("stored_whole") else f"{r['bits_per_sample']:.3f} bits per value"
                    if r["bits_per_sample"] is not None else "no values coded")
            if r.get("left_out"):
                what += f"; left out (--columns/--exclude): {', '.join(r['left_out'])}"
            report.info(f"{r['source']}: {r['bytes']:,} bytes, {what}; wrote {r['output']} "
                        f"(worker {r['worker']})")
        report.exit()
        return

    def work(job: Job) -> None:
        t0 = time.perf_counter()
        if job.source != STDIO and Path(job.source).suffix.lower() in signals.formats.SUFFIXES:
            raw = b""
            kind = Path(job.source).suffix.lstrip(".")
            data = signals.files.compress_path(job.source, level=level, max_error=max_error,
                                               quantizer=q, model=model,
                                               csv_options={"columns": csv_options["columns"],
                                                            "exclude": csv_options["exclude"]})
        else:
            src = open_input(job.source)
            try:
                raw = src.read(signals.files.FRAME_BYTES + 1)
                kind = signals.files.kind_of(job.source if job.source != STDIO else "", raw)
                if kind == "csv" and len(raw) > signals.files.FRAME_BYTES and packet_size is None:
                    signals.files.check_picks_apply(kind, csv_options, job.name, q)
                    box, raw = [raw], b""  # its bytes held by the stream's reader alone
                    with open_output(job.output) as dst:  # a stream of frames: bounded memory
                        s = signals.files.compress_csv_stream(
                            src, dst, first=box.pop(), path=job.name, level=level,
                            max_error=max_error,
                            frame_bytes=signals.files.FRAME_BYTES,
                            csv_options=csv_options, model=model, threads=threads)
                    report.info(f"{job.name}: {s['bytes_in']:,} -> {s['bytes_out']:,} bytes "
                                f"({s['bytes_in'] / s['bytes_out']:.2f}x, csv, {s['frames']} "
                                f"frames, {s['values']:,} values) "
                                + ("lossless" if max_error is None else
                                   f"max error {max_error:.6g}")
                                + f"; wrote {_where(job.output)}")
                    report.detail(f"  wall time    {time.perf_counter() - t0:.2f} s")
                    return
                if kind == "wav" and len(raw) > signals.files.WAV_FRAME_BYTES and packet_size is None \
                        and signals.files.wav_layout(raw, job.name) is not None:
                    signals.files.check_picks_apply(kind, csv_options, job.name)
                    box, raw = [raw], b""
                    with open_output(job.output) as dst:  # a stream of frames: bounded memory
                        s = signals.files.compress_wav_stream(
                            src, dst, first=box.pop(), path=job.name, level=level,
                            max_error=max_error, quantizer=q, model=model,
                            frame_bytes=signals.files.WAV_FRAME_BYTES)
                    report.info(f"{job.name}: {s['bytes_in']:,} -> {s['bytes_out']:,} bytes "
                                f"({s['bytes_in'] / s['bytes_out']:.2f}x, wav, {s['frames']} "
                                f"frames, {s['values']:,} values) "
                                + ("lossless" if max_error is None and q is None else "lossy")
                                + f"; wrote {_where(job.output)}")
                    report.detail(f"  wall time    {time.perf_counter() - t0:.2f} s")
                    return
                raw += src.read()
            finally:
                if src is not sys.stdin.buffer:
                    src.close()
            if packet_size is not None:
                data = signals.files.compress_packets_file(raw, kind, model, packet_size,
                                                           path=job.name,
                                                           csv_options=csv_options)
                write_output(job.output, data)
                n_ch = len(getattr(model, "codec_", {}))
                report.info(f"{job.name}: {len(raw):,} -> {len(data):,} bytes, packets of "
                            f"{packet_size:,} samples of {n_ch} channel(s); wrote "
                            f"{'standard output' if job.output == STDIO else job.output}")
                return
            data = signals.compress_file(raw, kind, path=job.name, level=level,
                                         max_error=max_error, quantizer=q,
                                         csv_options=csv_options, model=model)
        write_output(job.output, data)
        info = signals.inspect(data)
        n = sum(c["n_samples"] for c in info["channels"])
        worst = max([c["max_error"] for c in info["channels"]] + [info.get("max_error") or 0.0])
        meta = (info.get("meta") or {}) if info.get("source") == "arrays" else {}
        skipped, left_out = meta.get("skipped"), meta.get("left_out")
        where = "standard output" if job.output == STDIO else job.output
        # (raw is empty where compress_path read the file itself; standard input is all in raw)
        size = len(raw) if job.source == STDIO else len(raw) or sum(  # (WFDB: header and signals)
            f.stat().st_size for f in signals.formats.record_files(job.source))
        what = (f"stored whole ({info['stored_whole']}): smaller than coding its columns"
                if info.get("stored_whole") else f"{len(info['channels'])} columns, {n:,} values")
        report.info(f"{job.name}: {size:,} -> {len(data):,} bytes "
                    f"({size / max(len(data), 1):.2f}x, {kind}, {what}) "
                    + ("lossless" if worst == 0 else f"max error {worst:.6g}")
                    + (f"; not kept (not numeric): {', '.join(skipped)}" if skipped else "")
                    + (f"; left out (--columns/--exclude): {', '.join(left_out)}"
                       if left_out else "")
                    + f"; wrote {where}")
        for ch in info["channels"]:
            report.detail(f"  {ch['name']:<28} {ch['n_samples']:,} x {ch['dtype']}, "
                          f"{ch['bytes']:,} bytes, {_mapping(info, ch)}")
        report.detail(f"  wall time    {time.perf_counter() - t0:.2f} s")

    run_jobs(jobs, report, work)


def _decompressed_name(source: Path) -> Path:
    """``a/x.csv.ubpe`` -> ``a/x.csv`` (a packet stream's channels: ``a/x.npy``, see
    :func:`decompress`); a name without the suffix cannot name its output."""
    if not source.name.lower().endswith(SUFFIX) or len(source.name) <= len(SUFFIX):
        raise BadInput(f"{source}: the name does not end in {SUFFIX}, so the output cannot be "
                       f"named after it; give it with -o PATH (or -c)")
    out = strip_suffix_name(source, SUFFIX, "")
    if out.suffix.lower() in signals.formats.SUFFIXES:  # a recording comes back as arrays
        return out.with_name(out.name + ".npz")
    if not source.is_file():  # (a FIFO: read once, by the job; its name says what it can)
        return out
    magic = container.PACKET_STREAM_MAGIC
    try:
        with open(source, "rb") as f:
            packets = f.read(len(magic)) == magic
    except OSError:  # (the job reports it)
        packets = False
    if packets:
        return out.with_suffix(".npy")
    return out.with_name(out.name + _kind_suffix(source)) if not out.suffix else out


class _Counted:
    """A binary input read after its first bytes ``head`` (already read), counting what is read."""

    def __init__(self, head: bytes, src: Any) -> None:
        self.head, self.src, self.n = head, src, 0

    def read(self, size: int = -1) -> bytes:
        if self.head:
            out, self.head = (self.head, b"") if size < 0 or size >= len(self.head) else \
                (self.head[:size], self.head[size:])
            if size < 0 or len(out) < size:
                out += self.src.read(-1 if size < 0 else size - len(out))
        else:
            out = self.src.read(size)
        self.n += len(out)
        return out


_SOURCE_SUFFIX = {"csv": ".csv", "wav": ".wav", "npy": ".npy", "array": ".npy", "npz": ".npz",
                  "arrays": ".npz"}


def _kind_suffix(source: Path) -> str:
    """The suffix of what a ``.ubpe`` gives back, for a name that has none (``ubpe compress - -o
    x.ubpe < in.wav`` -> ``x.wav``); "" where the file cannot say (the job reports why)."""
    try:
        with open(source, "rb") as f:  # (a stream: its first frame says which; read alone)
            head = f.read(len(container.STREAM_MAGIC))
            if signals.files.is_stream(head):
                data = next(container.iter_stream_frames(cast(IO[bytes], _Counted(head, f))))
            else:
                data = head + f.read()
        info = signals.inspect(data)  # (a version-1 container's arrays come back as a CSV)
        return _SOURCE_SUFFIX.get(str(info.get("source")) if info["version"] >= 2 else "csv", "")
    except (OSError, ValueError, StopIteration):
        return ""


@click.command()
@click.argument("sources", metavar="FILE.ubpe...", nargs=-1, required=True)
@output_options("File to write ('-': standard output). Default: each input's name without "
                ".ubpe, in its folder (a/x.csv.ubpe -> a/x.csv; a packet stream's channels: "
                "a/x.npy; a recording's arrays: a/x.edf.npz).")
@_model_option
@threads_option("Decompress the frames of a stream (a CSV above 8 MiB, a WAV above 2 MiB)",
                "in N threads")
@click.option("--max-values", type=click.IntRange(1), default=signals.codec.MAX_VALUES,
              show_default="2**30",
              help="Refuse a file that declares more values (its memory: about 8 bytes each), "
                   "as a guard against crafted files: a container, a frame of a stream, a "
                   "packet stream in all.")
def decompress(sources, output, to_stdout, force, report: Reporter, model_path, threads,
               max_values):
    """Give back the files that 'ubpe compress' compressed, exactly.

    FILE '-' reads standard input and writes standard output unless -o is given.
    """
    start_numba()
    jobs = plan(sources, output=output, to_stdout=to_stdout, force=force,
                name_rule=_decompressed_name, other_inputs=[model_path] if model_path else [],
                binary=False)  # (as xz -dc: what went in comes out, a CSV to a terminal too)
    model = _model_or_exit(model_path, report)

    def work(job: Job) -> None:
        src = open_input(job.source)
        try:
            data = src.read(len(container.STREAM_MAGIC))
            if signals.files.is_stream(data):  # read a frame at a time: bounded memory
                counted = _Counted(data, src)
                with open_output(job.output) as dst:
                    s = signals.files.decompress_file_stream(cast(IO[bytes], counted), dst,
                                                             model=model,
                                                             threads=threads,
                                                             max_values=max_values)
                report.info(f"{job.name}: {counted.n:,} -> {s['bytes_out']:,} bytes "
                            f"({s['frames']} frames); wrote {_where(job.output)}")
                return
            data += src.read()
        finally:
            if src is not sys.stdin.buffer:
                src.close()
        if data[:len(container.PACKET_STREAM_MAGIC)] == container.PACKET_STREAM_MAGIC:
            if model is None:
                raise ValueError(f"{job.name}: a packet stream; pass the model it was made with "
                                 f"(--model)")
            out = signals.files.decompress_packets_file(data, model, max_values=max_values).data
        elif container.container_version(data) == 1:
            values = signals.decompress(data, max_values=max_values)
            info = signals.inspect(data)
            channels = info["channels"]
            values = [values] if np.ndim(values) == 1 and len(channels) == 1 else list(values)
            out = csv_text([c["name"] for c in channels], values,
                           [c["quantizer"] is None for c in channels])
        else:
            out = signals.decompress_file(data, model=model, max_values=max_values).data
        write_output(job.output, out)
        report.info(f"{job.name}: {len(data):,} -> {len(out):,} bytes; wrote {_where(job.output)}")

    run_jobs(jobs, report, work)


__all__ = ["compress", "decompress", "inspect", "load_model"]
