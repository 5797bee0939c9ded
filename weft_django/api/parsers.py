"""JSON in and out of the weft API, hardened against hostile bodies.

Why not DRF's ``JSONParser``/``JSONRenderer`` as they are:

* ``JSONParser`` catches ``ValueError`` only. A body nested 10,000 levels
  deep makes ``json.loads`` raise ``RecursionError`` -- a 500. It also
  reads however many bytes the client sends.
* ``JSONRenderer`` encodes with ``ensure_ascii=False`` and then to UTF-8;
  an error message that quotes a lone surrogate from the request (DRF's
  "is not a valid choice" does) makes *rendering the 400* raise a 500.

So the parser reads at most a bounded number of bytes (derived from
``MAX_PAYLOAD_BYTES``: a body carries one payload plus a few small fields),
refuses NaN/Infinity literals, and turns every decoding failure into a 400
``parse_error``; the renderer falls back to ASCII escapes when the text
cannot be encoded.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer

from weft_django.api.exceptions import RequestBodyTooLarge
from weft_django.conf import get_settings

#: Room for the fields around the payload (names, ids, keys, options).
BODY_OVERHEAD_BYTES = 64 * 1024


def max_body_bytes() -> int:
    """The most bytes of a request body the API reads."""
    return 2 * get_settings().max_payload_bytes + BODY_OVERHEAD_BYTES


def _encoding(parser_context: Any) -> str:
    """The request's charset; only real text codecs (``bz2_codec`` would inflate)."""
    encoding = str((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
    try:
        "".encode(encoding)
    except (LookupError, UnicodeError):
        raise ParseError(f"Unsupported charset {encoding!r} in the Content-Type header.") from None
    return encoding


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class WeftJSONParser(JSONParser):
    """``application/json`` bodies, size-capped; any malformed body is a 400."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = max_body_bytes()
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestBodyTooLarge(f"The request body is larger than {limit} bytes.")
        encoding = _encoding(parser_context)
        try:
            text = raw.decode(encoding)
            return json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError("JSON parse error - the body nests too deeply.") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
            raise ParseError(f"JSON parse error - {exc}") from None


class WeftJSONRenderer(JSONRenderer):
    """DRF's renderer, with an ASCII-escaped fallback for unencodable text."""

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        try:
            return bytes(super().render(data, accepted_media_type, renderer_context))
        except UnicodeEncodeError:
            self.ensure_ascii = True
            return bytes(super().render(data, accepted_media_type, renderer_context))
