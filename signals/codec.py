"""The ``.ubpe`` signal container: compress and decompress sampled signals.

Pipeline, per channel: quantize (or keep integers exactly) -> reversible
integer transform (prediction residuals) -> zigzag -> UBPE tokens (shortest
segmentation) -> range coding with the channel's token frequencies
(``constriction``'s ANS coder, Duda 2013). One UBPE vocabulary serves all
channels.

File layout (little-endian)::

    magic      8 bytes  b"UBPE-SIG"
    version    u16
    header_len u32
    header     zstd-compressed JSON: channels, quantizers, transform,
               vocabulary size, and the byte length of every section
    sections   merges (zstd, int32 pairs in rank order), then per channel:
               block orders, token table (ids, counts; zstd), ANS words
    crc32      u32 over every byte before it

A file whose checksum, magic, version or section lengths do not check out
raises :class:`SignalFormatError`; it never decodes to wrong samples.
"""

from __future__ import annotations

import json
import struct
import warnings
import zlib

import constriction
import numpy as np
import zstandard

from ubpe import Tokenizer, _engine
from ubpe._io import FormatError

from .quantize import Quantizer, UniformQuantizer, quantizer_from_dict
from .transform import FixedPredictor, Identity, transform_from_dict, unzigzag, zigzag

MAGIC = b"UBPE-SIG"
VERSION = 1
AUTO_MERGES = (0, 64, 256, 1024)


class SignalFormatError(FormatError):
    """A ``.ubpe`` file is foreign, truncated, corrupted, or of a newer version."""


def _pack(arr) -> bytes:
    return zstandard.ZstdCompressor(level=19).compress(np.ascontiguousarray(arr).tobytes())


def _unpack(blob: bytes, dtype, n: int) -> np.ndarray:
    out = np.frombuffer(zstandard.ZstdDecompressor().decompress(blob), dtype=dtype)
    if out.size != n:
        raise SignalFormatError(f"a section holds {out.size} values, expected {n}")
    return out


def _ans_encode(ids: np.ndarray):
    """Range-code token ids with their own frequencies; returns (table ids, counts, words)."""
    if ids.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint32)
    table, symbols, counts = np.unique(ids, return_inverse=True, return_counts=True)
    coder = constriction.stream.stack.AnsCoder()
    if table.size > 1:
        model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
        coder.encode_reverse(symbols.astype(np.int32), model)
    return table, counts, coder.get_compressed()


def _ans_decode(table, counts, words, n) -> np.ndarray:
    if n == 0:
        return np.zeros(0, np.int64)
    if table.size == 1:
        return np.full(n, table[0], np.int64)
    model = constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)
    symbols = constriction.stream.stack.AnsCoder(words).decode(model, n)
    return table[symbols]


class _Plan:
    """What compress decided for each channel, before the entropy coding."""

    def __init__(self, symbols, sides, quantizers, dtypes, offsets):
        self.symbols, self.sides, self.quantizers = symbols, sides, quantizers
        self.dtypes, self.offsets = dtypes, offsets


def _documents(symbols, doc_length):
    return [s[i:i + doc_length] for s in symbols for i in range(0, max(s.size, 1), doc_length)]


