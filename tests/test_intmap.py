"""Tests of signals.intmap: exact integer mapping of integer and float arrays."""

from __future__ import annotations

import functools
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from signals.intmap import MappedArray, describe, map_to_int64, unmap_from_int64

DATA = Path(__file__).resolve().parent / "data"
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
UINT_OF = {"float16": "uint16", "float32": "uint32", "float64": "uint64"}


def roundtrip(x: np.ndarray, max_error: float | None = None) -> tuple[MappedArray, np.ndarray]:
    m = map_to_int64(x, max_error=max_error)
    assert m.ints.dtype == np.int64 and m.ints.shape == x.shape
    config = json.loads(json.dumps(m.config))  # the config is plain JSON and survives it unchanged
    assert config == m.config
    y = unmap_from_int64(m.ints.copy(), config, m.extra)
    assert y.dtype == x.dtype and y.shape == x.shape
    return m, y


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    if x.dtype.kind == "f":
        u = UINT_OF[x.dtype.name]
        return bool(np.array_equal(x.view(u), y.view(u)))
    return bool(np.array_equal(x, y))


# ------------------------------------------------------------ golden cases
def test_golden_decimal_weather_row():
    # seattle_weather.csv row 1: one decimal each, stored as tenths
    x = np.array([0.0, 12.8, 5.0, 4.7])
    m, y = roundtrip(x)
    assert m.config == {"format": 1, "dtype": "float64", "kind": "decimal", "exceptions": 0, "exponent": 1}
    assert m.ints.tolist() == [0, 128, 50, 47]
    assert m.extra == b""
    assert same_bits(x, y)
    assert describe(m.config) == "lossless, float64 as decimal scale 10^-1"


def test_golden_decimal_step_and_exceptions():
    # ECG-like: multiples of 0.005 -> thousandths divided by 5; NaN and -0.0 are exceptions
    x = np.array([-0.245, -0.215, np.nan, -0.185, -0.0, -0.175, -0.17, -0.17, -0.185, -0.16, -0.15] * 4)
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["kind"] == "decimal" and m.config["exponent"] == 3
    assert m.config["step"] == 5 and m.config["offset"] == 0 and m.config["exceptions"] == 8
    # -0.245 -> -245 / 5 = -49; the NaN and -0.0 slots repeat the value before them
    assert m.ints[:6].tolist() == [-49, -43, -43, -37, -37, -35]
    assert describe(m.config) == "lossless, float64 as decimal scale 10^-3, step 5 offset 0, 8 exceptions"
    # exception section: flag, count, body length, then 8 uint32 gaps and 8 raw float64 (or zstd of those)
    flag, count, nbody = struct.unpack_from("<BQQ", m.extra)
    assert count == 8 and flag in (0, 1) and len(m.extra) == 17 + nbody
    if flag == 0:
        gaps = np.frombuffer(m.extra[17:17 + 32], "<u4")
        assert gaps.tolist() == [2, 2, 7, 2, 7, 2, 7, 2]


def test_golden_ieee_bits():
    # magnitudes 0x3FF0.., 0x3FF8.. share 51 trailing zero bits: 1.0 -> 0x7FE = 2046, 1.5 -> 2047;
    # negatives are the bitwise complement: -1.0 -> ~2046 = -2047, -0.0 -> ~0 = -1
    ints = np.array([2046, -2047, -1, 0, 2047], np.int64)
    cfg = {"format": 1, "dtype": "float64", "kind": "ieee", "exceptions": 0, "shift": 51, "raw_bits": 0}
    y = unmap_from_int64(ints, cfg, b"")
    assert same_bits(y, np.array([1.0, -1.0, -0.0, 0.0, 1.5]))
    from signals.intmap import _map_ieee
    got, shift = _map_ieee(np.array([1.0, -1.0, -0.0, 0.0, 1.5]), np.dtype("float64"))
    assert shift == 51 and got.tolist() == ints.tolist()


