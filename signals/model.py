"""Trained signal models (``ubpe build``): the codec pipeline with its stages fitted.

A :class:`SignalModel` holds two fitted parts, both trained on one corpus:

* the **codec** part: per channel, an exact integer mapping and a
  :class:`signals.channel.ChannelModel` (predictor and static entropy
  tables). Files and packets compressed with the model store its content id
  instead of tables: :meth:`SignalModel.compress`, :meth:`compress_packet`;
* the **tokenizer** part, for ML: per-channel quantizers feeding one UBPE
  vocabulary (:meth:`encode` / :meth:`decode`).
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

import numpy as np
from numpy.typing import ArrayLike

from ubpe import NotFittedError, Tokenizer, split_documents
from ubpe.serialization import (
    FormatError,
    check_document,
    content_id,
    get_limits,
    plain_params,
    read_document,
    write_document,
)

from . import packets as _packets
from .arraylike import warn_if_transposed
from .channel import ChannelModel, decode_channel, encode_channel, fit_channel_model
from .codec import DEFAULT_LEVEL, compress
from .container import SignalFormatError
from .quantize import QUANTIZERS, UniformQuantizer, quantizer_from_dict

FORMAT = "ubpe.signal-model"
# 2: files carry a checksum and a content id (ubpe.serialization); version 1 is still read
# 3: a "codec" part (per-channel mapping and ChannelModel); versions 1-2 load without it
VERSION = 3
VALIDATION = 0.3   # share of each channel held out to decide whether the model pays
PACKET = 1024      # a whole channel above 4 packets of this size may take its own tables
PACKET_SIZE = 256  # the packet length the codec part is tuned for (and decided on), by default
STREAM_BATCH = _packets.STREAM_BATCH  # packets a packet stream codes at a time


def _check_packet_size(size: Any) -> int:
    """``size`` if it is a positive integer (a packet length in samples), else ValueError."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"packet_size must be a positive integer, got {size!r}")
    return size


def _check_errors(errors: str) -> None:
    if errors not in ("raise", "keep"):
        raise ValueError(f"errors must be 'raise' or 'keep', got {errors!r}")


