"""Trained models (issue 15): files and packets coded against a model's content id."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import signals
from signals import SignalFormatError, SignalModel, read_csv


@pytest.fixture(scope="module")
def ecg_counts(ecg_csv):
    return np.round(read_csv(ecg_csv).channels[0] / 0.005).astype(np.int64)


@pytest.fixture(scope="module")
def ecg_model(ecg_counts):
    return SignalModel(256, 512, progress=False).fit([ecg_counts[:60_000]], names=["ecg"])


def test_the_model_pays_on_short_packets_and_says_so(ecg_model, ecg_counts):
    (report,) = ecg_model.codec_report_
    assert report["kept"] and report["bits_model"] < report["bits_own"]
    held = ecg_counts[60_000:]
    packets = [held[i:i + 256] for i in range(0, held.size - 255, 256)]
    coded = ecg_model.compress_packets(packets)
    assert all(np.array_equal(a, b) for a, b in zip(ecg_model.decompress_packets(coded), packets))
    with_model = sum(map(len, coded))
    alone = sum(len(signals.compress(p)) for p in packets)
    assert with_model < 0.8 * alone  # the per-packet tables and header are what the model saves


def test_each_stage_decision_is_reported_with_its_runner_up(ecg_model, tmp_path):
    from signals.model import stage_lines
    (report,) = ecg_model.codec_report_
    stages = report["stages"]
    names = [st_["stage"] for st_ in stages]
    assert names[:2] == ["predictor", "match model"] and names[-1] == "contexts"
    for st_ in stages:  # the kept candidate codes the validation split in the fewest bits
        assert st_["bits"] <= st_["bits_alternative"]
    chosen = ecg_model.codec_["ecg"]["model"]
    assert stages[0]["kept"] == (f"LPC order {chosen.order}" if chosen.kind == 1 else
                                 f"fixed order {chosen.order}")
    assert int(stages[-1]["kept"]) >= chosen.thresholds.size + 1  # bins may merge
    lines = stage_lines(report)
    assert len(lines) == len(stages) and lines[0].startswith("predictor: ")
    ecg_model.save(tmp_path / "m.json")  # the report is kept in the file
    assert SignalModel.load(tmp_path / "m.json").codec_report_[0]["stages"] == stages


@settings(max_examples=40, deadline=None)
@given(x=arrays(np.int64, st.integers(0, 600), elements=st.integers(-2**62, 2**62)))
def test_packets_round_trip_any_values(ecg_model, x):
    # samples far outside the training range still come back exactly (escape codes)
    assert np.array_equal(ecg_model.decompress_packet(ecg_model.compress_packet(x)), x)


def test_files_name_the_model_they_need(ecg_model, ecg_counts, tmp_path):
    x = ecg_counts[60_000:70_000]
    data = signals.compress(x, model=ecg_model)
    assert signals.inspect(data)["model"] == ecg_model.content_id()
    assert np.array_equal(signals.decompress(data, model=ecg_model), x)
    with pytest.raises(SignalFormatError, match=f"compressed with model {ecg_model.content_id()}"):
        signals.decompress(data)
    other = SignalModel(256, 300, progress=False).fit([ecg_counts[40_000:]], names=["ecg"])
    with pytest.raises(SignalFormatError, match="not with the model given"):
        signals.decompress(data, model=other)
    ecg_model.save(tmp_path / "m.json")
    again = SignalModel.load(tmp_path / "m.json")
    assert again.content_id() == ecg_model.content_id()
    assert np.array_equal(again.decompress(data), x)


def test_a_packet_from_another_model_or_corrupted_fails_alone(ecg_model, ecg_counts):
    other = SignalModel(256, 300, progress=False).fit([ecg_counts[40_000:]], names=["ecg"])
    packets = [ecg_counts[i:i + 256] for i in range(70_000, 72_560, 256)]
    coded = ecg_model.compress_packets(packets)
    with pytest.raises(SignalFormatError, match="packet check failed.*another model than sha256:"):
        other.decompress_packet(coded[0])
    bad = bytearray(coded[3])
    bad[len(bad) // 2] ^= 0x10
    coded[3] = bytes(bad)
    for k, p in enumerate(coded):
        if k == 3:
            with pytest.raises(SignalFormatError, match="packet check failed"):
                ecg_model.decompress_packet(p)
        else:
            assert np.array_equal(ecg_model.decompress_packet(p), packets[k])


def test_packet_overhead_is_small(ecg_model):
    x = np.zeros(256, np.int64)
    assert len(ecg_model.compress_packet(x)) <= 6 + 8  # tag, count, check + a few coded bytes


def test_packet_stream_end_marker_and_wrong_model(ecg_model, ecg_counts):
    packets = [ecg_counts[i:i + 256] for i in range(70_000, 71_280, 256)]
    buf = io.BytesIO()
    assert ecg_model.write_packet_stream(packets, buf) == 5
    got = list(ecg_model.read_packet_stream(io.BytesIO(buf.getvalue())))
    assert all(np.array_equal(a, b) for a, b in zip(got, packets)) and len(got) == 5
    with pytest.raises(SignalFormatError, match="truncated"):
        list(ecg_model.read_packet_stream(io.BytesIO(buf.getvalue()[:-14])))
    other = SignalModel(256, 300, progress=False).fit([ecg_counts[40_000:]], names=["ecg"])
    with pytest.raises(SignalFormatError, match="made with model .* not with the model given"):
        list(other.read_packet_stream(io.BytesIO(buf.getvalue())))


def test_decimal_float_channels_use_a_fixed_scale(ecg_csv):
    mv = read_csv(ecg_csv).channels[0]  # float64 mV with 3 decimals
    model = SignalModel(256, 300, progress=False).fit([mv[:50_000]], names=["ecg"])
    assert model.codec_["ecg"]["map"] == {"kind": "decimal", "scale": 3, "step": 5}
    x = mv[50_000:50_256]
    back = model.decompress_packet(model.compress_packet(x))
    assert back.dtype == x.dtype and np.array_equal(back, x)
    with pytest.raises(ValueError, match="do not map exactly"):
        model.compress_packet(x + 1e-7)
    data = model.compress(x + 1e-7)  # a file falls back to its own coding for that channel
    assert np.array_equal(model.decompress(data), x + 1e-7)


@pytest.mark.slow
def test_cli_packet_stream_with_a_model(tmp_path, ecg_csv):
    from click.testing import CliRunner

    from signals import table
    from ubpe.cli import main
    r = CliRunner()
    model, packed, back = tmp_path / "m.json", tmp_path / "ecg.pkt", tmp_path / "back.npy"
    assert r.invoke(main, ["build", str(ecg_csv), "-o", str(model), "-q"]).exit_code == 0
    res = r.invoke(main, ["compress", str(ecg_csv), "--model", str(model), "--packet-size", "256",
                          "-o", str(packed)])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["compress", str(ecg_csv), "--packet-size", "256", "-o",
                          str(tmp_path / "other.pkt")])
    assert res.exit_code == 2 and "--packet-size needs --model" in res.output
    res = r.invoke(main, ["decompress", str(packed), "-o", str(back)])
    assert res.exit_code == 1 and "pass the model" in res.output
    res = r.invoke(main, ["decompress", str(packed), "--model", str(model), "-o", str(back)])
    assert res.exit_code == 0, res.output
    want = table.encode_csv(ecg_csv.read_bytes()).int_columns[0][1]
    assert np.array_equal(np.load(back), want)  # the exact integer column, packet by packet
    assert "packet stream" in r.invoke(main, ["inspect", str(packed)]).output
