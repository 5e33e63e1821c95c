"""A longer fuzz campaign than the test run: the targets and rules of tests/test_fuzz.py.

Usage (from the repository root)::

    python bench/fuzz.py --mutations 100000            # spread over every target
    python bench/fuzz.py --targets container_forged --mutations 20000 --out fuzz-findings

Each target runs in worker processes, so that an abort (a C library killing
the process), a hang or an allocation beyond the cap is recorded with the
input that caused it instead of ending the campaign. A worker draws random
mutations (``tests/test_fuzz.py``: byte edits, or structured JSON edits with
the checksum recomputed for the ``*_forged`` targets) and checks every one:
the project's error or the original data, an allocation below the cap
(``tracemalloc``; and the process's RSS limited with ``RLIMIT_AS``), and no
other data without an error where a checksum covers the bytes.

Beyond the test targets, ``container_forged`` (a default-level container)
``cm_forged`` and ``cm_lpc_forged`` (the frozen context-mixing containers,
payload modes 6 and 7) edit
the body of one section of a ``.ubpe`` file and rewrite the section with
its new length and a valid CRC-32 (what a forger can do, issue 13 item
12): no crash and no allocation above the cap is allowed; wrong data is
(no checksum can stop a forger), and is counted as ``ok``. ``cm`` and
``cm_lpc`` mutate the same containers without forging; ``packet_vocab`` the
frozen packet of a model with a vocabulary stage (payload mode 8), and
``packet_vocab_forged`` the same with its check recomputed.

The test targets ``packet_batch`` and ``packet_batch_forged`` (``tests/test_fuzz.py``:
``edit_packets``) edit some packets of a batch of a four-channel model (payload modes 0, 1,
3, 4 and 8), or drop, repeat or swap whole packets; the forged one recomputes the checks
and also forges frames (sample counts near the decoders' bounds, payload boundaries, a
payload of another packet). Their loader checks each packet: an undamaged one decodes to
its data, a damaged one to its error (or, only where its check passes, other data of its
shape), in both error modes of ``SignalModel.decompress_packets`` and channel by channel
with ``signals.channel.decode_packets``. ``packet_stream`` mutates a packet stream
(``write_packet_stream``): a short stream must be an error.

Prints one line per target: mutations, outcomes, findings (new ones are
written to ``--out``), mutations per second, and how the workers' kernels ran
(``aot``: the compiled kernels alone, see ``ubpe/_jit.py``; ``jit``: numba's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import selectors
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this checkout's signals and ubpe, not an installed copy (the script's folder, not the
# working directory, heads sys.path); then the test targets
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

HEARTBEAT = 100  # mutations between progress lines
HANG_S = 60.0  # no progress for this long: the worker is killed, the input recorded


def _targets():
    import test_fuzz as F
    targets = {t.name: t for t in F.make_targets()}
    base = targets["container"]

    def forge_container(data: bytes, ops) -> bytes:
        """Mutate the body of one section (chosen by the first op) and rewrite that section
        with its new length and a valid CRC-32: only the decoder's own checks can refuse it."""
        from signals.container import MAGIC, write_section
        pos, spans = len(MAGIC) + 4, []
        while pos + 9 <= len(data):
            (length,) = struct.unpack_from("<I", data, pos + 1)
            spans.append((pos, pos + 5 + length + 4))
            pos += 9 + length
        if not spans:
            body = F.mutate(data[:-4], ops)
            return body + struct.pack("<I", zlib.crc32(body))
        a, b = spans[ops[0][1] % len(spans)]
        kind, body = data[a:a + 1], data[a + 5:b - 4]
        return data[:a] + write_section(kind, F.mutate(body, ops)) + data[b:]

    known = ((r"allocated \d+ MiB|MemoryError",
              "the header's zstd frame is inflated to its declared size (signals/codec.py; "
              "crafted/container_zstd_header_*.ubpe)"),)
    frozen = ROOT / "tests" / "data" / "frozen"
    cm = F.Target("cm", (frozen / "container_v2_cm.ubpe").read_bytes(), base.load, F._always)
    cm_lpc = F.Target("cm_lpc", (frozen / "container_v2_cm_lpc.ubpe").read_bytes(), base.load,
                      F._always)
    targets["cm"], targets["cm_lpc"] = cm, cm_lpc
    from signals import SignalModel

    def packet_targets(stage: str) -> None:
        """A frozen packet of a model with a vocabulary (mode 8) or ranked (mode 9) stage, as
        it is and with its check recomputed (seeded with the model id): a packet's 16-bit check
        is no guarantee, so only crashes and allocations count there."""
        model = SignalModel.load(frozen / f"signal_model_v3_{stage}.json")
        packet = (frozen / f"packet_v2_{stage}.bin").read_bytes()
        load_packet = lambda d: F._arrays(model.decompress_packet(d))  # noqa: E731
        name = f"packet_{stage}"
        targets[name] = F.Target(name, packet, load_packet, F._never)
        targets[name + "_forged"] = F.Target(name + "_forged", packet, load_packet, F._never)

        def forge_packet(data: bytes, ops) -> bytes:
            body = F.mutate(data[:-2], ops)
            seed = zlib.crc32(model.model_id())
            return body + struct.pack("<H", zlib.crc32(body, seed) & 0xFFFF)

        targets[name + "_forged"].forge_bytes = forge_packet  # type: ignore[attr-defined]
        # the batch decoder (decode_packets' kernels), beside the packet as it was coded
        load_batch = lambda d: F._arrays(model.decompress_packets([packet, d])[1])  # noqa: E731
        targets[name + "_batch"] = F.Target(name + "_batch", packet, load_batch, F._never)
        targets[name + "_batch"].forge_bytes = forge_packet  # type: ignore[attr-defined]

    packet_targets("vocab")
    packet_targets("ranked")
    # a container whose payload runs the adaptive cascade (a chirp in noise, as
    # tests/test_channel.py has the default level keep it): forged residuals through the
    # cascade's float path and its int64 fallback
    import numpy as np

    from signals import compress
    t = np.arange(20000)
    chirp = np.round(3000 * np.sin(2 * np.pi * (0.01 + 0.05 * t / t.size) * t)
                     + np.random.default_rng(0).normal(0, 20, t.size)).astype(np.int16)
    cascade = F.Target("cascade", compress(chirp), base.load, F._always)
    targets["cascade"] = cascade
    for name, t in (("container_forged", base), ("cm_forged", cm), ("cm_lpc_forged", cm_lpc),
                    ("cascade_forged", cascade)):
        targets[name] = F.Target(name, t.data, t.load, F._never, known=known)
        targets[name].forge_bytes = forge_container  # type: ignore[attr-defined]
    return F, targets


