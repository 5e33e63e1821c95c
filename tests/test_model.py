"""Trained models (issue 15): files and packets coded against a model's content id."""

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import signals
from signals import SignalFormatError, SignalModel, read_csv
from ubpe import FormatError


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
    assert names[:2] == ["predictor", "match model"] and "contexts" in names
    # (match model off: the vocabulary; where the values were sparse, the ranked stage after)
    assert names[-1] == "vocabulary" or ecg_model.codec_["ecg"]["model"].mh
    for st_ in stages:  # the kept candidate codes the validation split in the fewest bits ...
        if "min_gain" in st_:  # ... or the runner-up, which slows the decoder down (the cascade,
            # the vocabulary, a high LPC order, many contexts), does not save its minimum
            assert st_["bits"] - st_["bits_alternative"] < st_["min_gain"]
            if st_["stage"] in ("adaptive cascade", "vocabulary"):
                assert st_["kept"] == "off"
        else:
            assert st_["bits"] <= st_["bits_alternative"]
    chosen = ecg_model.codec_["ecg"]["model"]
    assert stages[0]["kept"] == (f"LPC order {chosen.order}" if chosen.kind == 1 else
                                 f"fixed order {chosen.order}")
    contexts = next(st_ for st_ in stages if st_["stage"] == "contexts")
    assert int(contexts["kept"]) >= chosen.thresholds.size + 1  # bins may merge
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


def test_a_packet_declaring_more_samples_than_it_can_hold_allocates_nothing(ecg_model):
    """One packet decoded alone (decompress_packet) asked the general reader for the samples
    that it declares, to name the fault: 11 bytes declaring 2**33 samples took 64 GiB."""
    import zlib

    from signals.container import varint
    coded = ecg_model.compress_packets([np.full(1000, 300, np.int64)])[0]
    body = bytes([coded[0]]) + varint(2**33) + coded[3:-2]  # (1000: a varint of 2 bytes)
    seed = zlib.crc32(ecg_model.model_id())
    forged = body + (zlib.crc32(body, seed) & 0xFFFF).to_bytes(2, "little")
    for decode in (ecg_model.decompress_packet, lambda p: ecg_model.decompress_packets([p])):
        with pytest.raises(SignalFormatError, match="8589934592 samples cannot fit in"):
            decode(forged)


def test_a_forged_codec_part_is_a_format_error(ecg_model, tmp_path):
    """Sealed model files whose codec part was a list, whose codec report held a number, or a
    string for its bits, or whose channel dtype was text gave AttributeError tracebacks (or a
    half-printed inspect); `inspect` says why a channel's model was kept."""
    from click.testing import CliRunner

    from ubpe.cli import main
    from ubpe.serialization import seal
    for change, message in (
            (lambda d: d.update(codec=[1]), "'codec' must be an object"),
            (lambda d: d.update(codec_report=[5]), "entry 0 is not a channel's report"),
            (lambda d: d.update(codec_report={"a": 1}), "'codec_report' must be a list"),
            (lambda d: d["codec_report"][0].update(bits_own="x"), "bits_own 'x' is not a number"),
            (lambda d: d["codec"]["ecg"].update(dtype="<U5"), "dtype '<U5' is not numeric")):
        doc = ecg_model.to_dict()
        change(doc)
        with pytest.raises(FormatError, match=message):
            SignalModel.from_dict(doc)
        (tmp_path / "m.json").write_text(json.dumps(seal(doc)))
        r = CliRunner().invoke(main, ["inspect", str(tmp_path / "m.json")])
        assert r.exit_code == 1 and "Traceback" not in r.output and not r.stdout, r.output
    ecg_model.save(tmp_path / "m.json")
    r = CliRunner().invoke(main, ["inspect", str(tmp_path / "m.json")])
    assert r.exit_code == 0 and "kept, " in r.stdout and "(lower bits on the held-out" in r.stdout


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


def test_packet_streams_one_after_the_other_and_bytes_after_the_end(ecg_model, ecg_counts):
    """Bytes after the end marker were ignored: `cat a.pkt b.pkt` decoded a.pkt alone, and
    junk after it passed; now concatenated streams are read as one (as xz and zstd read
    concatenated files) and anything else is an error."""
    packets = [ecg_counts[i:i + 256] for i in range(70_000, 71_280, 256)]
    a, b = io.BytesIO(), io.BytesIO()
    ecg_model.write_packet_stream(packets[:3], a)
    ecg_model.write_packet_stream(packets[3:], b)
    got = list(ecg_model.read_packet_stream(io.BytesIO(a.getvalue() + b.getvalue())))
    assert len(got) == 5 and all(np.array_equal(x, y) for x, y in zip(got, packets))
    other = SignalModel(256, 300, progress=False).fit([ecg_counts[40_000:]], names=["ecg"])
    c = io.BytesIO()
    other.write_packet_stream(packets[:2], c)
    with pytest.raises(SignalFormatError, match="follows the first 3 packets was made with model"):
        list(ecg_model.read_packet_stream(io.BytesIO(a.getvalue() + c.getvalue())))
    for junk in (b"x", b"\x00" * 30, b.getvalue()[:-1]):
        with pytest.raises(SignalFormatError, match="after the end marker|truncated"):
            list(ecg_model.read_packet_stream(io.BytesIO(a.getvalue() + junk)))


def test_packet_stream_decodes_in_bounded_batches(ecg_model, ecg_counts, monkeypatch):
    """read_packet_stream decodes its packets in batches (at most STREAM_BATCH packets and
    STREAM_SAMPLES declared samples): the packets of every batch come back in order, and a
    corrupted packet raises when it is reached, named by its index in the stream."""
    import signals.packets as P
    packets = [ecg_counts[i:i + n] for i, n in zip(range(70_000, 80_000, 700),
                                                    [256, 1, 700, 0, 300, 256, 512, 3, 256])]
    buf = io.BytesIO()
    ecg_model.write_packet_stream(packets, buf)
    data = buf.getvalue()
    raw = list(P.read_packet_stream(io.BytesIO(data), ecg_model.model_id()))
    monkeypatch.setattr(P, "STREAM_BATCH", 3)
    monkeypatch.setattr(P, "STREAM_SAMPLES", 600)
    assert [[P.declared_samples(p) for p in b] for b in P.stream_batches(raw, 1)] == [
        [256, 1], [700], [0, 300, 256], [512, 3], [256]]
    assert [len(b) for b in P.stream_batches(raw, 2)] == [2, 1, 2, 1, 1, 2]  # twice the samples
    got = list(ecg_model.read_packet_stream(io.BytesIO(data)))
    assert len(got) == len(packets) and all(np.array_equal(a, b) for a, b in zip(got, packets))
    bad = bytearray(data)
    pos = data.index(raw[5]) + len(raw[5]) // 2  # inside packet 5 (its check fails)
    bad[pos] ^= 0x21
    it = ecg_model.read_packet_stream(io.BytesIO(bytes(bad)))
    assert all(np.array_equal(next(it), packets[j]) for j in range(5))
    with pytest.raises(SignalFormatError, match="^packet 5: packet check failed"):
        next(it)
    # errors="keep": the damaged packet's error in its place, and the packets after it
    kept = list(ecg_model.read_packet_stream(io.BytesIO(bytes(bad)), errors="keep"))
    assert isinstance(kept[5], SignalFormatError) and len(kept) == len(packets)
    assert all(np.array_equal(kept[j], packets[j]) for j in range(len(packets)) if j != 5)
    with pytest.raises(ValueError, match="errors must be"):
        list(ecg_model.read_packet_stream(io.BytesIO(data), errors="ignore"))
    with pytest.raises(ValueError, match="errors must be"):
        ecg_model.decompress_packets(raw, errors="ignore")
    # a stream cut inside packet 7: the packets before it, then the error
    cut = ecg_model.read_packet_stream(io.BytesIO(data[:data.index(raw[7]) + 2]))
    assert all(np.array_equal(next(cut), packets[j]) for j in range(7))
    with pytest.raises(SignalFormatError, match="truncated packet stream: packet 7"):
        next(cut)


