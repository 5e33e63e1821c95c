"""Container building blocks: varints, section layout, checksums."""

from __future__ import annotations

import numpy as np

from ubpe.serialization import FormatError


class SignalFormatError(FormatError):
    """A ``.ubpe`` file is foreign, truncated, corrupted, or of a newer version."""


def write_varints(values) -> bytes:
    """Non-negative integers as LEB128 varints."""
    out = bytearray()
    for v in np.asarray(values, np.int64).tolist():
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


def read_varints(buf: bytes, n: int) -> np.ndarray:
    out, v, shift = [], 0, 0
    for byte in buf:
        v |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(v)
            v, shift = 0, 0
    if len(out) != n or shift:
        raise SignalFormatError(f"a table holds {len(out)} values, expected {n}")
    return np.array(out, np.int64)
