"""Payload codecs: the stored representation of workflow payloads.

``WEFT["PAYLOAD_CODECS"]`` lists ``PayloadCodec`` classes applied, in order,
to every stored payload and undone on every read (``codecs.stored`` is the
one boundary); ``Encrypt`` is the shipped one (Fernet over
``WEFT["ENCRYPTION_KEYS"]``, the ``crypto`` extra). ``Encrypt`` is imported
on first use so that ``cryptography`` stays optional.
"""

from __future__ import annotations

from typing import Any

from weft_django.codecs.protocol import PayloadCodec, PayloadContext


def __getattr__(name: str) -> Any:
    if name == "Encrypt":
        from weft_django.codecs.encrypt import Encrypt

        return Encrypt
    raise AttributeError(name)


__all__ = ["Encrypt", "PayloadCodec", "PayloadContext"]
