"""How the format-version-2 fixtures in this folder were written (ubpe 0.2.0, format v2).

Kept for the record only: later versions write newer formats. tests/test_frozen_v2.py
decodes each file and compares with the values below, checked by hand.
"""

import io
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np

import signals

HERE = Path(__file__).parent

SQUARES = np.array([0, 1, 4, 9, 16, 25, 36, 49, 64, 81] * 30, np.int16)
SAW = np.array([5, -5] * 150, np.int16)
CSV = (b"# station 7\r\ndate,temp,flag\r\n2024-01-01,1.50,ok\r\n2024-01-02,-0.25,\"a,b\"\r\n"
       b"2024-01-03,NaN,ok\r\n")
FLOATS = np.array([0.1, 0.25, -1.5, 2.0, np.nan, -0.0, 1e300], np.float64)
# added with payload mode 6 (context mixing) and CSV streams (frame_prefix), same format v2
RESIDUES = np.array([t * t % 13 * 100 for t in range(600)], np.int16)
TEETH = np.array([t % 50 * 7 + t * 13 % 3 for t in range(800)], np.int16)  # mode 7 at level 9
CSV_ROWS = b"".join(b"%d,%d.%d\n" % (t, t % 7, t % 10) for t in range(60))


# added with small CSV files stored whole (container flags bit 0), same format v2
SQUARES_CSV = b"t,v\n" + b"".join(b"%d,%d\n" % (t, t * t % 11) for t in range(50))  # zstd


CHUNK = (np.arange(600, dtype="<i2") % 37 * 3 - 50).reshape(300, 2)
FLOAT_CHUNK = np.array([[0.5, -1.25], [2.0, 3.75], [np.nan, -0.0]])  # framing version 4


def solar(n_days: int = 400) -> np.ndarray:
    """Zero every night, a noisy day curve (an LCG, so exact): the vocabulary stage pays."""
    out, v = [], 1
    for d in range(n_days):
        a = d * 37 % 11 + 3
        for h in range(24):
            v = (v * 1103515245 + 12345) % 2**31
            out.append(0 if h < 7 or h > 17 else a * (h - 7) * (17 - h) + v % 9)
    return np.array(out, np.int64)


def periodic(n: int = 20_000) -> np.ndarray:
    """A waveform of period 40 (longer than any LPC) plus noise in 0..4 from an LCG (exact):
    the model's predictor is a lag (kind 2, added after signal_model_v3.json)."""
    out, v = [], 1
    for t in range(n):
        v = (v * 1103515245 + 12345) % 2**31
        out.append(t % 40 * 37 % 23 * 9 + v % 5)
    return np.array(out, np.int64)


def grid(n: int = 12_000) -> np.ndarray:
    """Readings on a sparse grid: the nearest integer to 9.8 times a slow random walk (an LCG,
    so exact): the model keeps its ranked stage (payload mode 9, added after
    signal_model_v3_lag.json)."""
    out, v, k = [], 1, 100
    for _ in range(n):
        v = (v * 1103515245 + 12345) % 2**31
        k += v % 7 - 3
        out.append(round(9.8 * k))
    return np.array(out, np.int64)


