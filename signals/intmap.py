"""Exact integer mapping: any integer or float array to int64 and back.

This is the first stage of the signal codec for binary arrays: it turns a
1-D array of bool, any integer dtype (``int8`` .. ``int64``, ``uint8`` ..
``uint64``) or float dtype (``float16``, ``float32``, ``float64``) into an
``int64`` array that the predictor and entropy stages code, plus a small
plain-JSON config and ``extra`` bytes (exceptions, raw values kept bit for bit).

Mappings (``config["kind"]``):

``"int"``
    Integer dtypes whose values all fit in int64 (all of them except
    ``uint64`` above ``2**63 - 1``): the values themselves.
``"uint64_flip"``
    ``uint64`` arrays holding a value ``>= 2**63``: the sign bit is flipped,
    ``ints = u - 2**63`` (wrapping), an order-preserving bijection of the
    whole ``uint64`` range onto ``int64``.
``"decimal"``
    Floats of decimal origin, found as ALP does (Afroozeh, Kuffo and Boncz,
    "ALP: Adaptive Lossless floating-Point Compression", SIGMOD 2024): a
    decimal exponent ``e`` is chosen on a sample, and each value is stored as
    the integer ``n`` with ``x == n / 10**e`` bit for bit (``n * 10**-e`` for
    ``e < 0``; the division by an exact power of ten is correctly rounded, so
    ``n / 10**e`` is the double nearest to the decimal). A common step ``g``
    and offset ``r`` of the integers are divided out (``n = g*m + r``), as
    pcodec's IntMult mode does. Values that do not round-trip (``NaN``,
    ``inf``, ``-0.0``, values with more digits) become exceptions.
``"scaled"``
    Floats on a grid that is not decimal: integers times a base, as
    pcodec's FloatMult mode finds them (ADC counts times a gain computed in
    float arithmetic, PCM audio stored as floats). The base is a power of two
    (from the lowest set mantissa bit) or the approximate gcd of the
    differences between distinct values of a sample; the decoder is
    ``x = n * b`` or ``x = n / d``. Where the decoded value is off by a few
    ULPs, an int8 ULP adjustment (a difference of the order-preserving
    integers below) makes it exact, like pcodec's secondary latent; other
    values become exceptions.
``"ieee"``
    Any other float: the exact IEEE bits through the order-preserving map of
    pcodec's float modes (https://github.com/pcodec/pcodec): with the bits
    read as a signed integer, positives are kept and negatives have their 63
    (31, 15) low bits flipped, so that ``a < b`` implies ``f(a) < f(b)`` and
    nearby floats map to nearby integers. Trailing mantissa zero bits common
    to every value (floats widened from a narrower type) are shifted out,
    as pcodec's FloatQuant mode does. No exceptions; NaN payloads kept.
    The low bits below the typical prediction residual (whole bytes) are
    noise: they go raw into ``extra`` (``config["raw_bits"]``) and ``ints``
    keeps the high part (``ordered >> raw_bits``, still order-preserving),
    as pcodec's bins keep raw offsets.
``"quantize"``
    Lossy, only with ``max_error=E``: ``n = rint(x / s)``, ``x' = n * s`` with
    the step ``s = 2E (1 - 2**-20)`` (the uniform quantizer of SZ's and ZFP's
    absolute-error modes, its step a hair under ``2E`` so that data on a
    grid of ``E`` does not sit on the bin edges). The bound
    ``|x - x'| <= E`` is checked after reconstruction in the array's own
    dtype; values where rounding breaks it, and non-finite values, become
    exceptions.
``"int_quantize"``
    Lossy integers, only with ``max_error=E >= 1``: bins of ``2h+1`` values
    (``h = floor(E)``) from the minimum, each decoded to its centre, clipped
    to the maximum, so ``|x - x'| <= h``.

The choice between ``"decimal"``, ``"scaled"`` and ``"ieee"`` (and, with
``max_error``, the lossless mapping when it is the cheaper one) is made by an
estimate of the coded size: the sum of ``log2(1 + |residual|)`` for the
cheaper of the first and second differences of the integers, plus the bytes
of ``extra`` (exceptions, adjustments).

``extra`` is empty when there are no exceptions and no adjustments;
otherwise it is a sequence of sections, each ``[flag u8][count u64 LE][body
length u64 LE][body]``, the body zstd-compressed when ``flag == 1``:

- exceptions (when ``config["exceptions"] > 0``): the gaps between successive
  positions (``uint32``, or ``uint64`` for arrays of ``2**32`` values or more;
  the first gap is the first position), then the raw little-endian bits of
  the values;
- ULP adjustments (kind ``"scaled"`` with ``config["adjust"]``): one int8 per
  value;
- raw low bits (kind ``"ieee"`` with ``config["raw_bits"] > 0``): the low
  ``raw_bits / 8`` bytes of each value's order-preserving integer, little
  endian.

The decoder checks every count, length and position against the config and
the array length before it allocates, and reads a zstd body no further than
its expected size.
"""

from __future__ import annotations

import io
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zstandard

from ubpe._jit import njit

__all__ = ["MappedArray", "map_to_int64", "unmap_from_int64", "describe", "KINDS"]

KINDS = ("int", "uint64_flip", "decimal", "scaled", "ieee", "quantize", "int_quantize")
FORMAT = 1  # version of the config/extra layout

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_FLOAT_DTYPES = ("float16", "float32", "float64")
_UINT_OF = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT_OF = {2: np.int16, 4: np.int32, 8: np.int64}
_MAX_EXP = 22  # 10**22 is the largest power of ten that is an exact double
_EXPONENTS = tuple(range(-18, _MAX_EXP + 1))
_EXACT = 2.0 ** 53  # integers up to this magnitude convert to float64 exactly
_SAMPLE_RUNS, _SAMPLE_RUN = 8, 256  # sample for the choice of the decimal exponent
_COST_RUNS, _COST_RUN = 64, 1024  # sample for the size estimates of long arrays
# the lossy step is a hair under 2E: data on a grid of E (0.19 with E = 0.01) then never sits on a
# bin edge, where float rounding of the reconstruction breaks the bound on both sides
_STEP_SHRINK = 1.0 - 2.0 ** -20


