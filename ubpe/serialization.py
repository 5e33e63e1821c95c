"""Saved files: versioned, checksummed JSON documents, load limits, the format error, atomic writes.

Every file ubpe writes goes through :func:`atomic_write_bytes` (a temporary
file, then a rename), so a failure never leaves a partial output.

Every JSON document written by :func:`write_document` (tokenizers, signal
models) carries two fields computed over its *canonical form*, the JSON text
with sorted keys, no whitespace, ASCII escapes and numbers as Python writes
them (shortest round-trip repr; in the spirit of RFC 8785, JSON
Canonicalization Scheme, without its ECMAScript number rules):

``content_id``
    ``"sha256:<hex>"`` over the document without ``version``, ``checksum`` and
    ``content_id``: it names the content, so two files holding the same model
    have the same id whatever their version or layout.
``checksum``
    ``"sha256:<hex>"`` over the document without ``checksum`` (so it covers
    the version and the content id as well).

Loading recomputes both and raises :class:`FormatError` on a mismatch.
Documents of version 1 (written before checksums) are still read.

Loading is bounded: the document size, the alphabet and the total length of
the token expansions are checked against :class:`Limits` before anything is
allocated (see :func:`limits` to change them for a block of code).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import errno
import glob
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# what a reader or loader may raise on bad input (the command line makes each one line on
# stderr and exit status 1, never a traceback; signals.parallel reports it as the file's error)
BAD_INPUT = (ValueError, TypeError, OSError, LookupError, ArithmeticError, MemoryError,
             RecursionError, EOFError, zlib.error)


class FormatError(ValueError):
    """A file is not of the expected format, or of a version we cannot read.

    Also raised for a document whose checksum does not match its content, and
    for one that declares sizes above the :class:`Limits` in force.
    """


@dataclasses.dataclass(frozen=True)
class Limits:
    """Fixed bounds checked before a loader allocates.

    Parameters
    ----------
    max_document_bytes : int, default 64 MiB
        Largest JSON document read; a larger file is refused unread.
    max_alphabet : int, default 2**24
        Largest tokenizer alphabet loaded, and the most quantizer bins of a
        signal model's channels together. A tokenizer's lookup tables take
        about 28 bytes per alphabet symbol and merged token, a quantizer
        about 24 bytes a bin, so the default bounds each to about 0.5 GB.
    max_expansion : int, default 2**26
        Largest total length, in alphabet symbols, of the expansions of all
        tokens (the alphabet included): decode keeps them in one int32 table
        (at most 256 MiB by default). A crafted chain of merges can declare
        exponentially long tokens; this refuses it before allocating.
    """

    max_document_bytes: int = 64 * 2**20
    max_alphabet: int = 2**24
    max_expansion: int = 2**26


# Limits is frozen, so sharing one default instance is safe
_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar("ubpe_limits", default=Limits())  # noqa: B039


def get_limits() -> Limits:
    """The :class:`Limits` in force (the defaults unless inside :func:`limits`)."""
    return _LIMITS.get()


@contextlib.contextmanager
def limits(**changes: int) -> Iterator[Limits]:
    """Change some :class:`Limits` for the code inside a ``with`` block.

    Parameters
    ----------
    **changes : int
        Fields of :class:`Limits` to replace, e.g. ``max_alphabet=2**26``.

    Yields
    ------
    Limits
        The limits in force inside the block.

    Raises
    ------
    TypeError
        On a name that is not a field of :class:`Limits`.
    """
    new = dataclasses.replace(_LIMITS.get(), **changes)
    token = _LIMITS.set(new)
    try:
        yield new
    finally:
        _LIMITS.reset(token)


# ------------------------------------------------------------------ writing
_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Readers never see a partial file, and an error leaves ``path`` untouched.
    The file is created with the permissions ``open()`` would give it
    (``0o666`` less the user's umask), not the ``0o600`` of a temporary file.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace.
    data : bytes
        Its whole content.

    Raises
    ------
    OSError
        If the folder is not writable or the disk is full; ``path`` is then
        unchanged and no temporary file is left.
    """
    with atomic_writer(path) as f:
        f.write(data)


