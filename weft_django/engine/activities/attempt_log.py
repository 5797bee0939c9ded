"""The log lines of failures a person acts on: each failed attempt, each failed run.

The invariants it protects:

* **One WARNING per failed attempt**, naming the workflow, the run, the
  activity, "attempt N of M", the exception's type and message, and whether
  it is retried and when -- with the activity's traceback (``exc_info``) and
  the same fields as structured ``extra={"weft": ...}`` as the engine's
  other log lines.
* **One WARNING per run that ends failed**, with its error's headline.
* Logging never raises into the turn (the ``logging`` module's own rule).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

logger = logging.getLogger("weft_django.engine")


def attempt_failed(
    *,
    workflow_id: str,
    run_id: str,
    activity: str,
    attempt: int,
    max_attempts: int,
    error: BaseException,
    message: str,
    retry_at_ms: int | None,
    now_ms: int,
    reason: str | None = None,
    with_traceback: bool = True,
) -> None:
    """Log one failed attempt; ``retry_at_ms`` is ``None`` when it is not retried
    (``reason`` then says why: "retries exhausted", "non-retryable", ...).
    ``message`` is the error's text as it may be shown (a secret cut out);
    ``with_traceback=False`` leaves the raw traceback out of the log."""
    if retry_at_ms is not None:
        delay_s = max(0, retry_at_ms - now_ms) / 1000
        at = datetime.fromtimestamp(retry_at_ms / 1000, tz=UTC).isoformat(timespec="seconds")
        then = f"retried in {delay_s:g} s (at {at})"
    else:
        then = f"not retried ({reason or 'failed for good'})"
    fields: dict[str, Any] = {
        "event": "activity_attempt_failed",
        "workflow_id": workflow_id,
        "run_id": run_id,
        "activity": activity,
        "attempt": attempt,
        "max_attempts": max_attempts,
        "error_type": type(error).__name__,
        "error_message": message[:500],
        "retried": retry_at_ms is not None,
        "retry_at_ms": retry_at_ms,
    }
    logger.warning(
        "activity %s of workflow %s (run %s) failed, attempt %s of %s: %s: %s; %s",
        activity,
        workflow_id,
        run_id,
        attempt,
        max_attempts,
        type(error).__name__,
        message[:500],
        then,
        exc_info=error if (with_traceback and error.__traceback__ is not None) else None,
        extra={"weft": fields},
    )


def run_failed(workflow_id: str, run_id: str, error: Any) -> None:
    """Log a run that ended failed, with its error's headline."""
    if isinstance(error, dict):
        headline = f"{error.get('type', 'Error')}: {error.get('message', '')}"
        error_type = error.get("type")
    else:
        headline, error_type = str(error), None
    logger.warning(
        "workflow %s (run %s) failed: %s",
        workflow_id,
        run_id,
        headline[:1000],
        extra={
            "weft": {
                "event": "workflow_failed",
                "workflow_id": workflow_id,
                "run_id": run_id,
                "error_type": error_type,
            }
        },
    )


__all__ = ["attempt_failed", "run_failed"]
