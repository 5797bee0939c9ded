"""``Encrypt``: authenticated encryption of payloads at rest (Fernet).

Invariant protected: the first of ``WEFT["ENCRYPTION_KEYS"]`` encrypts and
every listed key decrypts (``MultiFernet``), so a key is rotated in by
putting it first and retired only after ``manage.py weft reencrypt``. A
token that was tampered with, or that no listed key opens, is refused with
``ValueError`` (never decoded to something else): the engine suspends the
run naming it.
"""

from __future__ import annotations

from typing import Any

from weft_django.codecs.protocol import PayloadContext
from weft_django.conf import get_settings


def fernet_for(keys: tuple[str, ...]) -> Any:
    """A ``MultiFernet`` over ``keys`` (``ValueError`` naming a bad key's index)."""
    from cryptography.fernet import Fernet, MultiFernet

    if not keys:
        raise ValueError('WEFT["ENCRYPTION_KEYS"] is empty; Encrypt needs at least one key')
    fernets = []
    for index, key in enumerate(keys):
        try:
            fernets.append(Fernet(key))
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f'WEFT["ENCRYPTION_KEYS"][{index}] is not a valid Fernet key '
                "(32 url-safe base64-encoded bytes; Fernet.generate_key() makes one)"
            ) from exc
    return MultiFernet(fernets)


class Encrypt:
    """Fernet (AES-128-CBC + HMAC-SHA256) over ``WEFT["ENCRYPTION_KEYS"]``."""

    name = "weft.encrypt"

    def __init__(self, keys: tuple[str, ...] | None = None) -> None:
        self.keys = tuple(get_settings().encryption_keys if keys is None else keys)
        self._fernet = fernet_for(self.keys)
        from cryptography.fernet import Fernet

        self._primary = Fernet(self.keys[0])

    def encode(self, data: bytes, context: PayloadContext) -> bytes:
        return self._primary.encrypt(data)  # type: ignore[no-any-return]

    def decode(self, data: bytes, context: PayloadContext) -> bytes:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(data)  # type: ignore[no-any-return]
        except InvalidToken:
            raise ValueError(
                "the ciphertext was tampered with or no key in ENCRYPTION_KEYS opens it"
            ) from None

    def is_current(self, data: bytes) -> bool:
        """Whether ``data`` is encrypted under the first (current) key."""
        from cryptography.fernet import InvalidToken

        try:
            self._primary.decrypt(data)
        except InvalidToken:
            return False
        return True


__all__ = ["Encrypt", "fernet_for"]
