"""CSV parsing speed on a >= 50 MB CSV, beside pandas.read_csv in the same run (issue 12).

    .venv/bin/python bench/csv_speed.py [--data ../shared/data] [--mb 50] [--repeat 5] [--only NAME ...]

Each real CSV named below is tiled (its header and lines above it once, its
rows repeated) to at least ``--mb`` megabytes in a temporary file. On each,
in one process, with the file in the page cache, the best of ``--repeat``
runs after a warm-up is reported for:

- ``pandas.read_csv`` (the peer; its default C engine, default options: every
  column parsed, numbers as float64/int64, text as objects);
- ``polars.read_csv`` (a second peer, when polars is installed; multithreaded,
  every column, types inferred from the first 10,000 rows);
- ``signals.read_csv``: the numeric channels (what ``ubpe build`` reads);
- ``signals.read_csv(output=...)``: the same as a NumPy structured array, a
  pandas DataFrame, a polars DataFrame or a pyarrow Table (issue 16);
- ``signals.table.encode_csv``: every cell, exactly (layout + int64 columns +
  blobs, verified by decoding before it returns);
- ``signals.table.decode_csv``: the file back from its parts.

Speeds are MB/s of CSV text (10**6 bytes); the ratio column is the speed
divided by pandas' on the same file. The issue's target: >= 100 MB/s.

With ``--memory``, each reader also runs once in a fresh process, and the
growth of its peak resident memory over the file's size is reported (issue
13's target for a whole ``compress``: at most 5x).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

def find_shared() -> Path:
    """The nearest ``shared/data`` folder above this checkout (``../shared/data`` in the project)."""
    for p in HERE.parents:
        if (p / "shared" / "data").is_dir():
            return p / "shared" / "data"
    return HERE.parent.parent / "shared" / "data"


FILES = {
    # name: (file, lines above the header, pandas skiprows)
    "seattle_weather": ("signals/seattle_weather.csv", 0),
    "daphnet": ("signals/daphnet_S06R02E0_accel.csv", 0),
    "tmy3": ("signals/pvlib_tmy3_723170.csv", 1),
}


def best_time(fn, repeat):
    """Best of ``repeat`` runs after a warm-up (the machine is shared: the least disturbed run)."""
    fn()
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def tile(src: Path, skip: int, mb: float, dst: Path) -> int:
    lines = src.read_bytes().splitlines(keepends=True)
    head, rows = b"".join(lines[:skip + 1]), b"".join(lines[skip + 1:])
    reps = max(1, int(mb * 1e6 / len(rows)) + 1)
    dst.write_bytes(head + rows * reps)
    return dst.stat().st_size


_MEMORY_CHILD = """
import sys


def peak():  # bytes; VmHWM, reset below (a forked child inherits its parent's high-water mark)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise OSError("no VmHWM")


path, what = sys.argv[1], sys.argv[2]
import pandas, pyarrow.csv, numba  # noqa: F401  (imports counted in the baseline)
from signals.readers import read_csv
from signals.table import decode_csv, encode_csv
data = open(path, "rb").read()
if what == "table.decode_csv":
    parts = encode_csv(data)
    del data
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = peak()
if what == "pandas.read_csv":
    pandas.read_csv(path, skiprows=int(sys.argv[3]), low_memory=False)
elif what == "signals.read_csv":
    read_csv(path)
elif what == "table.encode_csv":
    encode_csv(data)
else:
    decode_csv(parts)