def _random_ops(rng: random.Random, F, forged: bool):
    if forged:
        kinds = ["replace", "replace", "drop", "grow", "shrink"]
        values = F.INTERESTING_VALUES + [rng.randint(-2**70, 2**70), rng.random() * 1e6,
                                         rng.randint(-3, 300)]
        return [(rng.choice(kinds), rng.randrange(2**32), rng.choice(values))
                for _ in range(rng.randint(1, 3))]
    payloads = F.INTERESTING_BYTES + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))]
    return [(rng.choice(F.BYTE_OPS), rng.randrange(2**32), rng.randrange(2**32),
             rng.choice(payloads)) for _ in range(rng.randint(1, 4))]


def worker(name: str, seed: int, count: int, scratch: Path) -> None:
    """Run ``count`` mutations of one target; JSON lines on stdout."""
    F, targets = _targets()
    target = targets[name]
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    vm = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + 4 * 2**30, hard))  # 4 GiB above now
    expected = target.load(target.data)
    rng = random.Random(seed)
    tracemalloc.start()
    counts = {"ok": 0, "error": 0, "known": 0}
    current = scratch / f"current-{os.getpid()}.bin"
    forge_bytes = getattr(target, "forge_bytes", None)
    for i in range(count):
        ops = _random_ops(rng, F, target.forged)
        if forge_bytes is not None:
            data = forge_bytes(target.data, ops)
        elif target.forged:
            data = F.forge(target.data, ops)
        else:
            data = F.mutate(target.data, ops)
        current.write_bytes(data)
        try:
            counts[F.check(target, data, expected)] += 1
        except F.Finding as e:
            import re
            if any(re.search(p, str(e)) for p, _ in target.known):
                counts["known"] += 1
            else:
                print(json.dumps({"finding": str(e)[:300], "input": data.hex()}), flush=True)
        if (i + 1) % HEARTBEAT == 0 or i + 1 == count:
            from ubpe import _jit
            print(json.dumps({"done": i + 1, **counts, "kernels": _jit.mode()}), flush=True)
    current.unlink(missing_ok=True)


