"""The .ubpe signal container: round trips, error bounds, damaged and foreign files."""

import struct

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import signals
from signals import QUANTIZERS, read_csv
from signals.codec import SignalFormatError, compress, decompress, inspect
from ubpe.cli import main


@settings(max_examples=60, deadline=None)
@given(x=arrays(np.int64, st.tuples(st.integers(1, 3), st.integers(0, 400)),
                elements=st.integers(-2**20, 2**20)))
def test_integers_round_trip_exactly(x):
    data = compress(x)
    back = decompress(data)
    assert back.dtype == np.int64 and np.array_equal(back, x)
    assert np.array_equal(decompress(compress(x[0])), x[0])  # 1-D stays 1-D


@pytest.mark.parametrize("kind", sorted(QUANTIZERS))
def test_floats_decode_within_the_quantizer_bound(kind, ecg_csv):
    x = read_csv(ecg_csv).channels[0][:30000]
    q = QUANTIZERS[kind](256)
    data = compress(x, quantizer=q)
    back = decompress(data)
    info = inspect(data)
    assert back.dtype == np.float64 and back.shape == x.shape
    assert np.abs(back - x).max() <= info["channels"][0]["max_error"] + 1e-12
    assert info["channels"][0]["quantizer"] == kind


def test_real_signals_beat_general_compressors(daphnet_csv, ecg_csv):
    import bz2
    import lzma
    t = read_csv(daphnet_csv, exclude=["is_anomaly"])
    acc = np.stack(t.channels)
    ecg = np.round(read_csv(ecg_csv).channels[0] / 0.005).astype(np.int64)  # ADC units
    for x in (acc, ecg):
        data = compress(x)
        assert np.array_equal(decompress(data), x)
        raw = x.astype(np.int16).tobytes()
        assert len(data) < len(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        assert len(data) < len(bz2.compress(raw, 9))


def test_damaged_and_foreign_files():
    data = compress(np.arange(1000) % 17)
    for cut in (1, 10, 14, 20, len(data) // 2, len(data) - 17, len(data) - 1):
        with pytest.raises(SignalFormatError, match="truncated|checksum|magic"):
            decompress(data[:cut])
    for pos in range(12, len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        with pytest.raises(SignalFormatError, match="checksum mismatch|truncated|unknown section"):
            decompress(bytes(bad))
    with pytest.raises(SignalFormatError, match="bad magic"):
        decompress(b"PK\x03\x04 a zip file, not ours")
    newer = bytearray(data)
    newer[8:10] = struct.pack("<H", 99)
    with pytest.raises(SignalFormatError, match="version 99 is newer"):
        decompress(bytes(newer))
    with pytest.raises(SignalFormatError, match="unexpected bytes after the end marker"):
        decompress(data + b"\0")


def test_every_integer_dtype_round_trips_at_any_range():
    rng = np.random.default_rng(3)
    for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=500, dtype=dtype, endpoint=True)
        x[:2] = info.min, info.max
        back = decompress(compress(x))
        assert back.dtype == x.dtype and np.array_equal(back, x), dtype
    x = np.array([0, 2**28, 0, 2**28], np.int64)  # memory follows the count, not the range
    assert np.array_equal(decompress(compress(x)), x)


def test_frozen_golden_file_still_decodes():
    # written by format version 1; every later version must keep reading it
    from pathlib import Path
    golden = Path(__file__).parent / "data" / "golden_v1.ubpe"
    x = np.array([[0, 1, 4, 9, 16, 25, 36, 49, 64, 81] * 30, [5, -5] * 150])
    assert np.array_equal(decompress(golden.read_bytes()), x)


def test_cli_compress_decompress_inspect(tmp_path, daphnet_csv):
    r = CliRunner()
    out, back = tmp_path / "a.ubpe", tmp_path / "a.csv"
    res = r.invoke(main, ["compress", str(daphnet_csv), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "lossless" in res.output and "csv, 11 columns" in res.output
    res = r.invoke(main, ["decompress", str(out), "-o", str(back)])
    assert res.exit_code == 0, res.output
    assert back.read_bytes() == daphnet_csv.read_bytes()  # every cell, the timestamps too
    res = r.invoke(main, ["inspect", str(out)])
    assert res.exit_code == 0 and "ubpe.signal, version 2" in res.output
    assert "timestamp" in res.output and "lossless" in res.output
    bad = tmp_path / "bad.ubpe"
    bad.write_bytes(out.read_bytes()[:-10])
    res = r.invoke(main, ["decompress", str(bad), "-o", str(tmp_path / "x.csv")])
    assert res.exit_code == 1 and "truncated" in res.output
    assert not (tmp_path / "x.csv").exists()


def test_stream_round_trip_and_truncation(tmp_path):
    import io

    from signals import compress_stream, decompress_stream
    rng = np.random.default_rng(1)
    chunks = [np.cumsum(rng.integers(-5, 6, size=(2, 3000)), axis=1) for _ in range(4)]
    buf = io.BytesIO()
    assert compress_stream(iter(chunks), buf) == 4
    got = list(decompress_stream(io.BytesIO(buf.getvalue())))
    assert len(got) == 4 and all(np.array_equal(a, b) for a, b in zip(got, chunks))
    with pytest.raises(SignalFormatError, match="truncated stream: frame 3"):
        list(decompress_stream(io.BytesIO(buf.getvalue()[:-40])))
    with pytest.raises(SignalFormatError, match="truncated"):  # cut at a frame boundary
        list(decompress_stream(io.BytesIO(buf.getvalue()[:-20])))
    with pytest.raises(SignalFormatError, match="not a ubpe signal stream"):
        list(decompress_stream(io.BytesIO(b"RIFF....WAVE")))


def test_stream_chunks_after_the_first_take_its_plans(monkeypatch):
    import io

    from signals import channel, compress_stream, decompress_stream
    seen = []
    fused = channel._encode_fused

    def spy(x, preset, lpc=None, plan=None):
        seen.append(plan is not None)
        return fused(x, preset, lpc, plan)
    monkeypatch.setattr(channel, "_encode_fused", spy)
    rng = np.random.default_rng(2)
    chunks = [np.cumsum(rng.integers(-5, 6, size=(2, 3000)), axis=1) for _ in range(3)]
    buf = io.BytesIO()
    compress_stream(chunks, buf)
    assert seen.count(True) == 4  # two channels in each of the two later chunks
    assert all(np.array_equal(a, b) for a, b in zip(decompress_stream(io.BytesIO(buf.getvalue())),
                                                     chunks))


@pytest.mark.parametrize("name", ["pywt_ecg_small.npz", "speech_0880.wav"])
def test_cli_on_npz_and_wav(tmp_path, name):
    from pathlib import Path

    src = Path(__file__).parent / "data" / name
    out, back = tmp_path / "x.ubpe", tmp_path / ("back" + src.suffix)
    r = CliRunner()
    res = r.invoke(main, ["compress", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "lossless" in res.output
    res = r.invoke(main, ["decompress", str(out), "-o", str(back)])
    assert res.exit_code == 0, res.output
    if src.suffix == ".wav":
        assert back.read_bytes() == src.read_bytes()
    else:
        with np.load(src) as a, np.load(back) as b:
            assert a.files == b.files
            assert all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a.files)
    n = sum(c["n_samples"] for c in signals.inspect(out.read_bytes())["channels"])
    assert len(out.read_bytes()) * 8 / n < 12  # bits per sample


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0), (2, 0, 3)])
def test_empty_arrays_of_npy_and_npz_files_come_back(shape):
    # (a 2-D array with no row or no column split into no columns, and its file did not decode)
    import io

    buf = io.BytesIO()
    np.save(buf, np.zeros(shape, np.float32))
    assert signals.decompress_file(signals.compress_file(buf.getvalue(), "npy")).data == buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, e=np.zeros(shape, np.int16), x=np.arange(3))
    with np.load(io.BytesIO(signals.decompress_file(signals.compress_file(buf.getvalue(), "npz")).data)) as z:
        assert z["e"].shape == shape and z["e"].dtype == np.int16 and z["x"].tolist() == [0, 1, 2]


def test_pandas_input_keeps_names_and_dtypes():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"hr": np.arange(300, dtype=np.int16), "temp c": np.round(np.linspace(
        20, 21, 300), 2)})
    data = compress(df)
    assert [c["name"] for c in inspect(data)["channels"]] == ["hr", "temp c"]
    back = decompress(data)
    assert back[0].dtype == np.int16 and np.array_equal(back[0], df["hr"].to_numpy())
    assert np.array_equal(back[1], df["temp c"].to_numpy())
    (s,) = decompress(compress(pd.Series(np.arange(50), name="x")))
    assert np.array_equal(s, np.arange(50))


