"""The numcodecs codec ``ubpe`` and its zarr v3 form."""

import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

numcodecs = pytest.importorskip("numcodecs")

from signals import SignalFormatError  # noqa: E402
from signals.numcodecs_codec import UBPECodec, model_config  # noqa: E402

INT_DTYPES = ["|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", ">i2", ">i4", ">u8"]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_registered_in_a_fresh_process():
    code = ("import numcodecs, json; c = numcodecs.get_codec({'id': 'ubpe', 'max_error': 0.5});"
            "print(type(c).__module__, json.dumps(c.get_config()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    module, cfg = out.stdout.split(" ", 1)
    assert module == "signals.numcodecs_codec"
    assert json.loads(cfg) == {"id": "ubpe", "max_error": 0.5, "axis": 0, "level": 5}


def test_golden_header():
    # integers: compact version 3 << 4, dtype '<i2' is index 3, ndim 1, shape 4 as one varint
    # byte; then step 1 (zigzag 2, shifted: no tail run), offset 0, and the payload (one
    # channel: no length) up to a CRC-32
    data = UBPECodec().encode(np.array([3, 1, 4, 1], "<i2"))
    assert data[:6] == bytes([0x30, 3, 1, 4, 4, 0])
    from signals.channel import decode_channel
    assert decode_channel(data[6:-4], 4).tolist() == [3, 1, 4, 1]
    assert zlib.crc32(data[:-4]).to_bytes(4, "little") == data[-4:]
    # floats: version 4 << 4, dtype '<f8' is index 11, ndim 1, shape 2, the crc32 of these 4
    # bytes, then a whole container
    data = UBPECodec().encode(np.array([0.5, 1.5], "<f8"))
    assert data[:4] == bytes([0x40, 11, 1, 2]) and data[4:8] == zlib.crc32(data[:4]).to_bytes(4, "little")
    assert data[8:16] == b"UBPE-SIG"
    # 300 samples: varint 300 = 0xAC 0x02
    assert UBPECodec().encode(np.zeros(300, "|u1"))[2:5] == bytes([1, 0xAC, 0x02])


def test_frozen_chunks_of_every_framing():
    frozen = Path(__file__).parent / "data" / "frozen"
    want = (np.arange(600, dtype="<i2") % 37 * 3 - 50).reshape(300, 2)
    for name in ("zarr_chunk_v2_int16.bin", "zarr_chunk_v3_int16.bin"):
        got = UBPECodec().decode((frozen / name).read_bytes())
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    got = UBPECodec().decode((frozen / "zarr_chunk_v4_float64.bin").read_bytes())
    want = np.array([[0.5, -1.25], [2.0, 3.75], [np.nan, -0.0]])  # (make_containers_v2.FLOAT_CHUNK)
    assert got.dtype == np.float64 and got.tobytes() == want.tobytes()


def test_a_corrupted_framing_is_an_error_not_other_values():
    # (the framing of float chunks had no check: one byte made a float64 chunk int16 values)
    c = UBPECodec()
    data = c.encode(np.array([1.5, 2.25, -3.75, 1e6]))
    for k, v in ((1, 3), (3, 2), (0, 0x41)):
        bad = bytearray(data)
        bad[k] = v
        with pytest.raises(SignalFormatError):
            c.decode(bytes(bad))
    # a version-2 chunk (no framing check) is checked against its container
    frozen = (Path(__file__).parent / "data" / "frozen" / "zarr_chunk_v2_int16.bin").read_bytes()
    for k, v in ((1, 5), (3, 0x96)):  # int16 -> int32; shape (300, 2) -> (150, 2)
        bad = bytearray(frozen)
        bad[k] = v
        with pytest.raises(SignalFormatError, match="does not match"):
            c.decode(bytes(bad))


def test_options_are_checked_not_truncated():
    for bad in ({"level": 2.5}, {"level": "3"}, {"level": 10}, {"max_error": "0.1"},
                {"max_error": -1.0}, {"axis": 0.5}):
        with pytest.raises(ValueError):
            UBPECodec(**bad)
    assert UBPECodec(max_error=0).get_config()["max_error"] is None  # 0: lossless
    x = np.array([True, False, False, True, False] * 4)
    assert np.array_equal(UBPECodec(max_error=1).decode(UBPECodec(max_error=1).encode(x)), x)


def test_a_padded_edge_chunk_does_not_code_its_padding():
    c = UBPECodec()
    x = np.zeros((4096, 2), "<i2")
    x[:567, 0] = np.arange(567) % 13 + 500
    x[:567, 1] = 7
    data = c.encode(x)
    assert np.array_equal(c.decode(data), x)
    assert len(data) < len(c.encode(x[:567])) + 40  # the runs cost a few bytes, not 3,529 samples
    y = np.full((100, 1), -(1 << 63), "<i8")  # a constant chunk: all run, extreme value
    assert np.array_equal(c.decode(c.encode(y)), y)


def test_compact_chunks_are_checked():
    c = UBPECodec()
    data = c.encode(np.arange(500, dtype="<i4").reshape(250, 2))
    for k in (0, 5, len(data) // 2, len(data) - 1):
        bad = bytearray(data)
        bad[k] ^= 0x10
        with pytest.raises(ValueError):
            c.decode(bytes(bad))
    with pytest.raises(ValueError):
        c.decode(data[:-1])
    # a forger's chunk (CRC recomputed) whose values leave the dtype's range is refused
    from signals.numcodecs_codec import _read_varints, _varints
    body = c.encode(np.array([1, 2, 3], "|i1"))[:-4]
    (head, _), pos = _read_varints(body, 4, 2)
    body = body[:4] + _varints([head, 2 * 200]) + body[pos:]  # offset 200: outside int8
    forged = body + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(ValueError, match="outside"):
        c.decode(forged)


def test_a_chunk_header_varint_is_at_most_10_bytes():
    """A chunk whose shape varint ran on for 200,000 bytes of 0xff built a 1.4-million-bit
    integer, quadratic in the chunk's length (0.9 s; 4 MB: minutes) before the framing's
    checksum was read."""
    c = UBPECodec()
    data = c.encode(np.random.default_rng(0).normal(0, 3e9, 5000))  # (floats: framed)
    assert data[0] >> 4 == 4  # (a framed chunk: its framing's checksum comes after the shape)
    with pytest.raises(ValueError, match="a varint of more than 10 bytes at byte 13"):
        c.decode(data[:3] + b"\xff" * 200_000 + data[3:])


def test_a_forged_dtype_byte_is_refused():
    """A compact chunk relabelled bool decoded to numpy bools holding the bytes 2 and 255
    (``d.all()`` False with every element printed True); relabelled float32 it failed inside
    numpy ("Invalid integer data type 'f'")."""
    from signals.numcodecs_codec import _DTYPES
    c = UBPECodec()

    def relabelled(x, dtype):
        body = bytearray(c.encode(x)[:-4])
        body[1] = _DTYPES.index(dtype)
        return bytes(body) + zlib.crc32(body).to_bytes(4, "little")
    with pytest.raises(SignalFormatError, match="bool chunk holds the value 255"):
        c.decode(relabelled(np.array([0, 1, 2, 255], np.uint8), "|b1"))
    assert same_bits(c.decode(relabelled(np.array([0, 1, 1], np.uint8), "|b1")),
                     np.array([False, True, True]))
    with pytest.raises(SignalFormatError, match="a compact chunk of float32"):
        c.decode(relabelled(np.arange(5, dtype="<i4"), "<f4"))


def test_config_round_trip_through_json():
    c = UBPECodec(max_error=0.25, axis=1, level=7)
    c2 = numcodecs.get_codec(json.loads(json.dumps(c.get_config())))
    assert c2.get_config() == c.get_config()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INT_DTYPES).flatmap(lambda dt: hnp.arrays(
    np.dtype(dt), hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=40))))
