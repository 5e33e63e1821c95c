"""signals.readers: numeric CSV columns on pyarrow, .npz/.npy/.wav channels."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signals.readers import CsvError, read_csv, read_signal

DATA = Path(__file__).resolve().parent / "data"


def _write(tmp_path, data: bytes, name="x.csv") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_tmy3_metadata_line_is_detected_and_text_columns_skipped():
    t = read_csv(DATA / "pvlib_tmy3_723170_48h.csv")
    assert t.header and t.preamble[0].startswith("723170,")
    assert "Date (MM/DD/YYYY)" in t.skipped and "TotCld source" in t.skipped
    i = t.names.index("Dry-bulb (C)")
    assert t.channels[i].dtype == np.float64 and t.scales[i] == 1
    assert t.channels[i][:3].tolist() == [10.0, 10.0, 10.0]
    ghi = t.channels[t.names.index("GHI (W/m^2)")]
    assert ghi.dtype == np.int64 and ghi.shape == (48,)
    # the same with the line skipped explicitly, and with chosen columns
    t2 = read_csv(DATA / "pvlib_tmy3_723170_48h.csv", skip_rows=1, columns=["Dry-bulb (C)", "4"])
    assert t2.names == ["Dry-bulb (C)", "GHI (W/m^2)"]
    assert np.array_equal(t2.channels[0], t.channels[i])


def test_decimals_scaled_are_exact_integers():
    t = read_csv(DATA / "seattle_weather_150.csv", decimals="scaled")
    assert t.skipped == ["date", "weather"]
    assert t.names == ["precipitation", "temp_max", "temp_min", "wind"]
    assert t.scales == [1, 1, 1, 1] and all(t.scaled)
    assert [c[0] for c in t.channels] == [0, 128, 50, 47]  # first row: 0.0,12.8,5.0,4.7
    f = read_csv(DATA / "seattle_weather_150.csv")
    assert f.channels[1][0] == 12.8 and not any(f.scaled)


def test_float_values_are_the_nearest_doubles(tmp_path):
    cells = ["0.1", "-2.675", "1e-3", "123456.789012", "3", "0.30000000000000004"]
    t = read_csv(_write(tmp_path, ("x\n" + "\n".join(cells) + "\n").encode()))
    assert t.channels[0].tolist() == [float(c) for c in cells]
    assert t.scales == [-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-10**15, 10**15), st.integers(0, 6)), min_size=1, max_size=30))
def test_decimal_text_reads_as_float_of_the_text(tmp_path_factory, cells):
    text = [f"{'-' if v < 0 else ''}{abs(v) // 10**d}" + (f".{abs(v) % 10**d:0{d}d}" if d else "")
            for v, d in cells]
    p = tmp_path_factory.mktemp("d") / "x.csv"
    p.write_text("x\n" + "\n".join(text) + "\n")
    x = read_csv(p).channels[0]
    assert x.tolist() == [float(c) if "." in c or x.dtype == np.float64 else int(c) for c in text]
    s = read_csv(p, decimals="scaled")
    if not s.scaled[0]:  # more than 18 digits at one scale: float64, as documented
        assert s.channels[0].tolist() == x.tolist()
        return
    scale = s.scales[0]
    assert s.channels[0].tolist() == [int(c.replace(".", "")) * 10 ** (scale - (len(c.split(".")[1])
                                      if "." in c else 0)) for c in text]


def test_comments_bom_crlf_and_quotes(tmp_path):
    data = (b'\xef\xbb\xbf# OpenSignals\r\n# EndOfHeader\r\n"a, mV",b\r\n1,"2.5"\r\n# marker\r\n'
            b'3,4.5\r\n')
    t = read_csv(_write(tmp_path, data))
    assert t.names == ["a, mV", "b"] and len(t.preamble) == 2
    assert t.channels[0].tolist() == [1, 3] and t.channels[1].tolist() == [2.5, 4.5]


def test_bom_headerless_and_spaces(tmp_path):
    t = read_csv(_write(tmp_path, b"\xef\xbb\xbf1, 2.5\n3, 4.5\n5, 6.5\n"))
    assert not t.header and t.names == ["col0", "col1"]
    assert t.channels[0].tolist() == [1, 3, 5] and t.channels[1].tolist() == [2.5, 4.5, 6.5]


def test_delimiter_and_comment_options(tmp_path):
    p = _write(tmp_path, b"% made by hand\na;b\n1,5;2\n3,5;4\n")
    t = read_csv(p, comment="%", delimiter=";")
    assert t.names == ["b"] and t.skipped == ["a"] and t.channels[0].tolist() == [2, 4]
    assert read_csv(p, skip_rows=1).names == ["b"]
    with pytest.raises(CsvError, match=r"line 3: 2 fields, expected 1"):
        read_csv(p, skip_rows=1, delimiter=",")


@pytest.mark.parametrize("text, kw, message", [
    (b"a,b\n1,2\n3,nan\n", {}, r"x.csv, line 3, column 'b': non-finite value 'nan'"),
    (b"a,b\n1,2\n3,\n", {}, r"x.csv, line 3, column 'b': missing value"),
    (b"a,b\n1,2\n3,zz\n", {}, r"x.csv, line 3, column 'b': 'zz' is not a number"),
    (b"#c\na,b\n1,2\n#c\n3,zz\n", {}, r"x.csv, line 5, column 'b': 'zz' is not a number"),
    (b"a,b\n1,2\n3,4\n5,6,7\n", {}, r"x.csv, line 4: 3 fields, expected 2"),
    (b"a,b\r\n1,2\r\n3,4\r\n5\r\n6,7\r\n", {}, r"x.csv, line 4: 1 fields, expected 2"),
    (b"t,b\nmon,2\ntue,3\n", {"columns": ["t"]}, r"x.csv, line 2, column 't': the column is not numeric"),
    (b"a,b\n1,2\n", {"columns": ["c"]}, r"no column named 'c'"),
    (b"a,b\n1,2\n", {"exclude": ["9"]}, r"excluded column index 9 is out of range"),
    (b"a,b\n", {}, r"no data rows"),
    (b"", {}, r"the file is empty"),
    (b"t\nmon\n", {}, r"no numeric columns to read \(skipped: t\)"),
])
def test_errors_name_file_line_column(tmp_path, text, kw, message):
    with pytest.raises(CsvError, match=message):
        read_csv(_write(tmp_path, text), **kw)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-10**9, 10**9), st.integers(-10**6, 10**6)), min_size=1, max_size=40),
       st.integers(0, 4))
def test_read_csv_scaled_agrees_with_the_exact_table(tmp_path_factory, rows, scale):
    from signals.table import encode_csv
    text = "t,x\n" + "".join(f"{a},{b / 10**scale:.{scale}f}\n" for a, b in rows)
    p = tmp_path_factory.mktemp("t") / "x.csv"
    p.write_text(text)
    t = read_csv(p, decimals="scaled")
    parts = dict(encode_csv(text.encode()).int_columns)
    assert t.channels[0].tolist() == parts["t"].tolist()
    assert t.channels[1].tolist() == parts["x"].tolist() and t.scales[1] == scale


def test_bad_delimiter_is_an_error(tmp_path):
    with pytest.raises(CsvError, match="delimiter must be one character"):
        read_csv(_write(tmp_path, b"a,b\n1,2\n"), delimiter="::")


def test_read_signal_npz_and_wav_still_work():
    t = read_signal(DATA / "pywt_ecg_small.npz")
    assert t.names == ["data"] and t.channels[0].shape == (1024,)
    import wave
    with wave.open(str(DATA / "speech_0880.wav")) as f:
        pcm = np.frombuffer(f.readframes(f.getnframes()), "<i2")
    w = read_signal(DATA / "speech_0880.wav")
    # (the file's own sample type, as compress reads it: a model built on int64 channels never
    # matched the int16 ones that 'ubpe compress --model' codes)
    assert w.names == ["ch0"] and w.channels[0].dtype == np.int16
    assert np.array_equal(w.channels[0], pcm)
    c = read_signal(DATA / "seattle_temps_150.csv", decimals="scaled")
    assert c.names == ["temp"] and c.channels[0][:3].tolist() == [394, 392, 390]


def test_an_npy_header_is_checked_against_its_bytes(tmp_path):
    """numpy allocates what the header declares before it reads: 144 bytes asked for 8 TiB."""
    import io

    from signals.readers import read_npy
    for x in (np.arange(7, dtype=">u2"), np.zeros((2, 0)), np.array(3.5), np.ones((3, 4), order="F")):
        b = io.BytesIO()
        np.save(b, x)
        back = read_npy(io.BytesIO(b.getvalue()), len(b.getvalue()))
        assert back.dtype == x.dtype and back.shape == x.shape and np.array_equal(back, x)
        with pytest.raises(ValueError, match="the file holds"):
            read_npy(io.BytesIO(b.getvalue()[:-1]), len(b.getvalue()) - 1) if x.size else \
                read_npy(io.BytesIO(b"\x93NUMPY\x01\x00" + b.getvalue()[8:].replace(
                    b"(2, 0)", b"(2, 9)")), len(b.getvalue()))
    head = io.BytesIO()
    np.lib.format.write_array_header_2_0(head, {"descr": "<f8", "fortran_order": False,
                                                "shape": (2**40,)})
    (tmp_path / "x.npy").write_bytes(head.getvalue() + bytes(64))
    with pytest.raises(CsvError, match="x.npy: not a readable npy file .*the file holds 64 bytes"):
        read_signal(tmp_path / "x.npy")


# ------------------------------------------------------------------ output="numpy|pandas|polars|arrow"
FIXTURES = ["pvlib_tmy3_723170_48h.csv", "seattle_weather_150.csv", "daphnet_accel_150.csv",
            "heartpy_ppg_300.csv", "seattle_temps_150.csv"]


def _columns(table, output):
    """(names, arrays) of a table of kind ``output``."""
    if output == "numpy":
        return list(table.dtype.names), [table[n] for n in table.dtype.names]
    if output == "pandas":
        return [str(c) for c in table.columns], [table.iloc[:, i].to_numpy()
                                                 for i in range(table.shape[1])]
    if output == "polars":
        return table.columns, [table.to_series(i).to_numpy() for i in range(table.width)]
    return table.column_names, [table.column(i).to_numpy() for i in range(table.num_columns)]


@pytest.mark.parametrize("output", ["numpy", "pandas", "polars", "arrow"])
@pytest.mark.parametrize("name", FIXTURES)
def test_output_tables_hold_the_channels(name, output):
    if output in ("pandas", "polars"):
        pytest.importorskip(output)
    ch = read_csv(DATA / name)
    names, arrays = _columns(read_csv(DATA / name, output=output), output)
    assert names == ch.names
    for a, c in zip(arrays, ch.channels):
        assert a.dtype == c.dtype and np.array_equal(a, c)  # dtype and every value kept


@pytest.mark.parametrize("output", ["pandas", "polars", "arrow"])
def test_output_tables_match_their_libraries_own_reader(output):
    """The same frame as the library's read_csv gives on the numeric columns (int64/float64)."""
    lib = pytest.importorskip(output if output != "arrow" else "pyarrow")
    path = DATA / "daphnet_accel_150.csv"
    ours = read_csv(path, output=output)
    if output == "pandas":
        theirs = lib.read_csv(path)[list(ours.columns)]
        lib.testing.assert_frame_equal(ours, theirs)
    elif output == "polars":
        assert ours.equals(lib.read_csv(path).select(ours.columns))
        assert ours.schema == lib.read_csv(path).select(ours.columns).schema
    else:
        import pyarrow.csv
        assert ours.equals(pyarrow.csv.read_csv(path).select(ours.column_names))