@given(st.sampled_from([">i2", ">u2", ">i4", ">u4", ">i8", ">u8", ">f2", ">f4", ">f8"]), st.data())
@settings(max_examples=40, deadline=None)
def test_big_endian_arrays_come_back_in_their_byte_order(dt, data):
    # (the values came back equal but native-endian: not the dtype that went in)
    x = data.draw(arrays(np.dtype(dt), st.integers(1, 300)))
    for given_ in (x, np.stack([x, x]).astype(dt), np.asfortranarray(np.stack([x, x]).astype(dt))):
        back = signals.decompress(signals.compress(given_))
        assert back.dtype.str == dt and back.tobytes() == given_.tobytes()


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.bool_, st.tuples(st.integers(1, 3), st.integers(0, 300))),
       e=st.sampled_from([None, 0, 0.5, 1.0, 10.0]))
def test_bool_arrays_round_trip_exactly_whatever_the_bound(x, e):
    # (compress refused bool, which its docstring lists; a bound of 1 must not flip bits)
    back = decompress(compress(x, max_error=e))
    assert back.dtype == np.bool_ and np.array_equal(back, x)
    assert np.array_equal(decompress(compress(x[0])), x[0])


def test_bool_npy_and_npz_files_round_trip():
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([True, False, True]))
    assert signals.decompress_file(signals.compress_file(buf.getvalue(), "npy")).data == buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, b=np.eye(3, dtype=bool), x=np.arange(3))
    with np.load(io.BytesIO(signals.decompress_file(signals.compress_file(buf.getvalue(), "npz")).data)) as z:
        assert z["b"].dtype == np.bool_ and np.array_equal(z["b"], np.eye(3, dtype=bool))