def is_special_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (its link followed) exists and is neither a regular file nor a folder:
    a character or block device, a FIFO or a socket."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[Any]:
    """A binary file object whose content replaces ``path`` when the block ends without error.

    The temporary file lies in the folder of ``path`` (so the rename is
    atomic) and gets the umask's permissions; on an exception it is removed
    and ``path`` is left as it was. Where ``path`` is a device, a FIFO or a
    socket (``/dev/null``, a named pipe), it is written in place instead, as
    xz and zstd write there: a rename would put a regular file in its place.

    Parameters
    ----------
    path : str or os.PathLike

    Yields
    ------
    file object
        Open for binary writing.
    """
    path = Path(path)
    if is_special_file(path):
        try:
            with open(path, "wb") as special:
                yield special
        except OSError as e:
            raise output_error(e, path) from None
        return
    fd, tmp = _temporary_file(path)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise output_error(e, path) from None
        raise
    finally:
        TEMPORARY_FILES.discard(tmp)


def _temporary_file(path: Path) -> tuple[int, str]:
    """A new hidden ``.NAME.XXXXXXXX.tmp`` beside ``path``, open for writing (mode 0600, as
    ``tempfile.mkstemp`` makes it): ``(fd, name)``. The name is in ``TEMPORARY_FILES`` before
    the file exists, so that a signal at any moment finds it (with mkstemp, one between the
    file's creation and its registration left it behind: seen in CI)."""
    import secrets
    folder = path.parent if str(path.parent) else Path(".")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = str(folder / f".{_temporary_stem(path)}.{secrets.token_hex(4)}.tmp")
        TEMPORARY_FILES.add(tmp)
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            TEMPORARY_FILES.discard(tmp)
        except OSError as e:  # (named after the output, as xz does: not the hidden file)
            TEMPORARY_FILES.discard(tmp)
            raise type(e)(e.errno, e.strerror, str(path)) from None
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it", str(path))


def output_error(e: OSError, path: Path | str) -> OSError:
    """A write's error (a full disk, a file too large, a read-only file system) named after
    the output, as xz names it; ``e`` itself otherwise (it has a name, or is not a write's)."""
    if e.filename is None and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS):
        return type(e)(e.errno, e.strerror, str(path))
    return e


# the temporary files of the atomic writes in progress: what a signal handler removes before the
# process ends (ubpe.cli: SIGINT, SIGTERM, SIGHUP)
TEMPORARY_FILES: set[str] = set()
# outputs that other processes (dask workers) are writing for this one: the handler removes
# their temporary files too (``.NAME.*.tmp`` beside each, as atomic_writer names them)
PENDING_OUTPUTS: set[str] = set()
# folders of this process's temporary copies (standard input read into a file)
TEMPORARY_FOLDERS: set[str] = set()


@contextlib.contextmanager
def temporary_folder() -> Iterator[str]:
    """A temporary folder (``tempfile.TemporaryDirectory``) that :func:`remove_temporary_files`
    also removes: a signal handler that ends the process at once leaves no copy behind."""
    with tempfile.TemporaryDirectory(prefix="ubpe-") as tmp:
        TEMPORARY_FOLDERS.add(tmp)
        try:
            yield tmp
        finally:
            TEMPORARY_FOLDERS.discard(tmp)


def _temporary_stem(path: Path) -> str:
    """The part of an output's name that its temporary file's name holds: all of it, but for
    the last 16 bytes of a name as long as a file system allows (255: ``.NAME.XXXXXXXX.tmp``
    would not fit), cut at a character."""
    name = path.name
    while len(name.encode("utf-8", "surrogateescape")) > 255 - 16:
        name = name[:-1]
    return name