def test_output_scaled_decimals_keep_their_scale():
    path = DATA / "seattle_weather_150.csv"
    t = read_csv(path, decimals="scaled", output="arrow")
    assert t.schema.field("temp_max").metadata == {b"scale": b"1"}
    assert t.column("temp_max").to_numpy()[0] == 128  # 12.8 at scale 1
    pd = pytest.importorskip("pandas")
    df = read_csv(path, decimals="scaled", output="pandas")
    assert isinstance(df, pd.DataFrame) and df["temp_max"].dtype == np.int64
    assert df.attrs["scales"] == [1, 1, 1, 1] and df.attrs["scaled"] == [True] * 4
    assert df.attrs["skipped"] == ["date", "weather"]
    assert read_csv(path, output="arrow").schema.field("temp_max").metadata is None  # floats


def test_output_errors(tmp_path):
    path = DATA / "daphnet_accel_150.csv"
    with pytest.raises(ValueError, match="output must be one of"):
        read_csv(path, output="excel")
    with pytest.raises(TypeError):
        read_csv(path, None, None, None, None, None, "float", "pandas")  # keyword-only
    dup = _write(tmp_path, b"a,a,b\n1,2,3\n4,5,6\n")
    for output in ("numpy", "polars"):
        with pytest.raises(ValueError, match=r"\['a'\] occur more than once"):
            read_csv(dup, output=output)
    t = read_csv(dup, output="arrow")
    assert t.column_names == ["a", "a", "b"] and t.column(1).to_pylist() == [2, 5]
    with pytest.raises(TypeError, match="read_csv"):
        read_signal(path, output="pandas")
    pd = pytest.importorskip("pandas")
    assert list(read_csv(dup, output="pandas").columns) == ["a", "a", "b"]
    assert isinstance(read_csv(dup, output="pandas"), pd.DataFrame)


