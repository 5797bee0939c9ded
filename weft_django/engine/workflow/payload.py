"""JSON-only payloads (SPEC §1 "Determinism"): validated before anything is written.

Every value that crosses a durable boundary — inputs, results, signals,
errors — is JSON (``DjangoJSONEncoder``), and every value sent into a
workflow generator passes the JSON round trip first, so a ``datetime`` is the
same string live and on replay. NaN, ±Infinity, ``\\u0000``, lone surrogates,
nesting deeper than ``MAX_DEPTH`` and payloads over ``MAX_PAYLOAD_BYTES``
are refused at the call site with a ``PayloadError`` naming what was wrong.
Dataclasses and pydantic models are first turned into their plain JSON value
(``payload_types.to_json_value``), so they are checked and sized like any
other value.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from weft_django.engine.workflow.payload_types import to_json_value
from weft_django.errors import PayloadError

MAX_DEPTH = 100


def _check_string(what: str, text: str) -> None:
    if "\x00" in text:
        raise PayloadError(what, "contains a \\u0000 character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadError(what, "contains a lone surrogate") from None


def _check_tree(what: str, value: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise PayloadError(what, f"nests deeper than {MAX_DEPTH} levels")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise PayloadError(what, f"contains {value!r}, which JSON cannot represent")
    elif isinstance(value, str):
        _check_string(what, value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                _check_string(what, key)
            _check_tree(what, item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_tree(what, item, depth + 1)


def dumps(what: str, value: Any, max_bytes: int | None = None) -> str:
    """Encode ``value`` as canonical JSON text or raise ``PayloadError``."""
    try:
        value = to_json_value(value)
        _check_tree(what, value, 0)
    except RecursionError:
        raise PayloadError(what, f"nests deeper than {MAX_DEPTH} levels") from None
    try:
        text = json.dumps(value, cls=DjangoJSONEncoder, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise PayloadError(what, f"is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise PayloadError(what, f"nests deeper than {MAX_DEPTH} levels") from None
    _check_string(what, text)
    if max_bytes is None:
        from weft_django.conf import get_settings

        max_bytes = get_settings().max_payload_bytes
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise PayloadError(what, f"is {size} bytes, over MAX_PAYLOAD_BYTES ({max_bytes})")
    return text


def normalize(what: str, value: Any, max_bytes: int | None = None) -> Any:
    """The JSON round trip of ``value`` (what a replay would see)."""
    return json.loads(dumps(what, value, max_bytes))
