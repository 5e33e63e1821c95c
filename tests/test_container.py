"""Crafted containers (issue 13): every forged size is refused before anything is allocated."""

import json
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
import zstandard
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

import signals
from signals import container
from signals.codec_v1 import _META_DICT
from signals.container import SignalFormatError
from ubpe.cli import main


def forge(header: dict, sections: list[tuple[bytes, bytes]], n_values: int) -> bytes:
    """A container with valid checksums around whatever the sections hold."""
    return container.write_container(header, sections, n_values)


def refused(data: bytes, match: str, cap: int = 64 << 20) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(SignalFormatError, match=match):
            signals.decompress(data)
        assert tracemalloc.get_traced_memory()[1] < cap
    finally:
        tracemalloc.stop()


def test_a_blob_declaring_gigabytes_is_refused_unread():
    # issue 13: "a 98 KB file declares a zstd section that inflates to 6.4 GB"
    bomb = zstandard.ZstdCompressor(level=3).compress(b"\0" * (8 << 20))  # 8 MiB of zeros
    body = container.varint(6_400_000_000) + bomb
    col = {"name": "x", "kind": "samples", "n": 1, "dtype": "<i8", "map": {"kind": "int",
           "dtype": "<i8"}, "max_error": 0.0, "payload": 0, "extra": 1}
    data = forge({"source": "array", "shape": [1], "columns": [col]},
                 [(b"C", bytes([1, 0])), (b"B", body)], 1)
    refused(data, "above the limit|declared")


def test_a_zstd_frame_that_lies_about_its_size_is_refused():
    frame = zstandard.ZstdCompressor(write_content_size=True).compress(b"a" * 1000)
    body = container.varint(10) + frame  # says 10 bytes, holds 1000
    col = {"name": "x", "kind": "samples", "n": 1, "dtype": "<i8", "map": {"kind": "int",
           "dtype": "<i8"}, "max_error": 0.0, "payload": 0, "extra": 1}
    data = forge({"source": "array", "shape": [1], "columns": [col]},
                 [(b"C", bytes([1, 0])), (b"B", body)], 1)
    refused(data, "declares|decoded")


@pytest.mark.parametrize("n", [2**33, 2**40])
def test_a_column_declaring_more_samples_than_the_end_marker_is_refused_before_allocating(n):
    """A constant payload of 2 bytes and a column n of 2**40 (within MAX_SAMPLES), the end
    marker 1000 values: the decoder allocated the column's n (MemoryError at 2**40, 64 GB
    at 2**33) before it compared the columns with the end marker."""
    col = {"name": "x", "kind": "samples", "n": n, "dtype": "<i8", "map": {"kind": "int"},
           "max_error": 0.0, "payload": 0, "extra": None}
    data = forge({"source": "array", "shape": [n], "columns": [col]}, [(b"C", bytes([1, 6]))],
                 1000)
    refused(data, f"the columns declare {n:,} values, the end marker 1,000")


def test_a_column_declaring_2_to_the_40_samples_is_refused():
    col = {"name": "x", "kind": "samples", "n": 2**41, "dtype": "<i8", "map": {"kind": "int"},
           "max_error": 0.0, "payload": 0, "extra": None}
    data = forge({"source": "arrays", "columns": [col]}, [(b"C", bytes([1, 0]))], 2**41)
    refused(data, "declares")


def test_a_constant_payload_cannot_claim_more_values_than_max_values():
    # a 2-byte constant payload may stand for any count: the count is bounded first
    col = {"name": "x", "kind": "samples", "n": 2**40, "dtype": "<i8", "map": {"kind": "int"},
           "max_error": 0.0, "payload": 0, "extra": None}
    data = forge({"source": "arrays", "columns": [col]}, [(b"C", bytes([1, 0]))], 2**40)
    refused(data, "above max_values")
    exact = {"format": 1, "dtype": "int64", "kind": "int", "exceptions": 0}
    ok = forge({"source": "arrays", "columns": [{**col, "n": 1000, "map": exact}]},
               [(b"C", bytes([1, 6]))], 1000)
    (x,) = signals.decompress(ok, max_values=1000)
    assert x.tolist() == [3] * 1000
    with pytest.raises(SignalFormatError, match="above max_values"):
        signals.decompress(ok, max_values=999)