def test_ieee_order_preserving():
    from signals.intmap import _map_ieee
    x = np.array([-np.inf, -1e308, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1e308, np.inf])
    ints, shift = _map_ieee(x, x.dtype)
    assert shift == 0 and (np.diff(ints) > 0).all()


def test_golden_uint64_flip():
    x = np.array([2**63, 2**63 + 1, 2**64 - 1, 0], np.uint64)
    m, y = roundtrip(x)
    assert m.config["kind"] == "uint64_flip"
    assert m.ints.tolist() == [0, 1, 2**63 - 1, -(2**63)]
    assert np.array_equal(x, y)


def test_golden_int_kinds():
    m, y = roundtrip(np.array([-128, 127, 0], np.int8))
    assert m.config["kind"] == "int" and m.ints.tolist() == [-128, 127, 0]
    m, y = roundtrip(np.array([0, 2**32 - 1], np.uint32))
    assert m.config["kind"] == "int" and m.ints.tolist() == [0, 2**32 - 1]
    m, y = roundtrip(np.array([5, 2**63 - 1], np.uint64))
    assert m.config["kind"] == "int" and y.tolist() == [5, 2**63 - 1]


def test_unmap_without_copy_only_where_the_mapping_is_the_identity():
    x = np.array([-(2**63), -1, 0, 2**63 - 1], np.int64)
    m = map_to_int64(x)
    back = unmap_from_int64(m.ints, m.config, m.extra)
    assert back is not m.ints and back.tolist() == x.tolist()  # a copy by default
    assert unmap_from_int64(m.ints, m.config, m.extra, copy=False) is m.ints
    frozen = m.ints.copy()
    frozen.flags.writeable = False
    out = unmap_from_int64(frozen, m.config, m.extra, copy=False)
    assert out is not frozen and out.flags.writeable and out.tolist() == x.tolist()
    m16 = map_to_int64(np.array([-5, 7], np.int16))
    out16 = unmap_from_int64(m16.ints, m16.config, m16.extra, copy=False)
    assert out16.dtype == np.int16 and out16.tolist() == [-5, 7]
    with pytest.raises(ValueError, match="out of range"):
        unmap_from_int64(np.array([40000], np.int64), m16.config, m16.extra, copy=False)


def test_golden_int_quantize():
    # E = 2.5 -> bins of 5 from the minimum 10: 10..14 -> 12, 15..19 -> 17, 20..21 -> 22 clipped to 21
    x = np.array([10, 14, 15, 19, 20, 21], np.int32)
    m, y = roundtrip(x, max_error=2.5)
    assert m.config["kind"] == "int_quantize" and m.config["step"] == 5
    assert m.ints.tolist() == [0, 0, 1, 1, 2, 2]
    assert y.tolist() == [12, 12, 17, 17, 21, 21]
    assert describe(m.config) == "max error 2.5 (int32, bins of 5)"
    # below 1, integers stay exact
    m, y = roundtrip(x, max_error=0.9)
    assert m.config["kind"] == "int" and np.array_equal(x, y)


def test_extreme_floats():
    x = np.array([1e308, -1e308, np.finfo(np.float64).max, -np.finfo(np.float64).max, 5e-324, -5e-324,
                  np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0])
    m, y = roundtrip(x)
    assert same_bits(x, y)
    x = np.array([1e308, -1e308, 1e307, 3e308 / 4])
    assert same_bits(x, roundtrip(x)[1])


def test_nan_payloads():
    bits = np.array([0x7FF0000000000001, 0xFFF8000000000000, 0x7FF8DEADBEEF0000, 0x7FF4000000000000],
                    np.uint64)
    x = bits.view(np.float64)
    assert same_bits(x, roundtrip(x)[1])
    b32 = np.array([0x7FC00001, 0xFF800001, 0x7FBFFFFF], np.uint32)
    x32 = b32.view(np.float32)
    assert same_bits(x32, roundtrip(x32)[1])


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_empty_and_single(dtype):
    for x in (np.zeros(0, dtype), np.ones(1, dtype), np.zeros(2, dtype)):
        m, y = roundtrip(x)
        assert same_bits(x, y)
        m, y = roundtrip(x, max_error=0.5)
        assert same_bits(x, y)


