import io
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import signals
from signals import SignalModel, read_csv
from ubpe.cli import main
from ubpe.cli._common import csv_text, same_file, strip_suffix_name, suffix_name

MAGIC = b"UBPE-SIG"


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def no_traceback(r):
    return "Traceback" not in r.output and r.exception is None or isinstance(r.exception,
                                                                              SystemExit)


# ------------------------------------------------------------------- build
def test_build_on_real_daphnet(tmp_path, daphnet_csv):
    out = tmp_path / "daphnet.ubpe.json"
    r = run("build", daphnet_csv, "--exclude", "is_anomaly", "--vocab-size", 2048,
            "--doc-length", 1000, "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""  # the summary goes to stderr
    err = r.stderr
    assert "skipped      daphnet_accel.csv: timestamp (not numeric)" in err
    assert "channels     9\n" in err and "samples      63,360" in err
    assert "documents    72" in err  # 9 channels x ceil(7040 / 1000)
    assert "vocabulary   2,048 tokens (1,024 alphabet + 1,024 merges)" in err
    assert "samples per token" in err and "wall time" in err and "content id sha256:" in err
    assert "(bound" not in err  # per-channel lines need -v
    model = SignalModel.load(out)
    assert len(model.channel_names_) == 9 and model.tokenizer_.n_tokens_ == 2048
    doc = json.loads(out.read_text())
    assert doc["format"] == "ubpe.signal-model" and doc["version"] == 3
    assert doc["content_id"] == model.content_id()


def test_a_model_built_from_several_files_compresses_each(tmp_path):
    # files of the same columns: one channel a column (they were named "file:column", and
    # the model did not load); a file compresses with it, and comes back exact
    src = Path(__file__).parent / "data" / "daphnet_accel_150.csv"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_bytes(src.read_bytes())
    b.write_bytes(src.read_bytes())
    model = tmp_path / "ab.json"
    assert run("build", a, b, "-q", "-o", model).exit_code == 0
    loaded = SignalModel.load(model)
    assert loaded.channel_names_[0] == "ankle_horiz_fwd" and loaded.codec_
    r = run("compress", "--model", model, a, "-q")
    assert r.exit_code == 0, r.output
    r = run("decompress", "--model", model, tmp_path / "a.csv.ubpe", "-o", tmp_path / "back.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "back.csv").read_bytes() == a.read_bytes()


def test_empty_standard_input_compresses_and_reports_success(tmp_path):
    # (the summary used to stat a file named '-' after writing the output: exit 1, output kept)
    out = tmp_path / "e.ubpe"
    r = run("compress", "-", "-o", out, input=b"")
    assert r.exit_code == 0, r.output
    assert ": 0 -> " in r.stderr
    r = run("decompress", out, "-c")
    assert r.exit_code == 0 and r.stdout_bytes == b""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_outputs_to_dev_null_and_to_a_fifo_are_written_in_place(tmp_path):
    # a rename would put a regular file in place of the device or the pipe (as root, even of
    # /dev/null); xz and zstd write into them, and need no -f there
    import stat
    import threading
    src = Path(__file__).parent / "data" / "seattle_temps_150.csv"
    r = run("compress", src, "-o", os.devnull, "-q")
    assert r.exit_code == 0, r.output
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = run("compress", src, "-o", fifo, "-q")
    reader.join(timeout=60)
    assert r.exit_code == 0, r.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the pipe
    assert not list(tmp_path.glob(".pipe.*"))  # no temporary file left
    (tmp_path / "got.ubpe").write_bytes(got[0])
    r = run("decompress", tmp_path / "got.ubpe", "-o", tmp_path / "back.csv")
    assert r.exit_code == 0 and (tmp_path / "back.csv").read_bytes() == src.read_bytes()


def test_zero_dimensional_arrays_keep_their_shape(tmp_path):
    # (a 0-d array came back with shape (1,): np.ascontiguousarray gives at least one dimension)
    np.save(tmp_path / "z.npy", np.array(5))
    np.savez(tmp_path / "zz.npz", a=np.array(7, np.int16), b=np.arange(3))
    for name in ("z.npy", "zz.npz"):
        assert run("compress", tmp_path / name, "-q").exit_code == 0
        r = run("decompress", tmp_path / f"{name}.ubpe", "-o", tmp_path / f"back_{name}", "-q")
        assert r.exit_code == 0, r.output
    assert (tmp_path / "back_z.npy").read_bytes() == (tmp_path / "z.npy").read_bytes()
    with np.load(tmp_path / "back_zz.npz") as z:
        assert z["a"].shape == () and z["a"].dtype == np.int16 and int(z["a"]) == 7
        assert z["b"].tolist() == [0, 1, 2]


def test_decompressed_names_a_packet_stream_npy_and_refuses_to_guess(tmp_path):
    src = Path(__file__).parent / "data" / "daphnet_accel_150.csv"
    (tmp_path / "d.csv").write_bytes(src.read_bytes())
    model = tmp_path / "m.json"
    assert run("build", tmp_path / "d.csv", "-q", "-o", model).exit_code == 0
    assert run("compress", "--model", model, "--packet-size", 64, tmp_path / "d.csv",
               "-q").exit_code == 0
    # a packet stream gives the channels as a .npy file: named so (it was d.csv, over the input's
    # name, or refused as existing)
    r = run("decompress", "--model", model, tmp_path / "d.csv.ubpe")
    assert r.exit_code == 0, r.output
    assert np.load(tmp_path / "d.npy").shape[1] == 149
    assert (tmp_path / "d.csv").read_bytes() == src.read_bytes()
    # a name without .ubpe cannot name its output: said so (it said "is an input")
    (tmp_path / "d.csv.ubpe").rename(tmp_path / "renamed.bin")
    r = run("decompress", "--model", model, tmp_path / "renamed.bin")
    assert r.exit_code == 1 and "does not end in .ubpe" in r.output and no_traceback(r)
    r = run("decompress", "--model", model, tmp_path / "renamed.bin", "-o", tmp_path / "x.npy")
    assert r.exit_code == 0 and np.array_equal(np.load(tmp_path / "x.npy"),
                                               np.load(tmp_path / "d.npy"))


def test_build_quiet_verbose_and_stdout(tmp_path, ecg_csv):
    r = run("build", ecg_csv, "--levels", 512, "--vocab-size", 1024, "-q", "-o",
            tmp_path / "ecg.json")
    assert r.exit_code == 0 and r.output == ""
    r = run("build", ecg_csv, "--levels", 512, "--vocab-size", 1024, "-v", "-o",
            tmp_path / "ecg2.json")
    assert r.exit_code == 0, r.output
    assert "ecg_mV" in r.stderr and "samples      108,000" in r.stderr and "(bound" in r.stderr
    r = run("build", ecg_csv, "--levels", 512, "--vocab-size", 1024, "-q", "-c")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["content_id"] == json.loads((tmp_path / "ecg.json").read_text())["content_id"]


def test_help_documents_options():
    r = run("build", "--help")
    assert r.exit_code == 0
    for opt in ("--columns", "--exclude", "--levels", "--vocab-size", "--n-candidates",
                "--doc-length", "--min-frequency", "Samples per training document",
                "--force", "--stdout", "--keep", "--quiet", "--verbose"):
        assert opt in r.output


@pytest.mark.parametrize("content, extra, message", [
    (None, [], "No such file or directory"),
    ("t,a\nmon,1\ntue,2\n", ["--columns", "t"], "column 't': the column is not numeric"),
    ("a,b\n1,2\n3,nan\n", [], "line 3, column 'b': non-finite value 'nan'"),
    ("", [], "the file is empty"),
    ("a,b\n", [], "no data rows"),
])
def test_build_errors_are_one_line_and_leave_no_model(tmp_path, content, extra, message):
    src = tmp_path / "in.csv"
    if content is not None:
        src.write_text(content)
    out = tmp_path / "model.json"
    r = run("build", src, *extra, "-q", "-o", out)
    assert r.exit_code == 1
    assert message in r.output
    assert len(r.output.strip().splitlines()) == 1 and r.output.startswith(("ubpe: ", "Error: "))
    assert no_traceback(r)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["in.csv"] if content is not None else [])


# ---------------------------------------------------------- encode / decode
@pytest.fixture(scope="module")
def daphnet_model(tmp_path_factory, daphnet_csv):
    out = tmp_path_factory.mktemp("model") / "daphnet.json"
    r = run("build", daphnet_csv, "--exclude", "is_anomaly", "--vocab-size", 2048, "-q",
            "-o", out)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("method", ["merges", "shortest", "weighted"])
def test_encode_decode_round_trip_on_real_csv(tmp_path, daphnet_csv, daphnet_model, method):
    tokens, back = tmp_path / "t.npz", tmp_path / "back.csv"
    r = run("encode", daphnet_model, daphnet_csv, "--method", method, "-o", tokens)
    assert r.exit_code == 0, r.output
    assert f"method {method}" in r.stderr
    r = run("decode", daphnet_model, tokens, "-o", back)
    assert r.exit_code == 0, r.output
    model = SignalModel.load(daphnet_model)
    orig, got = read_csv(daphnet_csv, exclude=["is_anomaly"]), read_csv(back)
    assert got.names == orig.names
    decoded = model.decode(model.encode(orig.channels))
    for a, b in zip(decoded, got.channels):
        assert np.array_equal(a, b)  # exact: floats are written with their shortest repr


def test_encode_decode_through_pipes(daphnet_csv, daphnet_model):
    r = CliRunner().invoke(main, ["encode", str(daphnet_model), "-", "-c", "-q"],
                           input=daphnet_csv.read_bytes())
    assert r.exit_code == 0, r.output
    tokens = r.stdout_bytes
    assert tokens[:4] == b"PK\x03\x04"
    r = CliRunner().invoke(main, ["decode", str(daphnet_model), "-", "-o", "-", "-q"],
                           input=tokens)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("ankle_horiz_fwd,ankle_vert,")


def test_encode_of_a_value_outside_the_model_names_the_file(tmp_path, daphnet_csv, daphnet_model):
    """The message named the channel and sample alone ("channel 'ankle_horiz_fwd', sample 0:
    value 999999 is outside the fitted range"), not the file."""
    lines = daphnet_csv.read_text().splitlines()
    cells = lines[1].split(",")
    cells[1] = "999999"  # (ankle_horiz_fwd: cells[0] is the timestamp)
    bad = tmp_path / "oor.csv"
    bad.write_text("\n".join([lines[0], ",".join(cells)] + lines[2:]) + "\n")
    r = run("encode", daphnet_model, bad, "-o", tmp_path / "t.npz")
    assert r.exit_code == 1 and not (tmp_path / "t.npz").exists()
    assert f"ubpe: {bad}: channel 'ankle_horiz_fwd', sample 0: value 999999" in r.stderr


def test_encode_top_n_writes_alternatives(tmp_path, daphnet_csv, daphnet_model):
    tokens = tmp_path / "t.npz"
    r = run("encode", daphnet_model, daphnet_csv, "--method", "weighted", "--top-n", 3,
            "-o", tokens)
    assert r.exit_code == 0, r.output
    model = SignalModel.load(daphnet_model)
    with np.load(tokens) as z:
        name = model.channel_names_[0]
        scores = z[f"scores/{name}"]
        assert scores.shape == (1, 3) and (np.diff(scores, axis=1) <= 1e-12).all()
        best = model.tokenizer_.decode(z[f"tokens/{name}"])
        assert np.array_equal(model.tokenizer_.decode(z[f"alt2/{name}"]), best)
    r = run("encode", daphnet_model, daphnet_csv, "--top-n", 2, "-f", "-o", tokens)
    assert r.exit_code == 2 and "--top-n above 1 needs --method weighted" in r.output


def test_inspect_and_decode_errors(tmp_path, daphnet_model):
    r = run("inspect", daphnet_model)
    assert r.exit_code == 0 and "2,048 tokens (1,024 alphabet + 1,024 merges)" in r.output
    assert "version 3" in r.stdout and "(checksum verified)" in r.stdout
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    r = run("decode", daphnet_model, bad, "-o", tmp_path / "out.csv")
    assert r.exit_code == 1 and "not a token file" in r.output
    assert not (tmp_path / "out.csv").exists()
    r = run("inspect", bad)
    assert r.exit_code == 1 and "neither JSON nor a ubpe container" in r.output and no_traceback(r)
    edited = tmp_path / "edited.json"
    edited.write_text(daphnet_model.read_text().replace('"n_candidates": 8', '"n_candidates": 9'))
    r = run("inspect", edited)
    assert r.exit_code == 1 and "checksum mismatch" in r.output and no_traceback(r)
    r = run("encode", edited, tmp_path / "x.csv", "-o", tmp_path / "t.npz")
    assert r.exit_code == 1 and "checksum mismatch" in r.output


# ------------------------------------------------------- the habits of xz
@pytest.fixture
def csv_file(tmp_path):
    p = tmp_path / "in.csv"
    p.write_text("time,a,b\n" + "".join(f"2024-01-0{i % 9 + 1},{i},{i * i % 7}\n"
                                        for i in range(200)))
    return p


@pytest.fixture
def columns_csv(tmp_path):
    """A CSV whose columns code smaller than the whole file does under zstd or LZMA2 (a random
    walk: no repeats for them to find; ``csv_file`` repeats every 63 rows)."""
    p = tmp_path / "walk.csv"
    w = np.cumsum(np.random.default_rng(0).integers(-3, 4, 1000))
    p.write_text("time,a,b\n" + "".join(f"2024-01-0{i % 9 + 1},{w[i]},{i * i % 7}\n"
                                        for i in range(1000)))
    return p


def test_output_equal_to_input_is_refused_even_with_force(tmp_path, csv_file):
    # issue 13, item 1: 'ubpe compress in.csv -o in.csv' destroyed its input
    before = csv_file.read_bytes()
    os.link(csv_file, tmp_path / "hard.csv")
    (tmp_path / "sym.csv").symlink_to(csv_file)
    for out in (csv_file, tmp_path / "." / "in.csv", tmp_path / "hard.csv",
                tmp_path / "sym.csv"):
        for extra in ([], ["-f"]):
            r = run("compress", csv_file, "-o", out, *extra)
            assert r.exit_code == 1, (out, r.output)
            assert "is an input; it is never overwritten" in r.output and no_traceback(r)
            assert csv_file.read_bytes() == before
    model = tmp_path / "m.json"
    assert run("build", csv_file, "-q", "--vocab-size", 1100, "-o", model).exit_code == 0
    r = run("compress", csv_file, "--model", model, "-o", model, "-f")
    assert r.exit_code == 1 and "is an input" in r.output
    r = run("decode", model, tmp_path / "t.npz", "-o", model, "-f")
    assert r.exit_code == 1 and "is an input" in r.output


def test_existing_output_needs_force(tmp_path, csv_file):
    out = tmp_path / "in.csv.ubpe"
    out.write_bytes(b"keep me")
    r = run("compress", csv_file)
    assert r.exit_code == 1 and "exists; use -f to overwrite it" in r.output
    assert out.read_bytes() == b"keep me"
    r = run("compress", csv_file, "-f", "-q")
    assert r.exit_code == 0 and r.output == ""
    assert out.read_bytes()[:8] == MAGIC
    assert csv_file.exists()  # -k is the default: inputs are never deleted
    r = run("compress", csv_file, "-f", "-k", "-q")
    assert r.exit_code == 0 and csv_file.exists()


def test_same_names_in_different_folders_never_collide(tmp_path):
    # issue 13, item 8
    data = {}
    for folder, k in (("a", 3), ("b", 5)):
        (tmp_path / folder).mkdir()
        p = tmp_path / folder / "x.csv"
        p.write_text("v\n" + "".join(f"{i * k % 11}\n" for i in range(100)))
        data[folder] = p.read_bytes()
    r = run("compress", tmp_path / "a" / "x.csv", tmp_path / "b" / "x.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a" / "x.csv.ubpe").exists() and (tmp_path / "b" / "x.csv.ubpe").exists()
    for folder in data:
        (tmp_path / folder / "x.csv").unlink()
    r = run("decompress", tmp_path / "a" / "x.csv.ubpe", tmp_path / "b" / "x.csv.ubpe")
    assert r.exit_code == 0, r.output
    for folder, content in data.items():
        assert (tmp_path / folder / "x.csv").read_bytes() == content
    # the same file given twice, spelled two ways, would collide: refused before any write
    r = run("compress", tmp_path / "a" / "x.csv.ubpe", tmp_path / "a" / "." / "x.csv.ubpe")
    assert r.exit_code == 2 and "would both be written to" in r.output
    assert not (tmp_path / "a" / "x.csv.ubpe.ubpe").exists()


def test_output_names():
    assert suffix_name(Path("a/x.csv"), ".ubpe") == Path("a/x.csv.ubpe")
    assert strip_suffix_name(Path("a/x.csv.ubpe"), ".ubpe", ".csv") == Path("a/x.csv")
    assert strip_suffix_name(Path("a/x.wav.ubpe"), ".ubpe", ".csv") == Path("a/x.wav.csv")
    assert strip_suffix_name(Path("a/x.UBPE"), ".ubpe", ".csv") == Path("a/x.csv")
    assert strip_suffix_name(Path("x.bin"), ".ubpe", ".csv") == Path("x.bin.csv")
    assert strip_suffix_name(Path(".ubpe"), ".ubpe", ".csv") == Path(".ubpe.csv")
    assert same_file("-", "-") is False


def test_stdin_and_stdout(tmp_path, csv_file):
    runner = CliRunner()
    r = runner.invoke(main, ["compress", "-", "-q"], input=csv_file.read_bytes())
    assert r.exit_code == 0, r.output
    packed = r.stdout_bytes
    assert packed[:8] == MAGIC and r.stderr == ""
    r = runner.invoke(main, ["decompress", "-"], input=packed)
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == csv_file.read_bytes()  # every column, byte for byte
    assert f"<stdin>: {len(packed):,} -> {len(csv_file.read_bytes()):,} bytes; wrote standard output" \
        in r.stderr
    r = runner.invoke(main, ["compress", str(csv_file), "-c", "-q"])
    assert r.exit_code == 0 and r.stdout_bytes[:8] == MAGIC
    assert not (tmp_path / "in.csv.ubpe").exists()
    r = runner.invoke(main, ["compress", str(csv_file), "-o", "-", "-q"])
    assert r.exit_code == 0 and r.stdout_bytes[:8] == MAGIC
    r = runner.invoke(main, ["inspect", "-"], input=packed)
    assert r.exit_code == 0 and "source       csv, stored whole (" in r.stdout


def test_a_small_csv_stored_whole_where_that_is_smaller(tmp_path, csv_file, columns_csv):
    """A CSV file that repeats itself (``csv_file``: every 63 rows) is stored whole by zstd or
    LZMA2, and says so; one whose columns code smaller keeps them."""
    raw = csv_file.read_bytes()
    r = run("compress", csv_file)
    assert r.exit_code == 0, r.output
    packed = (tmp_path / "in.csv.ubpe").read_bytes()
    columns = signals.compress_file(raw, "csv", allow_verbatim=False)
    assert len(packed) < len(columns)
    assert re.search(r"in.csv: 3,\d{3} -> \d+ bytes \(\d+.\d\dx, csv, stored whole \((zstd|lzma2)\): "
                     r"smaller than coding its columns\) lossless; wrote", r.stderr), r.stderr
    r = run("inspect", tmp_path / "in.csv.ubpe")
    assert "stored whole" in r.stdout and "every byte exact" in r.stdout
    assert run("decompress", tmp_path / "in.csv.ubpe", "-c").stdout_bytes == raw
    r = run("compress", columns_csv)
    assert "x, csv, 3 columns, 3,000 values) lossless; wrote" in r.stderr, r.stderr
    r = run("inspect", tmp_path / "walk.csv.ubpe")
    assert "3, 3,000 values" in r.stdout and "timestamp" in r.stdout


def read_csv_text(text):
    lines = text.strip().splitlines()
    names = lines[0].split(",")
    cols = list(zip(*(map(int, line.split(",")) for line in lines[1:])))
    return {n: list(c) for n, c in zip(names, cols)}


def test_usage_errors_exit_2(tmp_path, csv_file):
    other = tmp_path / "other.csv"
    other.write_text("v\n1\n2\n")
    for args in (["compress", csv_file, other, "-o", tmp_path / "x.ubpe"],
                 ["compress", csv_file, other, "-c"],
                 ["compress", csv_file, "-c", "-o", tmp_path / "x.ubpe"],
                 ["compress", "-", "-"],
                 ["compress", csv_file, "--no-such-option"],
                 ["build", csv_file],
                 ["decompress"]):
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        assert no_traceback(r)
    assert not list(tmp_path.glob("*.ubpe"))


def test_bad_inputs_exit_1_after_trying_every_input(tmp_path, csv_file):
    bad = tmp_path / "bad.ubpe"
    bad.write_bytes(MAGIC + b"\x01\x00" + b"\xff" * 40)
    good = tmp_path / "good.csv.ubpe"
    assert run("compress", csv_file, "-o", good, "-q").exit_code == 0
    r = run("decompress", bad, good, tmp_path / "missing.ubpe")
    assert r.exit_code == 1
    assert f"ubpe: {bad}: checksum mismatch" in r.stderr
    assert "missing.ubpe" in r.stderr and "No such file" in r.stderr
    assert no_traceback(r)
    assert (tmp_path / "good.csv").exists() and not (tmp_path / "bad.csv").exists()
    r = run("decompress", bad, "-o", tmp_path / "x.csv", "-v")
    assert r.exit_code == 1 and "Traceback" in r.stderr  # -v shows the details


def test_compress_summary_and_warnings(tmp_path, columns_csv):
    r = run("compress", columns_csv)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    assert "warning: " not in r.stderr  # every column is kept, the date column too
    assert "x, csv, 3 columns, 3,000 values) lossless; wrote" in r.stderr
    assert "wall time" not in r.stderr
    r = run("compress", columns_csv, "-f", "-v")
    assert "wall time" in r.stderr and "lossless" in r.stderr
    r = run("compress", columns_csv, "-f", "-q")
    assert r.output == ""


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_outputs_follow_the_umask(tmp_path, csv_file, mask, mode):
    old = os.umask(mask)
    try:
        assert run("compress", csv_file, "-q").exit_code == 0
        assert run("decompress", tmp_path / "in.csv.ubpe", "-o", tmp_path / "b.csv").exit_code == 0
    finally:
        os.umask(old)
    assert (tmp_path / "in.csv.ubpe").stat().st_mode & 0o777 == mode
    assert (tmp_path / "b.csv").stat().st_mode & 0o777 == mode


def test_csv_text_is_exact_and_quotes_the_header():
    text = csv_text(["a,b", 'say "hi"', "n"],
                    [np.array([0.1, 1e308, -2.5e-300]), np.array([1 / 3, -0.0, 7.0]),
                     np.array([2**62, -5, 0])], [False, False, True])
    assert text.decode() == ('"a,b","say ""hi""",n\n'
                             "0.1,0.3333333333333333,4611686018427387904\n"
                             "1e+308,-0.0,-5\n"
                             "-2.5e-300,7.0,0\n")


def test_help_is_lazy_and_python_m_works():
    code = ("import sys\nfrom ubpe.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            "assert 'numba' not in sys.modules and 'scipy' not in sys.modules, 'heavy import'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "compress" in r.stdout
    r = subprocess.run([sys.executable, "-m", "ubpe", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "decompress" in r.stdout



@pytest.mark.parametrize("args", [["--help"], ["--version"], ["compress", "--help"]])
def test_help_to_a_reader_that_went_away_ends_as_sigpipe_ends_xz(args):
    """`ubpe --help | true`: click ended with status 1 (an error, to a script) where the
    group's own options print; every other command already ended with 141, as xz and zstd."""
    r, w = os.pipe()
    os.close(r)  # (no reader: the first write fails)
    with open(w, "wb") as out:
        p = subprocess.run([sys.executable, "-m", "ubpe", *args], stdout=out,
                           stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 141 and p.stderr == b""

def test_decompressing_a_csv_imports_no_arrow(tmp_path):
    # Arrow (about 50 ms to import) parses CSV files; decoding one without text columns (here
    # numbers, dates, times and categories: the TMY3 fixture) prints it from the kernels alone
    src = Path(__file__).parent / "data" / "pvlib_tmy3_723170_48h.csv"
    packed = tmp_path / "t.csv.ubpe"
    assert run("compress", src, "-o", packed, "-q").exit_code == 0
    code = ("import sys\nfrom ubpe.cli import main\ntry:\n"
            f"    main(['decompress', {str(packed)!r}, '-o', {str(tmp_path / 'back.csv')!r}, '-q'])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "assert 'pyarrow.lib' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "back.csv").read_bytes() == src.read_bytes()


def test_inspect_every_saved_format():
    frozen = Path(__file__).parent / "data" / "frozen"
    r = run("inspect", frozen / "tokenizer_v1.json", frozen / "tokenizer_v2.json",
            frozen / "byte_tokenizer_v1_checksum.json", frozen / "signal_model_v2.json")
    assert r.exit_code == 0, r.output
    assert "ubpe.tokenizer, version 1" in r.stdout and "(no checksum: version 1)" in r.stdout
    assert "ubpe.tokenizer, version 2" in r.stdout and "7 tokens (4 alphabet + 3 merges)" in r.stdout
    assert "ubpe.text-tokenizer" in r.stdout and "260 ordinary + 1 special" in r.stdout
    assert "ubpe.signal-model, version 2" in r.stdout and "saw, tri" in r.stdout
    assert r.stdout.count("(checksum verified)") == 3


def test_a_column_name_with_a_comma_comes_back(tmp_path):
    # issue 13, item 7: the decompressed header was broken
    src = tmp_path / "q.csv"
    src.write_text('"a,b","say ""hi""",c\n1,2,3\n4,5,6\n')
    assert run("compress", src, "-q").exit_code == 0
    src.rename(tmp_path / "orig.csv")
    r = run("decompress", tmp_path / "q.csv.ubpe", "-q")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "q.csv").read_text() == (tmp_path / "orig.csv").read_text()


def test_a_ragged_csv_names_its_line_and_leaves_no_output(tmp_path):
    # issue 12: a row that cannot be read is a clear error naming the line, with no output file
    src = tmp_path / "rag.csv"
    src.write_text("a,b\n1,2\n3\n4,5\n")
    r = run("compress", src)
    assert r.exit_code == 1 and "line 3: 1 fields, expected 2" in r.stderr
    assert "Traceback" not in r.output and not (tmp_path / "rag.csv.ubpe").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rag.csv"]  # no temporary file either


def test_packets_say_which_columns_they_leave_out(tmp_path):
    """A packet holds the model's channels only: a text, date or second column of one name
    was dropped without a word."""
    rng = np.random.default_rng(0)
    x = np.cumsum(rng.integers(-3, 4, 3000)) + 500
    (tmp_path / "hr.csv").write_text("hr\n" + "".join(f"{v}\n" for v in x))
    assert run("build", tmp_path / "hr.csv", "-o", tmp_path / "m.json", "-q").exit_code == 0
    (tmp_path / "more.csv").write_text("hr,label,date,hr\n" + "".join(
        f"{v},a{v % 3},2020-01-{1 + i % 28:02d},{v % 5}\n" for i, v in enumerate(x[:600])))
    r = run("compress", tmp_path / "more.csv", "--model", tmp_path / "m.json", "--packet-size",
            256, "-o", tmp_path / "p.pkt")
    assert r.exit_code == 0 and "warning: " in r.stderr and "left out of the packets, not " \
        "channels of the model: label, date, hr (a second column of that name)" in r.stderr
    r = run("decompress", tmp_path / "p.pkt", "--model", tmp_path / "m.json", "-o",
            tmp_path / "p.npy")
    assert r.exit_code == 0 and np.array_equal(np.load(tmp_path / "p.npy"), x[:600])
    r = run("compress", tmp_path / "hr.csv", "--model", tmp_path / "m.json", "--packet-size",
            256, "-o", tmp_path / "q.pkt")
    assert r.exit_code == 0 and "warning" not in r.stderr


def test_cli_habits_fifos_long_names_stdin_models_and_tracebacks(tmp_path):
    """A FIFO given to decompress without -o hung (its name was found by reading it); an
    output name of 240 bytes was refused ('File name too long': its temporary's name was
    longer); `inspect -` of a text tokenizer said 'not a ubpe model'; -v gave no traceback
    outside compress, decompress and inspect; plot named no file for a damaged container;
    a temporary copy of standard input stayed behind a signal."""
    import os
    import subprocess
    import sys

    from ubpe.serialization import TEMPORARY_FOLDERS, remove_temporary_files, temporary_folder
    packed = signals.compress_file(b"a\n1\n2\n", "csv")
    os.mkfifo(tmp_path / "p.csv.ubpe")
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(tmp_path / 'p.csv.ubpe')!r}, "
                                                     f"'wb').write({packed!r})"])
    r = subprocess.run([sys.executable, "-m", "ubpe", "decompress", str(tmp_path / "p.csv.ubpe")],
                       capture_output=True, timeout=60)
    writer.wait(timeout=60)
    assert r.returncode == 0 and (tmp_path / "p.csv").read_bytes() == b"a\n1\n2\n"
    long = tmp_path / ("a" * 240 + ".csv")
    long.write_bytes(b"a\n1\n2\n")
    r = run("compress", long, "-q")
    assert r.exit_code == 0 and (tmp_path / (long.name + ".ubpe")).exists(), r.output
    tok = Path(__file__).parent / "data" / "frozen" / "byte_tokenizer_v2.json"
    r = CliRunner().invoke(main, ["inspect", "-"], input=tok.read_bytes())
    assert r.exit_code == 0 and "format       ubpe.text-tokenizer" in r.stdout, r.output
    r = run("encode", "-v", tok, tmp_path / "none.csv", "-c")
    assert r.exit_code == 1 and "Traceback" in r.stderr
    (tmp_path / "bad.ubpe").write_bytes(packed[:10] + b"ag" + packed[12:])
    r = run("plot", tmp_path / "bad.ubpe", "-o", tmp_path / "pics")
    assert r.exit_code == 1 and f"ubpe: {tmp_path / 'bad.ubpe'}: " in r.stderr, r.stderr
    if os.path.exists("/dev/full"):  # (--help to a full disk: a traceback)
        with open("/dev/full", "wb") as full:
            r = subprocess.run([sys.executable, "-m", "ubpe", "--help"], stdout=full,
                               stderr=subprocess.PIPE, timeout=60)
        assert r.returncode == 1 and r.stderr.decode().strip() == \
            "ubpe: standard output: No space left on device"
    with temporary_folder() as folder:
        (Path(folder) / "stdin.csv").write_bytes(b"copy")
        remove_temporary_files()  # (what the signal handler calls)
        assert not Path(folder).exists() and folder not in TEMPORARY_FOLDERS


def test_an_input_whose_output_cannot_be_named_stops_only_itself(tmp_path):
    """`ubpe decompress x.ubpe foo.bin`: foo.bin's output has no name, and x.csv was not
    written either (xz goes on with the other inputs, and exits 1)."""
    (tmp_path / "x.ubpe").write_bytes(signals.compress_file(b"a\n1\n2\n", "csv"))
    (tmp_path / "foo.bin").write_bytes((tmp_path / "x.ubpe").read_bytes())
    r = run("decompress", tmp_path / "foo.bin", tmp_path / "x.ubpe")
    assert r.exit_code == 1 and "foo.bin: the name does not end in .ubpe" in r.stderr, r.stderr
    assert (tmp_path / "x.csv").read_bytes() == b"a\n1\n2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foo.bin", "x.csv", "x.ubpe"]


