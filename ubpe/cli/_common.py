"""Helpers shared by the command modules."""

from __future__ import annotations

import click
import numpy as np

from ubpe.serialization import atomic_write_bytes
from ubpe.tokenizer import Tokenizer

METHODS = Tokenizer.METHODS


def split_list(value):
    if not value:
        return None
    return [v for v in (s.strip() for s in value.split(",")) if v]


def write_csv(output, names, values, integer):
    """Write channels as CSV columns, atomically; exact integers where ``integer``."""
    lengths = {v.size for v in values}
    if len(lengths) > 1:
        raise ValueError(f"channels have different lengths ({sorted(lengths)}); "
                         f"one CSV needs equal lengths")
    cols = [np.asarray(v).astype(np.int64).astype(str) if i else np.char.mod("%.12g", v)
            for v, i in zip(values, integer)]
    text = ",".join(names) + "\n"
    if cols and cols[0].size:
        text += "\n".join(",".join(row) for row in zip(*cols)) + "\n"
    atomic_write_bytes(output, text.encode())
    click.echo(f"{len(values)} channels, {values[0].size if values else 0:,} samples; "
               f"wrote {output}")


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