@dataclass(frozen=True)
class MappedArray:
    """The result of :func:`map_to_int64`.

    Attributes
    ----------
    ints : numpy.ndarray, shape (n,), int64
        The integers that the predictor and entropy stages code.
    config : dict
        Plain JSON: ``{"format", "dtype", "kind", "exceptions", **parameters}``.
    extra : bytes
        Exceptions (positions and raw bits), ULP adjustments or raw low bits,
        as length-prefixed sections (module docstring); often empty.
    """

    ints: np.ndarray
    config: dict[str, Any]
    extra: bytes = field(default=b"")


# ------------------------------------------------------------------ helpers
def _ieee_to_int(bits: np.ndarray) -> np.ndarray:
    """Signed view of IEEE bits -> order-preserving signed ints (an involution)."""
    nbits = bits.dtype.itemsize * 8
    low = np.array((1 << (nbits - 1)) - 1, bits.dtype)
    return bits ^ ((bits >> (nbits - 1)) & low)


def _diff_cost(ints: np.ndarray) -> float:
    """Estimated coded bits of an integer sequence: the cheaper of orders 1 and 2.

    Arrays longer than ``_COST_RUNS * _COST_RUN`` are estimated from that many
    evenly spaced runs of consecutive values, scaled to the full length.
    """
    n = ints.size
    if n < 3:
        return 64.0 * n
    scale = 1.0
    if n > _COST_RUNS * _COST_RUN:
        starts = np.linspace(0, n - _COST_RUN, _COST_RUNS).astype(np.int64)
        ints = np.concatenate([ints[s:s + _COST_RUN] for s in starts])
        scale = n / ints.size
    f = ints.astype(np.float64)
    d1 = np.diff(f)
    d2 = np.diff(d1)
    c1 = float(np.log2(1.0 + np.abs(d1)).sum())
    c2 = float(np.log2(1.0 + np.abs(d2)).sum())
    return scale * (min(c1, c2) + ints.size)  # about one bit a sample for the sign and the code


def _exception_bits(count: int, itemsize: int) -> float:
    return count * (8.0 * itemsize + 16.0)


def _forward_fill(ints: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Replace ``ints[~ok]`` by the previous good value (the first good one before it)."""
    if ok.all() or ints.size == 0:
        return ints
    idx = np.where(ok, np.arange(ints.size), -1)
    np.maximum.accumulate(idx, out=idx)
    good = np.flatnonzero(ok)
    first = good[0] if good.size else -1
    out = np.zeros_like(ints) if first < 0 else ints[np.where(idx < 0, first, idx)]
    return out


def _sample(x: np.ndarray) -> np.ndarray:
    """Up to ``_SAMPLE_RUNS`` evenly spaced runs of ``_SAMPLE_RUN`` consecutive values."""
    n = x.size
    if n <= _SAMPLE_RUNS * _SAMPLE_RUN:
        return x
    starts = np.linspace(0, n - _SAMPLE_RUN, _SAMPLE_RUNS).astype(np.int64)
    return np.concatenate([x[s:s + _SAMPLE_RUN] for s in starts])


def _bits_view(x: np.ndarray) -> np.ndarray:
    return x.view(_UINT_OF[x.dtype.itemsize])


def _decimal_decode(n: np.ndarray, e: int, dtype: np.dtype) -> np.ndarray:
    f = n.astype(np.float64)
    if e > 0:
        f = f / (10.0 ** e)
    elif e < 0:
        f = f * (10.0 ** -e)
    return f.astype(dtype)


@njit(cache=True)
def _decimal_kernel(x: np.ndarray, e: int, tmp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fused :func:`_decimal_encode` and :func:`_forward_fill` for float32/float64 (numba)."""
    n = x.size
    ints = np.zeros(n, np.int64)
    ok = np.zeros(n, np.bool_)
    p = 10.0 ** abs(e)
    prev = np.int64(0)
    first = -1
    for i in range(n):
        f = np.float64(x[i])
        s = f * p if e >= 0 else f / p
        r = np.rint(s)
        good = False
        if abs(r) < 9007199254740992.0:  # 2**53; false for NaN and inf
            k = np.int64(r)
            back = np.float64(k) / p if e > 0 else np.float64(k) * p
            tmp[0] = back  # cast to the array's dtype
            if tmp[0] == x[i] and (x[i] != 0 or math.copysign(1.0, f) > 0):
                good = True
                prev = k
                if first < 0:
                    first = i
        ints[i] = prev
        ok[i] = good
    if first > 0:
        ints[:first] = ints[first]
    return ints, ok


def _decimal_encode(x: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray]:
    """Integers ``n`` for exponent ``e`` (values that do not round-trip hold the previous good
    one) and the mask of values that round-trip bit for bit."""
    if x.dtype != np.float16:
        return _decimal_kernel(x, e, np.zeros(1, x.dtype))
    with np.errstate(all="ignore"):
        f = x.astype(np.float64)
        s = f * (10.0 ** e) if e >= 0 else f / (10.0 ** -e)
        r = np.rint(s)
        fits = np.isfinite(r) & (np.abs(r) < _EXACT)
        n = np.where(fits, r, 0.0).astype(np.int64)
        back = _decimal_decode(n, e, x.dtype)
    ok = fits & (_bits_view(back) == _bits_view(x))
    return _forward_fill(n, ok), ok


@njit(cache=True)
def _gcd_kernel(n: np.ndarray, ok: np.ndarray) -> int:
    """gcd of ``|n[i] - n[first good]|`` over the good values (0 if they are all equal)."""
    g = 0
    base = np.int64(0)
    have = False
    for i in range(n.size):
        if not ok[i]:
            continue
        if not have:
            base = n[i]
            have = True
            continue
        a = abs(n[i] - base)
        while a:
            g, a = a, g % a
        if g == 1:
            return 1
    return g


def _gcd_offset(n: np.ndarray, ok: np.ndarray) -> tuple[int, int]:
    """Common step ``g`` and offset ``r`` (``0 <= r < g``) of the good values of ``n``."""
    g = int(_gcd_kernel(n, ok))
    if g <= 1 or g > _EXACT:  # differences reach 2**54; the decoder takes steps up to 2**53
        return 1, 0
    return g, int(n[np.argmax(ok)]) % g


def _zstd_level(size: int) -> int:
    return 19 if size < 1 << 20 else 6


def _pack_section(payload: bytes, count: int, level: int | None = None) -> bytes:
    """``[flag u8][count u64][body length u64][body]``: the body is ``payload``, zstd-compressed
    when that is smaller (flag 1)."""
    cctx = zstandard.ZstdCompressor(level=level or _zstd_level(len(payload)))
    head = payload[:1 << 18]
    if len(payload) > 1 << 20 and len(cctx.compress(head)) > 0.97 * len(head):
        return struct.pack("<BQQ", 0, count, len(payload)) + payload  # noise: not worth zstd
    z = cctx.compress(payload)
    flag, body = (1, z) if len(z) < len(payload) else (0, payload)
    return struct.pack("<BQQ", flag, count, len(body)) + body


def _read_section(extra: bytes, off: int, what: str, count: int, size: int) -> tuple[bytes, int]:
    """Payload of the section at ``extra[off:]``, checked to hold ``count`` items in ``size``
    bytes; returns it and the offset after the section."""
    if len(extra) - off < 17:
        raise ValueError(f"{what} section at byte {off}: {len(extra) - off} bytes left, "
                         f"shorter than its 17-byte header")
    flag, got, nbody = struct.unpack_from("<BQQ", extra, off)
    if flag not in (0, 1):
        raise ValueError(f"{what} section at byte {off}: flag {flag} (expected 0 or 1)")
    if got != count:
        raise ValueError(f"{what} section at byte {off} holds {got} items, config declares {count}")
    if nbody > len(extra) - off - 17:
        raise ValueError(f"{what} section at byte {off} declares {nbody} bytes, "
                         f"{len(extra) - off - 17} remain")
    body = extra[off + 17:off + 17 + nbody]
    if flag == 0:
        payload = body
    else:
        try:  # bounded: never more than the expected size (+1 to detect a longer payload)
            payload = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)).read(size + 1)
        except zstandard.ZstdError as exc:
            raise ValueError(f"{what} section at byte {off}: {exc}") from None
    if len(payload) != size:
        raise ValueError(f"{what} section at byte {off}: payload of {len(payload)} bytes, expected {size}")
    return payload, off + 17 + nbody


