"""Helpers shared by the command modules: the file habits of xz, zstd and flac.

Every command that writes a file takes the same options (:func:`output_options`):

``-o/--output PATH``
    The output; ``-`` is standard output.
``-c/--stdout``
    Write to standard output (``-o -``).
``-f/--force``
    Replace an existing output. Never an output that is one of the inputs
    (same resolved path, or same device and inode): that is refused even
    with ``-f``, since the input would be lost.
``-k/--keep``
    Keep the inputs. The default: ubpe never deletes an input; the flag is
    accepted for the habit of ``xz -k``.
``-q/--quiet``, ``-v/--verbose``
    Summaries go to standard error; ``-q`` silences them (errors stay),
    ``-v`` adds details (and the traceback of an error).

Input ``-`` is standard input. Without ``-o``, an output is named from its
input in the input's folder (:func:`suffix_name`, :func:`strip_suffix_name`),
so files of the same name in different folders never collide; two inputs
that would still name the same output are refused before anything is
written. Outputs are written atomically with the user's umask
(:func:`ubpe.serialization.atomic_writer`).

Exit status: 0 success; 1 bad input (unreadable, malformed, an output that
exists or is an input), after trying every input; 2 usage (click's
convention, as for xz and zstd).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import sys
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import numpy as np

from ubpe.serialization import atomic_writer, output_error, temporary_folder
from ubpe.tokenizer import Tokenizer

from . import BAD_INPUT, BadInput

METHODS = Tokenizer.METHODS
STDIO = "-"



class _OneChar(click.ParamType):
    """A CSV delimiter or comment character: one character, not a quote or a line break."""

    name = "CHAR"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from signals.table import CsvError, check_dialect  # (the rule of the CSV reader)
        try:
            check_dialect(value, None)
        except CsvError:
            self.fail(f"must be one character other than a quote or a line break, not "
                      f"{value!r}", param, ctx)
        return value


CHAR = _OneChar()


def split_list(value):
    if not value:
        return None
    return [v for v in (s.strip() for s in value.split(",")) if v]


def check_picks(columns: str | None, exclude: str | None) -> None:
    """--columns and --exclude together: a usage error (--columns alone decided, silently)."""
    if columns and exclude:
        raise click.UsageError("--columns and --exclude exclude each other (--columns names "
                               "the ones kept)")


# ------------------------------------------------------------------ reporting
class Reporter:
    """Messages on standard error: summaries (unless quiet), details (if verbose), errors.

    Parameters
    ----------
    quiet : bool
        No summaries, details or warnings; errors are still printed.
    verbose : bool
        Details too, and the traceback of an error.
    """

    def __init__(self, quiet: bool = False, verbose: bool = False):
        self.quiet, self.verbose = quiet, verbose and not quiet
        self.failed = False

    def info(self, message: str) -> None:
        """A summary line (hidden by ``-q``)."""
        if not self.quiet:
            click.echo(message, err=True)

    def detail(self, message: str) -> None:
        """A detail line (shown by ``-v``)."""
        if self.verbose:
            click.echo(message, err=True)

    def warn(self, message: str) -> None:
        """A warning (hidden by ``-q``)."""
        if not self.quiet:
            click.echo(f"ubpe: warning: {message}", err=True)

    def error(self, where: str, exc: BaseException) -> None:
        """An error on one input: one line (and the traceback with ``-v``); marks the run failed."""
        self.failed = True
        if self.verbose:
            traceback.print_exception(exc, file=sys.stderr)
        text = str(exc) or type(exc).__name__
        if isinstance(exc, OSError) and exc.strerror:
            where, text = str(exc.filename or where), exc.strerror
        if where and not text.startswith(where):
            text = f"{where}: {text}"
        if not isinstance(exc, (ValueError, OSError)):
            text += f" ({type(exc).__name__})"
        click.echo(f"ubpe: {text}", err=True)

    def exit(self) -> None:
        """Exit with status 1 if an input failed. With ``-v``, say how the kernels ran first."""
        if self.verbose and "ubpe._jit" in sys.modules:
            from ubpe import _jit
            self.detail(f"kernels: {_jit.mode()}" + (f" ({_jit.jit_reason()})" if _jit.jit_reason() else ""))
        if self.failed:
            raise SystemExit(1)


def verbosity_options(f):
    """Add ``-q/--quiet`` and ``-v/--verbose``; the command receives ``report`` (a :class:`Reporter`)."""
    @click.option("-v", "--verbose", is_flag=True, help="Details on stderr; tracebacks of errors.")
    @click.option("-q", "--quiet", is_flag=True, help="No summary on stderr (errors are still shown).")
    @functools.wraps(f)
    def wrapper(*args, quiet, verbose, **kwargs):
        report = Reporter(quiet, verbose)
        with warnings.catch_warnings():  # the library's warnings as the command's (-q hides them)
            warnings.showwarning = lambda message, *_, **__: report.warn(str(message))
            try:
                return f(*args, report=report, **kwargs)
            except BAD_INPUT:  # (one line on stderr, by ubpe.cli; with -v, its traceback first)
                if verbose:
                    traceback.print_exc(file=sys.stderr)
                raise
    return wrapper


def output_options(help_output: str):
    """Add ``-o``, ``-c``, ``-f``, ``-k``, ``-q``, ``-v`` (see the module notes).

    The command receives ``output`` (str or None), ``to_stdout``, ``force``
    and ``report``.
    """
    def decorate(f):
        f = click.option("-k", "--keep", is_flag=True, hidden=False,
                         help="Keep the input files (the default: ubpe never deletes them).")(f)
        f = click.option("-f", "--force", is_flag=True,
                         help="Replace existing output files (never an input).")(f)
        f = click.option("-c", "--stdout", "to_stdout", is_flag=True,
                         help="Write to standard output (same as -o -).")(f)
        f = click.option("-o", "--output", metavar="PATH", help=help_output)(f)
        f = verbosity_options(f)

        @functools.wraps(f)
        def wrapper(*args, keep, **kwargs):
            return f(*args, **kwargs)
        return wrapper
    return decorate


def start_numba() -> None:
    """Start numba's CPU target without the BLAS of scipy.linalg.

    numba's first compiled call (cached or not) imports ``numba.np.arraymath``,
    which imports ``scipy.linalg.cython_blas`` only to learn whether
    ``np.correlate``/``np.convolve`` may call BLAS: about 0.12 s and 15 MB of
    each ``ubpe compress``/``decompress`` process, for functions ubpe does not
    compile. Here that first call is made with the import refused (numba
    takes it as "no BLAS": those two functions, if ever compiled in this
    process, use a plain loop), and the refusal is lifted at once: scipy.linalg
    imports normally afterwards. Nothing is done once numba's target is
    started or scipy.linalg is loaded, nor while the kernels compiled ahead of
    time serve the process (``ubpe._jit``: no numba at all).
    """
    from ubpe import _jit
    blas = "scipy.linalg.cython_blas"
    if _jit.mode() == "aot" or blas in sys.modules or "numba.np.arraymath" in sys.modules:
        return
    from signals.table import _trailing_zeros  # a small cached kernel
    sys.modules[blas] = None  # type: ignore[assignment]  # import refused
    try:
        _trailing_zeros(np.zeros(0, np.int64), 0)
    finally:
        if blas in sys.modules and sys.modules[blas] is None:
            del sys.modules[blas]


def threads_option(what: str, where: str):
    """Add ``-T/--threads N`` (as xz's and zstd's): ``what`` names the frames coded ``N`` at a
    time, ``where`` (processes or threads); 0 is one per CPU. The command receives
    ``threads``."""
    return click.option("-T", "--threads", default=1, show_default=True, type=click.IntRange(0),
                        metavar="N",
                        help=f"{what} N at a time, {where} (0: one per CPU). The output is "
                             f"the same bytes whatever N; memory grows with it.")


# -------------------------------------------------------------- output names
def suffix_name(source: Path, suffix: str) -> Path:
    """``a/x.csv`` -> ``a/x.csv.ubpe``: the input's name and ``suffix``, in the input's folder."""
    return source.with_name(source.name + suffix)


def strip_suffix_name(source: Path, suffix: str, extension: str) -> Path:
    """``a/x.csv.ubpe`` -> ``a/x.csv``; ``a/x.wav.ubpe`` -> ``a/x.wav.csv``; ``a/x`` -> ``a/x.csv``.

    Drops ``suffix`` and makes sure the name ends with ``extension`` (the
    output's real format), in the input's folder.
    """
    name = source.name
    if name.lower().endswith(suffix) and len(name) > len(suffix):
        name = name[:-len(suffix)]
    if not name.lower().endswith(extension):
        name += extension
    return source.with_name(name)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file: same resolved path, or same device and inode."""
    if str(a) == STDIO or str(b) == STDIO:
        return False
    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve():
            return True
    except OSError:
        pass
    try:
        return os.path.samefile(pa, pb)
    except OSError:
        return False


@dataclass
class Job:
    """One input and the output it goes to (``"-"``: standard input or output)."""

    source: str
    output: str
    refused: str | None = None  # why the output cannot be written (it exists...), if so

    @property
    def name(self) -> str:
        """The input as shown in messages."""
        return "<stdin>" if self.source == STDIO else self.source


def plan(sources: Iterable[str], *, output: str | None, to_stdout: bool, force: bool,
         name_rule: Callable[[Path], Path] | None, other_inputs: Iterable[str | Path] = (),
         binary: bool = True) -> list[Job]:
    """Decide every output before anything is read or written.

    Parameters
    ----------
    sources : iterable of str
        Input paths; ``"-"`` is standard input (at most once).
    output : str or None
        ``-o``: one output (``"-"`` for standard output); needs one input.
    to_stdout : bool
        ``-c``.
    force : bool
        ``-f``: an existing output may be replaced.
    name_rule : callable or None
        Output name for an input when there is no ``-o`` (None: ``-o`` or
        ``-c`` is required).
    other_inputs : iterable of path
        Files the command also reads (a model): never an output either.
    binary : bool
        The output is binary: refuse to write it to a terminal.

    Returns
    -------
    list of Job

    Raises
    ------
    click.UsageError
        Exit status 2: ``-o`` with ``-c``, ``-o`` or ``-c`` with several
        inputs, stdin twice, no output name, two inputs naming one output.
    BadInput
        Exit status 1: an output exists (without ``-f``) or is an input, or
        binary data would go to a terminal; with several inputs, that job's
        ``refused`` says why instead, and :func:`run_jobs` reports it.
    """
    sources = list(sources)
    if output is not None and to_stdout:
        raise click.UsageError("-o and -c (--stdout) exclude each other")
    if (output is not None or to_stdout) and len(sources) > 1:
        raise click.UsageError(f"{'-o' if output is not None else '-c'} takes one input; "
                               f"got {len(sources)} (without it each output is named "
                               f"after its input)")
    others = [str(p) for p in other_inputs]
    if sources.count(STDIO) + others.count(STDIO) > 1:  # (--model - with input -)
        raise click.UsageError("standard input ('-') can be read only once")
    jobs = []
    for src in sources:
        if to_stdout or (output is None and src == STDIO):
            dst = STDIO
        elif output is not None:
            dst = output
        elif name_rule is None:
            raise click.UsageError("give the output with -o PATH, or -c for standard output")
        else:
            try:
                dst = str(name_rule(Path(src)))
            except BadInput as e:  # (no name for its output: as xz, the others still run)
                if len(sources) == 1:
                    raise
                jobs.append(Job(src, src, refused=e.format_message()))
                continue
        jobs.append(Job(src, dst))
    seen: dict[str, Job] = {}
    for job in jobs:
        if job.output == STDIO or job.refused is not None:
            continue
        key = str(Path(job.output).resolve())
        if key in seen:
            raise click.UsageError(f"{seen[key].name} and {job.name} would both be written to "
                                   f"{job.output}")
        seen[key] = job
    inputs = [j.source for j in jobs] + others
    for job in jobs:
        if job.refused is not None:
            continue
        try:
            check_output(job.output, inputs, force=force, binary=binary)
        except BadInput as e:
            if len(jobs) == 1:
                raise
            job.refused = e.format_message()  # (as xz: the other inputs still run, exit 1)
    return jobs


def single_output(inputs: Iterable[str | Path], *, output: str | None, to_stdout: bool,
                  force: bool, binary: bool = True) -> str:
    """The one output of a command that reads several inputs (a model and data files).

    Returns
    -------
    str
        A path, or ``"-"`` for standard output.

    Raises
    ------
    click.UsageError, click.ClickException
        As for :func:`plan`; ``-o`` or ``-c`` is required.
    """
    if output is not None and to_stdout:
        raise click.UsageError("-o and -c (--stdout) exclude each other")
    if output is None and not to_stdout:
        raise click.UsageError("give the output with -o PATH, or -c for standard output")
    dst = STDIO if to_stdout else str(output)
    check_output(dst, [str(p) for p in inputs], force=force, binary=binary)
    return dst


def check_output(dst: str, inputs: list[str], *, force: bool, binary: bool) -> None:
    """Refuse an output that is an input (even with ``force``), exists (without it), or is a tty.

    Raises
    ------
    BadInput
        Exit status 1, with the reason.
    """
    if dst == STDIO:
        if sys.stdout is None:  # (closed by the shell: '>&-')
            raise BadInput("standard output is closed; use -o PATH")
        if binary and sys.stdout.isatty():
            raise BadInput("binary data is not written to a terminal; use -o "
                                       "PATH or redirect standard output")
        return
    for src in inputs:
        if same_file(src, dst):
            raise BadInput(f"{dst} is an input; it is never overwritten "
                                       f"(not even with -f)")
    if os.path.isdir(dst):
        raise BadInput(f"{dst} is a folder")
    folder = os.path.dirname(dst) or "."
    if not os.path.isdir(folder):
        raise BadInput(f"{dst}: no folder {folder}")
    if not force and os.path.lexists(dst) and not _is_stream(dst):
        raise BadInput(f"{dst} exists; use -f to overwrite it")


def _is_stream(path: str) -> bool:
    """Whether ``path`` is a character device or a FIFO (``/dev/null``, a named pipe): written
    in place, nothing it holds is overwritten, so it needs no ``-f`` (as with xz and zstd)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


# ------------------------------------------------------------------- reading
@contextlib.contextmanager
def input_path(source: str) -> Iterator[Path]:
    """A path to read ``source`` from: the file itself, or stdin copied to a temporary file.

    The copy's suffix follows its first bytes (``.wav``, ``.npy``, ``.npz``,
    else ``.csv``), for readers that choose the format by suffix.
    """
    if source != STDIO:
        yield Path(source)
        return
    data = read_input(STDIO)
    with temporary_folder() as tmp:
        path = Path(tmp) / f"stdin{sniff_suffix(data)}"
        path.write_bytes(data)
        yield path


def read_input(source: str) -> bytes:
    """The bytes of a file, or of standard input for ``"-"``."""
    if source == STDIO:
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def sniff_suffix(data: bytes) -> str:
    """The file suffix that ``signals.read_signal`` needs for data read from stdin."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return ".wav"
    if data[:6] == b"\x93NUMPY":
        return ".npy"
    if data[:4] == b"PK\x03\x04":
        return ".npz"
    return ".csv"


