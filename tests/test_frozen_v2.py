"""Frozen format-v2 fixtures (tests/data/frozen/make_containers_v2.py) decode to known values."""

import io
import json
from pathlib import Path

import numpy as np

import signals

FROZEN = Path(__file__).parent / "data" / "frozen"
SQUARES = [0, 1, 4, 9, 16, 25, 36, 49, 64, 81] * 30
SAW = [5, -5] * 150


def test_int16_container():
    x = signals.decompress((FROZEN / "container_v2_int16.ubpe").read_bytes())
    assert x.dtype == np.int16 and x.shape == (2, 300)
    assert x[0].tolist() == SQUARES and x[1].tolist() == SAW


def test_container_with_the_sign_data_cascade(cascade_bytes):
    """Payload mode 4 with ``lms`` 4 (the sign-data LMS, added within format v2)."""
    x = signals.decompress((FROZEN / "container_v2_sign_data.ubpe").read_bytes())
    out, v, y1, y2 = [], 1, 0, 0
    for t in range(600):  # make_containers_v2.glide, by hand
        v = (v * 1103515245 + 12345) % 2**31
        y = ((1900 - t * 1500 // 600) * y1 - 963 * y2) // 1024 + (v >> 16) % 401 - 200
        out.append(y)
        y1, y2 = y, y1
    assert cascade_bytes == [4]
    assert x.dtype == np.int16 and x.tolist() == out


def test_float_container_bit_for_bit():
    x = signals.decompress((FROZEN / "container_v2_float.ubpe").read_bytes())
    want = np.array([0.1, 0.25, -1.5, 2.0, np.nan, -0.0, 1e300])
    assert x.dtype == np.float64 and x.view(np.uint64).tolist() == want.view(np.uint64).tolist()


def test_csv_container_gives_back_the_bytes():
    got = signals.decompress_file((FROZEN / "container_v2_csv.ubpe").read_bytes())
    assert got.kind == "csv"
    assert got.data == (b"# station 7\r\ndate,temp,flag\r\n2024-01-01,1.50,ok\r\n"
                        b"2024-01-02,-0.25,\"a,b\"\r\n2024-01-03,NaN,ok\r\n")


def test_csv_files_stored_whole():
    """Flags bit 0 (added within format v2): a small CSV file coded whole, by LZMA2 or zstd."""
    for name, coder, text in (
            ("container_v2_whole_lzma2.ubpe", "lzma2",
             b"# station 7\r\ndate,temp,flag\r\n2024-01-01,1.50,ok\r\n"
             b"2024-01-02,-0.25,\"a,b\"\r\n2024-01-03,NaN,ok\r\n"),
            ("container_v2_whole_zstd.ubpe", "zstd",
             b"t,v\n" + b"".join(b"%d,%d\n" % (t, t * t % 11) for t in range(50)))):
        data = (FROZEN / name).read_bytes()
        assert signals.inspect(data)["stored_whole"] == coder
        got = signals.decompress_file(data)
        assert got.kind == "csv" and got.data == text


def test_stream_v2():
    with open(FROZEN / "stream_v2.ubps", "rb") as f:
        chunks = list(signals.decompress_stream(f))
    assert [c.tolist() for c in chunks] == [SQUARES, SAW]


def test_model_v3_and_its_packet():
    model = signals.SignalModel.load(FROZEN / "signal_model_v3.json")
    doc = json.loads((FROZEN / "signal_model_v3.json").read_text())
    assert model.content_id() == doc["content_id"]
    assert model.codec_report_[0]["kept"]
    x = model.decompress_packet((FROZEN / "packet_v2.bin").read_bytes())
    assert x.tolist() == (np.arange(256) % 50 * 3).tolist()
    buf = io.BytesIO()
    model.write_packet_stream([x], buf)  # and what it writes now reads back
    assert next(model.read_packet_stream(io.BytesIO(buf.getvalue()))).tolist() == x.tolist()


def test_context_mixing_container():
    data = (FROZEN / "container_v2_cm.ubpe").read_bytes()
    header, sections, _ = signals.container.read_container(data)
    assert [s.body[0] for s in sections if s.kind == b"C"] == [6]  # payload mode 6 (CM)
    x = signals.decompress(data)
    assert x.dtype == np.int16 and x.tolist() == [t * t % 13 * 100 for t in range(600)]


def test_csv_stream_with_header_copies():
    data = (FROZEN / "csv_stream_v2.ubps").read_bytes()
    out = io.BytesIO()
    info = signals.files.decompress_file_stream(io.BytesIO(data), out)
    rows = b"".join(b"%d,%d.%d\n" % (t, t % 7, t % 10) for t in range(60))
    assert out.getvalue() == b"# note\nt,v\n" + rows and info["frames"] >= 3


def test_context_mixing_over_predictor_residuals_container():
    data = (FROZEN / "container_v2_cm_lpc.ubpe").read_bytes()
    header, sections, _ = signals.container.read_container(data)
    assert [s.body[0] for s in sections if s.kind == b"C"] == [7]  # payload mode 7 (CM_LPC)
    x = signals.decompress(data)
    assert x.dtype == np.int16 and x.tolist() == [t % 50 * 7 + t * 13 % 3 for t in range(800)]


def test_model_with_a_vocabulary_stage_and_its_packet():
    import sys
    sys.path.insert(0, str(FROZEN))
    from make_containers_v2 import solar
    model = signals.SignalModel.load(FROZEN / "signal_model_v3_vocab.json")
    assert model.codec_["ghi"]["model"].merges is not None
    assert model.codec_report_[0]["stages"][-1]["stage"] == "vocabulary"
    packet = (FROZEN / "packet_v2_vocab.bin").read_bytes()
    assert packet[0] == 0xB0 and packet[3] == 8  # one channel, 256 samples, payload mode 8
    assert model.decompress_packet(packet).tolist() == solar()[:256].tolist()


def test_model_with_a_lag_predictor_and_its_packet():
    model = signals.SignalModel.load(FROZEN / "signal_model_v3_lag.json")
    doc = json.loads((FROZEN / "signal_model_v3_lag.json").read_text())
    assert model.content_id() == doc["content_id"]
    channel = model.codec_["mains"]["model"]
    assert (channel.kind, channel.order) == (2, 40)  # x[i - 40]: the waveform's period
    packet = (FROZEN / "packet_v2_lag.bin").read_bytes()
    assert packet[3] == 3  # payload mode 3 (the model's predictor and tables)
    out, v = [], 1
    for t in range(1024):  # make_containers_v2.periodic, by hand
        v = (v * 1103515245 + 12345) % 2**31
        out.append(t % 40 * 37 % 23 * 9 + v % 5)
    assert model.decompress_packet(packet).tolist() == out


def test_model_with_a_ranked_stage_and_its_packet():
    model = signals.SignalModel.load(FROZEN / "signal_model_v3_ranked.json")
    doc = json.loads((FROZEN / "signal_model_v3_ranked.json").read_text())
    assert model.content_id() == doc["content_id"]
    assert model.codec_["accel"]["model"].ranked is not None
    assert any(s["stage"] == "distinct values and ranks" and s["kept"] == "on"
               for s in model.codec_report_[0]["stages"])
    packet = (FROZEN / "packet_v2_ranked.bin").read_bytes()
    assert packet[3] == 9  # payload mode 9 (distinct values and ranks under the model)
    out, v, k = [], 1, 100
    for _ in range(256):  # make_containers_v2.grid, by hand
        v = (v * 1103515245 + 12345) % 2**31
        k += v % 7 - 3
        out.append(round(9.8 * k))
    assert model.decompress_packet(packet).tolist() == out


def test_wav_stream_with_head_copies():
    """A WAV file's stream (frames of 256 sample bytes, each later one behind a short
    head): written by tests/data/frozen/make_containers_v2.py, read as it was."""
    data = (FROZEN / "wav_stream_v2.ubps").read_bytes()
    out = io.BytesIO()
    info = signals.files.decompress_file_stream(io.BytesIO(data), out)
    t = np.arange(300)
    samples = np.stack([t * 37 % 200 - 100, t * t % 91], axis=1).astype("<i2")
    wav = out.getvalue()
    assert info["frames"] == 6 and wav[:4] == b"RIFF" and wav.endswith(b"LIST\x04\x00\x00\x00INFO")
    assert wav[44:44 + samples.nbytes] == samples.tobytes()
    frames = list(signals.container.iter_stream_frames(io.BytesIO(data)))
    first_crc = __import__("zlib").crc32(frames[0])
    for k, f in enumerate(frames[1:], 1):  # (each later frame's place in its stream)
        header = signals.container.read_container(f)[0]
        assert header["frame_index"] == k and header["first_frame_crc"] == first_crc
    old = io.BytesIO()  # (written at 090c931: every later frame behind a copy of the whole head)
    signals.files.decompress_file_stream(io.BytesIO((FROZEN / "wav_stream_v2_head.ubps").read_bytes()), old)
    assert old.getvalue() == wav


def test_numpy_files_old_and_exact():
    """An .npz container written before the file's skeleton was kept gives back its arrays
    (in a zip written anew); one written since gives back the file's bytes, a member stored
    deflated included."""
    a = (np.arange(24, dtype="<i2") * 7 % 11).reshape(3, 8)
    b = np.array([0.5, -1.25, np.nan])
    old = signals.decompress_file((FROZEN / "container_v2_npz_arrays.ubpe").read_bytes())
    with np.load(io.BytesIO(old.data)) as z:
        assert z["a"].dtype == a.dtype and z["a"].tolist() == a.tolist()
        assert z["b"].view(np.uint64).tolist() == b.view(np.uint64).tolist()
    new = signals.decompress_file((FROZEN / "container_v2_npz_members.ubpe").read_bytes())
    assert new.kind == "npz" and new.data == (FROZEN / "numpy_v2.npz").read_bytes()
    with np.load(io.BytesIO(new.data)) as z:
        assert z["a"].tolist() == a.tolist()
