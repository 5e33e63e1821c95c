"""Reading version-1 ``.ubpe`` containers (written by ubpe 0.1; never written now).

Layout: ``docs/format.md``, section 2. Pipeline of that version, per
channel: quantizer or integer offset, a predictor, zigzag, UBPE tokens of
one shared vocabulary, rANS with the channel's token counts.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

import numpy as np
import zstandard

from ubpe import Tokenizer
from ubpe.serialization import FormatError

from .container import MAGIC, MAX_HEADER_BYTES, MAX_SAMPLES, SignalFormatError, read_varints, zstd_decompress
from .entropy import ans_decode
from .predict import Identity, predictor_from_config, unzigzag
from .quantize import quantizer_from_dict

VERSION = 1
# zstd raw-content dictionary for the metadata frame: a typical header, so
# that its JSON keys cost a few bytes, not a few hundred (short recordings).
# Part of format version 1: never change it; a new one needs a new version.
_META_DICT = zstandard.ZstdCompressionDict(
    b'{"one_d":true,"transform":{"kind":"linear_predictor","block_size":4096,'
    b'"lpc_orders":[8,16,24,32],"precision":14},"alphabet":1024,"merges":0,'
    b'"doc_length":4096,"channels":[{"name":"ch0","n":1024,"tokens":1024,"table":58,'
    b'"bytes":[2,58,61,492],"offset":-112,"quantizer":{"kind":"uniform","n_levels":1024,'
    b'"lossless":[false],"range":[[0.0,1.0,1024]]}}]}'
    b'{"kind":"fixed_predictor","block_size":256,"max_order":4}{"kind":"delta","order":1}'
    b'{"kind":"none"}"bin_edges":[["codebook":[["mu":255.0"max_iter":30'
    b'quantilegaussianmulawlloydmax',
    dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def _read_header(data: bytes):
    """Check a container; returns (data, header, binary part of meta, payload start)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise SignalFormatError("not a ubpe signal file (bad magic bytes)")
    if len(data) < len(MAGIC) + 10:
        raise SignalFormatError("truncated file: shorter than its fixed header")
    (crc,) = struct.unpack("<I", data[-4:])
    if zlib.crc32(data[:-4]) != crc:
        raise SignalFormatError("checksum mismatch: the file is truncated or corrupted")
    version, meta_len = struct.unpack("<HI", data[8:14])
    if version != 1:
        raise SignalFormatError(f"ubpe signal format version {version} is newer than this "
                                f"ubpe reads (up to {VERSION}); upgrade ubpe")
    if 14 + meta_len > len(data) - 4:
        raise SignalFormatError(f"truncated file: the metadata declares {meta_len:,} bytes")
    meta = zstd_decompress(data[14:14 + meta_len], MAX_HEADER_BYTES, "metadata",
                           dict_data=_META_DICT)
    line, _, binary = meta.partition(b"\n")
    try:
        header = json.loads(line)
    except ValueError as e:
        raise SignalFormatError(f"unreadable header ({e})") from None
    return data, header, binary, 14 + meta_len


