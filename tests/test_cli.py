import json

import pytest
from click.testing import CliRunner

from signals import SignalModel
from ubpe.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_build_on_real_daphnet(tmp_path, daphnet_csv):
    out = tmp_path / "daphnet.ubpe.json"
    r = run("build", daphnet_csv, "--exclude", "is_anomaly", "--vocab-size", 2048,
            "--doc-length", 1000, "-q", "-o", out)
    assert r.exit_code == 0, r.output
    assert "skipped      daphnet_accel.csv: timestamp (not numeric)" in r.output
    assert "channels     9\n" in r.output and "samples      63,360" in r.output
    assert "documents    72" in r.output  # 9 channels x ceil(7040 / 1000)
    assert "vocabulary   2,048 tokens (1,024 alphabet + 1,024 merges)" in r.output
    assert "samples per token" in r.output and "wall time" in r.output
    model = SignalModel.load(out)
    assert len(model.channel_names_) == 9 and model.tokenizer_.n_tokens_ == 2048
    assert json.loads(out.read_text())["format"] == "ubpe.signal-model"


def test_build_on_real_ecg(tmp_path, ecg_csv):
    r = run("build", ecg_csv, "--levels", 512, "--vocab-size", 1024, "-q", "-o",
            tmp_path / "ecg.json")
    assert r.exit_code == 0, r.output
    assert "ecg_mV" in r.output and "samples      108,000" in r.output


def test_help_documents_options():
    r = run("build", "--help")
    assert r.exit_code == 0
    for opt in ("--columns", "--exclude", "--levels", "--vocab-size", "--n-candidates",
                "--doc-length", "--min-frequency", "Samples per training document"):
        assert opt in r.output


@pytest.mark.parametrize("content, extra, message", [
    (None, [], "does not exist"),
    ("t,a\nmon,1\ntue,2\n", ["--columns", "t"], "column 't': the column is not numeric"),
    ("a,b\n1,2\n3,nan\n", [], "line 3, column 'b': non-finite value 'nan'"),
    ("a\n1\n2\n", ["--levels", 64, "--vocab-size", 10],
     r"vocab_size (10) is smaller than the alphabet (64)"),
    ("", [], "the file is empty"),
    ("a,b\n", [], "no data rows"),
])
def test_build_errors_are_one_line_and_leave_no_model(tmp_path, content, extra, message):
    src = tmp_path / "in.csv"
    if content is not None:
        src.write_text(content)
    out = tmp_path / "model.json"
    r = run("build", src, *extra, "-q", "-o", out)
    assert r.exit_code != 0
    assert message in r.output
    assert "Traceback" not in r.output
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == (["in.csv"] if content is not None else [])


@pytest.fixture(scope="module")
def daphnet_model(tmp_path_factory, daphnet_csv):
    out = tmp_path_factory.mktemp("model") / "daphnet.json"
    r = run("build", daphnet_csv, "--exclude", "is_anomaly", "--vocab-size", 2048, "-q",
            "-o", out)
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("method", ["merges", "shortest", "weighted"])
def test_encode_decode_round_trip_on_real_csv(tmp_path, daphnet_csv, daphnet_model, method):
    import numpy as np

    from signals import read_csv
    tokens, back = tmp_path / "t.npz", tmp_path / "back.csv"
    r = run("encode", daphnet_model, daphnet_csv, "--method", method, "-o", tokens)
    assert r.exit_code == 0, r.output
    assert f"method {method}" in r.output
    r = run("decode", daphnet_model, tokens, "-o", back)
    assert r.exit_code == 0, r.output
    model = SignalModel.load(daphnet_model)
    orig, got = read_csv(daphnet_csv, exclude=["is_anomaly"]), read_csv(back)
    assert got.names == orig.names
    for q, a, b in zip(model.quantizers_, orig.channels, got.channels):
        assert np.abs(a - b).max() <= q.max_error_[0] + 1e-6  # 12 significant digits


def test_encode_top_n_writes_alternatives(tmp_path, daphnet_csv, daphnet_model):
    import numpy as np
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
    r = run("encode", daphnet_model, daphnet_csv, "--top-n", 2, "-o", tokens)
    assert r.exit_code != 0 and "--top-n above 1 needs --method weighted" in r.output


def test_inspect_and_decode_errors(tmp_path, daphnet_model):
    r = run("inspect", daphnet_model)
    assert r.exit_code == 0 and "2,048 tokens (1,024 alphabet + 1,024 merges)" in r.output
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    r = run("decode", daphnet_model, bad, "-o", tmp_path / "out.csv")
    assert r.exit_code == 1 and "not a token file" in r.output
    assert not (tmp_path / "out.csv").exists()
    r = run("inspect", bad)
    assert r.exit_code == 1 and "not valid JSON" in r.output
