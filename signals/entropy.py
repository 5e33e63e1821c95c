"""Entropy coding stage: token ids to rANS words and back.

Static (per channel) categorical models over the ids that occur, coded
with ``constriction``'s stack-based rANS coder (J. Duda, "Asymmetric
numeral systems", arXiv:1311.2540, 2013; R. Bamler, constriction,
https://bamler-lab.github.io/constriction/).
"""

from __future__ import annotations

import constriction
import numpy as np


def ans_encode(ids: np.ndarray):
    """rANS-code token ids with their own frequencies; returns (table ids, counts, words)."""
    if ids.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint32)
    table, symbols, counts = np.unique(ids, return_inverse=True, return_counts=True)
    coder = constriction.stream.stack.AnsCoder()
    if table.size > 1:
        model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
        coder.encode_reverse(symbols.astype(np.int32), model)
    return table, counts, coder.get_compressed()


def ans_decode(table, counts, words, n) -> np.ndarray:
    if n == 0:
        return np.zeros(0, np.int64)
    if table.size == 1:
        return np.full(n, table[0], np.int64)
    model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
    symbols = constriction.stream.stack.AnsCoder(words).decode(model, n)
    return table[symbols]