def test_integers_round_trip_exactly(x):
    c = UBPECodec()
    assert same_bits(c.decode(c.encode(x)), x)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(st.sampled_from([np.float32, np.float64, np.float16]),
                  hnp.array_shapes(min_dims=1, max_dims=2, max_side=50)))
def test_floats_lossless_by_default(x):
    """Any float, NaN, infinities and -0.0 included, comes back bit for bit."""
    c = UBPECodec()
    assert same_bits(c.decode(c.encode(x)), x)


def test_decimal_floats_are_coded_not_stored(ecg_csv):
    from signals import read_csv
    x = read_csv(ecg_csv).channels[0][:4096]  # mV with 3 decimals
    data = UBPECodec().encode(x)
    import signals
    assert "decimal" in signals.inspect(data[9:])["channels"][0]["mapping"]  # shape: 2 bytes, then the crc32
    assert same_bits(UBPECodec().decode(data), x)
    assert len(data) < x.nbytes / 8


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(st.sampled_from([np.float32, np.float64]), st.integers(1, 300),
                  elements=st.floats(-100, 100, width=32)),
       st.sampled_from([1e-3, 0.01, 0.5, 3.0]))
def test_max_error_bound_floats(x, e):
    c = UBPECodec(max_error=e)
    y = c.decode(c.encode(x))
    assert y.dtype == x.dtype
    assert np.abs(y.astype(np.float64) - x.astype(np.float64)).max() <= e


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.int32, st.integers(1, 300), elements=st.integers(-10**6, 10**6)),
       st.sampled_from([0.4, 1, 2.5, 7]))
