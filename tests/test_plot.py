"""Pictures: each renders to a valid PNG under Agg; token spans match the tokens."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from click.testing import CliRunner  # noqa: E402

from signals import SignalModel, read_csv  # noqa: E402
from signals import plot as pictures  # noqa: E402
from ubpe.cli import main  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def ecg(ecg_csv):
    return read_csv(ecg_csv).channels[0][:20000]


def assert_png(path, min_side=100):
    import matplotlib.image
    assert path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and min(img.shape[:2]) >= min_side and img.std() > 0  # not blank


def span_count(fig):
    ax = fig.axes[0]
    return sum(len(c.get_paths()) for c in ax.collections
               if (c.get_gid() or "").startswith("token-spans"))


def test_tokens_spans_match_tokens(ecg, tmp_path):
    fig = pictures.tokens_figure(ecg, start=500, length=250, rate=360.0)
    ids, spans = fig.ubpe_ids, fig.ubpe_spans
    assert span_count(fig) == ids.size == len(spans)
    assert spans[0, 0] == 500 and spans[:, 1].sum() == 250  # the spans tile the window
    assert np.array_equal(spans[1:, 0], (spans[:, 0] + spans[:, 1])[:-1])
    fig.savefig(tmp_path / "tokens.png")
    assert_png(tmp_path / "tokens.png")


def test_tokens_with_a_trained_model(ecg):
    model = SignalModel(n_levels=128, vocab_size=300, doc_length=500, progress=False).fit([ecg])
    fig = pictures.tokens_figure(ecg, model, start=0, length=100, method="merges")
    tok = model.tokenizer_
    codes = model.quantizers_[0].encode(ecg[:100]).astype(np.int64)
    assert np.array_equal(fig.ubpe_ids, tok.encode(codes, method="merges"))
    assert span_count(fig) == fig.ubpe_ids.size


def test_tokens_hand_checked_spans():
    """0,1,2,3 repeating: (0,1), (1,2), (2,3) occur 50 times, (3,0) 49; the one merge is one of
    the first three, and any of them cuts the window 0,1,2,3,0,1,2,3 into 6 tokens."""
    x = np.tile([0, 1, 2, 3], 50)
    model = SignalModel(n_levels=4, vocab_size=5, n_candidates=1, progress=False).fit([x])
    fig = pictures.tokens_figure(x, model, length=8)
    (left, right, token), = model.tokenizer_.merges_.tolist()
    assert (left, right) in {(0, 1), (1, 2), (2, 3)}
    assert span_count(fig) == fig.ubpe_ids.size == 6
    assert sorted(fig.ubpe_spans[:, 1].tolist()) == [1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize("name", ["bits", "vocab", "residuals"])
def test_other_pictures_render(ecg, tmp_path, name):
    fig = pictures.PICTURES[name](ecg)
    fig.savefig(tmp_path / f"{name}.png")
    assert_png(tmp_path / f"{name}.png")


def test_bits_values_are_compress_sizes(ecg):
    import signals
    x = ecg[:9000]
    fig = pictures.bits_figure(x, block=4000)
    expected = [8 * len(signals.compress(x[i:i + 4000])) / x[i:i + 4000].size
                for i in (0, 4000, 8000)]  # the last block has 1000 samples
    assert np.allclose(fig.ubpe_bits[0], expected)


def test_vocab_curve_monotone_tokens(ecg):
    curve = pictures.vocab_figure(ecg, max_merges=64).ubpe_curve
    assert curve[0, 0] == 0 and curve[0, 1] == 1.0  # no merges: one token per sample
    assert (np.diff(curve[:, 1]) <= 0).all()  # more merges, never more tokens (shortest)


def test_residual_entropies(ecg):
    h_table, h_laplace = pictures.residual_figure(ecg).ubpe_entropy
    assert 0 < h_table <= h_laplace  # the table's own entropy is the least cross-entropy


def test_errors(ecg):
    with pytest.raises(ValueError, match="empty window"):
        pictures.tokens_figure(ecg, start=10**6)
    with pytest.raises(ValueError, match="channel 3"):
        pictures.residual_figure(ecg, channel=3)
    with pytest.raises(ValueError, match="unknown picture"):
        pictures.save_all(ecg, "/nonexistent", which=["pie"])


def test_cli_plot_writes_all_four(ecg_csv, tmp_path):
    r = CliRunner().invoke(main, ["plot", str(ecg_csv), "-o", str(tmp_path / "pics"),
                                  "--length", "200", "--rate", "360"])
    assert r.exit_code == 0, r.output
    for name in ("tokens", "bits", "vocab", "residuals"):
        assert_png(tmp_path / "pics" / f"mitbih208_ecg.{name}.png")
    assert "4 picture(s)" in r.stderr and r.stdout == ""  # the summary on stderr, as xz's
    before = (tmp_path / "pics" / "mitbih208_ecg.vocab.png").stat().st_mtime_ns
    r = CliRunner().invoke(main, ["plot", str(ecg_csv), "-o", str(tmp_path / "pics"),
                                  "--which", "vocab"])
    assert r.exit_code == 1 and "exists; use -f" in r.stderr
    assert (tmp_path / "pics" / "mitbih208_ecg.vocab.png").stat().st_mtime_ns == before
    r = CliRunner().invoke(main, ["plot", str(ecg_csv), "-o", str(tmp_path / "pics"),
                                  "--which", "vocab", "-f", "-q"])
    assert r.exit_code == 0 and r.output == ""


def test_cli_plot_reads_ubpe_files(tmp_path):
    import signals
    x = np.round(np.sin(np.arange(3000) / 20) * 500).astype(np.int64)
    (tmp_path / "s.ubpe").write_bytes(signals.compress(x))
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "s.ubpe"), "-o", str(tmp_path),
                                  "--which", "tokens,residuals"])
    assert r.exit_code == 0, r.output
    assert_png(tmp_path / "s.tokens.png")
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "s.ubpe"), "-o", str(tmp_path),
                                  "--channel", "2"])
    assert r.exit_code == 2 and "1 channel" in r.output


def test_a_csv_container_is_plotted_from_its_cells_and_not_decompressed_to_codes(tmp_path):
    # (signals.decompress gave a CSV container's codec integers: 2035 for the cell 20.35)
    import signals
    csv = b"t,temp\n" + b"".join(b"2024-01-01 00:%02d,%d.%02d\n" % (i % 60, 20 + i % 3, i % 100)
                                  for i in range(400))
    data = signals.compress_file(csv, "csv")
    with pytest.raises(ValueError, match="decompress_file"):
        signals.decompress(data)
    (tmp_path / "c.csv.ubpe").write_bytes(data)
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "c.csv.ubpe"), "-o", str(tmp_path),
                                  "--which", "residuals"])
    assert r.exit_code == 0, r.output
    import io  # a CSV over a frame: a stream of containers (it was parsed as a CSV text)
    stream = io.BytesIO()
    signals.files.compress_csv_stream(io.BytesIO(csv), stream, frame_bytes=2000, level=1)
    with pytest.raises(signals.SignalFormatError, match="decompress_stream"):
        signals.decompress(stream.getvalue())
    (tmp_path / "s.csv.ubpe").write_bytes(stream.getvalue())
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "s.csv.ubpe"), "-o", str(tmp_path),
                                  "--which", "residuals"])
    assert r.exit_code == 0, r.output


def test_save_all_parallel_draws_the_same_files(ecg, tmp_path, monkeypatch):
    """The bits picture's blocks coded in a forked child give the very same PNG bytes."""
    if not hasattr(__import__("os"), "fork"):
        pytest.skip("no fork here")
    import threading  # forced whatever the machine's load; not beside other threads
    monkeypatch.setattr(pictures, "_fork_helps", lambda: threading.active_count() == 1)
    x = ecg[:40000]  # three blocks of 16384
    par = pictures.save_all(x, tmp_path / "par", which=["bits", "residuals"], parallel=True)
    ser = pictures.save_all(x, tmp_path / "ser", which=["bits", "residuals"], parallel=False)
    assert [p.name for p in par] == [p.name for p in ser] == ["bits.png", "residuals.png"]
    for a, b in zip(par, ser):
        assert a.read_bytes() == b.read_bytes()
    assert_png(par[0])


