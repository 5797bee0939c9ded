"""A run's activity attempts as the API, ``weft show`` and the admin read them.

The invariants it protects: **bounded** -- a run retried a million times is
read as its last ``limit`` attempts plus their count, never whole; **the
same view everywhere** -- oldest first, the error's headline shown only to a
viewer holding ``weft.view_payload`` (``payload_view``: it is the text of an
exception, which may quote the data), so the API, the CLI and the admin agree.
"""

from __future__ import annotations

from typing import Any

from weft_django.inspection.payload_view import shown
from weft_django.models import ActivityAttempt

#: Attempts a run's detail shows by default (the latest ones).
ATTEMPTS_SHOWN = 100


def latest_attempts(
    run_id: Any, using: str, limit: int = ATTEMPTS_SHOWN
) -> tuple[list[ActivityAttempt], int]:
    """The last ``limit`` attempts of run ``run_id``, oldest first, and how many it has."""
    rows = ActivityAttempt.objects.using(using).filter(run_id=run_id)
    total = rows.count()
    if not total or limit <= 0:
        return [], total
    latest = list(rows.order_by("-started_at", "-id")[:limit])
    return latest[::-1], total


def shown_error(attempt: ActivityAttempt) -> Any:
    """Its error's headline as the current viewer may see it (``None``: it succeeded)."""
    return shown(attempt.error) if attempt.error else None


def error_text(attempt: ActivityAttempt) -> str:
    """Its error's headline for a person: the text, or that it is hidden."""
    value = shown_error(attempt)
    if value is None:
        return ""
    return value if isinstance(value, str) else "(error text hidden: weft.view_payload)"


__all__ = ["ATTEMPTS_SHOWN", "error_text", "latest_attempts", "shown_error"]