def test_max_error_zero_is_lossless_and_bad_options_are_value_errors():
    x = np.linspace(0, 1, 10)
    data = compress(x, max_error=0)
    assert decompress(data).tobytes() == x.tobytes() and inspect(data)["max_error"] == 0.0
    for bad in ({"level": 2.5}, {"level": "5"}, {"level": True}, {"level": 10},
                {"max_error": -1}, {"max_error": float("nan")}, {"max_error": "0.1"}):
        with pytest.raises(ValueError, match="level|max_error"):
            compress(x, **bad)


def test_array_likes_come_back_as_arrays_of_their_shape():
    # (a Dask array, a range or a list of numbers came back as a list of channels, or was refused)
    da = pytest.importorskip("dask.array")
    for x, want in ((da.arange(6, chunks=4).reshape(2, 3), np.arange(6).reshape(2, 3)),
                    (range(5), np.arange(5)), ([0.1, 0.2, 0.3], np.array([0.1, 0.2, 0.3]))):
        back = decompress(compress(x))
        assert isinstance(back, np.ndarray) and back.shape == want.shape and np.array_equal(back, want)
    assert decompress(compress([])) == []  # an empty list of channels stays a list


def test_nan_in_a_pandas_float_column_is_a_value_and_arrow_bools_are_read():
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    x = np.array([20.5, np.nan, 21.0])
    back = decompress(compress(pd.DataFrame({"temp": x})))
    assert back[0].tobytes() == x.tobytes()
    with pytest.raises(ValueError, match="missing value"):  # NA of a nullable column is missing
        compress(pd.Series([1.5, None], dtype="Float64", name="f"))
    back = decompress(compress(pa.array([True, False, True])))
    assert back[0].dtype == np.bool_ and back[0].tolist() == [True, False, True]