def remove_temporary_files() -> None:
    """Remove the temporary files of the writes in progress, this process's and its workers'
    (:data:`TEMPORARY_FILES`, :data:`PENDING_OUTPUTS`); errors are ignored."""
    for out in list(PENDING_OUTPUTS):
        p = Path(out)
        TEMPORARY_FILES.update(str(t) for t in p.parent.glob(
            f".{glob.escape(_temporary_stem(p))}.*.tmp"))
    for tmp in list(TEMPORARY_FILES):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        TEMPORARY_FILES.discard(tmp)
    for folder in list(TEMPORARY_FOLDERS):
        shutil.rmtree(folder, ignore_errors=True)
        TEMPORARY_FOLDERS.discard(folder)


# ------------------------------------------------------------ checksums
_UNSEALED = ("checksum",)
_NOT_CONTENT = ("version", "checksum", "content_id")


def plain_params(params: dict) -> dict:
    """Hyperparameters as JSON takes them: numpy scalars (a grid search's ``np.int64(300)``,
    which ``__init__`` accepts) become Python numbers."""
    return {k: v.item() if hasattr(v, "item") and hasattr(v, "dtype") else v
            for k, v in params.items()}


def canonical_json(obj: Any) -> bytes:
    """The canonical JSON text of ``obj``: sorted keys, no spaces, ASCII escapes.

    Numbers are written as Python's ``json`` writes them (integers exactly,
    floats as the shortest repr that reads back to the same value), so a
    document read with ``json.loads`` gives back the same bytes.

    Returns
    -------
    bytes
        ASCII text.
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=True).encode("ascii")


def _sha256(doc: dict, drop) -> str:
    body = {k: v for k, v in doc.items() if k not in drop}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def _strip_versions(obj):
    """``obj`` with the version fields of every nested document (a dict with ``format``) removed."""
    if isinstance(obj, dict):
        drop = _NOT_CONTENT if "format" in obj else ()
        return {k: _strip_versions(v) for k, v in obj.items() if k not in drop}
    if isinstance(obj, list):
        return [_strip_versions(v) for v in obj]
    return obj


def content_id(doc: dict) -> str:
    """The content id of a document: ``"sha256:"`` and 64 hex digits.

    SHA-256 (FIPS 180-4) of the canonical JSON of ``doc`` without the
    ``version``, ``checksum`` and ``content_id`` fields of the document and
    of the documents nested in it (dicts with a ``format`` field): the same
    model has the same id in any document version or layout.
    """
    return _sha256(_strip_versions(doc), _NOT_CONTENT)


def seal(doc: dict) -> dict:
    """A copy of ``doc`` with its ``content_id`` and ``checksum`` fields (see the module notes)."""
    out = {k: v for k, v in doc.items() if k not in ("checksum", "content_id")}
    out["content_id"] = content_id(out)
    out["checksum"] = _sha256(out, _UNSEALED)
    return out


def verify(doc: dict, source: str = "document") -> None:
    """Check a document's ``checksum`` and ``content_id`` where it has them.

    Raises
    ------
    FormatError
        If a field is not a string, or does not match the content (the file
        was damaged or edited).
    """
    for field, expected in (("checksum", lambda: _sha256(doc, _UNSEALED)),
                            ("content_id", lambda: content_id(doc))):
        if field not in doc:
            continue
        if not isinstance(doc[field], str):
            raise FormatError(f"{source}: {field} is not a string")
        if doc[field] != expected():
            raise FormatError(f"{source}: {field} mismatch: the file was damaged or edited "
                              f"after it was written")


def write_document(path: str | os.PathLike[str], format_name: str, version: int, body: dict) -> None:
    """Save ``body`` as JSON with ``format`` and ``version`` first, and its checksum.

    Parameters
    ----------
    path : str or os.PathLike
        Written atomically (see :func:`atomic_write_bytes`).
    format_name : str
    version : int
    body : dict
        JSON-ready content; must not hold ``checksum`` or ``content_id``.
    """
    doc = seal({"format": format_name, "version": version, **body})
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())


def check_document(doc: Any, format_name: str, version: int, source: str = "document", *,
                   checksum_since: int | None = None) -> dict:
    """Check a loaded document's format name, version and (where present) checksum.

    Parameters
    ----------
    doc : object
        What ``json.loads`` gave.
    format_name : str
    version : int
        Newest version this reader knows.
    source : str
        Named in error messages (a path, or "path: section").
    checksum_since : int or None
        Documents of this version or later must carry a checksum (a file
        read from disk); None accepts a document without one (a nested
        document, covered by its parent's checksum, or one built in memory).

    Raises
    ------
    FormatError
        If ``doc`` is not a JSON object of format ``format_name`` with a
        version from 1 to ``version`` (a newer version needs a newer ubpe),
        if its checksum or content id does not match, or if it lacks a
        required checksum.
    """
    if not isinstance(doc, dict) or "format" not in doc:
        raise FormatError(f"{source}: not a ubpe file (no 'format' field)")
    if doc["format"] != format_name:
        raise FormatError(f"{source}: format is {doc['format']!r}, expected {format_name!r}")
    v = doc.get("version")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise FormatError(f"{source}: invalid version {v!r}")
    if v > version:
        raise FormatError(f"{source}: {format_name} version {v} is newer than this "
                          f"ubpe reads (up to {version}); upgrade ubpe")
    if checksum_since is not None and v >= checksum_since and "checksum" not in doc:
        raise FormatError(f"{source}: {format_name} version {v} must carry a checksum; "
                          f"it has none")
    verify(doc, source)
    return doc


def read_json(path: str | os.PathLike[str], source: str | None = None) -> Any:
    """Read a JSON file of at most ``get_limits().max_document_bytes`` bytes.

    Raises
    ------
    FormatError
        If the file is larger than the limit (it is not read), is not
        UTF-8 JSON, or nests too deeply.
    OSError
        If it cannot be read.
    """
    source = str(path) if source is None else source
    cap = get_limits().max_document_bytes
    chunks, size = [], 0
    with open(path, "rb") as f:
        # in pieces: f.read(cap + 1) would allocate the whole cap up front
        while size <= cap and (piece := f.read(min(2**20, cap + 1 - size))):
            chunks.append(piece)
            size += len(piece)
    data = b"".join(chunks)
    return parse_json(data, source)


def parse_json(data: bytes, source: str = "document") -> Any:
    """Parse a JSON document held in memory, within ``get_limits().max_document_bytes``.

    Raises
    ------
    FormatError
        If ``data`` is larger than the limit, is not UTF-8 JSON, or nests
        too deeply.
    """
    cap = get_limits().max_document_bytes
    if len(data) > cap:
        raise FormatError(f"{source}: larger than {cap:,} bytes, the limit for a JSON "
                          f"document (see ubpe.serialization.limits)")
    try:
        return json.loads(data)
    except RecursionError:
        raise FormatError(f"{source}: not valid JSON (nested too deeply)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, int digits limit
        raise FormatError(f"{source}: not valid JSON ({e})") from None


def read_document(path: str | os.PathLike[str], format_name: str, version: int, *,
                  checksum_since: int = 2) -> dict:
    """Load a JSON document written by :func:`write_document` and check it.

    Parameters
    ----------
    path : str or os.PathLike
    format_name : str
    version : int
        Newest version this reader knows.
    checksum_since : int, default 2
        First version whose files must carry a checksum (version 1 files,
        written before checksums, are read without one).

    Returns
    -------
    dict
        The document, ``checksum`` and ``content_id`` included.

    Raises
    ------
    FormatError
        See :func:`read_json` and :func:`check_document`.
    """
    return check_document(read_json(path), format_name, version, source=str(path),
                          checksum_since=checksum_since)
