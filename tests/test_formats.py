"""Readers for Parquet/Arrow, EDF/BDF and WFDB: channels, units, rates, scaling.

Each format is written here from the real ECG (MIT-BIH record 208, which
PhysioNet distributes as WFDB with adc_gain 200 and baseline 1024) by the
format's own package, then read back.
"""

import os
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import signals
from signals.formats import Recording, Scaling, read_recording


@pytest.fixture(scope="module")
def ecg_digital(ecg_csv):
    mv = signals.read_csv(ecg_csv).channels[0][:3600]  # 10 s at 360 Hz
    return np.round(mv * 200).astype(np.int64) + 1024  # the record's 11-bit ADC values


def test_scaling_by_hand():
    s = Scaling(gain=0.005, offset=-5.12)
    assert np.allclose(s.to_physical(np.array([1024, 1224])), [0.0, 1.0])
    assert s.to_digital(np.array([0.0, 1.0])).tolist() == [1024, 1224]
    assert s.to_dict() == {"gain": 0.005, "offset": -5.12}


@given(arrays(np.int64, st.integers(0, 50), elements=st.integers(-2**23, 2**23 - 1)),
       st.sampled_from([1 / 200, 0.005, 20 / 65535, 1e-3]), st.floats(-100, 100))
def test_scaling_round_trip(digital, gain, offset):
    s = Scaling(gain, offset)
    assert np.array_equal(s.to_digital(s.to_physical(digital)), digital)


