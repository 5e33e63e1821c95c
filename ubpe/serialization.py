"""Saved files: versioned JSON documents, the format error, and atomic writes.

Every file ubpe writes goes through :func:`atomic_write_bytes` (a temporary
file, then a rename), so a failure never leaves a partial output."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


class FormatError(ValueError):
    """A file is not of the expected format, or of a version we cannot read."""


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename.

    Readers never see a partial file, and an error leaves ``path`` untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                               dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_document(path, format_name: str, version: int, body: dict) -> None:
    """Save ``body`` as JSON with ``format`` and ``version`` fields first."""
    doc = {"format": format_name, "version": version, **body}
    atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode())


def check_document(doc, format_name: str, version: int, source="document") -> dict:
    """Check a loaded document's format name and version.

    Raises
    ------
    FormatError
        If ``doc`` is not a JSON object of format ``format_name`` with a
        version from 1 to ``version`` (a newer version needs a newer ubpe).
    """
    if not isinstance(doc, dict) or "format" not in doc:
        raise FormatError(f"{source}: not a ubpe file (no 'format' field)")
    if doc["format"] != format_name:
        raise FormatError(f"{source}: format is {doc['format']!r}, expected {format_name!r}")
    v = doc.get("version")
    if not isinstance(v, int) or v < 1:
        raise FormatError(f"{source}: invalid version {v!r}")
    if v > version:
        raise FormatError(f"{source}: {format_name} version {v} is newer than this "
                          f"ubpe reads (up to {version}); upgrade ubpe")
    return doc


def read_document(path, format_name: str, version: int) -> dict:
    """Load a JSON document written by :func:`write_document` and check it."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}: not valid JSON ({e})") from None
    return check_document(doc, format_name, version, source=str(path))
