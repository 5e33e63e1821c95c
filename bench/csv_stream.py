"""Whole-file `ubpe compress` / `ubpe decompress` on >= 50 MB CSV files: speed and peak memory
beside xz and zstd, measured in the same run (issue 13).

    .venv/bin/python bench/csv_stream.py [--mb 50] [--only NAME ...] [--level 5]
                                         [--threads 1 2] [--repeat 5]

Each real CSV of ``bench/csv_speed.py`` is tiled to ``--mb`` megabytes (its
header and the lines above it once, its rows repeated). Each command runs
``--repeat`` times, as a fresh process, with the file in the page cache; the
least wall time is reported (the machine is shared: the least disturbed run),
with its peak memory: the largest process's resident memory (``wait4``'s
``ru_maxrss``, as ``/usr/bin/time`` gives it) and, for ``ubpe -T N`` with N >
1 (compress: this process and N - 1 forked workers; decompress: N threads of
one process), the peak of the process tree's summed resident memory, sampled
every 10 ms (an upper bound: the workers share pages with the process they
were forked from). The baseline row is the same ``ubpe`` command on a 10 kB
file: the memory any ``ubpe`` process holds (Python, numpy, numba's compiled
kernels, pyarrow), whatever the input. Peers: ``xz -6`` and ``zstd -3`` (their
defaults), one thread. The decompressed file is compared with the input byte
for byte.

Each command is measured with the kernels compiled ahead of time (``ubpe aot
build``; rows ``aot``) and with numba's JIT (``UBPE_AOT=0``; rows ``jit``).

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
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from csv_speed import FILES, find_shared, tile  # noqa: E402

UBPE = [sys.executable, "-m", "ubpe"]


class _TreeMemory(threading.Thread):
    """Samples the summed RSS of a process and its descendants every 10 ms (from ``statm``:
    cheap, it takes no lock the process needs); ``peak`` in bytes. An upper bound: forked
    workers share their parent's pages until they write them."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        import psutil
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.done.wait(0.01):
            total = 0
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                return
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)


