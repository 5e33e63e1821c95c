"""Kernels compiled ahead of time (ubpe/_jit.py, ubpe/_aot_build.py): the argument checks
that stand between a Python call and compiled code that trusts its types, and a process
served by the compiled kernels (no numba imported) against one in numba's JIT."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ubpe import _jit

ROOT = Path(__file__).resolve().parent.parent


def check(spec):
    return _jit._checker(spec)


def test_array_check_takes_exactly_its_type():
    c = check([["array", "int64", 1, "C", False]])
    a = np.arange(6, dtype=np.int64)
    assert c((a,))
    assert c((a.astype("<i8"),))
    assert not c((a.astype(np.int32),))  # other dtype: compiled code would misread it
    assert not c((a.astype(np.uint64),))
    assert not c((a.astype(">i8"),))  # other byte order
    assert not c((a[::2],))  # not contiguous
    assert not c((a.reshape(2, 3),))  # other ndim
    assert not c((np.frombuffer(a.tobytes(), np.int64),))  # read-only: the kernel may write
    assert not c((list(a),))
    assert not c((a, a))  # argument count
    unaligned = np.frombuffer(bytearray(8 * 6 + 1), np.uint8)[1:].view(np.int64)
    assert not unaligned.flags.aligned and not c((unaligned,))


def test_layouts_and_read_only_arrays():
    any_layout = check([["array", "float64", 2, "A", True]])
    m = np.zeros((4, 6))
    assert any_layout((m,)) and any_layout((m[:, ::2],)) and any_layout((m.T,))
    ro = np.frombuffer(m.tobytes()).reshape(4, 6)
    assert any_layout((ro,))  # a read-only signature takes both
    f = check([["array", "float64", 2, "F", False]])
    assert f((np.asfortranarray(m),)) and not f((m,))


def test_scalar_checks():
    i = check([["int64"]])
    assert i((3,)) and i((np.int64(3),)) and i((-(2 ** 63),)) and i((2 ** 63 - 1,))
    assert not i((2 ** 63,)) and not i((True,)) and not i((3.0,)) and not i((np.int32(3),))
    b = check([["bool"]])
    assert b((True,)) and b((np.bool_(False),)) and not b((1,))
    f = check([["float64"]])
    assert f((1.5,)) and f((np.float64(1),)) and not f((1,)) and not f((np.float32(1),))
    u = check([["uint64"]])
    assert u((np.uint64(5),)) and not u((5,))


DTYPES = ["int8", "uint8", "int16", "int32", "int64", "uint64", "float32", "float64", "bool", ">i8"]


@st.composite
def arrays_any_kind(draw):
    """Arrays of every dtype, ndim 0-3, and of every layout and flag a kernel may be given."""
    dt = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(1, 4), max_size=3)))
    a = np.zeros(shape, dt)
    kind = draw(st.sampled_from(["plain", "fortran", "strided", "readonly", "unaligned"]))
    if kind == "fortran":
        a = np.asfortranarray(a)
    elif kind == "strided" and a.ndim:
        a = np.zeros(shape[:-1] + (2 * shape[-1],), dt)[..., ::2]
    elif kind == "readonly":
        a.flags.writeable = False
    elif kind == "unaligned" and a.itemsize > 1:
        raw = np.zeros(a.size * a.itemsize + 1, np.uint8)[1:]
        a = raw.view(dt).reshape(shape)
    return a


SPEC_ARGS = ["int64[::1]", "int64[:, ::1]", "float64[::1]", "uint8[::1]", "int64[:]", "float64[:, :]",
             "int64[::1, :]", "bool[::1]", "int32[::1]"]


@settings(max_examples=400, deadline=None)
@given(arrays_any_kind(), st.sampled_from(SPEC_ARGS), st.booleans())
def test_array_check_agrees_with_numba(a, sig, readonly):
    """The check takes an array exactly where the compiled signature can read it safely: the
    same native dtype and ndim, aligned, contiguous as its layout says ('A': any), writable
    unless the signature is read-only; and it takes every array that numba's own typeof
    gives the signature's type."""
    numba = pytest.importorskip("numba")
    from ubpe._aot_build import _spec
    t = numba.core.sigutils._parse_signature_string(sig)
    if readonly:
        t = t.copy(readonly=True)
    spec = _spec(t)
    got = check([spec])((a,))
    from numba.np.numpy_support import as_dtype
    safe = (a.dtype.isnative and a.dtype == as_dtype(t.dtype) and a.ndim == t.ndim and a.flags.aligned
            and (t.layout == "A" or (t.layout == "C" and a.flags.c_contiguous)
                 or (t.layout == "F" and a.flags.f_contiguous))
            and (not t.mutable or a.flags.writeable))
    assert got == safe, (a.dtype, a.shape, a.strides, a.flags, sig, readonly)
    try:
        at = numba.typeof(a)
    except numba.core.errors.NumbaError:  # a non-native byte order: numba has no type for it
        return
    if at == t and a.flags.aligned:  # (numba types an unaligned array as aligned; the check
        assert got  # refuses it) what numba itself would dispatch to that signature is taken


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.booleans(), st.floats(allow_nan=True),
                 st.sampled_from([np.int64(3), np.int32(3), np.uint64(3), np.float64(1), np.float32(1),
                                  np.bool_(True), None, "1", (1,)])),
       st.sampled_from(["int64", "float64", "bool", "uint64", "int32"]))
