"""ubpe as a numcodecs codec (codec id ``"ubpe"``) and a zarr v3 array-to-bytes codec.

:class:`UBPECodec` is a :class:`numcodecs.abc.Codec`: each chunk goes through
:func:`signals.compress` and comes back through :func:`signals.decompress`.
It is registered under the ``numcodecs.codecs`` entry point, so that
``numcodecs.get_codec({"id": "ubpe"})`` finds it in any process where ubpe
is installed. :data:`UBPEZarrCodec` (built on first use, so that zarr is only
needed when it is asked for) is the zarr v3 form, registered under the
``zarr.codecs`` entry point as ``"ubpe"``; it goes in the ``serializer``
slot of :func:`zarr.create_array`, since it turns an array into bytes.

Chunk layout: axis ``axis`` (default 0) is time; every other axis is
flattened into channels, so a 2-D zarr array of samples x channels chunked
along time gives one ``.ubpe`` container per chunk with one channel per
column.

What is exact and what is not:

- integers of every dtype round-trip exactly (a chunk that
  :func:`signals.compress` cannot take well, one whose sample-to-sample steps
  reach 2**20 such as random 32- or 64-bit integers, is stored with zstd
  instead, still exactly);
- floats are lossless by default: a chunk whose values are decimal numbers
  with at most 9 digits after the point (what sensors and CSV files hold) is
  scaled to integers and coded exactly, bit for bit; any other float chunk
  (NaN, infinities, full-precision doubles) is stored with zstd, exactly;
- with ``max_error`` the codec is lossy: samples go to the nearest point of a
  grid of step ``2 * max_error`` (aligned on 0, the same in every chunk), and
  ``|decoded - x| <= max_error`` is checked before a chunk is written.

Encoded chunk (the codec's own framing around a ``.ubpe`` container; the
container is whatever :func:`signals.compress` writes)::

    byte 0     (FRAME_VERSION << 4) | mode     mode: 0 integers, 1 decimal floats,
                                               2 grid (max_error), 3 model, 15 zstd
    byte 1     dtype index in _DTYPES
    byte 2     ndim, then the chunk shape as LEB128 varints
    mode 1     1 byte: decimal digits k (values are integers / 10**k)
    mode 2     8 bytes: grid step (float64, little-endian)
    payload    a .ubpe container (modes 0-3) or a zstd frame of the raw bytes (15)

References: numcodecs codec API (https://numcodecs.readthedocs.io/en/stable/abc.html);
zarr v3 codec specification (https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import os
import struct
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import zstandard
from numcodecs.abc import Codec
from numcodecs.compat import ensure_bytes, ensure_contiguous_ndarray, ndarray_copy

import signals

__all__ = ["UBPECodec", "UBPEZarrCodec", "model_config"]  # noqa: F822 (UBPEZarrCodec: __getattr__)

FRAME_VERSION = 1
MODE_INT, MODE_DECIMAL, MODE_GRID, MODE_MODEL, MODE_ZSTD = 0, 1, 2, 3, 15
_DTYPES = ("|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
           ">i2", ">u2", ">i4", ">u4", ">i8", ">u8", ">f2", ">f4", ">f8")
_MAX_DECIMALS = 9
# Chunks whose sample-to-sample steps reach this go to zstd: prediction residuals
# that large make a residual alphabet of millions of symbols (slow, and no gain).
_MAX_STEP = 2**20
_models: dict[str, Any] = {}
_models_lock = threading.Lock()


class _TooWide(ValueError):
    """A chunk that goes to zstd rather than through signals.compress."""


def _varints(values: list[int]) -> bytes:
    out = bytearray()
    for v in values:
        while True:
            b = v & 0x7F
            v >>= 7
            out.append(b | (0x80 if v else 0))
            if not v:
                break
    return bytes(out)


def _read_varints(buf: bytes, pos: int, n: int) -> tuple[list[int], int]:
    vals = []
    for _ in range(n):
        v = shift = 0
        while True:
            if pos >= len(buf):
                raise ValueError("ubpe codec: truncated chunk header")
            b = buf[pos]
            pos += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        vals.append(v)
    return vals, pos


def _model_id(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def model_config(path: str | os.PathLike[str], *, inline: bool | None = None,
                 max_inline_bytes: int = 65536) -> dict[str, str]:
    """The ``model`` entry of a codec config for a model saved by ``ubpe build``.

    Parameters
    ----------
    path : str or path-like
        A model file written by :meth:`signals.SignalModel.save`; any URL that
        fsspec opens (``s3://...``, ``https://...``) when fsspec is installed.
    inline : bool, optional
        Put the model in the config itself (zstd, then base64). Default: when
        the compressed model takes at most ``max_inline_bytes``.
    max_inline_bytes : int, default 65536

    Returns
    -------
    dict
        ``{"id": "sha256:<hex>", "path": str}`` or ``{"id": ..., "inline": str}``;
        the id is the SHA-256 of the model file, checked when it is loaded.

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    raw = _read_url(str(path))
    packed = base64.b64encode(zstandard.ZstdCompressor(level=19).compress(raw)).decode()
    if inline is None:
        inline = len(packed) <= max_inline_bytes
    return {"id": _model_id(raw), "inline": packed} if inline else \
        {"id": _model_id(raw), "path": str(path)}


def _read_url(path: str) -> bytes:
    try:
        import fsspec
    except ImportError:
        with open(path, "rb") as f:
            return f.read()
    with fsspec.open(path, "rb") as f:
        return bytes(f.read())


def _load_model(cfg: dict[str, str]):
    """A SignalModel from a codec config's ``model`` entry, cached by content id."""
    mid = cfg.get("id")
    with _models_lock:
        if mid in _models:
            return _models[mid]
    if "inline" in cfg:
        raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(cfg["inline"]))
    elif "path" in cfg:
        raw = _read_url(cfg["path"])
    else:
        raise ValueError("ubpe codec: a model entry needs 'path' or 'inline'")
    if mid is not None and _model_id(raw) != mid:
        raise ValueError(f"ubpe codec: the model at {cfg.get('path', '<inline>')} has id "
                         f"{_model_id(raw)}, the config expects {mid}")
    fd, tmp = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        model = signals.SignalModel.load(tmp)
    finally:
        os.unlink(tmp)
    with _models_lock:
        _models[_model_id(raw)] = model
    return model


