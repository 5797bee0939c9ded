"""Who sees decoded payloads: the ``weft.view_payload`` permission.

Invariant protected: the admin, the API and ``weft show`` render a payload's
value only for a viewer holding ``weft.view_payload`` (the permission
``WorkflowRun.Meta`` declares; Django spells it with the app label,
``weft``); anyone else sees ``{"hidden": true, "size": <bytes>}``. A value
that did not decode is shown as unreadable, never as its envelope.
``viewing(allowed)`` scopes the decision to one request (a context
variable, so concurrent requests never see each other's).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

from weft_django.codecs.stored import UnreadablePayload

#: ``user.has_perm`` name of the permission.
VIEW_PAYLOAD = "weft.view_payload"

_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar("weft_view_payload", default=True)


def may_view_payloads(user: Any) -> bool:
    return bool(user is not None and user.has_perm(VIEW_PAYLOAD))


@contextlib.contextmanager
def viewing(allowed: bool) -> Iterator[None]:
    token = _allowed.set(allowed)
    try:
        yield
    finally:
        _allowed.reset(token)


def allow(allowed: bool) -> contextvars.Token[bool]:
    """Set the decision until ``reset(token)`` (for a request's whole dispatch)."""
    return _allowed.set(allowed)


def reset(token: contextvars.Token[bool]) -> None:
    _allowed.reset(token)


def shown(value: Any, allowed: bool | None = None) -> Any:
    """``value`` as the current viewer may see it."""
    if value is None:
        return None
    if isinstance(value, UnreadablePayload):
        return {"unreadable": value.reason}
    if not (_allowed.get() if allowed is None else allowed):
        size = len(json.dumps(value, separators=(",", ":"), default=str).encode())
        return {"hidden": True, "size": size}
    return value


__all__ = ["VIEW_PAYLOAD", "allow", "may_view_payloads", "reset", "shown", "viewing"]
