"""Short packets against a trained channel model (issue 15, per channel).

    .venv/bin/python bench/packets.py [--data ../shared/data] [--sizes 256 1024 4096]
                                      [--only ECG ...] [--no-slow]

For every dev signal (bench/datasets.py): train ``fit_channel_model`` (tuned
for the packet size; model bytes = its JSON config, all channels) on the
first 70% (of the recordings where the set has several, else of the
samples), then code the other 30% in independent packets of each size.
Per packet we count the payload plus a varint of its sample count (the
container's CRC and framing are not counted here; say so when comparing).
Peers on the same packets, in the same run: pcodec 8 and 12 (standalone
format, its header included), FLAC (soundfile, level 8), WavPack ``-hhx6``
(CLI, per packet; ``--no-slow`` skips it) and zstd -19 with a dictionary
trained (``zstandard.train_dictionary``) on the same 70%, cut in packets.
Printed: bits/sample, ratio against the best peer, and speeds in M samples/s
(ours: ``encode_packets``/``decode_packets``, all packets of a channel in one
call; pcodec: one call per packet, as its API takes them), each the fastest
of ``--repeat`` runs (default 5) after a warm-up, one core, ours and pcodec 8
in turn in each round (a slow phase of the machine slows both alike); "c/d
vs pcodec 8" is our speed over pcodec's (above 1: faster). "SignalModel packets": the
loaded model file's ``compress_packets``/``decompress_packets``, every
channel in each packet (where the channels' test parts have one length).

Model load time: the channel models are put, as they are, in the codec part
of a ``SignalModel`` file (its tokenizer part the least there is: 256 levels,
no merges), and ``SignalModel.load`` of that file is timed, median of 5
(after one load that warms the imports), alone and with the coder's tables
built (``ChannelModel.tables()``, which the first packet would otherwise
build); its file bytes are printed beside the model's own bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.datasets import DEFAULT_DATA, load_all  # noqa: E402
from bench.peers import int_width, wavpack_peer  # noqa: E402
from signals.channel import (  # noqa: E402
    decode_packets,
    encode_channel,
    encode_packets,
    fit_channel_model,
)


def split(ds):
    """(train list, test 1-D array) per channel."""
    out = []
    for ci, c in enumerate(ds.channels):
        recs = ds.recordings[ci] if ds.recordings else None
        if recs and len(recs) >= 4:
            k = int(round(0.7 * len(recs)))
            out.append((recs[:k], np.concatenate(recs[k:])))
        else:
            k = int(0.7 * c.size)
            out.append(([c[:k]], c[k:]))
    return out


def packets_of(x, size):
    return [x[i:i + size] for i in range(0, x.size, size)]


def varint_len(n):
    return max(1, (int(n).bit_length() + 6) // 7)


def timed(fn, repeat: int = 5):
    """(result, seconds): the fastest of ``repeat`` runs after a warm-up."""
    (out, best), = timed_together([fn], repeat)
    return out, best


def timed_together(fns, repeat: int = 5):
    """[(result, seconds)] of each of ``fns``: the fastest of ``repeat`` runs after a warm-up,
    the functions run in turn in each round (so that a slow phase of the machine, which here
    lasts seconds, slows them alike and their speed ratio holds)."""
    outs = [fn() for fn in fns]  # warm-up
    best = [float("inf")] * len(fns)
    for _ in range(max(1, repeat)):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            outs[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return list(zip(outs, best))


def load_time(parts, models, repeat: int = 5) -> tuple[int, float, float, object]:
    """(file bytes, median seconds of ``SignalModel.load``, the same with the coder's tables
    built, as the first packet builds them, the loaded model) of a model file holding
    ``models``."""
    from signals import SignalModel
    train = [np.concatenate(tr) for tr, _ in parts]
    sm = SignalModel(256, 256, codec=False, progress=False).fit(train)
    # the codec part: the channel models fitted above, under the mapping SignalModel.fit
    # gives integer channels ("int", step 1: the packets are coded as they are)
    sm.codec_ = {name: {"dtype": t.dtype.str, "map": {"kind": "int", "step": 1}, "model": m}
                 for name, t, m in zip(sm.channel_names_, train, models)}
    sm.codec_report_ = [{"name": name, "bits_own": None, "bits_model": None, "kept": True,
                         "reason": "bench/packets.py"} for name in sm.channel_names_]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.json"
        sm.save(path)
        back = SignalModel.load(path)  # warm-up; and the models come back as they were
        assert all(back.codec_[n]["model"].get_config() == m.get_config()
                   for n, m in zip(sm.channel_names_, models))
        times, ready = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            back = SignalModel.load(path)
            times.append(time.perf_counter() - t)
            for e in back.codec_.values():
                e["model"].tables()
            ready.append(time.perf_counter() - t)
        return path.stat().st_size, statistics.median(times), statistics.median(ready), back


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-slow", action="store_true")
    ap.add_argument("--repeat", type=int, default=5,
                    help="timed runs per measure (after a warm-up); the fastest is kept")
    args = ap.parse_args(argv)
    import pcodec
    import zstandard
    try:
        import soundfile as sf
    except ImportError:
        sf = None
        print("[packets] soundfile missing: FLAC skipped", file=sys.stderr)
    sets = load_all(args.data, args.only)
    head = ["file", "packet", "ours (model)", "ours (no model)", "pcodec 8", "pcodec 12", "FLAC",
            "WavPack", "zstd+dict", "best peer", "ratio", "ours MS/s c/d",
            "SignalModel packets MS/s c/d", "pcodec 8 MS/s c/d", "c/d vs pcodec 8",
            "model bytes", "model file bytes", "load / with tables (median of 5)", "fit s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ratios = {s: [] for s in args.sizes}
    for name, ds in sets.items():
        parts = split(ds)
        for size in args.sizes:
            t0 = time.perf_counter()
            models = [fit_channel_model(tr, packet_size=size) for tr, _ in parts]
            fit_s = time.perf_counter() - t0
            model_bytes = sum(len(json.dumps(m.get_config())) for m in models)
            file_bytes, load_s, ready_s, loaded = load_time(parts, models)
            tot = {k: 0 for k in ("model", "plain", "p8", "p12", "flac", "wv", "zd")}
            n = 0
            t_ours = [0.0, 0.0]
            t_pc = [0.0, 0.0]
            for (train, test), m in zip(parts, models):
                pk = packets_of(test, size)
                n += test.size
                over = sum(varint_len(p.size) for p in pk)
                w = int_width([test] + train)
                arrs = [p.astype(f"int{8 * w}") for p in pk]
                cfg8 = pcodec.ChunkConfig(compression_level=8)
                ns = [p.size for p in pk]
                # ours and pcodec 8 in turn (their speed ratio is printed)
                (blobs, te), (cb, pe) = timed_together(
                    [lambda: encode_packets(pk, m),
                     lambda: [pcodec.standalone.simple_compress(a, cfg8) for a in arrs]],
                    args.repeat)
                (back, td), (_, pd) = timed_together(
                    [lambda: decode_packets(blobs, ns, m),
                     lambda: [pcodec.standalone.simple_decompress(b) for b in cb]], args.repeat)
                assert all(np.array_equal(a, b) for a, b in zip(pk, back))
                t_ours[0] += te
                t_ours[1] += td
                t_pc[0] += pe
                t_pc[1] += pd
                tot["model"] += sum(map(len, blobs)) + over
                tot["plain"] += sum(len(encode_channel(p)) for p in pk) + over
                tot["p8"] += sum(map(len, cb))
                cfg12 = pcodec.ChunkConfig(compression_level=12)
                tot["p12"] += sum(len(pcodec.standalone.simple_compress(a, cfg12)) for a in arrs)
                if sf is not None and w <= 4:
                    for a in arrs:
                        buf = io.BytesIO()
                        sf.write(buf, a.astype(np.int16 if w == 2 else np.int32), 8000, format="FLAC",
                                 subtype="PCM_16" if w == 2 else "PCM_24", compression_level=1.0)
                        tot["flac"] += len(buf.getvalue())
                else:
                    tot["flac"] = None
                if not args.no_slow and size <= 1024 and tot["wv"] is not None:
                    r = wavpack_peer(pk, 8000)
                    tot["wv"] = None if r is None else tot["wv"] + r.n_bytes
                elif args.no_slow or size > 1024:
                    tot["wv"] = None
                trp = [p.astype(f"<i{w}").tobytes() for t in train for p in packets_of(t, size)]
                try:
                    d = zstandard.train_dictionary(16384, trp)
                    zc = zstandard.ZstdCompressor(level=19, dict_data=d)
                    tot["zd"] += sum(len(zc.compress(a.astype(f"<i{w}").tobytes())) for a in arrs)
                except zstandard.ZstdError:
                    tot["zd"] = None
            sm_speed = "-"
            tests = [test for _, test in parts]
            if len({t.size for t in tests}) == 1:  # the loaded SignalModel, all channels a packet
                xs = np.stack(tests) if len(tests) > 1 else tests[0]
                pk2 = [xs[..., i:i + size] for i in range(0, xs.shape[-1], size)]
                blobs, te = timed(lambda: loaded.compress_packets(pk2), args.repeat)
                back, td = timed(lambda: loaded.decompress_packets(blobs), args.repeat)
                assert all(np.array_equal(a, b) for a, b in zip(pk2, back))
                sm_speed = f"{xs.size / te / 1e6:.1f} / {xs.size / td / 1e6:.1f}"
            bits = {k: (8 * v / n if v is not None else None) for k, v in tot.items()}
            peers = [bits[k] for k in ("p8", "p12", "flac", "wv", "zd") if bits[k] is not None]
            best = min(peers)
            ratios[size].append(bits["model"] / best)
            f = lambda v: "-" if v is None else f"{v:.3f}"
            print("| " + " | ".join([
                name, str(size), f(bits["model"]), f(bits["plain"]), f(bits["p8"]), f(bits["p12"]),
                f(bits["flac"]), f(bits["wv"]), f(bits["zd"]), f(best), f"{bits['model'] / best:.3f}",
                f"{n / t_ours[0] / 1e6:.1f} / {n / t_ours[1] / 1e6:.1f}", sm_speed,
                f"{n / t_pc[0] / 1e6:.1f} / {n / t_pc[1] / 1e6:.1f}",
                f"{t_pc[0] / t_ours[0]:.2f}x / {t_pc[1] / t_ours[1]:.2f}x", str(model_bytes),
                str(file_bytes), f"{load_s * 1e3:.1f} / {ready_s * 1e3:.1f} ms",
                f"{fit_s:.2f}"]) + " |", flush=True)
    for s in args.sizes:
        if ratios[s]:
            print(f"packets of {s}: mean ratio to the best peer {np.mean(ratios[s]):.3f}, "
                  f"worst {max(ratios[s]):.3f}")
    from ubpe import _jit
    print(f"kernels: {_jit.mode()}" + (f" ({_jit.jit_reason()})" if _jit.jit_reason() else ""))


if __name__ == "__main__":
    main()