def test_big_endian_and_noncontiguous():
    x = np.arange(20, dtype=">f8") / 10
    m, y = roundtrip(x)
    assert y.dtype == np.float64 and np.array_equal(y, x)
    z = (np.arange(40, dtype=np.float32) / 4)[::2]
    assert np.array_equal(roundtrip(z)[1], z)


def test_float32_from_decimal_text():
    x = np.array([float(f"{i / 100:.2f}") for i in range(-500, 500, 7)], np.float32)
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["kind"] == "decimal" and m.config["exponent"] == 2


def test_widened_float32_drops_zero_bits():
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.standard_normal(500)).astype(np.float32).astype(np.float64)
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["kind"] == "ieee" and m.config["shift"] >= 29


def test_max_error_keeps_cheaper_lossless():
    # values in tenths with a bound of 1: quantized ints would be 20x smaller, so quantize is chosen
    x = np.round(np.cumsum(np.random.default_rng(2).standard_normal(2000)) * 10) / 10
    m, y = roundtrip(x, max_error=1.0)
    assert m.config["kind"] == "quantize" and np.abs(x - y).max() <= 1.0
    assert describe(m.config).startswith("max error 1.0")
    # a bound finer than the data's own step: the exact decimal mapping is cheaper, and kept
    m, y = roundtrip(x, max_error=0.001)
    assert m.config["kind"] == "decimal" and same_bits(x, y)


def test_bad_inputs():
    with pytest.raises(ValueError, match="1-D"):
        map_to_int64(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="dtype"):
        map_to_int64(np.zeros(3, np.complex128))
    with pytest.raises(ValueError, match="numpy array"):
        map_to_int64([1.0, 2.0])  # type: ignore[arg-type]
    for bad in (-1.0, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match="max_error"):
            map_to_int64(np.zeros(3), max_error=bad)  # type: ignore[arg-type]
    assert map_to_int64(np.zeros(3), max_error=0).config["kind"] != "quantize"  # 0: lossless


def test_bool_maps_to_0_and_1_and_back_exactly_at_any_bound():
    x = np.array([True, False, False, True])
    for e in (None, 0.5, 1.0, 100.0):
        m = map_to_int64(x, max_error=e)
        assert m.ints.tolist() == [1, 0, 0, 1] and m.config["dtype"] == "bool"
        back = unmap_from_int64(m.ints, m.config, m.extra)
        assert back.dtype == np.bool_ and np.array_equal(back, x)
    with pytest.raises(ValueError, match="out of range"):
        unmap_from_int64(np.array([2], np.int64), m.config)


# ------------------------------------------------------------ decoder checks
def _valid() -> MappedArray:
    x = np.array([0.1, 0.2, np.nan, 0.4, -0.0, 0.6] * 3)
    m = map_to_int64(x)
    assert m.config["exceptions"] == 6
    return m


@pytest.mark.parametrize("change", [
    {"format": 2}, {"dtype": "float128"}, {"dtype": "int64"}, {"kind": "alp"}, {"kind": "ieee"},
    {"exponent": 23}, {"exponent": "1"}, {"exceptions": 5}, {"exceptions": 10**12}, {"exceptions": -1},
    {"step": 1}, {"step": 2, "offset": 2},
])
def test_decoder_rejects_bad_config(change):
    m = _valid()
    with pytest.raises(ValueError):
        unmap_from_int64(m.ints, {**m.config, **change}, m.extra)


def _section(flag: int, count: int, body: bytes) -> bytes:
    return struct.pack("<BQQ", flag, count, len(body)) + body