def _decimal_digits(x: np.ndarray) -> tuple[int, np.ndarray] | None:
    """Smallest k such that x == round(x * 10**k) / 10**k bit for bit, with the integers."""
    if x.size == 0 or not np.isfinite(x).all() or np.signbit(x[x == 0]).any():
        return None  # NaN, infinities and -0.0 have no integer form
    bits = x.view(f"u{x.itemsize}")
    x64 = x.astype(np.float64)
    probe = min(x.size, 64)
    for k in range(_MAX_DECIMALS + 1):
        s = 10.0 ** k
        for part in (slice(0, probe), slice(None)):
            q = np.round(x64[part] * s)
            if np.abs(q).max() >= 2.0 ** 53:
                return None
            back = (q / s).astype(x.dtype)
            if not np.array_equal(back.view(bits.dtype), bits[part]):
                break
        else:
            return k, q.astype(np.int64)
    return None


class UBPECodec(Codec):
    """numcodecs codec that stores each chunk as a ``.ubpe`` container.

    Parameters
    ----------
    max_error : float, optional
        None (default): lossless. Otherwise the largest absolute error allowed
        per sample, in the data's units (integers: a grid of odd integer step
        ``2 * floor(max_error) + 1``).
    axis : int, default 0
        The time axis of a chunk; every other axis is a channel.
    vocab_size : "auto" or int, default "auto"
        Passed to :func:`signals.compress` (UBPE vocabulary per chunk).
    n_candidates : int, default 16
        Passed to :func:`signals.compress`.
    model : dict, optional
        A trained model, from :func:`model_config`: ``{"id", "path"}`` or
        ``{"id", "inline"}``. Chunks are then coded with the model's
        quantizers and vocabulary (:func:`signals.compress` ``model=``);
        ``max_error`` does not apply (the model's quantizers set the error).

    Attributes
    ----------
    codec_id : str
        ``"ubpe"``.

    Examples
    --------
    >>> import numcodecs, numpy as np
    >>> codec = numcodecs.get_codec({"id": "ubpe"})
    >>> x = np.arange(1000, dtype="<i2").reshape(500, 2)
    >>> bool((codec.decode(codec.encode(x)) == x).all())
    True
    """

    codec_id = "ubpe"

    def __init__(self, max_error: float | None = None, axis: int = 0,
                 vocab_size: str | int = "auto", n_candidates: int = 16,
                 model: dict[str, str] | None = None):
        if max_error is not None and not (float(max_error) >= 0 and math.isfinite(max_error)):
            raise ValueError(f"max_error must be a finite number >= 0, got {max_error!r}")
        if vocab_size != "auto" and not isinstance(vocab_size, int):
            raise ValueError(f"vocab_size must be 'auto' or an integer, got {vocab_size!r}")
        self.max_error = None if max_error is None else float(max_error)
        self.axis = int(axis)
        self.vocab_size = vocab_size
        self.n_candidates = int(n_candidates)
        self.model = dict(model) if model is not None else None

    def get_config(self) -> dict[str, Any]:
        """Plain JSON config: ``{"id": "ubpe", ...}`` with every option."""
        cfg: dict[str, Any] = {"id": self.codec_id, "max_error": self.max_error, "axis": self.axis,
                               "vocab_size": self.vocab_size, "n_candidates": self.n_candidates}
        if self.model is not None:
            cfg["model"] = self.model
        return cfg

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "id")
        return f"UBPECodec({opts})"

    # ---------------------------------------------------------------- layout
    def _channels(self, arr: np.ndarray) -> np.ndarray:
        """(n_channels, n_samples) view of a chunk, native byte order."""
        if arr.ndim == 0:
            arr = arr.reshape(1)
        t = np.moveaxis(arr, self.axis % arr.ndim, 0)
        return np.ascontiguousarray(t.reshape(t.shape[0], math.prod(t.shape[1:])).T)

    def _unchannels(self, chans: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        if len(shape) == 0:
            return chans.reshape(())
        ax = self.axis % len(shape)
        moved = (shape[ax],) + tuple(s for i, s in enumerate(shape) if i != ax)
        return np.moveaxis(chans.T.reshape(moved), 0, ax)

    def _compress(self, chans: np.ndarray, **extra: Any) -> bytes:
        if "model" not in extra and chans.shape[1] > 1:
            step = np.abs(np.diff(chans.astype(np.int64), axis=1)).max()
            if step >= _MAX_STEP:
                raise _TooWide("steps too large for a UBPE alphabet")
        x = chans[0] if chans.shape[0] == 1 else chans
        return signals.compress(x, vocab_size=self.vocab_size, n_candidates=self.n_candidates,
                                **extra)

    # --------------------------------------------------------------- encode
    def encode(self, buf: Any) -> bytes:
        """Compress one chunk.

        Parameters
        ----------
        buf : ndarray-like
            The chunk, any shape; bool, integer or float dtype.

        Returns
        -------
        bytes

        Raises
        ------
        TypeError
            On a dtype other than bool, integer or float.
        ValueError
            With a model, when the chunk does not fit its channels or ranges.
        """
        arr = np.asarray(buf)
        dt = arr.dtype.str  # explicit byte order: '<i2', '>f8', '|u1'
        if dt not in _DTYPES:
            raise TypeError(f"ubpe codec: unsupported dtype {arr.dtype} (bool, integers and "
                            f"floats up to 64 bits)")
        native = arr.astype(arr.dtype.newbyteorder("="), copy=False)
        chans = self._channels(native)
        mode, extra, payload = self._encode_channels(chans)
        head = bytes([(FRAME_VERSION << 4) | mode, _DTYPES.index(dt), arr.ndim])
        return head + _varints(list(arr.shape)) + extra + payload

    def _encode_channels(self, chans: np.ndarray) -> tuple[int, bytes, bytes]:
        raw = lambda: (MODE_ZSTD, b"", zstandard.ZstdCompressor(level=19).compress(chans.tobytes()))
        if chans.size == 0:
            return raw()
        kind = chans.dtype.kind
        try:
            if self.model is not None:
                return MODE_MODEL, b"", self._compress(chans, model=_load_model(self.model))
            if kind == "b":
                return MODE_INT, b"", self._compress(chans.astype(np.uint8))
            if kind in "iu":
                if chans.dtype.itemsize == 8 and (int(chans.max()) >= 2**62 or int(chans.min()) < -2**62):
                    return raw()  # beyond what int64 arithmetic keeps exact
                step = 1 if self.max_error is None else 2 * int(math.floor(self.max_error)) + 1
                if step == 1:
                    return MODE_INT, b"", self._compress(chans)
                q = np.floor_divide(chans.astype(np.int64) + step // 2, step)
                return MODE_GRID, struct.pack("<d", float(step)), self._compress(q)
            if self.max_error is not None and self.max_error > 0:
                grid = self._grid(chans)
                if grid is not None:
                    return MODE_GRID, struct.pack("<d", grid[0]), self._compress(grid[1])
            dec = _decimal_digits(chans)
            if dec is not None:
                k, q = dec
                return MODE_DECIMAL, bytes([k]), self._compress(q.reshape(chans.shape))
        except (_TooWide, OverflowError):
            pass  # -> zstd, exact
        except ValueError as e:
            # signals.compress cannot take residuals that need an alphabet above 2**30: zstd,
            # exact. Anything else (a vocab_size below the residual alphabet...) is the
            # caller's to see, not to be hidden behind a fallback.
            if self.model is not None or "alphabet_size must be" not in str(e):
                raise
        return raw()

    def _grid(self, chans: np.ndarray) -> tuple[float, np.ndarray] | None:
        """Nearest points of a step-2*max_error grid, checked against max_error."""
        assert self.max_error is not None
        if not np.isfinite(chans).all():
            return None
        x = chans.astype(np.float64)
        step = 2.0 * self.max_error
        for _ in range(3):
            q = np.round(x / step)
            if np.abs(q).max() >= 2.0 ** 53:
                return None
            back = (q * step).astype(chans.dtype)
            if np.all(np.abs(back.astype(np.float64) - x) <= self.max_error):
                return step, q.astype(np.int64)
            step *= 0.5  # float32 rounding or a grid point off by an ulp: a finer grid
        return None

    # --------------------------------------------------------------- decode
    def decode(self, buf: Any, out: Any = None) -> np.ndarray:
        """Decompress one chunk.

        Parameters
        ----------
        buf : bytes-like
            What :meth:`encode` returned.
        out : ndarray, optional
            Filled with the result (same number of elements) when given.

        Returns
        -------
        ndarray
            The chunk in its original shape and dtype (``out`` when given).

        Raises
        ------
        ValueError
            On a chunk of a newer framing version or an unknown dtype.
        signals.SignalFormatError
            On a corrupted container (it carries a CRC-32).
        """
        data = ensure_bytes(ensure_contiguous_ndarray(buf))
        if len(data) < 3:
            raise ValueError("ubpe codec: chunk shorter than its header")
        version, mode = data[0] >> 4, data[0] & 0x0F
        if version != FRAME_VERSION:
            raise ValueError(f"ubpe codec: chunk framing version {version}, this ubpe reads "
                             f"{FRAME_VERSION}")
        if data[1] >= len(_DTYPES):
            raise ValueError(f"ubpe codec: unknown dtype index {data[1]}")
        dtype = np.dtype(_DTYPES[data[1]])
        shape_l, pos = _read_varints(data, 3, data[2])
        shape = tuple(shape_l)
        native = dtype.newbyteorder("=")
        n_samples = shape[self.axis % len(shape)] if shape else 1
        n_chans = (math.prod(shape) // n_samples) if n_samples else 0
        if mode == MODE_ZSTD:
            flat = np.frombuffer(zstandard.ZstdDecompressor().decompress(data[pos:]), native)
            chans = flat.reshape(n_chans, n_samples)
        else:
            extra = b""
            if mode == MODE_DECIMAL:
                extra, pos = data[pos:pos + 1], pos + 1
            elif mode == MODE_GRID:
                extra, pos = data[pos:pos + 8], pos + 8
            vals = np.asarray(signals.decompress(data[pos:])).reshape(n_chans, n_samples)
            if mode == MODE_DECIMAL:
                chans = (vals.astype(np.float64) / 10.0 ** extra[0]).astype(native)
            elif mode == MODE_GRID:
                (step,) = struct.unpack("<d", extra)
                g = vals.astype(np.int64)
                chans = (g * int(step)).astype(native) if native.kind in "iu" else \
                    (g.astype(np.float64) * step).astype(native)
            elif native.kind in "iub":
                chans = vals.astype(native) if mode != MODE_MODEL else \
                    np.round(vals).astype(native)
            else:
                chans = vals.astype(native)
        result = self._unchannels(chans, shape).astype(dtype, order="C")
        if out is not None:
            return ndarray_copy(result, out)
        return result if result.flags.c_contiguous else result.copy(order="C")


# ------------------------------------------------------------------ zarr v3
_zarr_class: type | None = None


def _make_zarr_codec() -> type:
    """Build the zarr v3 ArrayBytesCodec class (imports zarr)."""
    from zarr.abc.codec import ArrayBytesCodec
    from zarr.core.common import parse_named_configuration

    @dataclass(frozen=True)
    class UBPEZarrCodec(ArrayBytesCodec):
        """zarr v3 array-to-bytes codec ``"ubpe"``: :class:`UBPECodec` per chunk.

        Parameters are those of :class:`UBPECodec`. Use it as the
        ``serializer`` of :func:`zarr.create_array` (with ``compressors=None``:
        the chunks are already entropy-coded).
        """

        is_fixed_size = False
        configuration: dict
        _codec: UBPECodec

        def __init__(self, **configuration: Any) -> None:
            codec = UBPECodec(**configuration)
            cfg = codec.get_config()
            cfg.pop("id")
            object.__setattr__(self, "configuration", cfg)
            object.__setattr__(self, "_codec", codec)

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> UBPEZarrCodec:
            _, cfg = parse_named_configuration(data, "ubpe", require_configuration=False)
            return cls(**(cfg or {}))

        def to_dict(self) -> dict[str, Any]:
            return {"name": "ubpe", "configuration": dict(self.configuration)}

        async def _decode_single(self, chunk_bytes, chunk_spec):
            out = await asyncio.to_thread(self._codec.decode, chunk_bytes.to_bytes())
            return chunk_spec.prototype.nd_buffer.from_ndarray_like(
                out.reshape(chunk_spec.shape))

        async def _encode_single(self, chunk_array, chunk_spec):
            data = await asyncio.to_thread(self._codec.encode, chunk_array.as_ndarray_like())
            return chunk_spec.prototype.buffer.from_bytes(data)

        def compute_encoded_size(self, input_byte_length: int, chunk_spec) -> int:
            raise NotImplementedError("ubpe chunks have a data-dependent size")

    UBPEZarrCodec.__module__ = __name__
    UBPEZarrCodec.__qualname__ = "UBPEZarrCodec"
    return UBPEZarrCodec


def __getattr__(name: str) -> Any:
    """``UBPEZarrCodec`` is created on first access (it needs zarr >= 3)."""
    global _zarr_class
    if name == "UBPEZarrCodec":
        if _zarr_class is None:
            _zarr_class = _make_zarr_codec()
        return _zarr_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
