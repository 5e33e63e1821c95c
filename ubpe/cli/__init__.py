"""The ``ubpe`` command line: one module per command group, loaded on first use.

``ubpe --help`` imports none of them: each command's one-line help is listed
here, so that the help screen costs no numba, scipy or codec import.

| command                         | module            |
|---------------------------------|-------------------|
| build, encode, decode           | ``tokens.py``     |
| compress, decompress, inspect   | ``signal.py``     |
| text train/encode/decode/stats  | ``text.py``       |
| plot                            | ``plot.py``       |
| aot build/status                | ``aot.py``        |
"""

from __future__ import annotations

import importlib
import os
from typing import Any, NoReturn

import click

# BAD_INPUT: what a reader or loader may raise on bad input: one line on stderr and exit status
# 1, never a traceback (the subcommands report each input themselves, see _common.run_jobs)
from ubpe.serialization import BAD_INPUT

# numpy's OpenBLAS starts a thread per CPU that spins for work at start-up (about 0.2 s of
# CPU time a process on 2 CPUs, and a thread per CPU on larger machines), which the command
# line never uses: its linear algebra is a few small solves in 'ubpe build'. Set before any
# command imports numpy; the user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# name -> (module, attribute, one-line help shown by ``ubpe --help``)
COMMANDS = {
    "build": ("tokens", "build", "Train a UBPE vocabulary on the numeric columns of CSV files."),
    "encode": ("tokens", "encode", "Tokenize CSV channels with a model from 'ubpe build'."),
    "decode": ("tokens", "decode", "Turn a token file back into a CSV of samples."),
    "compress": ("signal", "compress", "Compress a signal file (CSV, .npz/.npy, .wav) to .ubpe."),
    "decompress": ("signal", "decompress", "Give back the file a .ubpe came from (CSV, .npy/.npz, .wav)."),
    "inspect": ("signal", "inspect", "Describe a model or a .ubpe file."),
    "text": ("text", "text", "Byte-level BPE for text (train, encode, decode, stats)."),
    "plot": ("plot", "plot", "Draw PNG pictures of a signal's tokens, bits and residuals."),
    "aot": ("aot", "aot", "Compile the kernels ahead of time: processes start faster, in less memory."),
}


class BadInput(click.ClickException):
    """An input or output that cannot be used: ``ubpe: <message>`` on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"ubpe: {self.format_message()}", err=True)


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when they run.

    Exit status (as xz and zstd): 0 success; 1 bad input (the errors in
    ``BAD_INPUT`` become one line on stderr, ``ubpe: <file>: <reason>``);
    2 usage (click's convention).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:  # (--help and --version print here: click would exit 1 on a closed pipe)
            return super().parse_args(ctx, args)
        except BrokenPipeError:
            _reader_gone()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _reader_gone()
        except BAD_INPUT as e:
            if isinstance(e, OSError) and e.strerror and e.filename:  # as xz: 'x.csv: No such...'
                raise BadInput(f"{e.filename}: {e.strerror}") from None
            raise BadInput(str(e) or type(e).__name__) from None


@click.group(cls=LazyGroup)
@click.version_option(package_name="ubpe")
def main() -> None:
    """Universal byte-pair encoding for integer sequences and sensor signals."""


def run() -> None:
    """The ``ubpe`` program (and ``python -m ubpe``): :func:`main` with xz's handling of signals.

    A SIGINT (Ctrl-C), SIGTERM (kill, a service manager) or SIGHUP (a closed terminal) ends
    the command with no partial output: the temporary files of its writes in progress are
    removed, and the process exits at once with status 128 + the signal's number (130, 143,
    129), as xz and zstd do. (An exception raised from the handler could land inside a compiled
    kernel's call, which then fails with a SystemError.)
    """
    import signal
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    try:
        main()
    except BrokenPipeError:
        _reader_gone()
    except OSError as e:  # (--help or --version to a full disk: before any command's handling)
        import os
        import sys
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no flush at exit)
        print(f"ubpe: standard output: {e.strerror or e}", file=sys.stderr)
        raise SystemExit(1) from None


def _reader_gone() -> NoReturn:
    """The reader of standard output went away (``ubpe text encode m.json f | head``): stop at
    once and quietly, with the status of a process that SIGPIPE ends (141), as xz and zstd do
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    import os
    import sys

    from ubpe.serialization import remove_temporary_files
    remove_temporary_files()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # (Python would flush stdout at exit: EPIPE again)
    raise SystemExit(141)


def _terminate(signum: int, frame: Any) -> None:
    import os

    from ubpe.serialization import remove_temporary_files
    remove_temporary_files()
    os._exit(128 + signum)
