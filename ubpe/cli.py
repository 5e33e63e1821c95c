"""The ``ubpe`` command line."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import click

from ._io import FormatError


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
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def build(files, output, columns, exclude, levels, vocab_size, n_candidates, min_frequency,
          doc_length, quiet):
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
    tokens = model.encode(channels)
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
         f"({n_tokens:,} tokens on the training data)")
    echo("max quantization error per channel (input units; 0 = lossless):")
    for name, q, c in zip(names, model.quantizers_, channels):
        echo(f"  {name:<28} {q.error(c)[0]:.6g}  (bound {q.max_error_[0]:.6g})")
    echo(f"wall time    {wall:.2f} s")
    echo(f"model        {output}")


if __name__ == "__main__":
    main()