def decompress_v1(data: bytes, *, max_values: int) -> Any:
    """Decode a ``.ubpe`` container; ``max_values``: as :func:`signals.decompress`'s (the
    channels' declared samples together, checked before any is decoded).

    Returns
    -------
    ndarray
        Shape (n_samples,) for a 1-D input, else (n_channels, n_samples);
        int64 when every channel was kept exactly, else float64 (quantized
        values). A list of 1-D arrays when channel lengths differ.

    Raises
    ------
    SignalFormatError
        On a foreign, truncated, corrupted or newer file.
    """
    data, header, binary, pos = _read_header(data)
    try:
        tf = predictor_from_config(header["transform"])
        a, m = header["alphabet"], header["merges"]
        pairs = np.frombuffer(binary[:8 * m], np.int32).reshape(-1, 2)
        if pairs.shape[0] != m:
            raise SignalFormatError("truncated merges")
        try:
            tok = Tokenizer.from_merges(a, pairs)
        except FormatError as e:
            raise SignalFormatError(f"inconsistent merges ({e})") from None
        bpos = 8 * m
        declared = _declared_samples(header)
        if declared > max_values:
            raise SignalFormatError(f"the file declares {declared:,} values, above max_values="
                                    f"{max_values:,}; pass a larger max_values (ubpe decompress "
                                    f"--max-values) to decode it")
        out = []
        for ch in header["channels"]:
            n_orders, n_gaps, n_counts, n_words = ch["bytes"]
            side = np.frombuffer(binary[bpos:bpos + n_orders], np.uint8)
            bpos += n_orders
            table = np.cumsum(read_varints(binary[bpos:bpos + n_gaps], ch["table"]))
            bpos += n_gaps
            counts = read_varints(binary[bpos:bpos + n_counts], ch["table"])
            bpos += n_counts
            words = np.frombuffer(data[pos:pos + n_words], np.uint32)
            pos += n_words
            if table.size and (table[-1] >= a + m or counts.min() < 1):
                raise SignalFormatError(f"channel {ch['name']!r}: inconsistent token table")
            _check_counts(ch)
            ids = ans_decode(table, counts, words, ch["tokens"])
            sym = tok.decode(ids, max_length=ch["n"])  # (merges may expand far past n)
            if sym.size != ch["n"]:
                raise SignalFormatError(f"channel {ch['name']!r}: {sym.size} samples decoded, "
                                        f"{ch['n']} expected")
            r = sym.astype(np.int64) if isinstance(tf, Identity) else unzigzag(sym)
            codes = tf.decode(r, side)
            q = ch.get("quantizer")
            if q is None and (isinstance(ch["offset"], bool) or not isinstance(ch["offset"], int)):
                raise ValueError(f"channel {ch['name']!r}: offset {ch['offset']!r}")
            out.append(codes + np.int64(ch["offset"]) if q is None
                       else quantizer_from_dict(q).decode(codes))
        if pos != len(data) - 4 or bpos != len(binary):
            raise SignalFormatError("section lengths do not add up to the file size")
        if header["one_d"]:
            return out[0]
    except (KeyError, TypeError, IndexError, ValueError, OverflowError) as e:
        if isinstance(e, SignalFormatError):
            raise
        raise SignalFormatError(f"malformed file ({type(e).__name__}: {e})") from None
    if len({o.size for o in out}) == 1:
        return np.stack(out) if all(o.dtype == out[0].dtype for o in out) else \
            np.stack([o.astype(np.float64) for o in out])
    return out


def inspect_v1(data: bytes) -> dict:
    """Summary of a ``.ubpe`` container without decoding the samples.

    Returns a dict: format, version, bytes, channels (name, samples,
    quantizer kind, max error, tokens), alphabet size, merges, transform,
    bits per sample.
    """
    data, header, _, _ = _read_header(data)
    try:
        return _summary_v1(data, header)
    except (KeyError, TypeError, IndexError, ValueError, OverflowError) as e:
        if isinstance(e, SignalFormatError):
            raise
        raise SignalFormatError(f"malformed file ({type(e).__name__}: {e})") from None


def _declared_samples(header: dict) -> int:
    """The samples of a version-1 header's channels together (each an integer >= 0)."""
    ns = [ch["n"] for ch in header["channels"]]
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in ns):
        raise SignalFormatError(f"the channels declare {ns[:8]}{' ...' if len(ns) > 8 else ''} "
                                f"samples (counts: integers >= 0)")
    return sum(ns)


def _check_counts(ch: dict) -> None:
    """SignalFormatError unless a version-1 channel's token count is an integer in
    ``0..n`` and its ``n`` at most ``MAX_SAMPLES`` (what ``decompress`` and ``inspect``
    both take)."""
    if isinstance(ch["tokens"], bool) or not isinstance(ch["tokens"], int) \
            or not 0 <= ch["tokens"] <= ch["n"] <= MAX_SAMPLES:
        raise SignalFormatError(f"channel {ch['name']!r}: {ch['tokens']} tokens for "
                                f"{ch['n']} samples")


def _summary_v1(data: bytes, header: dict) -> dict:
    n = _declared_samples(header)
    for ch in header["channels"]:
        _check_counts(ch)
    return {"format": "ubpe.signal", "version": struct.unpack("<H", data[8:10])[0],
            "bytes": len(data), "transform": header["transform"],
            "alphabet_size": header["alphabet"], "n_merges": header["merges"],
            "channels": [{"name": c["name"], "n_samples": c["n"],
                          "quantizer": c["quantizer"]["kind"] if "quantizer" in c else None,
                          "max_error": float(quantizer_from_dict(c["quantizer"]).max_error_[0])
                          if "quantizer" in c else 0.0,
                          "n_tokens": c["tokens"]} for c in header["channels"]],
            "bits_per_sample": 8 * len(data) / max(n, 1)}