@example(2 ** 63, "uint64")
@example(2 ** 64 - 1, "uint64")
@example(2 ** 63, "int64")
@example(-(2 ** 63), "int64")
def test_scalar_check_agrees_with_numba(x, kind):
    """A scalar is taken exactly where numba's typeof gives the signature's type."""
    numba = pytest.importorskip("numba")
    try:
        tx = numba.typeof(x)
    except (ValueError, numba.core.errors.NumbaError):
        tx = None
    want = {"int64": numba.int64, "float64": numba.float64, "bool": numba.boolean,
            "uint64": numba.uint64, "int32": numba.int32}[kind]
    assert check([[kind]])((x,)) == (tx == want)


def test_tuple_check():
    c = check([["tuple", [["array", "int32", 1, "C", False], ["int64"], ["tuple", [["bool"]]]]]])
    a = np.zeros(3, np.int32)
    assert c(((a, 4, (True,)),))
    assert not c(([a, 4, (True,)],)) and not c(((a, 4),)) and not c(((a, 4, (1,)),))
    assert not c(((a.astype(np.int64), 4, (True,)),))


def test_a_bound_kernel_checks_its_fixed_arguments_once():
    """bind: the fixed (last) arguments are matched against the compiled signatures at the
    first call; each call then checks its own arguments alone, and calls the variant that
    matches them all (a kernel of two compiled signatures, as Python stand-ins)."""
    def kernel(a, b, c):  # (never run here: the variants stand in for compiled code)
        raise AssertionError
    k = _jit.Kernel(kernel, {})
    i64 = ["array", "int64", 1, "C", False]
    k._specs = [[i64, i64, ["float64"]], [["array", "int32", 1, "C", False], i64, ["int64"]]]
    k._variants = [(check(s), lambda *a, j=j: (j, a)) for j, s in enumerate(k._specs)]
    tail = (np.arange(3, dtype=np.int64), 2.0)
    bound = _jit.bind(k, *tail)
    head = np.zeros(4, np.int64)
    assert bound(head) == (0, (head, *tail))
    assert len(bound.variants) == 1  # (the second signature's last argument is an int64)
    assert not bound.variants[0][0]((np.zeros(4, np.int32),))  # the head's check alone
    other = _jit.bind(k, np.arange(3, dtype=np.int64), 5)  # the second variant's tail
    i32 = np.zeros(2, np.int32)
    assert other(i32) == (1, (i32, *other.tail))
    assert len(other.variants) == 1