def _tokenize(tok: Tokenizer, symbols, doc_length):
    """Shortest encodings of each channel, in rank-order numbering; and the merge pairs."""
    a, m = tok.alphabet_size, tok.merges_
    to_rank = np.arange(a + len(m))
    to_rank[m[:, 2]] = a + np.arange(len(m))
    pairs = to_rank[m[:, :2]].astype(np.int32)
    out = []
    for s in symbols:
        docs = [s[i:i + doc_length] for i in range(0, s.size, doc_length)]
        enc = tok.encode_batch(docs, method="shortest") if docs else []
        out.append(to_rank[np.concatenate(enc)] if enc else np.zeros(0, np.int64))
    return out, pairs


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
    transform : "auto", "none", or a transform from :mod:`signals.transform`
        "auto" is ``FixedPredictor()`` (FLAC's fixed predictors per block).
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
        tf = Identity()
    else:
        tf = FixedPredictor() if transform == "auto" else (
            Identity() if transform == "none" else transform)
        quantizers = []
        for c in chans:
            if quantizer is None or (quantizer == "auto" and c.dtype.kind in "iu"):
                quantizers.append(None)
            else:
                proto = UniformQuantizer(n_levels) if quantizer == "auto" else quantizer
                quantizers.append(type(proto)(**proto.get_params()).fit(c))
    symbols, sides, dtypes, offsets = [], [], [], []
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
        r, side = tf.forward(codes)
        symbols.append(r if isinstance(tf, Identity) else zigzag(r))
        sides.append(side)
        dtypes.append("int64" if q is None else "float64")
    plan = _Plan(symbols, sides, quantizers, dtypes, offsets)
    if model is not None:
        return _write(plan, names, tf, model.tokenizer_, doc_length, one_d)
    alphabet = max(2, int(max((s.max() for s in symbols if s.size), default=0)) + 1)
    sizes = AUTO_MERGES if vocab_size == "auto" else (int(vocab_size) - alphabet,)
    if sizes[0] < 0:
        raise ValueError(f"vocab_size {vocab_size} is smaller than the residual alphabet "
                         f"({alphabet} symbols)")
    best = None
    docs = _documents(symbols, doc_length)
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
    return best


def _write(plan, names, tf, tok, doc_length, one_d) -> bytes:
    tokens, pairs = _tokenize(tok, plan.symbols, doc_length)
    sections = [_pack(pairs)]
    channels = []
    for name, toks, side, q, dtype, sym, offset in zip(names, tokens, plan.sides, plan.quantizers,
                                                       plan.dtypes, plan.symbols, plan.offsets):
        table, counts, words = _ans_encode(toks)
        gaps = np.diff(table, prepend=0).astype(np.uint32)
        parts = [_pack(side), _pack(gaps), _pack(counts.astype(np.uint32)), words.tobytes()]
        sections += parts
        channels.append({"name": name, "n_samples": int(sym.size), "dtype": dtype,
                         "offset": offset,
                         "quantizer": None if q is None else q.to_dict(),
                         "n_tokens": int(toks.size), "n_blocks": int(side.size),
                         "table_size": int(table.size), "n_words": int(words.size),
                         "sections": [len(p) for p in parts]})
    header = {"format": "ubpe.signal", "version": VERSION, "one_d": bool(one_d),
              "transform": tf.to_dict(), "alphabet_size": tok.alphabet_size,
              "n_merges": int(len(pairs)), "merges_bytes": len(sections[0]),
              "doc_length": doc_length, "channels": channels}
    head = zstandard.ZstdCompressor(level=19).compress(json.dumps(header).encode())
    body = MAGIC + struct.pack("<HI", VERSION, len(head)) + head + b"".join(sections)
    return body + struct.pack("<I", zlib.crc32(body))


def _read_header(data: bytes):
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
    version, head_len = struct.unpack("<HI", data[8:14])
    if version > VERSION:
        raise SignalFormatError(f"ubpe signal format version {version} is newer than this "
                                f"ubpe reads (up to {VERSION}); upgrade ubpe")
    try:
        header = json.loads(zstandard.ZstdDecompressor().decompress(data[14:14 + head_len]))
    except (zstandard.ZstdError, ValueError) as e:
        raise SignalFormatError(f"unreadable header ({e})") from None
    return data, header, 14 + head_len


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
    data, header, pos = _read_header(data)
    try:
        tf = transform_from_dict(header["transform"])
        a, m = header["alphabet_size"], header["n_merges"]
        pairs = _unpack(data[pos:pos + header["merges_bytes"]], np.int32, 2 * m).reshape(m, 2)
        pos += header["merges_bytes"]
        start, flat = _engine.expansions(a, pairs[:, 0].copy(), pairs[:, 1].copy(),
                                         np.arange(a, a + m, dtype=np.int32))
        out = []
        for ch in header["channels"]:
            lens = ch["sections"]
            blobs = []
            for n_bytes in lens:
                blobs.append(data[pos:pos + n_bytes])
                pos += n_bytes
            side = _unpack(blobs[0], np.uint8, ch["n_blocks"])
            table = np.cumsum(_unpack(blobs[1], np.uint32, ch["table_size"]).astype(np.int64))
            counts = _unpack(blobs[2], np.uint32, ch["table_size"]).astype(np.int64)
            words = np.frombuffer(blobs[3], np.uint32)
            if words.size != ch["n_words"] or (table.size and table[-1] >= a + m):
                raise SignalFormatError(f"channel {ch['name']!r}: inconsistent sections")
            ids = _ans_decode(table, counts, words, ch["n_tokens"])
            lengths = start[ids + 1] - start[ids]
            offs = np.cumsum(lengths) - lengths
            sym = flat[np.arange(lengths.sum()) - np.repeat(offs - start[ids], lengths)]
            if sym.size != ch["n_samples"]:
                raise SignalFormatError(f"channel {ch['name']!r}: {sym.size} samples decoded, "
                                        f"{ch['n_samples']} expected")
            r = sym.astype(np.int64) if isinstance(tf, Identity) else unzigzag(sym)
            codes = tf.inverse(r, side)
            q = ch["quantizer"]
            out.append(codes + ch["offset"] if q is None else quantizer_from_dict(q).decode(codes))
    except (KeyError, TypeError, IndexError, zstandard.ZstdError) as e:
        raise SignalFormatError(f"malformed file ({type(e).__name__}: {e})") from None
    if pos != len(data) - 4:
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
    data, header, _ = _read_header(data)
    n = sum(c["n_samples"] for c in header["channels"])
    return {"format": header["format"], "version": header["version"], "bytes": len(data),
            "transform": header["transform"], "alphabet_size": header["alphabet_size"],
            "n_merges": header["n_merges"],
            "channels": [{"name": c["name"], "n_samples": c["n_samples"],
                          "quantizer": None if c["quantizer"] is None else c["quantizer"]["kind"],
                          "max_error": 0.0 if c["quantizer"] is None else
                          float(quantizer_from_dict(c["quantizer"]).max_error_[0]),
                          "n_tokens": c["n_tokens"]} for c in header["channels"]],
            "bits_per_sample": 8 * len(data) / max(n, 1)}