def test_decoder_rejects_bad_extra():
    m = _valid()
    n = m.ints.size
    body = np.array([2, 2, 2, 2, 2, 2], "<u4").tobytes() + bytes(48)
    raw = _section(0, 6, body)
    assert unmap_from_int64(m.ints, m.config, raw).shape == (n,)  # a well-formed block decodes
    bad = [
        b"", b"\x00" * 5, _section(7, 6, body), _section(0, 7, body), _section(0, 5, body),
        raw[:-1], raw + b"\x00", _section(0, 6, body[:-1]), _section(0, 6, body + b"\x00"),
        struct.pack("<BQQ", 0, 6, 2**63) + body,  # declared body longer than what remains
        _section(0, 6, np.array([2, 2, 2, 2, 2, 9], "<u4").tobytes() + bytes(48)),  # past the end
        _section(0, 6, np.array([2, 2, 0, 2, 2, 2], "<u4").tobytes() + bytes(48)),  # repeated
        _section(0, 6, np.array([2**31, 1, 1, 1, 1, 1], "<u4").tobytes() + bytes(48)),
        _section(1, 6, b"not zstd"),
        # a zstd bomb: 100 MB of zeros declared, the decoder reads no more than the expected 72 bytes
        _section(1, 6, zstandard.ZstdCompressor().compress(bytes(100_000_000))),
        "text",
    ]
    for extra in bad:
        with pytest.raises(ValueError):
            unmap_from_int64(m.ints, m.config, extra)  # type: ignore[arg-type]


def test_decoder_rejects_bad_scaled():
    x = np.load(DATA / "mitbih208_ecg_4k.npz")["ecg"] / 3
    m = map_to_int64(x)
    assert m.config["kind"] == "scaled" and m.config["adjust"] is True
    for change in ({"op": "pow"}, {"base": 0.0}, {"base": float("inf")}, {"adjust": "yes"},
                   {"adjust": False}, {"exceptions": 1}):
        with pytest.raises(ValueError):
            unmap_from_int64(m.ints, {**m.config, **change}, m.extra)
    with pytest.raises(ValueError, match="left over"):
        unmap_from_int64(m.ints, m.config, m.extra + b"\x00")
    with pytest.raises(ValueError):
        unmap_from_int64(m.ints[:-1], m.config, m.extra)
    # adjustments that step out of the float range
    adj = _section(0, 3, np.array([127, 127, 127], np.int8).tobytes())
    cfg = {**m.config, "base": 1.0, "op": "mul", "exceptions": 0}
    big = np.array([2**53, 2**53, 2**53], np.int64)
    assert unmap_from_int64(big, cfg, adj).dtype == np.float64
    with pytest.raises(ValueError, match="range"):
        unmap_from_int64(big + 1, cfg, adj)


def test_decoder_rejects_out_of_range_ints():
    cfg = {"format": 1, "dtype": "int8", "kind": "int", "exceptions": 0}
    with pytest.raises(ValueError, match="range"):
        unmap_from_int64(np.array([200], np.int64), cfg, b"")
    cfg = {"format": 1, "dtype": "float32", "kind": "ieee", "exceptions": 0, "shift": 0, "raw_bits": 0}
    with pytest.raises(ValueError, match="range"):
        unmap_from_int64(np.array([2**31], np.int64), cfg, b"")
    with pytest.raises(ValueError, match="int64"):
        unmap_from_int64(np.array([1], np.int32), cfg, b"")
    cfg = {"format": 1, "dtype": "uint8", "kind": "int_quantize", "exceptions": 0, "max_error": 1.0,
           "step": 3, "min": "0", "range": "255"}
    with pytest.raises(ValueError, match="range"):
        unmap_from_int64(np.array([86], np.int64), cfg, b"")
    with pytest.raises(ValueError, match="min"):
        unmap_from_int64(np.array([1], np.int64), {**cfg, "min": "-1"}, b"")
    with pytest.raises(ValueError, match="beyond"):
        unmap_from_int64(np.array([1], np.int64), {**cfg, "min": str(2**64 - 10)}, b"")