@st.composite
def _frame_bodies(draw, n_ch):
    """A packet's body (no check): well formed for ``n_ch`` channels, then perhaps cut, edited
    or given a count or length of more bytes than its value needs."""
    from signals.container import varint
    from signals.packets import TAG
    n = draw(st.sampled_from([0, 1, 127, 128, 300, 16383, 16384, 2**40]))
    lengths = draw(st.lists(st.integers(0, 4), min_size=n_ch - 1, max_size=n_ch - 1))
    last = draw(st.integers(0, 4))
    tag = draw(st.sampled_from([TAG | (n_ch - 1), TAG | (n_ch - 1), TAG | n_ch % 16, 0x0F]))
    head = varint(n) + b"".join(varint(k) for k in lengths)
    width = draw(st.sampled_from([0, 0, 2, 9, 10, 11]))  # the count in more bytes than it needs
    if width:
        groups = [(n >> (7 * i)) & 0x7F for i in range(width)]  # (11 bytes: refused)
        head = bytes(g | 0x80 for g in groups[:-1]) + bytes([groups[-1]]) + head[len(varint(n)):]
    body = bytes([tag]) + head + bytes(draw(st.binary(min_size=sum(lengths) + last,
                                                      max_size=sum(lengths) + last)))
    cut = draw(st.integers(1, len(body)))
    body = body[:cut] if draw(st.booleans()) else body
    if body and draw(st.booleans()):
        k = draw(st.integers(0, len(body) - 1))
        body = body[:k] + bytes([draw(st.integers(0, 255))]) + body[k + 1:]
    return body


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3).flatmap(lambda c: st.tuples(st.just(c), st.lists(_frame_bodies(c),
                                                                          min_size=1, max_size=5))))
def test_packet_frames_cut_as_split_cuts(case):
    """The kernel that cuts a batch of packets (_frames) agrees with _split packet by packet:
    where it cuts one, the same count and payloads; it refuses every packet that _split refuses,
    and only those (a varint of more bytes than its value needs is read as _split reads it)."""
    import zlib

    import signals.packets as P
    n_ch, bodies = case
    mid = bytes(range(16))
    seed = zlib.crc32(mid)
    packets = [b + (zlib.crc32(b, seed) & 0xFFFF).to_bytes(2, "little") for b in bodies]
    buf = np.frombuffer(b"".join(packets), np.uint8)
    starts = np.cumsum([0] + [len(p) for p in packets]).astype(np.int64)
    skip = np.zeros(len(packets), np.bool_)
    skip[::3] = True  # (as where a check failed: left out)
    status, cut, ns, cbuf, coff = P._frames(buf, starts, n_ch, skip)
    assert cut.tolist() == np.flatnonzero(status == 0).tolist()
    k = 0
    for j, p in enumerate(packets):
        if skip[j]:
            assert status[j] == 2
            continue
        try:
            n, payloads = P._split(p, n_ch, mid, "")
        except SignalFormatError:
            assert status[j] == 1
            continue
        assert status[j] == 0
        assert ns[k] == n
        assert [cbuf[coff[c, k]:coff[c, k + 1]].tobytes() for c in range(n_ch)] == payloads
        k += 1
    assert coff.shape == (n_ch, k + 1)


def test_a_packet_whose_count_takes_more_bytes_than_it_needs_decodes(ecg_model, ecg_counts):
    """No encoder writes a count in more bytes than it needs, but the format reads one: the
    batch kernel cuts such a packet as _split does, and its batch decodes as before."""
    import zlib
    packets = [ecg_counts[i:i + 256] for i in range(70_000, 70_768, 256)]
    coded = ecg_model.compress_packets(packets)
    assert coded[1][1:3] == b"\x80\x02"  # 256
    body = coded[1][:1] + b"\x80\x82\x00" + coded[1][3:-2]
    seed = zlib.crc32(ecg_model.model_id())
    coded[1] = body + (zlib.crc32(body, seed) & 0xFFFF).to_bytes(2, "little")
    back = ecg_model.decompress_packets(coded)
    assert all(np.array_equal(a, b) for a, b in zip(back, packets))
    assert np.array_equal(ecg_model.decompress_packet(coded[1]), packets[1])


def test_decimal_float_channels_use_a_fixed_scale(ecg_csv):
    mv = read_csv(ecg_csv).channels[0]  # float64 mV with 3 decimals
    model = SignalModel(256, 300, progress=False).fit([mv[:50_000]], names=["ecg"])
    assert model.codec_["ecg"]["map"] == {"kind": "decimal", "scale": 3, "step": 5}
    x = mv[50_000:50_256]
    back = model.decompress_packet(model.compress_packet(x))
    assert back.dtype == x.dtype and np.array_equal(back, x)
    with pytest.raises(ValueError, match=r"sample 0 \(.*\) is not a decimal with at most 3 "
                                         r"decimals, as every value the model was built on"):
        model.compress_packet(x + 1e-7)
    y = x.copy()
    y[7] = 0.001  # (3 decimals, but the model's values were multiples of 0.005: the message
    # said "values do not map exactly at the model's scale ({'kind': 'decimal', ...})")
    with pytest.raises(ValueError, match=r"sample 7 \(0.001\) is not a multiple of 0.005"):
        model.compress_packet(y)
    data = model.compress(x + 1e-7)  # a file falls back to its own coding for that channel
    assert np.array_equal(model.decompress(data), x + 1e-7)


def test_packet_size_tunes_the_codec_part_and_is_kept_in_the_file(ecg_counts, ecg_model, tmp_path):
    from signals.channel import fit_channel_model
    from ubpe.serialization import FormatError
    x = ecg_counts[:60_000]
    model = SignalModel(256, 512, progress=False, packet_size=4096).fit([x], names=["ecg"])
    (report,) = model.codec_report_
    assert report["kept"]
    # the channel model is the one fitted for packets of 4096
    assert model.codec_["ecg"]["model"].get_config() == \
        fit_channel_model([x], packet_size=4096).get_config()
    model.save(tmp_path / "m.json")
    again = SignalModel.load(tmp_path / "m.json")
    assert again.packet_size == 4096 and again.content_id() == model.content_id()
    doc = model.to_dict()
    assert doc["codec_packet_size"] == 4096
    # a model of the default size keeps the document (and so the content id) it had before
    assert ecg_model.packet_size == 256 and "codec_packet_size" not in ecg_model.to_dict()
    assert SignalModel.from_dict(ecg_model.to_dict()).packet_size == 256
    doc["codec_packet_size"] = 0
    with pytest.raises(FormatError, match="packet_size must be a positive integer, got 0"):
        SignalModel.from_dict(doc)
    with pytest.raises(ValueError, match="packet_size must be a positive integer"):
        SignalModel(16, 16, progress=False, packet_size=0).fit([x[:1000]])


