"""Writes the crafted reproducers in this folder (see README.md for what each one tests).

Run from the repository root: ``python tests/data/crafted/make_crafted.py``. The
version-2 files are sealed with today's ubpe.serialization, then damaged.
"""

import json
import struct
from pathlib import Path

from ubpe.serialization import seal

HERE = Path(__file__).parent
FROZEN = HERE.parent / "frozen"


def write(name, doc, indent=None):
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=indent)
    (HERE / name).write_text(text + "\n")


def tokenizer(alphabet, merges, version=1):
    return {"format": "ubpe.tokenizer", "version": version,
            "params": {"alphabet_size": alphabet, "vocab_size": alphabet + len(merges),
                       "n_candidates": 1, "min_frequency": 2, "token_order": "rank"},
            "n_documents": 1, "merges": merges, "weights": [0.0] * len(merges),
            "counts": [2] * len(merges)}


if __name__ == "__main__":
    a = 2**30
    write("tokenizer_alphabet_2e30.json", tokenizer(a, [[0, 0, a], [a, a, a + 1]]))
    write("tokenizer_doubling_chain.json",
          tokenizer(2, [[0, 0, 2]] + [[k, k, k + 1] for k in range(2, 64)]))
    write("tokenizer_huge_int.json", tokenizer(4, [[0, 10**30, 4]]))
    write("tokenizer_deep_nesting.json",
          '{"format": "ubpe.tokenizer", "version": 1, "params": ' + "[" * 5000 + "]" * 5000 + "}")
    write("tokenizer_n_documents_1e400.json", tokenizer(4, [[0, 1, 4]]).copy()
          | {"n_documents": "__INF__"})
    p = HERE / "tokenizer_n_documents_1e400.json"
    p.write_text(p.read_text().replace('"__INF__"', "1e400"))
    write("tokenizer_repeated_pair.json", tokenizer(4, [[0, 1, 4], [0, 1, 5]]))
    good = seal(tokenizer(4, [[0, 0, 4], [0, 1, 5], [4, 5, 6]], version=2))
    stale = json.loads(json.dumps(good))
    stale["merges"][2] = [5, 4, 6]  # a valid tokenizer, but not the one the checksum covers
    write("tokenizer_v2_stale_checksum.json", stale, indent=1)
    bare = {k: v for k, v in good.items() if k not in ("checksum", "content_id")}
    bare["merges"][2] = [5, 4, 6]
    write("tokenizer_v2_no_checksum.json", bare, indent=1)
    model = json.loads((FROZEN / "signal_model_v1.json").read_text())
    model["channels"][0]["quantizer"]["range"] = [[-0.5, 3.5, 10**10]]
    write("signal_model_bins_1e10.json", model, indent=1)
    model = json.loads((FROZEN / "signal_model_v1.json").read_text())
    model["version"] = 2
    sealed = seal(model)
    sealed["channels"][1]["quantizer"]["range"] = [[9.5, 15.5, 5]]  # issue 13, item 9
    write("signal_model_v2_edited_quantizer.json", sealed, indent=1)
    # found by bench/fuzz.py
    model = json.loads((FROZEN / "signal_model_v1.json").read_text())
    del model["tokenizer"]
    write("signal_model_no_tokenizer.json", model, indent=1)
    # found by the fuzzer (tests/test_fuzz.py), outside the loaders it owns
    bt = json.loads((FROZEN / "byte_tokenizer_v1.json").read_text())
    bt["byte_ids"][0] = 1974
    write("byte_tokenizer_byte_id_beyond_vocab.json", bt)
    bt = json.loads((FROZEN / "byte_tokenizer_v1.json").read_text())
    bt["special_tokens"] = 5
    write("byte_tokenizer_special_tokens_int.json", bt)
    (HERE / "stream_v1_frame_length_2e63.ubps").write_bytes(
        b"UBPE-STR" + struct.pack("<H", 1) + struct.pack("<Q", 2**63))
