"""Many recordings at once, on a Dask cluster (``ubpe[dask]``).

- :func:`compress_files`: one task per file, each reading the file,
  compressing it with :func:`signals.compress` and writing the output
  atomically (a temporary file, then a rename: a failed or killed task never
  leaves a partial ``.ubpe``).
- :func:`read_files`: the reading and sampling step of ``ubpe build``, one
  task per file; fitting stays local (BPE training is sequential, and a
  model is trained on a sample).

Both take a ``dask.distributed`` scheduler address, a number of local
workers, or an existing :class:`distributed.Client`. The scheduler is
Dask's (https://distributed.dask.org); nothing here schedules by hand.

For one large array, use Dask arrays and the zarr codec instead:
``dask.array.from_array(x, chunks=(4096, n)).to_zarr(z)`` with ``z`` a zarr
array whose serializer is :data:`signals.numcodecs_codec.UBPEZarrCodec`
compresses the chunks in parallel.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["compress_files", "read_files", "cluster"]


@contextlib.contextmanager
def cluster(scheduler: Any = None, workers: int | None = None, *,
            processes: bool = True) -> Iterator[Any]:
    """A ``dask.distributed`` client for the duration of a ``with`` block.

    Parameters
    ----------
    scheduler : str or distributed.Client, optional
        A scheduler address (``"tcp://host:8786"``) or a client to use as it
        is (left open on exit).
    workers : int, optional
        Without ``scheduler``: start a :class:`distributed.LocalCluster` of
        this many workers, one thread each (default: one per CPU core).
    processes : bool, default True
        Local workers as processes (parallel CPU work) or as threads in this
        process (cheap to start; numba and zstd release the GIL, Python code
        does not).

    Yields
    ------
    distributed.Client

    Raises
    ------
    ImportError
        Without dask.distributed (``pip install 'ubpe[dask]'``).
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as e:
        raise ImportError(f"this needs dask.distributed: pip install 'ubpe[dask]' ({e})") from None
    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler
        return
    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                      dashboard_address=None) as lc, Client(lc) as client:
        yield client


def _compress_one(source: str, output: str, columns: list | None, exclude: list | None,
                  options: dict[str, Any]) -> dict[str, Any]:
    """Task: read one file, compress it, write it atomically; a summary dict, or for a bad
    input (unreadable, malformed, unsupported) ``{"source", "output", "error"}`` holding the
    exception, so that the worker does not log it as a failed task with its traceback; and in
    both, ``warnings``: the messages of the warnings the task raised (a worker process printed
    them in Python's form, file and line, where the caller shows its own its way)."""
    from ubpe.serialization import BAD_INPUT
    with warnings.catch_warnings(record=True) if _own_process() else \
            contextlib.nullcontext([]) as caught:
        try:
            out = _compress_task(source, output, columns, exclude, options)
        except BAD_INPUT as e:  # (the project's errors: FormatError is a ValueError)
            out = {"source": source, "output": output, "error": e}
    return out | {"warnings": [str(w.message) for w in caught]}


def _own_process() -> bool:
    """Whether this task runs alone in a worker process of its own (a local process worker of
    one thread, as ``cluster`` starts them), where it may swap the process's warning hook
    (``warnings.catch_warnings`` is not safe where tasks share a process in threads: there a
    task's warnings are shown as any warning is)."""
    import multiprocessing
    if multiprocessing.parent_process() is None:
        return False
    try:
        from distributed import get_worker
        return get_worker().state.nthreads == 1
    except (ImportError, ValueError, AttributeError):
        return False


