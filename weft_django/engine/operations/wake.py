"""Waking writes: signal, async-activity settlement, resume, retry (SPEC §2, §4.4).

Why these never rotate the claim: they give the current owner more to do,
they do not end its right to the workflow. Each bumps ``wake_seq`` in the
same batch as its write, so the owner's parked-run scan notices even when
the wake itself is lost; resume and retry make the run ``pending`` again
(any engine may pick it up). Each is announced once committed.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.operations._loop import Prepared, commit_with_retries, latest_run
from weft_django.engine.payload import normalize
from weft_django.engine.store import hash_token
from weft_django.engine.wakes import announce_event
from weft_django.errors import AsyncActivityTokenError, InvalidTransitionError
from weft_django.models import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    WorkflowRun,
)
from weft_django.ownership.batch import (
    Insert,
    RowCondition,
    RunCondition,
    Update,
    Write,
    conditional_batch,
)
from weft_django.vocab import WakeEvent


def _reactivate(
    workflow_id: str, action: WakeEvent, allowed: tuple[str, ...], extra: dict[str, Any]
) -> WorkflowRun:
    db = get_settings().database

    def attempt() -> Prepared[WorkflowRun]:
        run = latest_run(workflow_id, db)
        if run.status not in allowed:
            raise InvalidTransitionError(workflow_id, run.status, action)
        values: dict[str, Any] = {
            "status": "pending",
            "version": F("version") + 1,
            "wake_seq": F("wake_seq") + 1,
            "suspended_reason": "",
            # A fresh start: the failed-turn bound counts again from zero.
            "turn_failures": 0,
            "turn_retry_at": None,
            **extra,
        }
        writes: list[Write] = [Update(WorkflowRun, {"pk": run.pk}, values)]
        if action == "retry":
            writes.append(_DropTrailingErrors(run.pk))

        def committed() -> WorkflowRun:
            announce_event(action, run.pk, db, workflow_id=workflow_id)
            run.refresh_from_db(using=db)
            return run

        return Prepared([RunCondition(run.pk, statuses=frozenset({run.status}))], writes, committed)

    return commit_with_retries(workflow_id, action, db, attempt)


class _DropTrailingErrors:
    """Retry: the failed steps run again, so their recorded failures are dropped.

    The trailing entries with an error are those after the last entry
    without one: one ``DELETE`` of the positions past it.
    """

    def __init__(self, run_id: Any) -> None:
        self.run_id = run_id

    def apply(self, using: str) -> None:
        entries = JournalEntry.objects.using(using).filter(run_id=self.run_id)
        last_ok = (
            entries.filter(error__isnull=True)
            .order_by("-position")
            .values_list("position", flat=True)
            .first()
        )
        trailing = entries if last_ok is None else entries.filter(position__gt=last_ok)
        trailing.delete()


def resume(workflow_id: str) -> WorkflowRun:
    return _reactivate(workflow_id, "resume", ("suspended",), {"error": None})


def retry(workflow_id: str) -> WorkflowRun:
    return _reactivate(
        workflow_id,
        "retry",
        ("failed", "timed_out"),
        # A run whose cleanup after a cancel failed keeps its journal's cancel
        # event (the retry re-runs the cleanup) but no longer its grace's end.
        {
            "error": None,
            "result": None,
            "finished_at": None,
            "deadline_at": None,
            "cancel_deadline_at": None,
        },
    )


def signal(workflow_id: str, name: str, payload: Any) -> SignalMessage:
    db = get_settings().database
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ValueError(
            f"signal name must be a non-empty string of at most 200 characters, got {name!r}"
        )
    # JSON only (SPEC §1): refused here, before anything is written.
    payload = normalize(f"payload of signal {name!r}", payload)

    def attempt() -> Prepared[SignalMessage]:
        run = latest_run(workflow_id, db)
        if run.status in TERMINAL_STATUSES:
            raise InvalidTransitionError(workflow_id, run.status, "signal")
        message = SignalMessage(run_id=run.pk, name=name, payload=payload)

        def committed() -> SignalMessage:
            announce_event("signal", run.pk, db, workflow_id=workflow_id)
            return message

        return Prepared(
            [RunCondition(run.pk, statuses=frozenset(LIVE_STATUSES))],
            [
                Insert(message),
                Update(WorkflowRun, {"pk": run.pk}, {"wake_seq": F("wake_seq") + 1}),
            ],
            committed,
        )

    return commit_with_retries(workflow_id, "signal", db, attempt)


def settle_async(
    token: str, *, result: Any = None, error: dict[str, Any] | None = None
) -> AsyncActivity:
    """Record an async activity's completion or failure (single use)."""
    if not isinstance(token, str) or not token:
        raise AsyncActivityTokenError("unknown")
    return settle_async_hash(hash_token(token), result=result, error=error)


def settle_async_hash(
    token_hash: str, *, result: Any = None, error: dict[str, Any] | None = None
) -> AsyncActivity:
    """``settle_async`` for a caller that names the row, not the token.

    Why: the raw token is never stored, so staff settling an activity from the
    admin can only name its hash. The write is the same single-use batch --
    conditioned on the row still being ``pending`` -- so a settlement racing
    the outside system's own completion loses cleanly (``used``).
    """
    db = get_settings().database
    if not isinstance(token_hash, str) or not token_hash:
        raise AsyncActivityTokenError("unknown")
    row = AsyncActivity.objects.using(db).filter(pk=token_hash).select_related("run").first()
    if row is None:
        raise AsyncActivityTokenError("unknown")
    if row.status != "pending":
        raise AsyncActivityTokenError("used")
    values: dict[str, Any] = {
        "status": "failed" if error is not None else "completed",
        "result": result,
        "error": error,
        "completed_at": timezone.now(),
    }
    outcome = conditional_batch(
        [RowCondition(AsyncActivity, token_hash, {"status": "pending"}, "async-token")],
        [
            Update(AsyncActivity, {"pk": token_hash}, values),
            Update(WorkflowRun, {"pk": row.run_id}, {"wake_seq": F("wake_seq") + 1}),
        ],
        using=db,
    )
    if not outcome.committed:
        raise AsyncActivityTokenError("used")
    announce_event("async-activity", row.run_id, db, workflow_id=row.run.workflow_id)
    row.refresh_from_db(using=db)
    return row


__all__ = ["resume", "retry", "settle_async", "settle_async_hash", "signal"]
