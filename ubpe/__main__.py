"""``python -m ubpe``: the command line."""

from ubpe.cli import main

main()
