"""Whole recordings: signals.channel against pcodec, WavPack, FLAC, xz, zpaq and zstd.

    .venv/bin/python bench/recordings.py [--data ../shared/data] [--levels 0 5 9]
                                         [--only ECG ...] [--no-slow]

Every dev signal (bench/datasets.py), each channel coded on its own with
``encode_channel`` at each level, decoded and checked. The peers run on the
same integers in the same process (bench/peers.py). Printed per file:
bits/sample, and the ratio of ours to the best peer (below 1: smaller than
every peer). "best AV" is the best of pcodec, WavPack and FLAC (the issue's
target for the default level), "best all" adds xz, zpaq and zstd (the target
for the strongest level). Speeds are M samples/s on one core, median of
``--repeat`` runs for in-process codecs after a warm-up (levels 8 and 9: one
run after the warm-up; CLI peers (WavPack, FLAC, zpaq): one run, process start
and the WAV file round trip included, which weighs on short inputs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.datasets import DEFAULT_DATA, load_all  # noqa: E402
from bench.peers import all_peers  # noqa: E402
from signals.channel import decode_channel, encode_channel  # noqa: E402


def ours(chans, level, repeat):
    payloads = [encode_channel(c, level=level) for c in chans]  # warm-up (numba cache)
    for p, c in zip(payloads, chans):
        decode_channel(p, c.size)
    te, td = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        payloads = [encode_channel(c, level=level) for c in chans]
        te.append(time.perf_counter() - t)
        t = time.perf_counter()
        back = [decode_channel(p, c.size) for p, c in zip(payloads, chans)]
        td.append(time.perf_counter() - t)
    assert all(np.array_equal(b, c) for b, c in zip(back, chans))
    return sum(len(p) for p in payloads), statistics.median(te), statistics.median(td)


def _ms(rate: float) -> str:
    """Samples per second as M samples/s, with two significant digits below 1."""
    return f"{rate / 1e6:.1f}" if rate >= 1e6 else f"{rate / 1e6:.2g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--levels", type=int, nargs="+", default=[0, 5, 9])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-slow", action="store_true", help="skip the CLI peers (WavPack, FLAC, zpaq)")
    args = ap.parse_args(argv)
    sets = load_all(args.data, args.only)
    if not sets:
        print("no data found; nothing to do")
        return
    head = (["file", "n"] + [f"L{lv}" for lv in args.levels]
            + ["pcodec 8", "pcodec 12", "WavPack", "FLAC", "xz -9e", "zpaq -m5", "zstd -19",
               "best AV", "best all"]
            + [f"L{lv}/bestAV" for lv in args.levels] + [f"L{lv}/best" for lv in args.levels]
            + [f"L{lv} MS/s c/d" for lv in args.levels]
            + ["pcodec 8 MS/s c/d", "WavPack MS/s c/d", "FLAC MS/s c/d", "zpaq MS/s c/d"])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios = {lv: [] for lv in args.levels}
    ratios_av = {lv: [] for lv in args.levels}
    for name, ds in sets.items():
        n = ds.n
        mine = {lv: ours(ds.channels, lv, args.repeat if lv < 8 else 1) for lv in args.levels}
        peers = {p.name: p for p in all_peers(ds.channels, ds.rate, slow=not args.no_slow)}
        bits = lambda b: 8 * b / n
        get = lambda k: f"{bits(peers[k].n_bytes):.3f}" if k in peers else "-"
        av = [bits(peers[k].n_bytes) for k in ("pcodec 8", "pcodec 12", "WavPack -hhx6", "FLAC -8")
              if k in peers]
        al = [bits(p.n_bytes) for p in peers.values()]
        best_av, best_all = min(av), min(al)
        cells = [name, f"{n:,}"] + [f"{bits(mine[lv][0]):.3f}" for lv in args.levels]
        cells += [get(k) for k in ("pcodec 8", "pcodec 12", "WavPack -hhx6", "FLAC -8", "xz -9e",
                                   "zpaq -m5", "zstd -19")]
        cells += [f"{best_av:.3f}", f"{best_all:.3f}"]
        for lv in args.levels:
            ratios_av[lv].append(bits(mine[lv][0]) / best_av)
            cells.append(f"{ratios_av[lv][-1]:.3f}")
        for lv in args.levels:
            ratios[lv].append(bits(mine[lv][0]) / best_all)
            cells.append(f"{ratios[lv][-1]:.3f}")
        for lv in args.levels:
            cells.append(f"{_ms(n / mine[lv][1])} / {_ms(n / mine[lv][2])}")
        for k in ("pcodec 8", "WavPack -hhx6", "FLAC -8", "zpaq -m5"):
            p = peers.get(k)
            cells.append(f"{_ms(n / p.enc_s)} / {_ms(n / p.dec_s)}" if p else "-")
        print("| " + " | ".join(cells) + " |", flush=True)
    for lv in args.levels:
        print(f"level {lv}: mean ratio to best AV peer {np.mean(ratios_av[lv]):.3f} "
              f"(worst {max(ratios_av[lv]):.3f}); to best of all {np.mean(ratios[lv]):.3f} "
              f"(worst {max(ratios[lv]):.3f})")
    from ubpe import _jit
    print(f"kernels: {_jit.mode()}" + (f" ({_jit.jit_reason()})" if _jit.jit_reason() else ""))


if __name__ == "__main__":
    main()