def test_section_lengths_beyond_the_file_are_truncation():
    data = bytearray(signals.compress(np.arange(100)))
    pos = len(container.MAGIC) + 4
    struct.pack_into("<I", data, pos + 1, 2**31)  # the header's length
    with pytest.raises(SignalFormatError, match="truncated"):
        signals.decompress(bytes(data))


def test_v1_tokens_10_to_the_10_is_an_error_not_an_abort():
    # issue 13: a crafted "tokens": 10**10 aborted the process inside the entropy coder
    header = {"one_d": True, "transform": {"kind": "none"}, "alphabet": 2, "merges": 0,
              "doc_length": 4096, "channels": [{"name": "ch0", "n": 4, "tokens": 10**10,
                                                "table": 2, "bytes": [0, 2, 2, 4], "offset": 0}]}
    meta = zstandard.ZstdCompressor(dict_data=_META_DICT, write_dict_id=False).compress(
        json.dumps(header).encode() + b"\n" + bytes([0, 1]) + bytes([1, 1]))
    body = b"UBPE-SIG" + struct.pack("<HI", 1, len(meta)) + meta + bytes(4)
    data = body + struct.pack("<I", zlib.crc32(body))
    with pytest.raises(SignalFormatError, match="tokens"):
        signals.decompress(data)


def _v1_constant(n: int) -> bytes:
    """A version-1 file of one channel of ``n`` samples of one symbol (a 1-entry token table:
    no rANS word to read)."""
    header = {"one_d": True, "transform": {"kind": "none"}, "alphabet": 2, "merges": 0,
              "doc_length": 4096, "channels": [{"name": "ch0", "n": n, "tokens": n, "table": 1,
                                                "bytes": [0, 1, 1, 0], "offset": 0}]}
    meta = zstandard.ZstdCompressor(dict_data=_META_DICT, write_dict_id=False).compress(
        json.dumps(header).encode() + b"\n" + bytes([0]) + bytes([1]))
    body = b"UBPE-SIG" + struct.pack("<HI", 1, len(meta)) + meta
    return body + struct.pack("<I", zlib.crc32(body))


def _v1(header: dict, binary: bytes = b"", payload: bytes = b"") -> bytes:
    meta = zstandard.ZstdCompressor(dict_data=_META_DICT, write_dict_id=False).compress(
        json.dumps(header).encode() + b"\n" + binary)
    body = b"UBPE-SIG" + struct.pack("<HI", 1, len(meta)) + meta + payload
    return body + struct.pack("<I", zlib.crc32(body))


def test_a_version_1_file_cannot_get_around_max_values():
    """(Re-review) A negative n beside 2**31 summed to 5 (16 GiB allocated); 24 doubling merges
    expanded 128 tokens to 2**31 samples before the count was compared (here 20: 1 GiB)."""
    chans = [{"name": "a", "n": 2**31, "tokens": 2**31, "table": 1, "bytes": [0, 1, 1, 0],
              "offset": 0}, {"name": "b", "n": 5 - 2**31, "tokens": 0, "table": 1,
                             "bytes": [0, 1, 1, 0], "offset": 0}]
    head = {"one_d": False, "transform": {"kind": "none"}, "alphabet": 2, "merges": 0,
            "doc_length": 4096, "channels": chans}
    refused(_v1(head, bytes([0, 1, 0, 1])), "counts: integers >= 0")
    k = 20
    merges = np.array([(0, 0)] + [(1 + i, 1 + i) for i in range(1, k)], np.int32).tobytes()
    head = {"one_d": True, "transform": {"kind": "none"}, "alphabet": 2, "merges": k,
            "doc_length": 4096, "channels": [{"name": "a", "n": 128, "tokens": 128, "table": 1,
                                              "bytes": [0, 1, 1, 0], "offset": 0}]}
    refused(_v1(head, merges + bytes([1 + k, 1])), "more than the 128 allowed")
    with pytest.raises(SignalFormatError, match="counts: integers"):
        signals.decompress(_golden_v1_edited(lambda h: h["channels"][0].update(n=300.0)))


