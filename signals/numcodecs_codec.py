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

What is exact and what is not: exactly what :func:`signals.compress` keeps
(every integer dtype at any range, floats bit for bit by default), and with
``max_error`` every value within that absolute error.

Encoded chunk (framing version 4: a small framing around a ``.ubpe`` container)::

    byte 0     FRAME_VERSION << 4
    byte 1     dtype index in _DTYPES (byte order included)
    byte 2     ndim | FORTRAN_FLAG (0x80: the chunk was given in Fortran order,
               as zarr v2's order="F" gives it, and is given back so; added
               within versions 3 and 4), then the chunk shape as LEB128 varints
    crc32      4 bytes, little-endian, of the bytes above (the container
               checks its own)
    payload    a .ubpe container of the chunk's channels (signals.compress)

Version 2 is the same without the framing's crc32; its chunks stay readable
(their dtype and shape are checked against the container's).

Compact chunk (framing version 3; integer and bool chunks, lossless, no
model: everything a container's header would say is in the array's
metadata, so the chunk holds only the channel payloads)::

    byte 0     COMPACT_VERSION << 4
    byte 1     dtype index, byte 2 ndim | FORTRAN_FLAG, then the shape as
               LEB128 varints
    per channel (time along ``axis``, the other axes flattened):
               zigzag(step) << 1 | tail flag, zigzag(offset) (LEB128 varints:
               x = step * v + offset); with the flag, the length of the
               trailing run of one value and zigzag(that v) (varints: the
               run is not coded, as zarr's padding of an edge chunk);
               payload length (varint; not for the last channel, whose payload
               runs to the checksum), the payload of
               signals.channel.encode_channel for v before the run
    crc32      4 bytes, little-endian, of every byte before it

Floats, ``max_error`` and models write version 4.

References: numcodecs codec API (https://numcodecs.readthedocs.io/en/stable/abc.html);
zarr v3 codec specification (https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import os
import tempfile
import threading
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import zstandard
from numcodecs.abc import Codec
from numcodecs.compat import ensure_bytes, ensure_contiguous_ndarray, ndarray_copy

import signals
from signals.arraylike import AXIS_ORDER_KNOWN
from signals.channel import check_level
from signals.intmap import check_max_error

__all__ = ["UBPECodec", "UBPEZarrCodec", "model_config"]  # noqa: F822 (UBPEZarrCodec: __getattr__)

FRAME_VERSION = 4
COMPACT_VERSION = 3
OLD_FRAME_VERSION = 2  # version 4 without the framing's crc32 (read only)
TAIL_RUN = 64  # a trailing run of one value at least this long is not coded
FORTRAN_FLAG = 0x80  # in byte 2, beside ndim
MAX_CHUNK_VALUES = 1 << 30  # values of one chunk, as signals.decompress's max_values (the
# limit of every chunk written before it was checked here: they all stay readable)
_DTYPES = ("|b1", "|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8",
           ">i2", ">u2", ">i4", ">u4", ">i8", ">u8", ">f2", ">f4", ">f8")
_models: dict[str, Any] = {}
_models_lock = threading.Lock()


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
            if shift > 63:  # (the container's rule: 10 bytes at most; a run of 0xff built an
                # ever longer integer, quadratic in the chunk's length)
                raise ValueError(f"ubpe codec: a varint of more than 10 bytes at byte {pos}")
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


def _zz(v: int) -> int:
    return 2 * v if v >= 0 else -2 * v - 1


def _compact_channels(chans: np.ndarray, level: int) -> bytes | None:
    """The compact body of integer channels (n_channels, n); None where a channel's exact
    mapping is more than a step and an offset (then the chunk keeps the full container)."""
    from signals.channel import encode_channel
    from signals.intmap import map_to_int64
    parts: list[bytes] = []
    for c in chans:
        m = map_to_int64(c)
        cfg = m.config
        if cfg.get("kind") != "int" or m.extra or cfg.get("exceptions"):
            return None
        v = m.ints
        other = np.flatnonzero(v != v[-1]) if v.size else v
        run = v.size - (int(other[-1]) + 1 if other.size else 0)  # the trailing run's length
        tail = run if run >= TAIL_RUN else 0
        head = [_zz(int(cfg.get("step", 1))) << 1 | bool(tail), _zz(int(cfg.get("offset", 0)))]
        if tail:
            head += [tail, _zz(int(v[-1]))]
        payload = encode_channel(v[:v.size - tail], level=level)
        last = len(parts) == chans.shape[0] - 1
        parts.append(_varints(head + ([] if last else [len(payload)])) + payload)
    return b"".join(parts)


def _read_compact(data: bytes, pos: int, n_chans: int, n: int, dtype: np.dtype) -> np.ndarray:
    """The (n_chans, n) values of a compact body, checked against ``dtype``'s range."""
    from signals.channel import decode_channel
    info = np.iinfo(dtype)
    if n_chans > len(data) - pos or n_chans * n > MAX_CHUNK_VALUES:  # (before the allocation)
        raise signals.SignalFormatError(f"ubpe codec: the chunk's shape declares {n_chans:,} "
                                        f"channels of {n:,} samples in {len(data) - pos:,} bytes")
    out = np.empty((n_chans, n), dtype)
    for j in range(n_chans):
        (zs, zo), pos = _read_varints(data, pos, 2)
        tail, zt = 0, 0
        if zs & 1:
            (tail, zt), pos = _read_varints(data, pos, 2)
            if not TAIL_RUN <= tail <= n:
                raise signals.SignalFormatError(f"ubpe codec: channel {j} declares a run of "
                                                f"{tail:,} of its {n:,} samples")
        zs >>= 1
        if max(zs, zo, zt) >= 1 << 64:
            raise signals.SignalFormatError(f"ubpe codec: channel {j}: a mapping value beyond "
                                            f"64 bits")
        if j < n_chans - 1:
            (size,), pos = _read_varints(data, pos, 1)
        else:
            size = len(data) - pos
        if size > len(data) - pos:
            raise signals.SignalFormatError(f"ubpe codec: channel {j} declares {size:,} bytes, "
                                            f"{len(data) - pos:,} remain")
        step, offset = (zs >> 1) ^ -(zs & 1), (zo >> 1) ^ -(zo & 1)
        x = decode_channel(data[pos:pos + size], n - tail)
        pos += size
        with np.errstate(over="ignore"):  # int64 wrap-around, as the mapping's (in place)
            x *= np.int64(step)
            x += np.int64(offset)
            run = np.int64((zt >> 1) ^ -(zt & 1)) * np.int64(step) + np.int64(offset)
        if dtype.itemsize < 8 and ((x.size and (x.min() < info.min or x.max() > info.max))
                                   or (tail and not info.min <= run <= info.max)):
            raise signals.SignalFormatError(f"ubpe codec: channel {j} decodes outside {dtype}")
        np.copyto(out[j, :n - tail], x, casting="unsafe")
        del x
        if tail:  # (the run straight into the chunk's dtype: no int64 copy of it)
            out[j, n - tail:] = np.array(run).astype(dtype)
    if pos != len(data):
        raise signals.SignalFormatError(f"ubpe codec: {len(data) - pos} bytes after the channels")
    return out


class UBPECodec(Codec):
    """numcodecs codec that stores each chunk as a ``.ubpe`` container.

    Parameters
    ----------
    max_error : float, optional
        None (default) or 0: lossless. Otherwise the largest absolute error
        allowed per sample, in the data's units (:func:`signals.compress`);
        bool chunks are always kept exactly.
    axis : int, default 0
        The time axis of a chunk; every other axis is a channel.
    level : int, default 5
        0 (fastest) .. 9 (smallest), passed to :func:`signals.compress`.
    model : dict, optional
        A trained model, from :func:`model_config`: ``{"id", "path"}`` or
        ``{"id", "inline"}``. The chunk's channels (named ``ch0, ch1, ...``,
        matched to the model's channels in order) are coded against it.

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

    def __init__(self, max_error: float | None = None, axis: int = 0, level: int = 5,
                 model: dict[str, str] | None = None):
        if isinstance(axis, bool) or not isinstance(axis, int | np.integer):
            raise ValueError(f"axis must be an integer, got {axis!r}")
        self.max_error = check_max_error(max_error)
        self.axis = int(axis)
        self.level = check_level(level)
        self.model = dict(model) if model is not None else None

    def get_config(self) -> dict[str, Any]:
        """Plain JSON config: ``{"id": "ubpe", ...}`` with every option."""
        cfg: dict[str, Any] = {"id": self.codec_id, "max_error": self.max_error, "axis": self.axis,
                               "level": self.level}
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
        if arr.ndim and not -arr.ndim <= self.axis < arr.ndim:
            raise np.exceptions.AxisError(self.axis, arr.ndim, "ubpe codec")
        if arr.size > MAX_CHUNK_VALUES:
            raise ValueError(f"ubpe codec: a chunk of {arr.size:,} values, above the limit of "
                             f"{MAX_CHUNK_VALUES:,} that a decoder accepts; use smaller chunks")
        native = arr.astype(arr.dtype.newbyteorder("="), copy=False)
        if native.dtype == np.bool_:
            native = native.view(np.uint8)
        chans = self._channels(native)
        # a chunk in Fortran order (zarr v2's order="F") comes back in Fortran order: numcodecs
        # hands its codecs the memory as it lies, and zarr reads it back in that order
        fortran = arr.ndim > 1 and arr.flags.f_contiguous and not arr.flags.c_contiguous
        shape = bytes([_DTYPES.index(dt), arr.ndim | (FORTRAN_FLAG if fortran else 0)]) \
            + _varints(list(arr.shape))
        max_error = None if arr.dtype == np.bool_ else self.max_error  # (a bound of 1 would keep no bit)
        if self.model is None and max_error is None and chans.dtype.kind in "iu":
            body = _compact_channels(chans, self.level)
            if body is not None:
                out = bytes([COMPACT_VERSION << 4]) + shape + body
                return out + zlib.crc32(out).to_bytes(4, "little")
        model = _load_model(self.model) if self.model is not None else None
        known = AXIS_ORDER_KNOWN.set(True)  # (a chunk's channels: no axis-order warning)
        try:
            payload = signals.compress(chans, max_error=max_error, level=self.level, model=model)
        finally:
            AXIS_ORDER_KNOWN.reset(known)
        head = bytes([FRAME_VERSION << 4]) + shape
        return head + zlib.crc32(head).to_bytes(4, "little") + payload

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
            On a chunk of a newer framing version.
        signals.SignalFormatError
            On a corrupted chunk (every chunk of this version carries CRC-32
            checks; a version-2 chunk's dtype and shape are checked against its
            container's) or a foreign one.
        """
        data = ensure_bytes(ensure_contiguous_ndarray(buf))
        if len(data) < 3:
            raise signals.SignalFormatError("ubpe codec: chunk shorter than its header")
        version = data[0] >> 4
        if data[0] & 0x0F:
            raise signals.SignalFormatError(f"ubpe codec: byte 0 of the chunk is {data[0]:#04x}, "
                                            f"not a framing version (a foreign or corrupted chunk)")
        if version not in (OLD_FRAME_VERSION, COMPACT_VERSION, FRAME_VERSION):
            raise ValueError(f"ubpe codec: chunk framing version {version}, this ubpe reads "
                             f"{OLD_FRAME_VERSION}, {COMPACT_VERSION} and {FRAME_VERSION}")
        if version == COMPACT_VERSION:
            if len(data) < 7 or zlib.crc32(data[:-4]) != int.from_bytes(data[-4:], "little"):
                raise signals.SignalFormatError("ubpe codec: checksum mismatch in a compact chunk "
                                                "(the chunk is corrupted)")
            data = data[:-4]
        fortran, ndim = bool(data[2] & FORTRAN_FLAG), data[2] & ~FORTRAN_FLAG
        shape_l, pos = _read_varints(data, 3, ndim)
        if version == FRAME_VERSION:
            if zlib.crc32(data[:pos]).to_bytes(4, "little") != data[pos:pos + 4]:
                raise signals.SignalFormatError("ubpe codec: checksum mismatch in a chunk's "
                                                "framing (the chunk is corrupted)")
            pos += 4
        if data[1] >= len(_DTYPES):
            raise signals.SignalFormatError(f"ubpe codec: unknown dtype index {data[1]}")
        dtype = np.dtype(_DTYPES[data[1]])
        shape = tuple(shape_l)
        native = dtype.newbyteorder("=")
        code_dtype = np.dtype(np.uint8) if native == np.bool_ else native
        ax = self.axis % len(shape) if shape else 0
        n_samples = shape[ax] if shape else 1
        n_chans = math.prod(d for i, d in enumerate(shape) if i != ax)  # (0 samples too)
        if version == COMPACT_VERSION:
            if code_dtype.kind not in "iu":  # (written for integer and bool chunks only)
                raise signals.SignalFormatError(f"ubpe codec: a compact chunk of {dtype} (the "
                                                f"chunk is corrupted)")
            vals = _read_compact(data, pos, n_chans, n_samples, code_dtype)
        else:
            model = _load_model(self.model) if self.model is not None else None
            vals = np.asarray(signals.decompress(data[pos:], model=model,
                                                 max_values=MAX_CHUNK_VALUES))
            if vals.shape != (n_chans, n_samples) or (model is None and vals.dtype != code_dtype):
                raise signals.SignalFormatError(
                    f"ubpe codec: the chunk's framing ({dtype}, shape {shape}) does not match "
                    f"its container ({vals.dtype}, shape {vals.shape}): the chunk is corrupted")
        if vals.size != n_chans * n_samples:
            raise ValueError(f"ubpe codec: the chunk holds {vals.size} values, its shape "
                             f"{shape} needs {n_chans * n_samples}")
        chans = vals.reshape(n_chans, n_samples).astype(code_dtype, copy=False)
        if native == np.bool_:
            if chans.size and chans.max() > 1:  # (numpy would hold the bytes as they are)
                raise signals.SignalFormatError(f"ubpe codec: a bool chunk holds the value "
                                                f"{chans.max()} (the chunk is corrupted)")
            chans = chans.view(np.bool_)
        result = self._unchannels(chans, shape).astype(dtype, order="F" if fortran else "C")
        if out is not None:
            if isinstance(out, np.ndarray) and out.shape == result.shape \
                    and out.dtype == result.dtype:
                np.copyto(out, result)  # (element by element, whatever the two layouts)
                return out
            return ndarray_copy(result, out)  # (a flat buffer: the chunk's memory order)
        if fortran:
            return result if result.flags.f_contiguous else result.copy(order="F")
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
            dtype = chunk_spec.dtype  # (zarr 3.1: a ZDType; 3.0: a numpy dtype)
            dtype = np.dtype(dtype.to_native_dtype() if hasattr(dtype, "to_native_dtype")
                             else dtype)
            if out.shape != tuple(chunk_spec.shape) or \
                    out.dtype.newbyteorder("=") != dtype.newbyteorder("="):
                raise signals.SignalFormatError(
                    f"ubpe codec: the chunk holds {out.dtype} of shape {out.shape}, the array's "
                    f"chunk is {dtype} of shape {tuple(chunk_spec.shape)} (a chunk of another "
                    f"array?)")
            return chunk_spec.prototype.nd_buffer.from_ndarray_like(out)

        async def _encode_single(self, chunk_array, chunk_spec):
            data = await asyncio.to_thread(self._codec.encode, chunk_array.as_ndarray_like())
            return chunk_spec.prototype.buffer.from_bytes(data)

        def compute_encoded_size(self, input_byte_length: int, chunk_spec: Any) -> int:
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