class SignalModel:
    """Quantize each channel, then tokenize all channels with one UBPE vocabulary.

    Parameters
    ----------
    n_levels : int, default 1024
        Quantizer levels per channel, which is the tokenizer's alphabet size.
    vocab_size : int, default 4096
        Tokenizer vocabulary size, alphabet included.
    n_candidates : int, default 8
        Merges considered per training round (see :class:`ubpe.Tokenizer`).
    min_frequency : int, default 2
        Minimum pair count for a merge.
    doc_length : int or None, default None
        Samples per training document; None makes each channel one document.
    progress : bool or None
        Progress bar while training (None: only on a terminal).
    codec : bool, default True
        Also fit the codec part (a ChannelModel per channel that can be
        mapped to integers exactly).
    level : int, default 5
        Level of the payloads coded with the model.
    packet_size : int, default 256
        The packet length, in samples, that the codec part's channel models
        are tuned for (``packet_size`` of
        :func:`signals.channel.fit_channel_model`: which stages pay, such as
        the adaptive cascade, depends on it): that of the packets you will
        compress (``compress_packets``, ``ubpe compress --packet-size``).
        Whether a channel keeps its model is decided on held-out packets of
        this length.

    Attributes
    ----------
    channel_names_ : list of str
    quantizers_ : list of UniformQuantizer, one per channel
    tokenizer_ : ubpe.Tokenizer
    codec_ : dict
        Channel name -> ``{"dtype", "map", "model" (ChannelModel)}`` (and
        ``"csv_scale"``, see :meth:`fit`) for the
        channels the codec part keeps (those where it lowered the bits of
        the validation split).
    codec_report_ : list of dict
        Per channel: ``stages`` (each stage of the channel model, what was
        kept and its validation bits per sample, beside the runner-up; see
        ``signals.channel.ChannelModel.stages_``), ``name``, ``bits_own`` and ``bits_model`` (bits per
        sample of the held-out 30% in packets of ``packet_size`` samples,
        each coded on its own, as a self-contained container, or against
        the model, as a packet: framing and check included), ``kept``, and
        ``reason``.
    """

    def __init__(self, n_levels: int = 1024, vocab_size: int = 4096, *, n_candidates: int = 8,
                 min_frequency: int = 2, doc_length: int | None = None, progress=None,
                 codec: bool = True, level: int = DEFAULT_LEVEL, packet_size: int = PACKET_SIZE):
        self.n_levels = n_levels
        self.vocab_size = vocab_size
        self.n_candidates = n_candidates
        self.min_frequency = min_frequency
        self.doc_length = doc_length
        self.progress = progress
        self.codec = codec
        self.level = level
        self.packet_size = packet_size

    def fit(self, channels: Sequence[ArrayLike], names: Sequence[str] | None = None, *,
            codec_channels: Sequence[tuple[str, ArrayLike]] | None = None,
            codec_scales: dict[str, int] | None = None) -> SignalModel:
        """Fit one quantizer per channel and the tokenizer on all of them, and the codec part.

        Parameters
        ----------
        channels : sequence of array-like, each of shape (n_samples_i,)
            The channels, of any lengths (int or float, finite).
        names : sequence of str, optional
            One per entry of ``channels``. Entries that share a name are
            recordings of one channel (the same column of several files): one
            quantizer is fitted on all of them, and each is tokenized on its
            own (no merge spans two recordings).
        codec_channels : sequence of (str, array-like), optional
            ``(name, values)`` to fit the codec part on, when they differ from
            ``channels`` (``ubpe build`` passes a CSV file's exact integer
            columns, as :func:`signals.compress_file` will code them). Several
            entries may share a name (recordings of one channel).
        codec_scales : dict, optional
            ``{name: digits after the decimal point}`` of codec channels that
            are a CSV's decimal columns at one scale in every file (``ubpe
            build`` passes them): kept with the channel (``"csv_scale"``), so
            that a packet stream of a file whose column has other decimals is
            refused (its integers would mean other numbers).

        Raises
        ------
        ValueError
            If there are no samples, a value is non-finite, a parameter
            is out of range (``vocab_size < n_levels``, ``doc_length < 2``),
            or the channels' quantizers hold more bins together than a model
            may (``Limits.max_alphabet``, checked again when it is loaded).
        """
        if isinstance(channels, np.ndarray):
            warn_if_transposed(channels.shape)
        arrays = [np.asarray(c) for c in channels]
        if not arrays or sum(c.size for c in arrays) == 0:
            raise ValueError("no samples to train on")
        if self.doc_length is not None and self.doc_length < 2:
            raise ValueError(f"doc_length must be at least 2 samples, got {self.doc_length}")
        _check_packet_size(self.packet_size)
        self.tokenizer_ = Tokenizer(self.n_levels, self.vocab_size,
                                    n_candidates=self.n_candidates,
                                    min_frequency=self.min_frequency, progress=self.progress)
        given = list(names) if names is not None else [f"ch{i}" for i in range(len(arrays))]
        if len(given) != len(arrays):
            raise ValueError(f"{len(given)} names for {len(arrays)} channels")
        recordings: dict[str, list[np.ndarray]] = {}
        for name, c in zip(given, arrays):
            if c.size == 0:
                raise ValueError(f"channel {name!r} is empty")
            recordings.setdefault(str(name), []).append(c)
        self.channel_names_ = list(recordings)
        self.quantizers_ = []
        docs = []
        for name, cs in recordings.items():
            try:
                q = UniformQuantizer(self.n_levels).fit(cs[0] if len(cs) == 1 else np.concatenate(cs))
            except ValueError as e:
                raise ValueError(f"channel {name!r}: {e}") from None
            self.quantizers_.append(q)
            for c in cs:
                docs.extend(split_documents(q.encode(c), self.doc_length))
        bins, most = sum(int(q.n_codes_[0]) for q in self.quantizers_), get_limits().max_alphabet
        if bins > most:  # (what load would refuse: a model is saved only where it loads)
            raise ValueError(f"the channels' quantizers hold {bins:,} bins together, more than "
                             f"the {most:,} a model may hold (ubpe.serialization.Limits."
                             f"max_alphabet): use fewer levels or channels")
        self.tokenizer_.fit(docs)
        self.codec_: dict[str, dict] = {}
        self.codec_report_: list[dict] = []
        if self.codec:
            groups: dict[str, list[np.ndarray]] = {}
            # (each array under its own name: channel_names_ holds a repeated name once)
            pairs = zip([str(n) for n in given], arrays) if codec_channels is None else \
                [(str(n), np.asarray(c)) for n, c in codec_channels]
            for name, c in pairs:
                groups.setdefault(name, []).append(c)
            for name, cs in groups.items():
                self._fit_codec(name, cs)
                if name in self.codec_ and codec_scales and name in codec_scales:
                    self.codec_[name]["csv_scale"] = int(codec_scales[name])
        self._fitted_params = plain_params(self.get_params())  # (to_dict's until the next fit)
        self._id: str | None = None
        return self

    # ------------------------------------------------------------ codec part
    def _fit_codec(self, name: str, chans: list[np.ndarray]) -> None:
        """Fit one channel's codec model; keep it where it lowers the held-out bits."""
        dtype = chans[0].dtype
        mapping = _integer_mapping(chans)
        report: dict = {"name": name, "bits_own": None, "bits_model": None, "kept": False}
        self.codec_report_.append(report)
        if mapping is None:
            report["reason"] = "not integers at a fixed decimal scale"
            return
        mapped = [_apply_mapping(c, mapping) for c in chans]
        ints = [i for i in mapped if i is not None]
        if len(ints) < len(mapped):
            report["reason"] = "not integers at a fixed decimal scale"
            return
        cuts = [int(x.size * (1 - VALIDATION)) for x in ints]
        train = [x[:k] for x, k in zip(ints, cuts) if k > 0]
        held = [x[k:] for x, k in zip(ints, cuts)]
        size = self.packet_size
        packets = [h[i:i + size] for h in held for i in range(0, h.size, size)]
        packets = [p for p in packets if p.size]
        if not train or not packets:
            report["reason"] = "too few samples to validate"
            return
        trial = fit_channel_model(train, packet_size=self.packet_size)
        n = sum(p.size for p in packets)
        # what a packet costs either way: a self-contained container (as signals.compress
        # writes one), or a packet against the model, its framing and check included
        own = sum(len(compress(p, level=self.level)) for p in packets)
        with_model = sum(len(_packets._frame([encode_channel(p, level=self.level, model=trial)],
                                             p.size, b"")) for p in packets)
        report.update(bits_own=8 * own / n, bits_model=8 * with_model / n, stages=trial.stages_)
        if with_model >= own:
            report["reason"] = "the model's tables did not beat per-packet tables"
            return
        final = fit_channel_model(ints, packet_size=self.packet_size)
        report.update(kept=True, reason="lower bits on the held-out 30%", stages=final.stages_)
        self.codec_[name] = {"dtype": dtype.str, "map": mapping, "model": final}

    def has_codec(self, name: str, x: np.ndarray | None = None) -> bool:
        """Whether the codec part codes channel ``name`` (and values ``x``, when given)."""
        if name not in getattr(self, "codec_", {}):
            return False
        if x is None:
            return True
        entry = self.codec_[name]
        return np.asarray(x).dtype.str == entry["dtype"] and \
            _apply_mapping(np.asarray(x), entry["map"]) is not None

    def map_channel(self, name: str, x: np.ndarray) -> tuple[np.ndarray, dict]:
        """Channel ``name``'s values as int64 under the model's fixed mapping.

        Raises
        ------
        ValueError
            If a value does not map exactly (e.g. more decimals than the
            model's scale) or the dtype differs from the model's.
        """
        entry = self.codec_[name]
        if np.asarray(x).dtype.str != entry["dtype"]:
            raise ValueError(f"channel {name!r}: dtype {np.asarray(x).dtype}, the model was "
                             f"trained on {entry['dtype']}")
        ints = _apply_mapping(np.asarray(x), entry["map"])
        if ints is None:
            raise ValueError(f"channel {name!r}: {_unmapped(np.asarray(x), entry['map'])}; the "
                             f"model's packets code only such values (a container, without "
                             f"packets, codes any)")
        return ints, {"kind": "model", "dtype": entry["dtype"]}

    def unmap_channel(self, name: str, ints: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`map_channel`."""
        entry = self.codec_[name]
        return _undo_mapping(ints, entry["map"], np.dtype(entry["dtype"]))

    def encode_channel(self, name: str, ints: np.ndarray, *, level: int | None = None) -> bytes:
        """One payload: against the model's tables or the channel's own, whichever is smaller."""
        lv = self.level if level is None else level
        with_model = encode_channel(ints, level=lv, model=self.codec_[name]["model"])
        if ints.size > 4 * PACKET:
            own = encode_channel(ints, level=lv)
            if len(own) < len(with_model):
                return own
        return with_model

    def decode_channel(self, name: str, payload: bytes, n: int) -> np.ndarray:
        """Inverse of :meth:`encode_channel`."""
        return decode_channel(payload, n, model=self.codec_[name]["model"])

    def _codec_models(self) -> tuple[list[str], list[ChannelModel]]:
        self._check_fitted()
        names = list(self.codec_)
        if not names:
            raise ValueError("this model has no codec part (no channel kept one); compress "
                             "without a model")
        return names, [self.codec_[n]["model"] for n in names]

    def model_id(self) -> bytes:
        """The first 16 bytes of the content id, as stored in packets and streams."""
        return bytes.fromhex(self.content_id().split(":")[-1][:32])

    def compress(self, x: Any, **options: Any) -> bytes:
        """:func:`signals.compress` with this model (channels matched by name)."""
        from .codec import compress
        return compress(x, model=self, **options)

    def decompress(self, data: bytes) -> Any:
        """:func:`signals.decompress` with this model."""
        from .codec import decompress
        return decompress(data, model=self)

    def compress_packet(self, x: ArrayLike) -> bytes:
        """One packet (``docs/format.md``, section 4), decodable on its own with this model.

        Parameters
        ----------
        x : array-like, shape (n,) or (n_channels, n), or a list of 1-D arrays
            The samples of the codec part's channels, in the model's order (a
            list keeps channels of different dtypes apart: an array would
            promote them to one).

        Raises
        ------
        ValueError
            If the shape or a channel's values do not fit the model.

        Notes
        -----
        The same bytes as :meth:`compress_packets` gives for this packet alone
        (its compiled loops, for one packet). In a batch, a long packet may
        code smaller: see :func:`signals.channel.encode_packets`.
        """
        return self.compress_packets([x])[0]

    def decompress_packet(self, packet: bytes) -> np.ndarray | list[np.ndarray]:
        """Inverse of :meth:`compress_packet`: shape (n,) for one channel, else (n_channels, n);
        a list of 1-D arrays where the channels' dtypes differ.

        Raises
        ------
        SignalFormatError
            If the packet is corrupted or was made with another model.
        """
        names, models = self._codec_models()
        ints = _packets.decode_packet(packet, models, self.model_id(), self.content_id())
        out = [self.unmap_channel(n, i) for n, i in zip(names, ints)]
        return out[0] if len(out) == 1 else out if len({o.dtype for o in out}) > 1 else np.stack(out)

    def compress_packets(self, xs: Iterable[ArrayLike]) -> list[bytes]:
        """:meth:`compress_packet` for many packets: a list of arrays in, a list of bytes out.

        Each channel of all the packets is coded in one compiled loop, so the
        per-packet Python cost stays small.
        """
        names, models = self._codec_models()
        cols: list[list[np.ndarray]] = [[] for _ in names]
        ns = []
        one = len(names) == 1
        for x in xs:
            if isinstance(x, (list, tuple)) and not all(np.ndim(c) == 0 for c in x):
                chans = [np.asarray(c) for c in x]  # (channels of their own dtypes: not stacked)
                if any(c.ndim != 1 for c in chans):
                    raise ValueError("a packet given as a list holds one 1-D array a channel")
            else:
                arr = np.asarray(x)
                if one and arr.ndim == 1:
                    cols[0].append(arr)
                    ns.append(arr.size)
                    continue
                chans = [arr] if arr.ndim == 1 else list(arr)
            if len(chans) != len(names):
                raise ValueError(f"the model codes {len(names)} channels, a packet has "
                                 f"{len(chans)}")
            if len({c.size for c in chans}) != 1:
                raise ValueError("the channels of a packet must have one length")
            ns.append(chans[0].size)
            for col, c in zip(cols, chans):
                col.append(c)
        if not ns:
            return []
        offsets = np.zeros(len(ns) + 1, np.int64)
        np.cumsum(ns, out=offsets[1:])
        columns = [self._map_column(n, col) for n, col in zip(names, cols)]
        return _packets.encode_columns(columns, offsets, models, self.model_id(), level=self.level)

    def _map_column(self, name: str, parts: list[np.ndarray]) -> np.ndarray:
        """:meth:`map_channel` of all the packets of a channel at once, joined."""
        dtype = self.codec_[name]["dtype"]
        if all(p.dtype.str == dtype for p in parts):
            ints = _apply_mapping(np.concatenate(parts), self.codec_[name]["map"])
            if ints is not None:
                return ints
        for p in parts:  # the first packet that does not map raises
            self.map_channel(name, p)
        raise AssertionError("unreachable: every packet maps, but not all of them at once")

    def decompress_packets(self, packets: Iterable[bytes], *, errors: str = "raise") -> list:
        """:meth:`decompress_packet` for many packets.

        Parameters
        ----------
        packets : list of bytes
        errors : {"raise", "keep"}
            "raise": the first damaged packet raises; "keep": its
            :class:`SignalFormatError` takes its place in the list, and the
            other packets still decode.

        Raises
        ------
        ValueError
            If ``errors`` is neither.
        """
        _check_errors(errors)
        return self._decoded(list(packets), errors)

    def _decoded(self, coded: list[bytes], errors: str = "raise", first: int = 0) -> list:
        """:meth:`decompress_packets` of ``coded``, the packets numbered from ``first`` in
        the errors' messages."""
        names, models = self._codec_models()
        columns, off, errs = _packets.decode_columns(coded, models, self.model_id(),
                                                     self.content_id(), first=first)
        if errs and errors == "raise":
            raise errs[min(errs)]  # its message names the packet
        vals = [self.unmap_channel(n, x) for n, x in zip(names, columns)]  # one call a channel
        ns = np.diff(off)
        mixed = len({v.dtype for v in vals}) > 1  # (then each packet is a list of its channels)
        if len(vals) > 1 and not errs and not mixed and ns.size and (ns == ns[0]).all():
            # packets of one length: one (packets, channels, n) array, each packet a view of it
            cube = np.empty((ns.size, len(vals), int(ns[0])), vals[0].dtype)
            for c, v in enumerate(vals):
                cube[:, c, :] = v.reshape(ns.size, -1)
            return list(cube)
        ends = off.tolist()
        if len(vals) == 1 and not errs:
            return [vals[0][a:b] for a, b in zip(ends, ends[1:])]
        out: list = []
        for k, (a, b) in enumerate(zip(ends, ends[1:])):
            if k in errs:
                out.append(errs[k])
            elif len(vals) == 1:
                out.append(vals[0][a:b])
            elif mixed:
                out.append([v[a:b] for v in vals])
            else:
                out.append(np.stack([v[a:b] for v in vals]))
        return out

    def write_packet_stream(self, xs: Iterable[ArrayLike], fileobj: IO[bytes]) -> int:
        """Compress packets into a packet stream with an end marker; returns the count.

        The packets are coded as :meth:`compress_packets` codes them, up to
        ``STREAM_BATCH`` at a time (so memory stays bounded for any count).
        """
        def coded() -> Iterator[bytes]:
            it = iter(xs)
            while batch := list(itertools.islice(it, STREAM_BATCH)):
                yield from self.compress_packets(batch)
        return _packets.write_packet_stream(coded(), fileobj, self.model_id())

    def read_packet_stream(self, fileobj: IO[bytes], *, errors: str = "raise"
                           ) -> Iterator[np.ndarray | SignalFormatError]:
        """Yield the decoded packets of a stream written by :meth:`write_packet_stream`
        (or of several such streams, one after the other).

        A stream made with another model raises at once, naming both ids.
        The packets are decoded as :meth:`decompress_packets` decodes them, in
        batches (``signals.packets.stream_batches``: at most ``STREAM_BATCH``
        packets and ``STREAM_SAMPLES`` samples).

        Parameters
        ----------
        fileobj : binary file
        errors : {"raise", "keep"}
            A corrupted packet (its check fails): "raise" raises when it is
            reached (the message names its index in the stream); "keep" yields
            its :class:`SignalFormatError` in its place and goes on with the
            next packets. Damage to the stream's framing (a packet's length,
            the end marker) raises either way. But a byte deleted from or
            inserted into a packet's body is a failed check at first: the
            lengths read after it are then taken from the wrong bytes, each
            such "packet" failing its check, until one lands on a packet's
            start by chance; the packets after that come out at shifted
            positions, and the end marker's count raises at the end. Where the
            positions matter, use "raise" (the packet stream has no sequence
            numbers).
        """
        _check_errors(errors)
        first = 0
        for batch in _packets.stream_batches(_packets.read_packet_stream(fileobj, self.model_id()),
                                             len(self._codec_models()[0])):
            for x in self._decoded(batch, "keep", first):
                if isinstance(x, SignalFormatError) and errors == "raise":
                    raise x
                yield x
            first += len(batch)

    def encode(self, channels: Sequence[ArrayLike], *, method: str = "merges",
               beam: int = 8) -> list[np.ndarray]:
        """Quantize and tokenize each channel; one int32 token array per channel.

        ``method`` and ``beam`` are passed to :meth:`ubpe.Tokenizer.encode`.
        """
        return [np.concatenate(docs)
                for docs in self.encode_documents(channels, method=method, beam=beam)]

    def encode_documents(self, channels: Sequence[ArrayLike], *, method: str = "merges", top_n: int = 1,
                         beam: int = 8) -> list[list]:
        """Per channel, the encoding of each of its documents (``doc_length`` samples).

        Each entry is what :meth:`ubpe.Tokenizer.encode` returns for that
        document: an array, or with ``top_n > 1`` a list of (array, score).
        """
        self._check_channels(channels)
        out: list[list] = []
        for name, q, c in zip(self.channel_names_, self.quantizers_, channels):
            try:
                codes = q.encode(np.asarray(c))
            except ValueError as e:  # (the quantizer sees one channel: it says 'channel 0')
                msg = str(e)
                raise ValueError(f"channel {name!r}, {msg[len('channel 0, '):]}"
                                 if msg.startswith("channel 0, ") else f"channel {name!r}: {msg}") \
                    from None
            docs = split_documents(codes, self._params()["doc_length"])  # (as fitted)
            if top_n > 1:
                out.append(self.tokenizer_.encode_top_n_batch(docs, top_n, beam=beam))
            else:
                out.append(self.tokenizer_.encode_batch(docs, method=method, beam=beam))
        return out

    def decode(self, token_channels: Sequence[ArrayLike], *,
               max_values: int | None = None) -> list[np.ndarray]:
        """Token arrays back to (quantized) samples, one float64 array per channel.

        ``max_values`` bounds the samples of all channels together (checked before each
        channel's are allocated: see :meth:`ubpe.Tokenizer.decode`).

        Raises
        ------
        ValueError
            On a token id outside the vocabulary, or more than ``max_values`` samples (names
            the channel).
        """
        self._check_channels(token_channels)
        out: list[np.ndarray] = []
        left = max_values
        for name, q, t in zip(self.channel_names_, self.quantizers_, token_channels):
            try:
                out.append(q.decode(self.tokenizer_.decode(t, max_length=left)))
            except (TypeError, ValueError) as e:
                raise ValueError(f"channel {name!r}: {e}") from None
            left = None if left is None else left - out[-1].size
        return out

    def _check_fitted(self) -> None:
        if not hasattr(self, "quantizers_"):
            raise NotFittedError("this SignalModel is not fitted yet; call fit() or load()")

    def _check_channels(self, channels):
        self._check_fitted()
        if len(channels) != len(self.quantizers_):
            raise ValueError(f"expected {len(self.quantizers_)} channels, got {len(channels)}")

    def get_params(self, deep: bool = True) -> dict:
        """Hyperparameters, as given to ``__init__`` (scikit-learn's ``get_params``, so that
        ``sklearn.base.clone`` works; ``deep`` is accepted: there are no nested estimators)."""
        return {"n_levels": self.n_levels, "vocab_size": self.vocab_size,
                "n_candidates": self.n_candidates, "min_frequency": self.min_frequency,
                "doc_length": self.doc_length, "progress": self.progress, "codec": self.codec,
                "level": self.level, "packet_size": self.packet_size}

    def set_params(self, **params: Any) -> SignalModel:
        """Set hyperparameters (scikit-learn's ``set_params``); they apply at the next
        :meth:`fit`. Returns self.

        Raises
        ------
        ValueError
            On a name that is not an ``__init__`` parameter.
        """
        known = self.get_params()
        for k in params:
            if k not in known:
                raise ValueError(f"unknown parameter {k!r} for SignalModel; known: "
                                 f"{', '.join(known)}")
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        default = SignalModel()
        changed = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items()
                            if v != getattr(default, k))
        return f"SignalModel({changed})"

    def to_dict(self) -> dict:
        """The fitted model as a JSON-ready document (what :meth:`save` writes, unsealed)."""
        self._check_fitted()
        fitted = self._params()
        params = {k: v for k, v in fitted.items()
                  if k not in ("codec", "level", "packet_size", "progress")}
        return {"format": FORMAT, "version": VERSION, "params": params,
                "channels": [{"name": n, "quantizer": q.to_dict()}
                             for n, q in zip(self.channel_names_, self.quantizers_)],
                "tokenizer": self.tokenizer_.to_dict(), **self._codec_dict()}

    def _codec_dict(self) -> dict:
        """The codec part of the document (absent for a model without one, as in version 1-2)."""
        if not getattr(self, "codec_report_", None):
            return {}
        # (the packet size only where it is not the default, so that a model fitted before it
        # was a parameter keeps its document, and so its content id)
        fitted = self._params()
        size = {} if fitted["packet_size"] == PACKET_SIZE else \
            {"codec_packet_size": fitted["packet_size"]}
        # (copies: a change to the document leaves the model, and its content id, as it is)
        return {"codec": {n: {"dtype": e["dtype"], "map": dict(e["map"]),
                              "model": e["model"].get_config(),
                              **({"csv_scale": e["csv_scale"]} if "csv_scale" in e else {})}
                          for n, e in self.codec_.items()},
                "codec_level": fitted["level"], **size,
                "codec_report": copy.deepcopy(self.codec_report_)}

    def _params(self) -> dict:
        """The hyperparameters the model was fitted (or loaded) with: ``set_params`` since
        changes neither what :meth:`save` writes nor the content id, until the next fit."""
        return getattr(self, "_fitted_params", None) or plain_params(self.get_params())

    def content_id(self) -> str:
        """The model's content id, ``"sha256:"`` and 64 hex digits.

        The same as the ``content_id`` field of the file :meth:`save` writes
        (see :func:`ubpe.serialization.content_id`): a container or a log can
        name the exact model it was made with.
        """
        if getattr(self, "_id", None) is None:
            self._id = content_id(self.to_dict())
        assert self._id is not None
        return self._id

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the model (quantizers, tokenizer, settings) as one JSON file, atomically.

        The file is a ``ubpe.signal-model`` document of version 2, with a
        checksum and a content id over its canonical content (see
        :mod:`ubpe.serialization`).
        """
        d = self.to_dict()
        write_document(path, d.pop("format"), d.pop("version"), d)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SignalModel:
        """Read a model written by :meth:`save` (format version 1 or 2).

        Sizes are checked before allocation: the quantizers' level counts
        against ``n_levels``, the tokenizer against the document and the
        limits of :func:`ubpe.serialization.get_limits`.

        Raises
        ------
        FormatError
            If the file is not a signal model, is of a newer version, fails
            its checksum (version 2), or holds inconsistent or oversized
            content (names the file and the reason).
        """
        return cls.from_dict(read_document(path, FORMAT, VERSION), source=str(path))

    @classmethod
    def from_dict(cls, doc: dict, source: str = "signal model") -> SignalModel:
        """Rebuild a fitted model from :meth:`to_dict` output; see :meth:`load`."""
        check_document(doc, FORMAT, VERSION, source)
        codec_keys = sorted({"codec", "codec_level", "codec_packet_size", "codec_report"} & set(doc))
        if doc["version"] < 3 and codec_keys:  # (a version 1 file has no checksum: no edit of
            # the codec part may pass as one)
            raise FormatError(f"{source}: a version-{doc['version']} signal model has no codec "
                              f"part, but this one holds {', '.join(map(repr, codec_keys))}")
        try:
            params = doc["params"]
            if not isinstance(params, dict):
                raise TypeError("'params' is not an object")
            m = cls(**params, progress=False)
            n_levels = m.n_levels
            if not isinstance(n_levels, int) or isinstance(n_levels, bool) or n_levels < 2:
                raise ValueError(f"n_levels must be an integer >= 2, got {n_levels!r}")
            if m.doc_length is not None and (not isinstance(m.doc_length, int)
                                             or m.doc_length < 2):
                raise ValueError(f"doc_length must be null or an integer >= 2, got {m.doc_length!r}")
            channels = doc["channels"]
            if not isinstance(channels, list) or not channels:
                raise ValueError("'channels' must be a non-empty list")
            names, bins, most = [], 0, get_limits().max_alphabet
            for i, ch in enumerate(channels):
                if not isinstance(ch, dict) or not isinstance(ch.get("name"), str):
                    raise ValueError(f"channel {i} has no name")
                bins += _check_quantizer(ch.get("quantizer"), n_levels, f"channel {ch['name']!r}")
                if bins > most:  # (about 24 bytes a bin once built: the tokenizer's bound)
                    raise ValueError(f"the quantizers of channels 0..{i} declare {bins:,} bins, "
                                     f"more than the {most:,} a model may hold")
                names.append(ch["name"])
            if len(set(names)) != len(names):
                raise ValueError("two channels have the same name")
            tok_doc = doc["tokenizer"]
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"{source}: malformed signal model ({type(e).__name__}: {e})") \
                from None
        tok = Tokenizer.from_dict(tok_doc, source=f"{source}: tokenizer")
        if tok.alphabet_size != n_levels:
            raise FormatError(f"{source}: the tokenizer's alphabet ({tok.alphabet_size:,}) is not "
                              f"n_levels ({n_levels:,})")
        try:
            m.quantizers_ = [quantizer_from_dict(ch["quantizer"]) for ch in channels]
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            raise FormatError(f"{source}: malformed signal model ({e})") from None
        m.channel_names_ = names
        m.tokenizer_ = tok
        m.codec_, m.codec_report_ = {}, []
        # a codec entry is keyed by a column's name: a channel's, or, where the channels of
        # several files are named "file:column", the part after a colon of one of them
        columns = set(names) | {n[i + 1:] for n in names for i, ch in enumerate(n) if ch == ":"}
        try:
            codec = doc.get("codec") or {}
            if not isinstance(codec, dict):
                raise TypeError(f"'codec' must be an object, got {type(codec).__name__}")
            for name, entry in codec.items():
                if name not in columns or not isinstance(entry, dict):
                    raise ValueError(f"codec entry {name!r} names no channel")
                if np.dtype(entry["dtype"]).kind not in "biuf":
                    raise ValueError(f"codec entry {name!r}: dtype {entry['dtype']!r} is not "
                                     f"numeric")
                _check_mapping(entry["map"])
                m.codec_[name] = {"dtype": entry["dtype"], "map": entry["map"],
                                  "model": ChannelModel.from_config(entry["model"])}
                if "csv_scale" in entry:
                    scale = entry["csv_scale"]
                    if isinstance(scale, bool) or not isinstance(scale, int) or \
                            not 0 <= scale <= 30:
                        raise ValueError(f"codec entry {name!r}: csv_scale {scale!r} is not an "
                                         f"integer in 0..30")
                    m.codec_[name]["csv_scale"] = scale
            m.codec_report_ = _checked_report(doc.get("codec_report") or [])
            if "codec_level" in doc:
                m.level = int(doc["codec_level"])
                if not 0 <= m.level <= 9:
                    raise ValueError(f"codec level {m.level} is not in 0..9")
            if "codec_packet_size" in doc:
                m.packet_size = _check_packet_size(doc["codec_packet_size"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise FormatError(f"{source}: malformed codec part ({e})") from None
        m._fitted_params = plain_params(m.get_params())
        m._id = None
        return m


def _checked_report(report: Any) -> list[dict]:
    """A saved ``codec_report_``, checked as far as ``ubpe inspect`` reads it (each entry: a
    channel's name, whether its model was kept, why, and its held-out bits: numbers or null;
    its stage lines are shown as far as they are understood, :func:`stage_lines`).

    Raises ``ValueError`` or ``TypeError`` naming the entry."""
    if not isinstance(report, list):
        raise TypeError(f"'codec_report' must be a list, got {type(report).__name__}")
    for i, r in enumerate(report):
        if not (isinstance(r, dict) and isinstance(r.get("name"), str)
                and isinstance(r.get("kept", False), bool)
                and isinstance(r.get("reason", ""), str)):
            raise ValueError(f"codec report entry {i} is not a channel's report (name, kept, "
                             f"reason)")
        for key in ("bits_own", "bits_model"):
            v = r.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"codec report entry {i}: {key} {v!r} is not a number")
    return list(report)


def _check_quantizer(d, n_levels: int, where: str) -> int:
    """Check a quantizer's dict against ``n_levels`` before it allocates anything; its
    number of bins.

    Raises ``ValueError`` naming the channel.
    """
    if not isinstance(d, dict):
        raise ValueError(f"{where}: no quantizer")
    kind = d.get("kind")
    if kind not in QUANTIZERS:
        raise ValueError(f"{where}: unknown quantizer kind {kind!r}")
    if d.get("n_levels") != n_levels:
        raise ValueError(f"{where}: the quantizer has {d.get('n_levels')!r} levels, "
                         f"the model {n_levels}")
    lossless = d.get("lossless")
    if not (isinstance(lossless, list) and len(lossless) == 1
            and isinstance(lossless[0], bool)):
        raise ValueError(f"{where}: 'lossless' must be one boolean")

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if kind == "uniform":
        rng = d.get("range")
        if not (isinstance(rng, list) and len(rng) == 1 and isinstance(rng[0], list)
                and len(rng[0]) == 3):
            raise ValueError(f"{where}: 'range' must be one [min, max, bins] triple")
        lo, hi, k = rng[0]
        if not (number(lo) and number(hi) and (lo < hi or lo == hi and k == 1)):
            raise ValueError(f"{where}: the range [{lo!r}, {hi!r}] is not two finite numbers, "
                             f"min < max (or min = max with one bin: a constant)")
        if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= n_levels):
            raise ValueError(f"{where}: {k!r} bins, expected 1..{n_levels}")
        return k
    edges, book = d.get("bin_edges"), d.get("codebook")
    if not (isinstance(edges, list) and isinstance(book, list) and len(edges) == len(book) == 1
            and isinstance(edges[0], list) and isinstance(book[0], list)
            and 1 <= len(book[0]) <= n_levels and len(edges[0]) == len(book[0]) + 1):
        raise ValueError(f"{where}: bin edges and codebook must hold k + 1 and k numbers, "
                         f"k in 1..{n_levels}")
    if not all(number(v) for v in edges[0] + book[0]):
        raise ValueError(f"{where}: bin edges and codebook must be finite numbers")
    return len(book[0])


# ---------------------------------------------------------------- fixed mappings of the codec part
def _integer_mapping(chans: list[np.ndarray]) -> dict | None:
    """The fixed mapping to int64 of a channel's training data, or None.

    Integers map as they are (uint64 through its int64 bits); floats map
    at the smallest decimal scale ``s`` (0..9) where every training value is
    exactly ``k / 10**s`` for an integer ``k``. Either is then divided by
    ``step``, the greatest common divisor of the training values (an ECG in
    mV at 0.005 mV resolution has scale 3 and step 5), where they hold at
    least three distinct values (else 1).
    """
    kind = chans[0].dtype.kind
    if any(c.dtype.kind != kind for c in chans):
        return None
    if kind in "iub":
        m: dict | None = {"kind": "int", "step": 1}
    elif kind == "f":
        m = None
        for scale in range(10):
            trial = {"kind": "decimal", "scale": scale, "step": 1}
            if all(_apply_mapping(c, trial) is not None for c in chans):
                m = trial
                break
    else:
        m = None
    if m is None:
        return None
    step, distinct = 0, set[int]()
    for c in chans:
        ints = _apply_mapping(c, m)
        if ints is not None and ints.size and kind != "u":
            step = int(np.gcd.reduce(np.abs(ints[ints != np.iinfo(np.int64).min]), initial=step))
            if len(distinct) < 3:
                distinct.update(np.unique(ints[:4096]).tolist()[:3])
    # a grid only where at least three distinct values show it (a channel constant at 100 in
    # training is not on a grid of 100: its packets of 99 were refused)
    m["step"] = max(step, 1) if step < 2**31 and len(distinct) >= 3 else 1
    return m


def _apply_mapping(x: np.ndarray, m: dict) -> np.ndarray | None:
    step = int(m.get("step", 1))
    if m["kind"] == "int":
        if x.dtype.kind not in "iub":
            return None
        ints = x.view(np.int64) if x.dtype == np.uint64 else x.astype(np.int64)
        if step == 1:
            return ints  # exact as it is: _undo_mapping gives x back
    else:
        if x.dtype.kind != "f" or not np.isfinite(x).all():
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            k = np.round(x.astype(np.float64) * 10.0 ** m["scale"])
        if np.abs(k).max(initial=0) >= 2.0 ** 53:
            return None
        ints = k.astype(np.int64)
    if step > 1:
        if np.any(ints % step):
            return None
        ints = ints // step
    back = _undo_mapping(ints, m, x.dtype)
    if not np.array_equal(back.view(np.uint8), np.ascontiguousarray(x).view(np.uint8)):
        return None  # not bit-exact (e.g. -0.0, or more decimals)
    return ints


def _unmapped(x: np.ndarray, m: dict) -> str:
    """Why :func:`_apply_mapping` refuses ``x`` (1-D): its first sample off the model's grid."""
    step = int(m.get("step", 1))
    if m["kind"] == "int" and x.dtype.kind not in "iub":
        return f"{x.dtype} values, the model's are integers"
    if m["kind"] == "decimal" and x.dtype.kind != "f":
        return f"{x.dtype} values, the model's are decimal floats"
    if m["kind"] == "int":
        off = np.zeros(x.size, bool)
        ints = x.view(np.int64) if x.dtype == np.uint64 else x.astype(np.int64)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            k = np.round(x.astype(np.float64) * 10.0 ** m["scale"])
            off = ~np.isfinite(k) | (np.abs(k) >= 2.0 ** 53)
            ints = np.where(off, 0, k).astype(np.int64)
            back = (ints.astype(np.float64) / 10.0 ** m["scale"]).astype(x.dtype)
        off |= (back.view(np.uint8).reshape(x.size, -1)
                != x.view(np.uint8).reshape(x.size, -1)).any(1)  # (-0.0 too)
    bad = np.flatnonzero(off | (ints % step != 0))
    if not bad.size:
        return f"values that do not map exactly at the model's scale ({m})"
    i, v = int(bad[0]), x[bad[0]].item()
    if off[i]:
        return (f"sample {i} ({v!r}) is not a decimal with at most {m['scale']} decimals"
                + (" (a negative zero)" if v == 0 else "") + ", as every value the model was "
                "built on was")
    unit = step if m["kind"] == "int" else f"{step / 10 ** m['scale']:g}"
    return (f"sample {i} ({v!r}) is not a multiple of {unit}, as every value the model was "
            f"built on was")


