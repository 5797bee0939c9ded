"""Checks of the payload codecs, the encryption keys and the blob storage.

Invariant protected: an engine never starts writing payloads it could not
read back: a codec path that does not import (weft.E070), a key that is not
a Fernet key (weft.E071, naming its index), a ``PAYLOAD_STORAGE`` alias not
in ``STORAGES`` or a threshold above ``MAX_PAYLOAD_BYTES`` (weft.E072) are
``manage.py check`` errors.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.utils.module_loading import import_string

from weft_django.conf import evaluate_settings
from weft_django.conf.keys import CHECK_IDS
from weft_django.conf.parse import MAX_PAYLOAD_BYTES_CEILING


def check_payloads(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    weft, _problems = evaluate_settings()
    messages: list[checks.CheckMessage] = []
    codec_id, key_id, storage_id = (
        CHECK_IDS["bad-payload-codecs"],
        CHECK_IDS["bad-encryption-keys"],
        CHECK_IDS["bad-payload-storage"],
    )
    encrypts = False
    for index, path in enumerate(weft.payload_codecs):
        try:
            codec = import_string(path)
        except ImportError as exc:
            messages.append(
                checks.Error(
                    f'WEFT["PAYLOAD_CODECS"][{index}] {path!r} does not import: {exc}', id=codec_id
                )
            )
            continue
        encrypts = encrypts or getattr(codec, "name", None) == "weft.encrypt"
    if encrypts or weft.encryption_keys:
        messages.extend(_key_problems(weft.encryption_keys, key_id))
    if weft.max_payload_bytes > MAX_PAYLOAD_BYTES_CEILING:
        messages.append(
            checks.Error(
                f'WEFT["MAX_PAYLOAD_BYTES"] is {weft.max_payload_bytes}, above the ceiling '
                f"{MAX_PAYLOAD_BYTES_CEILING} (100 MB)",
                id=storage_id,
            )
        )
    storage = weft.payload_storage
    if storage is not None:
        aliases = getattr(django_settings, "STORAGES", {}) or {}
        if storage.storage not in aliases:
            messages.append(
                checks.Error(
                    f'WEFT["PAYLOAD_STORAGE"]["STORAGE"] is {storage.storage!r}, '
                    f"not an alias in STORAGES ({sorted(aliases)})",
                    id=storage_id,
                )
            )
        if storage.threshold_bytes > weft.max_payload_bytes:
            messages.append(
                checks.Error(
                    f'WEFT["PAYLOAD_STORAGE"]["THRESHOLD_BYTES"] is {storage.threshold_bytes}, '
                    f"above MAX_PAYLOAD_BYTES ({weft.max_payload_bytes})",
                    id=storage_id,
                )
            )
    return messages


def _key_problems(keys: tuple[str, ...], check_id: str) -> list[checks.CheckMessage]:
    if not keys:
        return [
            checks.Error(
                'weft_django.codecs.Encrypt is in PAYLOAD_CODECS but WEFT["ENCRYPTION_KEYS"] '
                "is empty",
                id=check_id,
            )
        ]
    try:
        from cryptography.fernet import Fernet
    except ImportError:
        return [
            checks.Error(
                "weft_django.codecs.Encrypt needs the cryptography package "
                "(pip install weft-django[crypto])",
                id=check_id,
            )
        ]
    found: list[checks.CheckMessage] = []
    for index, key in enumerate(keys):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            found.append(
                checks.Error(
                    f'WEFT["ENCRYPTION_KEYS"][{index}] is not a valid Fernet key',
                    hint="32 url-safe base64-encoded bytes: Fernet.generate_key()",
                    id=check_id,
                )
            )
    return found