def test_meta_is_given_back_by_inspect_and_bounds_are_reported():
    data = compress(np.arange(10), meta={"rate": np.int64(250), "unit": "mV", "gain": [np.float32(0.5)]})
    assert inspect(data)["meta"] == {"rate": 250, "unit": "mV", "gain": [0.5]}
    with pytest.raises(ValueError, match="meta"):
        compress(np.arange(3), meta={"when": object()})
    x = np.cumsum(np.random.default_rng(0).normal(0, 1, 1000))
    info = inspect(compress(x, max_error=0.01))
    assert info["max_error"] == 0.01 == info["channels"][0]["max_error"]  # (the top level said 0)


def _wav24(path, samples, rate=16000):
    """A 24-bit PCM WAV through the standard library (samples: int, shape (n, channels))."""
    import wave
    b = (samples.astype("<i4").view(np.uint8).reshape(*samples.shape, 4)[..., :3]).tobytes()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(3)
        w.setframerate(rate)
        w.writeframes(b)


@pytest.mark.parametrize("channels", [1, 2])
def test_24_bit_wav_comes_back_byte_for_byte(tmp_path, channels):
    """24-bit PCM, the commonest high-resolution WAV, was refused."""
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.integers(-3000, 3000, (5001, channels)), axis=0)
    x = np.clip(x, -2**23, 2**23 - 1)
    x[0] = -2**23
    x[1] = 2**23 - 1
    _wav24(tmp_path / "a.wav", x)
    data = (tmp_path / "a.wav").read_bytes()
    packed = signals.compress_file(data, "wav")
    assert signals.decompress_file(packed).data == data
    assert [c["n_samples"] for c in inspect(packed)["channels"]] == [5001] * channels
    # (inspect did not say what the WAV was)
    assert inspect(packed)["wav"] == {"rate": 16000, "n_channels": channels, "bits": 24,
                                      "dtype": "i24"}


def test_a_wav_header_that_names_another_sample_type_is_refused():
    """A crafted header's dtype 'O' wrote heap addresses into the WAV (exit 0); '<f2' other
    bytes. The declared type is checked against the channels."""
    from signals.codec import encode_columns
    from signals.files import decompress_file
    for dtype, n_ch in (("O", 1), ("<f2", 1), ("M8[s]", 1), ("<i4", 1), ("<i2", 2)):
        bad = encode_columns([("ch0", np.arange(5, dtype=np.int16))],
                             {"source": "wav", "wav": {"rate": 8000, "n_channels": n_ch,
                                                       "bits": 16, "dtype": dtype}},
                             blobs=[b"HEAD", b"TAIL"])
        with pytest.raises(SignalFormatError, match="WAV"):
            decompress_file(bad)


@pytest.mark.filterwarnings("ignore:.*kept as they are, not coded")  # (deflated members)
@settings(max_examples=40, deadline=None)
@given(dt=st.sampled_from(["<i2", ">i4", "<u8", "<f4", ">f8", "|b1", "|u1"]),
       shape=st.sampled_from([(0,), (7,), (3, 5), (5, 3), (2, 3, 4), (), (300,)]),
       order=st.sampled_from("CF"), how=st.sampled_from(["npy", "savez", "savez_compressed",
                                                         "mixed"]),
       version=st.sampled_from([(1, 0), (2, 0), (3, 0)]), seed=st.integers(0, 2**16))
def test_npy_and_npz_files_come_back_byte_for_byte(dt, shape, order, how, version, seed):
    """A .npz came back as a zip written anew (other times, members stored where they were
    deflated), and a .npy with numpy's header of today (other padding, version 1.0)."""
    import io
    import zipfile
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.integers(0, 200, shape) if np.dtype(dt).kind != "f" else
                   rng.normal(0, 9, shape)).astype(dt)
    x = np.asfortranarray(x) if order == "F" else x
    buf = io.BytesIO()
    if how == "npy":
        np.lib.format.write_array(buf, x, version=version)
    elif how in ("savez", "savez_compressed"):
        getattr(np, how)(buf, x=x, y=np.arange(5))
    else:  # (a stored and a deflated member, and a comment in the zip)
        with zipfile.ZipFile(buf, "w") as z:
            for name, a, kind in (("x.npy", x, zipfile.ZIP_STORED),
                                  ("y.npy", np.arange(50), zipfile.ZIP_DEFLATED)):
                member = io.BytesIO()
                np.lib.format.write_array(member, a, version=version)
                z.writestr(zipfile.ZipInfo(name, (2020, 5, 6, 7, 8, 10)), member.getvalue(),
                           compress_type=kind)
            z.comment = b"made by hand"
    data = buf.getvalue()
    kind = "npy" if how == "npy" else "npz"
    assert signals.decompress_file(signals.compress_file(data, kind)).data == data