def test_max_error_bound_integers(x, e):
    c = UBPECodec(max_error=e)
    y = c.decode(c.encode(x))
    assert y.dtype == x.dtype and np.abs(y.astype(np.int64) - x).max() <= e


def test_channels_follow_axis():
    x = np.arange(60, dtype=np.int32).reshape(3, 20)  # channels x samples
    for axis in (0, 1, -1):
        c = UBPECodec(axis=axis)
        assert same_bits(c.decode(c.encode(x)), x)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="level must be an integer in 0..9"):
        UBPECodec(level=12)
    with pytest.raises(ValueError, match="max_error"):
        UBPECodec(max_error=-1.0)


def test_decode_into_out():
    x = np.arange(100, dtype=np.int16).reshape(50, 2)
    out = np.empty_like(x)
    UBPECodec().decode(UBPECodec().encode(x), out=out)
    assert same_bits(out, x)


def test_rejects_bad_input():
    with pytest.raises(TypeError, match="unsupported dtype"):
        UBPECodec().encode(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="max_error"):
        UBPECodec(max_error=-1)
    with pytest.raises(ValueError, match="framing version"):
        UBPECodec().decode(b"\xf0\x03\x01\x04")


@pytest.fixture(scope="module")
def trained_model(tmp_path_factory, daphnet_csv):
    from signals import SignalModel, read_csv
    chans = read_csv(daphnet_csv, exclude=["is_anomaly"]).channels[:2]
    path = tmp_path_factory.mktemp("model") / "model.json"
    SignalModel(n_levels=4096, vocab_size=4096 + 64, doc_length=1024, progress=False).fit(
        [c[:6000] for c in chans]).save(path)  # the codec takes values in the fitted range
    return path, np.stack([c[4000:6000] for c in chans], axis=1)


@pytest.mark.parametrize("inline", [True, False])
def test_trained_model_by_id(trained_model, inline):
    path, x = trained_model
    cfg = model_config(path, inline=inline)
    assert cfg["id"].startswith("sha256:") and ("inline" in cfg) == inline
    c = numcodecs.get_codec(json.loads(json.dumps({"id": "ubpe", "model": cfg})))
    y = c.decode(c.encode(x))
    import signals
    model = signals.SignalModel.load(path)
    data = signals.compress(x.T, model=model)
    assert signals.inspect(data)["model"] == model.content_id()
    assert np.array_equal(signals.decompress(data, model=model).T, x)
    assert y.dtype == x.dtype and np.array_equal(y, x)  # lossless, against the model


