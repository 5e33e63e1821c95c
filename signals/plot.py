"""Pictures of what ubpe does to a signal (matplotlib; needs ``ubpe[plot]``).

Each picture is a function that returns a :class:`matplotlib.figure.Figure`.
They build the figure without ``pyplot``, so no GUI backend is ever loaded:
``fig.savefig("x.png")`` renders with Agg, headless or not. Show one in a
notebook by leaving it as a cell's value, or with ``pyplot`` as usual.

- :func:`tokens_figure`: a window of the signal with each token's span shaded
  and labelled with its token id;
- :func:`bits_figure`: bits per sample along the recording, block by block,
  each block compressed by :func:`signals.compress`;
- :func:`vocab_figure`: tokens per sample and bits per sample against the
  vocabulary size, from one training run;
- :func:`residual_figure`: the histogram of prediction residuals against
  the entropy coder's table.
"""

from __future__ import annotations

import io
import os
import pickle
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ubpe import Tokenizer, split_documents
from ubpe.serialization import atomic_writer

from .arraylike import as_channels
from .codec import compress
from .model import SignalModel
from .predict import LinearPredictor, zigzag

if TYPE_CHECKING:
    from matplotlib.figure import Figure
from .quantize import UniformQuantizer

__all__ = ["tokens_figure", "bits_figure", "vocab_figure", "residual_figure", "save_all",
           "PICTURES"]

_SHADES = ("#4C72B0", "#DD8452")


def _figure(width: float = 10.0, height: float = 4.0):
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), layout="constrained")


def _channel(x: Any, channel: int) -> tuple[np.ndarray, str]:
    chans, names = as_channels(x)
    if not 0 <= channel < len(chans):
        raise ValueError(f"channel {channel} does not exist ({len(chans)} channel(s))")
    c = chans[channel]  # (bool as 0 and 1: quantizers take numbers)
    return (c.view(np.uint8) if c.dtype == np.bool_ else c), (names[channel] if names else f"ch{channel}")


# integers spanning fewer values are kept exactly (16-bit audio; the residual picture draws a value
# per residual, the vocabulary picture fits a tokenizer on an alphabet of twice the range)
MAX_KEPT_RANGE = 2**16


def _codes(x: np.ndarray, n_levels: int) -> tuple[np.ndarray, str]:
    """Integer codes from 0 (int64), and how they were made (for a title): integers (bool
    too) minus their least value where they span fewer than ``MAX_KEPT_RANGE`` values (the
    integers that :func:`signals.compress` predicts), else ``n_levels`` uniform bins."""
    if x.dtype.kind in "iub" and x.size:
        lo = int(x.min())
        if int(x.max()) - lo < MAX_KEPT_RANGE:  # (Python ints: no wrap in any dtype)
            return (x.astype(np.uint64) - np.uint64(lo % 2**64)).astype(np.int64), ""
    return (UniformQuantizer(n_levels).fit(x).encode(x).astype(np.int64),
            f", quantized to {n_levels:,} levels")


