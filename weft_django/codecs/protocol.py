"""The ``PayloadCodec`` protocol: what a codec in ``WEFT["PAYLOAD_CODECS"]`` is.

Invariant protected: a codec is a pure, reversible transformation of bytes,
``decode(encode(b, ctx), ctx) == b``; it may refuse (raise) on decode, never
return something else. The ``PayloadContext`` names the stored position (the
model and the column); a codec must not depend on the row a value sits in,
because a payload is copied between runs (a fork copies a journal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class PayloadContext:
    """Where a payload is stored: ``"weft.JournalEntry"`` and ``"result"``."""

    model: str
    field: str

    @property
    def position(self) -> str:
        return f"{self.model}.{self.field}"


@runtime_checkable
class PayloadCodec(Protocol):
    """One stage of the stored representation, applied in ``PAYLOAD_CODECS`` order
    on write and in reverse order on read.

    ``name`` is what the stored envelope records (it must stay stable while
    rows written with it exist); a codec class is built with no arguments
    and reads its own settings.
    """

    name: str

    def encode(self, data: bytes, context: PayloadContext) -> bytes: ...

    def decode(self, data: bytes, context: PayloadContext) -> bytes: ...


__all__ = ["PayloadCodec", "PayloadContext"]