def test_model_id_is_checked(trained_model, tmp_path, monkeypatch):
    import signals.numcodecs_codec as nc
    monkeypatch.setattr(nc, "_models", {})  # models are cached by id: start empty
    path, x = trained_model
    cfg = model_config(path, inline=False)
    other = tmp_path / "other.json"
    other.write_bytes(path.read_bytes().replace(b'"n_levels"', b' "n_levels"', 1))
    with pytest.raises(ValueError, match="has id"):
        UBPECodec(model={"id": cfg["id"], "path": str(other)}).encode(x)


# ------------------------------------------------------------------ zarr v3
zarr_needed = pytest.mark.filterwarnings("ignore::UserWarning")


def _ecg_2d(ecg_csv):
    from signals import read_csv
    mv = read_csv(ecg_csv).channels[0][:30000]
    counts = np.round(mv / 0.005).astype(np.int16)
    return np.stack([counts, np.diff(counts, prepend=counts[0])], axis=1)  # samples x channels


@zarr_needed
def test_zarr_local_store_read_in_fresh_process(tmp_path, ecg_csv):
    zarr = pytest.importorskip("zarr")
    from signals.numcodecs_codec import UBPEZarrCodec
    x = _ecg_2d(ecg_csv)
    a = zarr.create_array(zarr.storage.LocalStore(tmp_path / "ecg.zarr"), shape=x.shape,
                          chunks=(4096, 2), dtype=x.dtype, serializer=UBPEZarrCodec(),
                          compressors=None)
    a[:] = x
    meta = json.loads((tmp_path / "ecg.zarr" / "zarr.json").read_text())
    assert meta["codecs"] == [{"name": "ubpe", "configuration": {
        "max_error": None, "axis": 0, "level": 5}}]
    np.save(tmp_path / "expected.npy", x)
    code = ("import sys, warnings, numpy as np, zarr; warnings.simplefilter('ignore');"
            "a = zarr.open_array(sys.argv[1], mode='r');"
            "assert (a[:] == np.load(sys.argv[2])).all() and a.dtype == np.int16; print('same')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ecg.zarr"),
                          str(tmp_path / "expected.npy")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "same"
    stored = sum(p.stat().st_size for p in (tmp_path / "ecg.zarr").rglob("*") if p.is_file())
    assert stored < x.nbytes / 2


@zarr_needed
def test_zarr_with_inline_model_read_in_fresh_process(tmp_path, trained_model):
    """A zarr v3 array whose codec config holds a trained model inline reads back exactly in a
    process that never saw the model file (it comes out of zarr.json alone)."""
    zarr = pytest.importorskip("zarr")
    import shutil

    import signals
    from signals.numcodecs_codec import UBPEZarrCodec, _varints
    path = tmp_path / "model.json"
    shutil.copy(trained_model[0], path)
    x = trained_model[1]
    cfg = model_config(path, inline=True)
    a = zarr.create_array(zarr.storage.LocalStore(tmp_path / "m.zarr"), shape=x.shape,
                          chunks=(512, x.shape[1]), dtype=x.dtype,
                          serializer=UBPEZarrCodec(model=cfg), compressors=None)
    a[:] = x
    meta = json.loads((tmp_path / "m.zarr" / "zarr.json").read_text())
    assert meta["codecs"][0]["configuration"]["model"] == cfg
    chunk = (tmp_path / "m.zarr" / "c" / "0" / "0").read_bytes()
    head = 3 + len(_varints([512, x.shape[1]])) + 4  # the framing and its crc32
    assert signals.inspect(chunk[head:])["model"] == signals.SignalModel.load(path).content_id()
    np.save(tmp_path / "expected.npy", x)
    path.unlink()  # only the inline copy is left: the other process reads zarr.json alone
    code = ("import sys, warnings, numpy as np, zarr; warnings.simplefilter('ignore');"
            "a = zarr.open_array(sys.argv[1], mode='r'); y = a[:]; x = np.load(sys.argv[2]);"
            "assert y.dtype == x.dtype and np.array_equal(y, x); print('same')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.zarr"),
                          str(tmp_path / "expected.npy")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "same"