def tokens_figure(x: Any, model: SignalModel | None = None, *, channel: int = 0, start: int = 0,
                  length: int = 400, method: str = "shortest", n_levels: int = 256,
                  vocab_size: int = 512, rate: float | None = None, title: str | None = None) -> Figure:
    """A window of the signal with each UBPE token's span shaded.

    The window's quantized samples are encoded as one document; token ``k``
    covers ``token_lengths()[ids[k]]`` samples. Spans alternate between two
    colours and carry the token id as a label (merged tokens in bold).

    Parameters
    ----------
    x : array-like
        Samples; any input :func:`signals.arraylike.as_channels` takes
        (1-D array, ``(n_channels, n_samples)`` array, pandas DataFrame...).
    model : SignalModel, optional
        A model from ``ubpe build`` whose channel ``channel`` is used. None:
        a model is fitted on this channel (``n_levels`` levels,
        ``vocab_size`` tokens, documents of ``length`` samples).
    channel : int, default 0
    start, length : int, default 0 and 400
        The window, in samples.
    method : {"shortest", "merges", "weighted"}, default "shortest"
        The encoder (see :meth:`ubpe.Tokenizer.encode`).
    n_levels, vocab_size : int
        For the model fitted when none is given.
    rate : float, optional
        Sampling rate in Hz: the x axis in seconds instead of samples.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.ubpe_ids`` holds the token ids (int32, one per span) and
        ``fig.ubpe_spans`` their ``(first sample, length)`` rows.

    Raises
    ------
    ValueError
        On an empty window, a missing channel, or values outside the model's
        fitted range.
    """
    sig, name = _channel(x, channel)
    win = sig[start:start + length]
    if win.size == 0:
        raise ValueError(f"empty window: start={start}, length={length}, {sig.size} samples")
    if model is None:
        fit_on = sig if sig.size <= 200_000 else sig[:200_000]
        model = SignalModel(n_levels=n_levels, vocab_size=vocab_size, n_candidates=8,
                            doc_length=length, progress=False, codec=False).fit([fit_on])
        q, tok = model.quantizers_[0], model.tokenizer_
    else:
        q, tok = model.quantizers_[channel], model.tokenizer_
    ids = tok.encode(q.encode(win).astype(np.int64), method=method)
    lengths = tok.token_lengths()[ids]
    firsts = start + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    scale = 1.0 / rate if rate else 1.0
    t = (start + np.arange(win.size)) * scale

    fig = _figure()
    ax = fig.add_subplot()
    lo, hi = float(win.min()), float(win.max())
    pad = 0.08 * (hi - lo or 1.0)
    for parity in (0, 1):
        sel = np.arange(parity, ids.size, 2)
        ax.broken_barh([((f - 0.5) * scale, n * scale) for f, n in zip(firsts[sel], lengths[sel])],
                       (lo - pad, hi - lo + 2 * pad), facecolors=_SHADES[parity], alpha=0.3,
                       edgecolor="none", gid=f"token-spans-{parity}")
    ax.plot(t, win, color="black", lw=0.9)
    width_px = fig.get_figwidth() * fig.dpi * 0.9
    per_sample = width_px / win.size
    for f, n, i in zip(firsts, lengths, ids):
        if n * per_sample >= 9:  # room for a label
            ax.text((f + (n - 1) / 2) * scale, hi + pad * 0.5, str(int(i)), ha="center",
                    va="bottom", fontsize=6, rotation=90,
                    fontweight="bold" if i >= tok.alphabet_size else "normal")
    ax.set_xlim((start - 0.5) * scale, (start + win.size - 0.5) * scale)
    ax.set_ylim(lo - pad, hi + 2.5 * pad)
    ax.set_xlabel("time (s)" if rate else "sample")
    ax.set_ylabel(name)
    merged = int((ids >= tok.alphabet_size).sum())
    ax.set_title(title or f"{ids.size} tokens over {win.size} samples "
                          f"({win.size / ids.size:.2f} samples per token, {merged} merged); "
                          f"vocabulary {tok.n_tokens_}, method {method!r}")
    fig.ubpe_ids = ids
    fig.ubpe_spans = np.column_stack([firsts, lengths])
    return fig


BITS_BLOCK = 16384