def test_recording_select_and_metadata():
    r = Recording("x", ["a", "b", "c"], [np.arange(3)] * 3, ["mV", None, "g"], [360.0] * 3)
    assert r.select(["c", 0]).names == ["c", "a"]
    assert r.select(exclude=["b"]).units == ["mV", "g"]
    assert r.metadata()[0] == {"name": "a", "unit": "mV", "rate": 360.0, "scaling": None}
    with pytest.raises(ValueError, match="no channel 'z'"):
        r.select(["z"])
    with pytest.raises(ValueError, match="one entry per channel"):
        Recording("x", ["a"], [np.arange(3)] * 2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore:The inplace keyword")
def test_wfdb(tmp_path, ecg_digital):
    wfdb = pytest.importorskip("wfdb")
    d = np.stack([ecg_digital, 2048 - ecg_digital], axis=1)
    wfdb.wrsamp("rec208", fs=360, units=["mV", "mV"], sig_name=["MLII", "inv"], d_signal=d,
                fmt=["212", "212"], adc_gain=[200.0, 200.0], baseline=[1024, 1024],
                write_dir=str(tmp_path))
    r = read_recording(tmp_path / "rec208.hea")
    assert r.names == ["MLII", "inv"] and r.units == ["mV", "mV"] and r.rates == [360.0, 360.0]
    assert np.array_equal(r.channels[0], ecg_digital) and r.channels[0].dtype.kind == "i"
    assert r.scaling[0] == Scaling(1 / 200, -1024 / 200)
    assert np.allclose(r.physical(0), (ecg_digital - 1024) / 200)
    back = signals.decompress(signals.compress(np.stack(r.channels)))
    assert np.array_equal(back[0], r.channels[0])  # digital values: exact


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore:The inplace keyword")
@pytest.mark.parametrize("count", ["-5", "1e3", "12x", "\u00b9\u00b2"])
def test_a_wfdb_header_whose_sample_count_is_not_a_count_is_refused(tmp_path, count):
    pytest.importorskip("wfdb")  # (its parser takes "-5" as no count, and reads the file to its end)
    (tmp_path / "rec.dat").write_bytes(np.arange(1000, dtype="<i2").tobytes())
    line = "rec.dat 16 200.0(1024)/mV 16 0 0 0 0 MLII\n"
    (tmp_path / "rec.hea").write_bytes(f"# made by hand\nrec 1 360 {count}\n{line}".encode("latin-1"))
    with pytest.raises(ValueError, match=f"rec.hea, line 2: the number of samples '{count}' is not"):
        read_recording(tmp_path / "rec.hea")
    (tmp_path / "rec.hea").write_text(f"rec 1 360 1000\n{line}")  # the same, with a count
    assert np.array_equal(read_recording(tmp_path / "rec.hea").channels[0], np.arange(1000))


@pytest.mark.parametrize("suffix", [".edf", ".bdf"])
def test_edf_bdf(tmp_path, ecg_digital, suffix):
    pyedflib = pytest.importorskip("pyedflib")
    path = tmp_path / f"ecg{suffix}"
    bdf = suffix == ".bdf"
    w = pyedflib.EdfWriter(str(path), 1, file_type=pyedflib.FILETYPE_BDFPLUS if bdf
                           else pyedflib.FILETYPE_EDFPLUS)
    dmin, dmax = (-8388608, 8388607) if bdf else (-32768, 32767)
    w.setSignalHeaders([{"label": "MLII", "dimension": "mV", "sample_frequency": 360,
                         "physical_min": -10.0, "physical_max": 10.0,
                         "digital_min": dmin, "digital_max": dmax}])
    w.writeSamples([(ecg_digital - 1024).astype(np.int32)], digital=True)
    w.close()
    r = read_recording(path)
    assert r.names == ["MLII"] and r.units == ["mV"] and r.rates == [360.0]
    assert np.array_equal(r.channels[0], ecg_digital - 1024)
    gain = 20.0 / (dmax - dmin)
    assert r.scaling[0].gain == pytest.approx(gain)
    assert r.scaling[0].offset == pytest.approx(-10.0 - gain * dmin)
    assert np.allclose(r.physical(0), gain * (ecg_digital - 1024) + r.scaling[0].offset)


def test_parquet_and_arrow(tmp_path, ecg_digital):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather
    import pyarrow.parquet
    field = pa.field("MLII", pa.int16(), metadata={"unit": "mV", "sampling_rate": "360",
                                                   "gain": "0.005", "offset": "-5.12"})
    table = pa.table({"MLII": pa.array(ecg_digital.astype(np.int16)),
                      "label": pa.array(["n"] * ecg_digital.size),
                      "t": pa.array(np.arange(ecg_digital.size) / 360.0)},
                     schema=pa.schema([field, pa.field("label", pa.string()),
                                       pa.field("t", pa.float64())]))
    pyarrow.parquet.write_table(table, tmp_path / "ecg.parquet")
    pyarrow.feather.write_feather(table, tmp_path / "ecg.arrow")
    # an IPC stream (it was "Not a Feather V1 or Arrow IPC file"), under either suffix
    for name in ("ecg.arrows", "stream.arrow"):
        with pa.OSFile(str(tmp_path / name), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
            w.write_table(table)
    for name in ("ecg.parquet", "ecg.arrow", "ecg.arrows", "stream.arrow"):
        r = read_recording(tmp_path / name)
        assert r.names == ["MLII", "t"]  # the text column is skipped
        assert r.units == ["mV", None] and r.rates == [360.0, None]
        assert r.channels[0].dtype == np.int16 and np.array_equal(r.channels[0], ecg_digital)
        assert r.scaling[0] == Scaling(0.005, -5.12) and r.scaling[1] is None
    assert read_recording(tmp_path / "ecg.parquet", exclude=["t"]).names == ["MLII"]
    (tmp_path / "folder.parquet").mkdir()
    pyarrow.parquet.write_table(table, tmp_path / "folder.parquet" / "part-0.parquet")
    assert read_recording(tmp_path / "folder.parquet").names == ["MLII", "t"]  # (a dataset)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_an_arrow_stream_from_a_named_pipe(tmp_path):
    """(A review) read_arrow opened the file twice, a look at its first bytes and then
    pyarrow's own: from a named pipe the first took the data, and the second waited for a
    writer forever."""
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"a": np.arange(50)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    fifo = tmp_path / "p.arrows"
    os.mkfifo(fifo)
    got: list = []
    threads = [threading.Thread(target=lambda: fifo.write_bytes(sink.getvalue().to_pybytes()),
                                daemon=True),
               threading.Thread(target=lambda: got.append(read_recording(fifo)), daemon=True)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert got and got[0].channels[0].tolist() == list(range(50))


def test_arrow_tables_with_a_repeated_name_or_a_null_name_the_file(tmp_path):
    """A repeated column name gave pyarrow's KeyError ('Field "x" exists 2 times') or a
    multi-line ArrowInvalid; a null, a message that named no file (compress_files of many)."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather
    import pyarrow.parquet

    from signals.files import compress_path
    twice = pa.table([pa.array([1, 2]), pa.array([3, 4])], names=["x", "x"])
    for name, write in (("d.parquet", pyarrow.parquet.write_table),
                        ("d.arrow", pyarrow.feather.write_feather)):
        write(twice, tmp_path / name)
        r = read_recording(tmp_path / name)
        assert r.names == ["x", "x#2"] and [c.tolist() for c in r.channels] == [[1, 2], [3, 4]]
        back = signals.decompress(compress_path(tmp_path / name))
        assert [b.tolist() for b in back] == [[1, 2], [3, 4]]
    pyarrow.parquet.write_table(pa.table({"a": pa.array([1, None], pa.int32())}),
                                tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=f"^{tmp_path / 'n.parquet'}: channel 'a': missing"):
        compress_path(tmp_path / "n.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not a footer")
    with pytest.raises(ValueError, match="bad.parquet: not a readable Parquet file \\(Parquet "
                                         "magic bytes not found in footer\\. Either"):
        read_recording(tmp_path / "bad.parquet")


def test_columns_and_exclude_pick_a_recordings_channels_when_compressed(tmp_path, ecg_digital):
    """--exclude (and compress_files' exclude=) was dropped for Parquet, EDF and WFDB files:
    every channel was compressed."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet
    from click.testing import CliRunner

    from signals.files import compress_path
    from ubpe.cli import main
    x = ecg_digital.astype(np.int16)
    pyarrow.parquet.write_table(pa.table({"a": x, "b": x * 3}), tmp_path / "t.parquet")
    for picked in ({"exclude": ["b"]}, {"columns": ["a"]}):
        data = compress_path(tmp_path / "t.parquet", csv_options=picked)
        assert [c["name"] for c in signals.inspect(data)["channels"]] == ["a"]
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "t.parquet"), "--exclude", "b",
                                  "-c"])
    assert r.exit_code == 0, r.output
    assert [c["name"] for c in signals.inspect(r.stdout_bytes)["channels"]] == ["a"]
    assert "left out (--columns/--exclude): b" in r.stderr  # (said, beside 'lossless')
    assert signals.inspect(r.stdout_bytes)["meta"]["left_out"] == ["b"]
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "t.parquet"), "--exclude", "a,b",
                                  "-c"])
    assert r.exit_code == 1 and "leave no channel" in r.stderr  # (it wrote 0 columns, exit 0)
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "t.parquet"), "--columns", "a,b",
                                  "--exclude", "a", "-c"])  # (--exclude was ignored, silently)
    assert r.exit_code == 2 and "--columns and --exclude exclude each other" in r.output
    from signals.parallel import compress_files
    [done] = compress_files([tmp_path / "t.parquet"], processes=False, workers=1,
                            exclude=["b"])
    assert done["left_out"] == ["b"]
    with pytest.raises(ValueError, match="not both"):  # (exclude was dropped, silently)
        compress_files([tmp_path / "t.parquet"], processes=False, workers=1, columns=["a", "b"],
                       exclude=["a"], force=True)
    np.savez(tmp_path / "t.npz", a=x, b=x)
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "t.npz"), "--exclude", "zz", "-c"])
    assert r.exit_code == 1 and "a npz file is compressed whole" in r.stderr  # (ignored, exit 0)


