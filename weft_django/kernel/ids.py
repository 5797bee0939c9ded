"""The one grammar of workflow ids and async-activity tokens (SPEC §2).

The client, the serializers and the URL converters all validate through here, so the API
never accepts an id the client refuses, nor the other way round.
"""

from __future__ import annotations

import re
from typing import Final

from weft_django.errors import InvalidArgumentError

WORKFLOW_ID_CHARS: Final = r"[A-Za-z0-9._:@-]{1,200}"
"""The workflow-id grammar without anchors (URL converters embed it)."""
WORKFLOW_ID_RE: Final = re.compile(rf"^{WORKFLOW_ID_CHARS}$")
WORKFLOW_ID_HELP: Final = "[A-Za-z0-9._:@-]{1,200}"

TOKEN_CHARS: Final = r"[A-Za-z0-9._~-]{1,512}"
"""The async-activity token grammar as it may appear in a URL path."""
TOKEN_RE: Final = re.compile(rf"^{TOKEN_CHARS}$")
TOKEN_HASH_PREFIX_LEN: Final = 12
"""Hex digits of a token's SHA-256 the API and the admin show (and logs) in place
of the token, which is never stored."""


def is_workflow_id(value: object) -> bool:
    return isinstance(value, str) and WORKFLOW_ID_RE.match(value) is not None


def validate_workflow_id(value: object) -> str:
    """Return ``value`` when it is a valid workflow id, else raise
    ``InvalidArgumentError`` (a ``ValueError``) naming it."""
    if not is_workflow_id(value):
        raise InvalidArgumentError(
            "workflow_id", f"workflow_id {value!r:.300} must match {WORKFLOW_ID_HELP}"
        )
    assert isinstance(value, str)
    return value


def is_storable_text(value: str) -> bool:
    """No NUL (PostgreSQL text refuses it) and no lone surrogate (not UTF-8)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_lookup_id(value: object) -> str:
    """A workflow id to look up: a ``str`` the database can compare (else
    ``InvalidArgumentError``). One outside the grammar is left to the lookup,
    which finds nothing (``WorkflowNotFound``), as it always did."""
    if not isinstance(value, str) or not is_storable_text(value):
        raise InvalidArgumentError(
            "workflow_id", f"workflow_id {value!r:.300} must match {WORKFLOW_ID_HELP}"
        )
    return value


def check_reason(value: object) -> str:
    """A cancel or suspend reason: any storable text (``ClaimEvent`` keeps its
    first 200 characters, the run the whole of it)."""
    if not isinstance(value, str) or not is_storable_text(value):
        raise InvalidArgumentError(
            "reason",
            f"reason must be a string without NUL or lone surrogates, got {value!r:.300}",
        )
    return value


def check_name(what: str, value: object) -> str:
    """A signal, update or query name: 1..200 characters of storable text."""
    if not isinstance(value, str) or not value or len(value) > 200 or not is_storable_text(value):
        raise InvalidArgumentError(
            f"{what} name",
            f"{what} name must be a non-empty string of at most 200 characters "
            f"(no NUL, no lone surrogate), got {value!r:.300}",
        )
    return value


__all__ = [
    "TOKEN_CHARS",
    "TOKEN_HASH_PREFIX_LEN",
    "TOKEN_RE",
    "WORKFLOW_ID_CHARS",
    "WORKFLOW_ID_HELP",
    "WORKFLOW_ID_RE",
    "check_lookup_id",
    "check_name",
    "check_reason",
    "is_storable_text",
    "is_workflow_id",
    "validate_workflow_id",
]