# ------------------------------------------------------------ properties
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INT_DTYPES).flatmap(
    lambda d: hnp.arrays(d, st.integers(0, 64), elements=hnp.from_dtype(np.dtype(d)))))
def test_roundtrip_integers(x):
    m, y = roundtrip(x)
    assert np.array_equal(x, y)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FLOAT_DTYPES).flatmap(
    lambda d: hnp.arrays(UINT_OF[d], st.integers(0, 64)).map(lambda b: b.view(d))))
def test_roundtrip_any_float_bits(x):
    # every bit pattern: NaN payloads, -0.0, inf, subnormals
    assert same_bits(x, roundtrip(x)[1])


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(FLOAT_DTYPES).flatmap(
    lambda d: hnp.arrays(d, st.integers(0, 64),
                         elements=hnp.from_dtype(np.dtype(d), allow_nan=True, allow_infinity=True,
                                                 allow_subnormal=True))))
def test_roundtrip_floats(x):
    assert same_bits(x, roundtrip(x)[1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=200), st.integers(0, 6),
       st.sampled_from(["float32", "float64"]),
       st.lists(st.sampled_from([np.nan, np.inf, -0.0, 1e308, 0.1234567891234]), max_size=3))
def test_roundtrip_decimal_origin(digits, scale, dtype, specials):
    # floats parsed from decimal text, with a few values that are not decimals at that scale
    vals = [float(f"{d / 10**scale:.{scale}f}") for d in digits] + specials
    with np.errstate(over="ignore"):
        x = np.array(vals, dtype)
    m, y = roundtrip(x)
    assert same_bits(x, y)
    if len(digits) >= 50 and len(set(digits)) > 10 and dtype == "float64":
        assert m.config["kind"] == "decimal"
        assert m.config["exponent"] <= scale and m.config["exceptions"] <= len(specials)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(FLOAT_DTYPES).flatmap(
    lambda d: hnp.arrays(d, st.integers(0, 64),
                         elements=hnp.from_dtype(np.dtype(d), allow_nan=True, allow_infinity=True))),
       st.floats(1e-9, 1e9))
def test_max_error_bound_floats(x, E):
    m, y = roundtrip(x, max_error=E)
    fin = np.isfinite(x)
    assert same_bits(x[~fin], y[~fin])  # NaN and inf come back exactly
    err = np.abs(x[fin].astype(np.float64) - y[fin].astype(np.float64))
    assert err.size == 0 or err.max() <= E


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(INT_DTYPES).flatmap(
    lambda d: hnp.arrays(d, st.integers(0, 64), elements=hnp.from_dtype(np.dtype(d)))),
       st.one_of(st.floats(0.01, 10.0), st.floats(1.0, 2.0**66)))
def test_max_error_bound_integers(x, E):
    m, y = roundtrip(x, max_error=E)
    err = [abs(int(a) - int(b)) for a, b in zip(x, y)]
    assert max(err, default=0) <= E


# ------------------------------------------------------------ real data
def test_ecg_is_decimal_origin():
    x = np.load(DATA / "mitbih208_ecg_4k.npz")["ecg"]
    assert x.dtype == np.float64 and x.size == 4096
    m, y = roundtrip(x)
    assert same_bits(x, y)
    # ADC counts times 0.005 mV: thousandths, step 5, no exceptions
    assert m.config["kind"] == "decimal" and m.config["exponent"] == 3 and m.config["step"] == 5
    assert m.config["exceptions"] == 0 and m.extra == b""
    assert np.array_equal(m.ints * 5, np.rint(x * 1000).astype(np.int64))
    for E in (0.001, 0.01, 0.05):
        m, y = roundtrip(x, max_error=E)
        assert np.abs(x - y).max() <= E


