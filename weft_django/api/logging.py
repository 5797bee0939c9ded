"""Token paths in logs: the raw async-activity token replaced by its hash prefix.

Why: the token is a bearer credential and may sit in the URL (SPEC §5; the
header and body forms keep it out, but the path form remains). For
every response >= 400 Django logs ``"<reason>: <request.path>"`` on
``django.request``, with the request attached -- so a bad body (400) sent
with a valid, still unused token would write that token into the logs (and
into an ``AdminEmailHandler`` mail or an error tracker).
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from django.http import HttpRequest

from .serializers.responses import TOKEN_HASH_PREFIX_LEN

#: Django's own 4xx/5xx log line ("Conflict: /path") goes here; token paths are
#: logged on it redacted instead (see ``log_token_response``).
request_logger = logging.getLogger("django.request")

#: A token segment: not the ``complete``/``fail`` of the header-token routes
#: (``async-activities/complete`` without its slash is no token to redact).
TOKEN_IN_PATH = re.compile(r"(async-activities/)(?!(?:complete|fail)/?$)([^/]+)")


def redact_token_path(path: str) -> str:
    """``…/async-activities/<token sha256:1a2b3c4d5e6f>/complete/``: the raw token
    replaced by the prefix of its hash (the one the detail view shows staff)."""

    def redact(match: re.Match[str]) -> str:
        digest = hashlib.sha256(match.group(2).encode()).hexdigest()
        return f"{match.group(1)}<token sha256:{digest[:TOKEN_HASH_PREFIX_LEN]}>"

    return TOKEN_IN_PATH.sub(redact, path)


def log_token_response(request: HttpRequest, response: Any) -> None:
    """Log a 4xx/5xx answer to a token path without the raw token in it.

    Logs the same line Django would, with the token replaced by its hash
    prefix, without the request object, and marks the response as logged
    (``_has_been_logged``, the flag Django's ``log_response`` checks) so
    Django does not log it again.
    """
    if response.status_code < 400 or getattr(response, "_has_been_logged", False):
        return
    level = logging.ERROR if response.status_code >= 500 else logging.WARNING
    request_logger.log(
        level,
        "%s: %s",
        response.reason_phrase,
        redact_token_path(request.path),
        extra={"status_code": response.status_code},
    )
    response._has_been_logged = True


__all__ = ["TOKEN_IN_PATH", "log_token_response", "redact_token_path", "request_logger"]
