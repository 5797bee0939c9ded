"""Large payloads in a Django storage, content-addressed.

Invariant protected: a blob's name is the sha256 of its bytes (the bytes
after the codecs, so an encrypted payload's blob is ciphertext), so two
writes of one value share one blob, and a read verifies the hash: a blob
that is missing or whose bytes do not match its name is refused, never
decoded. Nothing here deletes a blob that a row still refers to: deleting
is ``delete_unreferenced``'s caller's job once it checked the references.

A blob is written *before* the transaction of the row that refers to it
commits (while the statement's parameters are built), never after: a
write after COMMIT could be cut off by a crash, leaving a committed row
that refers to nothing -- a lost payload. Written before, the worst case is
a blob no row refers to (the transaction rolled back, a fenced batch failed
its gate): an orphan, which costs storage and is reclaimed by ``weft blobs
check --delete-orphans`` once older than its grace (``engine.payload_rows``).
So that the grace counts from the latest write, ``put`` of a blob that
already exists refreshes its modification time where the storage is a
local directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any

from django.core.files.base import ContentFile
from django.utils import timezone

#: Where blobs live inside the storage.
PREFIX = "weft-payloads/"


def storage_for(alias: str) -> Any:
    from django.core.files.storage import storages

    return storages[alias]


def blob_path(digest: str) -> str:
    return f"{PREFIX}{digest}"


def put(alias: str, data: bytes) -> str:
    """Store ``data`` (idempotent); its sha256 hex digest, which names it."""
    digest = hashlib.sha256(data).hexdigest()
    storage = storage_for(alias)
    path = blob_path(digest)
    if not storage.exists(path):
        storage.save(path, ContentFile(data))
    else:
        _touch(storage, path)
    return digest


def _touch(storage: Any, path: str) -> None:
    """Refresh the modification time of ``path`` (local storages only)."""
    try:
        local = storage.path(path)
    except NotImplementedError:
        return
    with contextlib.suppress(OSError):
        os.utime(local)


def age_seconds(alias: str, digest: str) -> float | None:
    """Seconds since blob ``digest`` was last written (``None``: the storage
    cannot tell, or the blob is gone)."""
    try:
        modified = storage_for(alias).get_modified_time(blob_path(digest))
    except (NotImplementedError, OSError):
        return None
    return (timezone.now() - modified).total_seconds()


def get(alias: str, digest: str) -> bytes:
    """The bytes of blob ``digest`` (``ValueError`` naming it when missing or altered)."""
    storage = storage_for(alias)
    path = blob_path(digest)
    try:
        with storage.open(path, "rb") as handle:
            data: bytes = handle.read()
    except (FileNotFoundError, OSError) as exc:
        raise ValueError(f"blob {path} is missing from storage {alias!r}") from exc
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"blob {path} in storage {alias!r} does not match its sha256 name")
    return data


def delete(alias: str, digest: str) -> None:
    storage_for(alias).delete(blob_path(digest))


def listed(alias: str) -> list[str]:
    """Every blob digest in the storage."""
    storage = storage_for(alias)
    try:
        _dirs, files = storage.listdir(PREFIX.rstrip("/"))
    except (FileNotFoundError, OSError, NotImplementedError):
        return []
    return sorted(files)


__all__ = ["PREFIX", "age_seconds", "blob_path", "delete", "get", "listed", "put", "storage_for"]
