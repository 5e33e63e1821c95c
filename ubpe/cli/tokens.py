"""ubpe build, encode, decode: UBPE vocabularies over CSV channels."""

from __future__ import annotations

import io
import json
import time
import warnings
from pathlib import Path

import click
import numpy as np

import signals.formats
from signals import CsvError, SignalModel, read_csv
from signals.codec import MAX_VALUES
from signals.model import PACKET_SIZE, stage_lines
from signals.readers import npz_arrays
from signals.table import encode_csv, sniff

from ._common import (
    CHAR,
    METHODS,
    STDIO,
    Reporter,
    check_picks,
    input_path,
    method_options,
    output_options,
    read_input,
    single_output,
    split_list,
    write_csv,
    write_output,
)
from .signal import load_model


def csv_options(f):
    """--skip-rows, --comment and --delimiter: how a CSV file is read (build and encode)."""
    f = click.option("--delimiter", type=CHAR, default=None,
                     help="Field delimiter. Default: detected.")(f)
    f = click.option("--comment", type=CHAR, default=None,
                     help="Comment lines start with CHAR.")(f)
    return click.option("--skip-rows", type=click.IntRange(0), default=None,
                        help="Lines above the header. Default: detected (e.g. NREL's metadata "
                             "line).")(f)


@click.command()
@click.argument("files", metavar="FILE.csv...", nargs=-1, required=True)
@output_options("Model file to write (JSON; '-': standard output).")
@click.option("--columns", metavar="A,B,...",
              help="Columns to read, by header name or 0-based index, comma-separated. "
                   "Default: every numeric column.")
@click.option("--exclude", metavar="A,B,...",
              help="Columns to leave out (names or 0-based indices), e.g. a label column.")
@click.option("--levels", default=1024, show_default=True, type=click.IntRange(2, 2**24),
              help="Quantization levels per channel (the alphabet size; at most 2**24, the "
                   "largest a model file may declare by default, and as many bins over all the "
                   "channels together). Integer channels whose range "
                   "fits (magnitudes below 2**52) are kept exactly.")
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
@click.option("--packet-size", type=click.IntRange(1), default=PACKET_SIZE, show_default=True,
              metavar="N", help="Packet length (samples) the compression model is tuned for: "
              "that of 'ubpe compress --packet-size'. Which stages pay depends on it.")