def bits_figure(x: Any, *, block: int = BITS_BLOCK, rate: float | None = None,
                title: str | None = None, **options: Any) -> Figure:
    """Bits per sample along the recording: each block compressed on its own.

    Parameters
    ----------
    x : array-like
        Samples (any input :func:`signals.arraylike.as_channels` takes); one
        line per channel.
    block : int, default 16384
        Samples per block.
    rate : float, optional
        Sampling rate in Hz (x axis in seconds).
    title : str, optional
    **options
        Passed to :func:`signals.compress` (``quantizer``, ``n_levels``...).

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.ubpe_bits`` holds, per channel, the bits per sample of each
        block (float64 arrays).

    Raises
    ------
    ValueError
        On ``block < 1`` or what :func:`signals.compress` raises.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    chans, names = as_channels(x)
    return _draw_bits(chans, names, _block_bits(chans, block, options), block, rate, title)


def _block_bits(chans: Sequence[np.ndarray], block: int,
                options: dict) -> list[tuple[np.ndarray, float]]:
    """Per channel: (bits per sample of each block coded on its own, bits per sample of the whole)."""
    return [(_blocks_only(c, block, options), 8.0 * len(compress(c, **options)) / c.size)
            for c in chans]


def _blocks_only(c: np.ndarray, block: int, options: dict) -> np.ndarray:
    return np.array([8.0 * len(compress(c[i:i + block], **options)) / c[i:i + block].size
                     for i in range(0, c.size, block)])


def _draw_bits(chans: Sequence[np.ndarray], names: Sequence[str] | None,
               computed: list[tuple[np.ndarray, float]], block: int, rate: float | None,
               title: str | None) -> Figure:
    names = names or [f"ch{i}" for i in range(len(chans))]
    fig = _figure(10, 3.5)
    ax = fig.add_subplot()
    scale = 1.0 / rate if rate else 1.0
    for c, name, (bits, whole) in zip(chans, names, computed):
        edges = np.minimum(np.arange(bits.size + 1) * block, c.size) * scale
        ax.stairs(bits, edges, baseline=None, label=f"{name}: {whole:.2f} bits/sample whole")
    ax.set_xlabel("time (s)" if rate else "sample")
    ax.set_ylabel("bits per sample")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title or f"bits per sample, blocks of {block:,} samples compressed on their own")
    fig.ubpe_bits = [bits for bits, _ in computed]
    return fig


class _Forked:
    """``fn(*args)`` computed in a forked child process while this one goes on.

    Only where forking is safe and can help: Linux, no other thread in this
    process (a lock held by another thread at the fork would stay held in the
    child), and more than one CPU with the last minute's load average below
    the CPU count less one half (on a saturated machine the child would only
    take CPU time from this process). Elsewhere, or when the child fails,
    :meth:`result` runs ``fn`` here, so the value is the same either way.
    """

    def __init__(self, fn: Any, *args: Any, enabled: bool = True):
        self._fn, self._args = fn, args
        self._pid: int | None = None
        if not (enabled and _fork_helps()):
            return
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child: compute, send the pickled value, leave without cleanup
            code = 1
            try:
                os.close(r)
                with os.fdopen(w, "wb") as out:
                    out.write(pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self._pid, self._read = pid, r

    def result(self) -> Any:
        if self._pid is not None:
            with os.fdopen(self._read, "rb") as f:
                data = f.read()
            _, status = os.waitpid(self._pid, 0)
            self._pid = None
            if status == 0 and data:
                return pickle.loads(data)
        return self._fn(*self._args)

    def close(self) -> None:
        """Stop and reap the child if its value was not taken."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            os.close(self._read)
            os.waitpid(self._pid, 0)
            self._pid = None


def _fork_helps() -> bool:
    """Linux, one thread, and a CPU beside this process's idle (the last minute's load)."""
    if not (sys.platform.startswith("linux") and hasattr(os, "fork")):
        return False
    if threading.active_count() > 1:
        return False
    try:
        n_cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n_cpus = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    # a saturated machine: the child would only compete with this process for a CPU
    return n_cpus > 1 and load < n_cpus - 0.5


