"""Large payloads in a Django storage, content-addressed.

Invariant protected: a blob's name is the sha256 of its bytes (the bytes
after the codecs, so an encrypted payload's blob is ciphertext), so two
writes of one value share one blob, and a read verifies the hash: a blob
that is missing or whose bytes do not match its name is refused, never
decoded. Nothing here deletes a blob that a row still refers to: deleting
is ``delete_unreferenced``'s caller's job once it checked the references.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.files.base import ContentFile

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
    return digest


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


__all__ = ["PREFIX", "blob_path", "delete", "get", "listed", "put", "storage_for"]