def test_inspect_of_a_stream_says_it_is_one():
    """signals.inspect of a stream of containers said 'bad magic bytes'."""
    import io
    buf = io.BytesIO()
    signals.compress_stream([np.arange(10)], buf)
    for read in (signals.inspect, signals.decompress):
        with pytest.raises(signals.SignalFormatError, match="a stream of containers, not one"):
            read(buf.getvalue())


def test_npz_files_of_other_layouts_come_back_byte_for_byte():
    """A zip whose directory lists its members in another order than the file holds them made
    a container that never decoded; bools stored as bytes 2 and 255 came back as 1; an npz
    of deflated members decoded by signals.decompress lost them (an empty list)."""
    import io
    import struct
    import warnings
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(500, dtype="i2") % 37, b=np.arange(300, dtype="i4") % 11)
    data = buf.getvalue()
    end = data.rfind(b"PK\x05\x06")
    n = struct.unpack_from("<H", data, end + 10)[0]
    start = struct.unpack_from("<I", data, end + 16)[0]  # (the directory's offset)
    entries, p = [], start
    for _ in range(n):
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, p + 28)
        entries.append(data[p:p + 46 + name_len + extra_len + comment_len])
        p += 46 + name_len + extra_len + comment_len
    reversed_ = data[:start] + b"".join(entries[::-1]) + data[end:]
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(bytes([0, 1, 2, 255]), "?"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for raw, kind in ((reversed_, "npz"), (buf.getvalue(), "npy")):
            assert signals.decompress_file(signals.compress_file(raw, kind)).data == raw
        with pytest.warns(UserWarning, match="kept as they are, not coded .*: array"):
            packed = signals.compress_file(buf.getvalue(), "npy")
        buf = io.BytesIO()
        np.savez_compressed(buf, a=np.arange(100))
        packed = signals.compress_file(buf.getvalue(), "npz")
    with pytest.raises(ValueError, match="whose arrays a are kept as they are: signals."
                                         "decompress_file"):
        signals.decompress(packed)
    assert signals.decompress_file(packed).data == buf.getvalue()



def test_npy_and_npz_arrays_of_text_or_dates_are_kept_as_they_are():
    """(A review) An .npz with one array of text was refused ("array 'c' is not numeric"),
    though the README says an .npz comes back byte for byte: such members are kept in the
    file's skeleton, as deflated ones are; a lossy file still refuses them."""
    import io
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(900) % 17, c=np.array(["x", "yz"]),
             d=np.array(["2020-01-01"], "datetime64[D]"))
    with pytest.warns(UserWarning, match="or not numbers\\): c, d"):
        packed = signals.compress_file(buf.getvalue(), "npz")
    assert signals.decompress_file(packed).data == buf.getvalue()
    one = io.BytesIO()
    np.save(one, np.array(["ab", "c"]))
    with pytest.warns(UserWarning, match="kept as they are"):
        assert signals.decompress_file(signals.compress_file(one.getvalue(), "npy")).data \
            == one.getvalue()
    with pytest.raises(ValueError, match="array 'c' is not numeric"):
        signals.compress_file(buf.getvalue(), "npz", max_error=1)