@csv_options
def build(files, output, to_stdout, force, report: Reporter, columns, exclude, levels,
          vocab_size, n_candidates, min_frequency, doc_length, method, packet_size, skip_rows,
          comment, delimiter):
    """Train a UBPE vocabulary on the numeric columns of CSV FILES ('-': stdin).

    Each selected column of each file is one channel. The model holds two parts:

    \b
    - a compression model ('ubpe compress --model'): per channel, a predictor
      and entropy tables fitted on the exact integer form of the column, kept
      only where they lower the bits of a held-out 30% (the decision is
      printed);
    - a tokenizer ('ubpe encode'): every channel is quantized to LEVELS codes
      (error at most half a bin, in the input's units), cut into documents,
      and one UBPE vocabulary is trained on all of them.

    Prints a summary on stderr (-q: none, -v: details per channel); writes
    the model atomically, with a checksum and a content id.
    """
    if list(files).count(STDIO) > 1:
        raise click.UsageError("standard input ('-') can be read only once")
    check_picks(columns, exclude)
    if vocab_size < levels:
        raise click.UsageError(f"--vocab-size ({vocab_size}) is below --levels ({levels}): it "
                               f"counts the alphabet of levels plus the merged tokens")
    dst = single_output(files, output=output, to_stdout=to_stdout, force=force, binary=False)
    seen = [f if f == STDIO else str(Path(f).resolve()) for f in files]
    twice_given = [f for f, r in zip(files, seen) if seen.count(r) > 1]
    if twice_given:
        raise ValueError(f"{twice_given[0]} is given twice: its data would weigh double in "
                         f"the model")
    t0 = time.perf_counter()
    tables, codec_channels = [], []
    excluded_found: set[str] = set()
    scales: dict[str, dict] = {}  # column -> {(kind, decimals): the first file of them}
    csv_options = {"skip_rows": skip_rows, "comment": comment, "delimiter": delimiter}
    for f in files:
        suffix = Path(f).suffix.lower()
        if suffix in (".npz", ".npy", ".wav", ".ubpe", ".json") or suffix in signals.formats.SUFFIXES:
            raise ValueError(f"{f}: ubpe build reads CSV files, not {suffix} files")
        with input_path(f) as path:
            data = Path(path).read_bytes()
            excluded = split_list(exclude)
            if excluded and len(files) > 1:  # (of several files, each leaves out what it has)
                names_here = [n.strip() for n in sniff(data, path=str(f), **csv_options).names]
                excluded = [c for c in excluded if c.strip() in names_here or c.strip().isdigit()]
                excluded_found.update(excluded)
            t = read_csv(path, columns=split_list(columns), exclude=excluded or None,
                         **csv_options)
            tables.append(t)
            parts = encode_csv(data, path=str(f), **csv_options)
        codec_channels += [(n, c) for n, c in parts.int_columns if n in t.names]
        for col in parts.layout.get("columns", []):
            if col.get("name") in t.names:
                seen_in = scales.setdefault(col["name"], {})
                seen_in.setdefault((col.get("kind"), col.get("scale")), f)
                if len(seen_in) > 1:  # (one model channel codes one scale: 20.0 is 200 or 2000)
                    a, b = [f"{v} digits after the point" if k == "decimal" else f"{k} cells"
                            for k, v in list(seen_in)[:2]]
                    raise ValueError(f"column {col['name']!r}: {a} in "
                                     f"{next(iter(seen_in.values()))}, {b} in {f}; a model codes "
                                     f"a column at one scale (print the files' cells with the "
                                     f"same decimals, or build a model per kind of file)")
    nowhere = [c for c in split_list(exclude) or [] if len(files) > 1 and c not in excluded_found]
    if nowhere:
        raise ValueError(f"--exclude {nowhere[0]!r}: no file has such a column")
    # files of the same columns are recordings of the same channels: one channel per column
    # (the model then tokenizes any file of those columns); else each file's columns are its own
    # channels, named 'file:column'
    pooled = len(files) > 1 and all(sorted(t.names) == sorted(tables[0].names) for t in tables)
    names, channels = [], []
    for f, t in zip(files, tables):
        prefix = f"{Path(f).stem}:" if len(files) > 1 and not pooled else ""
        names += [prefix + n for n in t.names]
        channels += t.channels
    channel_names = tables[0].names if pooled else names
    stems = [Path(f).stem for f in files]
    same = sorted({s for s in stems if stems.count(s) > 1})
    if len(files) > 1 and not pooled and same:  # (encode reads channel 'x:b' from each file x)
        raise ValueError(f"two files are named {same[0]!r}: of files of different columns, each "
                         f"channel is named 'file:column' by its file's name (rename one)")
    twice = sorted({n for n in channel_names if channel_names.count(n) > 1})
    if twice:
        raise ValueError(f"two channels would be named {twice[0]!r}: a model needs one name a "
                         f"channel (a file given twice, two files of one name in different "
                         f"folders, or a column named twice)")
    model = SignalModel(levels, vocab_size, n_candidates=n_candidates,
                        min_frequency=min_frequency, doc_length=doc_length,
                        progress=False if report.quiet else None, packet_size=packet_size)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(channels, names, codec_channels=codec_channels, codec_scales={
            n: next(iter(ks))[1] for n, ks in scales.items() if next(iter(ks))[0] == "decimal"})
    # (each file's channels in the model's order: pooled files may order their columns otherwise)
    per_file = ([[t.channels[t.names.index(n)] for n in tables[0].names] for t in tables]
                if pooled else [channels])
    tokens = [ids for chans in per_file for ids in model.encode(chans, method=method)]
    if dst == STDIO:
        from ubpe.serialization import seal
        doc = model.to_dict()
        write_output(dst, (json.dumps(seal(doc), indent=1) + "\n").encode())
    else:
        model.save(dst)
    wall = time.perf_counter() - t0

    n_samples = sum(c.size for c in channels)
    n_tokens = sum(t.size for t in tokens)
    n_docs = sum(len(range(0, c.size, doc_length)) if doc_length else 1 for c in channels)
    tok = model.tokenizer_
    echo = report.info
    for w in caught:
        report.warn(str(w.message))
    echo(f"files        {len(files)}: {', '.join(str(f) for f in files)}")
    for f, t in zip(files, tables):
        if t.skipped:
            echo(f"skipped      {Path(f).name}: {', '.join(t.skipped)} (not numeric)")
    echo(f"channels     {len(model.channel_names_)}"
         + (f" (the same columns in every file: {len(files)} recordings each)" if pooled else ""))
    echo(f"samples      {n_samples:,}")
    echo(f"documents    {n_docs:,}")
    echo(f"vocabulary   {tok.n_tokens_:,} tokens ({levels:,} alphabet + "
         f"{len(tok.merges_):,} merges)")
    echo(f"compression  {n_samples / max(n_tokens, 1):.3f} samples per token "
         f"({n_tokens:,} tokens on the training data, method {method})")
    of = {n: q for n, q in zip(model.channel_names_, model.quantizers_)}
    worst = max(float(of[n].error(c)[0]) for n, c in zip(names, channels))
    echo(f"max error    {worst:.6g} (input units" + (", lossless)" if worst == 0 else ")"))
    report.detail("max quantization error per channel (input units; 0 = lossless):")
    # (pooled files repeat their column names: each line then says its file)
    shown = [f"{Path(f).name}:{n}" for f, t in zip(files, tables) for n in t.names] \
        if pooled else names
    for name, label, c in zip(names, shown, channels):
        report.detail(f"  {label:<28} {of[name].error(c)[0]:.6g}  (bound {of[name].max_error_[0]:.6g})")
    for r in model.codec_report_:
        bits = (f"{r['bits_own']:.3f} -> {r['bits_model']:.3f} bits/sample held out in packets "
                f"of {packet_size:,}" if r["bits_own"] is not None else "")
        echo(f"codec        {r['name']}: {'kept' if r['kept'] else 'not kept'}"
             + (f", {bits}" if bits else "") + f" ({r['reason']})")
        for line in stage_lines(r):
            echo(f"               {line}")
    echo(f"wall time    {wall:.2f} s")
    echo(f"model        {'standard output' if dst == STDIO else dst}, content id "
         f"{model.content_id()[:19]}...")