def test_csv_through_read_signal(ecg_csv):
    r = read_recording(ecg_csv)
    assert r.names and r.units == [None] * len(r.names) and r.scaling == [None] * len(r.names)


def test_a_recording_decompresses_to_npz_beside_it_and_says_what_it_left_out(tmp_path, ecg_digital):
    # (decompress wrote the arrays under the recording's own name: with -f it replaced the
    # recording with a zip; the text column left out went unsaid beside 'lossless')
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet
    from click.testing import CliRunner

    from ubpe.cli import main
    table = pa.table({"MLII": pa.array(ecg_digital.astype(np.int16)),
                      "label": pa.array(["n"] * ecg_digital.size)})
    src = tmp_path / "ecg.parquet"
    pyarrow.parquet.write_table(table, src)
    before = src.read_bytes()
    r = CliRunner()
    res = r.invoke(main, ["compress", str(src)])
    assert res.exit_code == 0 and "not kept (not numeric): label" in res.stderr
    res = r.invoke(main, ["decompress", "-f", str(tmp_path / "ecg.parquet.ubpe")])
    assert res.exit_code == 0, res.output
    assert src.read_bytes() == before
    with np.load(tmp_path / "ecg.parquet.npz") as z:
        assert np.array_equal(z[z.files[0]], ecg_digital.astype(np.int16))