def test_csv_refusals_name_the_files_line_and_what_is_wrong(tmp_path, monkeypatch):
    """A quote that never closes was reported as a short row on the last line; in a stream, a
    ragged row's line was counted from its piece (its header copy included); a delimiter or
    comment of two characters was taken, and the file stored whole without a word."""
    (tmp_path / "q.csv").write_bytes(b"a,b\r\n1,2\r\n\"3,4\r\n5,6\r\n7,8\r\n")
    r = run("compress", tmp_path / "q.csv")
    assert r.exit_code == 1 and "q.csv, line 3: a quote opens a field that never closes: is a " \
        "closing quote missing?" in r.stderr, r.stderr
    for text, message in ((b"a,b,c\n1,2,3\n7,\"x\ny\"\n", "line 3: 2 fields, expected 3"),
                          (b"a,b,c\n1,2,3\n7,\"x,9\n", "line 3: a quote opens a field"),
                          (b'"a\nb",c\n1,2\n3\n', "line 4: 1 fields, expected 2")):
        (tmp_path / "q.csv").write_bytes(text)  # (a closed quote in a short last row; a quote
        # opened on the last line; a header over two lines)
        r = run("compress", tmp_path / "q.csv", "-f")
        assert r.exit_code == 1 and message in r.stderr, (text, r.stderr)
    rows = [f"{i},{i % 7}\n" for i in range(3000)]
    rows[2345] = "9,9,9\n"
    (tmp_path / "big.csv").write_text("a,b\n" + "".join(rows))
    monkeypatch.setattr(signals.files, "FRAME_BYTES", 4000)
    r = run("compress", tmp_path / "big.csv")
    assert r.exit_code == 1 and "(the piece at byte" in r.stderr and \
        "line 2347: 3 fields, expected 2" in r.stderr, r.stderr
    assert not (tmp_path / "big.csv.ubpe").exists()
    for option in ("--delimiter", "--comment"):
        r = run("compress", tmp_path / "q.csv", option, ";;")
        assert r.exit_code == 2 and "one character" in r.output, r.output
    with pytest.raises(ValueError, match="the delimiter must be one character"):
        signals.compress_file(b"a;;b\n1;;2\n", "csv", csv_options={"delimiter": ";;"})


