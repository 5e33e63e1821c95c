"""CSV files larger than a frame: a stream of containers, bounded memory, the same bytes back."""

import io
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import signals.files as F
from signals import SignalFormatError, SignalModel, compress_stream
from signals.container import iter_stream_frames
from ubpe.cli import main

DATA = Path(__file__).resolve().parent / "data"


def stream_round_trip(data: bytes, frame_bytes: int, **kw) -> tuple[bytes, dict]:
    out = io.BytesIO()
    kw.setdefault("level", 1)  # the level does not matter to the framing; level 1 is quick
    info = F.compress_csv_stream(io.BytesIO(data), out, frame_bytes=frame_bytes, **kw)
    assert info["bytes_in"] == len(data) and info["bytes_out"] == len(out.getvalue())
    back = io.BytesIO()
    got = F.decompress_file_stream(io.BytesIO(out.getvalue()), back)
    assert back.getvalue() == data
    assert got == {"frames": info["frames"], "bytes_out": len(data)}
    return out.getvalue(), info


# ---------------------------------------------------------------- cutting, checked by hand
@pytest.mark.parametrize("buf, start, cut", [
    (b"a,b\n1,2\n3,", 0, 8),        # after the last whole line
    (b"a,b\n1,2\n3,4\n", 0, 12),
    (b'a\n"x\ny"\n1\n', 0, 10),     # a newline inside quotes is not a line end
    (b'a\n"x\ny', 0, 2),
    (b'a\n"x""\ny"\n', 0, 10),      # doubled quotes inside a quoted field
    (b"abc", 0, 0),                 # no line ends
    (b"a\nbcdef", 3, 0),            # none after start
    (b'a\n"x\ny\nz\n', 3, 0),        # a stray quote: none (unless forced, below)
    (b"a\rb\rc", 0, 4),             # CR line ends where there is no LF
])
def test_cut_is_after_a_line_outside_quotes(buf, start, cut):
    assert F._cut(buf, start) == cut
    assert F._cut(b'a\n"x\ny\nz\n', 3, force=True) == 5  # past a stray quote: the first line end


@pytest.mark.parametrize("data", [
    b"# " + b"m" * 3000 + b"\n# " + b"n" * 2500 + b"\na,b\n" + b"".join(b"%d,%d\n" % (i, i % 7)
                                                                      for i in range(600)),
    b"a,b\n" + b'5,pipe 12" long\n' + b"".join(b"%d,x%d\n" % (i, i % 7) for i in range(600)),
    b"a,b\r" + b"".join(b"%d,%d\r" % (i, i % 7) for i in range(600)),
    # more comment lines above the header than sniff reads: coded whole (raw), as a small file
    b"".join(b"# %d\n" % i for i in range(300)) + b"a,b\n" + b"".join(b"%d,%d\n" % (i, i % 7)
                                                                  for i in range(600)),
    b"# logger\na,b\n" + b"".join(b"%d,%d\n" % (i, i % 7) + (b"# note\n" if i % 50 == 0 else b"")
                                   for i in range(600)),
    # a comment line in a later frame only (refused: "1 fields, expected 2", where one
    # container of the same file reads it as a comment)
    b"# logger\na,b\n" + b"".join(b"%d,%d\n" % (i, i % 7) + (b"# pause\n" if i == 450 else b"")
                                   for i in range(600)),
])
def test_long_preambles_stray_quotes_and_cr_lines_stream_exactly(data):
    # (a preamble above 1 MiB made a stream that never decoded; a stray quote made the cut
    # quadratic and held the whole file; CR-only files were one frame)
    _, info = stream_round_trip(data, 500)
    assert info["frames"] > 3 or data.count(b"#") == 300


