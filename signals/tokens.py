"""Tokenization stage: UBPE tokens over prediction residuals."""

from __future__ import annotations

import numpy as np

from ubpe import Tokenizer, split_documents


def tokenize_channels(tok: Tokenizer, symbols: list[np.ndarray], doc_length: int | None
                      ) -> tuple[list[np.ndarray], np.ndarray]:
    """Shortest encodings of each channel, in rank-order numbering; and the merge pairs."""
    a, m = tok.alphabet_size, tok.merges_
    to_rank = np.arange(a + len(m))
    to_rank[m[:, 2]] = a + np.arange(len(m))
    pairs = to_rank[m[:, :2]].astype(np.int32)
    out = [to_rank[np.concatenate(tok.encode_batch(split_documents(s, doc_length),
                                                   method="shortest"))] for s in symbols]
    return out, pairs