def _pack_exceptions(pos: np.ndarray, raw: np.ndarray, n: int) -> bytes:
    """Exceptions section: gaps between positions (``uint32``, ``uint64`` for ``n > 2**32 - 1``;
    the first gap is the first position), then the raw little-endian bits of the values."""
    if pos.size == 0:
        return b""
    pw = np.dtype("<u4") if n <= 0xFFFFFFFF else np.dtype("<u8")
    gaps = np.diff(pos, prepend=0).astype(pw)
    payload = gaps.tobytes() + raw.astype(raw.dtype.newbyteorder("<")).tobytes()
    return _pack_section(payload, pos.size)


def _unpack_exceptions(extra: bytes, off: int, n: int, itemsize: int,
                       count: int) -> tuple[np.ndarray, bytes, int]:
    """Positions and raw bits of ``count`` exceptions (none when ``count == 0``), and the offset
    after them."""
    if count == 0:
        return np.zeros(0, np.int64), b"", off
    pw = 4 if n <= 0xFFFFFFFF else 8
    payload, off = _read_section(extra, off, "exceptions", count, count * (pw + itemsize))
    gaps = np.frombuffer(payload, np.dtype(f"<u{pw}"), count).astype(np.int64)
    if gaps[0] >= n or (count > 1 and ((gaps[1:] < 1) | (gaps[1:] >= n)).any()):
        raise ValueError("exception positions are not increasing inside the array")
    pos = np.cumsum(gaps)
    if pos[-1] >= n:
        raise ValueError(f"exception position {int(pos[-1])} is outside the array of {n} values")
    return pos, payload[count * pw:], off


def _dtype_of(x: Any) -> np.dtype:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"expected a numpy array, got {type(x).__name__}")
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {x.shape}")
    name = x.dtype.newbyteorder("=").name if x.dtype.byteorder not in "=|" else x.dtype.name
    if name not in _INT_DTYPES + _FLOAT_DTYPES:
        raise ValueError(f"unsupported dtype {x.dtype} (bool, integers up to 64 bits, float16/32/64)")
    return np.dtype(name)


def _config(dtype: np.dtype, kind: str, exceptions: int = 0, **params: Any) -> dict[str, Any]:
    return {"format": FORMAT, "dtype": dtype.name, "kind": kind, "exceptions": int(exceptions), **params}