def test_cli_packet_stream_refuses_cells_it_cannot_hold(tmp_path):
    # a packet holds a column's integers only: nan, an empty cell or text is refused, not
    # silently replaced (it used to come back as a neighbour's value, with exit code 0)
    from click.testing import CliRunner

    from ubpe.cli import main
    r = CliRunner()
    (tmp_path / "t.csv").write_text("v,w\n1.5,1\n2.5,2\n3.5,3\n4.5,4\n")
    assert r.invoke(main, ["build", str(tmp_path / "t.csv"), "-q", "-o",
                           str(tmp_path / "t.json")]).exit_code == 0
    for cell in ("nan", "", "n/a"):
        (tmp_path / "n.csv").write_text(f"v,w\n1.5,1\n{cell},2\n2.5,3\n")
        res = r.invoke(main, ["compress", "--model", str(tmp_path / "t.json"), "--packet-size",
                              "4", str(tmp_path / "n.csv"), "-o", str(tmp_path / "n.pkt")])
        assert res.exit_code == 1 and "not numbers at its scale (the first in data row 2)" \
            in res.output and "Traceback" not in res.output
        assert not (tmp_path / "n.pkt").exists()


def test_cli_packet_stream_refuses_a_column_of_other_decimals(tmp_path):
    # a packet holds the column's integers at the file's scale: 1.55 at 2 decimals is 155, which
    # a model built on 1-decimal files would give back as 15.5 (the scale is not in the packet)
    from click.testing import CliRunner

    from ubpe.cli import main
    from ubpe.serialization import FormatError
    r = CliRunner()
    (tmp_path / "t.csv").write_text("v,w\n1.5,1\n2.5,2\n3.5,3\n4.5,4\n")
    model = tmp_path / "t.json"
    assert r.invoke(main, ["build", str(tmp_path / "t.csv"), "-q", "-o", str(model)]).exit_code == 0
    loaded = SignalModel.load(model)
    assert loaded.codec_["v"]["csv_scale"] == 1 and loaded.codec_["w"]["csv_scale"] == 0
    (tmp_path / "two.csv").write_text("v,w\n1.55,1\n2.5,2\n")
    res = r.invoke(main, ["compress", "--model", str(model), "--packet-size", "4",
                          str(tmp_path / "two.csv"), "-o", str(tmp_path / "two.pkt")])
    assert res.exit_code == 1 and "column 'v' has 2 digits after the point here, 1 in the files" \
        in res.output and not (tmp_path / "two.pkt").exists()
    (tmp_path / "one.csv").write_text("v,w\n1.5,1\n-2.5,2\n")
    res = r.invoke(main, ["compress", "--model", str(model), "--packet-size", "4",
                          str(tmp_path / "one.csv"), "-o", str(tmp_path / "one.pkt")])
    assert res.exit_code == 0, res.output
    res = r.invoke(main, ["decompress", "--model", str(model), str(tmp_path / "one.pkt"), "-o",
                          str(tmp_path / "one.npy")])
    assert res.exit_code == 0 and np.load(tmp_path / "one.npy").tolist() == [[15, -25], [1, 2]]
    doc = loaded.to_dict()
    doc["codec"]["v"]["csv_scale"] = -1
    with pytest.raises(FormatError, match="csv_scale -1"):
        SignalModel.from_dict(doc)


@pytest.mark.slow
def test_cli_packet_stream_with_a_model(tmp_path, ecg_csv):
    from click.testing import CliRunner

    from signals import table
    from ubpe.cli import main
    r = CliRunner()
    model, packed, back = tmp_path / "m.json", tmp_path / "ecg.pkt", tmp_path / "back.npy"
    assert r.invoke(main, ["build", str(ecg_csv), "-o", str(model), "-q", "--packet-size",
                           "256"]).exit_code == 0
    shown = r.invoke(main, ["inspect", str(model)]).output
    assert "tuned for packets of 256 samples" in shown and "held out in packets of 256" in shown
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


# ---------------------------------------------------------------- the vocabulary stage
def solar(n_days=400):
    """Integer 'irradiance': zero every night, a noisy day curve (an LCG, so it is exact)."""
    out, v = [], 1
    for d in range(n_days):
        a = d * 37 % 11 + 3
        for h in range(24):
            v = (v * 1103515245 + 12345) % 2**31
            out.append(0 if h < 7 or h > 17 else a * (h - 7) * (17 - h) + v % 9)
    return np.array(out, np.int64)


@pytest.fixture(scope="module")
def vocab_model():
    from signals.channel import fit_channel_model
    return fit_channel_model([solar()], packet_size=256)


def test_the_vocabulary_stage_is_kept_where_it_pays(vocab_model):
    from signals.channel import MODEL_VOCAB, ChannelModel, decode_channel, encode_channel
    st_ = next(s for s in vocab_model.stages_ if s["stage"] == "vocabulary")
    assert st_["stage"] == "vocabulary" and st_["kept"] != "off"
    assert st_["bits"] < st_["bits_alternative"] and vocab_model.merges is not None
    x = solar(20)[:256]
    p = encode_channel(x, model=vocab_model)
    assert p[0] == MODEL_VOCAB and decode_channel(p, x.size, model=vocab_model).tolist() == x.tolist()
    again = ChannelModel.from_config(vocab_model.get_config())
    assert again.content_id() == vocab_model.content_id()
    assert decode_channel(p, x.size, model=again).tolist() == x.tolist()
    # a model without the stage (or none) refuses the payload; a damaged one fails
    plain = ChannelModel.from_config({k: v for k, v in vocab_model.get_config().items()
                                      if k != "vocabulary"})
    for model in (plain, None):
        with pytest.raises(ValueError):
            decode_channel(p, x.size, model=model)
    for bad in (p[:-1], p[:3], p + b"\x00", p[:1] + b"\x7f" + p[2:]):
        with pytest.raises(ValueError):
            decode_channel(bad, x.size, model=vocab_model)