def test_decimal_step_keeps_rare_off_grid_values_as_exceptions():
    rng = np.random.default_rng(3)
    counts = np.cumsum(rng.integers(-3, 4, 5000))
    x = (counts * 5) / 1000  # multiples of 0.005, each the double nearest to its decimal
    x[1234] = 0.123  # one value off the grid of 5 thousandths
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["exponent"] == 3 and m.config["step"] == 5 and m.config["exceptions"] == 1
    # many values off the grid: no step
    x[::3] = (counts[::3] * 5 + 1) / 1000
    m, y = roundtrip(x)
    assert same_bits(x, y) and "step" not in m.config and m.config["exponent"] == 3


def test_golden_scaled_binary_floats():
    # ECG counts / 600 in float arithmetic (the ECG in mV divided by 3): not decimals, but on a grid;
    # n / 600 gives most values back exactly, the others are one ULP away
    counts = np.rint(np.load(DATA / "mitbih208_ecg_4k.npz")["ecg"] * 200).astype(np.int64)
    x = (counts * 5 / 1000) / 3
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["kind"] == "scaled" and m.config["op"] == "div" and m.config["base"] == 600.0
    assert m.ints.tolist() == counts.tolist()
    assert describe(m.config) == "lossless, float64 as integers / 600.0, ULP adjustments"
    # the adjustment section: one int8 per value, the ULP distance from n / 600 to x
    ulps = x.view(np.int64) - (counts / 600.0).view(np.int64)  # same signs: ULPs are bit differences
    assert set(np.unique(ulps).tolist()) <= {-1, 0, 1}


def test_scaled_pcm_audio_as_floats():
    # int16 PCM / 32768 (a float WAV): the integers are the PCM counts
    import wave
    with wave.open(str(DATA / "speech_0880.wav")) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    for dtype in (np.float32, np.float64):
        x = (pcm / 32768).astype(dtype)
        m, y = roundtrip(x)
        assert same_bits(x, y) and m.extra == b""
        assert m.config["kind"] in ("decimal", "scaled")
        assert np.array_equal(m.ints, pcm)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-10**5, 10**5), min_size=40, max_size=200),
       st.floats(1e-6, 1e6).filter(lambda b: b != 1.0), st.sampled_from(["float32", "float64"]),
       st.lists(st.sampled_from([np.nan, np.inf, -0.0, 1e30, 0.123456789]), max_size=3))
def test_roundtrip_scaled_origin(counts, gain, dtype, specials):
    # ADC counts times a gain, in float arithmetic, with a few other values
    with np.errstate(over="ignore"):
        x = np.array(list(np.array(counts, np.float64) * gain) + specials, dtype)
    m, y = roundtrip(x)
    assert same_bits(x, y)


@functools.cache
def _mapped_with_everything_cached() -> MappedArray:
    x = np.load(DATA / "mitbih208_ecg_4k.npz")["ecg"][:600] / 3
    x[[5, 77, 300]] = [np.nan, np.inf, 1e300]
    m = map_to_int64(x)
    assert m.config["kind"] == "scaled" and m.config["adjust"] and m.config["exceptions"] == 3
    return m


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_decoder_fuzz_extra_and_config(data):
    # mutated extra bytes, config values and ints: a ValueError or an array of the right length, never
    # another exception
    c = _mapped_with_everything_cached()
    m = MappedArray(c.ints.copy(), dict(c.config), c.extra)
    extra = bytearray(m.extra)
    for _ in range(data.draw(st.integers(1, 4))):
        what = data.draw(st.sampled_from(["flip", "cut", "grow", "config", "ints"]))
        if what == "flip" and extra:
            i = data.draw(st.integers(0, len(extra) - 1))
            extra[i] = data.draw(st.integers(0, 255))
        elif what == "cut":
            del extra[data.draw(st.integers(0, len(extra))):]
        elif what == "grow":
            extra += data.draw(st.binary(max_size=20))
        elif what == "config":
            key = data.draw(st.sampled_from(sorted(m.config)))
            m.config[key] = data.draw(st.one_of(st.integers(-2**70, 2**70), st.floats(), st.text(max_size=3),
                                               st.booleans(), st.none()))
        else:
            i = data.draw(st.integers(0, m.ints.size - 1))
            m.ints[i] = data.draw(st.integers(-2**63, 2**63 - 1))
    try:
        y = unmap_from_int64(m.ints, m.config, bytes(extra))
    except ValueError:
        return
    assert y.shape == m.ints.shape


