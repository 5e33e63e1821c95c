"""Does inter-channel prediction pay on the multi-channel dev recordings? (issue 14)

    .venv/bin/python bench/interchannel.py [--data ../shared/data] [--level 3]

Stereo decorrelation in audio codecs predicts one channel from another
(FLAC's mid/side; MPEG-4 ALS inter-channel prediction: Liebchen, "MPEG-4
ALS: an emerging standard for lossless audio coding", DCC 2004). Here, for
every ordered pair of channels (i, j) of a recording, channel i is coded
as today (``encode_channel`` at ``--level``) after one of these transforms:

- ``diff``: ``x_i - round(b x_j)``, one ``b`` (a multiple of 1/16) fitted
  by least squares on the whole recording;
- ``res``: the first differences ``d_i - round(b d_j)``, integrated back,
  one ``b`` for the recording;
- ``block``: as ``res``, one ``b`` per 4096-sample block (its side
  information, 1 byte per block, is counted).

The best transform per channel (or none) is chosen by coded size, the
oracle choice an encoder could make. The table gives the bytes of all
channels coded alone and with the best transform, and the ratio. A stage
is worth adding to the format only where this ratio is clearly below 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.datasets import DEFAULT_DATA, load_all  # noqa: E402
from signals.channel import encode_channel  # noqa: E402

BLOCK = 4096


def _b(y: np.ndarray, x: np.ndarray) -> float:
    den = float(np.dot(x, x))
    return 0.0 if den == 0 else round(16 * float(np.dot(y, x)) / den) / 16


def transforms(xi: np.ndarray, xj: np.ndarray):
    """(name, transformed channel, side bytes) for each transform of channel i given j."""
    ci, cj = xi - xi.mean(), xj - xj.mean()
    b = _b(ci, cj)
    yield "diff", xi - np.round(b * xj).astype(np.int64), 1
    di, dj = np.diff(xi, prepend=xi[:1]), np.diff(xj, prepend=xj[:1])
    b = _b(di.astype(float), dj.astype(float))
    yield "res", np.cumsum(di - np.round(b * dj).astype(np.int64)), 1
    e = di.copy()
    for s in range(0, di.size, BLOCK):
        b = _b(di[s:s + BLOCK].astype(float), dj[s:s + BLOCK].astype(float))
        e[s:s + BLOCK] = di[s:s + BLOCK] - np.round(b * dj[s:s + BLOCK]).astype(np.int64)
    yield "block", np.cumsum(e), -(-di.size // BLOCK)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--level", type=int, default=3)
    args = ap.parse_args(argv)
    sets = {k: v for k, v in load_all(args.data, None).items() if len(v.channels) > 1}
    print(f"`python bench/interchannel.py --level {args.level}`: bytes of the channels coded "
          f"alone, and with the best inter-channel transform per channel (oracle choice)\n")
    print("| recording | channels | alone | with the best transform | ratio | channels that "
          "gain (channel: from, transform, saving) |")
    print("|---|---|---|---|---|---|")
    for name, ds in sets.items():
        ch = [np.asarray(c, np.int64) for c in ds.channels]
        alone = [len(encode_channel(c, level=args.level)) for c in ch]
        best, gains = list(alone), []
        for i in range(len(ch)):
            for j in range(len(ch)):
                if i == j:
                    continue
                for kind, y, side in transforms(ch[i], ch[j]):
                    n = len(encode_channel(y, level=args.level)) + side
                    if n < best[i]:
                        best[i] = n
                        gains.append((i, j, kind))
            if best[i] < alone[i]:
                i_, j, kind = [g for g in gains if g[0] == i][-1]
                gains = [g for g in gains if g[0] != i] + [(i, j, kind)]
        saved = ", ".join(f"{i}: {j}, {k}, {1 - best[i] / alone[i]:.1%}" for i, j, k in gains)
        print(f"| {name} | {len(ch)} | {sum(alone):,} | {sum(best):,} | "
              f"{sum(best) / sum(alone):.4f} | {saved or 'none'} |")


if __name__ == "__main__":
    main()