def _read_model_channels(model, files, **csv_options):
    """Read the model's channels (by name) from CSV files, in the model's order.

    One file: the model's channels are its columns (a model built on one file, or on files
    of the same columns). Several files: a model built on files of different columns, whose
    channels are 'file:column', each read from the file it names."""
    if len(files) == 1:
        with input_path(files[0]) as path:
            try:
                t = read_csv(path, columns=list(model.channel_names_), **csv_options)
            except CsvError:
                stems = sorted({n.split(":")[0] for n in model.channel_names_ if ":" in n})
                if len(stems) > 1 and all(":" in n for n in model.channel_names_):
                    raise ValueError(
                        f"the model was built on the files {', '.join(stems)}, each with channels "
                        f"of its own ('file:column'): it encodes those files, given together; to "
                        f"tokenize any file, build on files of the same columns") from None
                raise
        return list(t.channels)
    prefixes = [f"{Path(f).stem}:" for f in files]
    if not any(n.startswith(p) for n in model.channel_names_ for p in prefixes):
        raise ValueError(f"the model's channels are columns ({', '.join(model.channel_names_)}): "
                         f"encode one file at a time")
    by_name = {}
    for f, prefix in zip(files, prefixes):
        with input_path(f) as path:
            t = read_csv(path, columns=[n[len(prefix):] for n in model.channel_names_
                                     if n.startswith(prefix)] or None, **csv_options)
        by_name.update({prefix + n: c for n, c in zip(t.names, t.channels)})
    missing = [n for n in model.channel_names_ if n not in by_name]
    if missing:
        raise ValueError(f"the input lacks the model's channels: {', '.join(missing)}")
    return [by_name[n] for n in model.channel_names_]