def test_ieee_noise_bits_go_raw():
    # a random walk with steps of about 2**-20 relative: the low ~30 bits of each value are noise
    rng = np.random.default_rng(5)
    x = 1.0 + np.cumsum(rng.standard_normal(3000)) * 2.0 ** -20
    m, y = roundtrip(x)
    assert same_bits(x, y)
    assert m.config["kind"] == "ieee" and m.config["raw_bits"] == 24
    assert describe(m.config) == "lossless, float64 IEEE bits (order-preserving), 24 low bits raw"
    # ints are the order-preserving integers without their low 3 bytes, which extra holds
    assert np.array_equal(m.ints, x.view(np.int64) >> 24)
    flag, count, nbody = struct.unpack_from("<BQQ", m.extra)
    assert count == x.size and len(m.extra) == 17 + nbody
    if flag == 0:
        low = np.frombuffer(m.extra[17:], np.uint8).reshape(-1, 3)
        assert np.array_equal(low[:, 0], x.view(np.uint64).astype(np.uint8))
    with pytest.raises(ValueError):
        unmap_from_int64(m.ints, {**m.config, "raw_bits": 12}, m.extra)
    with pytest.raises(ValueError):
        unmap_from_int64(m.ints, {**m.config, "raw_bits": 16}, m.extra)
    with pytest.raises(ValueError, match="range"):
        unmap_from_int64(m.ints << 30, m.config, m.extra)


def test_max_int_bits_bounds_the_range():
    rng = np.random.default_rng(6)
    x = np.sin(np.arange(5000) / 50) + rng.standard_normal(5000) * 1e-9  # crosses zero, not on a grid
    for bits in (12, 20, 40):
        m, y = roundtrip_with(x, max_int_bits=bits)
        assert same_bits(x, y) and m.config["kind"] == "ieee"
        assert int(m.ints.max()) - int(m.ints.min()) < 2**bits
    for bad in (0, 7, 65, 20.0, True):
        with pytest.raises(ValueError, match="max_int_bits"):
            map_to_int64(x, max_int_bits=bad)  # type: ignore[arg-type]


def roundtrip_with(x: np.ndarray, **kw) -> tuple[MappedArray, np.ndarray]:
    m = map_to_int64(x, **kw)
    return m, unmap_from_int64(m.ints, json.loads(json.dumps(m.config)), m.extra)


def test_regression_step_beyond_2_53():
    # found by a longer hypothesis run: a step (gcd of the decimal integers) above 2**53
    x = np.array([6.36894720e+16, -2.63825206e+16, -2.63825206e+16])
    m, y = roundtrip(x)
    assert same_bits(x, y)


def test_integer_step_and_offset():
    # timestamps in microseconds that are whole milliseconds, plus an offset: (x - r) / g
    x = 1_479_995_938_081_000 + 1000 * np.cumsum(np.arange(40) % 3, dtype=np.int64) + 7
    m, y = roundtrip(x)
    assert m.config["step"] == 1000 and m.config["offset"] == x[0] % 1000
    assert np.array_equal(m.ints * 1000 + m.config["offset"], x) and np.array_equal(y, x)
    with pytest.raises(ValueError, match="out of range"):
        unmap_from_int64(np.array([2**62], np.int64), m.config, m.extra)
