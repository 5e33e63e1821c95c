"""``ubpe aot build``: compile the kernels ahead of time (see :mod:`ubpe._jit`).

The build runs in a child process kept in JIT mode (``UBPE_AOT=0``):

1. a workload calls the command line and the Python API on the bundled data (the
   repository's ``examples/data`` and ``tests/data`` where they exist) and on
   synthetic signals of every integer and float dtype, so that numba records the
   argument types each kernel is called with;
2. for each kernel and each recorded signature, ``numba.pycc`` exports a thin wrapper
   that calls the kernel's dispatcher (so that the kernel keeps its own options:
   ``fastmath``, ``inline``) and releases the GIL while it runs (as numba's
   ``nogil=True``: :func:`_release_gil`), one extension module per source module; a
   module that does not compile is retried a kernel at a time, and what still fails is
   left to JIT;
3. the modules and a manifest (the exported names and argument types of every
   kernel, the SHA-256 of every source file of ``ubpe`` and ``signals`` but the
   command line's, and of each compiled module) are written to a temporary folder,
   which then replaces ``AOT_DIR``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from ._jit import AOT_DIR, MANIFEST, MANIFEST_FORMAT, MANIFEST_VERSION, PACKAGES, _sha256, _sources

ROOT = Path(__file__).resolve().parent.parent


def source_files() -> list[str]:
    """Every ``.py`` file of the kernel packages but the command line's (no kernel, and no
    constant of one, lives there), relative to their parent folder."""
    return sorted(str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                  if "cli" not in p.relative_to(ROOT).parts)


def build(out_dir: Path = AOT_DIR, *, small: bool = False, log: Any = None) -> dict:
    """Compile the kernels into ``out_dir`` (replaced whole at the end).

    Parameters
    ----------
    out_dir : path
        The folder of the compiled modules and their manifest.
    small : bool
        A short workload (two CSV round trips and one packet batch): the tests' build.
    log : callable, optional
        Called with the child's output (one string).

    Returns
    -------
    dict
        The manifest written (``kernels``, ``modules``, ``failed``, ``seconds``).

    Raises
    ------
    RuntimeError
        If the child process fails (its output is in the message).
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".aot-", dir=out_dir.parent))
    try:
        key = _sources_key()
        cache = _numba_cache(key, [AOT_DIR.parent, out_dir.parent])
        env = {**os.environ, "UBPE_AOT": "0", "NUMBA_CACHE_DIR": str(cache)}
        r = subprocess.run([sys.executable, "-m", "ubpe._aot_build", str(tmp)] + ["--small"] * small, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if log is not None:
            log(r.stdout.rstrip())
        if r.returncode != 0:
            raise RuntimeError(f"the kernel build failed:\n{r.stdout[-4000:]}")
        if _sources_key() != key:  # (its kernels may mix both versions: neither is kept)
            shutil.rmtree(cache, ignore_errors=True)
            raise RuntimeError("a source file changed during the kernel build: run it again")
        man = json.loads((tmp / MANIFEST).read_text())
        old = out_dir.with_name(out_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if out_dir.exists():
            out_dir.rename(old)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp made it 0700
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
        return man
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


CACHE = ".aot-cache"  # the build child's numba caches, beside the compiled kernels' folder


def _sources_key() -> str:
    """A hash of every source file's SHA-256 (:func:`source_files`)."""
    import hashlib
    return hashlib.sha256(json.dumps(_sources(source_files()), sort_keys=True).encode()).hexdigest()[:16]


def _numba_cache(key: str, parents: list[Path]) -> Path:
    """The numba cache of a build's child: ``CACHE/key`` in the first of ``parents`` that can
    hold it (the folder of the default compiled kernels first, so that the tests' builds
    reuse it); the caches of other sources there are removed. numba keys a cached kernel by
    its own file only: a kernel that inlines a function of another module kept its old code
    after an edit of that module, and the build exported it; a folder per version of the
    sources cannot hold such a kernel (a build whose sources change while it runs is
    refused, :func:`build`).

    Raises
    ------
    OSError
        Where none of ``parents`` can hold it."""
    err: OSError | None = None
    for parent in parents:
        root = parent / CACHE
        try:
            (root / key).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            err = e
            continue
        for old in root.iterdir():
            if old.name != key and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            elif old.name != key:
                old.unlink(missing_ok=True)
        return root / key
    assert err is not None
    raise err


def status(out_dir: Path = AOT_DIR) -> str:
    """One line: whether compiled kernels exist in ``out_dir`` and match the sources."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return f"no compiled kernels in {out_dir} (every process uses numba's JIT)"
    try:
        man = json.loads(path.read_text())
        if man.get("format") != MANIFEST_FORMAT or man.get("version") != MANIFEST_VERSION:
            return f"{out_dir}: a manifest of another format (ignored: run 'ubpe aot build')"
        n = sum(len(v) for v in man["kernels"].values())
        sources = _sources(list(man["sources"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return f"{out_dir}: a damaged manifest ({e!r}; ignored: run 'ubpe aot build')"
    if sources != man["sources"]:
        return f"{out_dir}: {n} signatures, built from other sources (ignored: run 'ubpe aot build')"
    import numpy as np
    if man.get("numpy") != np.__version__:
        return (f"{out_dir}: {n} signatures, built with numpy {man.get('numpy')}, not {np.__version__} "
                f"(ignored: run 'ubpe aot build')")
    return (f"{out_dir}: {len(man['kernels'])} kernels, {n} signatures, {len(man['modules'])} modules, "
            f"built in {man['seconds']:.0f} s with numba {man['numba']}")


# ---------------------------------------------------------------- the child process
def _data(name: str) -> Path | None:
    for folder in ("examples/data", "tests/data"):
        p = ROOT / folder / name
        if p.is_file():
            return p
    return None


def _synthetic(n: int = 6000):
    """Signals of the shapes the codec meets: smooth, noisy, periodic, sparse, constant."""
    import numpy as np
    rng = np.random.default_rng(7)
    t = np.arange(n)
    smooth = np.cumsum(rng.integers(-3, 4, n))
    wave = np.round(800 * np.sin(t / 17.0) + 200 * np.sin(t / 3.1) + rng.normal(0, 4, n)).astype(np.int64)
    rep = np.tile(np.r_[np.zeros(40, np.int64), rng.integers(0, 900, 60)], n // 100 + 1)[:n]
    steps = np.repeat(rng.integers(0, 60, n // 25 + 1), 25)[:n] * 10  # few distinct values, long runs
    spikes = np.where(rng.random(n) < 0.05, rng.integers(1000, 5000, n), 0)  # mostly zero
    return {"smooth": smooth, "wave": wave, "repeats": rep, "noise": rng.integers(-2 ** 20, 2 ** 20, n),
            "const": np.full(n, 5, np.int64), "steps": steps, "spikes": spikes}


def _workload(tmp: Path, small: bool = False) -> None:
    """Call every public path of the codec, the tokenizers and the command line (``small``:
    two CSV round trips at the default level, and packets against a model)."""
    import numpy as np
    from click.testing import CliRunner

    import signals
    from ubpe.cli import main as cli

    run = CliRunner().invoke

    def ubpe(*args: Any, may_refuse: bool = False) -> bool:
        """Run a command; whether it succeeded (a refusal of bad input is an error unless
        ``may_refuse``)."""
        r = run(cli, [str(a) for a in args], catch_exceptions=False)
        if r.exit_code != 0 and not (may_refuse and r.exit_code == 1):
            raise RuntimeError(f"ubpe {' '.join(map(str, args))}: {r.output}")
        return r.exit_code == 0

    csvs = [p for p in (_data("daphnet_accel.csv"), _data("mitbih208_ecg.csv"),
                        _data("pvlib_tmy3_723170_48h.csv"), _data("heartpy_ppg_300.csv"),
                        _data("seattle_temps_150.csv"), _data("seattle_weather_150.csv")) if p]
    syn = _synthetic()
    lines = ["t,a,b,c,d"] + [f"{i * 0.01:.2f},{syn['smooth'][i]},{syn['wave'][i] / 10:.1f},"
                             f"{syn['repeats'][i]},{syn['wave'][i] * 1e-3:.3f}"
                             for i in range(len(syn["wave"]))]
    (tmp / "syn.csv").write_text("\n".join(lines) + "\n")
    csvs.append(tmp / "syn.csv")
    from signals.files import compress_csv_stream, decompress_file_stream
    for src in csvs[-2:] if small else csvs:  # the Python API (the command line may differ)
        packed, text = io.BytesIO(), io.BytesIO()
        compress_csv_stream(io.BytesIO(src.read_bytes()), packed, path=src.name)
        decompress_file_stream(io.BytesIO(packed.getvalue()), text)
    if small:
        from signals.channel import decode_packets, encode_packets, fit_channel_model
        x = syn["wave"]
        cm = fit_channel_model([x[:4000]], packet_size=256)
        parts = [x[i:i + 256] for i in range(4000, len(x), 256)]
        decode_packets(encode_packets(parts, cm), [q.size for q in parts], cm)
        _own_tables_call(cm, x)
        _ranked_call()
        return
    for k, src in enumerate(csvs):
        for level in (0, 1, 3, 5, 6, 9) if k < 2 else (5,):
            if level == 9 and src.stat().st_size > 2e5:  # level 9 on a slice (its search is slow)
                cut = tmp / f"slice{k}.csv"
                cut.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:3000]))
                src = cut
            out, back = tmp / f"c{k}_{level}.ubpe", tmp / f"c{k}_{level}.csv"
            ubpe("compress", src, "-o", out, "--level", level, "-q", "-f")
            ubpe("decompress", out, "-o", back, "-q", "-f")
        ubpe("inspect", tmp / f"c{k}_5.ubpe")
    ubpe("compress", csvs[-1], "-o", tmp / "lossy.ubpe", "--max-error", "0.05", "-q", "-f")
    ubpe("decompress", tmp / "lossy.ubpe", "-o", tmp / "lossy.csv", "-q", "-f")
    wav = _data("speech_0880.wav")
    if wav:
        ubpe("compress", wav, "-o", tmp / "w.ubpe", "-q", "-f")
        ubpe("decompress", tmp / "w.ubpe", "-o", tmp / "w.wav", "-q", "-f")
    # models: build, encode/decode tokens, compress against the model, packets
    model = tmp / "m.ubpe.json"
    for src in csvs:  # packets of each file against its model (the last model serves below)
        ubpe("build", src, "-o", model, "-f", "-q")
        for size in (256, 1024):
            if ubpe("compress", src, "--model", model, "--packet-size", size, "-o", tmp / "p.ubpe", "-q",
                    "-f", may_refuse=True):  # refused: more channels than a packet holds
                ubpe("decompress", tmp / "p.ubpe", "--model", model, "-o", tmp / "p.npz", "-q", "-f")
    for method in ("merges", "shortest", "weighted"):
        ubpe("encode", model, src, "--method", method, "-o", tmp / "tok.npz", "-f", "-q")
    ubpe("decode", model, tmp / "tok.npz", "-o", tmp / "tok.csv", "-f", "-q")
    ubpe("compress", src, "--model", model, "-o", tmp / "mm.ubpe", "-q", "-f")
    ubpe("decompress", tmp / "mm.ubpe", "--model", model, "-o", tmp / "mm.csv", "-q", "-f")
    ubpe("compress", src, "--model", model, "--packet-size", 256, "-o", tmp / "pk.ubpe", "-q", "-f")
    ubpe("decompress", tmp / "pk.ubpe", "--model", model, "-o", tmp / "pk.csv", "-q", "-f")
    ubpe("inspect", model)
    # arrays of every dtype, whole and in packets
    for dt in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32",
               "float64"):
        for x in syn.values():
            a = x.astype(dt) if dt[0] != "f" else (x / 7).astype(dt)
            for level in (0, 5):
                blob = signals.compress(a, level=level)
                assert np.array_equal(signals.decompress(blob), a, equal_nan=True)
    from signals.channel import decode_packets, encode_packets, fit_channel_model
    for size in (256, 1024, 4096):
        for x in syn.values():
            n_fit = len(x) * 7 // 10
            cm = fit_channel_model([x[:n_fit]], packet_size=size)
            parts = [x[i:i + size] for i in range(n_fit, len(x), size)]
            got = decode_packets(encode_packets(parts, cm), [q.size for q in parts], cm)
            assert all(b is not None and np.array_equal(a, b) for a, b in zip(parts, got))
            _own_tables_call(cm, x)
    _ranked_call()
    m = signals.SignalModel()
    chans = [syn["smooth"], syn["wave"], syn["repeats"]]
    m.fit([c[:4000] for c in chans], names=["a", "b", "c"])
    pk = [np.stack([c[i:i + 256] for c in chans]) for i in range(4000, 6000, 256)]  # (3, 256)
    assert all(np.array_equal(a, b) for a, b in zip(pk, m.decompress_packets(m.compress_packets(pk))))
    buf = io.BytesIO()
    m.write_packet_stream(pk, buf)
    buf.seek(0)
    list(m.read_packet_stream(buf))
    m.decompress_packet(m.compress_packet(pk[0]))
    # the frozen files of every format version (version-1 decoders included)
    fixtures = ROOT / "tests" / "data"
    for fixture in [*sorted((fixtures / "frozen").glob("*.ubp*")), fixtures / "golden_v1.ubpe"]:
        if not fixture.is_file():
            continue
        if fixture.name.startswith("csv_stream"):
            decompress_file_stream(io.BytesIO(fixture.read_bytes()), io.BytesIO())
        elif fixture.suffix == ".ubps":
            list(signals.decompress_stream(io.BytesIO(fixture.read_bytes())))
        elif signals.inspect(fixture.read_bytes()).get("source") == "csv":
            signals.decompress_file(fixture.read_bytes())
        else:
            signals.decompress(fixture.read_bytes())
    # text: byte-level BPE
    for name in ("shakespeare_150k.txt", "mixed_scripts.txt"):
        p = _data(name)
        if p:
            tok = tmp / f"{name}.json"
            ubpe("text", "train", p, "--vocab-size", 600, "-o", tok, "-q")
            ubpe("text", "encode", tok, p, "--npy", tmp / f"{name}.npy")
            ubpe("text", "decode", tok, tmp / f"{name}.npy")


def _own_tables_call(cm: Any, x: Any) -> None:
    """The batch of a packet's own tables as ``encode_packets`` calls it (its packets are
    chosen by the model's hints and costs, which the workload's models may not meet)."""
    import numpy as np

    from signals.channel import _own_tables_many, _starts
    parts = [np.asarray(x[i:i + 1024], np.int64) for i in range(0, min(len(x), 4096), 1024)]
    _own_tables_many(np.concatenate(parts), _starts([p.size for p in parts]),
                     list(range(len(parts))), cm)


def _ranked_call() -> None:
    """Packets of values on a sparse grid against a model that keeps its ranked stage (payload
    mode 9), a damaged one among them."""
    import numpy as np

    from signals.channel import decode_packets, encode_packets, fit_channel_model
    k = np.cumsum(np.random.default_rng(3).integers(-3, 4, 12_000)) + 100
    x = np.round(9.8 * k).astype(np.int64)
    cm = fit_channel_model([x[:9000]], packet_size=256)
    parts = [x[i:i + 256] for i in range(9000, len(x), 256)]
    coded = encode_packets(parts, cm)
    decode_packets(coded + [coded[0][:-2]], [q.size for q in parts] + [256], cm, on_error="none")


def _spec(t: Any) -> list | None:
    """The argument type ``t`` (a numba type) as a manifest entry, or None if the checks
    of :func:`ubpe._jit._checker` cannot tell it."""
    import numpy as np
    from numba.core import types
    from numba.np.numpy_support import as_dtype
    if isinstance(t, types.Array):
        if not isinstance(t.dtype, (types.Integer, types.Float, types.Boolean)) or not t.aligned \
                or t.layout not in "CFA":
            return None
        return ["array", str(np.dtype(as_dtype(t.dtype))), t.ndim, t.layout, not t.mutable]
    if isinstance(t, types.BaseTuple) and not isinstance(t, types.NamedTuple):
        items = [_spec(x) for x in t.types]  # type: ignore[attr-defined]
        return None if any(x is None for x in items) else ["tuple", items]
    if isinstance(t, types.Boolean):
        return ["bool"]
    if isinstance(t, (types.Integer, types.Float)) and not isinstance(t, types.Literal):
        return [str(t)]
    return None


def _cache_unpickled_constants() -> None:
    """Make each compiled module unpickle its constants once, not on every call.

    numba's code for returning an array unpickles the array's Python type
    (``PythonAPI.unserialize``) on every call. In numba's JIT a memo makes that
    cheap; in a ``numba.pycc`` module it is a ``pickle.loads`` each time, about
    0.6 us a returned array. Here each such constant gets a module global,
    filled on first use; every use still returns a new reference, as before.
    Only the build's child process is patched.
    """
    from llvmlite import ir
    from numba.core import cgutils, pythonapi

    original = pythonapi.PythonAPI.unserialize

    def cached(self: Any, structptr: Any) -> Any:
        module = self.builder.module
        name = "_ubpe_unpickled_" + structptr.name.replace(".", "_")
        gv = module.globals.get(name)
        if gv is None:
            gv = ir.GlobalVariable(module, self.pyobj, name=name)
            gv.linkage = "internal"
            gv.initializer = ir.Constant(self.pyobj, None)
        with self.builder.if_then(cgutils.is_null(self.builder, self.builder.load(gv)), likely=False):
            self.builder.store(original(self, structptr), gv)
        obj = self.builder.load(gv)
        self.incref(obj)
        return obj

    pythonapi.PythonAPI.unserialize = cached  # type: ignore[method-assign]


def _release_gil() -> None:
    """Have ``numba.pycc`` export wrappers that release the GIL around the compiled call, as
    numba's JIT does for ``nogil=True`` (``numba.pycc`` has no such option: its exports are
    compiled with default ``Flags``, whose ``release_gil`` this sets)."""
    from numba.pycc import compiler

    class Flags(compiler.Flags):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True  # type: ignore[assignment]

    compiler.Flags = Flags  # type: ignore[misc]


def _child(tmp: Path, small: bool) -> None:
    t0 = time.time()
    warnings.simplefilter("ignore")
    import numba
    import numpy as np
    from numba.core import types
    from numba.core.typing import signature
    from numba.pycc import CC

    from . import _jit
    assert _jit.mode() == "jit"
    with tempfile.TemporaryDirectory() as work:
        _workload(Path(work), small)
    _cache_unpickled_constants()  # after the workload: JIT code keeps numba's own path
    _release_gil()
    print(f"workload: {time.time() - t0:.1f} s", flush=True)
    by_module: dict[str, list] = {}
    for d in _jit._REGISTRY:
        key = _jit._key(d.py_func)
        for sig in list(d.signatures):
            args = tuple(numba.typeof(a.value) if isinstance(a, types.Omitted) else a for a in sig)
            specs = [_spec(a) for a in args]
            if any(s is None for s in specs):
                continue
            d.compile(args)
            ret = d.overloads[args].signature.return_type
            by_module.setdefault(d.py_func.__module__, []).append((key, d, args, ret, specs))
    kernels: dict[str, list] = {}
    modules, failed = [], []

    def compile_group(mod_name: str, items: list) -> bool:
        cc = CC(mod_name)
        cc.output_dir = str(tmp)
        cc.target_cpu = "host"
        cc.verbose = False
        names = []
        for j, (key, d, args, ret, specs) in enumerate(items):
            name = f"{mod_name}__{d.py_func.__name__}__{j}"
            params = ", ".join(f"a{i}" for i in range(len(args)))
            ns: dict[str, Any] = {"K": d}
            exec(f"def wrapper({params}):\n    return K({params})\n", ns)
            cc.export(name, signature(ret, *args))(ns["wrapper"])
            names.append((key, name, specs))
        try:
            cc.compile()
        except Exception as e:  # numba's errors are many types: any of them leaves it to JIT
            print(f"{mod_name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            return False
        modules.append(mod_name)
        for key, name, specs in names:
            kernels.setdefault(key, []).append([name, specs])
        return True

    for mod, items in sorted(by_module.items()):
        base = "_k_" + mod.replace(".", "_")
        t1 = time.time()
        if not compile_group(base, items):
            for j, item in enumerate(items):
                if not compile_group(f"{base}_{j}", [item]):
                    failed.append(item[0])
        print(f"{mod}: {len(items)} signatures, {time.time() - t1:.1f} s", flush=True)
    man = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "numba": numba.__version__,
           "numpy": np.__version__, "python": sys.version.split()[0], "seconds": round(time.time() - t0, 1),
           "modules": modules, "kernels": kernels, "failed": sorted(set(failed)),
           "sources": _sources(source_files()),
           "files": {p.name: _sha256(p) for p in sorted(tmp.iterdir())}}
    (tmp / MANIFEST).write_text(json.dumps(man, indent=1))
    print(f"{sum(len(v) for v in kernels.values())} signatures of {len(kernels)} kernels in "
          f"{len(modules)} modules; {len(set(failed))} left to JIT; {man['seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), "--small" in sys.argv[2:])
