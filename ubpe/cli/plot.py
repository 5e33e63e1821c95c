"""ubpe plot: pictures of a signal's tokens, bits and residuals (needs ``ubpe[plot]``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from . import BadInput
from ._common import Reporter, check_picks, split_list, verbosity_options

PICTURES = ("tokens", "bits", "vocab", "residuals")


@click.command()
@click.argument("source", metavar="IN", type=click.Path(path_type=Path))
@click.option("-o", "--output", "outdir", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the PNG files (created if missing).")
@click.option("--which", default=",".join(PICTURES), show_default=True,
              help="Pictures to draw, comma-separated: tokens, bits, vocab, residuals.")
@click.option("--channel", default=0, show_default=True, type=click.IntRange(0),
              help="Channel (0-based, after --columns/--exclude).")
@click.option("--start", default=0, show_default=True, type=click.IntRange(0),
              help="First sample of the token window.")
@click.option("--length", default=400, show_default=True, type=click.IntRange(1),
              help="Samples in the token window.")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True),
              help="Sampling rate in Hz: time axes in seconds.")
@click.option("--model", "model_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A model from 'ubpe build' for the token picture (default: fit one).")
@click.option("--columns", metavar="A,B,...", help="Columns to read (names or 0-based indices).")
@click.option("--exclude", metavar="A,B,...", help="Columns to leave out.")
@click.option("--dpi", default=120, show_default=True, type=click.IntRange(20, 1200))
@click.option("--serial", is_flag=True,
              help="Draw everything in this process (default: on Linux with a second CPU "
                   "free, a forked child codes the bits picture's blocks meanwhile).")
@click.option("-f", "--force", is_flag=True, help="Replace existing pictures.")
@click.option("-k", "--keep", is_flag=True,
              help="Keep the input file (the default: ubpe never deletes it).")
@verbosity_options
def plot(source, outdir, which, channel, start, length, rate, model_path, columns, exclude, dpi,
         serial, force, keep, report: Reporter):
    """Draw PNG pictures of a signal file (CSV, .npz/.npy, .wav or .ubpe).

    tokens: a window with each token's span shaded and labelled; bits: bits
    per sample along the recording; vocab: tokens and bits per sample against
    the vocabulary size; residuals: the residual histogram against the
    coder's table. Files are named IN's stem, the picture and .png; existing
    ones are kept unless -f. A summary goes to stderr (-q: none, -v: each file).
    """
    check_picks(columns, exclude)
    try:
        import signals.plot  # noqa: F401  (matplotlib, or the message below)
    except ImportError as e:
        raise click.ClickException(f"ubpe plot needs matplotlib: pip install 'ubpe[plot]' ({e})") from None
    import signals

    t0 = time.perf_counter()
    names = split_list(which) or []
    unknown = [w for w in names if w not in PICTURES]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(map(repr, unknown)) or 'none given'}; choose from "
                                 f"{', '.join(PICTURES)}", param_hint="--which")
    if str(source) == "-":  # standard input: into a file of its kind's suffix (read by suffix)
        import sys

        from ubpe.serialization import temporary_folder
        raw = sys.stdin.buffer.read()
        kind = ("ubpe" if raw[:8] == b"UBPE-SIG" or signals.files.is_stream(raw)
                else signals.files.kind_of("", raw))
        with temporary_folder() as tmp:
            path = Path(tmp) / f"stdin.{kind}"
            path.write_bytes(raw)
            try:
                return _plot(path, raw, outdir, names, channel, start, length, rate, model_path,
                             columns, exclude, dpi, serial, force, report, t0)
            except click.BadParameter as e:  # (messages name the input, not the temporary file)
                raise click.BadParameter(e.message.replace(str(path), "standard input"),
                                         param_hint=e.param_hint) from None
            except ValueError as e:
                raise type(e)(str(e).replace(str(path), "standard input")) from None
    return _plot(source, source.read_bytes(), outdir, names, channel, start, length, rate,
                 model_path, columns, exclude, dpi, serial, force, report, t0)


def _plot(source, raw, outdir, names, channel, start, length, rate, model_path, columns, exclude,
          dpi, serial, force, report, t0) -> None:
    import signals
    from signals import plot as pictures
    stream = signals.files.is_stream(raw)
    try:
        data = _read_container(source, raw, stream, columns, exclude)
    except signals.SignalFormatError as e:  # (the library's messages name no file)
        raise ValueError(f"{source}: {e}") from None
    if data is None:
        data = signals.read_signal(source, columns=split_list(columns),
                                   exclude=split_list(exclude))
    chans, chan_names = data.channels, data.names
    if not 0 <= channel < len(chans):
        raise click.BadParameter(f"{source} has {len(chans)} channel(s)", param_hint="--channel")
    if not len(chans[channel]):  # (the bits picture divided by zero)
        raise BadInput(f"{source}: channel {channel} has no samples: nothing to draw")
    model = signals.SignalModel.load(model_path) if model_path else None
    if model is not None:
        mine = [n.removeprefix(f"{source.stem}:") for n in model.channel_names_]
        if len(mine) != len(chans) or chan_names is not None and mine != list(chan_names):
            # (each channel is tokenized with the model's quantizer of that channel)
            raise BadInput(f"the model's channels ({', '.join(model.channel_names_)}) are not "
                           f"those of {source}"
                           + (f" ({', '.join(chan_names)})" if chan_names is not None else
                              f" ({len(chans)})")
                           + "; pick the columns the model was built on (--columns, --exclude), "
                             "or use a model built on this file's columns")
    taken = [outdir / f"{source.stem}.{w}.png" for w in dict.fromkeys(names or PICTURES)]
    taken = [p for p in taken if p.exists()]
    if taken and not force:
        raise BadInput(f"{taken[0]} exists; use -f to replace the pictures")
    x_in = _Table(dict(zip(chan_names, chans))) if chan_names else chans
    written = pictures.save_all(x_in, outdir, which=names,
                                prefix=f"{source.stem}.", dpi=dpi, model=model, channel=channel,
                                start=start, length=length, rate=rate, parallel=not serial)
    for p in written:
        report.detail(f"wrote {p}")
    report.info(f"{len(written)} picture(s) in {outdir} in {time.perf_counter() - t0:.2f} s")


class _Table:
    """Named channels in the shape signals.arraylike reads as a table (no pandas needed)."""

    def __init__(self, columns: dict):
        self._cols = columns
        self.column_names = list(columns)
        self.num_columns = len(columns)

    def column(self, i: int) -> Any:
        return self._cols[self.column_names[i]]


def _read_container(source, raw: bytes, stream: bool, columns, exclude) -> Any:
    """The channels of a ``.ubpe`` file (a CSV file's container or stream, a WAV file's
    stream, a container of arrays), or None for another file."""
    import signals
    if stream or raw[:8] == b"UBPE-SIG" and signals.inspect(raw).get("source") == "csv":
        import io

        from ubpe.serialization import temporary_folder
        with temporary_folder() as tmp:  # a CSV file's container, or a CSV or WAV stream: a file
            path = Path(tmp) / "signal.csv"
            if stream:
                with open(path, "wb") as f:
                    signals.files.decompress_file_stream(io.BytesIO(raw), f)
                with open(path, "rb") as f:
                    if signals.files.kind_of("", f.read(12)) == "wav":  # (a WAV file's stream)
                        path = path.rename(path.with_suffix(".wav"))
            else:
                path.write_bytes(signals.decompress_file(raw).data)
            return signals.read_signal(path, columns=split_list(columns),
                                       exclude=split_list(exclude))
    if raw[:8] == b"UBPE-SIG":  # a container of arrays or of a WAV: its named channels
        from signals.readers import pick_channels
        x = signals.decompress(raw)
        return pick_channels(str(source), [c["name"] for c in signals.inspect(raw)["channels"]],
                             [x] if getattr(x, "ndim", 2) == 1 else list(x),
                             split_list(columns), split_list(exclude))
    return None