def test_a_lossy_npz_is_written_anew_and_reads(tmp_path):
    """Its values put back in the file's own zip broke the zip's CRC-32s ('Bad CRC-32')."""
    import io
    x = np.random.default_rng(0).normal(0, 1, 1000)
    for save, kind in ((np.savez, "npz"), (np.savez_compressed, "npz"), (np.save, "npy")):
        buf = io.BytesIO()
        save(buf, x) if kind == "npy" else save(buf, x=x, n=np.arange(9))
        back = signals.decompress_file(signals.compress_file(buf.getvalue(), kind,
                                                             max_error=0.01)).data
        got = np.load(io.BytesIO(back))
        y = got if kind == "npy" else got["x"]
        assert y.dtype == x.dtype and np.abs(y - x).max() <= 0.01
        assert kind == "npy" or got["n"].tolist() == list(range(9))


def test_npz_members_named_as_savez_parameters_come_back(tmp_path):
    """np.savez(f, **arrays) dropped a member named 'allow_pickle' and refused 'file'."""
    import io
    import zipfile
    for names in (["allow_pickle", "y"], ["file"], ["args", "kwds"]):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for k, n in enumerate(names):
                with z.open(f"{n}.npy", "w") as f:
                    np.lib.format.write_array(f, np.arange(100, dtype=np.int16) * (k + 1))
        (tmp_path / "a.npz").write_bytes(buf.getvalue())
        back = signals.decompress_file(signals.compress_file(buf.getvalue(), "npz")).data
        with np.load(io.BytesIO(back)) as z:
            assert z.files == names
            for k, n in enumerate(names):
                assert (z[n] == np.arange(100) * (k + 1)).all()


def test_more_columns_than_a_container_holds_are_refused_before_any_work(tmp_path):
    """65,537 channels compressed (minutes, GBs) to a file that no decoder reads; the CLI
    left that output behind, exit 1."""
    with pytest.raises(ValueError, match="65,537 columns .* above the limit of 65,536"):
        compress([np.arange(3)] * 65537)
    csv = tmp_path / "wide.csv"
    n = 65537
    csv.write_text(",".join(f"c{i}" for i in range(n)) + "\n" + ",".join("1" for _ in range(n)) + "\n")
    r = CliRunner().invoke(main, ["compress", str(csv)])
    assert r.exit_code == 1 and "above the limit" in r.stderr
    assert not (tmp_path / "wide.csv.ubpe").exists()


def test_the_header_names_a_model_only_where_a_column_used_it(tmp_path):
    """A model that coded none of the columns was still required to decompress."""
    m = signals.SignalModel(64, 80, progress=False).fit([np.arange(4000) % 50], names=["a"])
    data = compress(np.arange(1000)[None] % 7, names=["zz"], model=m)
    assert inspect(data)["model"] is None
    assert (decompress(data) == np.arange(1000)[None] % 7).all()
    used = compress([np.arange(1000) % 50], names=["a"], model=m)
    assert inspect(used)["model"] == m.content_id()
    with pytest.raises(SignalFormatError, match="compressed with model"):
        decompress(used)


@pytest.mark.parametrize("kind", sorted(QUANTIZERS))
def test_a_quantized_wav_decompresses_within_its_bound(kind, monkeypatch):
    """The WAV check refused every quantized WAV (its channels decode as float64), old files
    included; the bound is the integers' (the codebook rounded to the WAV's int16)."""
    import wave
    from pathlib import Path
    src = Path(__file__).parent / "data" / "speech_0880.wav"
    data = src.read_bytes()
    with wave.open(str(src)) as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.int64)
    for rounded in (True, False):  # (False: a codebook of floats, as files written before)
        if not rounded:
            monkeypatch.setattr(QUANTIZERS[kind], "round_to", lambda self, dtype: self)
        packed = signals.compress_file(data, "wav", quantizer=QUANTIZERS[kind](64))
        back = signals.decompress_file(packed).data
        assert len(back) == len(data) and back[:44] == data[:44]
        y = np.frombuffer(back[44:], "<i2").astype(np.int64)
        bound = inspect(packed)["channels"][0]["max_error"]
        assert np.abs(y - x).max() <= bound + (0 if rounded else 0.5)


def test_max_error_and_quantizer_exclude_each_other(tmp_path):
    """max_error was dropped without a word when a quantizer was given (errors up to 125 for
    a bound of 0.01)."""
    with pytest.raises(ValueError, match="exclude each other"):
        compress(np.arange(1000.0), max_error=0.01, quantizer=QUANTIZERS["uniform"](4))
    np.save(tmp_path / "x.npy", np.arange(1000.0))
    from ubpe.cli import main
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "x.npy"), "--max-error", "1",
                                  "--quantizer", "uniform", "-c"])
    assert r.exit_code == 2 and "exclude each other" in r.output


