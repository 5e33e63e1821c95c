"""Peer codecs on the same integers, each timed in this process or through its CLI.

Every function takes a list of 1-D int64 channels (coded one stream per
channel where the codec is a mono audio codec, one byte stream of the
channels one after another for general-purpose compressors) and returns a
:class:`PeerResult` (bytes, seconds to compress and to decompress, exact
round trip checked), or ``None`` with a message on stderr when the peer is
not installed or cannot take the values (e.g. FLAC beyond 32 bits).

- pcodec levels 8 and 12 (PyPI ``pcodec``; https://github.com/pcodec/pcodec);
- WavPack ``-hhx6`` and FLAC ``-8`` (Debian ``wavpack``, ``flac`` CLIs, no padding);
- xz ``-9e`` (Python ``lzma``) and zpaq ``-m5`` (Debian ``zpaq``) on
  little-endian int16 bytes, or int32 where the values need it;
- zstd -19, optionally with a dictionary trained with ``zstandard``.

CLI timings include the process start and the file round trip through a
temporary folder (a few ms), which matters only on short inputs.
"""

from __future__ import annotations

import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from dataclasses import dataclass

import numpy as np


@dataclass
class PeerResult:
    name: str
    n_bytes: int
    enc_s: float
    dec_s: float


_warned: set[str] = set()


def _missing(what: str) -> None:
    if what not in _warned:
        _warned.add(what)
        print(f"[peers] {what} not available: skipped", file=sys.stderr)


def int_width(chans: list[np.ndarray]) -> int:
    """2 when every value fits int16, 4 for int32, 8 otherwise."""
    lo = min((int(c.min()) for c in chans if c.size), default=0)
    hi = max((int(c.max()) for c in chans if c.size), default=0)
    if -2**15 <= lo and hi < 2**15:
        return 2
    if -2**31 <= lo and hi < 2**31:
        return 4
    return 8


def raw_bytes(chans: list[np.ndarray]) -> bytes:
    w = int_width(chans)
    return b"".join(c.astype(f"<i{w}").tobytes() for c in chans)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def pcodec_peer(chans, level: int) -> PeerResult | None:
    try:
        import pcodec
    except ImportError:
        _missing("pcodec (pip install pcodec)")
        return None
    w = int_width(chans)
    arrs = [c.astype(f"int{8 * w}") for c in chans]
    cfg = pcodec.ChunkConfig(compression_level=level)
    blobs, te = _timed(lambda: [pcodec.standalone.simple_compress(a, cfg) for a in arrs])
    back, td = _timed(lambda: [pcodec.standalone.simple_decompress(b) for b in blobs])
    assert all(np.array_equal(b, a) for a, b in zip(arrs, back))
    return PeerResult(f"pcodec {level}", sum(len(b) for b in blobs), te, td)


def xz_peer(chans) -> PeerResult:
    raw = raw_bytes(chans)
    blob, te = _timed(lambda: lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
    back, td = _timed(lambda: lzma.decompress(blob))
    assert back == raw
    return PeerResult("xz -9e", len(blob), te, td)


def zstd_peer(chans, dictionary=None) -> PeerResult | None:
    import zstandard
    raw = raw_bytes(chans)
    kw = {"dict_data": dictionary} if dictionary is not None else {}
    c = zstandard.ZstdCompressor(level=19, **kw)
    d = zstandard.ZstdDecompressor(**kw)
    blob, te = _timed(lambda: c.compress(raw))
    back, td = _timed(lambda: d.decompress(blob))
    assert back == raw
    return PeerResult("zstd -19" + (" +dict" if dictionary is not None else ""), len(blob), te, td)


def _run(cmd, cwd=None):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)


def zpaq_peer(chans) -> PeerResult | None:
    if shutil.which("zpaq") is None:
        _missing("zpaq CLI (apt install zpaq)")
        return None
    raw = raw_bytes(chans)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "x.bin")
        arc = os.path.join(d, "x.zpaq")
        with open(src, "wb") as f:
            f.write(raw)
        _, te = _timed(lambda: _run(["zpaq", "a", arc, "x.bin", "-m5"], cwd=d))
        size = os.path.getsize(arc)
        os.remove(src)
        _, td = _timed(lambda: _run(["zpaq", "x", arc], cwd=d))
        with open(src, "rb") as f:
            assert f.read() == raw
    return PeerResult("zpaq -m5", size, te, td)


def _write_wav(path, x, rate, width):
    with wave.open(path, "wb") as wf:
        wf.setnchannels(1)
        wf.setsampwidth(width)
        wf.setframerate(max(8000, min(int(rate), 655350)))  # a low rate upsets flac -8
        if width == 3:
            b = x.astype("<i4").tobytes()
            b = b"".join(b[i:i + 3] for i in range(0, len(b), 4))
            wf.writeframes(b)
        else:
            wf.writeframes(x.astype(f"<i{width}").tobytes())


def _audio_peer(chans, rate, name, tool, enc_args, dec_cmd, ext) -> PeerResult | None:
    if shutil.which(tool) is None:
        _missing(f"{tool} CLI (apt install {tool})")
        return None
    w = int_width(chans)
    if w == 8:
        print(f"[peers] {name}: values beyond 32 bits, skipped", file=sys.stderr)
        return None
    total, te, td = 0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as d:
        for i, c in enumerate(chans):
            if c.size == 0:
                continue
            src, dst, back = (os.path.join(d, f"{i}.wav"), os.path.join(d, f"{i}.{ext}"),
                              os.path.join(d, f"{i}b.wav"))
            _write_wav(src, c, rate, w)
            _, t = _timed(lambda: _run([tool, *enc_args, src, "-o", dst]))
            te += t
            total += os.path.getsize(dst)
            _, t = _timed(lambda: _run([*dec_cmd, dst, "-o", back]))
            td += t
            with wave.open(back) as wf:
                got = np.frombuffer(wf.readframes(wf.getnframes()), f"<i{w}")
            assert np.array_equal(got, c), name
    return PeerResult(name, total, te, td)


def wavpack_peer(chans, rate) -> PeerResult | None:
    if shutil.which("wvunpack") is None:
        _missing("wvunpack")
        return None
    return _audio_peer(chans, rate, "WavPack -hhx6", "wavpack", ["-hhx6", "-q", "-y"],
                       ["wvunpack", "-q", "-y"], "wv")


def flac_peer(chans, rate) -> PeerResult | None:
    return _audio_peer(chans, rate, "FLAC -8", "flac", ["-8", "--no-padding", "-s", "-f"],
                       ["flac", "-d", "-s", "-f"], "flac")


def all_peers(chans, rate, *, slow: bool = True) -> list[PeerResult]:
    """Every peer on these channels (zpaq and WavPack/FLAC CLIs only when ``slow``)."""
    out = [pcodec_peer(chans, 8), pcodec_peer(chans, 12), xz_peer(chans), zstd_peer(chans)]
    if slow:
        out += [wavpack_peer(chans, rate), flac_peer(chans, rate), zpaq_peer(chans)]
    return [r for r in out if r is not None]
