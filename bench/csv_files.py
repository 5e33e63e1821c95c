"""Whole CSV files, lossless: ubpe against xz -9e, zpaq -m5 and pcodec (issue 12's table).

For every CSV under ``../shared/data/signals`` (skipped with a message when
absent): the ``.ubpe`` size of the whole file (byte-exact round trip checked),
``xz -9e`` and ``zpaq -m5`` of the whole file, and for the numeric columns
alone, ubpe's channel payloads against pcodec (level 12) on the same columns
given as float64. Run from the repository root::

    .venv/bin/python bench/csv_files.py [--out bench/csv_files.md]

``--small``: the first 2, 8, 32 and 128 KiB (whole lines) of each file
instead, where a short file of many columns pays for its columns' tables
and layout: ubpe with its columns alone (``allow_verbatim=False``) and as
it writes them (stored whole by zstd or LZMA2 where smaller), against
``xz -9e``, ``zstd -19`` (the CLI's frame: content size and checksum) and
``zpaq -m5``.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "signals"

import signals  # noqa: E402
from signals import container, table  # noqa: E402


def zpaq_size(data: bytes) -> int | None:
    """Bytes of ``zpaq a x.zpaq in -m5`` (Debian ``zpaq``), or None when not installed."""
    exe = shutil.which("zpaq")
    if exe is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "in"
        src.write_bytes(data)
        subprocess.run([exe, "a", "x.zpaq", "in", "-m5"], cwd=d, check=True,
                       capture_output=True)
        return (Path(d) / "x.zpaq").stat().st_size


def pcodec_size(columns: list[np.ndarray]) -> int | None:
    """Bytes of pcodec level 12 over each float64 column, or None when not installed."""
    try:
        import pcodec
        from pcodec import standalone
    except ImportError:
        return None
    total = 0
    for c in columns:
        c = np.ascontiguousarray(c, np.float64)
        if c.size:
            total += len(standalone.simple_compress(c, pcodec.ChunkConfig(compression_level=12)))
    return total


def numeric_columns(parts: table.CsvParts) -> tuple[list[str], list[np.ndarray]]:
    """The decimal columns as float64 (value / 10**scale, NaN for exception cells)."""
    names, cols = [], []
    for c in parts.layout.get("columns", []):
        if c.get("kind") != "decimal" or not isinstance(c.get("values"), int):
            continue
        arr = parts.int_columns[c["values"]][1]
        names.append(c["name"])
        cols.append(arr.astype(np.float64) / 10.0 ** int(c.get("scale", 0)))
    return names, cols


def small_files() -> list[str]:
    """The table of ``--small``."""
    import zstandard
    lines = ["| file | first KiB | bytes | ubpe columns | ubpe | stored whole | xz -9e | zstd -19 "
             "| zpaq -m5 | ubpe / best peer | columns / best peer | exact | compress s "
             "(columns alone) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(DATA.glob("*.csv")):
        whole = path.read_bytes()
        for kib in (2, 8, 32, 128):
            raw = whole[:kib << 10]
            raw = raw[:raw.rfind(b"\n") + 1]
            t0 = time.perf_counter()
            cols = signals.compress_file(raw, "csv", allow_verbatim=False)
            t1 = time.perf_counter()
            packed = signals.compress_file(raw, "csv")
            t2 = time.perf_counter()
            exact = signals.decompress_file(packed).data == raw
            stored = signals.inspect(packed)["stored_whole"] or "no"
            xz = len(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
            zs = len(zstandard.ZstdCompressor(level=19, write_checksum=True).compress(raw))
            zp = zpaq_size(raw)
            best = min([xz, zs] + ([zp] if zp else []))
            lines.append(f"| {path.name} | {kib} | {len(raw):,} | {len(cols):,} | {len(packed):,} "
                         f"| {stored} | {xz:,} | {zs:,} | {zp if zp else 'n/a':,} | "
                         f"{len(packed) / best:.3f} | {len(cols) / best:.3f} | "
                         f"{'yes' if exact else 'NO'} | {t2 - t1:.3f} ({t1 - t0:.3f}) |")
            print(lines[-1], file=sys.stderr, flush=True)
            if len(raw) == len(whole):
                break
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    ap.add_argument("--small", action="store_true", help="the first 2-128 KiB of each file")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"skipped: no dev data at {DATA}", file=sys.stderr)
        return
    if args.small:
        text = "\n".join(small_files())
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return
    lines = ["| file | bytes | ubpe | xz -9e | zpaq -m5 | ubpe / xz | ubpe / zpaq | numeric cols: "
             "ubpe | pcodec 12 (f64) | ratio | exact | compress s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(DATA.glob("*.csv")):
        raw = path.read_bytes()
        t0 = time.perf_counter()
        packed = signals.compress_file(raw, "csv", path=str(path))
        secs = time.perf_counter() - t0
        exact = signals.decompress_file(packed).data == raw
        xz = len(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        zp = zpaq_size(raw)
        parts = table.encode_csv(raw, path=str(path))
        names, cols = numeric_columns(parts)
        header, sections, _ = container.read_container(packed)
        sizes = [len(sections[c["payload"]].body) for c in header["columns"]]
        ours_num = sum(sizes[c["values"]] for c in parts.layout.get("columns", [])
                       if c.get("kind") == "decimal" and isinstance(c.get("values"), int))
        pc = pcodec_size(cols)
        zp_txt = f"{zp:,}" if zp is not None else "n/a"
        zp_ratio = f"{len(packed) / zp:.3f}" if zp else "n/a"
        pc_txt = f"{pc:,}" if pc is not None else "n/a"
        pc_ratio = f"{ours_num / pc:.3f}" if pc else "n/a"
        lines.append(f"| {path.name} | {len(raw):,} | {len(packed):,} | {xz:,} | {zp_txt} | "
                     f"{len(packed) / xz:.3f} | {zp_ratio} | {ours_num:,} | {pc_txt} | {pc_ratio} | "
                     f"{'yes' if exact else 'NO'} | {secs:.2f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