def test_pieces_are_whole_lines_and_concatenate_to_the_input():
    text = b"".join(b"%d,%d\n" % (i, i * i) for i in range(1000))
    pieces = list(F.csv_pieces(io.BytesIO(text), frame_bytes=500))
    assert b"".join(pieces) == text
    assert len(pieces) > 10 and all(p.endswith(b"\n") for p in pieces)
    # a line longer than a piece stays whole; bytes already read come first
    long = b"x" * 3000 + b"\n" + b"1\n" * 10
    pieces = list(F.csv_pieces(io.BytesIO(long[100:]), first=long[:100], frame_bytes=500))
    assert b"".join(pieces) == long and pieces[0].startswith(b"x" * 3000 + b"\n")


# ---------------------------------------------------------------- round trips on real files
@pytest.mark.parametrize("name", ["daphnet_accel_150.csv", "pvlib_tmy3_723170_48h.csv",
                                  "seattle_weather_150.csv"])
def test_real_csv_in_frames_comes_back_byte_for_byte(name):
    data = (DATA / name).read_bytes()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 5)
    assert info["frames"] >= 4
    # every later frame codes a copy of the header line, and gives it back only once
    frames = list(iter_stream_frames(io.BytesIO(packed)))
    assert len(frames) == info["frames"]
    header_line = data.splitlines(keepends=True)[1 if name.startswith("pvlib") else 0]
    for k, frame in enumerate(frames):
        piece = F.decompress_file(frame).data
        assert k == 0 or not piece.startswith(header_line)


def test_preamble_bom_crlf_quotes_and_skip_rows():
    rows = "".join(f'{i},"a\r\nb{i}",{i / 10:.1f}\r\n' for i in range(300))
    data = b"\xef\xbb\xbf" + ("# station 7\r\nid,note,value\r\n" + rows).encode()
    stream_round_trip(data, frame_bytes=1000)
    stream_round_trip(data, frame_bytes=1000, csv_options={"skip_rows": 1})


def test_headerless_and_lossy_frames():
    data = "".join(f"{i},{i % 7 / 100:.2f}\n" for i in range(2000)).encode()
    stream_round_trip(data, frame_bytes=3000)
    out = io.BytesIO()
    F.compress_csv_stream(io.BytesIO(data), out, frame_bytes=3000, max_error=0.02, level=1)
    back = io.BytesIO()
    F.decompress_file_stream(io.BytesIO(out.getvalue()), back)
    got = [line.split(",") for line in back.getvalue().decode().splitlines()]
    assert [r[0] for r in got] == [str(i) for i in range(2000)]
    assert max(abs(float(r[1]) - i % 7 / 100) for i, r in enumerate(got)) <= 0.02


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(-10**6, 10**6), st.sampled_from(["", "x", '"q,"', '"a\nb"'])),
                min_size=1, max_size=60),
       st.integers(8, 200), st.booleans())
def test_any_cut_of_a_csv_comes_back(rows, frame_bytes, header):
    text = ("t,v\n" if header else "") + "".join(f"{a},{b}\n" for a, b in rows)
    stream_round_trip(text.encode(), frame_bytes)


