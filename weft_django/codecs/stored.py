"""The storage boundary: a payload value <-> what its JSON column holds.

Invariant protected: every payload column (``models.fields.PayloadField``)
is written through ``encode_payload`` and read through ``decode_payload``,
so the codecs of ``WEFT["PAYLOAD_CODECS"]`` and the blob storage of
``WEFT["PAYLOAD_STORAGE"]`` apply to every kind of payload or to none. An
encoded payload is an envelope in the same column::

    {"__weft_codec__": ["weft.encrypt"], "text": "<ascii bytes>"}   # or "data": base64
    {"__weft_codec__": ["weft.encrypt"], "blob": "<sha256>", "size": n}

and anything else is a plaintext value written before codecs were on (it
keeps reading). A value that cannot be decoded is never guessed: the read
gives an ``UnreadablePayload`` that carries the stored envelope, writing it
back stores the envelope unchanged (nothing is lost), and ``readable``
raises ``PayloadUnreadable`` naming the run and the position.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from django.utils.module_loading import import_string

from weft_django.codecs import blobs
from weft_django.codecs.protocol import PayloadCodec, PayloadContext
from weft_django.conf import get_settings
from weft_django.errors.payloads import PayloadUnreadable

#: The envelope's marker key (no user payload is a dict with this key: see ``encode_payload``).
MARKER = "__weft_codec__"


class UnreadablePayload:
    """A stored payload that did not decode: the envelope, kept as it was."""

    __slots__ = ("position", "reason", "stored")

    def __init__(self, stored: Any, position: str, reason: str) -> None:
        self.stored = stored
        self.position = position
        self.reason = reason

    def __repr__(self) -> str:
        return f"<unreadable payload at {self.position}: {self.reason}>"


class _Chain:
    """The configured codecs, built once per settings object."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._for: Any = None
        self.codecs: tuple[PayloadCodec, ...] = ()
        self.by_name: dict[str, PayloadCodec] = {}
        self.storage: tuple[str, int] | None = None

    def current(self) -> _Chain:
        settings = get_settings()
        if self._for is not settings:
            with self._lock:
                codecs = tuple(import_string(path)() for path in settings.payload_codecs)
                self.codecs = codecs
                self.by_name = {c.name: c for c in codecs}
                self.storage = (
                    tuple(settings.payload_storage)  # type: ignore[assignment]
                    if settings.payload_storage is not None
                    else None
                )
                self._for = settings
        return self


_chain = _Chain()


def active_codecs() -> tuple[PayloadCodec, ...]:
    return _chain.current().codecs


def is_envelope(stored: Any) -> bool:
    return isinstance(stored, dict) and MARKER in stored


def encode_payload(value: Any, context: PayloadContext) -> Any:
    """What the column stores for ``value`` (``value`` itself when no codec or
    storage applies)."""
    chain = _chain.current()
    if isinstance(value, UnreadablePayload):
        return value.stored
    if not chain.codecs and chain.storage is None and not is_envelope(value):
        return value
    data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    small = chain.storage is not None and len(data) <= chain.storage[1]
    if not chain.codecs and small and not is_envelope(value):
        return value
    for codec in chain.codecs:
        data = codec.encode(data, context)
    return _envelope([c.name for c in chain.codecs], data, chain.storage)


def _envelope(names: list[str], data: bytes, storage: tuple[str, int] | None) -> dict[str, Any]:
    if storage is not None and len(data) > storage[1]:
        return {MARKER: names, "blob": blobs.put(storage[0], data), "size": len(data)}
    if data.isascii():
        return {MARKER: names, "text": data.decode("ascii")}
    return {MARKER: names, "data": base64.b64encode(data).decode("ascii")}


def stored_bytes(stored: dict[str, Any]) -> bytes:
    """The encoded bytes an envelope holds (read from the blob storage when
    it refers to a blob); ``ValueError`` naming what is wrong."""
    if "text" in stored:
        return str(stored["text"]).encode("ascii")
    if "data" in stored:
        return base64.b64decode(stored["data"], validate=True)
    if "blob" in stored:
        storage = _chain.current().storage
        if storage is None:
            raise ValueError(f"blob {stored['blob']} is referenced but PAYLOAD_STORAGE is off")
        return blobs.get(storage[0], str(stored["blob"]))
    raise ValueError("the envelope holds neither data nor a blob reference")


def decode_payload(stored: Any, context: PayloadContext) -> Any:
    """The value ``stored`` holds, or an ``UnreadablePayload`` (never raises)."""
    if not is_envelope(stored):
        return stored
    try:
        data = stored_bytes(stored)
        names = stored[MARKER]
        if not isinstance(names, list):
            raise ValueError(f"{MARKER} must be a list of codec names")
        by_name = _chain.current().by_name
        for name in reversed(names):
            codec = by_name.get(name)
            if codec is None:
                raise ValueError(f"codec {name!r} is not in PAYLOAD_CODECS")
            data = codec.decode(data, context)
        return json.loads(data)
    except Exception as exc:  # any failure is "unreadable", reported by ``readable``
        return UnreadablePayload(stored, context.position, str(exc) or type(exc).__name__)


def readable(value: Any, run_id: Any, position: str) -> Any:
    """``value``, or ``PayloadUnreadable`` naming the run and the position."""
    if isinstance(value, UnreadablePayload):
        raise PayloadUnreadable(run_id=str(run_id), position=position, reason=value.reason)
    return value


def blob_digest(stored: Any) -> str | None:
    """The blob an envelope refers to, if any."""
    if is_envelope(stored) and isinstance(stored.get("blob"), str):
        return str(stored["blob"])
    return None


__all__ = [
    "MARKER",
    "UnreadablePayload",
    "active_codecs",
    "blob_digest",
    "decode_payload",
    "encode_payload",
    "is_envelope",
    "readable",
    "stored_bytes",
]