@zarr_needed
def test_zarr_zip_store(tmp_path, ecg_csv):
    zarr = pytest.importorskip("zarr")
    from signals.numcodecs_codec import UBPEZarrCodec
    x = _ecg_2d(ecg_csv).astype(np.float32) * np.float32(0.005)
    store = zarr.storage.ZipStore(tmp_path / "ecg.zip", mode="w")
    a = zarr.create_array(store, shape=x.shape, chunks=(4096, 2), dtype=x.dtype,
                          serializer=UBPEZarrCodec(max_error=0.001), compressors=None)
    a[:] = x
    store.close()
    store = zarr.storage.ZipStore(tmp_path / "ecg.zip", mode="r")
    y = zarr.open_array(store, mode="r")[:]
    store.close()
    assert y.dtype == np.float32 and np.abs(y - x).max() <= 0.001


@zarr_needed
def test_zarr_chunk_of_another_array_is_an_error(tmp_path):
    """A (10, 3) chunk copied where a (3, 10) one belongs was reshaped to it, and a chunk of
    another dtype cast to the array's, without an error."""
    zarr = pytest.importorskip("zarr")
    from signals.numcodecs_codec import UBPEZarrCodec
    x = np.arange(900).reshape(30, 30)

    def array(name, chunks, dtype):
        z = zarr.create_array(tmp_path / name, shape=x.shape, chunks=chunks, dtype=dtype,
                              serializer=UBPEZarrCodec(), compressors=None)
        z[...] = x.astype(dtype)
        return tmp_path / name
    a, b, c = array("a", (10, 3), "i4"), array("b", (3, 10), "i4"), array("c", (10, 3), "i2")
    for src, dst, message in ((a, b, "int32 of shape \\(10, 3\\), the array's chunk is int32 of "
                                     "shape \\(3, 10\\)"), (c, a, "holds int16")):
        (dst / "c" / "0" / "0").write_bytes((src / "c" / "0" / "0").read_bytes())
        with pytest.raises(SignalFormatError, match=message):
            zarr.open_array(dst, mode="r")[:3, :3]
    assert np.array_equal(zarr.open_array(c, mode="r")[...], x.astype("i2"))


def test_zarr_codec_from_dict():
    pytest.importorskip("zarr")
    from signals.numcodecs_codec import UBPEZarrCodec
    c = UBPEZarrCodec.from_dict({"name": "ubpe", "configuration": {"max_error": 1.0}})
    assert c.to_dict()["configuration"]["max_error"] == 1.0
    assert UBPEZarrCodec.from_dict(c.to_dict()) == c


@zarr_needed
def test_zarr_v2_compressor(tmp_path):
    """In a zarr format 2 array the numcodecs codec itself is the compressor."""
    zarr = pytest.importorskip("zarr")
    x = np.cumsum(np.random.default_rng(1).integers(-5, 6, (9000, 3)), axis=0).astype(np.int16)
    z = zarr.create_array(zarr.storage.LocalStore(tmp_path / "v2.zarr"), shape=x.shape,
                          chunks=(4096, 3), dtype=x.dtype, compressors=UBPECodec(), zarr_format=2)
    z[:] = x
    meta = json.loads((tmp_path / "v2.zarr" / ".zarray").read_text())
    assert meta["compressor"]["id"] == "ubpe"
    assert np.array_equal(zarr.open_array(tmp_path / "v2.zarr", mode="r")[:], x)


