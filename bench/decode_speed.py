"""Decode speed of channel payloads and model packets, beside pcodec's (issues 14, 15).

    .venv/bin/python bench/decode_speed.py [--data ../shared/data] [--levels 2 3 4 5]
                                           [--sizes 256 1024 4096] [--only ECG ...] [--repeats 5]

For every dev signal (bench/datasets.py) of at least ``--min-samples``
samples: each channel coded with ``encode_channel`` at each level, and (per
packet size) a model fitted on the first 70% of each channel with the rest
coded in packets (``encode_packets``). Printed: bits/sample and decode speed
in M samples/s (``decode_channel`` per channel, ``decode_packets`` per
channel's packets; min of ``--repeats`` runs, one core), beside pcodec level 8
decompressing the same integers (whole channels; it is not given packets), and
the ratio ours / pcodec. Every decode is checked to give the input back.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.datasets import DEFAULT_DATA, load_all  # noqa: E402
from signals.channel import (  # noqa: E402
    decode_channel,
    decode_packets,
    encode_channel,
    encode_packets,
    fit_channel_model,
)


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up (numba cache load)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def pcodec_time(xs, repeats: int) -> float:
    import pcodec
    cfg = pcodec.ChunkConfig(compression_level=8)
    w = max(int(np.abs(x).max(initial=0)).bit_length() for x in xs)
    dt = np.int16 if w < 15 else np.int32 if w < 31 else np.int64
    blobs = [pcodec.standalone.simple_compress(x.astype(dt), cfg) for x in xs]
    return best_time(lambda: [pcodec.standalone.simple_decompress(b) for b in blobs], repeats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--levels", type=int, nargs="*", default=[2, 3, 4, 5])
    ap.add_argument("--sizes", type=int, nargs="*", default=[256, 1024, 4096])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--min-samples", type=int, default=50000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    sets = load_all(args.data, args.only)
    print("| file | coding | bits/sample | ours MS/s | pcodec 8 MS/s | ours / pcodec |")
    print("|---|---|---|---|---|---|")
    for name, ds in sets.items():
        if ds.n < args.min_samples:
            continue
        chans = ds.channels
        tp = pcodec_time(chans, args.repeats)
        rows = []
        for level in args.levels:
            ps = [encode_channel(c, level=level) for c in chans]
            assert all(np.array_equal(decode_channel(p, c.size), c) for p, c in zip(ps, chans))
            t = best_time(lambda: [decode_channel(p, c.size) for p, c in zip(ps, chans)], args.repeats)
            rows.append((f"level {level}", 8 * sum(map(len, ps)) / ds.n, ds.n, t))
        for size in args.sizes:
            items = []
            for c in chans:
                k = int(0.7 * c.size)
                m = fit_channel_model([c[:k]], packet_size=size)
                pk = [c[i:i + size] for i in range(k, c.size, size)]
                items.append((m, encode_packets(pk, m), pk))
            for m, blobs, pk in items:
                back = decode_packets(blobs, [p.size for p in pk], m)
                assert all(np.array_equal(a, b) for a, b in zip(back, pk))
            n = sum(sum(p.size for p in pk) for _, _, pk in items)
            t = best_time(lambda: [decode_packets(b, [p.size for p in pk], m) for m, b, pk in items],
                          args.repeats)
            bits = 8 * sum(sum(map(len, b)) for _, b, _ in items) / n
            rows.append((f"model, packets of {size}", bits, n, t))
        for what, bits, n, t in rows:
            ours, theirs = n / t / 1e6, ds.n / tp / 1e6
            print(f"| {name} | {what} | {bits:.3f} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.3f} |",
                  flush=True)


if __name__ == "__main__":
    main()