print(peak() - base)
"""


_MEMORY_READERS = ("pandas.read_csv", "signals.read_csv", "table.encode_csv", "table.decode_csv")


def peak_growth(path: Path, what: str, skip: int) -> int | None:
    """Bytes by which the peak RSS grows while ``what`` runs once, in a fresh process (None on failure:
    Linux's /proc is needed).

    The file's bytes are read before the baseline (for ``decode_csv``, its parts
    are made and the bytes dropped), so the figure is what the reader adds.
    A baseline taken after ``encode_csv`` may hide part of ``decode_csv``'s use.
    """
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    r = subprocess.run([sys.executable, "-c", _MEMORY_CHILD, str(path), what, str(skip)],
                       capture_output=True, text=True, env=env)
    try:
        return int(r.stdout.split()[-1])
    except (ValueError, IndexError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=find_shared())
    ap.add_argument("--mb", type=float, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None, choices=list(FILES))
    ap.add_argument("--memory", action="store_true", help="also peak memory, one fresh process each")
    args = ap.parse_args()
    try:
        import pandas as pd
    except ImportError:
        print("skip: pandas (the peer) is not installed: pip install pandas")
        return 0
    from signals.readers import read_csv
    from signals.table import decode_csv, encode_csv

    try:
        import polars as pl
    except ImportError:
        pl = None
    print(f"cpus {os.cpu_count()}, pandas {pd.__version__}, "
          f"polars {pl.__version__ if pl is not None else 'not installed (skipped)'}, "
          f"repeat {args.repeat} (best after a warm-up)")
    print(f"{'file':<16} {'MB':>6} {'reader':<27} {'s':>7} {'MB/s':>7} {'vs pandas':>9}"
          + (f" {'peak growth':>12}" if args.memory else ""))
    ran = False
    for name in args.only or FILES:
        rel, skip = FILES[name]
        src = args.data / rel
        if not src.exists():
            print(f"skip {name}: {src} is missing (a fresh clone without ../shared)")
            continue
        ran = True
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}_tiled.csv"
            size = tile(src, skip, args.mb, path)
            mb = size / 1e6
            data = path.read_bytes()
            t_pd, df = best_time(lambda: pd.read_csv(path, skiprows=skip, low_memory=False), args.repeat)
            t_rd, ch = best_time(lambda: read_csv(path), args.repeat)
            outputs = []
            if pl is not None:
                try:
                    t_pl, _ = best_time(lambda: pl.read_csv(path, skip_rows=skip,
                                                              infer_schema_length=10_000),
                                          args.repeat)
                    outputs.append(("polars.read_csv", t_pl))
                except Exception as e:  # a peer that cannot read the file is reported
                    print(f"{name:<16} {mb:6.1f} polars.read_csv failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:80]}")
            for out in ("numpy", "pandas", "polars", "arrow"):
                if out == "polars" and pl is None:
                    continue
                t_o, tab = best_time(lambda out=out: read_csv(path, output=out), args.repeat)
                assert len(tab) == len(df), (out, len(tab), len(df))
                outputs.append((f"read_csv(output={out!r})", t_o))
            t_en, parts = best_time(lambda: encode_csv(data), args.repeat)
            t_de, back = best_time(lambda: decode_csv(parts), args.repeat)
            assert back == data, "decode_csv did not give the file back"
            assert parts.layout["kind"] == "table", parts.layout.get("reason")
            assert len(ch.channels[0]) == len(df), (len(ch.channels[0]), len(df))
            for label, t in [("pandas.read_csv", t_pd), ("signals.read_csv", t_rd), *outputs,
                             ("table.encode_csv", t_en), ("table.decode_csv", t_de)]:
                line = f"{name:<16} {mb:6.1f} {label:<27} {t:7.3f} {mb / t:7.1f} {t_pd / t:8.2f}x"
                if args.memory and label in _MEMORY_READERS:
                    g = peak_growth(path, label, skip)
                    line += f" {g / size:11.2f}x" if g is not None else "      (failed)"
                print(line)
            kinds = [c["kind"] for c in parts.layout["columns"]]
            exc = sum(c.get("n_exceptions", 0) for c in parts.layout["columns"])
            print(f"{'':<16} {'':>6} rows {parts.n_rows:,}, columns {len(kinds)} "
                  f"({', '.join(f'{k} {kinds.count(k)}' for k in sorted(set(kinds)))}), "
                  f"exception cells {exc}, replaced rows "
                  f"{len(parts.layout.get('replaced', {}) and dict(parts.int_columns)['#replaced_rows'])}")
    if not ran:
        print("skip: no CSV found; pass --data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
