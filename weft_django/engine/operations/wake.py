"""Waking writes: signal, async-activity settlement, resume, retry (SPEC §2, §4.4).

Why these never rotate the claim: they give the current owner more to do,
they do not end its right to the workflow. Each bumps ``wake_seq`` in the
same batch as its write, so the owner's parked-run scan notices even when
the wake itself is lost; resume and retry make the run ``pending`` again
(any engine may pick it up). Each is announced once committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import F, OuterRef, Q, Subquery
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.journal import hash_token
from weft_django.engine.operations._loop import Prepared, commit_with_retries, latest_run
from weft_django.engine.wakes import announce_event
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    AsyncActivityTokenError,
    InvalidArgumentError,
    InvalidTransitionError,
)
from weft_django.kernel.ids import check_name, is_storable_text
from weft_django.models import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    WorkflowRun,
)
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import (
    Insert,
    RowCondition,
    RunCondition,
    UniqueAbsence,
    Update,
    Write,
)

#: The statuses each reactivation applies to: one rule for ``resume`` /
#: ``retry`` and their bulk forms (``operations.bulk``).
REACTIVATABLE: dict[str, tuple[str, ...]] = {
    "resume": ("suspended",),
    "retry": ("failed", "timed_out"),
}


def reactivation_values(action: Literal["resume", "retry"]) -> dict[str, Any]:
    """What a resume or a retry writes to a run (the per-run and the bulk path alike)."""
    values: dict[str, Any] = {
        "status": "pending",
        "version": F("version") + 1,
        "wake_seq": F("wake_seq") + 1,
        "suspended_reason": "",
        # A fresh start: the failed-turn bound counts again from zero.
        "turn_failures": 0,
        "turn_retry_at": None,
        "recoveries": None,  # and so does the crash-loop count (a fix was deployed)
        "error": None,
    }
    if action == "retry":
        # A run whose cleanup after a cancel failed keeps its journal's cancel
        # event (the retry re-runs the cleanup) but no longer its grace's end.
        values.update(result=None, finished_at=None, deadline_at=None, cancel_deadline_at=None)
    return values


def reactivation_writes(action: Literal["resume", "retry"], run_ids: Sequence[Any]) -> list[Write]:
    """The writes of reactivating ``run_ids`` (one ``UPDATE``; a retry adds one ``DELETE``)."""
    writes: list[Write] = [
        Update(WorkflowRun, {"pk__in": list(run_ids)}, reactivation_values(action))
    ]
    if action == "retry":
        writes.append(DropTrailingErrors(run_ids))
    return writes


def _reactivate(workflow_id: str, action: Literal["resume", "retry"]) -> WorkflowRun:
    db = get_settings().database

    def attempt() -> Prepared[WorkflowRun]:
        run = latest_run(workflow_id, db)
        if run.status not in REACTIVATABLE[action]:
            raise InvalidTransitionError(workflow_id, run.status, action)

        def committed() -> WorkflowRun:
            announce_event(action, run.pk, db, workflow_id=workflow_id)
            run.refresh_from_db(using=db)
            return run

        return Prepared(
            [RunCondition(run.pk, statuses=frozenset({run.status}))],
            reactivation_writes(action, [run.pk]),
            committed,
        )

    return commit_with_retries(workflow_id, action, db, attempt)


@dataclass(frozen=True)
class DropTrailingErrors:
    """Retry: the failed steps run again, so their recorded failures are dropped.

    Of each run, the trailing entries with an error: every entry after the
    run's last entry without one -- one ``DELETE`` however many runs.
    """

    run_ids: Sequence[Any]

    def apply(self, using: str) -> None:
        last_ok = (
            JournalEntry.objects.using(using)
            .filter(run_id=OuterRef("run_id"), error__isnull=True)
            .order_by("-position")
            .values("position")[:1]
        )
        JournalEntry.objects.using(using).filter(run_id__in=list(self.run_ids)).annotate(
            last_ok=Subquery(last_ok)
        ).filter(Q(last_ok__isnull=True) | Q(position__gt=F("last_ok"))).delete()


def resume(workflow_id: str) -> WorkflowRun:
    return _reactivate(workflow_id, "resume")


def retry(workflow_id: str) -> WorkflowRun:
    return _reactivate(workflow_id, "retry")


def signal(
    workflow_id: str, name: str, payload: Any, *, idempotency_key: str | None = None
) -> SignalMessage:
    """Deliver a signal to the latest run of ``workflow_id``.

    With ``idempotency_key``: recorded once per key per workflow id. A repeat
    (a retried request) writes nothing and returns the recorded signal; a
    concurrent twin loses on the unique constraint and returns it too. The
    same key with another name or payload is refused, nothing written.
    """
    db = get_settings().database
    check_name("signal", name)
    key = _signal_key(idempotency_key)
    # JSON only (SPEC §1): refused here, before anything is written.
    payload = normalize(f"payload of signal {name!r}", payload)

    def attempt() -> Prepared[SignalMessage]:
        recorded = _recorded_signal(db, workflow_id, key, name, payload)
        if recorded is not None:
            return Prepared([], [], lambda: recorded)
        run = latest_run(workflow_id, db)
        if run.status in TERMINAL_STATUSES:
            raise InvalidTransitionError(workflow_id, run.status, "signal")
        message = SignalMessage(
            run_id=run.pk,
            name=name,
            payload=payload,
            workflow_id=workflow_id if key is not None else None,
            idempotency_key=key,
        )

        def committed() -> SignalMessage:
            announce_event("signal", run.pk, db, workflow_id=workflow_id)
            return message

        once = UniqueAbsence(f"signal:{key}") if key is not None else None
        return Prepared(
            [RunCondition(run.pk, statuses=frozenset(LIVE_STATUSES))],
            [
                Insert(message, once),
                Update(WorkflowRun, {"pk": run.pk}, {"wake_seq": F("wake_seq") + 1}),
            ],
            committed,
        )

    return commit_with_retries(workflow_id, "signal", db, attempt)


def _signal_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255 or not is_storable_text(value):
        raise InvalidArgumentError(
            "idempotency_key",
            "idempotency_key must be a non-empty string of at most 255 characters "
            f"(no NUL, no lone surrogate), got {value!r:.300}",
        )
    return value


def _recorded_signal(
    db: str, workflow_id: str, key: str | None, name: str, payload: Any
) -> SignalMessage | None:
    """The signal already recorded under ``key`` for ``workflow_id`` (``None``: none)."""
    if key is None:
        return None
    found = (
        SignalMessage.objects.using(db).filter(workflow_id=workflow_id, idempotency_key=key).first()
    )
    if found is not None and (found.name, found.payload) != (name, payload):
        raise InvalidArgumentError(
            "idempotency_key",
            f"idempotency_key {key!r} already recorded signal {found.name!r} with payload "
            f"{found.payload!r:.200} on workflow {workflow_id!r}; it cannot be reused for "
            f"signal {name!r} with payload {payload!r:.200}",
        )
    return found


def settle_async(
    token: str, *, result: Any = None, error: dict[str, Any] | None = None
) -> AsyncActivity:
    """Record an async activity's completion or failure (single use)."""
    if not isinstance(token, str) or not token or not is_storable_text(token):
        raise AsyncActivityTokenError("unknown")  # no row can have it
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