def test_start_numba_skips_blas_and_leaves_scipy_importable():
    code = ("import sys\n"
            "from ubpe.cli._common import start_numba\n"
            "start_numba(); start_numba()\n"
            "assert 'numba.np.arraymath' in sys.modules\n"
            "assert sys.modules.get('scipy.linalg.cython_blas', 0) is not None\n"
            "import numpy as np, scipy.linalg\n"
            "assert abs(scipy.linalg.solve_toeplitz([2.0, 1.0], [3.0, 3.0]) - 1).max() < 1e-12\n"
            "from signals.table import _trailing_zeros\n"
            "assert _trailing_zeros(np.array([100, 7, -120], np.int64), 2).tolist() == [0, 2, 1]\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=Path(__file__).resolve().parent.parent,
                       env={**os.environ, "UBPE_AOT": "0"})  # numba's JIT (AOT imports no numba)
    assert r.returncode == 0, r.stderr


def test_token_files_name_their_model_and_each_alternative_its_documents(tmp_path):
    # (a token file decoded with another model gave other values, exit 0; alternatives kept
    # the best encoding's offsets, which do not cut them into documents)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("p,q\n" + "".join(f"{t % 7},{t % 5 * 3}\n" for t in range(300)))
    b.write_text("p,q\n" + "".join(f"{t % 9},{t % 4}\n" for t in range(300)))
    for f in (a, b):
        r = run("build", f, "--vocab-size", 1100, "--doc-length", 16, "-q", "-o", f"{f}.json")
        assert r.exit_code == 0, r.output
    r = run("encode", f"{a}.json", a, "-q", "-o", tmp_path / "t.npz", "--method", "weighted",
            "--top-n", 2)
    assert r.exit_code == 0, r.output
    with np.load(tmp_path / "t.npz") as z:
        assert str(z["model"]) == SignalModel.load(f"{a}.json").content_id()
        for n in ("p", "q"):
            ends = np.append(z[f"alt1_offsets/{n}"][1:], z[f"alt1/{n}"].size)
            assert len(ends) == len(z[f"offsets/{n}"]) and ends[-1] == z[f"alt1/{n}"].size
    r = run("decode", f"{b}.json", tmp_path / "t.npz", "-c")
    assert r.exit_code == 1 and "was encoded with the model" in r.stderr
    r = run("decode", f"{a}.json", a, "-c")
    assert r.exit_code == 1 and "not a token file" in r.stderr and no_traceback(r)
    (tmp_path / "c.csv").write_text("p,q\n1,2\n3,40\n")
    r = run("encode", f"{a}.json", tmp_path / "c.csv", "-c")
    assert r.exit_code == 1 and "channel 'q', sample 1: value 40" in r.stderr