# ------------------------------------------------------------------ mapping
def _map_int(x: np.ndarray, dtype: np.dtype, max_error: float | None) -> MappedArray:
    if dtype == np.bool_:  # 0 and 1, always exact: a bound of 1 would make every value one
        return MappedArray(x.astype(np.int64), _config(dtype, "int"))
    if max_error is not None and max_error >= 1 and x.size:
        # (integers on a grid coarser than the bins, 24-bit audio in int32 at a bound of 1:
        # the exact mapping divides by the grid's step and codes smaller)
        lossy, exact = _map_int_quantize(x, dtype, max_error), _map_int(x, dtype, None)
        return exact if _diff_cost(exact.ints) <= _diff_cost(lossy.ints) else lossy
    if dtype == np.uint64 and x.size and int(x.max()) > np.iinfo(np.int64).max:
        ints = (x ^ np.uint64(1 << 63)).view(np.int64)
        return MappedArray(ints.copy(), _config(dtype, "uint64_flip"))
    ints = x.astype(np.int64)
    if x.size >= 16 and dtype.kind in "iu" and int(x.max()) - int(x.min()) < 1 << 62:
        # a common step (timestamps in microseconds that are whole milliseconds), as
        # pcodec's IntMult mode: code (x - r) / g
        g, r = _gcd_offset(ints, np.ones(ints.size, np.bool_))
        if g > 1:
            return MappedArray((ints - r) // g, _config(dtype, "int", step=g, offset=r))
    return MappedArray(ints, _config(dtype, "int"))


def _ordered_u64(x: np.ndarray) -> np.ndarray:
    """Order-preserving map of any integer array onto uint64."""
    if x.dtype.kind == "u":
        return x.astype(np.uint64)
    return x.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)