def test_read_signal_reads_recordings_and_bad_headers_are_named(tmp_path, ecg_digital):
    # (read_signal parsed a Parquet or EDF file as CSV: 'line 47: 2 fields, expected 1'; a bad
    # WFDB header gave "'NoneType' object is not iterable (TypeError)")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet

    from signals import read_signal
    from signals.formats import read_recording
    pyarrow.parquet.write_table(pa.table({"MLII": pa.array(ecg_digital.astype(np.int16)),
                                          "label": pa.array(["n"] * ecg_digital.size)}),
                                tmp_path / "e.parquet")
    r = read_signal(tmp_path / "e.parquet")
    assert r.names == ["MLII"] and r.skipped == ["label"] and np.array_equal(r.channels[0], ecg_digital)
    pytest.importorskip("wfdb")
    (tmp_path / "bad.hea").write_text("bad 2 x\nfoo\n")
    with pytest.raises(ValueError, match="bad.hea: not a readable WFDB record"):
        read_recording(tmp_path / "bad.hea")
    from click.testing import CliRunner

    from ubpe.cli import main
    res = CliRunner().invoke(main, ["build", str(tmp_path / "e.parquet"), "-o", str(tmp_path / "m.json")])
    assert res.exit_code == 1 and "reads CSV files" in res.stderr


def test_repeated_names_are_made_distinct_and_picked_once():
    """Two EDF signals labelled 'EEG' overwrote each other in the .npz (the second one kept),
    and --exclude EEG dropped one of them without a word."""
    r = Recording("x", ["EEG", "EEG", "EEG#2", "None"], [np.arange(3) + k for k in range(4)])
    assert r.names == ["EEG", "EEG#3", "EEG#2", "None"]
    assert r.select(["EEG#3"]).channels[0].tolist() == [1, 2, 3]
    assert r.select(["EEG", 0]).names == ["EEG"]  # (a channel named twice: kept once)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore:The inplace keyword")
def test_wfdb_channels_of_several_samples_a_frame_keep_every_sample(tmp_path):
    """rdrecord averaged a channel of 2 samples a frame down to the frame rate (its values
    changed, the file said lossless)."""
    wfdb = pytest.importorskip("wfdb")
    a, b = np.arange(1000) % 50 - 25, np.arange(2000) % 300 - 150
    wfdb.wrsamp("mf", fs=100, units=["mV", "mV"], sig_name=["a", "b"],
                e_d_signal=[a.astype(np.int64), b.astype(np.int64)], samps_per_frame=[1, 2],
                fmt=["16", "16"], adc_gain=[200.0, 200.0], baseline=[0, 0],
                write_dir=str(tmp_path))
    r = read_recording(tmp_path / "mf.hea")
    assert r.rates == [100.0, 200.0]
    assert np.array_equal(r.channels[0], a) and np.array_equal(r.channels[1], b)