def open_input(source: str):
    """A binary file object reading a file, or standard input for ``"-"`` (not closed)."""
    return sys.stdin.buffer if source == STDIO else open(source, "rb")  # noqa: SIM115


@contextlib.contextmanager
def open_output(output: str) -> Iterator[Any]:
    """A binary file object for an output: a temporary file renamed to ``output`` when the
    block ends without error (with the umask), or standard output for ``"-"``."""
    if output == STDIO:
        if sys.stdout is None:  # (closed by the shell: '>&-')
            raise BadInput("standard output is closed; use -o PATH")
        try:
            yield _WholeWrites(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise  # (the reader went away: ubpe.cli stops quietly, status 141)
        except OSError as e:  # (a full disk behind a redirection: named, not the input)
            raise output_error(e, "standard output") from None
        return
    with atomic_writer(output) as f:
        yield f


class _WholeWrites:
    """Standard output whose ``write`` writes all it is given: a buffered write to a pipe
    whose reader goes away returns the count written so far without an error (the rest is
    dropped), and only the next write raises the BrokenPipeError that ends the command
    with status 141."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        while view.nbytes:
            view = view[self.raw.write(view):]
        return len(data) if isinstance(data, (bytes, bytearray)) else memoryview(data).nbytes

    def flush(self) -> None:
        self.raw.flush()


def write_output(output: str, data: bytes) -> None:
    """Write ``data`` to a file (atomically, with the umask) or to standard output (``"-"``)."""
    with open_output(output) as f:
        f.write(data)


def run_jobs(jobs: list[Job], report: Reporter, work: Callable[[Job], None]) -> None:
    """Run ``work`` on every job; a bad input is reported and the others still run.

    Exits with status 1 at the end if any job failed (xz's behaviour).
    """
    for job in jobs:
        if job.refused is not None:
            report.error(job.output, ValueError(job.refused))
            continue
        try:
            work(job)
        except click.ClickException:
            raise
        except BrokenPipeError:
            raise  # (the reader went away: ubpe.cli stops quietly, status 141)
        except BAD_INPUT as e:
            named = output_error(e, "standard output") if isinstance(e, OSError) else e
            if named is not e:  # (a full disk behind standard output: not the input's fault,
                raise named from None  # and the next inputs would fail the same way)
            report.error(job.name, e)
    report.exit()


# ---------------------------------------------------------------- CSV output
def csv_text(names, values, integer) -> bytes:
    """Channels as CSV columns: integers exact, floats as their shortest round-trip repr.

    Header cells are quoted as RFC 4180 needs (a name holding a comma, a
    quote or a line break).
    """
    import csv
    import io
    lengths = {v.size for v in values}
    if len(lengths) > 1:
        raise ValueError(f"channels have different lengths ({sorted(lengths)}); "
                         f"one CSV needs equal lengths")
    cols = [np.asarray(v).astype(np.int64).astype(str) if i and _integral(v)
            else np.asarray(v, np.float64).astype(str)  # numpy prints the shortest repr
            for v, i in zip(values, integer)]
    head = io.StringIO()
    csv.writer(head, lineterminator="\n").writerow(names)
    text = head.getvalue()
    if cols and cols[0].size:
        text += "\n".join(",".join(row) for row in zip(*cols)) + "\n"
    return text.encode()


def _integral(v) -> bool:
    """Whether every value is an integer that int64 holds (else it is printed as a float)."""
    v = np.asarray(v)
    if v.dtype.kind in "iub":
        return True
    return bool(np.all((v == np.rint(v)) & (np.abs(v) < 2.0**63)))


def write_csv(output, names, values, integer) -> None:
    """Write channels as CSV columns (see :func:`csv_text`) to a file or stdout."""
    write_output(str(output), csv_text(names, values, integer))


def method_options(f):
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