def _fails(x):
    raise ArithmeticError(f"no {x}")


def test_forked_value_and_fallback(monkeypatch):
    if not hasattr(__import__("os"), "fork"):
        pytest.skip("no fork here")
    monkeypatch.setattr(pictures, "_fork_helps", lambda: True)  # whatever the machine's load
    f = pictures._Forked(np.cumsum, np.arange(5))
    assert f._pid is not None  # a child runs it
    assert f.result().tolist() == [0, 1, 3, 6, 10]
    f.close()  # nothing left to reap: a no-op
    # a child that fails leaves nothing behind; the call runs here and raises as it would
    f = pictures._Forked(_fails, 3)
    assert f._pid is not None
    with pytest.raises(ArithmeticError, match="no 3"):
        f.result()
    # a value never taken: close() stops and reaps the child
    f = pictures._Forked(np.arange, 10)
    assert f._pid is not None
    f.close()
    assert f._pid is None
    f = pictures._Forked(np.arange, 3, enabled=False)
    assert f._pid is None and f.result().tolist() == [0, 1, 2]


def test_cli_plot_refuses_a_model_of_other_channels(tmp_path):
    """Channels were matched by position only: a file without one of the model's columns
    was drawn with its neighbour's quantizer, labelled as itself, exit 0."""
    csv = tmp_path / "ab.csv"
    rng = np.random.default_rng(0)
    csv.write_text("a,b,c\n" + "".join(f"{int(u)},{int(v)},{int(w)}\n"
                                       for u, v, w in rng.integers(0, 900, (400, 3))))
    r = CliRunner().invoke(main, ["build", str(csv), "--columns", "a,b", "-o",
                                  str(tmp_path / "m.json"), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["plot", str(csv), "--columns", "b,c", "--model", str(tmp_path / "m.json"),
                                  "--which", "tokens", "-o", str(tmp_path / "p")])
    assert r.exit_code == 1 and "ubpe: the model's channels (a, b) are not those of" in r.stderr
    assert not (tmp_path / "p" / "ab.tokens.png").exists()
    r = CliRunner().invoke(main, ["plot", str(csv), "--columns", "a,b", "--model", str(tmp_path / "m.json"),
                                  "--which", "tokens", "-o", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output


def test_cli_warnings_are_the_commands_and_q_hides_them(tmp_path):
    """A library warning printed as a raw Python warning with a source path, even with -q."""
    csv = tmp_path / "c7.csv"
    csv.write_text("a\n7\n7\n7\n7\n")
    r = CliRunner().invoke(main, ["plot", str(csv), "-o", str(tmp_path / "p"), "--serial",
                                  "--which", "tokens"])
    assert r.exit_code == 0, r.output
    assert "ubpe: warning: the corpus supports only" in r.stderr and ".py:" not in r.stderr
    r = CliRunner().invoke(main, ["plot", str(csv), "-o", str(tmp_path / "p"), "--serial",
                                  "--which", "tokens", "-f", "-q"])
    assert r.exit_code == 0 and r.stderr == ""


def test_residuals_of_integers_are_exact_and_a_quantizer_is_named():
    """The residual and vocabulary pictures quantized an int16 signal to 1024 levels without a
    word ("table 4.92 bits/sample" for residuals of 8.59); uint64 values above 2**63 crashed."""
    from signals.predict import LinearPredictor
    rng = np.random.default_rng(0)
    x = (np.sin(np.arange(5000) / 9) * 30000 + rng.integers(-300, 300, 5000)).astype(np.int16)
    fig = pictures.residual_figure(x)
    res, _ = LinearPredictor().encode(x.astype(np.int64) - int(x.min()))
    _, counts = np.unique(res, return_counts=True)
    p = counts / res.size
    assert fig.ubpe_entropy[0] == pytest.approx(float(-(p * np.log2(p)).sum()))
    assert "quantized" not in fig.axes[0].get_title()
    floats = pictures.residual_figure(x / 7.0, n_levels=256)
    assert "quantized to 256 levels" in floats.axes[0].get_title()
    big = np.array([2**64 - 1, 2**64 - 2, 2**64 - 6, 2**64 - 3], np.uint64)
    assert pictures.residual_figure(big).ubpe_entropy[0] > 0
    wide = np.array([0, 2**62, 5], np.int64)  # (2**62 values: a tokenizer's alphabet is 2**30)
    assert "quantized" in pictures.vocab_figure(wide, max_merges=4).axes[0].get_title()
    t = np.arange(20000)  # (24-bit: quantized, as before integers were kept; 2**30 failed)
    a24 = (2**23 * np.sin(t / 30) + rng.normal(0, 2**16, t.size)).astype(np.int32)
    for draw in (pictures.residual_figure, pictures.vocab_figure):
        assert "quantized to 1,024 levels" in draw(a24).axes[0].get_title()


def test_save_all_writes_nothing_when_a_picture_fails(ecg, tmp_path):
    """The pictures drawn before the failing one were left behind (vocab.png, residuals.png
    beside an error exit)."""
    with pytest.raises(ValueError, match="empty window"):
        pictures.save_all(ecg, tmp_path / "pics", which=["vocab", "residuals", "tokens"],
                          start=10**7)
    assert not (tmp_path / "pics").exists() or not list((tmp_path / "pics").iterdir())


def test_cli_plot_of_an_array_container_takes_its_names_and_picks(tmp_path):
    """--columns and --exclude were ignored for a .ubpe made from arrays (it drew 'a', named
    'ch0'); the bits picture was titled 'ch0' for every channel; --which bogus exited 1."""
    import signals
    (tmp_path / "two.ubpe").write_bytes(
        signals.compress([np.arange(500), 2 * np.arange(300)], names=["a", "b"]))
    out = str(tmp_path / "pics")
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "two.ubpe"), "-o", out, "--columns",
                                  "b", "--channel", "1", "--which", "tokens"])
    assert r.exit_code == 2 and "1 channel" in r.output  # (b alone)
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "two.ubpe"), "-o", out, "--columns",
                                  "nonexistent"])
    assert r.exit_code == 1 and "no column named 'nonexistent'" in r.stderr
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "two.ubpe"), "-o", out, "--exclude",
                                  "a", "--which", "residuals", "-v"])
    assert r.exit_code == 0, r.output
    assert_png(tmp_path / "pics" / "two.residuals.png")
    for which in ("bogus", ",", "tokens,pie"):
        r = CliRunner().invoke(main, ["plot", str(tmp_path / "two.ubpe"), "-o", out, "--which",
                                      which])
        assert r.exit_code == 2 and "--which" in r.output


