"""Packets: short recordings coded against a trained model, each decodable on its own.

Byte layout: ``docs/format.md``, section 4. A packet holds ``n`` samples of
each of the model's channels; its overhead is a tag byte, the sample count
(varint), the payload lengths of all channels but the last (varints) and a
16-bit check, the low half of a CRC-32 seeded with the model's content id,
so that a packet decoded against another model fails its check.

The functions here take the fitted model's per-channel
:class:`signals.channel.ChannelModel` list and its 16-byte id; the public
entry points are the methods of :class:`signals.SignalModel`
(``compress_packet``, ``decompress_packet``, ...).
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import IO

import numpy as np

from ubpe._jit import njit

from .channel import (
    ChannelModel,
    _decode_batch,
    _decode_joined,
    _encode_batch,
    _put_varint,
    _starts,
)
from .container import MAX_SAMPLES, PACKET_STREAM_MAGIC, VERSION, SignalFormatError, read_varint, varint

TAG = 0xB0
MAX_CHANNELS = 16
STREAM_BATCH = 1024  # packets a packet stream codes or decodes at a time
STREAM_SAMPLES = 1 << 20  # samples (all channels, as declared) a stream decodes at a time


def decode_packet(packet: bytes, models: list[ChannelModel], model_id: bytes,
                  model_name: str = "") -> list[np.ndarray]:
    """One packet of :func:`encode_columns` decoded: the int64 channels.

    Raises
    ------
    SignalFormatError
        If the check fails (a corrupted packet, or one made with another
        model: the message names the model tried), or the packet is
        inconsistent with the model.
    """
    n, payloads = _split(bytes(packet), len(models), model_id, model_name)
    out = []
    for payload, m in zip(payloads, models):  # (the batch decoder's kernels: one call each)
        x, _, bad = _decode_batch([payload], [n], m)
        if bad:  # (named by the general reader, where the size it declares can fit)
            raise SignalFormatError(f"packet payload: {bad[0]}")
        out.append(x)
    return out


def encode_columns(columns: list[np.ndarray], offsets: np.ndarray, models: list[ChannelModel],
                   model_id: bytes, *, level: int = 5) -> list[bytes]:
    """Packets ``j`` of ``columns[c][offsets[j]:offsets[j+1]]`` for every channel ``c``.

    Parameters
    ----------
    columns : list of 1-D int64 arrays, one per model channel
        Each channel's samples, all packets joined (as :meth:`SignalModel.compress_packets`
        maps them: one call per channel).
    offsets : 1-D int64 array
        Packet bounds, the same for every channel.
    models : list of ChannelModel
    model_id : bytes
        The model's 16-byte content id.
    level : int
        Passed to :func:`signals.channel.encode_packets`.

    Raises
    ------
    ValueError
        If the channel count does not match the model.
    """
    if len(columns) != len(models):
        raise ValueError(f"the model has {len(models)} channels, the packets {len(columns)}")
    if not 1 <= len(models) <= MAX_CHANNELS:
        raise ValueError(f"a packet holds 1 to {MAX_CHANNELS} channels, got {len(models)}")
    per_channel = [_encode_batch(np.ascontiguousarray(x, np.int64), offsets, m, level)
                   for x, m in zip(columns, models)]
    # every packet's tag, count, lengths and payloads in one kernel, then each one's check
    n_ch = len(per_channel)
    poff = _starts([len(p) for pc in per_channel for p in pc])  # (channel by channel)
    pay = np.frombuffer(b"".join(itertools.chain.from_iterable(per_channel)), np.uint8)
    out, ends = _frame_all(pay, poff, n_ch, offsets)
    blob = out.tobytes()
    mv = memoryview(blob)
    seed = zlib.crc32(model_id)
    e = ends.tolist()
    return [blob[a:b - 2] + _CHECK(zlib.crc32(mv[a:b - 2], seed) & 0xFFFF)
            for a, b in zip(e, e[1:])]


_CHECK = struct.Struct("<H").pack


@njit(cache=True)
def _frame_all(pay, poff, n_ch, offsets):
    """The packets of :func:`encode_columns` but for their checks (two bytes left at the end of
    each, to fill): channel ``c``'s payload of packet ``j`` is ``pay[poff[i]:poff[i + 1]]``,
    ``i = c * n_packets + j`` (uint8; int64, shape ``(n_ch * n_packets + 1,)``), packet ``j``
    holds ``offsets[j + 1] - offsets[j]`` samples. Returns the packets joined (uint8) and where
    each starts (int64, ``(n_packets + 1,)``)."""
    n_p = offsets.shape[0] - 1
    out = np.empty(n_p * (3 + 10 * n_ch) + poff[n_ch * n_p] - poff[0], np.uint8)
    ends = np.zeros(n_p + 1, np.int64)
    pos = 0
    for j in range(n_p):
        out[pos] = np.uint8(TAG | (n_ch - 1))
        pos = _put_varint(out, pos + 1, offsets[j + 1] - offsets[j])
        for c in range(n_ch - 1):
            pos = _put_varint(out, pos, poff[c * n_p + j + 1] - poff[c * n_p + j])
        for c in range(n_ch):
            a, b = poff[c * n_p + j], poff[c * n_p + j + 1]
            out[pos:pos + b - a] = pay[a:b]
            pos += b - a
        pos += 2  # (the check)
        ends[j + 1] = pos
    return out[:pos], ends


def _frame(payloads: list[bytes], n: int, model_id: bytes, seed: int | None = None) -> bytes:
    """The packet of ``payloads`` (the readable twin of :func:`_frame_all`, which the tests
    compare with it; also how they forge packets); ``seed``: ``zlib.crc32(model_id)``, when
    already known."""
    body = b"".join([bytes([TAG | (len(payloads) - 1)]), varint(n),
                     *[varint(len(p)) for p in payloads[:-1]], *payloads])
    crc = zlib.crc32(body, zlib.crc32(model_id) if seed is None else seed)
    return body + (crc & 0xFFFF).to_bytes(2, "little")


def decode_many(coded: list[bytes], models: list[ChannelModel], model_id: bytes,
                model_name: str = "") -> list[list[np.ndarray] | SignalFormatError]:
    """:func:`decode_packet` for many packets; a damaged packet gives its error in its place."""
    columns, offsets, errors = decode_columns(coded, models, model_id, model_name)
    out: list[list[np.ndarray] | SignalFormatError] = []
    for j in range(len(coded)):
        err = errors.get(j)
        out.append(err if err is not None else
                   [x[offsets[j]:offsets[j + 1]] for x in columns])
    return out


def decode_columns(coded: list[bytes], models: list[ChannelModel], model_id: bytes,
                   model_name: str = "", *, first: int = 0
                   ) -> tuple[list[np.ndarray], np.ndarray, dict[int, SignalFormatError]]:
    """The packets' channels, each joined over the packets: ``(columns, offsets, errors)``.

    Packet ``j``'s channel ``c`` is ``columns[c][offsets[j]:offsets[j+1]]``; a damaged packet
    has its error in ``errors`` (by index; the message starts with "packet j:", numbered from
    ``first``: the index of ``coded[0]`` in a stream) and no samples in the columns.

    The packets are checked (:func:`zlib.crc32`) one by one and cut into their payloads in one
    kernel (:func:`_frames`, as :func:`_split` cuts them; :func:`_split` names the fault of a
    packet that it refuses); each channel's payloads are then decoded in one call
    (:func:`signals.channel._decode_joined`).
    """
    errors: dict[int, SignalFormatError] = {}
    blob = b"".join([p if type(p) is bytes else bytes(p) for p in coded])
    starts = _starts(map(len, coded))
    ends = starts.tolist()
    seed = zlib.crc32(model_id)
    mv = memoryview(blob)
    n_ch = len(models)
    skip = np.zeros(len(coded), np.bool_)
    for j in [j for j, (a, b) in enumerate(zip(ends, ends[1:]))  # each packet's check
              if b - a < 4 or zlib.crc32(mv[a:b - 2], seed) & 0xFFFF != blob[b - 2] | blob[b - 1] << 8]:
        errors[j] = SignalFormatError(f"packet {first + j}: " + _split_error(
            blob[ends[j]:ends[j + 1]], n_ch, model_id, model_name, seed))
        skip[j] = True
    status, idx, ns_good, cbuf, coff = _frames(np.frombuffer(blob, np.uint8), starts, n_ch, skip)
    if idx.size + len(errors) < len(coded):
        for j in np.flatnonzero(status == 1).tolist():  # (the general cut names the fault)
            errors[j] = SignalFormatError(f"packet {first + j}: " + _split_error(
                blob[ends[j]:ends[j + 1]], n_ch, model_id, model_name, seed))
    cbuf.flags.writeable = False  # (the type that the kernels are compiled for)
    decoded = []
    for c, m in enumerate(models):
        x, off, bad = _decode_joined(cbuf, coff[c], ns_good, m)
        for k, why in bad.items():
            j = int(idx[k])
            if j not in errors:
                errors[j] = SignalFormatError(f"packet {first + j}: damaged payload of channel "
                                              f"{c} ({why})")
        decoded.append((x, off))
    return _columns(decoded, list(zip(idx.tolist(), ns_good.tolist())), len(coded), errors)


def _columns(decoded: list[tuple[np.ndarray, np.ndarray]], frames: list[tuple[int, int]],
             n_packets: int, errors: dict[int, SignalFormatError]
             ) -> tuple[list[np.ndarray], np.ndarray, dict[int, SignalFormatError]]:
    """:func:`decode_columns`' result from each channel's decoded ``(x, off)`` of the packets
    ``frames`` (index, sample count) that were cut."""
    if not errors and len(frames) == n_packets:  # (every packet cut and decoded in full)
        return [x for x, _ in decoded], decoded[0][1] if decoded else _starts([]), errors
    # a packet's room: its n where every channel decoded it in full, else none (a declared
    # count is never allocated before a payload was found to hold it)
    ns = np.zeros(n_packets, np.int64)
    for j, n in frames:
        if j not in errors:
            ns[j] = n
    offsets = np.zeros(n_packets + 1, np.int64)
    np.cumsum(ns, out=offsets[1:])
    columns = []
    for x, off in decoded:
        if off[-1] != offsets[-1]:  # a damaged packet had room here: move the others
            full = np.zeros(int(offsets[-1]), np.int64)
            for k, (j, _) in enumerate(frames):
                if ns[j]:
                    full[offsets[j]:offsets[j + 1]] = x[off[k]:off[k + 1]]
            x = full
        columns.append(x)
    return columns, offsets, errors


@njit(cache=True)
def _frames(buf, starts, n_ch, skip):
    """Each packet ``buf[starts[j]:starts[j+1]]`` (uint8; int64 bounds) not in ``skip`` (bool;
    its check failed) cut as :func:`_split` cuts it, but for its check: ``(status, cut, n,
    cbuf, coff)``. Status (uint8) 0: cut; 1: refused (:func:`_split` names the fault); 2:
    skipped. ``cut`` (int64): the packets of status 0,
    ``n`` (int64) their sample counts; channel ``c``'s payload of packet ``cut[k]`` is
    ``cbuf[coff[c, k]:coff[c, k + 1]]`` (uint8; int64, shape ``(n_ch, cut.size + 1)``)."""
    n_p = starts.shape[0] - 1
    status = np.zeros(n_p, np.uint8)
    ns = np.zeros(n_p, np.int64)
    lo = np.zeros((n_ch, n_p), np.int64)
    hi = np.zeros((n_ch, n_p), np.int64)
    n_cut = 0
    total = 0
    for j in range(n_p):
        a = starts[j]
        end = starts[j + 1] - 2  # the body's end (the check follows)
        if skip[j]:
            status[j] = 2
            continue
        if end - a < 2 or (buf[a] & 0xF0) != TAG or (buf[a] & 0x0F) + 1 != n_ch:
            status[j] = 1
            continue
        pos = a + 1
        bad = False
        for c in range(n_ch):  # the count, then the lengths of all payloads but the last
            v = np.int64(0)  # (as read_varint reads it: up to 10 bytes)
            shift = 0
            while True:
                if pos >= end or shift > 63:
                    bad = True
                    break
                byte = buf[pos]
                pos += 1
                if shift <= 49:
                    v |= np.int64(byte & 0x7F) << shift
                elif byte & 0x7F:
                    bad = True  # a value of 2**56 or more: past every bound below
                shift += 7
                if byte < 0x80:
                    break
            if bad:
                break
            if c == 0:
                if v > MAX_SAMPLES:
                    bad = True
                    break
                ns[j] = v
            else:
                if v > end - a:
                    bad = True
                    break
                hi[c - 1, j] = v  # (a length, for now)
        if bad:
            status[j] = 1
            continue
        for c in range(n_ch - 1):
            length = hi[c, j]
            lo[c, j] = pos
            hi[c, j] = pos + length
            pos += length
        if end - pos < 1:
            status[j] = 1
            continue
        lo[n_ch - 1, j] = pos
        hi[n_ch - 1, j] = end
        n_cut += 1
        total += end - a
    cut = np.empty(n_cut, np.int64)
    k = 0
    for j in range(n_p):
        if status[j] == 0:
            cut[k] = j
            k += 1
    cbuf = np.empty(total, np.uint8)
    coff = np.zeros((n_ch, n_cut + 1), np.int64)
    pos = 0
    for c in range(n_ch):
        coff[c, 0] = pos
        for k in range(n_cut):
            j = cut[k]
            size = hi[c, j] - lo[c, j]
            cbuf[pos:pos + size] = buf[lo[c, j]:hi[c, j]]
            pos += size
            coff[c, k + 1] = pos
    return status, cut, ns[cut], cbuf[:pos], coff


def _split_error(packet: bytes, n_models: int, model_id: bytes, model_name: str, seed: int) -> str:
    """The message of :func:`_split`'s error on a packet that fails its first tests."""
    try:
        _split(packet, n_models, model_id, model_name, seed)
    except SignalFormatError as e:
        return str(e)
    raise AssertionError("unreachable: the packet passed its check")


