"""ubpe: universal byte-pair encoding over integer alphabets.

The public names load on first use, so that ``import ubpe`` (and the command
line's help) does not compile the numba engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .serialization import FormatError
    from .tokenizer import Tokenizer, split_documents

__all__ = ["Tokenizer", "FormatError", "NotFittedError", "split_documents"]
__version__ = "0.1.0"

_WHERE = {"Tokenizer": ".tokenizer", "split_documents": ".tokenizer", "NotFittedError": ".tokenizer",
          "FormatError": ".serialization"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module 'ubpe' has no attribute {name!r}")
