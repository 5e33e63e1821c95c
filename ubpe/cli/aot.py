"""ubpe aot: compile the numba kernels ahead of time (see ``ubpe/_jit.py``)."""

from __future__ import annotations

import click


@click.group()
def aot() -> None:
    """Kernels compiled ahead of time.

    Without them, each ubpe process imports numba and loads every kernel it
    calls from numba's cache (about 0.5 s and 120 MB before any work). With
    them, it imports no numba. The results are the same either way; a call
    the compiled kernels do not cover falls back to numba on its own.
    """


@aot.command()
@click.option("-q", "--quiet", is_flag=True, help="No build log on stderr.")
def build(quiet: bool) -> None:
    """Compile the kernels (a few minutes: 2-5 on 2 cores; numba compiles the workload first if its
    cache is cold) into ubpe/_aot, or $UBPE_AOT_DIR."""
    from ubpe._aot_build import build as run_build
    from ubpe._jit import AOT_DIR
    try:
        man = run_build(AOT_DIR, log=None if quiet else lambda s: click.echo(s, err=True))
    except (RuntimeError, OSError) as e:
        raise click.ClickException(str(e)) from None
    if not quiet:
        n = sum(len(v) for v in man["kernels"].values())
        click.echo(f"ubpe aot: {n} signatures of {len(man['kernels'])} kernels in {AOT_DIR}", err=True)


@aot.command()
def status() -> None:
    """Say whether compiled kernels exist and match the sources (standard output)."""
    from ubpe._aot_build import status as aot_status
    click.echo(aot_status())


@aot.command()
def clear() -> None:
    """Delete the compiled kernels (every process then uses numba's JIT) and the build's numba
    caches."""
    import shutil

    from ubpe._aot_build import CACHE
    from ubpe._jit import AOT_DIR
    shutil.rmtree(AOT_DIR, ignore_errors=True)
    shutil.rmtree(AOT_DIR.parent / CACHE, ignore_errors=True)  # the build's numba caches
    click.echo(f"removed {AOT_DIR} and {AOT_DIR.parent / CACHE}", err=True)
