"""WAV files larger than a frame: a stream of WAV containers (docs/format.md, section 3)."""

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import signals
from signals import container
from signals.container import SignalFormatError
from signals.files import compress_wav_stream, decompress_file_stream, wav_frames
from ubpe.cli import main

SPEECH = Path(__file__).parent / "data" / "speech_0880.wav"


def wav(samples: bytes, *, channels=1, width=2, tag=1, declared=None, tail=b"", pre=b"",
        fmt_extra=b""):
    """A WAV file by hand: ``pre`` (chunks before fmt), fmt (``fmt_extra`` after its 16 bytes,
    then a pad byte where its size is odd), data (``declared`` bytes said)."""
    fmt = struct.pack("<HHIIHH", tag, channels, 8000, 8000 * channels * width, channels * width,
                      8 * width) + fmt_extra
    size = len(samples) if declared is None else declared
    body = (b"WAVE" + pre + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"\0" * (len(fmt) & 1)
            + b"data" + struct.pack("<I", size) + samples + tail)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def stream_of(data: bytes, frame_bytes: int, first: int = 80, **options) -> bytes:
    out = io.BytesIO()
    compress_wav_stream(io.BytesIO(data[first:]), out, first=data[:first], path="x.wav",
                        frame_bytes=frame_bytes, **options)
    return out.getvalue()


def back(stream: bytes) -> bytes:
    out = io.BytesIO()
    decompress_file_stream(io.BytesIO(stream), out)
    return out.getvalue()


@settings(max_examples=60, deadline=None)
@given(channels=st.integers(1, 3), width=st.sampled_from([1, 2, 3, 4]), n=st.integers(0, 400),
       frame=st.integers(1, 700), extra=st.binary(max_size=9),
       declared=st.sampled_from(["exact", "huge", "small", "zero"]), seed=st.integers(0, 2**16),
       fmt_extra=st.binary(max_size=3))