def test_edf_annotations_are_kept_in_the_container(tmp_path, ecg_digital):
    """EDF+ annotations were dropped without a word."""
    pyedflib = pytest.importorskip("pyedflib")
    path = tmp_path / "rec.edf"
    w = pyedflib.EdfWriter(str(path), 1, file_type=pyedflib.FILETYPE_EDFPLUS)
    w.setSignalHeaders([{"label": "MLII", "dimension": "mV", "sample_frequency": 360,
                         "physical_min": -10.0, "physical_max": 10.0,
                         "digital_min": -32768, "digital_max": 32767}])
    w.writeSamples([(ecg_digital - 1024).astype(np.int32)], digital=True)
    w.writeAnnotation(1.0, 0.5, "Stim")
    w.writeAnnotation(3.0, -1, "Arousal")
    w.close()
    r = read_recording(path)
    assert [a[2] for a in r.annotations] == ["Stim", "Arousal"]
    assert r.annotations[0][:2] == pytest.approx([1.0, 0.5])
    meta = signals.inspect(signals.files.compress_path(path))["meta"]
    assert [a[2] for a in meta["annotations"]] == ["Stim", "Arousal"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore:The inplace keyword")
def test_a_wfdb_records_size_counts_its_signal_files(tmp_path, ecg_digital):
    """The summary counted the 143-byte header alone: '143 -> 4,116 bytes (0.03x)'."""
    wfdb = pytest.importorskip("wfdb")
    from click.testing import CliRunner

    from signals.formats import record_files
    from ubpe.cli import main
    wfdb.wrsamp("r16", fs=360, units=["mV"], sig_name=["MLII"], d_signal=ecg_digital[:, None],
                fmt=["16"], adc_gain=[200.0], baseline=[1024], write_dir=str(tmp_path))
    files = record_files(tmp_path / "r16.hea")
    assert [f.name for f in files] == ["r16.hea", "r16.dat"]
    total = sum(f.stat().st_size for f in files)
    r = CliRunner().invoke(main, ["compress", str(tmp_path / "r16.hea"), "-o", str(tmp_path / "o.ubpe")])
    assert r.exit_code == 0 and f"r16.hea: {total:,} -> " in r.stderr


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                            "ignore:The inplace keyword")
def test_a_multi_segment_record_of_other_scalings_is_refused(tmp_path):
    """wfdb joined the segments' digital samples under the first one's gain and baseline: the
    second segment's physical values came out 20x off, 'lossless'; its size counted the
    header alone."""
    wfdb = pytest.importorskip("wfdb")
    from signals.formats import record_files
    for name, gain, base in (("sa", 100.0, 0), ("sb", 1000.0, 50), ("sc", 100.0, 0)):
        wfdb.wrsamp(name, fs=100, units=["mV"], sig_name=["ecg"], d_signal=np.full((5, 1), 100),
                    fmt=["16"], adc_gain=[gain], baseline=[base], write_dir=str(tmp_path))
    (tmp_path / "two.hea").write_text("two/2 1 100 10\nsa 5\nsb 5\n")
    with pytest.raises(ValueError, match="two.hea: the segments of this multi-segment record "
                                         "scale the samples of 'ecg' otherwise .segment 'sb'"):
        read_recording(tmp_path / "two.hea")
    # a variable layout (a layout segment; segments of other signals, in other orders) whose
    # signals keep their scaling: read as wfdb reads it (refused by the first version)
    for name, sigs in (("s1", ["a", "b"]), ("s2", ["b", "a"]), ("s3", ["a"])):
        wfdb.wrsamp(name, fs=100, units=["mV"] * len(sigs), sig_name=sigs,
                    d_signal=np.full((4, len(sigs)), 7), fmt=["16"] * len(sigs),
                    adc_gain=[{"a": 100.0, "b": 200.0}[s] for s in sigs],
                    baseline=[{"a": 0, "b": 10}[s] for s in sigs], write_dir=str(tmp_path))
    (tmp_path / "lay.hea").write_text("lay 2 100 0\n~ 0 100(0)/mV 16 0 0 0 0 a\n"
                                      "~ 0 200(10)/mV 16 0 0 0 0 b\n")
    (tmp_path / "var.hea").write_text("var/4 2 100 12\nlay 0\ns1 4\ns3 4\ns2 4\n")
    assert read_recording(tmp_path / "var.hea").names == ["a", "b"]
    (tmp_path / "same.hea").write_text("same/2 1 100 10\nsa 5\nsc 5\n")
    r = read_recording(tmp_path / "same.hea")
    assert r.channels[0].tolist() == [100] * 10 and r.scaling[0] == Scaling(0.01, 0.0)
    assert [f.name for f in record_files(tmp_path / "same.hea")] == [
        "same.hea", "sa.hea", "sa.dat", "sc.hea", "sc.dat"]