def vocab_figure(x: Any, *, channel: int = 0, n_levels: int = 1024, max_merges: int = 1024,
                 vocab_sizes: Sequence[int] | None = None, doc_length: int = 4096,
                 title: str | None = None) -> Figure:
    """Tokens per sample and bits per sample against the vocabulary size.

    One tokenizer is trained (classic BPE order) with ``max_merges`` merges
    on the prediction residuals that :func:`signals.compress` codes; every
    smaller vocabulary is a prefix of its merges. For each size the residuals
    are encoded (shortest segmentation), and the bits per sample are the
    order-0 entropy of the tokens times tokens per sample (the rANS coder's
    cost without its table).

    Parameters
    ----------
    x : array-like
    channel : int, default 0
    n_levels : int, default 1024
        Uniform quantizer levels for float input, and for integers that span
        ``MAX_KEPT_RANGE`` (2**16) values or more (the title then says so);
        other integers are kept exactly, as :func:`signals.compress` codes them.
    max_merges : int, default 1024
    vocab_sizes : sequence of int, optional
        Merge counts to evaluate; default 0 and powers of two up to
        ``max_merges``.
    doc_length : int, default 4096
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.ubpe_curve`` is an array of rows ``(merges, tokens per sample,
        bits per sample)``.
    """
    sig, name = _channel(x, channel)
    codes, how = _codes(sig, n_levels)
    res, _ = LinearPredictor().encode(codes)
    sym = zigzag(res).astype(np.int64)
    docs = split_documents(sym, doc_length)
    alphabet = max(2, int(sym.max()) + 1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = Tokenizer(alphabet, alphabet + max_merges, n_candidates=8, token_order="rank",
                         progress=False).fit(docs)
    learned = len(full.merges_)
    sizes = sorted({0, learned, *[m for m in (vocab_sizes or
                                              [2 ** k for k in range(2, 31)]) if m <= learned]})
    rows = []
    pairs = full.merges_[:, :2]
    for m in sizes:
        tok = Tokenizer.from_merges(alphabet, pairs[:m])
        ids = np.concatenate(tok.encode_batch(docs, method="shortest"))
        _, counts = np.unique(ids, return_counts=True)
        p = counts / ids.size
        h = float(-(p * np.log2(p)).sum())
        rows.append((m, ids.size / sym.size, h * ids.size / sym.size))
    curve = np.array(rows)
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    ax.plot(alphabet + curve[:, 0], curve[:, 1], "o-", color=_SHADES[0], label="tokens per sample")
    ax.set_xscale("log")
    ax.set_xlabel(f"vocabulary size (residual alphabet {alphabet} + merges)")
    ax.set_ylabel("tokens per sample", color=_SHADES[0])
    ax2 = ax.twinx()
    ax2.plot(alphabet + curve[:, 0], curve[:, 2], "s-", color=_SHADES[1], label="bits per sample")
    ax2.set_ylabel("bits per sample (order-0 entropy)", color=_SHADES[1])
    ax.set_title(title or f"{name}: vocabulary growth on prediction residuals{how}")
    fig.ubpe_curve = curve
    return fig


def residual_figure(x: Any, *, channel: int = 0, n_levels: int = 1024, title: str | None = None) -> Figure:
    """The histogram of prediction residuals against the entropy coder's table.

    Bars: the empirical probability of each residual value (what the
    per-channel frequency table of the rANS coder holds when each residual
    is its own token, as with zero merges). Line: the two-sided geometric
    (discrete Laplace) law with the same mean absolute value, which a Rice /
    Golomb coder such as FLAC's assumes (Rice, 1979; Golomb, 1966). The title
    gives each one's cost in bits per sample: the table's entropy and the
    Laplace law's cross-entropy.

    Parameters
    ----------
    x : array-like
    channel : int, default 0
    n_levels : int, default 1024
        Uniform quantizer levels for float input, and for integers that span
        ``MAX_KEPT_RANGE`` (2**16) values or more (the title then says so);
        other integers are kept exactly, as :func:`signals.compress` codes them.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.ubpe_entropy`` is ``(table bits/sample, Laplace bits/sample)``.
    """
    sig, name = _channel(x, channel)
    codes, how = _codes(sig, n_levels)
    res, _ = LinearPredictor().encode(codes)
    res = res.astype(np.int64)
    values, counts = np.unique(res, return_counts=True)
    p = counts / res.size
    h_table = float(-(p * np.log2(p)).sum())
    mean_abs = max(float(np.abs(res).mean()), 1e-9)
    theta = mean_abs / (1.0 + mean_abs) if mean_abs < 1e6 else 1 - 1e-6
    theta = float(np.clip(theta, 1e-9, 1 - 1e-9))

    def laplace(v: np.ndarray) -> np.ndarray:
        return (1 - theta) / (1 + theta) * theta ** np.abs(v)

    h_laplace = float(-(p * np.log2(laplace(values))).sum())
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    lim = int(np.quantile(np.abs(res), 0.995)) + 1
    keep = np.abs(values) <= lim
    if keep.sum() <= 512:
        ax.bar(values[keep], p[keep], width=1.0, color=_SHADES[0], alpha=0.6,
               label="residuals (coder's table)")
    else:  # (one line collection: a bar per value, thousands of patches, draws for seconds)
        ax.vlines(values[keep], p[keep].min() / 2, p[keep], color=_SHADES[0], alpha=0.6,
                  label="residuals (coder's table)")
    grid = np.arange(-lim, lim + 1)
    ax.plot(grid, laplace(grid), color=_SHADES[1], lw=1.5, label="discrete Laplace (Rice/Golomb)")
    ax.set_yscale("log")
    ax.set_xlabel("prediction residual")
    ax.set_ylabel("probability")
    ax.legend(fontsize=8)
    ax.set_title(title or f"{name}: table {h_table:.2f} bits/sample, Laplace {h_laplace:.2f} "
                          f"bits/sample ({res.size:,} residuals{how})")
    fig.ubpe_entropy = (h_table, h_laplace)
    return fig


PICTURES: dict[str, Any] = {"tokens": tokens_figure, "bits": bits_figure, "vocab": vocab_figure,
            "residuals": residual_figure}


def save_all(x: Any, outdir: str | Path, *, which: Sequence[str] = tuple(PICTURES),
             prefix: str = "", dpi: int = 120, model: SignalModel | None = None,
             channel: int = 0, start: int = 0, length: int = 400,
             rate: float | None = None, parallel: bool = True) -> list[Path]:
    """Render pictures to PNG files ``<outdir>/<prefix><name>.png``.

    Parameters
    ----------
    x : array-like
    outdir : path
        Created if missing.
    which : sequence of {"tokens", "bits", "vocab", "residuals"}
    prefix : str
    dpi : int, default 120
    model, channel, start, length, rate
        As in :func:`tokens_figure` (``channel`` and ``rate`` for the others too).
    parallel : bool, default True
        On Linux with a second CPU free (load average below the CPU count
        less one half) and no other thread running, compute the bits
        picture (blocks of ``BITS_BLOCK`` samples, each compressed) in a
        forked child process while this one draws the others. The pictures
        are the same either way.

    Returns
    -------
    list of Path
        The files written: every picture is drawn first, so that an error
        (an empty token window, a value outside the model) writes none.

    Raises
    ------
    ValueError
        On an unknown picture name, or what a picture raises.
    """
    unknown = [w for w in which if w not in PICTURES]
    if unknown:
        raise ValueError(f"unknown picture(s) {unknown}; choose from {', '.join(PICTURES)}")
    outdir = Path(outdir)
    chans, names = as_channels(x)
    one = chans[channel] if 0 <= channel < len(chans) else None
    if one is None:
        raise ValueError(f"channel {channel} does not exist ({len(chans)} channel(s))")
    if not one.size:  # (the bits picture divided by it)
        raise ValueError(f"channel {channel} has no samples: nothing to draw")
    # the bits picture compresses every block: the longest part. The whole channel is coded
    # here first (which loads the coder's compiled kernels), then, where a second CPU is free,
    # a forked child codes the blocks while this process draws the other pictures.
    blocks, whole = None, 0.0
    if "bits" in which:
        whole = 8.0 * len(compress(one)) / one.size
        blocks = _Forked(_blocks_only, one, BITS_BLOCK, {}, enabled=parallel)
    png: dict[str, bytes] = {}  # (every picture drawn before any file is written)
    name = names[channel] if names else f"ch{channel}"
    try:  # the bits picture last: its child has the most time to finish
        for w in sorted(dict.fromkeys(which), key=lambda w: w == "bits"):
            if w == "tokens":
                fig = tokens_figure(x, model, channel=channel, start=start, length=length,
                                    rate=rate)
            elif w == "bits":
                assert blocks is not None
                fig = _draw_bits([one], [name], [(blocks.result(), whole)], BITS_BLOCK, rate,
                                 f"{name}: bits per sample, blocks compressed on their own")
            else:
                fig = PICTURES[w](x, channel=channel)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=dpi)
            png[w] = buf.getvalue()
    finally:
        if blocks is not None:
            blocks.close()
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for w in dict.fromkeys(which):
        path = outdir / f"{prefix}{w}.png"
        with atomic_writer(path) as f:
            f.write(png[w])
        written.append(path)
    return written