@pytest.mark.parametrize("forge", ["repeat", "doubling"])
def test_a_vocabulary_the_tokenizer_refuses_is_refused_with_the_model(vocab_model, forge):
    """A config whose vocabulary merges a pair twice, or chains merges whose expansions
    double (2**60 symbols), loaded, and the first packet failed (the whole batch with it)."""
    import base64

    from signals import entropy as E
    from signals.channel import ChannelModel
    cfg = vocab_model.get_config()
    merges = np.frombuffer(base64.b64decode(cfg["vocabulary"]["merges"]), "<i4").reshape(-1, 2)
    width = E.alphabet_size(vocab_model.k, vocab_model.msb)
    if forge == "repeat":
        extra = merges[:1]
    else:  # id width + r merges itself with itself: its expansion doubles each time
        extra = np.array([[0, 0]] + [[width + merges.shape[0] + r] * 2 for r in range(60)])
    forged = np.vstack([merges, extra]).astype("<i4")
    codes = base64.b64decode(cfg["vocabulary"]["codes"]) + b"\x01" * len(extra)
    cfg["vocabulary"] = {"merges": base64.b64encode(forged.tobytes()).decode(),
                         "codes": base64.b64encode(codes).decode()}
    with pytest.raises(ValueError, match="vocabulary: "):
        ChannelModel.from_config(cfg)

def test_vocabulary_packets_in_the_batch_decoder_as_alone(vocab_model):
    """decode_packets decodes mode-8 payloads in one kernel: the same samples as decode_channel
    gives each alone, and the same damaged payloads refused."""
    from signals.channel import MODEL_VOCAB, decode_channel, decode_packets, encode_packets
    x = solar(30)
    xs = [x[i:i + 256] for i in range(0, x.size, 256)]
    coded = encode_packets(xs, vocab_model)
    assert all(p[0] == MODEL_VOCAB for p in coded)
    rng = np.random.default_rng(0)
    cases = []
    for p, xi in zip(coded, xs):
        cases += [(p, xi.size), (p[:-1], xi.size), (p + b"\0", xi.size), (p[:2], xi.size),
                  (p, xi.size + 1)]
        for _ in range(30):
            q = bytearray(p)
            q[rng.integers(1, len(q))] ^= 1 << int(rng.integers(8))
            cases.append((bytes(q), xi.size))
    got = decode_packets([c[0] for c in cases], [c[1] for c in cases], vocab_model,
                         on_error="none")
    refused = 0
    for (p, n), g in zip(cases, got):
        try:
            one = decode_channel(p, n, model=vocab_model).tolist()
        except ValueError:
            one = None
        assert one == (None if g is None else g.tolist())
        refused += one is None
    assert 0 < refused < len(cases)
    assert all(np.array_equal(g, xi) for g, xi in zip(got[::35], xs))


def test_a_vocabulary_holds_at_most_the_4096_ids_of_a_table_row():
    """(Re-review) vocab_sizes=(17,) fitted 4352 ids: encode_channel failed inside numpy
    ("could not broadcast (4352,) into (4096,)") and the model's own config was refused."""
    from signals.channel import ChannelModel, decode_channel, encode_channel, fit_channel_model
    rng = np.random.default_rng(0)  # 1,500 motifs of 8 steps: merges enough for 17 x 256 ids
    x = np.cumsum(rng.integers(-3, 4, size=(1500, 8))[rng.integers(0, 1500, 40_000)].ravel())
    m = fit_channel_model([x], packet_size=256, vocab_sizes=(17,), lpc_orders=(), max_lag=0,
                          match=((0, 0), (32, 255)), contexts=(1, 2), min_rank_gain=None,
                          min_vocab_gain=-1e9)
    assert m.merges is not None and 256 + len(m.merges) == 4096
    back = ChannelModel.from_config(json.loads(json.dumps(m.get_config())))
    assert np.array_equal(decode_channel(encode_channel(x[:5000], model=m), 5000, model=back),
                          x[:5000])
    one = fit_channel_model([solar(60)], packet_size=256, match=((0, 0),), vocab_sizes=())
    assert one.mh == 0  # (a stage of one candidate: its record has no runner-up, no IndexError)


def test_vocabulary_packets_encoded_at_once_as_alone(vocab_model):
    """encode_packets finds a vocabulary model's token ids for all packets in one call of the
    tokenizer: the same bytes as encode_channel gives each packet alone (empty, constant,
    long and short packets, and a packet the model codes badly among them)."""
    from signals.channel import encode_channel, encode_packets
    x = solar(30)
    noise = np.random.default_rng(5).integers(-10**6, 10**6, 300)
    xs = [x[i:i + 256] for i in range(0, x.size, 256)] + [
        np.zeros(0, np.int64), np.full(40, 7), x[:5000], x[100:103], noise]
    coded = encode_packets(xs, vocab_model)
    assert coded == [encode_channel(p, model=vocab_model) for p in xs]
    assert {p[0] for p in coded} >= {0, 1, 8}  # (raw, constant and vocabulary payloads)


def test_a_vocabulary_that_saves_too_little_is_not_kept():
    from signals.channel import fit_channel_model
    m = fit_channel_model([solar()], packet_size=256, min_vocab_gain=1.0)  # (it saves about 0.6)
    st_ = next(s for s in m.stages_ if s["stage"] == "vocabulary")
    assert st_["kept"] == "off" and st_["min_gain"] == 1.0 and m.merges is None
    assert st_["bits_alternative"] < st_["bits"]  # smaller, but not by enough


def test_a_candidate_that_slows_the_decoder_must_save_enough(ecg_counts):
    from signals.channel import FAST_CONTEXTS, FAST_LPC_ORDER, fit_channel_model
    x = [ecg_counts[:60_000]]  # (where LPC 32 and 16 contexts are the fewest bits)
    opts = dict(packet_size=4096, lpc_orders=(8, 32), contexts=(4, 16), vocab_sizes=())
    free = fit_channel_model(x, min_slow_gain=0.0, **opts)
    strict = fit_channel_model(x, min_slow_gain=10.0, **opts)
    assert strict.kind != 1 or strict.order <= FAST_LPC_ORDER
    assert strict.thresholds.size + 1 <= FAST_CONTEXTS
    by_stage = {s["stage"]: s for s in strict.stages_}
    for name in ("predictor", "contexts"):
        free_st = next(s for s in free.stages_ if s["stage"] == name)
        if free_st["kept"] != by_stage[name]["kept"]:  # the slow one won on bits alone
            assert by_stage[name]["min_gain"] == 10.0
            assert by_stage[name]["bits_alternative"] <= by_stage[name]["bits"]
        else:
            assert "min_gain" not in by_stage[name]
    assert (free.order, free.thresholds.size + 1) == (32, 14)
    assert (strict.order, strict.thresholds.size + 1) == (8, 4)


def test_a_vocabulary_config_is_checked(vocab_model):
    import base64

    from signals.channel import ChannelModel
    cfg = vocab_model.get_config()
    merges = np.frombuffer(base64.b64decode(cfg["vocabulary"]["merges"]), "<i4").copy()
    merges[1] = 10**6  # a merge of a token not defined before it
    bad = {**cfg, "vocabulary": {**cfg["vocabulary"],
                                 "merges": base64.b64encode(merges.tobytes()).decode()}}
    with pytest.raises(ValueError, match="not defined"):
        ChannelModel.from_config(bad)
    with pytest.raises(ValueError, match="codes"):
        ChannelModel.from_config({**cfg, "vocabulary": {**cfg["vocabulary"], "codes": "AAAA"}})


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.int64, st.integers(0, 600), elements=st.integers(-2**63, 2**63 - 1)))
def test_vocabulary_packets_round_trip_any_values(vocab_model, x):
    from signals.channel import decode_packets, encode_packets
    packets = [x[:300], x[300:]]
    coded = encode_packets(packets, vocab_model)
    back = decode_packets(coded, [p.size for p in packets], vocab_model)
    assert all(np.array_equal(a, b) for a, b in zip(back, packets))