def _undo_mapping(ints: np.ndarray, m: dict, dtype: np.dtype) -> np.ndarray:
    step = int(m.get("step", 1))
    if step > 1:
        ints = ints * step
    if m["kind"] == "int":
        return ints.view(np.uint64) if dtype == np.uint64 else ints.astype(dtype)
    return (ints.astype(np.float64) / 10.0 ** m["scale"]).astype(dtype)


def _check_mapping(m) -> None:
    if not isinstance(m, dict) or m.get("kind") not in ("int", "decimal"):
        raise ValueError(f"unknown mapping {m!r}")
    if m["kind"] == "decimal" and not (isinstance(m.get("scale"), int) and 0 <= m["scale"] <= 9):
        raise ValueError(f"bad decimal scale in {m!r}")
    if not (isinstance(m.get("step", 1), int) and 1 <= m.get("step", 1) < 2**31):
        raise ValueError(f"bad step in {m!r}")


def stage_lines(report: dict) -> list[str]:
    """One line per stage decision of a channel's codec report (``codec_report_`` entry):
    what was kept, with its validation bits per sample against the alternative."""
    out = []
    for st in report.get("stages") or []:
        try:
            out.append(f"{st['stage']}: {st['kept']}, {st['bits']:.3f} bits/sample"
                       + (f" (next best, {st['alternative']}: {st['bits_alternative']:.3f})"
                          if "alternative" in st else "")
                       + (f"; kept only where it saves >= {st['min_gain']:g} bits/sample"
                          if "min_gain" in st else ""))
        except (KeyError, TypeError, ValueError):
            continue  # a report written by another version: shown as far as it is understood
    return out