# ---------------------------------------------------------------- damaged streams
def test_damaged_streams_raise_format_errors():
    data = (DATA / "daphnet_accel_150.csv").read_bytes()
    packed, _ = stream_round_trip(data, frame_bytes=len(data) // 3)
    for bad, msg in [(packed[:-5], "end marker"), (packed[:-30], "truncated"),
                     (packed[:40], "truncated"), (b"UBPE-STR\x09\x00", "newer")]:
        with pytest.raises(SignalFormatError, match=msg):
            F.decompress_file_stream(io.BytesIO(bad), io.BytesIO())
    # a stream of arrays is not a CSV stream
    arrays = io.BytesIO()
    compress_stream([np.arange(3), np.arange(5)], arrays)
    with pytest.raises(SignalFormatError, match="not CSV"):
        F.decompress_file_stream(io.BytesIO(arrays.getvalue()), io.BytesIO())
    # frames of another file, spliced in: the header copy gives it away
    other = (DATA / "seattle_weather_150.csv").read_bytes()
    packed2, _ = stream_round_trip(other, frame_bytes=len(other) // 3)
    f1 = list(iter_stream_frames(io.BytesIO(packed)))
    f2 = list(iter_stream_frames(io.BytesIO(packed2)))
    spliced = io.BytesIO()
    F.container.write_stream_head(spliced)
    for f in [f1[0], f2[1]]:
        F.container.write_stream_frame(spliced, f)
    F.container.write_stream_end(spliced, 2)
    with pytest.raises(SignalFormatError, match="frame 1 belongs to another stream"):
        F.decompress_file_stream(io.BytesIO(spliced.getvalue()), io.BytesIO())


# ---------------------------------------------------------------- the command line
def test_cli_writes_a_stream_above_the_frame_size(tmp_path, monkeypatch):
    data = (DATA / "pvlib_tmy3_723170_48h.csv").read_bytes()
    monkeypatch.setattr(F, "FRAME_BYTES", len(data) // 4)
    src = tmp_path / "big.csv"
    src.write_bytes(data)
    r = CliRunner().invoke(main, ["compress", str(src), "--level", "1"])
    assert r.exit_code == 0, r.output
    assert "frames" in r.stderr and "lossless" in r.stderr
    packed = (tmp_path / "big.csv.ubpe").read_bytes()
    assert F.is_stream(packed)
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "big.csv.ubpe")])
    assert r.exit_code == 0 and "stream" in r.stdout and "frames of csv" in r.stdout
    r = CliRunner().invoke(main, ["decompress", str(tmp_path / "big.csv.ubpe"), "-o",
                                  str(tmp_path / "back.csv")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "back.csv").read_bytes() == data
    # through pipes too
    r = CliRunner().invoke(main, ["compress", "-", "-q", "--level", "1"], input=data)
    assert r.exit_code == 0 and F.is_stream(r.stdout_bytes)
    r = CliRunner().invoke(main, ["decompress", "-", "-q"], input=r.stdout_bytes)
    assert r.exit_code == 0 and r.stdout_bytes == data
    # --quantizer, refused for a CSV file of one container, was ignored in a stream (exit 0)
    for size in (len(data), len(data) // 4):
        monkeypatch.setattr(F, "FRAME_BYTES", size)
        r = CliRunner().invoke(main, ["compress", str(src), "-o", str(tmp_path / "q.ubpe"),
                                      "--quantizer", "mulaw"])
        assert r.exit_code == 1 and "--quantizer applies to arrays and WAV" in r.stderr, r.output
        assert not (tmp_path / "q.ubpe").exists()
    # a truncated stream: exit 1, one line, no output file
    (tmp_path / "cut.csv.ubpe").write_bytes(packed[:-7])
    r = CliRunner().invoke(main, ["decompress", str(tmp_path / "cut.csv.ubpe")])
    assert r.exit_code == 1 and "Traceback" not in r.output and "end marker" in r.stderr
    assert not (tmp_path / "cut.csv").exists()


# ------------------------------------- frames in worker processes (compress), threads (decompress)
@pytest.mark.parametrize("threads, level", [(2, 1), (3, 1), (2, 5)])
def test_threads_give_the_same_stream_and_text(threads, level):
    # (the later frames take the first frame's plans: the first frame is coded before the workers)
    data = (DATA / "seattle_weather_150.csv").read_bytes()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 7, level=level)
    out = io.BytesIO()
    got = F.compress_csv_stream(io.BytesIO(data), out, frame_bytes=len(data) // 7, level=level,
                                threads=threads)
    assert out.getvalue() == packed and got == info and info["frames"] >= 6
    back = io.BytesIO()
    assert F.decompress_file_stream(io.BytesIO(packed), back, threads=threads)["frames"] == \
        info["frames"]
    assert back.getvalue() == data


def test_threads_report_the_first_damaged_frame_after_the_frames_before_it():
    data = (DATA / "daphnet_accel_150.csv").read_bytes()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 5)
    frames = list(iter_stream_frames(io.BytesIO(packed)))
    good = io.BytesIO()
    F.decompress_file_stream(io.BytesIO(packed), good)
    assert len(frames) >= 4
    for k in (1, 2):  # with threads=2, frames are decoded two at a time (either may be first done)
        bad = bytearray(frames[k])
        bad[len(bad) // 2] ^= 0xFF  # the section checksums catch it
        spliced = io.BytesIO()
        F.container.write_stream_head(spliced)
        for j, f in enumerate(frames):
            F.container.write_stream_frame(spliced, bytes(bad) if j == k else f)
        F.container.write_stream_end(spliced, len(frames))
        for threads in (1, 2):
            back = io.BytesIO()
            with pytest.raises(SignalFormatError):
                F.decompress_file_stream(io.BytesIO(spliced.getvalue()), back, threads=threads)
            written = back.getvalue()
            assert len(written) > 0 and good.getvalue().startswith(written)
            assert F.decompress_file_stream(io.BytesIO(packed), io.BytesIO(),
                                           threads=threads)["frames"] == len(frames)


def test_decompress_threads_stay_in_this_process(monkeypatch):
    """Decompression runs its frames in a thread pool (every kernel releases the GIL), so its
    memory is one process's: no process pool is made."""
    import concurrent.futures

    def no_processes(*args, **kwargs):
        raise AssertionError("decompress started worker processes")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_processes)
    data = (DATA / "daphnet_accel_150.csv").read_bytes()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 6)
    for threads in (2, 3, 8):
        back = io.BytesIO()
        assert F.decompress_file_stream(io.BytesIO(packed), back, threads=threads)["frames"] == \
            info["frames"]
        assert back.getvalue() == data