def test_a_bound_kernel_in_jit_is_the_kernel_with_its_arguments():
    calls = []
    bound = _jit.bind(lambda *a: calls.append(a) or len(a), 7, 8)
    assert bound(1, 2) == 4 and calls == [(1, 2, 7, 8)]


def run_py(code: str, env: dict) -> str:
    """``code`` run in a fresh process, with ``env`` over this process's environment (less
    ``UBPE_AOT``: a test that wants JIT says so in ``env``); its stdout."""
    base = {k: v for k, v in os.environ.items() if k != "UBPE_AOT"}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


ROUND_TRIP = """
import io, sys, hashlib
import numpy as np
from signals.files import compress_csv_stream, decompress_file_stream
from signals.channel import decode_packets, encode_packets, fit_channel_model
from ubpe import _jit
data = open("tests/data/seattle_weather_150.csv", "rb").read()
out = io.BytesIO()
compress_csv_stream(io.BytesIO(data), out, path="w.csv")
back = io.BytesIO()
decompress_file_stream(io.BytesIO(out.getvalue()), back)
assert back.getvalue() == data
x = np.round(300 * np.sin(np.arange(6000) / 9.0)).astype(np.int64) + np.arange(6000) % 7
cm = fit_channel_model([x[:4000]], packet_size=256)
parts = [x[i:i + 256] for i in range(4000, 6000, 256)]
blobs = encode_packets(parts, cm)
assert all(np.array_equal(a, b) for a, b in zip(parts, decode_packets(blobs, [q.size for q in parts], cm)))
h = hashlib.sha256(out.getvalue() + b"".join(blobs)).hexdigest()
print(_jit.mode(), "numba" in sys.modules, h, _jit.jit_reason())
"""

WRONG_TYPE = """
import sys
import numpy as np
from signals import channel
from ubpe import _jit
x = np.array([12, -3, 7, 1000, -2 ** 40, 5], np.int64)[::2]  # not contiguous: no compiled signature
want = [24, 14, 2 ** 41 - 1]
got = channel._zigzag_u64(x)
print(_jit.mode(), "numba" in sys.modules, got.tolist() == want, _jit.jit_reason())
"""


BOUND_WRONG_TYPE = """
import sys
import numpy as np
from signals.channel import decode_packets, encode_packets, fit_channel_model
from ubpe import _jit
x = np.round(300 * np.sin(np.arange(3000) / 9.0)).astype(np.int64)
cm = fit_channel_model([x[:2000]], packet_size=256)
parts = [x[i:i + 256] for i in range(2000, 3000, 256)]
blobs = encode_packets(parts, cm)
ok = all(np.array_equal(a, b) for a, b in zip(parts, decode_packets(blobs, [q.size for q in parts], cm)))
before = _jit.mode()
buf = np.frombuffer(b"".join(blobs), np.uint8)
off = np.cumsum([0] + [len(b) for b in blobs])
ns = np.array([q.size for q in parts], np.int32)  # int32 counts: no compiled signature
got = cm.batch_kernels()[1](buf, off, ns)[0]
print(before, _jit.mode(), "numba" in sys.modules, ok and np.array_equal(got, x[2000:]))
"""


@pytest.fixture(scope="module")
def aot_dir(tmp_path_factory):
    from ubpe._aot_build import build
    out = tmp_path_factory.mktemp("aot") / "kernels"
    man = build(out, small=True)
    assert man["kernels"] and not man["failed"]
    return out


@pytest.mark.slow
def test_compiled_kernels_give_the_same_bytes_without_numba(aot_dir):
    aot = run_py(ROUND_TRIP, {"UBPE_AOT_DIR": str(aot_dir)}).split()
    jit = run_py(ROUND_TRIP, {"UBPE_AOT_DIR": str(aot_dir), "UBPE_AOT": "0"}).split()
    assert aot[:2] == ["aot", "False"]  # every call served by compiled code, numba never imported
    assert jit[:2] == ["jit", "True"]
    assert aot[2] == jit[2]