def measure(cmd: list[str], stdout=None, tree: bool = False, env: dict | None = None
            ) -> tuple[float, int, int]:
    """(seconds, peak RSS of the largest process, peak summed RSS of the tree or 0) of one
    command, run under ``/usr/bin/time`` (a child forked from this process would inherit its
    high-water mark); its ``%M`` is ``wait4``'s ``ru_maxrss``, which covers the command and
    its reaped descendants: the largest of them."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t = time.perf_counter()
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss.name] + cmd, stdout=stdout,
                             stderr=subprocess.PIPE, cwd=HERE.parent, env={**os.environ, **(env or {})})
        sampler = _TreeMemory(p.pid) if tree else None
        if sampler:
            sampler.start()
        _, err = p.communicate()
        dt = time.perf_counter() - t
        if sampler:
            sampler.done.set()
            sampler.join()
        if p.returncode:
            raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode()}")
        return dt, int(rss.read().split()[-1]) * 1024, sampler.peak if sampler else 0


def best(cmd: list[str], repeat: int, stdout_path: Path | None = None, tree: bool = False,
         env: dict | None = None) -> tuple[float, int, int]:
    """The least time of ``repeat`` runs, and the largest peaks seen."""
    runs = []
    for _ in range(repeat):
        with open(stdout_path or os.devnull, "wb") as f:
            runs.append(measure(cmd, stdout=f, tree=tree, env=env))
    return min(r[0] for r in runs), max(r[1] for r in runs), max(r[2] for r in runs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=find_shared())
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--level", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="ubpe -T values to measure (each a row)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kernels", nargs="+", choices=["aot", "jit"], default=None,
                    help="how ubpe runs its kernels (rows of each): compiled ahead of time "
                         "('ubpe aot build'), numba's JIT (UBPE_AOT=0); default both where "
                         "the compiled kernels match the sources, else jit")
    args = ap.parse_args(argv)
    from ubpe._aot_build import status
    aot_ok = "built in" in status()
    kernels = args.kernels or (["aot", "jit"] if aot_ok else ["jit"])
    if "aot" in kernels and not aot_ok:
        raise SystemExit(f"--kernels aot: {status()}")
    envs = {"aot": {}, "jit": {"UBPE_AOT": "0"}}
    tools = [t for t in ("xz", "zstd") if shutil.which(t)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ubpe-bench-") as tmp:
        tmpd = Path(tmp)
        small = tmpd / "small.csv"
        small.write_bytes((HERE.parent / "tests" / "data" / "daphnet_accel_150.csv").read_bytes())
        measure(UBPE + ["compress", "-q", "-f", str(small)], env=envs["jit"])  # warm numba's cache
        base = {}
        for k in kernels:
            tb_c, base_c, _ = best(UBPE + ["compress", "-q", "-f", str(small)], args.repeat, env=envs[k])
            tb_d, base_d, _ = best(UBPE + ["decompress", "-q", "-f", str(small) + ".ubpe", "-o",
                                           str(tmpd / "small.out.csv")], args.repeat, env=envs[k])
            base[k] = (tb_c, base_c, tb_d, base_d)
            print(f"baseline ({k}, 10 kB file): compress {tb_c:.2f} s, {base_c / 1e6:.0f} MB, decompress "
                  f"{tb_d:.2f} s, {base_d / 1e6:.0f} MB peak RSS", file=sys.stderr)
        for name, (rel, skip) in FILES.items():
            if args.only and name not in args.only:
                continue
            src = args.data / rel
            if not src.exists():
                print(f"{src} is missing: skipped", file=sys.stderr)
                continue
            csv = tmpd / f"{name}.csv"
            size = tile(src, skip, args.mb, csv)
            peers = {}
            for tool in tools:
                out = tmpd / f"{name}.{tool}"
                pc, pmc, _ = best([tool, "-c", "-T1", str(csv)], args.repeat, out)
                pd, pmd, _ = best([tool, "-d", "-c", "-T1", str(out)], args.repeat)
                peers[tool] = (out.stat().st_size, pc, pd, pmc, pmd)
            for k in kernels:
                for threads in args.threads:
                    packed, back = tmpd / f"{name}.csv.ubpe", tmpd / f"{name}.out.csv"
                    tree = threads != 1
                    t_opt = ["-T", str(threads)] if tree else []  # none for 1: older ubpe runs it too
                    tc, mc, sc = best(UBPE + ["compress", "-q", "-f", "--level", str(args.level)]
                                      + t_opt + [str(csv), "-o", str(packed)], args.repeat, tree=tree,
                                      env=envs[k])
                    td, md, sd = best(UBPE + ["decompress", "-q", "-f"] + t_opt
                                      + [str(packed), "-o", str(back)], args.repeat, tree=tree, env=envs[k])
                    exact = filecmp.cmp(csv, back, shallow=False)
                    row = {"name": name, "kernels": k, "threads": threads, "size": size,
                           "ours": packed.stat().st_size, "tc": tc, "td": td, "mc": mc, "md": md,
                           "sc": sc, "sd": sd, "exact": exact, "peers": peers}
                    rows.append(row)
                    print(row, file=sys.stderr)
    mb = 1e6
    print(f"`python bench/csv_stream.py --mb {args.mb:g} --level {args.level} --repeat "
          f"{args.repeat}`; ubpe runs as `python -m ubpe`, best of {args.repeat} runs each "
          f"(peers too); kernels: `aot` compiled ahead of time (`ubpe aot build`), `jit` numba's "
          f"JIT (`UBPE_AOT=0`). Baseline of the same commands on a 10 kB file: " + "; ".join(
              f"{k}: compress {b[0]:.2f} s, {b[1] / mb:.0f} MB peak RSS, decompress {b[2]:.2f} s, "
              f"{b[3] / mb:.0f} MB" for k, b in base.items()) + "\n")
    head = ("| file | MB | kernels | -T | ubpe bytes | compress MB/s | decompress MB/s | compress peak MB "
            "(x file; above baseline x file) | decompress peak MB (x output; above baseline) "
            "| exact |")
    peers = " | ".join(f"{t} bytes, c/d MB/s, c/d peak MB" for t in tools)
    print(head + (f" {peers} |" if tools else ""))
    print("|" + "---|" * (10 + len(tools)))

    def peak(m: int, tree: int, base: int, s: int) -> str:
        if tree:  # the tree's summed RSS; the largest process's beside it
            return (f"{tree / mb:.0f} summed, {m / mb:.0f} largest ({tree / s:.1f}x; "
                    f"{(tree - base) / s:.1f}x)")
        return f"{m / mb:.0f} ({m / s:.1f}x; {(m - base) / s:.1f}x)"

    for r in rows:
        s = r["size"]
        b = base[r["kernels"]]
        cells = [r["name"], f"{s / mb:.1f}", r["kernels"], str(r["threads"]), f"{r['ours']:,}",
                 f"{s / mb / r['tc']:.1f}", f"{s / mb / r['td']:.1f}",
                 peak(r["mc"], r["sc"], b[1], s), peak(r["md"], r["sd"], b[3], s),
                 "yes" if r["exact"] else "NO"]
        for t in tools:
            nb, pc, pd, pmc, pmd = r["peers"][t]
            cells.append(f"{nb:,}, {s / mb / pc:.1f}/{s / mb / pd:.1f}, {pmc / mb:.0f}/{pmd / mb:.0f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
