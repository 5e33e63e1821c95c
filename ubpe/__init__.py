"""ubpe: universal byte-pair encoding over integer alphabets."""

from ._io import FormatError
from .tokenizer import Tokenizer

__all__ = ["Tokenizer", "FormatError"]
__version__ = "0.1.0"
