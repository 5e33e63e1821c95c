"""The ``.ubpe`` signal container: compress and decompress sampled signals.

Pipeline, per channel: quantize (or keep integers exactly) -> reversible
integer transform (prediction residuals, FLAC-style fixed or LPC) -> zigzag -> UBPE tokens (shortest
segmentation) -> range coding with the channel's token frequencies
(``constriction``'s ANS coder, Duda 2013). One UBPE vocabulary serves all
channels.

File layout (little-endian)::

    magic      8 bytes  b"UBPE-SIG"
    version    u16
    meta_len   u32
    meta       one zstd frame (with a fixed dictionary, ``_META_DICT``):
               a JSON line (channels, quantizers, transform,
               vocabulary size, byte lengths), the merges (int32 pairs in
               rank order), then per channel its block orders (bytes) and its
               token table (id gaps and counts, LEB128 varints)
    payload    per channel, its ANS words (u32)
    crc32      u32 over every byte before it

Everything but the range-coded tokens shares one zstd frame, so a short
recording pays a few dozen bytes of overhead, not a few hundred.

A file whose checksum, magic, version or section lengths do not check out
raises :class:`SignalFormatError`; it never decodes to wrong samples.
"""

from __future__ import annotations

import json
import struct
import warnings
import zlib

import numpy as np
import zstandard

from ubpe import Tokenizer, split_documents
from ubpe.serialization import FormatError

from .container import SignalFormatError, read_varints, write_varints
from .entropy import ans_decode, ans_encode
from .predict import Identity, LinearPredictor, predictor_from_config, unzigzag, zigzag
from .quantize import Quantizer, UniformQuantizer, quantizer_from_dict
from .tokens import tokenize_channels

MAGIC = b"UBPE-SIG"
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
AUTO_MERGES = (0, 64, 256, 1024)


class _Plan:
    """What compress decided for each channel, before the entropy coding."""

    def __init__(self, symbols, sides, quantizers, offsets):
        self.symbols, self.sides = symbols, sides
        self.quantizers, self.offsets = quantizers, offsets