def glide(n: int = 600) -> np.ndarray:
    """A resonance whose pitch glides (an AR(2) whose pole angle sweeps, in integers) driven by
    noise from an LCG, so exact: the encoder keeps the adaptive cascade's sign-data LMS
    (payload ``lms`` 4, added within format v2)."""
    out, v, y1, y2 = [], 1, 0, 0
    for t in range(n):
        v = (v * 1103515245 + 12345) % 2**31
        y = ((1900 - t * 1500 // n) * y1 - 963 * y2) // 1024 + (v >> 16) % 401 - 200
        out.append(y)
        y1, y2 = y, y1
    return np.array(out, np.int16)


def write_additions() -> None:
    from signals.numcodecs_codec import UBPECodec, _varints
    codec = UBPECodec()
    if not (HERE / "zarr_chunk_v2_int16.bin").exists():  # the framing before version 3
        head = bytes([0x20, 3, 2]) + _varints([300, 2])
        (HERE / "zarr_chunk_v2_int16.bin").write_bytes(head + signals.compress(CHUNK.T.copy()))
    (HERE / "zarr_chunk_v3_int16.bin").write_bytes(codec.encode(CHUNK))
    if not (HERE / "zarr_chunk_v4_float64.bin").exists():
        (HERE / "zarr_chunk_v4_float64.bin").write_bytes(codec.encode(FLOAT_CHUNK))
    if not (HERE / "signal_model_v3_vocab.json").exists():  # a model with a vocabulary stage
        model = signals.SignalModel(64, 80, progress=False).fit([solar()], names=["ghi"])
        model.save(HERE / "signal_model_v3_vocab.json")
        (HERE / "packet_v2_vocab.bin").write_bytes(model.compress_packet(solar()[:256]))
    if not (HERE / "signal_model_v3_lag.json").exists():  # a model whose predictor is a lag
        model = signals.SignalModel(64, 80, progress=False).fit([periodic()], names=["mains"])
        model.save(HERE / "signal_model_v3_lag.json")
        (HERE / "packet_v2_lag.bin").write_bytes(model.compress_packet(periodic()[:1024]))
    if not (HERE / "signal_model_v3_ranked.json").exists():  # a model with a ranked stage
        model = signals.SignalModel(64, 80, progress=False).fit([grid()], names=["accel"])
        model.save(HERE / "signal_model_v3_ranked.json")
        (HERE / "packet_v2_ranked.bin").write_bytes(model.compress_packet(grid()[:256]))
    if not (HERE / "container_v2_cm.ubpe").exists():  # written before mode 7 existed: level 9
        (HERE / "container_v2_cm.ubpe").write_bytes(signals.compress(RESIDUES, level=9))  # chose 6
    (HERE / "container_v2_cm_lpc.ubpe").write_bytes(signals.compress(TEETH, level=9))
    if not (HERE / "container_v2_sign_data.ubpe").exists():
        (HERE / "container_v2_sign_data.ubpe").write_bytes(signals.compress(glide()))
    buf = io.BytesIO()
    signals.files.compress_csv_stream(io.BytesIO(b"# note\nt,v\n" + CSV_ROWS), buf,
                                      frame_bytes=200, level=1)
    (HERE / "csv_stream_v2.ubps").write_bytes(buf.getvalue())

def write_stored_whole() -> None:
    """The two coders of a CSV file stored whole: LZMA2 (``CSV``) and zstd (``SQUARES_CSV``)."""
    for name, text, coder in (("container_v2_whole_lzma2.ubpe", CSV, "lzma2"),
                              ("container_v2_whole_zstd.ubpe", SQUARES_CSV, "zstd")):
        if not (HERE / name).exists():
            data = signals.compress_file(text, "csv")
            assert signals.inspect(data)["stored_whole"] == coder
            (HERE / name).write_bytes(data)


def wav_bytes() -> bytes:
    """A stereo 16-bit WAV of 300 sample frames, then a LIST chunk (what the WAV stream holds)."""
    t = np.arange(300)
    samples = np.stack([t * 37 % 200 - 100, t * t % 91], axis=1).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 2, 8000, 32000, 4, 16)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", len(samples))
            + samples + b"LIST" + struct.pack("<I", 4) + b"INFO")
    return b"RIFF" + struct.pack("<I", len(body)) + body


def write_wav_stream() -> None:
    """A WAV file's stream of frames (frame_prefix: head copies), added within format v2."""
    if not (HERE / "wav_stream_v2.ubps").exists():
        data, buf = wav_bytes(), io.BytesIO()
        signals.files.compress_wav_stream(io.BytesIO(data[64:]), buf, first=data[:64],
                                          frame_bytes=256, level=1)
        (HERE / "wav_stream_v2.ubps").write_bytes(buf.getvalue())


NPZ_A = (np.arange(24, dtype="<i2") * 7 % 11).reshape(3, 8)
NPZ_B = np.array([0.5, -1.25, np.nan])


def npz_bytes() -> bytes:
    """An .npz of a stored int16 2-D array and a deflated float64 one, with fixed times."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, a, how in (("a.npy", NPZ_A, zipfile.ZIP_STORED),
                             ("b.npy", NPZ_B, zipfile.ZIP_DEFLATED)):
            member = io.BytesIO()
            np.lib.format.write_array(member, a)
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = how
            z.writestr(info, member.getvalue())
    return buf.getvalue()


def write_numpy_files() -> None:
    """An .npz file (numpy_v2.npz) and its containers: container_v2_npz_arrays.ubpe was written
    by ubpe at commit 831dba4, which gave back the arrays in a zip written anew (header key
    ``arrays``); container_v2_npz_members.ubpe gives back the file's bytes (``members``, the
    file's skeleton in a blob), added within format v2."""
    if not (HERE / "numpy_v2.npz").exists():
        (HERE / "numpy_v2.npz").write_bytes(npz_bytes())
    data = (HERE / "numpy_v2.npz").read_bytes()
    name = "container_v2_npz_members.ubpe" if "members" in signals.files.describe_header(
        signals.compress_file(data, "npz")) else "container_v2_npz_arrays.ubpe"
    if not (HERE / name).exists():
        (HERE / name).write_bytes(signals.compress_file(data, "npz"))


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    (HERE / "container_v2_int16.ubpe").write_bytes(signals.compress(np.stack([SQUARES, SAW])))
    (HERE / "container_v2_float.ubpe").write_bytes(signals.compress(FLOATS))
    (HERE / "container_v2_csv.ubpe").write_bytes(signals.compress_file(CSV, "csv"))
    buf = io.BytesIO()
    signals.compress_stream([SQUARES, SAW], buf)
    (HERE / "stream_v2.ubps").write_bytes(buf.getvalue())
    ramp = np.arange(4000, dtype=np.int64) % 50 * 3
    model = signals.SignalModel(64, 80, progress=False).fit([ramp], names=["ramp"])
    model.save(HERE / "signal_model_v3.json")
    (HERE / "packet_v2.bin").write_bytes(model.compress_packet(ramp[:256]))
    write_additions()
    write_wav_stream()
    write_stored_whole()
    write_numpy_files()