def test_channel_names_and_meta_are_checked():
    """Two channels named 'x' both came back as the second one; a NaN in meta gave the JSON
    library's error, without the key."""
    with pytest.raises(ValueError, match="'x' more than once"):
        compress([np.arange(3), np.arange(4)], names=["x", "x"])
    with pytest.raises(ValueError, match="'1' more than once"):  # (names are stored as text)
        compress([np.arange(3), np.arange(4)], names=[1, "1"])
    with pytest.raises(ValueError, match=r"meta\['gain'\]: nan"):
        compress(np.arange(3), meta={"gain": float("nan")})
    with pytest.raises(ValueError, match=r"meta\['a.b'\]: inf"):
        compress(np.arange(3), meta={"a": {"b": np.float32("inf")}})


def test_quantizer_errors_name_the_channel_and_bool_is_quantized():
    """A NaN in the second channel was reported as channel 0 (the fit ran outside the naming);
    a bool channel with a quantizer was refused as not numeric."""
    q = QUANTIZERS["uniform"](4)
    with pytest.raises(ValueError, match="channel 'b'.*non-finite"):
        compress([np.arange(10.0), np.array([1.0, 2.0, np.nan, 4.0])], names=["a", "b"], quantizer=q)
    flags = np.array([True, False, False, True])
    assert np.array_equal(decompress(compress(flags, quantizer=q)), flags)


def _zip(path, members):
    import zipfile
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members:
            z.writestr(name, data)


def _npy(a):
    import io
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


@pytest.mark.parametrize("members, message", [
    ([("x", _npy(np.arange(3))), ("x.npy", _npy(np.arange(3) * 100))], "two members are the array 'x'"),
    ([("x.npy", _npy(np.arange(3))), ("x.npy", _npy(np.arange(4)))], "two members are the array 'x'"),
    ([("x.npy", _npy(np.arange(5))), ("readme.txt", b"hi")], "member 'readme.txt' is not a NumPy"),
    ([("sub/", b""), ("x.npy", _npy(np.arange(3)))], "member 'sub/' is not a NumPy"),
])
def test_npz_members_that_are_no_distinct_arrays_are_refused(tmp_path, members, message):
    """numpy.load reads 'x' and 'x.npy' as one array (the other was lost, exit 0); a member
    that is no array gave a traceback (AttributeError on bytes)."""
    path = tmp_path / "t.npz"
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (zipfile: duplicate name)
        _zip(path, members)
    with pytest.raises(ValueError, match=message):
        signals.compress_file(path.read_bytes(), "npz", path=str(path))
    with pytest.raises(signals.CsvError, match=message):
        signals.read_signal(path)
    from ubpe.cli import main
    r = CliRunner().invoke(main, ["compress", str(path), "-c"])
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output


def test_decompress_max_values_option(tmp_path):
    """decode_columns refused files of more than 2**30 values and said "pass a larger
    max_values", which neither ubpe decompress nor decompress_file took."""
    x = np.arange(1000, dtype=np.int32)
    np.save(tmp_path / "x.npy", x)
    blob = signals.compress_file((tmp_path / "x.npy").read_bytes(), "npy")
    (tmp_path / "x.npy.ubpe").write_bytes(blob)
    with pytest.raises(SignalFormatError, match="above max_values=999"):
        signals.decompress_file(blob, max_values=999)
    from ubpe.cli import main
    r = CliRunner().invoke(main, ["decompress", str(tmp_path / "x.npy.ubpe"), "-c",
                                  "--max-values", "999"])
    assert r.exit_code == 1 and "--max-values" in r.output
    r = CliRunner().invoke(main, ["decompress", str(tmp_path / "x.npy.ubpe"), "-c",
                                  "--max-values", "1000"])
    assert r.exit_code == 0 and r.stdout_bytes == (tmp_path / "x.npy").read_bytes()