@click.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("files", metavar="FILE.csv...", nargs=-1, required=True)
@output_options("Token file to write (.npz; '-': standard output).")
@method_options
@csv_options
def encode(model_path, files, output, to_stdout, force, report: Reporter, method, top_n, beam,
           skip_rows, comment, delimiter):
    """Tokenize the channels of CSV FILES with a model from 'ubpe build'.

    A model of columns (one file, or files of the same columns) encodes any
    one file that has them; a model of several files' own channels encodes
    those files, given together. A value outside the range a channel was
    built on is an error (never clipped).

    Writes an .npz with 'model' (the model's content id: 'ubpe decode' checks
    it) and, per channel NAME: 'tokens/NAME' (int32 token ids of the best
    encoding, documents concatenated) and 'offsets/NAME' (where each document
    starts). With --top-n K > 1: 'alt1/NAME'..'alt{K-1}/NAME', the k-th best
    encoding of each document (its best where it has fewer), with
    'alt1_offsets/NAME'.. where its documents start, and 'scores/NAME', shape
    (n_documents, K).
    """
    if top_n > 1 and method != "weighted":
        raise click.UsageError("--top-n above 1 needs --method weighted")
    if [model_path, *files].count(STDIO) > 1:
        raise click.UsageError("standard input ('-') can be read only once")
    dst = single_output([model_path, *files], output=output, to_stdout=to_stdout, force=force)
    model = load_model(model_path)
    channels = _read_model_channels(model, files, skip_rows=skip_rows, comment=comment,
                                    delimiter=delimiter)
    arrays = {"model": np.array(model.content_id())}
    n_samples = n_tokens = 0
    try:
        encoded = model.encode_documents(channels, method=method, top_n=top_n, beam=beam)
    except ValueError as e:  # (a value outside the fitted range: named after its file; a
        # model of several files names them in its channels, FILE:COLUMN)
        raise ValueError(f"{'standard input' if files[0] == STDIO else files[0]}: {e} (sample 0 "
                         f"is the first data row)" if len(files) == 1 else str(e)) from None
    for name, c, docs in zip(model.channel_names_, channels, encoded):
        ranked = [d if top_n > 1 else [(d, model.tokenizer_.score(d))] for d in docs]
        for k in range(top_n):
            pick = [r[min(k, len(r) - 1)][0] for r in ranked]
            arrays[f"{'tokens' if k == 0 else f'alt{k}'}/{name}"] = np.concatenate(pick)
            arrays[f"{'' if k == 0 else f'alt{k}_'}offsets/{name}"] = \
                np.cumsum([0] + [len(p) for p in pick])[:-1]
        if top_n > 1:
            arrays[f"scores/{name}"] = np.array(
                [[r[min(k, len(r) - 1)][1] for k in range(top_n)] for r in ranked])
        n_samples += c.size
        n_tokens += arrays[f"tokens/{name}"].size
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
    write_output(dst, buf.getvalue())
    report.info(f"{len(channels)} channels, {n_samples:,} samples -> {n_tokens:,} tokens "
                f"({n_samples / max(n_tokens, 1):.3f} samples per token, method {method}); "
                f"wrote {'standard output' if dst == STDIO else dst}")