def _split(packet: bytes, n_models: int, model_id: bytes, model_name: str,
           seed: int | None = None) -> tuple[int, list[bytes]]:
    """Check a packet and cut it into ``(n, payloads)``; ``seed``: ``zlib.crc32(model_id)``,
    where already known."""
    size = len(packet)
    if size < 4:
        raise SignalFormatError(f"truncated packet ({size} bytes)")
    crc = zlib.crc32(memoryview(packet)[:-2], zlib.crc32(model_id) if seed is None else seed)
    if crc & 0xFFFF != packet[-2] | packet[-1] << 8:
        raise SignalFormatError(f"packet check failed: the packet is corrupted, or was made with "
                                f"another model than {model_name or model_id.hex()}")
    tag = packet[0]
    if tag & 0xF0 != TAG:
        raise SignalFormatError(f"not a ubpe packet (tag {tag:#04x})")
    n_ch = (tag & 0x0F) + 1
    if n_ch != n_models:
        raise SignalFormatError(f"the packet holds {n_ch} channels, the model {n_models}")
    if n_ch == 1 and size >= 5 and packet[1] < 0x80:  # one channel, a 1-byte count
        return packet[1], [packet[2:-2]]
    if n_ch == 1 and size >= 6 and packet[2] < 0x80:  # one channel, a 2-byte count
        return (packet[1] & 0x7F) | packet[2] << 7, [packet[3:-2]]
    body = packet[:-2]
    n, pos = read_varint(body, 1, "packet sample count")
    if n > MAX_SAMPLES:
        raise SignalFormatError(f"the packet declares {n:,} samples")
    lengths = []
    for _ in range(n_ch - 1):
        size, pos = read_varint(body, pos, "packet payload length")
        lengths.append(size)
    lengths.append(len(body) - pos - sum(lengths))
    if lengths[-1] < 1:
        raise SignalFormatError("packet payload lengths exceed the packet")
    payloads = []
    for size in lengths:
        payloads.append(body[pos:pos + size])
        pos += size
    return n, payloads


