"""``python -m ubpe``: the command line."""

from ubpe.cli import run

run()