def test_a_version_1_file_is_bounded_by_max_values():
    """A 60-byte version-1 file declaring 2**36 samples of one symbol: the decoder allocated
    them (MemoryError; at 2**31, 16 GB), where version 2 refuses above max_values first."""
    assert np.array_equal(signals.decompress(_v1_constant(5)), np.zeros(5))
    refused(_v1_constant(2**36), "declares 68,719,476,736 values, above max_values")
    with pytest.raises(SignalFormatError, match="above max_values=1,000"):
        signals.decompress(_v1_constant(2000), max_values=1000)


def _golden_v1_edited(edit) -> bytes:
    """tests/data/golden_v1.ubpe with its JSON header changed by ``edit`` (checksum renewed)."""
    from pathlib import Path

    from signals import codec_v1
    golden = (Path(__file__).parent / "data" / "golden_v1.ubpe").read_bytes()
    data, header, binary, pos = codec_v1._read_header(golden)
    edit(header)
    meta = zstandard.ZstdCompressor(dict_data=_META_DICT, write_dict_id=False).compress(
        json.dumps(header).encode() + b"\n" + binary)
    body = b"UBPE-SIG" + struct.pack("<HI", 1, len(meta)) + meta + data[pos:-4]
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize("edit, match", [
    (lambda h: h["channels"][0].update(offset=2**70), "OverflowError"),
    (lambda h: h["channels"][0].update(offset=1.5), "offset 1.5"),
    (lambda h: h.pop("one_d"), "KeyError"),
    (lambda h: h["transform"].update(block_size=10**30), "block_size must be an integer"),
    (lambda h: h["channels"][0].update(quantizer={"kind": "uniform", "n_levels": 10**12,
                                                  "lossless": [False], "range": [[0.0, 1.0, 10**12]]}),
     "bins together"),
])
def test_a_forged_version_1_header_is_a_format_error(edit, match):
    """Raw OverflowError, KeyError and MemoryError came out of the version-1 decoder, and a
    block size of 10**30 a numba typing error with its traceback through the command line."""
    assert signals.decompress(_golden_v1_edited(lambda h: None)).shape == (2, 300)
    with pytest.raises(SignalFormatError, match=match):
        signals.decompress(_golden_v1_edited(edit))


@pytest.mark.parametrize("axis", [2, -1, True, "1"])
def test_an_axis_other_than_0_or_1_is_a_format_error(axis, tmp_path):
    """The array reader took any axis but 1 as 0, the .npz reader any but 0 as 1: a forged
    value meant two things."""
    x = np.arange(20, dtype=np.int16).reshape(4, 5)
    data = signals.compress(x)
    header, sections, n = container.read_container(data)
    assert header["axis"] == 0 and np.array_equal(signals.decompress(data), x)
    header["axis"] = axis
    with pytest.raises(SignalFormatError, match="axis"):
        signals.decompress(container.write_container(header, [(s.kind, s.body) for s in sections], n))
    np.savez(tmp_path / "a.npz", a=x)
    data = signals.files.compress_file((tmp_path / "a.npz").read_bytes(), "npz", path="a.npz")
    header, sections, n = container.read_container(data)
    header["members"][0]["axis"] = axis
    with pytest.raises(SignalFormatError, match="axis"):
        signals.files.decompress_file(
            container.write_container(header, [(s.kind, s.body) for s in sections], n))