def stream_batches(packets: Iterable[bytes], n_channels: int) -> Iterator[list[bytes]]:
    """``packets`` (those of :func:`read_packet_stream`) in lists to decode at once: at most
    ``STREAM_BATCH`` packets, and at most ``STREAM_SAMPLES`` samples over their ``n_channels``
    channels as the packets declare them (unchecked: a list ends where it would pass the bound,
    or after a packet that declares more), so that memory stays bounded. An error of
    ``packets`` (a stream cut short) is raised once the packets before it were yielded."""
    batch: list[bytes] = []
    samples = 0
    it = iter(packets)
    err = None
    while True:
        try:
            p = next(it)
        except StopIteration:
            break
        except SignalFormatError as e:
            err = e
            break
        n = declared_samples(p) * n_channels
        if batch and samples + n > STREAM_SAMPLES:
            yield batch
            batch, samples = [], 0
        batch.append(p)
        samples += n
        if len(batch) >= STREAM_BATCH or samples >= STREAM_SAMPLES:
            yield batch
            batch, samples = [], 0
    if batch:
        yield batch
    if err is not None:
        raise err


def declared_samples(packet: bytes) -> int:
    """The sample count that a packet declares after its tag (unchecked; 0 where unreadable)."""
    try:
        return read_varint(packet, 1, "packet sample count")[0]
    except SignalFormatError:
        return 0