# ---------------------------------------------------------------- a lag predictor
def periodic(n, seed=1, noise=5, period=40):
    """A waveform that repeats every ``period`` samples (longer than any LPC's order), plus
    noise in ``0..noise-1`` from an LCG (so that it is exact)."""
    shape = [j * 37 % 23 * 9 for j in range(period)]
    out, v = [], seed
    for t in range(n):
        v = (v * 1103515245 + 12345) % 2**31
        out.append(shape[t % period] + v % noise)
    return np.array(out, np.int64)


@pytest.fixture(scope="module")
def lag_model():
    from signals.channel import fit_channel_model
    return fit_channel_model([periodic(20_000)], packet_size=1024)


def test_a_periodic_source_gets_a_lag_predictor(lag_model):
    import json

    from signals.channel import ChannelModel, decode_packets, encode_channel, encode_packets
    first = lag_model.stages_[0]
    assert (lag_model.kind, lag_model.order) == (2, 40) and first["kept"] == "lag 40"
    assert first["bits"] < first["bits_alternative"]
    # a packet's own tables: with the model's lag they do as well as a search of its own
    # predictor on the validation split, so the hint asks for no search
    last = next(s for s in lag_model.stages_ if s["stage"].startswith("a packet's own tables"))
    assert lag_model.own_search is False
    assert last["kept"] == "the model's predictor" and last["bits"] <= last["bits_alternative"]
    again = ChannelModel.from_config(json.loads(json.dumps(lag_model.get_config())))
    assert again.own_search is False
    assert again.content_id() == lag_model.content_id()
    x = periodic(4096, seed=7)
    packets = [x[i:i + 1024] for i in range(0, x.size, 1024)]
    coded = encode_packets(packets, again)
    back = decode_packets(coded, [p.size for p in packets], lag_model)
    assert all(np.array_equal(a, b) for a, b in zip(back, packets))
    # the period is what the model knows: no model at all codes these packets in more bytes
    assert sum(map(len, coded)) < 0.9 * sum(len(encode_channel(p)) for p in packets)


def test_a_lag_predictor_config_is_checked(lag_model):
    from signals.channel import MODEL_MAX_LAG, ChannelModel
    cfg = lag_model.get_config()
    for bad in ({"order": 1}, {"order": MODEL_MAX_LAG + 1}, {"coefs": [1]}, {"shift": 2}):
        with pytest.raises(ValueError, match="lag predictor"):
            ChannelModel.from_config({**cfg, "predictor": {**cfg["predictor"], **bad}})
    with pytest.raises(ValueError, match="own_search"):
        ChannelModel.from_config({**cfg, "own_search": 1})


def test_a_packet_takes_the_models_lag_with_its_own_tables(lag_model):
    from signals.channel import (
        CODED2,
        OWN_SEARCH_LEVEL,
        _read_block_side,
        _Reader,
        decode_channel,
        encode_channel,
    )
    x = periodic(2048, seed=3, noise=80)  # the same period, 16 times the model's noise
    p = encode_channel(x, model=lag_model)
    assert p[0] == CODED2 and len(p) < len(encode_channel(x, model=lag_model, level=0))
    kinds, orders = _read_block_side(_Reader(p[1:]), x.size)[1:3]
    assert (kinds.tolist(), orders.tolist()) == ([2], [40])  # the model's lag, in the payload
    assert decode_channel(p, x.size).tolist() == x.tolist()  # (mode 4 needs no model)
    q = encode_channel(x, model=lag_model, level=OWN_SEARCH_LEVEL)  # the predictor searched too
    assert len(q) <= len(p) and decode_channel(q, x.size, model=lag_model).tolist() == x.tolist()


def test_sparse_packets_take_the_ranks_with_the_models_lag():
    from signals.channel import RANKED, decode_channel, encode_channel, fit_channel_model
    model = fit_channel_model([periodic(20_000) * 7], packet_size=1024)  # values 7 apart
    assert (model.kind, model.order, model.own_search) == (2, 40, False)
    x = periodic(2048, seed=5) * 7
    p = encode_channel(x, model=model)  # the ranks of the distinct values, under the lag
    assert p[0] == RANKED and len(p) < 0.8 * len(encode_channel(x, model=model, level=0))
    assert decode_channel(p, x.size, model=model).tolist() == x.tolist()


@pytest.fixture(scope="module")
def three_channel_model():
    rng = np.random.default_rng(11)
    t = np.arange(30_000)
    a = (500 * np.sin(t / 17) + rng.normal(0, 4, t.size)).astype(np.int32)
    b = 5 * np.cumsum(rng.integers(-3, 4, t.size)).astype(np.int32)  # mapped with step 5
    c = np.repeat(rng.integers(0, 9, t.size // 50), 50).astype(np.int32)
    return SignalModel(64, 64, progress=False).fit([a, b, c], names=["a", "b", "c"]), (a, b, c)


def test_many_packets_of_several_channels(three_channel_model):
    """compress_packets maps each channel once for all packets: the same packets as
    compress_packet one at a time (at every length); decompress_packets gives them back (dtype
    kept, for packets of one length and of several), and a damaged packet fails alone or raises
    naming it."""
    model, (a, b, c) = three_channel_model
    assert list(model.codec_) == ["a", "b", "c"] and model.codec_["b"]["map"]["step"] == 5
    x = np.stack([a, b, c])[:, 20_000:]
    for cuts in ([0, 256, 512, 768], [0, 256, 512, 1536, 1537, 1537, 5633, 5700]):
        packets = [x[:, i:j] for i, j in zip(cuts, cuts[1:])]
        coded = model.compress_packets(packets)
        assert all(k == model.compress_packet(p) for k, p in zip(coded, packets))
        back = model.decompress_packets(coded)
        assert all(g.dtype == np.int32 and np.array_equal(g, p) for g, p in zip(back, packets))
        bad = list(coded)
        bad[1] = bad[1][:3] + bytes([bad[1][3] ^ 1]) + bad[1][4:]
        kept = model.decompress_packets(bad, errors="keep")
        assert isinstance(kept[1], SignalFormatError)
        assert all(np.array_equal(k, p) for j, (k, p) in enumerate(zip(kept, packets)) if j != 1)
        with pytest.raises(SignalFormatError, match="packet 1"):
            model.decompress_packets(bad)
    wrong = x[:, :8].copy()
    wrong[1, 3] += 1  # not a multiple of 5
    with pytest.raises(ValueError, match="'b'"):
        model.compress_packets([x[:, :8], wrong])
    with pytest.raises(ValueError, match="dtype"):
        model.compress_packets([x[:, :8].astype(np.int64)])
    assert model.compress_packets([]) == [] and model.decompress_packets([]) == []


def test_many_packets_with_forged_payloads(three_channel_model):
    """Packets whose check is right but whose payloads are not (a forger's): each fails alone,
    with the other packets of the batch intact, whatever the count they declare."""
    from signals import packets as P
    model, (a, b, c) = three_channel_model
    names, models = model._codec_models()
    mid = model.model_id()
    x = np.stack([a, b, c])[:, 25_000:]
    packets = [x[:, i:i + 300] for i in range(0, 1500, 300)]
    coded = model.compress_packets(packets)
    n, payloads = P._split(coded[1], 3, mid, "")
    forged = list(coded)
    forged[1] = P._frame(payloads, 10**9, mid)  # far more samples than the payloads hold
    forged[3] = P._frame([payloads[0], b"\x03\xff", payloads[2]], n, mid)  # a damaged payload
    kept = model.decompress_packets(forged, errors="keep")
    assert isinstance(kept[1], SignalFormatError) and isinstance(kept[3], SignalFormatError)
    assert "channel 1" in str(kept[3])
    for j in (0, 2, 4):
        assert np.array_equal(kept[j], packets[j])
    many = P.decode_many(forged, models, mid)
    assert isinstance(many[1], SignalFormatError) and isinstance(many[3], SignalFormatError)
    for j in (0, 2, 4):
        want = [model.map_channel(nm, ch)[0] for nm, ch in zip(names, packets[j])]
        assert all(np.array_equal(g, w) for g, w in zip(many[j], want))


def test_a_packet_declaring_2_to_the_62_rans_words_fails_alone():
    """A one-sample model payload declaring 2**62 rANS words: twice that wrapped in the batch
    kernel's bound check, and numba's own ValueError ("array is too big") was raised for the
    whole batch, the good packets lost with it."""
    from signals import packets as P
    frozen = Path(__file__).parent / "data" / "frozen"
    model = SignalModel.load(frozen / "signal_model_v3.json")
    good = (frozen / "packet_v2.bin").read_bytes()
    wrap = bytes([0x03]) + bytes([0x80] * 8) + bytes([0x40])  # mode 3, then the varint 2**62
    bad = P._frame([wrap], 1, model.model_id())
    kept = model.decompress_packets([good, bad, good], errors="keep")
    assert isinstance(kept[1], SignalFormatError)
    assert np.array_equal(kept[0], model.decompress_packet(good)) and np.array_equal(kept[0], kept[2])
    with pytest.raises(SignalFormatError, match="damaged payload"):
        model.decompress_packet(bad)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), st.lists(st.binary(max_size=300), min_size=3,
                                                          max_size=3)), max_size=6),
       st.integers(1, 3))