def test_build_refuses_a_model_it_could_not_load(tmp_path):
    src = tmp_path / "x.csv"
    src.write_text("a,b\n" + "".join(f"{t % 7},{t % 5}\n" for t in range(100)))
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x.csv").write_text(src.read_text())
    for args, said in (((src, src), "is given twice"),
                       ((src, "--columns", "a,a"), "two channels would be named")):
        r = run("build", *args, "--vocab-size", 1100, "-q", "-o", tmp_path / "m.json", "-f")
        assert r.exit_code == 1 and said in r.stderr, args
        assert not (tmp_path / "m.json").exists()
    # (two files of one name in different folders, of the same columns: two recordings)
    r = run("build", src, tmp_path / "s" / "x.csv", "--vocab-size", 1100, "-q", "-o",
            tmp_path / "m.json")
    assert r.exit_code == 0 and SignalModel.load(tmp_path / "m.json").channel_names_ == ["a", "b"]
    # (of other columns: the channels 'x:a' and 'x:c' were built, and encode could not read
    # them back from the two files, each read for both; a review)
    (tmp_path / "s" / "x.csv").write_text("c\n" + "".join(f"{t % 3}\n" for t in range(100)))
    r = run("build", src, tmp_path / "s" / "x.csv", "--vocab-size", 1100, "-q", "-o",
            tmp_path / "m2.json")
    assert r.exit_code == 1 and "two files are named 'x'" in r.stderr
    assert not (tmp_path / "m2.json").exists()
    r = run("build", src, "--vocab-size", 300, "-o", tmp_path / "m.json")
    assert r.exit_code == 2 and "--levels" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_leaves_no_temporary_file(tmp_path, name):
    # (kill -TERM during a compress left .out.ubpe.XXXX.tmp behind; Ctrl-C printed a numba
    # SystemError traceback and exited 1; a SIGHUP left the temporary file)
    import signal
    import time
    src = tmp_path / "big.csv"
    rows = "".join(f"{i},{i * 7 % 1000}.{i % 10},{i % 13}\n" for i in range(400_000))
    src.write_text("a,b,c\n" + rows * 3)
    p = subprocess.Popen([sys.executable, "-m", "ubpe", "compress", str(src), "--level", "9",
                          "-o", str(tmp_path / "out.ubpe")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.ubpe.*")) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    if p.poll() is not None:
        pytest.skip("the compress ended before it could be stopped")
    sig = getattr(signal, name)
    p.send_signal(sig)
    assert p.wait(60) == 128 + sig and b"Traceback" not in p.stderr.read()
    assert not list(tmp_path.glob(".out.ubpe*")) and not (tmp_path / "out.ubpe").exists()


def test_decode_writes_one_source_file_of_a_multi_file_model(tmp_path):
    # (a model built on files of different lengths encoded them, and decode always refused)
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    x, y = tmp_path / "d1" / "x.csv", tmp_path / "d2" / "y.csv"
    x.write_text("a,b\n" + "".join(f"{t % 7},{t % 5}\n" for t in range(300)))
    y.write_text("c\n" + "".join(f"{t % 9}\n" for t in range(150)))
    m = tmp_path / "m.json"
    assert run("build", x, y, "--vocab-size", 1100, "-q", "-o", m).exit_code == 0
    assert run("encode", m, x, y, "-q", "-o", tmp_path / "t.npz").exit_code == 0
    r = run("decode", m, tmp_path / "t.npz", "-c")
    assert r.exit_code == 1 and "--file NAME (x, y)" in r.stderr
    r = run("decode", m, tmp_path / "t.npz", "--file", "y", "-c")
    assert r.exit_code == 0 and r.stdout == y.read_text()


def test_packet_streams_of_channels_with_different_dtypes(tmp_path):
    # (compress stacked the channels into one dtype, which the model refused; decompress of a
    # stream of such packets crashed with a traceback)
    t = np.arange(3000)
    a, b = (t % 50 * 3 - 70).astype(np.int16), (t * 7 % 1000 + 100000).astype(np.int32)
    SignalModel(64, 80, progress=False).fit([a, b], names=["a", "b"]).save(tmp_path / "m.json")
    np.savez(tmp_path / "x.npz", a=a, b=b)
    r = run("compress", tmp_path / "x.npz", "--model", tmp_path / "m.json", "--packet-size", 500,
            "-q", "-o", tmp_path / "x.pk.ubpe")
    assert r.exit_code == 0, r.output
    r = run("decompress", tmp_path / "x.pk.ubpe", "--model", tmp_path / "m.json", "-q")
    assert r.exit_code == 0, r.output
    back = np.load(tmp_path / "x.npy")  # (x.pk.ubpe: a packet stream -> x.npy)
    assert back.dtype == np.int32 and np.array_equal(back[0], a) and np.array_equal(back[1], b)


def test_decode_gives_back_constant_decimal_columns(tmp_path):
    """A constant 0.5 column was lossless, so written as an integer: 0 (and -2.75 as -2), exit 0."""
    csv = tmp_path / "const.csv"
    rng = np.random.default_rng(0)
    csv.write_text("x,gain,offset\n" + "".join(f"{v:.3f},0.5,-2.75\n" for v in rng.normal(size=200)))
    m, t = tmp_path / "m.json", tmp_path / "t.npz"
    assert run("build", csv, "-o", m, "-q").exit_code == 0
    assert run("encode", m, csv, "-o", t, "-q").exit_code == 0
    r = run("decode", m, t, "-c", "-q")
    assert r.exit_code == 0, r.output
    rows = [line.split(",") for line in r.stdout.splitlines()[1:]]
    assert {(g, o) for _, g, o in rows} == {("0.5", "-2.75")}


def test_one_existing_output_does_not_cancel_the_other_inputs(tmp_path):
    """As xz: q.csv.ubpe exists, so q is skipped with an error and p, r are still compressed
    (the whole batch stopped before any input was tried)."""
    for n in "pqr":
        (tmp_path / f"{n}.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "q.csv.ubpe").write_bytes(b"mine")
    r = run("compress", *(tmp_path / f"{n}.csv" for n in "pqr"))
    assert r.exit_code == 1 and f"ubpe: {tmp_path / 'q.csv.ubpe'} exists" in r.stderr
    assert (tmp_path / "p.csv.ubpe").exists() and (tmp_path / "r.csv.ubpe").exists()
    assert (tmp_path / "q.csv.ubpe").read_bytes() == b"mine"


def test_an_unreadable_zip_member_is_one_line_and_the_batch_goes_on(tmp_path):
    """A .npz member compressed with a method zipfile lacks: a NotImplementedError traceback,
    and the files after it were never compressed."""
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w") as f:
            np.lib.format.write_array(f, np.arange(1000))
    d = bytearray(buf.getvalue())
    i, j = d.find(b"PK\x03\x04"), d.find(b"PK\x01\x02")
    d[i + 8:i + 10] = d[j + 10:j + 12] = b"\x09\x00"  # (method 9: Deflate64)
    (tmp_path / "m9.npz").write_bytes(bytes(d))
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n3,4\n")
    r = run("compress", tmp_path / "m9.npz", tmp_path / "ok.csv")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"ubpe: {tmp_path / 'm9.npz'}: not a readable npz file" in r.stderr
    assert (tmp_path / "ok.csv.ubpe").exists()


def test_a_write_error_names_the_output_not_its_temporary_file(tmp_path, monkeypatch):
    """A read-only folder: 'ubpe: /dir/.r.csv.ubpe.xl44gqfz.tmp: Permission denied'."""
    import os
    real = os.open

    def refuse(name, *args, **kwargs):  # (the temporary file beside the output: a read-only folder)
        if str(name).endswith(".tmp"):
            raise PermissionError(13, "Permission denied", str(name))
        return real(name, *args, **kwargs)
    (tmp_path / "r.csv").write_text("a,b\n1,2\n3,4\n")
    monkeypatch.setattr(os, "open", refuse)
    r = run("compress", tmp_path / "r.csv")
    assert r.exit_code == 1
    assert r.stderr.strip() == f"ubpe: {tmp_path / 'r.csv.ubpe'}: Permission denied"


def test_packets_refuse_a_lossy_option(tmp_path, daphnet_csv, daphnet_model):
    """--max-error with --packet-size was ignored: lossless packets, exit 0."""
    r = run("compress", daphnet_csv, "--model", daphnet_model, "--packet-size", "256",
            "--max-error", "1", "-o", tmp_path / "p.ubpe")
    assert r.exit_code == 2 and "do not apply" in r.output
    assert not (tmp_path / "p.ubpe").exists()
    pq = pytest.importorskip("pyarrow.parquet")  # (a review: Parquet, Arrow, EDF and WFDB files
    # took --packet-size in silence, and a container was written)
    import pyarrow as pa
    pq.write_table(pa.table({"a": np.arange(600) % 7}), tmp_path / "t.parquet")
    r = run("compress", tmp_path / "t.parquet", "--model", daphnet_model, "--packet-size", "256",
            "-o", tmp_path / "p.ubpe")
    assert r.exit_code == 2 and "--packet-size takes CSV, WAV, .npy and .npz files" in r.output
    assert not (tmp_path / "p.ubpe").exists()


def test_packet_refusals_say_what_is_wrong(tmp_path, daphnet_csv, daphnet_model):
    """A header-only CSV was said to hold "category cells"; a model without a codec part that
    "the file lacks (none)"; a packet stream cut in its header had "bad magic bytes"."""
    header = daphnet_csv.read_text().splitlines()[0]
    (tmp_path / "h.csv").write_text(header + "\n")
    r = run("compress", tmp_path / "h.csv", "--model", daphnet_model, "--packet-size", 64,
            "-o", tmp_path / "h.ubpe")
    assert r.exit_code == 1 and "no data rows after the header" in r.stderr, r.stderr
    frozen = Path(__file__).parent / "data" / "frozen" / "signal_model_v1.json"
    r = run("compress", daphnet_csv, "--model", frozen, "--packet-size", 64,
            "-o", tmp_path / "v1.ubpe")
    assert r.exit_code == 1 and "the model has no codec part" in r.stderr, r.stderr
    assert run("compress", daphnet_csv, "--model", daphnet_model, "--packet-size", 64,
               "--exclude", "is_anomaly", "-o", tmp_path / "p.ubpe").exit_code == 0
    (tmp_path / "cut.ubpe").write_bytes((tmp_path / "p.ubpe").read_bytes()[:20])
    r = run("decompress", tmp_path / "cut.ubpe", "--model", daphnet_model, "-o",
            tmp_path / "cut.npy")
    assert r.exit_code == 1 and "its header ends after 20 of 26 bytes" in r.stderr, r.stderr
    assert not (tmp_path / "cut.npy").exists()


@pytest.mark.parametrize("bound", ["nan", "inf"])
def test_a_bound_that_is_not_finite_is_a_usage_error(tmp_path, bound):
    """--max-error nan/inf passed click's FloatRange, then exit 1 blaming the input file."""
    (tmp_path / "a.csv").write_text("a\n1\n2\n")
    r = run("compress", tmp_path / "a.csv", "--max-error", bound)
    assert r.exit_code == 2 and "is not a finite number" in r.output
    assert not (tmp_path / "a.csv.ubpe").exists()


def test_a_model_built_on_files_of_the_same_columns_tokenizes_any_such_file(tmp_path):
    """Built on several files, the model named its channels 'file:column': it could encode
    neither a new file nor one of its own files alone (the basic ML workflow)."""
    rng = np.random.default_rng(3)
    files = []
    for k in range(3):
        f = tmp_path / f"rec{k}.csv"
        f.write_text("a,b\n" + "".join(f"{int(u)},{v:.1f}\n" for u, v in
                                       zip(rng.integers(0, 200, 500), rng.uniform(-5, 5, 500))))
        files.append(f)
    m, t = tmp_path / "m.json", tmp_path / "t.npz"
    r = run("build", files[0], files[1], "-o", m, "--levels", 256, "--vocab-size", 300, "-v")
    assert r.exit_code == 0 and "(the same columns in every file: 2 recordings each)" in r.stderr
    errors = [ln.split()[0] for ln in r.stderr.splitlines() if "(bound" in ln]
    assert errors == ["rec0.csv:a", "rec0.csv:b", "rec1.csv:a", "rec1.csv:b"]  # each line its file
    other = tmp_path / "other.csv"  # other columns: each file's channels its own, 'file:column'
    other.write_text("a,c\n" + "".join(f"{i % 50},{i % 7}\n" for i in range(300)))
    r = run("build", files[0], other, "-o", tmp_path / "m2.json", "--levels", 256,
            "--vocab-size", 300, "-v")
    errors = [ln.split()[0] for ln in r.stderr.splitlines() if "(bound" in ln]
    assert r.exit_code == 0 and errors == ["rec0:a", "rec0:b", "other:a", "other:c"]
    for f in (files[0], files[2]):  # a training file alone, and a new one (within range)
        assert run("encode", m, f, "-o", t, "-q", "-f").exit_code == 0
        out = run("decode", m, t, "-c", "-q")
        assert out.exit_code == 0, out.output
        got = np.loadtxt(out.stdout.splitlines(), delimiter=",", skiprows=1)
        want = np.loadtxt(f, delimiter=",", skiprows=1)
        assert (got[:, 0] == want[:, 0]).all()  # integers of 0..199 with 256 levels: exact
        assert np.abs(got[:, 1] - want[:, 1]).max() <= 10 / 256
    r = run("encode", m, files[0], files[2], "-o", t, "-f")
    assert r.exit_code == 1 and "encode one file at a time" in r.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_is_named_after_the_output(tmp_path):
    """'ubpe: <the input>: No space left on device' (xz names the output)."""
    src = tmp_path / "a.csv"
    src.write_text("a,b\n1,2\n3,4\n")
    r = run("compress", src, "-o", "/dev/full", "-f")
    assert r.exit_code == 1 and r.stderr.strip() == "ubpe: /dev/full: No space left on device"
    with open("/dev/full", "wb") as full:  # (-c into a full disk blamed the input too)
        p = subprocess.run([sys.executable, "-m", "ubpe", "compress", str(src), "-c"],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 1
    assert p.stderr.strip() == "ubpe: standard output: No space left on device"


def test_build_pools_files_of_another_column_order_and_refuses_other_decimals(tmp_path):
    """The summary encoded each file's channels in its own column order against the first
    file's names ("value -1.1 is outside the fitted range" of another column); files printing
    a column with other decimals were pooled into one channel at no scale, and 20.00 came
    back from a packet stream as 2000."""
    rng = np.random.default_rng(5)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("x,y\n" + "".join(f"{u},{v}\n" for u, v in zip(rng.integers(0, 60, 400),
                                                                rng.integers(1000, 2000, 400))))
    b.write_text("y,x\n" + "".join(f"{v},{u}\n" for u, v in zip(rng.integers(0, 60, 400),
                                                                rng.integers(1000, 2000, 400))))
    m = tmp_path / "m.json"
    r = run("build", a, b, "-o", m, "--levels", 64, "--vocab-size", 128)
    assert r.exit_code == 0, r.output
    c, d = tmp_path / "c.csv", tmp_path / "d.csv"
    c.write_text("t\n" + "".join(f"{20 + k % 7 / 10:.1f}\n" for k in range(300)))
    d.write_text("t\n" + "".join(f"{20 + k % 7 / 10:.2f}\n" for k in range(300)))
    r = run("build", c, d, "-o", m, "-f")
    assert r.exit_code == 1 and "column 't': 1 digits after the point in " in r.stderr
    assert "2 digits after the point in " in r.stderr and "Traceback" not in r.output


def test_column_names_with_colons_and_files_of_another_column_order(tmp_path):
    """A column named 'acc:x' was taken for a 'file:column' channel: the model could not
    encode even its own file. Files of the same columns in another order were not pooled."""
    rng = np.random.default_rng(4)
    a, b = tmp_path / "run1.csv", tmp_path / "run2.csv"
    a.write_text("acc:x,acc:y\n" + "".join(f"{u},{v}\n" for u, v in rng.integers(0, 60, (400, 2))))
    b.write_text("acc:y,acc:x\n" + "".join(f"{u},{v}\n" for u, v in rng.integers(0, 60, (400, 2))))
    m, t = tmp_path / "m.json", tmp_path / "t.npz"
    assert run("build", a, "-o", m, "--levels", 64, "--vocab-size", 128, "-q").exit_code == 0
    assert run("encode", m, a, "-o", t, "-q").exit_code == 0
    r = run("build", a, b, "-o", m, "--levels", 64, "--vocab-size", 128, "-f")
    assert r.exit_code == 0 and "channels     2 (the same columns in every file" in r.stderr
    for f in (a, b):
        assert run("encode", m, f, "-o", t, "-q", "-f").exit_code == 0
        out = run("decode", m, t, "-c", "-q")
        got = np.loadtxt(out.stdout.splitlines(), delimiter=",", skiprows=1)
        want = read_csv(f, columns=["acc:x", "acc:y"])
        assert (got == np.stack(want.channels, axis=1)).all()


def test_model_and_input_cannot_both_be_standard_input(tmp_path, csv_file):
    """`cat m.json | ubpe compress --model - -` compressed an empty input (the model had read
    standard input) and exited 0."""
    r = run("build", csv_file, "-o", tmp_path / "m.json", "-q")
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["compress", "--model", "-", "-"],
                           input=(tmp_path / "m.json").read_bytes())
    assert r.exit_code == 2 and "standard input ('-') can be read only once" in r.output


def test_inspect_of_a_packet_stream_checks_its_framing(tmp_path, columns_csv):
    """inspect printed the magic and the model id of a truncated stream, exit 0."""
    m, pkt = tmp_path / "m.json", tmp_path / "w.pkt"
    assert run("build", columns_csv, "-o", m, "-q").exit_code == 0
    r = run("compress", columns_csv, "--model", m, "--packet-size", 256, "-o", pkt, "-q")
    assert r.exit_code == 0, r.output
    r = run("inspect", pkt)
    assert r.exit_code == 0 and "packets      4, 1,000 samples a channel in all" in r.stdout
    (tmp_path / "cut.pkt").write_bytes(pkt.read_bytes()[:-20])
    r = run("inspect", tmp_path / "cut.pkt")
    assert r.exit_code == 1 and "truncated" in r.stderr


def test_build_of_several_files_excludes_a_column_where_a_file_has_it(tmp_path):
    """--exclude c failed on a file without c; a name that no file has is still an error."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("x,y,label\n" + "".join(f"{k % 13},{k % 7},{k % 2}\n" for k in range(300)))
    b.write_text("x,y\n" + "".join(f"{k % 11},{k % 5}\n" for k in range(300)))
    m = tmp_path / "m.json"
    r = run("build", a, b, "--exclude", "label", "-o", m, "--levels", 64, "--vocab-size", 80)
    assert r.exit_code == 0, r.output
    names = [c["name"] for c in json.loads(m.read_text())["channels"]]
    assert names and not any("label" in n for n in names)
    r = run("build", a, b, "--exclude", "lable", "-o", m, "-f")
    assert r.exit_code == 1 and "--exclude 'lable': no file has such a column" in r.stderr


def test_decode_errors_name_the_token_file(tmp_path, daphnet_csv, daphnet_model):
    """An object array or channels of other lengths in the token file gave messages that named
    no file ("Object arrays cannot be loaded...", "channels have different lengths")."""
    good = tmp_path / "t.npz"
    assert run("encode", daphnet_model, daphnet_csv, "-o", good).exit_code == 0
    with np.load(good) as z:
        arrays = {k: z[k] for k in z.files}
    names = SignalModel.load(daphnet_model).channel_names_
    for label, change in (("object", lambda a: a.astype(object)), ("short", lambda a: a[:1])):
        bad = dict(arrays)
        bad[f"tokens/{names[0]}"] = change(bad[f"tokens/{names[0]}"])
        path = tmp_path / f"{label}.npz"
        np.savez(path, **bad)
        r = run("decode", daphnet_model, path, "-c")
        assert r.exit_code == 1 and f"ubpe: {path}:" in r.stderr, r.stderr


def test_decode_refuses_token_ids_that_expand_beyond_max_values(tmp_path):
    """A token can stand for a run of 32,768 samples: an 8 MB token file of its id asked for
    488 GiB (numpy's MemoryError, or the machine's memory where the system overcommits)."""
    csv = tmp_path / "z.csv"
    rng = np.random.default_rng(0)
    csv.write_text("x\n" + "0\n" * 60000 + "".join(f"{v}\n" for v in rng.integers(0, 9, 3000)))
    model, tokens = tmp_path / "m.json", tmp_path / "t.npz"
    assert run("build", csv, "-o", model, "-q").exit_code == 0
    assert run("encode", model, csv, "-o", tokens, "-q").exit_code == 0
    tok = SignalModel.load(model).tokenizer_
    longest = int(np.argmax(np.diff(tok._exp_start)))
    assert tok.decode([longest]).size >= 4096
    with np.load(tokens) as z:
        bomb = {k: z[k] for k in z.files}
    bomb["tokens/x"] = np.full(300_000, longest, np.int32)
    np.savez(tmp_path / "bomb.npz", **bomb)
    r = run("decode", model, tmp_path / "bomb.npz", "-o", tmp_path / "out.csv")
    assert r.exit_code == 1 and "more than the 1,073,741,824 allowed" in r.stderr, r.stderr
    assert not (tmp_path / "out.csv").exists()
    assert run("decode", model, tokens, "-o", tmp_path / "a.csv", "--max-values", 63000).exit_code == 0
    r = run("decode", model, tokens, "-o", tmp_path / "b.csv", "--max-values", 62999)
    assert r.exit_code == 1 and "expand to 63,000 symbols, more than the 62,999" in r.stderr
    assert tok.decode([longest, 0], max_length=None).size == tok.decode([longest]).size + 1


def test_decompressed_name_takes_the_kind_where_the_name_has_no_suffix(tmp_path):
    """`ubpe compress - -o wv.ubpe < x.wav` then `ubpe decompress wv.ubpe` wrote a WAV named
    'wv'; a container of signals.compress saved as sig.ubpe gave an .npy named 'sig'."""
    wav = (Path(__file__).parent / "data" / "speech_0880.wav").read_bytes()
    (tmp_path / "wv.ubpe").write_bytes(signals.compress_file(wav, "wav"))
    (tmp_path / "sig.ubpe").write_bytes(signals.compress([np.arange(5), np.arange(3)]))
    (tmp_path / "x.csv.ubpe").write_bytes(signals.compress_file(b"a\n1\n2\n", "csv"))
    for name, out in (("wv.ubpe", "wv.wav"), ("sig.ubpe", "sig.npz"), ("x.csv.ubpe", "x.csv")):
        r = run("decompress", tmp_path / name)
        assert r.exit_code == 0, r.output
        assert (tmp_path / out).exists(), name
    assert (tmp_path / "wv.wav").read_bytes() == wav


def test_closed_standard_output_and_damaged_token_files(tmp_path, daphnet_csv, daphnet_model):
    """'>&-' gave an AttributeError traceback; a damaged deflated member of a token file a
    zlib.error traceback; a 'model' member of objects a message without the file."""
    import zipfile
    tokens = tmp_path / "t.npz"
    assert run("encode", daphnet_model, daphnet_csv, "-o", tokens).exit_code == 0
    p = subprocess.run([sys.executable, "-m", "ubpe", "decode", str(daphnet_model), str(tokens),
                        "-c"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       preexec_fn=lambda: os.close(1), timeout=120)
    assert p.returncode == 1 and b"standard output is closed" in p.stderr
    assert b"Traceback" not in p.stderr
    with zipfile.ZipFile(tokens) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    raw = bytearray(bad.read_bytes())
    with zipfile.ZipFile(bad) as z:
        info = z.getinfo(next(n for n in members if n.startswith("tokens/")))
    raw[info.header_offset + 30 + len(info.filename) + 5] ^= 0xFF  # (inside the deflated data)
    bad.write_bytes(bytes(raw))
    r = run("decode", daphnet_model, bad, "-c")
    assert r.exit_code == 1 and f"ubpe: {bad}:" in r.stderr and "Traceback" not in r.output
    objects = tmp_path / "objects.npz"
    with np.load(tokens) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["model"] = np.array([str(arrays["model"])], dtype=object)
    np.savez(objects, **arrays)
    r = run("decode", daphnet_model, objects, "-c")
    assert r.exit_code == 1 and f"ubpe: {objects}: not a token file (member 'model.npy':" \
        in r.stderr
    # a member whose header declares more than its bytes: refused before the allocation
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<i4", "fortran_order": False,
                                                "shape": (2**40,)})
    forged = tmp_path / "forged.npz"
    with zipfile.ZipFile(forged, "w") as z:
        z.writestr("tokens/x.npy", head.getvalue() + bytes(16))
    r = run("decode", daphnet_model, forged, "-c")
    assert r.exit_code == 1 and "declares int32 of shape (1099511627776,)" in r.stderr
    (tmp_path / "forged.npy").write_bytes(head.getvalue() + bytes(16))
    r = run("text", "decode", Path(__file__).parent / "data" / "frozen" / "byte_tokenizer_v2.json",
            tmp_path / "forged.npy", "-o", tmp_path / "out.txt")
    assert r.exit_code == 1 and f"{tmp_path / 'forged.npy'}: not a readable .npy file (its " \
        f"header declares int32" in r.stderr
    for kind in ("npy", "npz"):
        data = (tmp_path / f"forged.{kind}").read_bytes()
        with pytest.raises(ValueError, match=f"x.{kind}: not a readable {kind} file .*8 bytes of "
                                             f"data|x.{kind}: not a readable {kind} file .*16 "):
            signals.compress_file(data, kind, path=f"x.{kind}")


def test_max_values_bounds_stream_frames_and_packet_streams(tmp_path, daphnet_csv):
    """--max-values was not passed to the decoders of CSV streams and packet streams."""
    out = tmp_path / "d.csv.ubpe"
    with open(daphnet_csv, "rb") as src, open(out, "wb") as dst:
        signals.files.compress_csv_stream(src, dst, frame_bytes=20000)
    r = run("decompress", out, "-c", "--max-values", 10)
    assert r.exit_code == 1 and "max_values=10" in r.stderr
    model = SignalModel(64, 80, progress=False).fit([np.arange(4000) % 50], names=["v"])
    model.save(tmp_path / "m.json")
    buf = io.BytesIO()
    model.write_packet_stream([np.arange(300) % 50], buf)
    (tmp_path / "p.ubpe").write_bytes(buf.getvalue())
    r = run("decompress", tmp_path / "p.ubpe", "--model", tmp_path / "m.json", "-c",
            "--max-values", 299)
    assert r.exit_code == 1 and "max_values=299" in r.stderr
    r = run("decompress", tmp_path / "p.ubpe", "--model", tmp_path / "m.json", "-c",
            "--max-values", 300)
    assert r.exit_code == 0


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_behind_standard_output_is_named_so(tmp_path):
    """`ubpe inspect a b > /dev/full` blamed each input ('a: No space left on device')."""
    (tmp_path / "a.ubpe").write_bytes(signals.compress(np.arange(100)))
    with open("/dev/full", "wb") as full:
        p = subprocess.run([sys.executable, "-m", "ubpe", "inspect", str(tmp_path / "a.ubpe"),
                            str(tmp_path / "a.ubpe")], stdout=full, stderr=subprocess.PIPE,
                           timeout=120)
    assert p.returncode == 1
    assert p.stderr.decode().strip() == "ubpe: standard output: No space left on device"


def test_a_version_1_stream_and_an_empty_container_through_inspect_and_decompress(tmp_path):
    """(A review) `inspect` of the frozen version-1 stream printed half its summary, then
    "'max_error' (KeyError)"; `decompress` said "unknown flags 0x003a"; `inspect` of a
    container of no values gave "bits/value 1249664.000"."""
    v1 = Path(__file__).parent / "data" / "frozen" / "stream_v1.ubps"
    r = run("inspect", v1)
    assert r.exit_code == 0, r.output
    assert "2 frames of arrays" in r.output and "max error    0: every value exact" in r.output
    assert "ubpe.signal stream, version 1," in r.output  # (it said version 2; a re-review)
    r = run("decompress", v1, "-o", tmp_path / "x")
    assert r.exit_code == 1 and no_traceback(r)
    assert "frame 0 holds 'array' data, not CSV or WAV; read it with signals.decompress_stream" \
        in r.output and not (tmp_path / "x").exists()
    np.save(tmp_path / "e.npy", np.zeros(0, np.int32))
    assert run("compress", tmp_path / "e.npy", "-q").exit_code == 0
    r = run("inspect", tmp_path / "e.npy.ubpe")
    assert r.exit_code == 0 and "bits/value   - (no values)" in r.output, r.output


def test_utf16_and_parquet_given_as_csv_say_what_they_are(tmp_path):
    """(A review) A UTF-16 CSV and Parquet from standard input were read as CSV and refused
    with a field count ("line 2: 1 fields, expected 2"). A UTF-16 file of one frame is now
    stored as it is (exact), a longer one (a stream of frames) and `build` say it is UTF-16;
    Parquet or Arrow data without its suffix names the suffix that reads it."""
    text = "a,b\r\n" + "".join(f"{i},{i % 7}\r\n" for i in range(3000))
    (tmp_path / "u.csv").write_bytes(text.encode("utf-16"))
    assert run("compress", tmp_path / "u.csv", "-q").exit_code == 0
    r = run("decompress", tmp_path / "u.csv.ubpe", "-c")
    assert r.exit_code == 0 and r.stdout_bytes == (tmp_path / "u.csv").read_bytes()
    cjk = b"\xff\xfe" + ("\u540d,\u5024\n" + text[5:]).encode("utf-16-le")  # (a re-review: a
    # first character of two nonzero bytes)
    packed = signals.compress_file(cjk, "csv")
    assert signals.inspect(packed)["stored_whole"] and signals.decompress_file(packed).data == cjk
    r = run("build", tmp_path / "u.csv", "-o", tmp_path / "m.json")
    assert r.exit_code == 1 and "u.csv: UTF-16 text (its byte-order mark)" in r.stderr
    import signals.files as F
    with open(tmp_path / "u.csv", "rb") as src, open(tmp_path / "s.ubpe", "wb") as dst:
        with pytest.raises(ValueError, match="UTF-16 text"):
            F.compress_csv_stream(src, dst, frame_bytes=4096)
    # (a re-review: a CSV in a one-byte encoding that starts with 'ÿþ', UTF-32, or a header
    # starting with PAR1 or ARROW1, is no UTF-16, Parquet or Arrow: read as CSV, as before)
    latin = ("\u00ff\u00fea,b\n" + "".join(f"{i},{i % 7}\n" for i in range(3000))).encode("latin-1")
    info = signals.inspect(signals.compress_file(latin, "csv"))
    assert info["stored_whole"] is None and len(info["channels"]) == 2
    assert signals.decompress_file(signals.compress_file(latin, "csv")).data == latin
    for text in (b"PAR1,PAR2\n1,2\n3,4\n", b"ARROW1,b\n1,2\n"):
        r = run("compress", "-c", "-", input=text)
        assert r.exit_code == 0, r.output
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    pq.write_table(pa.table({"a": np.arange(100)}), tmp_path / "t.parquet")
    r = run("compress", "-c", "-", input=(tmp_path / "t.parquet").read_bytes())
    assert r.exit_code == 1 and "Parquet data; ubpe reads it from a file named .parquet or .pq" \
        in r.stderr and no_traceback(r)
    # (Feather v1 and an Arrow IPC stream were read as CSV: "line 3: 2 fields, expected 1")
    import pyarrow.feather
    t = pa.table({"a": np.arange(100)})
    with warnings.catch_warnings():  # (pyarrow 25 deprecates writing Feather v1)
        warnings.simplefilter("ignore", DeprecationWarning)
        pyarrow.feather.write_feather(t, tmp_path / "v1.feather", version=1)
    with pa.OSFile(str(tmp_path / "s.arrows"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    for name in ("v1.feather", "s.arrows"):
        r = run("compress", "-c", "-", input=(tmp_path / name).read_bytes())
        assert r.exit_code == 1 and "Arrow data; ubpe reads it from a file named .arrow, " \
            ".arrows, .feather or .ipc" in r.stderr and no_traceback(r), name
        r = run("compress", "-c", tmp_path / name)
        assert r.exit_code == 0 and signals.decompress(r.stdout_bytes)[0].tolist() == \
            list(range(100)), name


def test_a_version_1_container_decompresses_to_a_csv_named_so(tmp_path):
    """(A review) `ubpe decompress golden_v1.ubpe` wrote a CSV named `golden_v1`, without its
    suffix (the name is found from the container's source, which version 1 did not keep)."""
    import shutil
    shutil.copy(Path(__file__).parent / "data" / "golden_v1.ubpe", tmp_path / "g.ubpe")
    r = run("decompress", tmp_path / "g.ubpe", "-q")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "g.csv").read_text().startswith("ch0,ch1\n0,5\n1,-5\n")
    assert not (tmp_path / "g").exists()


def test_inspect_reads_standard_input_once_and_names_a_json_array():
    """(A review) `inspect - -` read standard input twice (the second time empty); a JSON array
    was said to be "neither JSON nor a ubpe container"."""
    r = run("inspect", "-", "-", input=b"[1]\n")
    assert r.exit_code == 2 and "can be read only once" in r.output
    r = run("inspect", "-", input=b"[1]\n")
    assert r.exit_code == 1 and "not a JSON object (a model is one)" in r.output
