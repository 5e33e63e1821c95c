"""Lossless float64 arrays: the exact integer mapping plus the signal pipeline, against pcodec.

    .venv/bin/pip install pcodec
    .venv/bin/python bench/floats.py [--data ../shared/data] [--max-error E]

For each float64 array of the dev signals (MIT-BIH ECG record 208; the
numeric columns of ``seattle_weather.csv``; GHI and DNI of the TMY3 file;
and three derived arrays that are not decimals: the ECG / 3, a speech clip
as a float WAV holds it, the ECG plus noise),
``signals.intmap.map_to_int64`` maps it to int64 (lossless), the ints are
coded by the current pipeline (``signals.compress``), and the size is
``len(container) + len(extra)``: "default" with the default options, "best"
the smaller of level 5 (the default) and level 9;
the ``+cfg`` column adds the mapping's JSON config, which the container
header will hold. The peer is pcodec
(https://github.com/pcodec/pcodec, PyPI ``pcodec``) at levels 8 (its
default) and 12, on the same float64 arrays, in the same run. Every round
trip is checked bit for bit. Figures are bits per sample; the ratio is ours
(with extra) over pcodec level 12 (below 1: smaller than pcodec). The totals are over the dev arrays only
(not the derived ones) and leave out arrays the pipeline cannot code yet.

Where the mapped ints span ``2**20`` or more (floats mapped by their IEEE
bits), they are remapped with ``max_int_bits=20`` (more low bits raw in
``extra``); the label says so. (A setting kept so that the figures compare
with earlier runs: it was needed when the pipeline's memory grew with the
range of the ints, which it no longer does since issue 13.)

Skips with a message when the data folder or pcodec is missing.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import signals  # noqa: E402
from signals.intmap import describe, map_to_int64, unmap_from_int64  # noqa: E402

MAX_SPAN_BITS = 20  # the current pipeline's memory grows with the range of the ints


def load_arrays(data: Path) -> dict[str, np.ndarray]:
    """The float64 dev arrays, by name."""
    sig = data / "signals"
    out: dict[str, np.ndarray] = {}
    out["mitbih208 ecg"] = np.load(sig / "mitbih208_ecg.npz")["ecg"].astype(np.float64)
    n_ecg = out["mitbih208 ecg"].size
    with open(sig / "seattle_weather.csv", newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    for col in ("precipitation", "temp_max", "temp_min", "wind"):
        j = head.index(col)
        out[f"seattle {col}"] = np.array([float(r[j]) for r in rows[1:]], np.float64)
    with open(sig / "pvlib_tmy3_723170.csv", newline="") as f:
        rows = list(csv.reader(f))[1:]  # line 1 is station metadata
    head = rows[0]
    for col in ("GHI (W/m^2)", "DNI (W/m^2)"):
        j = head.index(col)
        out[f"tmy3 {col.split()[0]}"] = np.array([float(r[j]) for r in rows[1:]], np.float64)
    # not decimal-origin (derived; marked "derived" in the table):
    # the ECG in mV divided by 3 in float arithmetic (a gain that is not decimal) ...
    out["derived: ecg / 3"] = out["mitbih208 ecg"] / 3
    # ... int16 speech as a float WAV holds it (PCM / 32768) ...
    wavs = sorted((sig / "librivox_speech_16k").glob("*.wav"))
    if wavs:
        with wave.open(str(wavs[0])) as w:
            pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        out["derived: speech pcm / 32768"] = pcm / 32768.0
    # ... and floats with no grid at all (the ECG plus a small noise): the IEEE-bits mapping
    out["derived: ecg + noise"] = out["mitbih208 ecg"] + np.random.default_rng(0).normal(0, 1e-3, n_ecg)
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and bool(np.array_equal(a.view(np.uint64), b.view(np.uint64)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--max-error", type=float, default=None,
                    help="map with this bound instead of losslessly (pcodec stays lossless)")
    args = ap.parse_args()
    try:
        from pcodec import ChunkConfig, standalone
    except ImportError:
        print("skip: pcodec is not installed (pip install pcodec)")
        return 0
    if not (args.data / "signals" / "mitbih208_ecg.npz").exists():
        print(f"skip: no dev data under {args.data} (pass --data)")
        return 0
    arrays = load_arrays(args.data)

    print("| array | n | mapping | ours (default) | ours (best) | best +cfg | pcodec L8 | pcodec L12 "
          "| default/L12 | best/L12 | map+compress s | pcodec L12 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    tot = dict.fromkeys(("n", "ours", "best", "cfg", "p8", "p12"), 0)
    for name, x in arrays.items():
        n = x.size
        bps = lambda b: 8.0 * b / n
        sizes = {}
        for level in (8, 12):
            t = time.perf_counter()
            z = standalone.simple_compress(x, ChunkConfig(compression_level=level))
            sizes[level] = (len(z), time.perf_counter() - t)
            assert same_bits(standalone.simple_decompress(z), x)
        peer = f"{bps(sizes[8][0]):.3f} | {bps(sizes[12][0]):.3f}"
        t = time.perf_counter()
        m = map_to_int64(x, max_error=args.max_error)
        label = describe(m.config)
        if int(m.ints.max()) - int(m.ints.min()) >= 2**MAX_SPAN_BITS:
            # the pipeline's memory grows with the range of the ints (issue 13): bound it
            m = map_to_int64(x, max_error=args.max_error, max_int_bits=MAX_SPAN_BITS)
            label = f"{describe(m.config)} (max_int_bits={MAX_SPAN_BITS}; default: {label.split(', ')[-1]})"
        try:
            container = signals.compress(m.ints)
        except ValueError as exc:
            print(f"| {name} | {n} | {label} | not codable yet: {str(exc)[:40]} | | | {peer} "
                  f"| | | | |", flush=True)
            continue
        t_ours = time.perf_counter() - t
        # the strongest level of the pipeline
        alt = signals.compress(m.ints, level=9)
        best, best_name = (container, "L5") if len(container) <= len(alt) else (alt, "L9")
        for c in (container, alt):
            back = signals.decompress(c)
            back = np.asarray(back[0] if isinstance(back, list | tuple) else back, np.int64).reshape(-1)
            assert np.array_equal(back, m.ints), f"{name}: the pipeline did not give back the ints"
        y = unmap_from_int64(back, m.config, m.extra)
        if args.max_error is None:
            assert same_bits(x, y), f"{name}: not bit-exact"
        else:
            assert np.abs(x - y).max() <= args.max_error, f"{name}: bound broken"
        ours = len(container) + len(m.extra)
        ours_best = len(best) + len(m.extra)
        cfg = len(json.dumps(m.config, separators=(",", ":")))
        print(f"| {name} | {n} | {label} | {bps(ours):.3f} | {bps(ours_best):.3f} ({best_name}) "
              f"| {bps(ours_best + cfg):.3f} | {peer} | {ours / sizes[12][0]:.3f} "
              f"| {ours_best / sizes[12][0]:.3f} | {t_ours:.2f} | {sizes[12][1]:.3f} |", flush=True)
        if name.startswith("derived"):
            continue
        tot["n"] += n
        tot["ours"] += ours
        tot["best"] += ours_best
        tot["cfg"] += ours_best + cfg
        tot["p8"] += sizes[8][0]
        tot["p12"] += sizes[12][0]
    N = tot["n"]
    print(f"| **all dev arrays** | {N} | | {8 * tot['ours'] / N:.3f} | {8 * tot['best'] / N:.3f} "
          f"| {8 * tot['cfg'] / N:.3f} | {8 * tot['p8'] / N:.3f} | {8 * tot['p12'] / N:.3f} "
          f"| {tot['ours'] / tot['p12']:.3f} | {tot['best'] / tot['p12']:.3f} | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