def _tiny_edf(pyedflib, path) -> bytes:
    """The bytes of an EDF file of one signal of ten zeros, written by pyedflib at ``path``."""
    w = pyedflib.EdfWriter(str(path), 1, file_type=pyedflib.FILETYPE_EDF)
    w.setSignalHeaders([{"label": "x", "dimension": "uV", "sample_frequency": 10,
                         "physical_min": -1.0, "physical_max": 1.0,
                         "digital_min": -100, "digital_max": 100}])
    w.writeSamples([np.zeros(10, np.int32)], digital=True)
    w.close()
    return path.read_bytes()


def test_edf_files_of_no_signal_or_of_records_of_no_time_are_named(tmp_path):
    """An annotations-only EDF+ said 'the columns and exclusions given leave no channel'; a
    record duration of 0, 'float division by zero'."""
    pyedflib = pytest.importorskip("pyedflib")
    path = tmp_path / "notes.edf"
    w = pyedflib.EdfWriter(str(path), 0, file_type=pyedflib.FILETYPE_EDFPLUS)
    w.writeAnnotation(0.5, 1, "x")
    w.close()
    with pytest.raises(ValueError, match="notes.edf: the file holds no signals"):
        read_recording(path)
    path = tmp_path / "rec.edf"
    raw = bytearray(_tiny_edf(pyedflib, path))
    raw[244:252] = b"0       "  # (the duration of a data record, in seconds)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="rec.edf: the header declares data records of 0 "
                                         "seconds"):
        read_recording(path)


def test_a_c_librarys_diagnostics_stay_out_of_the_output(tmp_path):
    """pyedflib prints some faults with C's printf: 'filesize 20768 != ...' landed in the
    output of `ubpe compress -c` (standard output), then ran into the error line."""
    import subprocess
    import sys
    pyedflib = pytest.importorskip("pyedflib")
    path = tmp_path / "rec.edf"
    raw = bytearray(_tiny_edf(pyedflib, path))
    raw[236:244] = b"99999999"  # (the number of data records)
    path.write_bytes(bytes(raw))
    r = subprocess.run([sys.executable, "-m", "ubpe", "compress", "-c", str(path)],
                       capture_output=True)
    assert r.returncode == 1 and r.stdout == b""
    lines = r.stderr.decode().splitlines()
    assert lines[-1].startswith(f"ubpe: {path}: ") and "Traceback" not in r.stderr.decode()
    assert any(ln.startswith("ubpe: warning: pyedflib: ") for ln in lines[:-1]) or \
        len(lines) == 1  # (a pyedflib that prints nothing)