def test_packets_framed_in_one_kernel_as_one_by_one(frames, n_ch):
    """encode_columns frames all its packets in one kernel (_frame_all) and fills their checks
    after: the same bytes as _frame packet by packet."""
    import zlib

    from signals import packets as P
    mid = bytes(range(16, 32))
    frames = [(n, pay[:n_ch - 1] + [pay[-1] or b"\x01"]) for n, pay in frames]
    pieces = [p[c] for c in range(n_ch) for _, p in frames]  # (channel by channel)
    poff = np.cumsum([0] + [len(q) for q in pieces]).astype(np.int64)
    pay = np.frombuffer(b"".join(pieces), np.uint8)
    out, ends = P._frame_all(pay, poff, n_ch,
                             np.cumsum([0] + [n for n, _ in frames]).astype(np.int64))
    seed = zlib.crc32(mid)
    for j, (n, payloads) in enumerate(frames):
        one = P._frame(payloads, n, mid, seed)
        assert out[ends[j]:ends[j + 1] - 2].tobytes() == one[:-2]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 2**40), payloads=st.lists(st.binary(min_size=1, max_size=40), min_size=1,
                                                  max_size=3), cut=st.integers(0, 60))
def test_packet_framing_round_trip_and_truncation(n, payloads, cut):
    """_split inverts _frame for any count and channel count (its one-channel shortcuts
    included), and a truncated packet fails its check or its reading."""
    from signals import packets as P
    mid = bytes(range(16))
    pk = P._frame(payloads, n, mid)
    assert P._split(pk, len(payloads), mid, "") == (n, payloads)
    short = pk[:max(0, len(pk) - 1 - cut)]
    try:  # (a 16-bit check passes by chance once in 65,536: then the content differs)
        assert P._split(short, len(payloads), mid, "") != (n, payloads)
    except SignalFormatError:
        pass


@pytest.mark.parametrize("n", [1_000, 70_000, 300_000])
def test_a_constant_packet_decodes_one_at_a_time_and_in_a_batch(ecg_model, n):
    """compress_packet codes a constant as one (2 bytes) only up to CONST_MAX samples: the
    batch decoder bounds a payload's count by its bytes, and must read every packet the
    single-packet path writes (a 300,000-sample constant in 2 bytes was refused)."""
    from signals.channel import CONST_MAX
    x = np.full(n, int(ecg_model.codec_["ecg"]["map"].get("offset", 0)) + 3, np.int64)
    p = ecg_model.compress_packet(x)
    assert (len(p) < 16) == (n <= CONST_MAX)
    assert np.array_equal(ecg_model.decompress_packet(p), x)
    assert np.array_equal(ecg_model.decompress_packets([p])[0], x)


# ---------------------------------------------------------------- the ranked stage
def grid(n, seed=1, step=9.8):
    """Readings on a sparse grid, as an accelerometer's scaled ADC counts lie: the nearest
    integer to ``step`` times a slow random walk (an LCG, so it is exact)."""
    out, v, k = [], seed, 100
    for _ in range(n):
        v = (v * 1103515245 + 12345) % 2**31
        k += v % 7 - 3
        out.append(round(step * k))
    return np.array(out, np.int64)


@pytest.fixture(scope="module")
def ranked_model():
    from signals.channel import fit_channel_model
    return fit_channel_model([grid(24_000)], packet_size=1024)


def test_the_ranked_stage_is_kept_where_it_pays(ranked_model):
    """Values about 9.8 apart: the ranks among a packet's distinct values code the walk itself,
    under a model fitted on the training packets' ranks (and one of their distinct values).
    Kept on the validation bits, reported, in the config (and the content id), refused by a
    model without it; the batch and the single coder make the same payloads."""
    from signals.channel import (
        MODEL_RANKED,
        ChannelModel,
        decode_channel,
        decode_packets,
        encode_channel,
        encode_packets,
        fit_channel_model,
    )
    st_ = next(s for s in ranked_model.stages_ if s["stage"] == "distinct values and ranks")
    assert st_["kept"] == "on" and st_["bits"] < st_["bits_alternative"] - 0.5
    assert ranked_model.ranked is not None and ranked_model.own_gain is not None
    x = grid(6000, seed=7)
    xs = [x[i:i + 1024] for i in range(0, x.size, 1024)]
    coded = encode_packets(xs, ranked_model)
    assert sum(p[0] == MODEL_RANKED for p in coded) >= 4
    assert coded == [encode_channel(p, model=ranked_model) for p in xs]
    assert all(np.array_equal(a, b) for a, b in zip(decode_packets(coded, [p.size for p in xs],
                                                                   ranked_model), xs))
    again = ChannelModel.from_config(ranked_model.get_config())
    assert again.content_id() == ranked_model.content_id()
    assert all(np.array_equal(decode_channel(c, p.size, model=again), p) for c, p in zip(coded, xs))
    plain = ChannelModel.from_config({k: v for k, v in ranked_model.get_config().items()
                                      if k != "ranked"})
    assert plain.content_id() != ranked_model.content_id()
    for model in (plain, None):
        with pytest.raises(ValueError, match="model"):
            decode_channel(coded[0], xs[0].size, model=model)
    without = fit_channel_model([grid(24_000)], packet_size=1024, min_rank_gain=None)
    assert without.ranked is None
    assert sum(map(len, encode_packets(xs, without))) > 1.1 * sum(map(len, coded))