def _compress_task(source: str, output: str, columns: list | None, exclude: list | None,
                   options: dict[str, Any]) -> dict[str, Any]:
    import signals
    from signals import files
    from signals.files import CSV_SUFFIXES, compress_path
    from ubpe.serialization import atomic_write_bytes, atomic_writer

    t0 = time.perf_counter()
    csv_options = dict(options.pop("csv_options", None) or {})
    if columns is not None or exclude is not None:
        csv_options.update(columns=columns, exclude=exclude)
    path = Path(source)
    wav = path.suffix.lower() == ".wav" and path.stat().st_size > files.WAV_FRAME_BYTES
    if wav:  # (a WAV whose data chunk starts beyond its first 8 MiB: one container)
        with open(path, "rb") as src:
            wav = files.wav_layout(src.read(files.FRAME_BYTES), source) is not None
    if path.suffix.lower() in CSV_SUFFIXES and path.stat().st_size > files.FRAME_BYTES:
        with open(path, "rb") as src, atomic_writer(output) as dst:  # bounded memory
            s = files.compress_csv_stream(src, dst, path=source, csv_options=csv_options,
                                          **options)
        n, size, n_ch, whole, left_out = s["values"], s["bytes_out"], None, None, None
    elif wav:
        files.check_picks_apply("wav", csv_options, source)
        with open(path, "rb") as src, atomic_writer(output) as dst:  # bounded memory
            first = src.read(files.FRAME_BYTES)
            s = files.compress_wav_stream(src, dst, first=first, path=source,
                                          frame_bytes=files.WAV_FRAME_BYTES, **options)
        n, size, n_ch, whole, left_out = s["values"], s["bytes_out"], None, None, None
    else:
        data = compress_path(source, csv_options=csv_options, **options)
        atomic_write_bytes(output, data)
        info = signals.inspect(data)
        n = sum(c["n_samples"] for c in info["channels"])
        size, n_ch, whole = len(data), len(info["channels"]), info.get("stored_whole")
        left_out = (info.get("meta") or {}).get("left_out") if info.get("source") == "arrays" \
            else None
    try:
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        worker = None
    coded = not whole  # (a small CSV stored whole: no channels were coded)
    return {"source": source, "output": output, "channels": n_ch if coded else None,
            "samples": n if coded else None, "bytes": size,
            "bits_per_sample": 8 * size / n if coded and n else None, "stored_whole": whole,
            "left_out": left_out, "seconds": time.perf_counter() - t0, "worker": worker}