@click.command()
@click.argument("model_path", metavar="MODEL")
@click.argument("tokens_path", metavar="TOKENS.npz")
@output_options("CSV file to write ('-': standard output).")
@click.option("--file", "file_name", metavar="NAME",
              help="With a model built on several files: write the channels of the file NAME "
                   "(its name without folder and suffix, as the model's channels 'NAME:column' "
                   "say), under their column names.")
@click.option("--max-values", type=click.IntRange(1), default=MAX_VALUES, show_default="2**30",
              help="Refuse token ids that expand to more samples, all channels together (a "
                   "token can stand for a long run: a guard against crafted files).")
def decode(model_path, tokens_path, output, to_stdout, force, report: Reporter, file_name,
           max_values):
    """Turn a token file from 'ubpe encode' back into a CSV of (quantized) samples.

    One column per channel, named as in the model; integer channels that
    were kept exactly are written as integers. A model built on several
    files of different lengths: one file's channels at a time (--file).
    """
    if model_path == tokens_path == STDIO:
        raise click.UsageError("standard input ('-') can be read only once")
    dst = single_output([model_path, tokens_path], output=output, to_stdout=to_stdout,
                        force=force, binary=False)
    model = load_model(model_path)
    where = "standard input" if tokens_path == STDIO else tokens_path
    raw = read_input(tokens_path)
    if not raw.startswith(b"PK"):  # (an .npz is a zip archive)
        raise ValueError(f"{where}: not a token file (an .npz written by 'ubpe encode')")
    try:  # (every member's declared shape checked against its bytes before it is read)
        z = dict(npz_arrays(raw, where))
    except ValueError as e:
        raise ValueError(str(e).replace("not a readable npz file", "not a token file")) from None
    stored = str(z["model"]) if "model" in z else None
    missing = [n for n in model.channel_names_ if f"tokens/{n}" not in z]
    if stored is not None and stored != model.content_id():
        raise ValueError(f"{where} was encoded with the model {stored[:19]}..., not "
                         f"{model.content_id()[:19]}... ({model_path})")
    if missing:
        raise ValueError(f"{where}: no tokens for the model's channel(s) "
                         f"{', '.join(map(repr, missing))}; was it written by 'ubpe "
                         f"encode' with this model?")
    tokens = [z[f"tokens/{n}"] for n in model.channel_names_]
    for n, t in zip(model.channel_names_, tokens):
        if t.ndim != 1 or t.dtype.kind not in "iu":
            raise ValueError(f"{where}: channel {n!r}: token ids must be a 1-D integer array, "
                             f"got {t.dtype} of shape {t.shape}")
    try:
        values = model.decode(tokens, max_values=max_values)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    # integers where the channel gives back integers exactly (a constant 0.5 is lossless too)
    names = list(model.channel_names_)
    exact = [bool(q.lossless_[0]) and bool(np.all(q.codebook_[0] == np.rint(q.codebook_[0])))
             for q in model.quantizers_]
    if file_name is not None:
        keep = [k for k, n in enumerate(names) if n.startswith(f"{file_name}:")]
        if not keep:
            files = sorted({n.split(":")[0] for n in names if ":" in n})
            raise ValueError(f"the model has no channels of a file {file_name!r}"
                             + (f" (its files: {', '.join(files)})" if files else ""))
        names = [names[k][len(file_name) + 1:] for k in keep]
        values, exact = [values[k] for k in keep], [exact[k] for k in keep]
    lengths = {v.size for v in values}
    if len(lengths) > 1:
        files = sorted({n.split(":")[0] for n in names if ":" in n})
        raise ValueError(f"{where}: channels have different lengths ({sorted(lengths)}); one CSV needs "
                         f"equal lengths" + (f": write one file's at a time, --file NAME "
                                             f"({', '.join(files)})" if files else ""))
    write_csv(dst, names, values, exact)
    report.info(f"{len(values)} channels, {values[0].size if values else 0:,} samples; wrote "
                f"{'standard output' if dst == STDIO else dst}")