def test_a_ranked_stage_that_saves_too_little_is_not_kept():
    from signals.channel import fit_channel_model
    m = fit_channel_model([grid(24_000)], packet_size=1024, min_rank_gain=20.0)
    st_ = next(s for s in m.stages_ if s["stage"] == "distinct values and ranks")
    assert st_["kept"] == "off" and st_["min_gain"] == 20.0 and m.ranked is None
    assert st_["bits_alternative"] < st_["bits"]  # smaller, but not by enough
    dense = fit_channel_model([np.cumsum(np.random.default_rng(1).integers(-9, 10, 24_000))],
                              packet_size=1024)
    assert dense.ranked is None  # (a dense walk: the ranks are the values, less a shift)


def test_ranked_packets_in_the_batch_decoder_as_alone(ranked_model):
    """decode_packets decodes mode-9 payloads through the ranked stage's two models in a
    batch: the same samples as decode_channel gives each alone, and the same damaged payloads
    refused (each alone: the others still decode)."""
    from signals.channel import MODEL_RANKED, decode_channel, decode_packets, encode_packets
    x = grid(4096, seed=3)
    xs = [x[i:i + 1024] for i in range(0, x.size, 1024)]
    coded = encode_packets(xs, ranked_model)
    assert all(p[0] == MODEL_RANKED for p in coded)
    # the kernel itself decodes the well-formed ones (status 0: not left to the general reader)
    buf = np.frombuffer(b"".join(coded), np.uint8)
    off = np.cumsum([0] + [len(p) for p in coded]).astype(np.int64)
    got, _, status, _ = ranked_model.batch_kernels()[1](buf, off, np.full(len(xs), 1024))
    assert status.tolist() == [0] * len(xs) and np.array_equal(got, x)
    rng = np.random.default_rng(0)
    cases = []
    for p, xi in zip(coded, xs):
        cases += [(p, xi.size), (p[:-1], xi.size), (p + b"\0", xi.size), (p[:2], xi.size),
                  (p[:1] + b"\x01" + p[2:], xi.size), (p, xi.size + 1), (p, 1)]
        for _ in range(40):
            q = bytearray(p)
            q[rng.integers(1, len(q))] ^= 1 << int(rng.integers(8))
            cases.append((bytes(q), xi.size))
    got = decode_packets([c[0] for c in cases], [c[1] for c in cases], ranked_model,
                         on_error="none")
    refused = 0
    for (p, n), g in zip(cases, got):
        try:
            one = decode_channel(p, n, model=ranked_model).tolist()
        except ValueError:
            one = None
        assert one == (None if g is None else g.tolist())
        refused += one is None
    assert 0 < refused < len(cases)
    assert all(np.array_equal(g, xi) for g, xi in zip(got[::47], xs))


def test_a_model_that_has_coded_pickles(ranked_model):
    """A model holds its bound kernels once it has coded (fit_channel_model codes with it);
    they do not pickle, and are left out: a process pool that is not forked sends the model
    to its workers (the copy builds its own)."""
    import pickle

    from signals.channel import decode_packets, encode_packets
    x = grid(2048, seed=5)
    xs = [x[:1024], x[1024:]]
    coded = encode_packets(xs, ranked_model)
    copy = pickle.loads(pickle.dumps(ranked_model))
    assert copy.content_id() == ranked_model.content_id()
    assert encode_packets(xs, copy) == coded
    assert all(np.array_equal(a, b) for a, b in zip(decode_packets(coded, [1024, 1024], copy), xs))


BOUNDS_CHECKED = """
import sys
import numpy as np
sys.path.insert(0, "tests")
import signals.channel as C
from test_model import grid
m = C.fit_channel_model([grid(24_000)], packet_size=1024)
faults = 0
for seed in range(1, 12):
    x = grid(2000, seed=seed)
    for size in (2, 5, 16, 100, 256, 1024):
        ps = [x[i:i + size] for i in range(0, min(x.size, 30 * size), size)]
        pay = C.encode_packets(ps, m, level=0)
        for call in [lambda: C.decode_packets(pay, [p.size for p in ps], m)] + [
                lambda p=p, q=q: C.decode_channel(p, q.size, model=m) for p, q in zip(pay, ps)]:
            try:
                call()
            except IndexError:
                faults += 1
print(faults)
"""