def _file_id(p: Path) -> tuple[int, int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _check_outputs(srcs: list[Path], outs: list[Path], force: bool) -> None:
    """No output is an input (by path, link or inode), and none exists unless ``force`` (a
    link to nowhere exists too, as ``os.path.lexists`` says)."""
    inputs = {s.resolve(): s for s in srcs}
    ids = {i: s for s in srcs if (i := _file_id(s)) is not None}
    for o in outs:
        i = _file_id(o)
        s = inputs.get(o.resolve()) or (ids.get(i) if i is not None else None)
        if s is not None:
            raise ValueError(f"{o} is the input {s}: an output never overwrites an input")
        if os.path.lexists(o) and not force:
            raise FileExistsError(f"{o} exists; pass force=True to overwrite it")


def _output_for(source: Path, out_dir: Path | None, suffix: str) -> Path:
    return (out_dir or source.parent) / (source.name + suffix)


def compress_files(sources: Sequence[str | Path], *, out_dir: str | Path | None = None,
                   outputs: Sequence[str | Path] | None = None, suffix: str = ".ubpe",
                   scheduler: Any = None, workers: int | None = None, processes: bool = True,
                   columns: list | None = None, exclude: list | None = None,
                   errors: str = "raise", force: bool = False,
                   **options: Any) -> list[dict[str, Any]]:
    """Compress many files on a Dask cluster, one task per file.

    Parameters
    ----------
    sources : sequence of path
        Input files, any format :func:`signals.formats.read_recording` reads.
    out_dir : path, optional
        Folder for the outputs (created if missing); default: beside each
        input. An output is named ``<input name><suffix>``.
    outputs : sequence of path, optional
        Explicit output paths, one per source (instead of ``out_dir``).
    suffix : str, default ".ubpe"
    scheduler, workers, processes
        As in :func:`cluster`. Local workers need the inputs and outputs on
        this machine; a remote cluster needs them on a shared file system.
    columns, exclude : list, optional
        Channels to keep or drop in every file.
    errors : {"raise", "report"}, default "raise"
        A file that cannot be compressed (unreadable, malformed, of no known
        kind): raise its error once every task has ended, or give its entry
        as ``{"source", "output", "error"}`` (the exception) and go on.
    force : bool, default False
        Overwrite outputs that exist (as ``xz -f``). An output that is one of
        the inputs is refused even so.
    **options
        Passed to :func:`signals.files.compress_path` (``level``, ``max_error``,
        ``csv_options``...): CSV, WAV and NumPy files come back byte for byte.

    Returns
    -------
    list of dict
        Per file, in the order of ``sources``: ``source``, ``output``,
        ``channels``, ``samples``, ``bytes``, ``bits_per_sample``,
        ``stored_whole`` (for a small CSV file stored whole: its coder, and
        ``channels``, ``samples`` and ``bits_per_sample`` are None; else
        None; ``bits_per_sample`` is None too where no value was coded),
        ``left_out`` (a recording's channels that ``columns`` or
        ``exclude`` left out, or None), ``seconds`` (the task's time),
        ``worker`` (the address that ran it), ``warnings`` (the messages of
        the warnings its task raised, not shown, where it ran in a worker
        process of its own; in threads of a shared process they are shown as
        any warning is, and this is empty);
        or, with ``errors="report"``, ``error`` (the exception, a ValueError or
        an OSError, or another bad-input error) and ``warnings`` for a file
        that failed.

    Raises
    ------
    ValueError
        If ``outputs`` does not match ``sources``, two sources map to the
        same output or an output is an input, or ``errors`` is neither (all
        before any task starts); the first failed file's error
        otherwise, with ``errors="raise"`` (after every task has ended;
        outputs already written stay, and no output is partial).
    FileExistsError
        If an output exists and ``force`` is False (before any task starts).
    """
    if errors not in ("raise", "report"):
        raise ValueError(f"errors must be 'raise' or 'report', got {errors!r}")
    srcs = [Path(s) for s in sources]
    if outputs is not None:
        outs = [Path(o) for o in outputs]
        if len(outs) != len(srcs):
            raise ValueError(f"{len(outs)} outputs for {len(srcs)} sources")
    else:
        od = Path(out_dir) if out_dir is not None else None
        if od is not None:
            od.mkdir(parents=True, exist_ok=True)
        outs = [_output_for(s, od, suffix) for s in srcs]
    if len({o.resolve() for o in outs}) != len(outs):  # (out.ubpe and /abs/out.ubpe are one)
        raise ValueError("two sources map to the same output file")
    _check_outputs(srcs, outs, force)
    if not srcs:
        return []
    from ubpe.serialization import PENDING_OUTPUTS
    pending = {str(o) for o in outs} - PENDING_OUTPUTS
    PENDING_OUTPUTS.update(pending)  # (a signal then removes the workers' temporary files)
    try:
        with cluster(scheduler, workers, processes=processes) as client:
            futures = [client.submit(_compress_one, str(s), str(o), columns, exclude, options,
                                     key=f"ubpe-compress-{i}-{s.name}", pure=False)
                       for i, (s, o) in enumerate(zip(srcs, outs))]
            from distributed import wait
            wait(futures)
            failed = [f for f in futures if f.status == "error"]
            if failed:
                failed[0].result()  # raises the task's exception (not a bad input: a bug, a crash)
            done = list(client.gather(futures))
    finally:
        PENDING_OUTPUTS.difference_update(pending)
    bad = [r for r in done if "error" in r]
    if bad and errors == "raise":
        raise bad[0]["error"]
    return done


def _read_one(source: str, columns: list | None, exclude: list | None,
              max_samples: int | None, seed: int) -> tuple[list[str], list[np.ndarray]]:
    """Task: read one file; each channel cut to at most max_samples (one random window)."""
    from signals.formats import read_recording

    rec = read_recording(source, columns=columns, exclude=exclude)
    rng = np.random.default_rng(seed)
    chans = []
    for c in rec.channels:
        if max_samples is not None and c.size > max_samples:
            start = int(rng.integers(0, c.size - max_samples + 1))
            c = c[start:start + max_samples]
        chans.append(np.ascontiguousarray(c))
    return rec.names, chans


def read_files(sources: Sequence[str | Path], *, scheduler: Any = None, workers: int | None = None,
               processes: bool = True, columns: list | None = None, exclude: list | None = None,
               max_samples: int | None = None, seed: int = 0) -> tuple[list[str], list[np.ndarray]]:
    """Read (and sample) the training data of ``ubpe build`` across files in parallel.

    Parameters
    ----------
    sources : sequence of path
    scheduler, workers, processes
        As in :func:`cluster`.
    columns, exclude : list, optional
        Channels to keep or drop in every file.
    max_samples : int, optional
        Keep at most this many samples per channel: one window at a random
        place (``seed`` and the file's position make it reproducible).
    seed : int, default 0

    Returns
    -------
    names : list of str
        ``"<file stem>:<channel>"`` when there are several files, else the
        channel names.
    channels : list of ndarray
        In file order, then channel order: what :meth:`signals.SignalModel.fit`
        takes.

    Raises
    ------
    ValueError, OSError
        What reading a file raises.
    """
    srcs = [Path(s) for s in sources]
    if not srcs:
        return [], []
    with cluster(scheduler, workers, processes=processes) as client:
        futures = [client.submit(_read_one, str(s), columns, exclude, max_samples, seed + i,
                                 key=f"ubpe-read-{i}-{s.name}", pure=False)
                   for i, s in enumerate(srcs)]
        results = client.gather(futures)
    names, chans = [], []
    for s, (n, c) in zip(srcs, results):
        names += [f"{s.stem}:{x}" for x in n] if len(srcs) > 1 else list(n)
        chans += c
    return names, chans