def campaign(name: str, count: int, seed: int, out: Path, scratch: Path) -> dict:
    """Run one target in workers until ``count`` mutations are done; returns the tally."""
    tally = {"mutations": 0, "ok": 0, "error": 0, "known": 0, "findings": 0, "crashes": 0,
             "hangs": 0}
    seen = set()
    t0 = time.perf_counter()
    while tally["mutations"] < count:
        left = count - tally["mutations"]
        proc = subprocess.Popen([sys.executable, __file__, "--worker", name, "--seed", str(seed),
                                 "--mutations", str(left), "--scratch", str(scratch)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        seed += 1
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        last: dict = {"done": 0, "ok": 0, "error": 0, "known": 0}
        hung = False
        while True:
            if not sel.select(timeout=HANG_S):
                hung = True
                proc.kill()
                break
            line = proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            if "finding" in msg:
                key = msg["finding"].split(":")[1] if ":" in msg["finding"] else msg["finding"]
                tally["findings"] += 1
                if key not in seen:
                    seen.add(key)
                    _record(out, name, msg["finding"], bytes.fromhex(msg["input"]))
            else:
                last = msg
        proc.wait()
        sel.close()
        done = last["done"]
        for k in ("ok", "error", "known"):
            tally[k] += last[k]
        if "kernels" in last:  # how the worker's kernels ran (ubpe/_jit.py): jit if any did
            tally["kernels"] = "jit" if "jit" in (tally.get("kernels"), last["kernels"]) else "aot"
        tally["mutations"] += done
        current = scratch / f"current-{proc.pid}.bin"
        if proc.returncode != 0 or hung:
            kind = "hang" if hung else f"crash (exit status {proc.returncode})"
            tally["hangs" if hung else "crashes"] += 1
            tally["mutations"] += 1  # the input that killed it
            if current.exists():
                _record(out, name, kind, current.read_bytes())
        current.unlink(missing_ok=True)
    tally["seconds"] = time.perf_counter() - t0
    return tally


def _record(out: Path, name: str, what: str, data: bytes) -> None:
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()[:12]
    (out / f"{name}-{digest}.bin").write_bytes(data)
    with open(out / "findings.txt", "a") as f:
        f.write(f"{name}-{digest}.bin\t{what}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mutations", type=int, default=100_000,
                    help="mutations in all, spread evenly over the targets")
    ap.add_argument("--targets", help="comma-separated target names (default: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / ".cache" / "fuzz",
                    help="folder for the inputs of new findings")
    ap.add_argument("--results", type=Path,
                    help="also write the table as Markdown here (e.g. bench/FUZZ_RESULTS.md)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    scratch = args.scratch or Path("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp")
    if args.worker:
        worker(args.worker, args.seed, args.mutations, scratch)
        return
    _, targets = _targets()
    names = args.targets.split(",") if args.targets else list(targets)
    unknown = set(names) - set(targets)
    if unknown:
        sys.exit(f"unknown targets {sorted(unknown)}; known: {', '.join(targets)}")
    per = -(-args.mutations // len(names))
    total = {"mutations": 0, "findings": 0, "crashes": 0, "hangs": 0, "known": 0}
    print(f"{'target':<24} {'mutations':>9} {'ok':>7} {'error':>7} {'known':>6} {'findings':>8} "
          f"{'crashes':>7} {'hangs':>5} {'per s':>7} kernels")
    rows = []
    t_start = time.perf_counter()
    for i, name in enumerate(names):
        t = campaign(name, per, args.seed + 1000 * i, args.out, scratch)
        for k in total:
            total[k] += t[k]
        rows.append((name, t))
        print(f"{name:<24} {t['mutations']:>9,} {t['ok']:>7,} {t['error']:>7,} {t['known']:>6,} "
              f"{t['findings']:>8,} {t['crashes']:>7,} {t['hangs']:>5,} "
              f"{t['mutations'] / t['seconds']:>7,.0f} {t.get('kernels', '?')}", flush=True)
    summary = (f"{total['mutations']:,} mutations, {total['findings']:,} findings, "
               f"{total['crashes']:,} crashes, {total['hangs']:,} hangs, {total['known']:,} hits "
               f"of known findings")
    print(f"total: {summary} (inputs of new findings in {args.out})")
    if args.results:
        lines = ["# Fuzz campaign", "",
                 f"`python bench/fuzz.py --mutations {args.mutations} --seed {args.seed}`, "
                 f"{time.strftime('%Y-%m-%d')}, {time.perf_counter() - t_start:.0f} s: {summary}.",
                 "",
                 "ok: decoded (to the original data where a checksum covers the bytes); error: "
                 "the project's error; known: a finding already in tests/data/crafted "
                 "(xfail there); findings: a new crash, allocation above the cap or silent "
                 "wrong data, input saved.", "",
                 "| target | mutations | ok | error | known | findings | crashes | hangs | kernels |",
                 "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {n} | {t['mutations']:,} | {t['ok']:,} | {t['error']:,} | {t['known']:,} "
                  f"| {t['findings']:,} | {t['crashes']:,} | {t['hangs']:,} | {t.get('kernels', '?')} |"
                  for n, t in rows]
        args.results.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
