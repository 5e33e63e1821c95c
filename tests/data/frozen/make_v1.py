"""How the version-1 fixtures in this folder were written (ubpe 0.1.0, commit 94482e1).

Kept for the record only: running it with a later ubpe writes the newest format
versions, not these frozen files. tests/test_serialization.py decodes each file
and compares with values checked by hand.
"""

import io
import warnings
from pathlib import Path

import numpy as np

from signals import SignalModel, compress_stream
from ubpe import Tokenizer
from ubpe.text import ByteTokenizer

HERE = Path(__file__).parent

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    # Wikipedia's BPE example "aaabdaaabac" with a=0, b=1, c=2, d=3
    Tokenizer(4, 7).fit([[0, 0, 0, 1, 3, 0, 0, 0, 1, 0, 2]]).save(HERE / "tokenizer_v1.json")
    bt = ByteTokenizer(260, special_tokens=["<|end|>"], progress=False)
    bt.fit(["low lower lowest low low", "newer newest new new"])
    bt.save(HERE / "byte_tokenizer_v1.json")
    x = np.array([0, 1, 2, 3, 2, 1] * 20)
    y = np.array([10, 12, 14, 12] * 30)
    SignalModel(8, 12, n_candidates=1, progress=False).fit([x, y], ["saw", "tri"]).save(
        HERE / "signal_model_v1.json")
    buf = io.BytesIO()
    compress_stream([np.arange(100) % 7, np.arange(50) % 5 - 2], buf)
    (HERE / "stream_v1.ubps").write_bytes(buf.getvalue())