def test_inspect_of_a_forged_version_1_header_is_a_format_error():
    with pytest.raises(SignalFormatError, match="malformed file .KeyError: 'n'"):
        signals.inspect(_golden_v1_edited(lambda h: h["channels"][0].pop("n")))
    with pytest.raises(SignalFormatError, match="counts: integers >= 0"):  # (as decompress)
        signals.inspect(_golden_v1_edited(lambda h: h["channels"][0].update(n=-5)))
    for call in (signals.decompress, signals.inspect):  # (the same counts refused by both)
        with pytest.raises(SignalFormatError, match="10.0 tokens for 300 samples"):
            call(_golden_v1_edited(lambda h: h["channels"][0].update(tokens=10.0)))
        with pytest.raises(SignalFormatError, match="for 4611686018427387904 samples|above max_"):
            call(_golden_v1_edited(lambda h: h["channels"][0].update(n=2**62)))


def test_the_cli_reports_a_forged_file_in_one_line(tmp_path):
    col = {"name": "x", "kind": "samples", "n": 2**41, "dtype": "<i8", "map": {"kind": "int"},
           "max_error": 0.0, "payload": 0, "extra": None}
    bad = tmp_path / "bad.ubpe"
    bad.write_bytes(forge({"source": "arrays", "columns": [col]}, [(b"C", bytes([1, 0]))], 2**41))
    r = CliRunner().invoke(main, ["decompress", str(bad), "-o", str(tmp_path / "out")])
    assert r.exit_code == 1 and "Traceback" not in r.output and "declares" in r.output
    assert not (tmp_path / "out").exists()


def test_a_forged_max_error_is_a_format_error():
    # (a header column's "max_error": "abc" gave a bare ValueError from float())
    header, sections, n = container.read_container(signals.compress(np.arange(10)))
    header["columns"][0]["max_error"] = "abc"
    data = forge(header, [(s.kind, s.body) for s in sections], n)
    for f in (signals.decompress, signals.inspect):
        with pytest.raises(SignalFormatError, match="max_error"):
            f(data)


def test_version_0_is_called_damaged_not_newer():
    """A container patched to version 0 said 'newer than this ubpe reads... upgrade ubpe'."""
    import signals
    from signals.container import SignalFormatError
    data = bytearray(signals.compress(np.arange(10)))
    data[8:10] = b"\x00\x00"
    with pytest.raises(SignalFormatError, match="version 0 does not exist"):
        signals.decompress(bytes(data))


# ------------------------------------------------------------ a small CSV file stored whole
def whole(body: bytes, source: int = 0) -> bytes:
    """A file stored whole (flags bit 0) around ``body``, with a valid checksum."""
    out = container.MAGIC + struct.pack("<HH", 2, container.FLAG_STORED_WHOLE) + bytes([source])
    return out + body + struct.pack("<I", zlib.crc32(out + body))


def whole_refused(data: bytes, match: str) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(SignalFormatError, match=match):
            signals.decompress_file(data)
        assert tracemalloc.get_traced_memory()[1] < 4 << 20
    finally:
        tracemalloc.stop()


def test_a_csv_file_stored_whole_is_given_back_and_described():
    text = b"t,v\n" + b"".join(b"%d,%d\n" % (t, t % 4) for t in range(40))
    data = signals.compress_file(text, "csv")
    assert data[:12] == container.MAGIC + b"\x02\x00\x01\x00"
    assert data == whole(container.verbatim_body(text))  # (preamble, source 0, body, CRC)
    assert len(data) < len(signals.compress_file(text, "csv", allow_verbatim=False))
    assert signals.decompress_file(data).data == text
    info = signals.inspect(data)
    assert info["stored_whole"] in ("zstd", "lzma2") and info["channels"] == []
    with pytest.raises(ValueError, match="holds a CSV file"):
        signals.decompress(data)
    for k in range(len(data)):  # every byte under the checksum
        bad = bytearray(data)
        bad[k] ^= 0x10
        with pytest.raises(SignalFormatError):
            signals.decompress_file(bytes(bad))
    for n in range(len(data)):
        with pytest.raises(SignalFormatError):
            signals.decompress_file(data[:n])