@pytest.mark.parametrize("lib", ["pandas", "polars"])
def test_output_library_missing(lib, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, lib, None)  # as if not installed
    with pytest.raises(ImportError, match=f"needs {lib}: pip install {lib}"):
        read_csv(DATA / "daphnet_accel_150.csv", output=lib)


def test_read_signal_reads_every_wav_that_compress_codes(tmp_path):
    """read_signal (ubpe plot, SignalModel.fit flows) used the wave module: 24-bit,
    float and WAVE_FORMAT_EXTENSIBLE files were refused though compress codes them."""
    import struct
    import wave
    x = np.array([[-2**23, 5], [2**23 - 1, -7], [12345, 0]], np.int32)
    with wave.open(str(tmp_path / "a.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(3)
        w.setframerate(8000)
        w.writeframes(x.astype("<i4").view(np.uint8).reshape(3, 2, 4)[..., :3].tobytes())
    t = read_signal(tmp_path / "a.wav")
    assert t.names == ["ch0", "ch1"] and [c.tolist() for c in t.channels] == x.T.tolist()
    f = np.array([0.5, -0.25, 1e-3], "<f4")  # a float WAV (format tag 3), written by hand
    fmt = struct.pack("<HHIIHH", 3, 1, 8000, 32000, 4, 32)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + \
        struct.pack("<I", f.nbytes) + f.tobytes()
    (tmp_path / "f.wav").write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    g = read_signal(tmp_path / "f.wav")
    assert g.channels[0].dtype == np.float32 and g.channels[0].tolist() == f.tolist()


def test_read_signal_takes_array_channels_along_the_shorter_axis(tmp_path):
    """A (samples, channels) .npy was read as thousands of 2-sample channels, where ubpe
    compress takes the shorter axis as channels."""
    x = np.arange(4000, dtype=np.int16).reshape(2000, 2)
    np.save(tmp_path / "tc.npy", x)
    got = read_signal(tmp_path / "tc.npy")
    assert got.names == ["tc:0", "tc:1"] and np.array_equal(got.channels[1], x[:, 1])
    np.save(tmp_path / "ct.npy", x.T)
    assert np.array_equal(read_signal(tmp_path / "ct.npy").channels[0], x[:, 0])