def test_cli_plot_reads_standard_input(ecg_csv, tmp_path):
    r = CliRunner().invoke(main, ["plot", "-", "-o", str(tmp_path), "--which", "residuals"],
                           input=ecg_csv.read_bytes())
    assert r.exit_code == 0, r.output
    assert_png(tmp_path / "stdin.residuals.png")


def test_bits_picture_is_titled_with_its_channel(monkeypatch, tmp_path):
    titles = []
    draw = pictures._draw_bits
    monkeypatch.setattr(pictures, "_draw_bits", lambda *a: titles.append(a[-1]) or draw(*a))
    x = np.stack([np.arange(3000) % 50, np.arange(3000) % 7])
    pictures.save_all(x, tmp_path, which=["bits"], channel=1, parallel=False)
    assert titles == ["ch1: bits per sample, blocks compressed on their own"]


def test_cli_plot_of_standard_input_names_it_so(tmp_path):
    """The messages named the temporary file that standard input was copied to."""
    r = CliRunner().invoke(main, ["plot", "-", "-o", str(tmp_path)], input=b"")
    assert r.exit_code == 1 and "ubpe: standard input: the file is empty" in r.stderr
    r = CliRunner().invoke(main, ["plot", "-", "-o", str(tmp_path), "--channel", "3"],
                           input=b"a\n1\n2\n3\n")
    assert r.exit_code == 2 and "standard input has 1 channel" in r.output


@pytest.mark.filterwarnings("ignore:the corpus supports only")
def test_bool_channels_are_drawn_as_0_and_1(tmp_path):
    """The tokens picture refused a bool .npy ('x must be numeric, got dtype bool')."""
    flags = np.arange(3000) % 7 < 3
    np.save(tmp_path / "b.npy", flags)
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "b.npy"), "-o", str(tmp_path),
                                  "--which", "tokens,residuals"])
    assert r.exit_code == 0, r.output
    assert pictures.tokens_figure(flags).ubpe_spans[:, 1].sum() == 400


def test_cli_plot_of_no_samples_names_the_file(tmp_path):
    """(A review) `ubpe plot e.npy --which bits` of an empty array said "float division by
    zero", naming no file; the library said nothing either."""
    np.save(tmp_path / "e.npy", np.zeros(0, np.int32))
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "e.npy"), "-o", str(tmp_path / "pics"),
                                  "--which", "bits"])
    assert r.exit_code == 1 and "e.npy: channel 0 has no samples: nothing to draw" in r.output
    assert not (tmp_path / "pics").exists()
    with pytest.raises(ValueError, match="channel 0 has no samples"):
        pictures.save_all(np.zeros(0, np.int64), tmp_path / "pics", which=["bits"])