def compress(x, *, quantizer: Quantizer | str | None = "auto", n_levels: int = 1024,
             transform="auto", vocab_size="auto", n_candidates: int = 16,
             doc_length: int = 4096, model=None, names=None) -> bytes:
    """Compress a signal into a ``.ubpe`` container.

    Parameters
    ----------
    x : array-like, shape (n_samples,) or (n_channels, n_samples), or a list of 1-D arrays
        Samples (finite). Integer input is kept exactly unless a quantizer is given.
    quantizer : "auto", a Quantizer, or None
        "auto": integers kept exactly, floats through ``UniformQuantizer(n_levels)``
        (fitted per channel). A Quantizer instance is fitted per channel.
    n_levels : int, default 1024
        Levels of the default quantizer.
    transform : "auto", "none", or a transform from :mod:`signals.predict`
        "auto" is ``LinearPredictor()``: per 4096-sample block, FLAC's fixed
        predictors or a quantized LPC, whichever codes cheaper.
    vocab_size : "auto" or int
        UBPE vocabulary size, the residual alphabet included; "auto" tries
        0, 64, 256 and 1024 merges and keeps the smallest file.
    n_candidates : int, default 16
        UBPE merges per training round.
    doc_length : int, default 4096
        Samples per UBPE document.
    model : signals.SignalModel, optional
        A model from ``ubpe build``: its quantizers and vocabulary are used as
        they are (no transform, no training).
    names : list of str, optional
        Channel names stored in the file.

    Returns
    -------
    bytes

    Raises
    ------
    ValueError
        On non-finite samples, values outside a model's fitted range, or a
        bad option.
    """
    one_d = isinstance(x, np.ndarray) and x.ndim == 1
    chans = [np.asarray(c) for c in ([x] if one_d else list(np.asarray(x))
                                     if isinstance(x, np.ndarray) else x)]
    names = list(names) if names is not None else [f"ch{i}" for i in range(len(chans))]
    if len(names) != len(chans):
        raise ValueError(f"{len(names)} names for {len(chans)} channels")
    if model is not None:
        quantizers = model.quantizers_
        if len(quantizers) != len(chans):
            raise ValueError(f"the model has {len(quantizers)} channels, the input {len(chans)}")
        tf: Identity | LinearPredictor = Identity()
    else:
        tf = LinearPredictor() if transform == "auto" else (
            Identity() if transform == "none" else transform)
        quantizers = []
        for c in chans:
            if quantizer is None or (quantizer == "auto" and c.dtype.kind in "iu"):
                quantizers.append(None)
            else:
                proto = UniformQuantizer(n_levels) if isinstance(quantizer, str) else quantizer
                quantizers.append(type(proto)(**proto.get_params()).fit(c))
    symbols, sides, offsets = [], [], []
    for name, c, q in zip(names, chans, quantizers):
        offsets.append(0)
        if q is None:
            if c.dtype.kind not in "iu":
                raise ValueError(f"channel {name!r}: lossless coding needs integers, got {c.dtype}")
            offsets[-1] = int(c.min()) if c.size else 0  # codes from 0, whatever the transform
            codes = c.astype(np.int64) - offsets[-1]
        else:
            try:
                codes = q.encode(c).astype(np.int64)
            except ValueError as e:
                raise ValueError(f"channel {name!r}: {e}") from None
        r, side = tf.encode(codes)
        symbols.append(r if isinstance(tf, Identity) else zigzag(r))
        sides.append(side)
    plan = _Plan(symbols, sides, quantizers, offsets)
    if model is not None:
        return _write(plan, names, tf, model.tokenizer_, doc_length, one_d)
    alphabet = max(2, int(max((s.max() for s in symbols if s.size), default=0)) + 1)
    sizes = AUTO_MERGES if vocab_size == "auto" else (int(vocab_size) - alphabet,)
    if sizes[0] < 0:
        raise ValueError(f"vocab_size {vocab_size} is smaller than the residual alphabet "
                         f"({alphabet} symbols)")
    best = None
    docs = [d for s in symbols for d in split_documents(s, doc_length)]
    for m in sizes:
        tok = Tokenizer(alphabet, alphabet + m, n_candidates=n_candidates, token_order="rank",
                        progress=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # small inputs support fewer merges
            tok.fit(docs)
        data = _write(plan, names, tf, tok, doc_length, one_d)
        if best is None or len(data) < len(best):
            best = data
        if len(tok.merges_) < m:
            break  # a larger vocabulary would learn nothing more
    assert best is not None
    return best


def _write(plan, names, tf, tok, doc_length, one_d) -> bytes:
    tokens, pairs = tokenize_channels(tok, plan.symbols, doc_length)
    blobs, payload, channels = [pairs.tobytes()], [], []
    for name, toks, side, q, sym, offset in zip(names, tokens, plan.sides, plan.quantizers,
                                                plan.symbols, plan.offsets):
        table, counts, words = ans_encode(toks)
        parts = [side.astype(np.uint8).tobytes(), write_varints(np.diff(table, prepend=0)),
                 write_varints(counts)]
        blobs += parts
        payload.append(words.tobytes())
        ch = {"name": name, "n": int(sym.size), "tokens": int(toks.size),
              "table": int(table.size), "bytes": [len(p) for p in parts] + [len(payload[-1])]}
        if q is None:
            ch["offset"] = offset
        else:
            ch["quantizer"] = q.to_dict()
        channels.append(ch)
    header = {"one_d": bool(one_d), "transform": tf.get_config(), "alphabet": tok.alphabet_size,
              "merges": int(len(pairs)), "doc_length": doc_length, "channels": channels}
    meta = zstandard.ZstdCompressor(level=19, dict_data=_META_DICT, write_dict_id=False).compress(
        json.dumps(header, separators=(",", ":")).encode() + b"\n" + b"".join(blobs))
    body = MAGIC + struct.pack("<HI", VERSION, len(meta)) + meta + b"".join(payload)
    return body + struct.pack("<I", zlib.crc32(body))


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
    if version > VERSION:
        raise SignalFormatError(f"ubpe signal format version {version} is newer than this "
                                f"ubpe reads (up to {VERSION}); upgrade ubpe")
    try:
        meta = zstandard.ZstdDecompressor(dict_data=_META_DICT).decompress(data[14:14 + meta_len])
        line, _, binary = meta.partition(b"\n")
        header = json.loads(line)
    except (zstandard.ZstdError, ValueError) as e:
        raise SignalFormatError(f"unreadable header ({e})") from None
    return data, header, binary, 14 + meta_len


def decompress(data: bytes):
    """Decode a ``.ubpe`` container.

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
            ids = ans_decode(table, counts, words, ch["tokens"])
            sym = tok.decode(ids)
            if sym.size != ch["n"]:
                raise SignalFormatError(f"channel {ch['name']!r}: {sym.size} samples decoded, "
                                        f"{ch['n']} expected")
            r = sym.astype(np.int64) if isinstance(tf, Identity) else unzigzag(sym)
            codes = tf.decode(r, side)
            q = ch.get("quantizer")
            out.append(codes + ch["offset"] if q is None else quantizer_from_dict(q).decode(codes))
    except (KeyError, TypeError, IndexError, ValueError) as e:
        if isinstance(e, SignalFormatError):
            raise
        raise SignalFormatError(f"malformed file ({type(e).__name__}: {e})") from None
    if pos != len(data) - 4 or bpos != len(binary):
        raise SignalFormatError("section lengths do not add up to the file size")
    if header["one_d"]:
        return out[0]
    if len({o.size for o in out}) == 1:
        return np.stack(out) if all(o.dtype == out[0].dtype for o in out) else \
            np.stack([o.astype(np.float64) for o in out])
    return out


def inspect(data: bytes) -> dict:
    """Summary of a ``.ubpe`` container without decoding the samples.

    Returns a dict: format, version, bytes, channels (name, samples,
    quantizer kind, max error, tokens), alphabet size, merges, transform,
    bits per sample.
    """
    data, header, _, _ = _read_header(data)
    n = sum(c["n"] for c in header["channels"])
    return {"format": "ubpe.signal", "version": struct.unpack("<H", data[8:10])[0],
            "bytes": len(data), "transform": header["transform"],
            "alphabet_size": header["alphabet"], "n_merges": header["merges"],
            "channels": [{"name": c["name"], "n_samples": c["n"],
                          "quantizer": c["quantizer"]["kind"] if "quantizer" in c else None,
                          "max_error": float(quantizer_from_dict(c["quantizer"]).max_error_[0])
                          if "quantizer" in c else 0.0,
                          "n_tokens": c["tokens"]} for c in header["channels"]],
            "bits_per_sample": 8 * len(data) / max(n, 1)}


STREAM_MAGIC = b"UBPE-STR"


def compress_stream(chunks, fileobj, **options) -> int:
    """Compress a signal larger than memory, one chunk at a time.

    Parameters
    ----------
    chunks : iterable of array-like
        Consecutive pieces of the signal, each shaped as :func:`compress`
        takes (the same channels in each).
    fileobj : binary file object
        Receives ``b"UBPE-STR"``, a u16 version, then one frame per chunk:
        a u64 length and a complete ``.ubpe`` container (own checksum).
    **options
        Passed to :func:`compress` for every chunk.

    Returns
    -------
    int
        The number of frames written.
    """
    fileobj.write(STREAM_MAGIC + struct.pack("<H", VERSION))
    n = 0
    for chunk in chunks:
        frame = compress(chunk, **options)
        fileobj.write(struct.pack("<Q", len(frame)))
        fileobj.write(frame)
        n += 1
    return n


def decompress_stream(fileobj):
    """Yield the chunks written by :func:`compress_stream`, one at a time.

    Raises
    ------
    SignalFormatError
        On a foreign or newer stream, or a truncated or corrupted frame.
    """
    head = fileobj.read(len(STREAM_MAGIC) + 2)
    if head[:len(STREAM_MAGIC)] != STREAM_MAGIC or len(head) < len(STREAM_MAGIC) + 2:
        raise SignalFormatError("not a ubpe signal stream (bad magic bytes)")
    (version,) = struct.unpack("<H", head[len(STREAM_MAGIC):])
    if version > VERSION:
        raise SignalFormatError(f"ubpe stream version {version} is newer than this ubpe reads")
    k = 0
    while True:
        size = fileobj.read(8)
        if not size:
            return
        if len(size) < 8:
            raise SignalFormatError(f"truncated stream: frame {k} has no complete length")
        (n,) = struct.unpack("<Q", size)
        frame = fileobj.read(n)
        if len(frame) < n:
            raise SignalFormatError(f"truncated stream: frame {k} has {len(frame)} of {n} bytes")
        yield decompress(frame)
        k += 1
