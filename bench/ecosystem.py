"""ubpe where its users work: the zarr codec, Dask, batch encoding, Chronos tokens. Run by hand.

    .venv/bin/pip install -e ".[zarr,dask,plot,formats]" pcodec
    .venv/bin/python bench/ecosystem.py [--data ../shared/data] [--only codec dask threads chronos plot]

Every figure is measured in this run, against a peer timed in the same
process right beside it:

- codec: each dev signal as a (samples x channels) array cut into chunks of
  4096 samples; every chunk encoded by the ``ubpe`` numcodecs codec and by
  numcodecs ``Zstd(level=19)``, ``Blosc(zstd, level 9, bitshuffle)`` and
  ``PCodec`` (pcodec); bytes, and encode/decode speed in MB/s of raw
  samples. The ubpe chunks are also written to a zarr v3 array (its
  serializer) and compared with ``signals.compress`` on the whole signal,
  without and with a model trained on the first 70% of the signal.
- dask: ``signals.parallel.compress_files`` over copies of the dev
  signals, on a LocalCluster of 2 worker processes against 1.
- threads: ``Tokenizer.encode_to_numpy(num_threads=2)`` against 1 thread.
- chronos: tokens per sample of the Chronos-style tokenizer (4093 bins,
  +4096 merges, trained on the first half of each signal) on the second
  half, against Chronos' one token per sample.
- plot: ``ubpe plot``'s four pictures of the ECG, each call a fresh process
  (``python -m ubpe plot``) after a first call that fills the numba cache;
  wall and CPU seconds, beside ``--serial`` and the import floor.

A peer or the data that is missing is reported and skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

CHUNK = 4096


def dev_signals(data: Path) -> dict[str, np.ndarray]:
    """Dev signals as (samples, channels) arrays in their native integer dtype."""
    import wave
    sig = data / "signals"
    out = {}
    ecg = np.load(sig / "mitbih208_ecg.npz")["ecg"]
    out["ECG 208 (int16 ADC)"] = np.round(ecg / 0.005).astype(np.int16)[:, None]
    out["ECG 208 (float64 mV)"] = ecg[:, None].copy()
    acc = np.loadtxt(sig / "daphnet_S06R02E0_accel.csv", delimiter=",", skiprows=1,
                     usecols=range(1, 10))
    out["Daphnet accel (9 ch int16)"] = acc.astype(np.int16)
    ppg = np.loadtxt(sig / "heartpy_ppg.csv", delimiter=",", skiprows=1, usecols=[1])
    out["PPG heartpy (int16)"] = ppg.astype(np.int16)[:, None]
    temp = np.loadtxt(sig / "seattle_temps.csv", delimiter=",", skiprows=1, usecols=[1])
    out["Seattle temp (int16, 0.1 F)"] = np.round(temp * 10).astype(np.int16)[:, None]
    pcm = []
    for f in sorted((sig / "librivox_speech_16k").glob("*.wav")):
        with wave.open(str(f)) as wf:
            pcm.append(np.frombuffer(wf.readframes(wf.getnframes()), "<i2"))
    if pcm:
        out["speech 16 kHz (int16)"] = np.concatenate(pcm)[:, None]
    return out


def chunks(x: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(x[i:i + CHUNK]) for i in range(0, x.shape[0], CHUNK)]


def timed(fn, repeat: int = 3):
    """Best wall time of ``repeat`` calls (the machine is shared) and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def bench_codec(data: Path, repeat: int) -> None:
    import numcodecs

    from signals.numcodecs_codec import UBPECodec
    peers = {"Zstd(19)": numcodecs.Zstd(level=19),
             "Blosc(zstd,9,bitshuffle)": numcodecs.Blosc("zstd", 9, numcodecs.Blosc.BITSHUFFLE)}
    try:
        peers["pcodec"] = numcodecs.PCodec()
        peers["pcodec"].encode(np.arange(10, dtype=np.int16))
    except Exception as e:  # pcodec missing
        print(f"pcodec skipped: {e}")
        peers.pop("pcodec", None)
    ubpe = UBPECodec()
    print(f"\n## zarr/numcodecs codec, chunks of {CHUNK} samples (bytes; ratio = peer / ubpe, "
          f">1 means ubpe is smaller)\n")
    print("| signal | raw | ubpe | " + " | ".join(peers) + " | ubpe enc/dec MB/s | "
          + " | ".join(f"{p} enc/dec MB/s" for p in peers) + " |")
    print("|---" * (3 + 2 * len(peers) + 1) + "|")
    zarr_rows = []
    for name, x in dev_signals(data).items():
        cs = chunks(x)
        raw = x.nbytes
        mb = raw / 1e6
        sizes, speeds = {}, {}
        for pname, codec in [("ubpe", ubpe), *peers.items()]:
            codec.encode(cs[0])  # warm-up (numba cache, codec tables)
            te, enc = timed(lambda codec=codec: [codec.encode(c) for c in cs], repeat)
            td, dec = timed(lambda codec=codec, enc=enc: [codec.decode(e) for e in enc], repeat)
            back = np.concatenate([np.frombuffer(np.asarray(d).tobytes(), x.dtype).reshape(-1, x.shape[1])
                                   for d in dec])
            assert np.array_equal(back.view(np.uint8), x.view(np.uint8)), (name, pname)
            sizes[pname] = sum(len(e) for e in enc)
            speeds[pname] = f"{mb / te:.1f}/{mb / td:.1f}"
        ratio = " | ".join(f"{sizes[p]:,} ({sizes[p] / sizes['ubpe']:.2f}x)" for p in peers)
        print(f"| {name} | {raw:,} | {sizes['ubpe']:,} | {ratio} | {speeds['ubpe']} | "
              + " | ".join(speeds[p] for p in peers) + " |")
        if x.dtype.kind in "iu":
            zarr_rows.append(zarr_with_model(name, x))
    print("\n## zarr array (ubpe serializer, 4096-sample chunks) against signals.compress on the "
          "whole signal, without and with a trained model\n")
    print("Model: `SignalModel(n_levels=1024, vocab_size=1024).fit(...)` on the first 70% of the "
          "signal (what `ubpe build --vocab-size 1024` fits; no merges, since the codec uses only "
          "the model's codec part), passed inline in the codec config (`model_config(path, "
          "inline=True)`: zstd then base64, stored once in the array's zarr.json). The array "
          "holds the whole signal, training part included. Ratios are to `signals.compress` of "
          "the whole signal without a model; the target is <= 1.05.\n")
    print("| signal | compress bytes | zarr chunks | ratio | zarr chunks, model | model inline "
          "bytes (file) | ratio, model not counted | ratio, model counted | chunk payloads only: "
          "ratio without / with model |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in zarr_rows:
        w = r["whole"]
        print(f"| {r['name']} | {w:,} | {r['plain']:,} | {r['plain'] / w:.3f} | "
              f"{r['model']:,} | {r['inline']:,} ({r['file']:,}) | {r['model'] / w:.3f} | "
              f"{(r['model'] + r['inline']) / w:.3f} | {r['pay_plain'] / w:.3f} / "
              f"{r['pay_model'] / w:.3f} |")
    print("\nChunk payloads only: the channels' coded bytes in the chunks' containers, without "
          "each chunk's container header (magic, JSON header, checksums) and framing, which "
          "every 4096-sample chunk repeats (the whole signal's compress bytes keep their one "
          "header).")
    n = len(zarr_rows)

    def meets(key, extra=None) -> int:
        return sum((r[key] + (r[extra] if extra else 0)) / r["whole"] <= 1.05 for r in zarr_rows)
    head = statistics.mean((r["plain"] - r["pay_plain"]) / r["n_chunks"] for r in zarr_rows)
    head_model = statistics.mean((r["model"] - r["pay_model"]) / r["n_chunks"] for r in zarr_rows)
    print(f"\nWhich count meets the target (<= 1.05), signals out of {n}: zarr chunks without a "
          f"model {meets('plain')}; with the model, its bytes not counted {meets('model')}, "
          f"counted {meets('model', 'inline')}; chunk payloads only, without a model "
          f"{meets('pay_plain')}, with it {meets('pay_model')}. Chunks larger with the model "
          f"than without: {sum(r['model'] > r['plain'] for r in zarr_rows)} of {n}. Container "
          f"header and framing per chunk, on average: {head:.0f} bytes without a model, "
          f"{head_model:.0f} with it (its id).")

    print("\n## zarr array (ubpe serializer, no model) against signals.compress on the whole "
          "signal, by chunk size (bytes of all chunks / compress bytes; zarr pads the last "
          "chunk to the full size)\n")
    sizes = (4096, 16384, 65536)
    print("| signal | " + " | ".join(f"{c:,}-sample chunks" for c in sizes) + " |")
    print("|---" * (1 + len(sizes)) + "|")
    from signals.numcodecs_codec import UBPEZarrCodec
    for r in zarr_rows:
        cells = [zarr_bytes(r["x"], UBPEZarrCodec(), c) / r["whole"] for c in sizes]
        print(f"| {r['name']} | " + " | ".join(f"{v:.3f}" for v in cells) + " |")


def zarr_bytes(x: np.ndarray, serializer, chunk: int = CHUNK) -> int:
    """Bytes of the chunks of a zarr v3 array of ``x`` (read back and checked)."""
    import zarr
    store = zarr.storage.MemoryStore()
    z = zarr.create_array(store, shape=x.shape, chunks=(chunk, x.shape[1]), dtype=x.dtype,
                          serializer=serializer, compressors=None)
    z[:] = x
    assert np.array_equal(zarr.open_array(store, mode="r")[:], x)
    return sum(len(v.to_bytes()) for k, v in store._store_dict.items() if "zarr.json" not in k)


def zarr_with_model(name: str, x: np.ndarray) -> dict:
    """Bytes of ``x`` in a zarr array with the ubpe serializer, without and with a model."""
    import signals
    from signals import SignalModel, compress
    from signals.numcodecs_codec import UBPEZarrCodec, model_config

    def payloads(model) -> int:
        return sum(ch["bytes"] for c in chunks(x)
                   for ch in signals.inspect(compress(c.T, model=model))["channels"])

    n70 = int(0.7 * x.shape[0])
    model = SignalModel(1024, 1024, progress=False).fit([x[:n70, c] for c in range(x.shape[1])])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.json"
        model.save(path)
        cfg = model_config(path, inline=True)
        file_bytes = path.stat().st_size
    return {"name": name, "whole": len(compress(x.T)), "plain": zarr_bytes(x, UBPEZarrCodec()),
            "model": zarr_bytes(x, UBPEZarrCodec(model=cfg)), "inline": len(cfg["inline"]),
            "file": file_bytes, "pay_plain": payloads(None), "pay_model": payloads(model),
            "n_chunks": len(chunks(x)), "x": x}


def bench_dask(data: Path) -> None:
    from distributed import Client, LocalCluster

    from signals.parallel import compress_files
    sigs = dev_signals(data)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k in range(8):  # eight copies of every dev signal (seconds of work), one file each
            for i, x in enumerate(sigs.values()):
                if x.dtype.kind not in "iu":
                    continue
                p = Path(tmp) / f"s{k}_{i}.npz"
                np.savez(p, x=x.T.astype(np.int64))
                files.append(p)
        n = sum(np.load(f)["x"].size for f in files)
        times = {}
        for workers in (1, 2, 1, 2):
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as lc, Client(lc) as client:
                compress_files(files[:workers], out_dir=Path(tmp) / "warm", scheduler=client)
                t = time.perf_counter()
                compress_files(files, out_dir=Path(tmp) / f"out{workers}", scheduler=client)
                times.setdefault(workers, []).append(time.perf_counter() - t)
        t1, t2 = min(times[1]), min(times[2])
        print(f"\n## Dask: compress_files, {len(files)} files, {n:,} samples "
              f"(os.cpu_count() = {os.cpu_count()})\n")
        print("| workers | seconds (best of 2) | samples/s | speed-up |")
        print("|---|---|---|---|")
        print(f"| 1 process | {t1:.2f} | {n / t1 / 1e6:.2f} M | 1.00x |")
        print(f"| 2 processes | {t2:.2f} | {n / t2 / 1e6:.2f} M | {t1 / t2:.2f}x |")


def bench_threads(data: Path) -> None:
    from signals import UniformQuantizer
    from ubpe import Tokenizer
    ecg = np.load(data / "signals" / "mitbih208_ecg.npz")["ecg"]
    codes = UniformQuantizer(256).fit(ecg).encode(ecg).astype(np.int64)
    docs = [codes[i:i + 512] for i in range(0, codes.size, 512)]
    tok = Tokenizer(256, 1024, n_candidates=8, progress=False).fit(docs)
    batch = docs * 20
    n = sum(d.size for d in batch)
    print(f"\n## Batch encoding, {len(batch):,} documents, {n:,} symbols "
          f"(os.cpu_count() = {os.cpu_count()})\n")
    print("| method | 1 thread M sym/s | 2 threads M sym/s | speed-up |")
    print("|---|---|---|---|")
    for method in ("merges", "shortest"):
        tok.encode_to_numpy(batch[:10], method=method, num_threads=2)  # load or compile the kernel
        t = {1: [], 2: []}
        for _ in range(5):
            for k in (1, 2):
                s = time.perf_counter()
                tok.encode_to_numpy(batch, method=method, num_threads=k)
                t[k].append(time.perf_counter() - s)
        t1, t2 = statistics.median(t[1]), statistics.median(t[2])
        print(f"| {method} | {n / t1 / 1e6:.1f} | {n / t2 / 1e6:.1f} | {t1 / t2:.2f}x |")


def bench_chronos(data: Path) -> None:
    from signals.chronos import ChronosUBPETokenizer
    sig = data / "signals"

    def ts(path):
        rows = [ln.split(":")[0] for ln in open(path) if ln.strip() and ln[0] not in "#@"]
        return [np.array(r.split(","), float) for r in rows]
    dev = {"ECG 208": [np.load(sig / "mitbih208_ecg.npz")["ecg"]],
           "PPG": [np.loadtxt(sig / "heartpy_ppg.csv", delimiter=",", skiprows=1, usecols=1)],
           "Seattle temp": [np.loadtxt(sig / "seattle_temps.csv", delimiter=",", skiprows=1,
                                       usecols=1)],
           "Daphnet (9 ch)": list(np.loadtxt(sig / "daphnet_S06R02E0_accel.csv", delimiter=",",
                                             skiprows=1, usecols=range(1, 10)).T),
           "ACSF1 (100 series)": ts(sig / "ucr_acsf1_train.ts")}
    print("\n## Chronos-style tokens (mean scale, uniform bins, then UBPE), context 512; "
          "held-out second half of each signal\n")
    print("| signal | bins | + merges | tokens/sample (Chronos: 1.00) | samples/token |")
    print("|---|---|---|---|---|")
    for bins in (4093, 256):
        for name, ser in dev.items():
            first = [s[: s.size // 2] for s in ser]
            second = [s[s.size // 2:] for s in ser]
            c = ChronosUBPETokenizer(n_bins=bins, vocab_size=bins + 4096).fit(first)
            tps = c.tokens_per_sample(second)
            print(f"| {name} | {bins} | {len(c.tokenizer_.merges_)} | {tps:.3f} | {1 / tps:.2f} |")


def bench_plot(data: Path, repeat: int = 5) -> None:
    """``ubpe plot`` as a user runs it: a fresh process per call, the numba cache warm."""
    import resource
    import subprocess
    src = data / "signals" / "mitbih208_ecg.npz"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def run(args: list[str]) -> tuple[float, float, str]:
        """Wall seconds, CPU seconds (user + system, children included) and the output."""
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True).stderr  # (the summary)
        wall = time.perf_counter() - t
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime, out

    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["-m", "ubpe", "plot", str(src), "-o", tmp, "--rate", "360", "-f"]
        variants = {"python -m ubpe plot mitbih208_ecg.npz -o DIR --rate 360 -f": cmd,
                    "the same, --serial": [*cmd, "--serial"],
                    "floor: python -c 'import signals.plot, ubpe.cli.plot, matplotlib.figure'":
                        ["-c", "import signals.plot, ubpe.cli.plot, matplotlib.figure"]}
        first = run(cmd)[0]  # a first call: numba compiles and caches the kernels where cold
        load = os.getloadavg()[0]  # the default forks only below cpu_count - 0.5
        res: dict[str, list[tuple[float, float, str]]] = {k: [] for k in variants}
        for _ in range(repeat):  # interleaved, so that the machine's load hits all alike
            for k, args in variants.items():
                res[k].append(run(args))
        n_files = len(list(Path(tmp).glob("*.png")))
    print(f"\n## ubpe plot: {n_files} pictures of the ECG (108,000 samples), a fresh process per "
          f"call (a first call, {first:.2f} s, fills the numba cache where it is cold); "
          f"os.cpu_count() = {os.cpu_count()}, load average {load:.2f} before the runs "
          f"(the default draws in a forked child only below {(os.cpu_count() or 1) - 0.5}), "
          f"best and median of {repeat}\n")
    print("| command | wall s, best | wall s, median | CPU s (user+sys), best | "
          "'N picture(s) in X s' it prints, best |")
    print("|---|---|---|---|---|")
    for k, rows in res.items():
        inner = [float(r[2].rsplit(" in ", 1)[1].split()[0]) for r in rows if "picture(s) in" in r[2]]
        print(f"| `{k}` | {min(r[0] for r in rows):.2f} | "
              f"{statistics.median(r[0] for r in rows):.2f} | {min(r[1] for r in rows):.2f} | "
              f"{f'{min(inner):.2f}' if inner else '-'} |")
    print("\nTarget: under 3 s after the first call (the wall time of the first row).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = next((p for p in (ROOT.parent / "shared" / "data", ROOT.parent.parent / "shared" / "data")
                    if p.is_dir()), ROOT.parent / "shared" / "data")
    ap.add_argument("--data", type=Path, default=default)
    ap.add_argument("--only", nargs="*", default=["codec", "dask", "threads", "chronos", "plot"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not (args.data / "signals").is_dir():
        print(f"skipped: {args.data}/signals not found (pass --data)")
        return
    suites = {"codec": lambda: bench_codec(args.data, args.repeat),
              "dask": lambda: bench_dask(args.data), "threads": lambda: bench_threads(args.data),
              "chronos": lambda: bench_chronos(args.data),
              "plot": lambda: bench_plot(args.data, max(5, args.repeat))}
    for name in args.only:
        try:
            suites[name]()
        except ImportError as e:
            print(f"\n{name}: skipped, a peer or extra is missing ({e})")


if __name__ == "__main__":
    main()