def test_a_csv_file_stored_whole_checks_what_it_declares():
    import lzma
    text = b"a,b\n1,2\n"
    lz = lzma.compress(text, format=lzma.FORMAT_RAW, filters=container._lzma2_filters(len(text)))
    assert signals.decompress_file(whole(b"\x01" + container.varint(len(text)) + lz)).data == text
    # a size above the limit: refused before anything is decompressed
    whole_refused(whole(b"\x01" + container.varint(1 << 40) + lz), "above the limit")
    whole_refused(whole(b"\x01" + container.varint(len(text) + 1) + lz), "does not decode")
    whole_refused(whole(b"\x01" + container.varint(len(text) - 1) + lz), "does not decode")
    whole_refused(whole(b"\x01" + container.varint(len(text)) + lz + b"\x00"), "does not decode")
    whole_refused(whole(b"\x01" + container.varint(len(text)) + lz[:-1]), "does not decode")
    whole_refused(whole(b"\x01" + container.varint(len(text)) + b"\xff" * 8), "damaged LZMA2")
    z = zstandard.ZstdCompressor(write_content_size=True).compress(text)
    assert signals.decompress_file(whole(b"\x00" + container.varint(len(text)) + z)).data == text
    whole_refused(whole(b"\x00" + container.varint(len(text) - 1) + z), "above the limit")
    whole_refused(whole(b"\x00" + container.varint(len(text) + 1) + z), "does not decode")
    whole_refused(whole(b"\x00" + container.varint(len(text)) + z + b"JUNK"), "does not decode")
    whole_refused(whole(b"\x00" + container.varint(len(text)) + z + z), "does not decode")
    whole_refused(whole(b"\x02" + container.varint(len(text)) + z), "unknown coder")
    whole_refused(whole(b""), "unknown coder")
    whole_refused(whole(b"\x00" + container.varint(len(text)) + z, source=1), "unknown source")
    whole_refused(container.MAGIC + b"\x02\x00\x02\x00", "unknown flags")


def test_a_file_that_repeats_itself_is_stored_whole():
    """The attempt was skipped where the columns coded below 1/24 of the file: 120 kB of one
    row repeated took 311 bytes as columns, 52 stored whole."""
    text = b"a,b,c\n" + b"1,2,3\n" * 20000
    data = signals.compress_file(text, "csv")
    assert signals.inspect(data)["stored_whole"] and len(data) < 60
    assert signals.decompress_file(data).data == text


@given(st.binary(max_size=3000))
@example(raw=b"\x00\n,")  # (2 fields, expected 1: refused, as a CSV file, either way)
@settings(max_examples=60, deadline=None)
def test_any_small_file_given_as_csv_round_trips_either_way(raw):
    try:
        data = signals.compress_file(raw, "csv")
    except ValueError as e:  # (a CsvError naming the line: the CSV reader refuses it either way)
        with pytest.raises(ValueError) as without:
            signals.compress_file(raw, "csv", allow_verbatim=False)
        assert str(without.value) == str(e)
        return
    assert signals.decompress_file(data).data == raw
    columns = signals.compress_file(raw, "csv", allow_verbatim=False)
    assert len(data) <= len(columns)


def test_bytes_after_a_streams_end_marker_are_named_as_such():
    """(A review) A byte appended to a stream was reported as "the end marker declares 2
    frames, 2 were read (or bytes follow it)"; a container names bytes after its end."""
    import io

    from signals import compress_stream, container, decompress_stream
    buf = io.BytesIO()
    compress_stream([np.arange(100), np.arange(50)], buf)
    data = buf.getvalue()
    assert [x.size for x in decompress_stream(io.BytesIO(data))] == [100, 50]
    with pytest.raises(container.SignalFormatError,
                       match=f"unexpected bytes after the stream's end marker at byte {len(data)}"):
        list(container.iter_stream_frames(io.BytesIO(data + b"\0")))
    bad = bytearray(data)
    bad[-12:-4] = struct.pack("<Q", 3)
    bad[-4:] = struct.pack("<I", zlib.crc32(bytes(bad[-12:-4])))
    with pytest.raises(container.SignalFormatError, match="declares 3 frames, 2 were read$"):
        list(container.iter_stream_frames(io.BytesIO(bytes(bad))))