def write_packet_stream(packets: Iterable[bytes], fileobj: IO[bytes], model_id: bytes) -> int:
    """A packet stream (docs/format.md, section 4): magic, model id, packets, end marker.

    Returns
    -------
    int
        The number of packets written.
    """
    fileobj.write(PACKET_STREAM_MAGIC + struct.pack("<H", VERSION) + model_id)
    k = 0
    for p in packets:
        if not p:
            raise ValueError("an empty packet cannot be written (length 0 is the end marker)")
        fileobj.write(varint(len(p)) + p)
        k += 1
    count = struct.pack("<Q", k)
    fileobj.write(varint(0) + count + struct.pack("<I", zlib.crc32(count, zlib.crc32(model_id))))
    return k


def read_packet_stream(fileobj: IO[bytes], model_id: bytes) -> Iterator[bytes]:
    """The packets of a packet stream, in order, checked against ``model_id``.

    Streams written one after the other (``cat a b``) are read as one, as
    xz and zstd read concatenated files; anything else after an end marker
    is an error.

    Yields
    ------
    bytes
        Each packet (decode it with :func:`decode_packet`; a corrupted one
        fails alone).

    Raises
    ------
    SignalFormatError
        On a foreign stream, a stream made with another model (names both
        ids), one that ends before its end marker, or bytes after an end
        marker that do not start another stream.
    """
    n_head = len(PACKET_STREAM_MAGIC) + 2 + 16
    k = 0  # packets read, over every stream
    for n_stream in itertools.count():
        head = fileobj.read(n_head)
        if n_stream and not head:
            return
        if len(head) < n_head and PACKET_STREAM_MAGIC.startswith(head[:len(PACKET_STREAM_MAGIC)]):
            raise SignalFormatError(f"truncated packet stream: its header ends after "
                                    f"{len(head)} of {n_head} bytes" + (
                                        f" (after {k} packets)" if n_stream else ""))
        if len(head) < n_head or not head.startswith(PACKET_STREAM_MAGIC):
            raise SignalFormatError(
                "not a ubpe packet stream (bad magic bytes)" if not n_stream else
                f"bytes after the end marker of the packet stream (after {k} packets) that do "
                f"not start another stream")
        (version,) = struct.unpack_from("<H", head, len(PACKET_STREAM_MAGIC))
        if version != VERSION:
            raise SignalFormatError(f"packet stream version {version} is not one this ubpe reads")
        stream_id = head[-16:]
        if stream_id != model_id:
            raise SignalFormatError(
                f"the packet stream was made with model {stream_id.hex()}, not with the model "
                f"given ({model_id.hex()})" if not n_stream else
                f"the packet stream that follows the first {k} packets was made with model "
                f"{stream_id.hex()}, the one before with {model_id.hex()}")
        first = k
        while True:
            size = _read_stream_varint(fileobj, k)
            if size == 0:
                tail = fileobj.read(12)
                if len(tail) < 12 or struct.unpack("<I", tail[8:])[0] != zlib.crc32(
                        tail[:8], zlib.crc32(model_id)):
                    raise SignalFormatError("truncated or corrupted end marker of the packet "
                                            "stream")
                if struct.unpack("<Q", tail[:8])[0] != k - first:
                    raise SignalFormatError(f"the end marker declares "
                                            f"{struct.unpack('<Q', tail[:8])[0]} packets, "
                                            f"{k - first} were read")
                break
            if size > 1 << 30:
                raise SignalFormatError(f"packet {k} declares {size:,} bytes")
            p = fileobj.read(size)
            if len(p) < size:
                raise SignalFormatError(f"truncated packet stream: packet {k} has {len(p)} of "
                                        f"{size} bytes")
            yield p
            k += 1


def _read_stream_varint(fileobj: IO[bytes], k: int) -> int:
    v = shift = 0
    while True:
        b = fileobj.read(1)
        if not b:
            raise SignalFormatError(f"truncated packet stream: it ends after {k} packets, "
                                    f"before its end marker")
        v |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return v
        shift += 7
        if shift > 63:
            raise SignalFormatError(f"packet {k}: length varint longer than 10 bytes")