@pytest.mark.slow
def test_an_uncovered_call_switches_the_process_to_jit(aot_dir):
    man = json.loads((aot_dir / _jit.MANIFEST).read_text())
    assert "signals.channel:_zigzag_u64" in man["kernels"]
    out = run_py(WRONG_TYPE, {"UBPE_AOT_DIR": str(aot_dir)}).split(maxsplit=3)
    assert out[:3] == ["jit", "True", "True"]
    assert "_zigzag_u64" in out[3]


@pytest.mark.slow
def test_a_bound_kernel_called_with_uncovered_types_switches_to_jit(aot_dir):
    """A model's bound batch decoder (ChannelModel.batch_kernels) runs compiled; called with
    arguments of a type no compiled signature takes, it switches the process to JIT, as an
    unbound call does, and still decodes."""
    out = run_py(BOUND_WRONG_TYPE, {"UBPE_AOT_DIR": str(aot_dir)}).split()
    assert out == ["aot", "jit", "True", "True"]


GIL = """
import sys, threading, time
import numpy as np
from ubpe import _jit
import signals.channel as C
x = np.arange(40_000_000, dtype=np.int64)
C._zigzag_u64(x[:8])  # loaded
started, span, stamps = threading.Event(), [], []
def run():
    started.set()
    t0 = time.perf_counter()
    C._zigzag_u64(x)
    span.extend([t0, time.perf_counter()])
t = threading.Thread(target=run)
t.start()
started.wait()
while t.is_alive():
    stamps.append(time.perf_counter())
t.join()
inside = [s for s in stamps if span[0] < s < span[1]]
print(_jit.mode(), "numba" in sys.modules, (inside[-1] - inside[0]) / (span[1] - span[0]) if inside else 0)
"""


@pytest.mark.slow
def test_compiled_kernels_release_the_gil(aot_dir):
    """A thread inside a compiled kernel lets the others run Python (so a thread pool runs
    kernels in parallel, in AOT as in JIT); the process stays on compiled code."""
    out = run_py(GIL, {"UBPE_AOT_DIR": str(aot_dir)}).split()
    assert out[:2] == ["aot", "False"]
    # this thread ran through most of the kernel's call (holding the GIL, the kernel would
    # leave it one switch interval, 5 ms, at most)
    assert float(out[2]) > 0.5


@pytest.mark.slow
def test_stale_damaged_or_foreign_builds_are_ignored(aot_dir, tmp_path):
    import shutil
    stale = tmp_path / "stale"
    shutil.copytree(aot_dir, stale)
    man = json.loads((stale / _jit.MANIFEST).read_text())
    first = next(iter(man["sources"]))
    man["sources"][first] = "0" * 64  # as if that source file had changed since the build
    (stale / _jit.MANIFEST).write_text(json.dumps(man))
    out = run_py(ROUND_TRIP, {"UBPE_AOT_DIR": str(stale)}).split()
    assert out[:2] == ["jit", "True"]
    damaged = tmp_path / "damaged"
    shutil.copytree(aot_dir, damaged)
    so = next(damaged.glob("_k_signals_channel.*"))  # (a module is checked where first used)
    raw = bytearray(so.read_bytes())
    raw[-1] ^= 0xFF
    so.write_bytes(bytes(raw))
    out = run_py(ROUND_TRIP, {"UBPE_AOT_DIR": str(damaged)}).split()
    assert out[:2] == ["jit", "True"]
    other = tmp_path / "other_numpy"
    shutil.copytree(aot_dir, other)
    man = json.loads((other / _jit.MANIFEST).read_text())
    man["numpy"] = "1.0.0"  # built against another numpy's headers
    (other / _jit.MANIFEST).write_text(json.dumps(man))
    out = run_py(ROUND_TRIP, {"UBPE_AOT_DIR": str(other)}).split(maxsplit=3)
    assert out[:2] == ["jit", "True"] and "numpy 1.0.0" in out[3]