def test_every_wav_layout_comes_back_byte_for_byte(channels, width, n, frame, extra, declared,
                                                   seed, fmt_extra):
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, 256, n * channels * width, dtype=np.uint8).tobytes()
    size = {"exact": None, "huge": 0xFFFFFFF0, "small": len(samples) // 3, "zero": 0}[declared]
    data = wav(samples, channels=channels, width=width, declared=size, tail=extra,
               fmt_extra=fmt_extra)  # (an odd fmt chunk: its pad byte went missing in copies)
    frames = list(wav_frames(io.BytesIO(data[80:]), data[:80], "x.wav", frame))
    assert b"".join(f[p:] for f, p, _ in frames) == data
    short = 44 + len(fmt_extra) + len(fmt_extra) % 2
    assert [p for _, p, _ in frames] == [0] + [short] * (len(frames) - 1)  # (short heads)
    assert back(stream_of(data, frame, level=1)) == data


def test_real_speech_in_frames_costs_little_more_than_one_container():
    data = SPEECH.read_bytes()
    whole = len(signals.compress_file(data, "wav"))
    stream = stream_of(data, 16384)
    assert back(stream) == data
    info = [signals.inspect(f) for f in container.iter_stream_frames(io.BytesIO(stream))]
    assert len(info) == 6 and {i["source"] for i in info} == {"wav"}
    assert len(stream) < 1.05 * whole  # (frames of 8,192 samples: each codes its own tables)


def test_a_data_chunk_declaring_zero_bytes_holds_the_rest_of_the_file_as_samples():
    # (a recorder writing to a pipe cannot go back to write the size: it leaves 0)
    samples = SPEECH.read_bytes()[44:]
    samples = samples[:len(samples) // 2 * 2]
    exact, zero = wav(samples), wav(samples, declared=0, tail=b"\x01")
    for data in (exact, zero):
        columns, head, tail, _ = signals.files.split_wav(data, "x.wav")
        assert columns[0][1].size == len(samples) // 2 and tail == data[len(head) + len(samples):]
    whole = signals.compress_file(zero, "wav")
    assert signals.decompress_file(whole).data == zero
    assert len(whole) < len(signals.compress_file(exact, "wav")) + 16  # (not kept as raw bytes)
    stream = stream_of(zero, 16384)
    assert back(stream) == zero and len(stream) < 1.05 * len(whole)
    # an empty recording: a data chunk of 0 bytes, then a LIST chunk (ffmpeg's), which is no
    # sample (it was quantized as 17 samples with --quantizer)
    info = b"LIST" + struct.pack("<I", 26) + b"INFOISFT" + struct.pack("<I", 14) + b"Lavf58.76.100\0"
    empty = wav(b"", declared=0, tail=info)
    columns, head, tail, _ = signals.files.split_wav(empty, "x.wav")
    assert columns[0][1].size == 0 and tail == info
    assert signals.files.split_wav(wav(samples, declared=0, tail=info), "x.wav")[0][0][1].size \
        == len(samples) // 2 + len(info) // 2  # (samples, then a chunk: to the end, as before)


def test_a_frame_of_another_wav_or_a_missing_head_copy_is_an_error():
    a = wav(np.arange(3000, dtype="<i2").tobytes())
    b = wav(np.arange(3000, dtype="<i2").tobytes(), channels=2)
    fa = list(container.iter_stream_frames(io.BytesIO(stream_of(a, 1000))))
    fb = list(container.iter_stream_frames(io.BytesIO(stream_of(b, 1000))))

    def joined(frames):
        out = io.BytesIO()
        container.write_stream_head(out)
        for f in frames:
            container.write_stream_frame(out, f)
        container.write_stream_end(out, len(frames))
        return out.getvalue()
    assert back(joined(fa)) == a and len(fa) >= 4
    for frames, message in (
            ([fa[0], fb[1]] + fa[2:], "frame 1 belongs to another stream"),
            ([fb[0]] + fa[1:], "frame 1 belongs to another stream"),
            ([fa[0], fa[2], fa[1]] + fa[3:], "frame 1 says it is frame 2 of its stream"),
            ([fa[0], fa[1], fa[1]] + fa[2:], "frame 2 says it is frame 1"),
            ([fa[0]] + fa[2:], "frame 1 says it is frame 2"),
            ([fa[0], fa[0]] + fa[2:], "frame 1: not the frame of this WAV"),
            ([fa[1]] + fa[1:], "frame 0: not the frame of this WAV")):
        with pytest.raises(SignalFormatError, match=message):
            back(joined(frames))
    csv = io.BytesIO()
    signals.files.compress_csv_stream(io.BytesIO(b"a\n" + b"1\n" * 500), csv, frame_bytes=300)
    with pytest.raises(SignalFormatError, match="holds 'csv' data, not wav"):
        back(joined([fa[0]] + list(container.iter_stream_frames(io.BytesIO(csv.getvalue())))))


def test_cli_writes_a_large_wav_as_a_stream(tmp_path, monkeypatch):
    monkeypatch.setattr(signals.files, "WAV_FRAME_BYTES", 20000)  # (the CLI's threshold too)
    data = SPEECH.read_bytes()
    src = tmp_path / "s.wav"
    src.write_bytes(data)
    r = CliRunner().invoke(main, ["compress", str(src)])
    assert r.exit_code == 0, r.output
    assert "wav, 5 frames" in r.stderr and signals.files.is_stream((tmp_path / "s.wav.ubpe").read_bytes())
    src.unlink()
    r = CliRunner().invoke(main, ["decompress", str(tmp_path / "s.wav.ubpe")])
    assert r.exit_code == 0, r.output
    assert src.read_bytes() == data
    r = CliRunner().invoke(main, ["compress", "-", "-c"], input=data)  # standard input too
    assert r.exit_code == 0 and back(r.stdout_bytes) == data
    r = CliRunner().invoke(main, ["compress", str(src), "-c", "--columns", "ch0"])
    assert r.exit_code == 1 and "compressed whole" in r.stderr
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "s.wav.ubpe")])
    assert r.exit_code == 0 and "frames of wav" in r.output


def test_inspect_of_a_wav_stream(tmp_path):
    """inspect left out the WAV line of a stream, and gave a frame of no samples (the bytes
    after them) thousands of bits a value."""
    data = wav(np.arange(3000, dtype="<i2").tobytes(), tail=b"LIST\x04\x00\x00\x00INFO")
    (tmp_path / "s.ubpe").write_bytes(stream_of(data, 2000))
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "s.ubpe")])
    assert r.exit_code == 0, r.output
    assert "wav          8000 Hz, 1 channel(s), 16 bits (<i2)" in r.output
    assert r.output.rstrip().endswith("no values")  # (the last frame: the LIST chunk)
