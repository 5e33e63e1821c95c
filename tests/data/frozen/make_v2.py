"""How the version-2 fixtures (checksum and content id) were written: the version-1 files re-saved.

Kept for the record; the files are frozen. Run from the repository root.
"""

from pathlib import Path

from signals import SignalModel
from ubpe import Tokenizer
from ubpe.text import ByteTokenizer

HERE = Path(__file__).parent

if __name__ == "__main__":
    Tokenizer.load(HERE / "tokenizer_v1.json").save(HERE / "tokenizer_v2.json")
    SignalModel.load(HERE / "signal_model_v1.json").save(HERE / "signal_model_v2.json")
    # the text tokenizer's format is still version 1, now written with a checksum
    ByteTokenizer.load(HERE / "byte_tokenizer_v1.json").save(HERE / "byte_tokenizer_v1_checksum.json")