@pytest.mark.slow
def test_model_payloads_decode_within_their_arrays(tmp_path):
    """Under numba's bounds checks, no decoder of a model payload (mode 3, mode 9: the batch
    kernel and the general reader) reads past its arrays: a token at the last raw bit of a
    whole 64-bit word read the word after the one past the bits (its bits shifted out, but
    past the array, as a payload's raw bits were held with one spare word)."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "UBPE_AOT": "0",
           "NUMBA_CACHE_DIR": str(tmp_path)}  # (bounds-checked machine code, not the cache's)
    r = subprocess.run([sys.executable, "-c", BOUNDS_CHECKED], cwd=Path(__file__).parent.parent,
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["0"]


def test_a_ranked_config_is_checked(ranked_model):
    from signals.channel import ChannelModel
    cfg = ranked_model.get_config()
    sub = cfg["ranked"]
    nested = {**cfg, "ranked": {**sub, "ranks": cfg}}  # a ranked stage inside one
    for bad in (nested, {**cfg, "ranked": {"values": sub["values"]}},
                {**cfg, "ranked": {**sub, "values": {**sub["values"], "k": 99}}},
                {**cfg, "ranked": [sub["values"], sub["ranks"]]}):
        with pytest.raises(ValueError, match="ranked|hybrid"):
            ChannelModel.from_config(bad)


@settings(max_examples=30, deadline=None)
@given(x=arrays(np.int64, st.integers(0, 2100), elements=st.integers(-2**63, 2**63 - 1)),
       grid_part=st.integers(0, 2100), seed=st.integers(1, 1000))
def test_ranked_packets_round_trip_any_values(ranked_model, x, grid_part, seed):
    from signals.channel import decode_channel, decode_packets, encode_packets
    y = np.concatenate([grid(grid_part, seed=seed), x])  # (sparse values, then any)
    packets = [y[:1024], y[1024:1500], y[1500:]]
    coded = encode_packets(packets, ranked_model)
    back = decode_packets(coded, [p.size for p in packets], ranked_model)
    assert all(np.array_equal(a, b) for a, b in zip(back, packets))
    assert all(np.array_equal(decode_channel(c, p.size, model=ranked_model), p)
               for c, p in zip(coded, packets))


def test_packets_of_channels_with_different_dtypes():
    # (the channels of a packet were stacked into one array: int16 + int32 became int32, which
    # the int16 channel refused; int64 + uint64 became float64)
    import io

    from signals import SignalModel
    t = np.arange(3000)
    a = (t % 50 * 3 - 70).astype(np.int16)
    b = (t * 7 % 1000 + 100000).astype(np.int32)
    model = SignalModel(64, 80, progress=False).fit([a, b], names=["a", "b"])
    packets = [[a[i:i + 256], b[i:i + 256]] for i in range(0, 1024, 256)]
    coded = model.compress_packets(packets)
    for got, want in zip(model.decompress_packets(coded), packets):
        assert [g.dtype for g in got] == [np.int16, np.int32]
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    one = model.decompress_packet(model.compress_packet((a[:10], b[:10])))
    assert one[0].dtype == np.int16 and one[1].tolist() == b[:10].tolist()
    buf = io.BytesIO()
    model.write_packet_stream(packets, buf)
    back = list(model.read_packet_stream(io.BytesIO(buf.getvalue())))
    assert all(np.array_equal(g[1], w[1]) for g, w in zip(back, packets))


# ---------------------------------------------------------------- scikit-learn conventions
def test_signal_model_is_a_scikit_learn_estimator():
    """clone() raised TypeError (get_params had no ``deep``); no set_params; a default repr;
    ``progress`` was not a parameter; packets before fit gave AttributeError 'codec_'."""
    from ubpe import NotFittedError
    m = SignalModel(64, 80, progress=False, level=3)
    assert m.get_params(deep=True)["progress"] is False
    assert repr(m) == "SignalModel(n_levels=64, vocab_size=80, progress=False, level=3)"
    assert m.set_params(vocab_size=96) is m and m.vocab_size == 96
    with pytest.raises(ValueError, match="unknown parameter 'levels'"):
        m.set_params(levels=3)
    for call in (lambda: m.compress_packet(np.zeros(4, np.int16)), lambda: m.encode([np.zeros(4)]),
                 m.content_id):
        with pytest.raises(NotFittedError, match="not fitted yet"):
            call()
    base = pytest.importorskip("sklearn.base")
    c = base.clone(m)
    assert c is not m and c.get_params() == m.get_params()


def test_samples_by_features_warns():
    """A (n_samples, n_features) array made one channel per sample without a word."""
    x = np.random.default_rng(0).integers(0, 50, (300, 3))
    with pytest.warns(UserWarning, match=r"read as \(n_channels, n_samples\): 300 channels"):
        SignalModel(64, 70, progress=False, codec=False).fit(x)
    with pytest.warns(UserWarning, match="300 channels of 3 samples"):
        signals.compress(x)


def test_channels_of_one_name_are_recordings_of_one_channel():
    """fit(channels, names) with a name given twice: one quantizer on both recordings (the
    same column of two files), each tokenized on its own."""
    a, b = np.arange(100) % 10, np.arange(100) % 10 + 5
    m = SignalModel(64, 70, progress=False, codec=False).fit([a, b, a * 2], ["x", "x", "y"])
    assert m.channel_names_ == ["x", "y"] and m.quantizers_[0].n_codes_[0] == 15
    assert (m.decode(m.encode([b, a * 2]))[0] == b).all()


def test_set_params_after_fit_changes_neither_the_saved_model_nor_its_id(ecg_counts, tmp_path):
    """set_params(level=3) after fit made save() write another document than the one the
    cached content id came from: the packets already made could not be decoded with the saved
    file ("another model")."""
    x = ecg_counts[:30_000]
    m = SignalModel(256, 300, progress=False).fit([x[:20_000]], names=["ecg"])
    p = m.compress_packets([x[20_000:20_256]])
    before = m.to_dict()
    m.set_params(level=3, packet_size=1024, vocab_size=400)
    assert m.to_dict() == before
    m.save(tmp_path / "m.json")
    back = SignalModel.load(tmp_path / "m.json")
    assert back.content_id() == m.content_id()
    assert np.array_equal(back.decompress_packets(p)[0], x[20_000:20_256])
    # (what it encodes is what the saved file encodes: doc_length is the fitted one too)
    m.set_params(doc_length=16)
    assert np.array_equal(m.encode([x[:2000]])[0], back.encode([x[:2000]])[0])
    m.fit([x[:20_000]], names=["ecg"])  # the next fit takes them
    assert m.to_dict()["params"]["vocab_size"] == 400 and m.to_dict()["codec_level"] == 3


def test_a_repeated_channel_name_fits_each_channels_codec_on_its_own_arrays(ecg_counts):
    """fit([a1, a2, b], names=["a", "a", "b"]) fitted b's codec model on a2 (names held once,
    arrays not): b's packets cost 5x what a model of b codes them in."""
    a1, a2 = ecg_counts[:15_000], ecg_counts[15_000:30_000]
    b = (np.arange(30_000) % 50 * 3).astype(np.int64)
    m = SignalModel(256, 300, progress=False).fit([a1, a2, b], names=["a", "a", "b"])
    alone = SignalModel(256, 300, progress=False).fit([b], names=["b"])
    assert m.codec_["b"]["model"].get_config() == alone.codec_["b"]["model"].get_config()
    assert m.codec_["b"]["map"] == alone.codec_["b"]["map"]


def test_inspect_describes_a_column_coded_against_the_model(ecg_model, ecg_counts):
    """inspect said "unknown mapping 'model'" for every column coded with a model."""
    info = signals.inspect(signals.compress(ecg_counts[80_000:90_000], model=ecg_model))
    assert info["channels"][0]["mapping"] == "lossless, mapped and coded by the model"


def test_a_channel_constant_in_training_is_not_taken_for_a_grid():
    """A battery column at 100 throughout training got step 100 (the gcd of its values), and a
    packet holding 99 was refused ("values do not map exactly at the model's scale")."""
    t = np.arange(4000)
    wave = np.round(500 * np.sin(t / 9)).astype(np.int64)
    m = SignalModel(256, 300, progress=False).fit([wave, np.full(4000, 100)], names=["v", "bat"])
    assert m.codec_["bat"]["map"]["step"] == 1
    later = [wave[:256], np.where(t[:256] < 100, 100, 99)]
    back = m.decompress_packet(m.compress_packet(later))
    assert np.array_equal(back[1], later[1]) and np.array_equal(back[0], later[0])
    grid = SignalModel(256, 300, progress=False).fit([wave * 5], names=["v"])
    assert grid.codec_["v"]["map"]["step"] == 5  # (three or more distinct values: a grid)


def test_numpy_hyperparameters_save_and_an_unfitted_model_says_so(tmp_path):
    """SignalModel(n_levels=np.int64(64)) failed to save (json); compress with an unfitted
    model raised an AttributeError from inside."""
    from ubpe import NotFittedError
    x = np.round(200 * np.sin(np.arange(3000) / 9)).astype(np.int64)
    m = SignalModel(np.int64(64), np.int64(100), progress=False).fit([x])
    m.save(tmp_path / "m.json")
    assert SignalModel.load(tmp_path / "m.json").content_id() == m.content_id()
    with pytest.raises(NotFittedError):
        signals.compress(x, model=SignalModel())