def test_threads_name_a_damaged_frame_before_a_later_break_in_the_stream():
    """Frame 1 damaged, the stream cut inside frame 2: frame 1's error comes first with
    threads=2 too (frames 1 and 2 are read before either is decoded; the break is raised in
    its place)."""
    data = (DATA / "daphnet_accel_150.csv").read_bytes()
    packed, _ = stream_round_trip(data, frame_bytes=len(data) // 5)
    frames = list(iter_stream_frames(io.BytesIO(packed)))
    bad = bytearray(frames[1])
    bad[len(bad) // 2] ^= 0xFF
    spliced = io.BytesIO()
    F.container.write_stream_head(spliced)
    for f in (frames[0], bytes(bad), frames[2]):
        F.container.write_stream_frame(spliced, f)
    cut = spliced.getvalue()[:-10]  # frame 2 ends short: a truncated stream
    errors = []
    for threads in (1, 2):
        with pytest.raises(SignalFormatError) as e:
            F.decompress_file_stream(io.BytesIO(cut), io.BytesIO(), threads=threads)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "truncated" not in errors[0]


def test_cli_threads(tmp_path, monkeypatch):
    data = (DATA / "seattle_weather_150.csv").read_bytes()
    monkeypatch.setattr(F, "FRAME_BYTES", len(data) // 4)
    src = tmp_path / "big.csv"
    src.write_bytes(data)
    outs = []
    for t in ("1", "2", "0"):
        r = CliRunner().invoke(main, ["compress", str(src), "--level", "1", "-T", t, "-o",
                                      str(tmp_path / f"{t}.ubpe")])
        assert r.exit_code == 0, r.output
        outs.append((tmp_path / f"{t}.ubpe").read_bytes())
        r = CliRunner().invoke(main, ["decompress", str(tmp_path / f"{t}.ubpe"), "--threads", t,
                                      "-o", str(tmp_path / f"{t}.csv")])
        assert r.exit_code == 0, r.output
        assert (tmp_path / f"{t}.csv").read_bytes() == data
    assert outs[0] == outs[1] == outs[2] and F.is_stream(outs[0])
    r = CliRunner().invoke(main, ["compress", str(src), "-T", "-1"])
    assert r.exit_code == 2


@pytest.mark.slow
def test_threads_through_a_fork_server(monkeypatch):
    """Where forking is not used (not Linux), workers start afresh: the same bytes."""
    import multiprocessing as mp
    monkeypatch.setattr(F, "_pool_context", lambda: mp.get_context("forkserver"))
    data = (DATA / "seattle_weather_150.csv").read_bytes()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 5)
    out = io.BytesIO()
    F.compress_csv_stream(io.BytesIO(data), out, frame_bytes=len(data) // 5, level=1, threads=2)
    assert out.getvalue() == packed
    back = io.BytesIO()
    F.decompress_file_stream(io.BytesIO(packed), back, threads=2)
    assert back.getvalue() == data


def test_later_frames_are_coded_with_the_first_frames_plans():
    from signals import container
    from signals.codec import column_plans
    rng = np.random.default_rng(3)
    n = 6000
    cycle = np.round(300 * np.maximum(0, np.sin(np.arange(n) / 48 * np.pi))).astype(int)
    rows = [f"{i},{cycle[i]},{v},{w / 10:.1f}" for i, (v, w) in enumerate(zip(
        np.cumsum(rng.integers(-3, 4, n)), rng.integers(0, 400, n)))]
    data = ("t,cycle,walk,noise\n" + "\n".join(rows) + "\n").encode()
    packed, info = stream_round_trip(data, frame_bytes=len(data) // 3, level=5)
    frames = list(container.iter_stream_frames(io.BytesIO(packed)))
    assert len(frames) >= 3
    plans = [column_plans(*container.read_container(f)[:2]) for f in frames]
    assert plans[0] and plans[1].keys() == plans[0].keys()  # (a last short frame may hold constants)

    def choices(p):  # what a plan fixes (its bits per sample differ from frame to frame)
        return None if p is None else (p.mode, p.mh, p.t, p.lms, p.lpc, choices(p.head),
                                       choices(p.body))
    for later in plans[1:]:
        assert {k: choices(v) for k, v in later.items()} == \
            {k: choices(plans[0][k]) for k in later}


def test_a_row_longer_than_arrows_block_is_read():
    # (a cell above about 2 MiB: 'straddling object straddles two block boundaries', exit 1)
    data = b"id,note,v\n1,short,5\n2," + b"ab" * (5 << 19) + b",6\n3,x,7\n"
    assert F.decompress_file(F.compress_file(data, "csv", level=1)).data == data


def test_a_damaged_frame_is_named():
    data = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * 7 % 13) for i in range(600))
    stream, info = stream_round_trip(data, 500)
    frames = list(iter_stream_frames(io.BytesIO(stream)))
    at = stream.index(frames[2]) + len(frames[2]) // 2
    bad = bytearray(stream)
    bad[at] ^= 0xFF
    with pytest.raises(SignalFormatError, match="^frame 2: "):
        F.decompress_file_stream(io.BytesIO(bytes(bad)), io.BytesIO())


def test_a_long_cell_among_many_rows_is_printed_in_small_pieces():
    # (the row printer sized its buffer as 4096 rows times the longest category entry: a 2.5 MB
    # cell among 5,000 rows asked for 10 GB, a MemoryError)
    rows = b"".join(b"%d,%d.%02d,ok\n" % (i, i // 4, i % 4 * 25) for i in range(5000))
    data = b"t,v,note\n" + rows + b"5000,1.25," + b"ab" * (5 << 18) + b"\n" + rows
    import tracemalloc
    F.decompress_file(F.compress_file(data[:data.index(b"\n", 3000) + 1], "csv", level=1))  # warm
    tracemalloc.start()
    try:
        packed = F.compress_file(data, "csv", level=1)
        assert F.decompress_file(packed).data == data
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 30, f"{peak / 2**20:.0f} MiB"  # (a machine that overcommits let 10 GB pass)


def test_inspect_of_a_csv_stream_gives_its_columns_and_bound(tmp_path, monkeypatch):
    # (it listed frames only: no column's kind, nothing of a bound)
    src = tmp_path / "x.csv"
    noise = np.random.default_rng(0).integers(0, 60, 3000)  # (noise: where binning pays)
    src.write_bytes(b"t,v\n" + b"".join(b"%d,%d.%02d\n" % (i, i % 7, n) for i, n in
                                        enumerate(noise)))
    monkeypatch.setattr(F, "FRAME_BYTES", 4000)
    r = CliRunner()
    res = r.invoke(main, ["compress", str(src), "--max-error", "0.05", "-q"])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["inspect", str(tmp_path / "x.csv.ubpe")])
    assert res.exit_code == 0 and "frames of csv" in res.stdout
    assert "decimal columns within 0.05" in res.stdout and "2 digits after the point" in res.stdout
    assert "model " not in res.stdout
    # a stream made with a model says so, as one container does (it said nothing)
    model = SignalModel(64, 70, progress=False).fit([np.arange(3000) % 7], names=["v"])
    model.save(tmp_path / "m.json")
    res = r.invoke(main, ["compress", str(src), "--model", str(tmp_path / "m.json"), "-q",
                          "-o", str(tmp_path / "m.ubpe")])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["inspect", str(tmp_path / "m.ubpe")])
    assert res.exit_code == 0 and f"model        {model.content_id()} (decompress with " \
        f"--model)" in res.stdout, res.stdout


def test_a_stray_quote_keeps_the_pieces_small():
    """One stray quote near the top of a CSV under 4 pieces made the whole file one piece
    (an 18 MB file: one frame of text, 644 MB peak); its piece is now cut at a line end."""
    import io

    from signals.files import csv_pieces
    lines = [b"t,a,b\n", b'1,5",7\n'] + [b"%d,%d,%d\n" % (i, i % 7, i % 11) for i in range(400)]
    data = b"".join(lines)
    assert 3000 < len(data) < 4 * 1000
    pieces = list(csv_pieces(io.BytesIO(data), frame_bytes=1000))
    assert b"".join(pieces) == data and all(p.endswith(b"\n") for p in pieces)
    assert max(len(p) for p in pieces) <= 1000 + 20


def test_frames_moved_missing_or_repeated_are_errors():
    """A stream's frames swapped, dropped or repeated decoded with exit 0 to other bytes: each
    later frame now says where in the file it starts."""
    data = (DATA / "daphnet_accel_150.csv").read_bytes()
    packed, _ = stream_round_trip(data, frame_bytes=len(data) // 4)
    f = list(iter_stream_frames(io.BytesIO(packed)))
    assert len(f) >= 4
    for frames in ([f[0], f[2], f[1]] + f[3:], [f[0]] + f[2:], [f[0], f[1], f[1]] + f[2:]):
        out = io.BytesIO()
        F.container.write_stream_head(out)
        for x in frames:
            F.container.write_stream_frame(out, x)
        F.container.write_stream_end(out, len(frames))
        with pytest.raises(SignalFormatError, match="frames moved, missing or repeated"):
            F.decompress_file_stream(io.BytesIO(out.getvalue()), io.BytesIO())


def test_a_lossy_stream_decodes():
    """Frames said where in the file they started (bytes of the input): a --max-error frame
    decodes to shorter text, and every lossy stream of more than one frame was refused."""
    data = (DATA / "seattle_weather_150.csv").read_bytes()
    out = io.BytesIO()
    F.compress_csv_stream(io.BytesIO(data), out, frame_bytes=len(data) // 4, max_error=0.5)
    back = io.BytesIO()
    assert F.decompress_file_stream(io.BytesIO(out.getvalue()), back)["frames"] >= 4
    rows_in = [r.split(b",") for r in data.splitlines()[1:]]
    rows_out = [r.split(b",") for r in back.getvalue().splitlines()[1:]]
    assert len(rows_in) == len(rows_out)
    for a, b in zip(rows_in, rows_out):
        assert a[0] == b[0] and abs(float(a[1]) - float(b[1])) <= 0.5 + 1e-9
