"""Whole-file `ubpe compress` / `ubpe decompress` on >= 50 MB CSV files: speed and peak memory
beside xz and zstd, measured in the same run (issue 13).

    .venv/bin/python bench/csv_stream.py [--mb 50] [--only NAME ...] [--level 5]

Each real CSV of ``bench/csv_speed.py`` is tiled to ``--mb`` megabytes (its
header and the lines above it once, its rows repeated). Each command runs
once, as a fresh process, with the file in the page cache; its wall time and
its peak resident memory (``wait4``'s ``ru_maxrss``) are reported. The
baseline row is the same ``ubpe`` command on a 10 kB file: the memory any
``ubpe`` process holds (Python, numpy, numba's compiled kernels, pyarrow),
whatever the input (peak RSS is measured by ``/usr/bin/time``). Peers:
``xz -6`` and ``zstd -3`` (their defaults), one thread. The decompressed
file is compared with the input byte for byte.

Targets (issue 13): peak memory of compress <= 5x the file, of decompress
<= 3x the output; both >= 100 MB/s.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from csv_speed import FILES, find_shared, tile  # noqa: E402

UBPE = [sys.executable, "-m", "ubpe"]


def measure(cmd: list[str], stdout=None) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one command, run under ``/usr/bin/time`` (a child forked
    from this process would inherit its high-water mark)."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd, stdout=stdout,
                           stderr=subprocess.PIPE, cwd=HERE.parent)
        dt = time.perf_counter() - t
        if p.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode()}")
        return dt, int(rss.read().split()[-1]) * 1024


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=find_shared())
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--level", type=int, default=5)
    args = ap.parse_args(argv)
    tools = [t for t in ("xz", "zstd") if shutil.which(t)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ubpe-bench-") as tmp:
        tmpd = Path(tmp)
        small = tmpd / "small.csv"
        small.write_bytes((HERE.parent / "tests" / "data" / "daphnet_accel_150.csv").read_bytes())
        measure(UBPE + ["compress", "-q", "-f", str(small)])  # warm the numba cache
        _, base_c = measure(UBPE + ["compress", "-q", "-f", str(small)])
        _, base_d = measure(UBPE + ["decompress", "-q", "-f", str(small) + ".ubpe", "-o",
                                    str(tmpd / "small.out.csv")])
        print(f"baseline (10 kB file): compress {base_c / 1e6:.0f} MB, decompress "
              f"{base_d / 1e6:.0f} MB peak RSS", file=sys.stderr)
        for name, (rel, skip) in FILES.items():
            if args.only and name not in args.only:
                continue
            src = args.data / rel
            if not src.exists():
                print(f"{src} is missing: skipped", file=sys.stderr)
                continue
            csv = tmpd / f"{name}.csv"
            size = tile(src, skip, args.mb, csv)
            packed, back = tmpd / f"{name}.csv.ubpe", tmpd / f"{name}.out.csv"
            tc, mc = measure(UBPE + ["compress", "-q", "-f", "--level", str(args.level),
                                     str(csv), "-o", str(packed)])
            td, md = measure(UBPE + ["decompress", "-q", "-f", str(packed), "-o", str(back)])
            exact = filecmp.cmp(csv, back, shallow=False)
            row = {"name": name, "size": size, "ours": packed.stat().st_size, "tc": tc, "td": td,
                   "mc": mc, "md": md, "exact": exact, "peers": {}}
            for tool in tools:
                out = tmpd / f"{name}.{tool}"
                with open(out, "wb") as f:
                    pc, pmc = measure([tool, "-c", "-T1", str(csv)], stdout=f)
                with open(os.devnull, "wb") as f:
                    pd, pmd = measure([tool, "-d", "-c", "-T1", str(out)], stdout=f)
                row["peers"][tool] = (out.stat().st_size, pc, pd, pmc, pmd)
            rows.append(row)
            print(row, file=sys.stderr)
    mb = 1e6
    print(f"`python bench/csv_stream.py --mb {args.mb:g} --level {args.level}`; ubpe runs as "
          f"`python -m ubpe`; baseline peak RSS of the same commands on a 10 kB file: compress "
          f"{base_c / mb:.0f} MB, decompress {base_d / mb:.0f} MB\n")
    head = ("| file | MB | ubpe bytes | compress MB/s | decompress MB/s | compress peak MB (x file; "
            "above baseline x file) | decompress peak MB (x output; above baseline) | exact |")
    peers = " | ".join(f"{t} bytes, c/d MB/s, c/d peak MB" for t in tools)
    print(head + (f" {peers} |" if tools else ""))
    print("|" + "---|" * (8 + len(tools)))
    for r in rows:
        s = r["size"]
        cells = [r["name"], f"{s / mb:.1f}", f"{r['ours']:,}", f"{s / mb / r['tc']:.1f}",
                 f"{s / mb / r['td']:.1f}",
                 f"{r['mc'] / mb:.0f} ({r['mc'] / s:.1f}x; {(r['mc'] - base_c) / s:.1f}x)",
                 f"{r['md'] / mb:.0f} ({r['md'] / s:.1f}x; {(r['md'] - base_d) / s:.1f}x)",
                 "yes" if r["exact"] else "NO"]
        for t in tools:
            b, pc, pd, pmc, pmd = r["peers"][t]
            cells.append(f"{b:,}, {s / mb / pc:.1f}/{s / mb / pd:.1f}, {pmc / mb:.0f}/{pmd / mb:.0f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