COMMAND_LINE = """
import sys, tempfile
from pathlib import Path
from click.testing import CliRunner
from ubpe.cli import main
from ubpe import _jit
tmp = Path(tempfile.mkdtemp())
D = Path("tests/data")
def ubpe(*args):
    r = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert r.exit_code == 0, (args, r.output)
for name in ("seattle_weather_150.csv", "pvlib_tmy3_723170_48h.csv", "daphnet_accel_150.csv",
             "heartpy_ppg_300.csv", "mitbih208_ecg_4k.npz", "speech_0880.wav"):
    ubpe("compress", D / name, "-o", tmp / "x.ubpe", "-q", "-f")
    ubpe("decompress", tmp / "x.ubpe", "-o", tmp / ("back_" + name), "-q", "-f")
ubpe("build", D / "daphnet_accel_150.csv", "-o", tmp / "m.json", "-q")
ubpe("encode", tmp / "m.json", D / "daphnet_accel_150.csv", "-o", tmp / "t.npz", "-q")
ubpe("decode", tmp / "m.json", tmp / "t.npz", "-o", tmp / "t.csv", "-q")
ubpe("compress", D / "daphnet_accel_150.csv", "--model", tmp / "m.json", "--packet-size", 256,
     "-o", tmp / "p.ubpe", "-q")
ubpe("decompress", tmp / "p.ubpe", "--model", tmp / "m.json", "-o", tmp / "p.npz", "-q")
ubpe("text", "train", D / "shakespeare_150k.txt", "--vocab-size", 400, "--workers", 2, "-o", tmp / "tok.json",
     "-q")  # (in threads: compiled kernels release the GIL)
ubpe("text", "encode", tmp / "tok.json", D / "kjv_150k.txt", "--npy", tmp / "ids.npy")
print(_jit.mode(), "numba" in sys.modules, _jit.jit_reason())
"""


@pytest.mark.slow
def test_the_build_covers_the_command_line():
    """With this checkout's build (README's first command makes it), the command line's usual
    paths run on compiled kernels alone: a kernel or a path added without the build's workload
    reaching it shows up here."""
    from ubpe._aot_build import status
    if "built in" not in status():
        pytest.skip(f"no current build: {status()}")
    out = run_py(COMMAND_LINE, {}).split(maxsplit=2)
    assert out[:2] == ["aot", "False"], out


def test_aot_status_of_a_foreign_or_damaged_manifest(tmp_path):
    """'ubpe aot status' printed "ubpe: 'kernels'" (a KeyError) or a raw JSON error."""
    from ubpe._aot_build import status
    for text, said in (('{"format": "x"}', "another format"), ("[1]", "damaged manifest"),
                       ("xx", "damaged manifest")):
        (tmp_path / "manifest.json").write_text(text)
        line = status(tmp_path)
        assert said in line and "run 'ubpe aot build'" in line


def test_the_builds_numba_cache_is_one_per_version_of_the_sources(tmp_path, monkeypatch):
    """numba keys a cached kernel by its own file: a kernel that inlines a function of another
    module kept its old code after that module changed. The build's cache is a folder per
    version of the sources (the others removed), in the first parent folder that can hold it."""
    from ubpe import _aot_build
    key = _aot_build._sources_key()
    cache = _aot_build._numba_cache(key, [tmp_path])
    assert cache == tmp_path / _aot_build.CACHE / key
    (cache / "kernel.nbi").write_text("compiled")
    assert _aot_build._numba_cache(key, [tmp_path]) == cache
    assert (cache / "kernel.nbi").is_file()  # the same sources: kept
    real = _aot_build._sources
    monkeypatch.setattr(_aot_build, "_sources", lambda files: {
        f: ("0" * 64 if f == files[0] else h) for f, h in real(files).items()})  # one file edited
    other = _aot_build._sources_key()
    assert other != key
    assert _aot_build._numba_cache(other, [tmp_path]) == tmp_path / _aot_build.CACHE / other
    assert not cache.exists()
    blocked = tmp_path / "file"
    blocked.write_text("")  # not a folder: cannot hold the cache
    assert _aot_build._numba_cache(key, [blocked, tmp_path]) == cache
    with pytest.raises(OSError):
        _aot_build._numba_cache(key, [blocked])
