"""Where level 5's ``encode_channel`` spends its time on one 8 MiB frame of each tiled CSV
of ``bench/csv_stream.py`` (issue 13).

    .venv/bin/python bench/csv_channels.py [--only NAME ...] [--level 5] [--repeat 3]
                                           [--profile] [--save DIR]

The frame is the first piece :func:`signals.files.csv_pieces` cuts from the CSV tiled to
16 MB; its channels are the integer arrays :func:`signals.codec.encode_columns` passes to
``encode_channel`` (captured, as the stream codes them). Per column: samples, distinct
values, the best of ``--repeat`` encode times and the payload's bits/sample; per frame: the
total, and (``--profile``) the cProfile of one pass over the frame's columns.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from csv_speed import FILES, find_shared, tile  # noqa: E402

from signals import channel, codec, files  # noqa: E402


def frame_channels(name: str) -> list[np.ndarray]:
    """The integer arrays one 8 MiB frame of ``name`` (tiled) hands to ``encode_channel``."""
    rel, skip = FILES[name]
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "t.csv"
        tile(find_shared() / rel, skip, 16, dst)
        with open(dst, "rb") as f:
            piece = next(iter(files.csv_pieces(f)))
    seen: list[np.ndarray] = []
    real = codec.encode_channel

    def spy(x, **kw):
        seen.append(np.array(x, np.int64))
        return real(x, **kw)
    codec.encode_channel = spy  # type: ignore[assignment]
    try:
        files._compress_csv(piece, name, None, None, {"level": 0})
    finally:
        codec.encode_channel = real  # type: ignore[assignment]
    return seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=list(FILES))
    ap.add_argument("--level", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--save", default=None, help="write each frame's channels to DIR/NAME.npz")
    a = ap.parse_args()
    channel.encode_channel(np.arange(100000) % 7, level=a.level)  # compile
    for name in a.only:
        xs = frame_channels(name)
        if a.save:
            np.savez(Path(a.save) / f"{name}.npz", *xs)
        total, bits, n_all = 0.0, 0, 0
        print(f"## {name}: {len(xs)} channels")
        for i, x in enumerate(xs):
            best = float("inf")
            for _ in range(a.repeat):
                t = time.perf_counter()
                p = channel.encode_channel(x, level=a.level)
                best = min(best, time.perf_counter() - t)
            total += best
            bits += 8 * len(p)
            n_all += x.size
            print(f"  col {i:2d}: n={x.size:8,d} distinct={np.unique(x).size:7,d} "
                  f"mode={p[0]} {8 * len(p) / max(1, x.size):7.3f} b/s {best * 1e3:7.1f} ms")
        print(f"  frame total: {total:.3f} s, {bits / max(1, n_all):.4f} b/s, {bits // 8:,} bytes")
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            for x in xs:
                channel.encode_channel(x, level=a.level)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
            print(s.getvalue())


if __name__ == "__main__":
    main()