def _map_int_quantize(x: np.ndarray, dtype: np.dtype, max_error: float) -> MappedArray:
    """Integers binned by ``2 floor(max_error) + 1`` from their minimum (``max_error`` at least 1)."""
    h = min(int(math.floor(max_error)), (1 << 62) - 1)
    q = 2 * h + 1
    key = _ordered_u64(x)
    lo, hi = int(key.min()), int(key.max())
    v = key - np.uint64(lo)
    m = (v // np.uint64(q)).astype(np.int64)
    return MappedArray(m, _config(dtype, "int_quantize", max_error=float(max_error), step=q,
                                  min=str(lo), range=str(hi - lo)))


@njit(cache=True)
def _ieee_kernel(s: np.ndarray, nbits: int) -> tuple[np.ndarray, int]:
    """Order-preserving integers of IEEE bits ``s`` (signed view), common zero bits shifted out."""
    mask = (np.int64(1) << (nbits - 1)) - 1
    low = np.int64(0)
    for i in range(s.size):
        low |= np.int64(s[i]) & mask
    shift = 0
    if low:
        while not (low >> shift) & 1:
            shift += 1
    out = np.empty(s.size, np.int64)
    for i in range(s.size):
        v = np.int64(s[i])
        q = (v & mask) >> shift
        out[i] = ~q if v < 0 else q
    return out, shift


@njit(cache=True)
def _ieee_inverse_kernel(ints: np.ndarray, shift: int, rb: int, low: np.ndarray,
                         nbits: int) -> np.ndarray:
    """Inverse of :func:`_ieee_kernel`, the raw low bytes ``low`` (n, rb/8) put back first."""
    out = np.empty(ints.size, np.int64)
    sign = np.int64(-1) << (nbits - 1)
    nb = rb // 8
    for i in range(ints.size):
        v = ints[i]
        if nb:
            lo = np.int64(0)
            for j in range(nb):
                lo |= np.int64(low[i, j]) << (8 * j)
            v = (v << rb) | lo
        if v < 0:
            out[i] = ((~v) << shift) | sign
        else:
            out[i] = v << shift
    return out


def _map_ieee(x: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, int]:
    ints, shift = _ieee_kernel(x.view(_SINT_OF[dtype.itemsize]), 8 * dtype.itemsize)
    return ints, int(shift)


def _raw_bits(ints: np.ndarray, nbits: int, max_int_bits: int | None) -> int:
    """How many low bits (a multiple of 8) of the IEEE integers to keep raw, outside ``ints``.

    The bits below the typical prediction residual are noise that no model predicts (pcodec's
    binning keeps them as raw offsets too): about 6 bits of residual stay in ``ints``. With
    ``max_int_bits``, enough more go raw that the range of ``ints`` is below ``2**max_int_bits``.
    """
    if ints.size < 3:
        return 0
    f = _sample(ints).astype(np.float64)
    d1 = np.diff(f)
    noise = math.log2(1.0 + min(float(np.median(np.abs(d1))), float(np.median(np.abs(np.diff(d1))))))
    r = 8 * math.floor(max(0.0, noise - 6) / 8)
    if max_int_bits is not None:
        span = math.log2(1.0 + float(int(ints.max()) - int(ints.min())))
        r = max(r, 8 * math.ceil(max(0.0, span - max_int_bits) / 8))
    return min(r, 8 * ((nbits - 1) // 8))


def _ieee_split_plan(x: np.ndarray, dtype: np.dtype, max_int_bits: int | None
                     ) -> tuple[np.ndarray, int, int, float]:
    """IEEE integers, their common zero bits, the raw low bits, and the estimated cost."""
    ints, shift = _map_ieee(x, dtype)
    r = _raw_bits(ints, 8 * dtype.itemsize - shift, max_int_bits)
    return ints, shift, r, _diff_cost(ints >> r) + float(r) * x.size


def _map_ieee_split(x: np.ndarray, dtype: np.dtype, ints: np.ndarray, shift: int, r: int) -> MappedArray:
    extra = b""
    if r:
        low = (ints & np.int64((1 << r) - 1)).astype("<u8")
        payload = np.ascontiguousarray(low.view(np.uint8).reshape(-1, 8)[:, :r // 8]).tobytes()
        extra = _pack_section(payload, x.size, level=3)
        ints = ints >> r
    return MappedArray(ints, _config(dtype, "ieee", shift=shift, raw_bits=r), extra)


def _decimal_candidate(x: np.ndarray, sample: np.ndarray) -> tuple[int, int, float] | None:
    """Best decimal exponent on the sample, the step of its integers, and its estimated cost
    (None when no value of the sample is a decimal)."""
    best: tuple[int, int, float] | None = None
    w = x.dtype.itemsize
    for e in _EXPONENTS:
        n, ok = _decimal_encode(sample, e)
        k = int(ok.sum())
        if k == 0:
            continue
        g, r = _gcd_offset(n, ok)
        if g > 1:
            n = (n - r) // g
        cost = _diff_cost(n) + _exception_bits(sample.size - k, w)
        if best is None or cost < best[2]:
            best = (e, g, cost)
    return best


def _map_decimal(x: np.ndarray, dtype: np.dtype, e: int, g: int) -> tuple[MappedArray, float]:
    """Decimal mapping at exponent ``e``; ``g`` is the step seen on the sample: values off its
    grid become exceptions when they are few, else the step is that of the whole array."""
    n, ok = _decimal_encode(x, e)
    r = 0
    if g > 1:
        r = int(n[np.argmax(ok)]) % g
        off = ok & ((n - r) % g != 0)
        n_off = int(off.sum())
        if n_off and _exception_bits(n_off, dtype.itemsize) < 0.5 * x.size * math.log2(g):
            ok &= ~off
            n = _forward_fill(n, ok)
        elif n_off:
            g, r = _gcd_offset(n, ok)
    if g > 1:
        stepped = (n - r) // g
        # the decoder bounds |ints| by 2**53 // g (the exact range of a double): else no step
        if g > 1 << 53 or np.abs(stepped).max(initial=0) > (1 << 53) // g:
            g, r = 1, 0
        else:
            n = stepped
    pos = np.flatnonzero(~ok)
    extra = _pack_exceptions(pos, _bits_view(x[pos]), x.size)
    cost = _diff_cost(n) + 8.0 * len(extra)
    params: dict[str, Any] = {"exponent": e}
    if g > 1:
        params.update(step=g, offset=r)
    return MappedArray(n, _config(dtype, "decimal", pos.size, **params), extra), cost


def _ordered(x: np.ndarray) -> np.ndarray:
    """Floats -> order-preserving int64 (pcodec's map, no shift): ULP steps are steps of 1."""
    return _ieee_to_int(x.view(_SINT_OF[x.dtype.itemsize])).astype(np.int64)


def _from_ordered(o: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return _ieee_to_int(o.astype(_SINT_OF[dtype.itemsize])).view(dtype)


def _scale_candidates(sample: np.ndarray) -> list[tuple[str, float]]:
    """Decoders ``("mul", b)``: ``x = n * b``, and ``("div", d)``: ``x = n / d``, that fit the
    sample's grid: a power-of-two grid (fixed-point data, PCM audio as floats) from the lowest
    set mantissa bits, and a general base from the approximate gcd of the differences between
    distinct values, as pcodec's FloatMult mode finds one. A grid needs to hold 80% of the
    sample's distinct values, so a few outliers (exceptions later) do not hide it."""
    with np.errstate(all="ignore"):
        v = np.unique(np.abs(sample[np.isfinite(sample)].astype(np.float64)))
    v = v[v > 0]
    out: list[tuple[str, float]] = []
    if v.size < 2:
        return out
    mant, ex = np.frexp(v)
    m = (mant * 2.0 ** 53).astype(np.int64)
    low_exp = np.sort(ex - 53 + np.frexp((m & -m).astype(np.float64))[1] - 1)  # log2 of lowest set bit
    k = int(low_exp[int(0.2 * (v.size - 1))])  # 80% of the values are multiples of 2**k
    if -1074 <= k <= 1023 and (np.log2(v) - k < 40).mean() >= 0.8:
        out.append(("mul", math.ldexp(1.0, k)))
    d = np.diff(v)
    for g0 in np.unique(d)[:4]:  # the gcd is likely among the smallest differences
        with np.errstate(all="ignore"):
            r = v / g0
            near = np.isfinite(r) & (r < 2.0 ** 40) & (np.abs(r - np.rint(r)) < 1e-3)
            rd = d / g0
            dnear = (rd < 2.0 ** 40) & (np.abs(rd - np.rint(rd)) < 1e-3)
        if near.mean() < 0.8 or dnear.mean() < 0.8:
            continue
        nn = np.rint(r[near])
        b = float((v[near] * nn).sum() / (nn * nn).sum())  # least-squares base
        with np.errstate(all="ignore"):
            inv = float(np.float64(1.0) / b)
        if not (math.isfinite(b) and b > 0 and math.isfinite(inv)):
            continue
        cands = [("mul", b), ("div", inv)]
        if abs(inv - round(inv)) < 1e-6 * inv:
            cands.append(("div", float(round(inv))))
        for digits in (6, 9, 12):  # short decimal bases: 0.005, 0.0048828125, ...
            bs = float(f"{b:.{digits}g}")
            if abs(bs - b) < 1e-9 * b and 1.0 / bs < math.inf:
                cands += [("mul", bs), ("div", 1.0 / bs)]
                break
        out += [c for c in cands if c not in out]
        break
    return out


def _scaled_encode(x: np.ndarray, op: str, base: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integers ``n`` (previous good value at exceptions), ULP adjustments (int8) and the mask of
    values that the decoder plus an adjustment in -127..127 gives back bit for bit."""
    with np.errstate(all="ignore"):
        f = x.astype(np.float64)
        r = np.rint(f / base if op == "mul" else f * base)
        fits = np.isfinite(f) & np.isfinite(r) & (np.abs(r) < _EXACT)
        n = np.where(fits, r, 0.0).astype(np.int64)
        back = _scaled_decode(n, op, base, x.dtype)
        adj = _ordered(x) - _ordered(back)
    ok = fits & (np.abs(adj) <= 127) & np.isfinite(back)
    adj = np.where(ok, adj, 0).astype(np.int8)
    return _forward_fill(n, ok), adj, ok


def _scaled_decode(n: np.ndarray, op: str, base: float, dtype: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        f = n.astype(np.float64)
        return (f * base if op == "mul" else f / base).astype(dtype)


def _adj_bits(adj: np.ndarray) -> float:
    """Zeroth-order entropy of the adjustments, in bits (what zstd's Huffman stage approaches)."""
    if not adj.any():
        return 0.0
    counts = np.bincount(adj.astype(np.int64) + 128, minlength=256)
    p = counts[counts > 0] / adj.size
    return float(-(p * np.log2(p)).sum() * adj.size) + 200.0


def _scaled_candidate(x: np.ndarray, sample: np.ndarray) -> tuple[str, float, float] | None:
    """Best scaled decoder on the sample and its estimated cost (None when there is no grid)."""
    best: tuple[str, float, float] | None = None
    for op, base in _scale_candidates(sample):
        n, adj, ok = _scaled_encode(sample, op, base)
        k = int(ok.sum())
        if k == 0:
            continue
        cost = _diff_cost(n) + _adj_bits(adj) + _exception_bits(sample.size - k, x.dtype.itemsize)
        if best is None or cost < best[2]:
            best = (op, base, cost)
    return best


def _map_scaled(x: np.ndarray, dtype: np.dtype, op: str, base: float) -> tuple[MappedArray, float]:
    n, adj, ok = _scaled_encode(x, op, base)
    pos = np.flatnonzero(~ok)
    extra = _pack_exceptions(pos, _bits_view(x[pos]), x.size)
    adjust = bool(adj.any())
    if adjust:
        extra += _pack_section(adj.tobytes(), x.size)
    cost = _diff_cost(n) + 8.0 * len(extra)
    cfg = _config(dtype, "scaled", pos.size, op=op, base=base, adjust=adjust)
    return MappedArray(n, cfg, extra), cost


def _map_quantize(x: np.ndarray, dtype: np.dtype, E: float) -> tuple[MappedArray, float]:
    step = 2.0 * E * _STEP_SHRINK
    with np.errstate(all="ignore"):
        f = x.astype(np.float64)
        r = np.rint(f / step)
        fits = np.isfinite(r) & (np.abs(r) < _EXACT)
        n = np.where(fits, r, 0.0).astype(np.int64)
        back = (n.astype(np.float64) * step).astype(dtype).astype(np.float64)
        ok = fits & (np.abs(f - back) <= E)
        for delta in (-1, 1):  # at a bin edge, rounding may break the bound on one side only
            bad = np.flatnonzero(fits & ~ok)
            if not bad.size:
                break
            alt = n[bad] + delta
            back = (alt.astype(np.float64) * step).astype(dtype).astype(np.float64)
            good = np.abs(f[bad] - back) <= E
            n[bad[good]] = alt[good]
            ok[bad[good]] = True
    filled = _forward_fill(n, ok)
    pos = np.flatnonzero(~ok)
    extra = _pack_exceptions(pos, _bits_view(x[pos]), x.size)
    cost = _diff_cost(filled) + 8.0 * len(extra)
    return MappedArray(filled, _config(dtype, "quantize", pos.size, max_error=float(E), step=step),
                       extra), cost


def check_max_error(max_error: Any) -> float | None:
    """An absolute error bound as the codec takes it: None or 0 (lossless) give None, a
    finite number above 0 gives itself as a float.

    Raises
    ------
    ValueError
        On anything else (a negative, infinite or NaN number, a string, a bool).
    """
    if max_error is None:
        return None
    if isinstance(max_error, bool) or not isinstance(max_error, int | float | np.floating | np.integer) \
            or not math.isfinite(float(max_error)) or float(max_error) < 0:
        raise ValueError(f"max_error must be a finite number >= 0 (0 or None: lossless), "
                         f"got {max_error!r}")
    return float(max_error) or None


def map_to_int64(x: np.ndarray, *, max_error: float | None = None,
                 max_int_bits: int | None = None) -> MappedArray:
    """Map a 1-D integer or float array to int64, exactly unless ``max_error`` is given.

    Parameters
    ----------
    x : numpy.ndarray, shape (n,)
        Any of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
        float16, float32, float64 (either byte order). Any values: full
        integer ranges, NaN (payloads kept), +-inf, -0.0, subnormals.
    max_error : float, optional
        None (the default) or 0: lossless, :func:`unmap_from_int64` gives back
        the array bit for bit. A finite ``E > 0``: ``max |x - x'| <= E`` per
        array, checked after reconstruction (floats: a uniform quantizer of
        step ``2E``, as SZ's and ZFP's absolute-error modes; integers: exact
        when ``E < 1``, else bins of ``2*floor(E) + 1`` values). NaN and inf
        come back exactly. A lossless mapping is kept when it is estimated
        to be the cheaper one.
    max_int_bits : int, optional
        Only for floats mapped by their IEEE bits: keep the range of ``ints``
        below ``2**max_int_bits`` (8 to 64) by moving more low bits raw into
        ``extra``, for a coder whose alphabet is bounded. By default only
        the noise bits go raw (see the module docstring).

    Returns
    -------
    MappedArray
        ``ints`` (shape (n,), int64), ``config`` (plain JSON) and ``extra``
        (the exception block, bytes). See the module docstring for the
        mappings (ALP's decimal scaling, pcodec's order-preserving float
        bits, uint64's sign-bit flip).

    Raises
    ------
    ValueError
        If ``x`` is not a 1-D array of a supported dtype, ``max_error`` is
        not a finite number >= 0, or ``max_int_bits`` not in 8..64.
    """
    dtype = _dtype_of(x)
    max_error = check_max_error(max_error)
    if max_int_bits is not None and (isinstance(max_int_bits, bool) or not isinstance(max_int_bits, int)
                                     or not 8 <= max_int_bits <= 64):
        raise ValueError(f"max_int_bits must be an integer in 8..64, got {max_int_bits!r}")
    x = np.ascontiguousarray(x, dtype=dtype)
    if dtype.kind in "iub":
        return _map_int(x, dtype, max_error)
    ieee_ints, shift, r, best_cost = _ieee_split_plan(x, dtype, max_int_bits)
    best: MappedArray | None = None  # None: the IEEE mapping, built at the end when it is kept
    if x.size == 0:
        return _map_ieee_split(x, dtype, ieee_ints, shift, r)
    ieee_sample = _sample(ieee_ints)
    cand = _decimal_candidate(x, _sample(x))
    if cand is not None and cand[2] < _diff_cost(ieee_sample):
        m, cost = _map_decimal(x, dtype, cand[0], cand[1])
        if cost < best_cost:
            best, best_cost = m, cost
    scand = _scaled_candidate(x, _sample(x))
    if scand is not None and (cand is None or scand[2] < cand[2]):
        m, cost = _map_scaled(x, dtype, scand[0], scand[1])
        if cost < best_cost:
            best, best_cost = m, cost
    if max_error is not None and math.isfinite(2.0 * max_error):  # (a bound near 1.8e308 has no
        m, cost = _map_quantize(x, dtype, max_error)                # finite step: exact then)
        if cost < best_cost:
            best = m
    return best if best is not None else _map_ieee_split(x, dtype, ieee_ints, shift, r)


# ---------------------------------------------------------------- unmapping
def _check_int(config: dict[str, Any], key: str, lo: int, hi: int) -> int:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"config {key!r} must be an integer in {lo}..{hi}, got {v!r}")
    return v


def _check_float(config: dict[str, Any], key: str) -> float:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"config {key!r} must be a finite number > 0, got {v!r}")
    return float(v)


def _check_bigint(config: dict[str, Any], key: str) -> int:
    v = config.get(key)
    if not isinstance(v, str) or not v.isdigit() or len(v) > 20 or int(v) >= 1 << 64:
        raise ValueError(f"config {key!r} must be a decimal string of a uint64, got {v!r}")
    return int(v)


def _check_range(ints: np.ndarray, lo: int, hi: int, what: str) -> None:
    if ints.size and (int(ints.min()) < lo or int(ints.max()) > hi):
        raise ValueError(f"ints out of range {lo}..{hi} for {what}")


def unmap_from_int64(ints: np.ndarray, config: dict[str, Any], extra: bytes = b"", *,
                     copy: bool = True) -> np.ndarray:
    """Inverse of :func:`map_to_int64`.

    Parameters
    ----------
    ints : numpy.ndarray, shape (n,), int64
        ``MappedArray.ints``.
    config : dict
        ``MappedArray.config``.
    extra : bytes
        ``MappedArray.extra``.
    copy : bool, default True
        False: where the mapping is the identity (int64 values, no step) and
        ``ints`` is writeable, return ``ints`` itself (a decoder's own array: one
        copy less).

    Returns
    -------
    numpy.ndarray, shape (n,), of ``config["dtype"]``
        Bit for bit the mapped array, unless it was mapped with ``max_error``.

    Raises
    ------
    ValueError
        If the config is not one that :func:`map_to_int64` writes, the ints
        are outside the range that the config allows, or the exception block
        is inconsistent (declared sizes, counts and positions are checked
        before anything is allocated).
    """
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict, got {type(config).__name__}")
    if config.get("format") != FORMAT:
        raise ValueError(f"unknown integer-mapping format {config.get('format')!r}")
    name = config.get("dtype")
    if name not in _INT_DTYPES + _FLOAT_DTYPES:
        raise ValueError(f"unsupported dtype {name!r} in config")
    dtype: np.dtype[Any] = np.dtype(name)
    kind = config.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown mapping kind {kind!r}; known: {', '.join(KINDS)}")
    if not isinstance(ints, np.ndarray) or ints.ndim != 1 or ints.dtype != np.int64:
        raise ValueError("ints must be a 1-D int64 array")
    n = ints.size
    n_exc = _check_int(config, "exceptions", 0, n)
    float_kinds = ("decimal", "scaled", "ieee", "quantize")
    if (dtype.kind == "f") != (kind in float_kinds):
        raise ValueError(f"mapping {kind!r} does not apply to dtype {name}")
    if kind in ("int", "uint64_flip", "ieee", "int_quantize") and n_exc:
        raise ValueError(f"mapping {kind!r} has no exceptions, config declares {n_exc}")
    if not isinstance(extra, bytes | bytearray | memoryview):
        raise ValueError(f"extra must be bytes, got {type(extra).__name__}")
    extra = bytes(extra)
    pos, raw, off = _unpack_exceptions(extra, 0, n, dtype.itemsize, n_exc)
    adj = None
    if kind == "scaled" and config.get("adjust") is not False:
        if config.get("adjust") is not True:
            raise ValueError(f"config 'adjust' must be true or false, got {config.get('adjust')!r}")
        adj_bytes, off = _read_section(extra, off, "adjustments", n, n)
        adj = np.frombuffer(adj_bytes, np.int8)
    low = None
    if kind == "ieee":
        nbits = 8 * dtype.itemsize - _check_int(config, "shift", 0, 8 * dtype.itemsize - 2)
        rb = _check_int(config, "raw_bits", 0, 8 * ((nbits - 1) // 8))
        if rb % 8:
            raise ValueError(f"config 'raw_bits' must be a multiple of 8, got {rb}")
        if rb:
            low_bytes, off = _read_section(extra, off, "raw low bits", n, n * (rb // 8))
            low = np.frombuffer(low_bytes, np.uint8).reshape(n, rb // 8)
    if off != len(extra):
        raise ValueError(f"{len(extra) - off} bytes left over after the sections of extra")

    if kind == "int" and dtype == np.bool_:
        if "step" in config or "offset" in config:
            raise ValueError("mapping 'int' of bool values has no step or offset")
        _check_range(ints, 0, 1, name)
        return ints.astype(dtype)
    if kind == "int":
        info = np.iinfo(dtype)
        lo, hi = int(info.min), min(int(info.max), int(np.iinfo(np.int64).max))
        if "step" in config or "offset" in config:
            g = _check_int(config, "step", 2, 1 << 62)
            r = _check_int(config, "offset", 0, g - 1)
            _check_range(ints, -((r - lo) // g), (hi - r) // g, name)
            return (ints * g + r).astype(dtype, copy=False)
        if dtype != np.int64:  # (every int64 is in range: no pass over the data)
            _check_range(ints, lo, hi, name)
        return ints.astype(dtype, copy=copy or not ints.flags.writeable)
    if kind == "uint64_flip":
        if dtype != np.uint64:
            raise ValueError("mapping 'uint64_flip' applies to uint64 only")
        return ints.view(np.uint64) ^ np.uint64(1 << 63)
    if kind == "int_quantize":
        _check_float(config, "max_error")
        q = _check_int(config, "step", 1, (1 << 63) - 1)
        lo, rng = _check_bigint(config, "min"), _check_bigint(config, "range")
        if lo + rng >= 1 << 64:
            raise ValueError(f"int_quantize min {lo} plus range {rng} is beyond uint64")
        _check_range(ints, 0, rng // q, "this int_quantize range")
        h = np.uint64(q // 2)
        c = ints.view(np.uint64) * np.uint64(q)
        c = c + np.minimum(h, np.uint64(rng) - c)
        key = c + np.uint64(lo)
        if dtype.kind == "u":
            if key.size and int(key.max()) > int(np.iinfo(dtype).max):
                raise ValueError(f"int_quantize values out of range for {name}")
            return key.astype(dtype)
        signed = (key ^ np.uint64(1 << 63)).view(np.int64)
        info = np.iinfo(dtype)
        _check_range(signed, int(info.min), int(info.max), name)
        return signed.astype(dtype)
    w = dtype.itemsize
    if kind == "ieee":
        shift, rb = config["shift"], config["raw_bits"]
        lim = (1 << (8 * w - 1 - shift - rb)) - 1
        _check_range(ints, -lim - 1, lim, f"{name} bits shifted by {shift + rb}")
        bits = _ieee_inverse_kernel(np.ascontiguousarray(ints), shift, rb,
                                    low if low is not None else np.zeros((0, 0), np.uint8), 8 * w)
        return bits.astype(_SINT_OF[w]).view(dtype)
    if kind == "decimal":
        e = _check_int(config, "exponent", _EXPONENTS[0], _EXPONENTS[-1])
        n_ints = ints
        if "step" in config or "offset" in config:
            g = _check_int(config, "step", 2, 1 << 53)
            r = _check_int(config, "offset", 0, g - 1)
            lim = int(_EXACT) // g
            _check_range(ints, -lim, lim, f"decimal step {g}")
            n_ints = ints * g + r
        out = _decimal_decode(n_ints, e, dtype)
    elif kind == "scaled":
        op = config.get("op")
        if op not in ("mul", "div"):
            raise ValueError(f"config 'op' must be 'mul' or 'div', got {op!r}")
        base = _check_float(config, "base")
        _check_range(ints, -int(_EXACT), int(_EXACT), "scaled")
        out = _scaled_decode(ints, op, base, dtype)
        if adj is not None:
            o = _ordered(out) + adj
            lim = (1 << (8 * w - 1)) - 1
            if o.size and (int(o.min()) < -lim - 1 or int(o.max()) > lim):
                raise ValueError("ULP adjustments step outside the float range")
            out = _from_ordered(o, dtype)
    else:  # quantize
        E = _check_float(config, "max_error")
        step = _check_float(config, "step")
        if step > 2.0 * E:
            raise ValueError(f"quantize step {step!r} is more than twice max_error {E!r}")
        with np.errstate(all="ignore"):
            out = (ints.astype(np.float64) * step).astype(dtype)
    if pos.size:
        out[pos] = np.frombuffer(raw, np.dtype(dtype).newbyteorder("<")).astype(dtype)
    return out


def describe(config: dict[str, Any]) -> str:
    """One line for ``inspect``: ``"lossless, decimal scale 10^-2, 3 exceptions"``, ``"max error 0.01"``.

    Parameters
    ----------
    config : dict
        ``MappedArray.config``.

    Returns
    -------
    str
    """
    kind = config.get("kind")
    dtype = config.get("dtype")
    k = config.get("exceptions", 0)
    exc = f", {k} exception{'s' if k != 1 else ''}" if k else ""
    if kind == "int":
        if "step" in config:
            return f"lossless, {dtype} values, step {config['step']} offset {config.get('offset', 0)}"
        return f"lossless, {dtype} values"
    if kind == "uint64_flip":
        return "lossless, uint64 with the sign bit flipped (u - 2**63)"
    if kind == "decimal":
        e = config.get("exponent")
        step = f", step {config['step']} offset {config.get('offset', 0)}" if "step" in config else ""
        return f"lossless, {dtype} as decimal scale 10^{-e if isinstance(e, int) else e}{step}{exc}"
    if kind == "scaled":
        op = "x" if config.get("op") == "mul" else "/"
        adj = ", ULP adjustments" if config.get("adjust") else ""
        return f"lossless, {dtype} as integers {op} {config.get('base')!r}{adj}{exc}"
    if kind == "ieee":
        sh, rb = config.get("shift", 0), config.get("raw_bits", 0)
        return (f"lossless, {dtype} IEEE bits (order-preserving)"
                + (f", {sh} zero bits dropped" if sh else "") + (f", {rb} low bits raw" if rb else ""))
    if kind == "quantize":
        return f"max error {config.get('max_error')!r} ({dtype}, step {config.get('step')!r}){exc}"
    if kind == "int_quantize":
        return f"max error {config.get('max_error')!r} ({dtype}, bins of {config.get('step')})"
    if kind == "model":  # (a column coded against a trained model: SignalModel.map_channel)
        return "lossless, mapped and coded by the model"
    return f"unknown mapping {kind!r}"
