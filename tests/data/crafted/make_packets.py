"""Write the crafted packets of issue 13 (batch decoding); run from the repository root.

``packet_model_4ch.json`` is the model of the ``packet_batch`` fuzz targets
(``tests/test_fuzz.py``: four int64 channels); each ``packet_*.bin`` is one
packet made with it whose check is right (a forger's), found by
``bench/fuzz.py --targets packet_batch_forged`` and reduced to one packet.
"""

import sys
import zlib
from pathlib import Path

sys.path[:0] = [".", "tests"]

import test_fuzz as F  # noqa: E402

from signals import packets as P  # noqa: E402

HERE = Path(__file__).parent


def main() -> None:
    model, _, coded = F._packet_batch()
    model.save(HERE / "packet_model_4ch.json")
    mid = model.model_id()
    seed = zlib.crc32(mid)
    n, pay = P._split(coded[0], 4, mid, "", seed)  # 256 samples, model payloads (mode 3)
    (HERE / "packet_model_payload_count_1e7.bin").write_bytes(P._frame(pay, 10**7, mid, seed))
    n, pay = P._split(coded[5], 4, mid, "", seed)  # its last payload: raw, 2,297 bytes
    pay[3] = b"\x78" + pay[3][1:]  # a mode no ubpe writes
    (HERE / "packet_unknown_mode_count_2e7.bin").write_bytes(P._frame(pay, 2 * 10**7, mid, seed))


if __name__ == "__main__":
    main()