@pytest.mark.parametrize("codec", [UBPECodec(), UBPECodec(max_error=0.5), UBPECodec(axis=1)])
def test_zarr_v2_in_fortran_order(tmp_path, codec):
    """zarr v2's order="F" read every chunk back transposed (zarr reads a codec's output in its
    memory order), and a partial write then stored the transposed chunk for good."""
    zarr = pytest.importorskip("zarr")
    x = np.arange(24 * 5, dtype="<i2").reshape(24, 5) * 7 % 31
    z = zarr.create_array(tmp_path / "f.zarr", shape=x.shape, chunks=(8, 5), dtype=x.dtype,
                          zarr_format=2, order="F", compressors=codec)
    z[:] = x
    z[3, 1] = -1
    x[3, 1] = -1
    assert np.array_equal(zarr.open_array(tmp_path / "f.zarr", mode="r")[:], x)
    f = np.asfortranarray(x[:8])
    back = codec.decode(codec.encode(f))
    assert np.array_equal(back, f) and back.flags.f_contiguous
    for order in "FC":  # (a C-order out was scrambled by a Fortran-order chunk, and back)
        for chunk in (f, np.ascontiguousarray(f)):
            out = np.empty((8, 5), "<i2", order=order)
            codec.decode(codec.encode(chunk), out=out)
            assert np.array_equal(out, chunk)
    flat = np.empty(40, "<i2")  # a flat buffer: the chunk's bytes in its memory order
    codec.decode(codec.encode(f), out=flat)
    assert flat.tobytes() == f.tobytes(order="F")
    assert codec.decode(codec.encode(x[:8])).flags.c_contiguous


def test_a_forged_compact_shape_is_refused_before_its_allocation():
    """A 39-byte chunk declaring 10 x 2**31 samples (its CRC recomputed) raised MemoryError."""
    from signals.numcodecs_codec import _varints
    c = UBPECodec()
    enc = c.encode(np.arange(10, dtype="i8"))
    body = enc[3 + len(_varints([10])):-4]
    bad = bytes([enc[0], enc[1], 2]) + _varints([10, 2**31]) + body
    with pytest.raises(SignalFormatError, match="declares 2,147,483,648 channels"):
        c.decode(bad + zlib.crc32(bad).to_bytes(4, "little"))


def test_a_run_decodes_in_the_chunks_dtype(monkeypatch):
    """A 19-byte chunk of 2**24 zeros (uint8) held 18 bytes a value while it was decoded (the
    run as int64, concatenated, mapped); a chunk above the limit is refused both ways."""
    import tracemalloc

    import signals.numcodecs_codec as NC
    c = UBPECodec()
    x = np.zeros(1 << 22, "u1")
    data = c.encode(x)
    assert len(data) < 32
    tracemalloc.start()
    try:
        assert np.array_equal(c.decode(data), x)
        assert tracemalloc.get_traced_memory()[1] < 3 * x.nbytes  # (it was 18)
    finally:
        tracemalloc.stop()
    monkeypatch.setattr(NC, "MAX_CHUNK_VALUES", 1 << 20)
    with pytest.raises(ValueError, match="above the limit"):
        c.encode(x)
    with pytest.raises(SignalFormatError, match="declares"):
        c.decode(data)


def test_an_axis_outside_the_chunk_is_an_error():
    x = np.arange(64, dtype="i4").reshape(8, 8)
    for axis in (2, 5, -3):
        with pytest.raises(np.exceptions.AxisError):  # (wrapped to another axis before)
            UBPECodec(axis=axis).encode(x)
    assert np.array_equal(UBPECodec(axis=5).decode(UBPECodec(axis=1).encode(x)), x)  # old chunks


def test_a_chunk_of_many_channels_does_not_warn_about_its_axes():
    """The zarr codec's own (n_channels, n_samples) call of compress raised the warning meant
    for users' transposed arrays (a chunk of 10 samples of 261 channels)."""
    import warnings
    x = np.cumsum(np.random.default_rng(2).normal(0, 1, (10, 261)), axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        back = UBPECodec().decode(UBPECodec().encode(x))
    assert np.array_equal(np.asarray(back).reshape(x.shape), x)
    assert not [w for w in caught if "is read as" in str(w.message)]
