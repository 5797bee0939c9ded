"""Cancel, immediate or with a grace for cleanup (SPEC §2, §4.4).

Why a grace still rotates the claim: the running owner's in-flight step must
commit nothing once a cancel is asked for, exactly as an immediate cancel
guarantees. So the request is ONE conditional batch that rotates the claim
(epoch + 1, holder deleted) and marks the run cancel-requested -- but leaves
it drivable (``running``/``parked``), so it is released, not ended: an engine
takes it over (the ``"released"`` wake), and that turn delivers
``WorkflowCancelled`` into the body at its current wait (a ``cancel`` journal
event, so any replay takes the same path). The run then ends ``cancelled``
by itself, or at once when the grace runs out (``end_cancel_grace``), on
a second cancel, or with ``force=True``.

Without a grace (none given, none declared by ``@workflow(cancel_grace=...)``)
a cancel is the immediate stop it always was (``stop.run_stop``). A run that
is not being driven (``pending``, ``suspended``) has no wait to deliver to:
it is cancelled at once even when a grace is given.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.operations._loop import (
    Prepared,
    commit_with_retries,
    latest_run,
)
from weft_django.engine.operations.stop import (
    _live_descendants,
    _stop_writes,
    add_rotation,
    cancel_spec,
    run_stop,
)
from weft_django.engine.runs.metrics import record_stops
from weft_django.engine.wakes import WakeSubject, announce_event
from weft_django.engine.workflow.definitions import registry
from weft_django.errors import InvalidTransitionError
from weft_django.kernel.clock import now_ms
from weft_django.kernel.durations import optional_ms
from weft_django.kernel.ids import check_reason
from weft_django.models import DRIVABLE_STATUSES, LIVE_STATUSES, WorkflowRun
from weft_django.ownership.ops import Condition, RowCondition, RunCondition, Update, Write


def default_grace_ms(run: WorkflowRun) -> int | None:
    """The ``@workflow(cancel_grace=...)`` of the run's workflow, when this
    process has it registered (``None`` otherwise: an immediate cancel)."""
    definition = registry.workflows.get(run.name)
    return definition.cancel_grace_ms if definition is not None else None


def cancel(
    workflow_id: str,
    reason: str = "",
    *,
    grace: timedelta | float | None = None,
    force: bool = False,
    actor: str = "client",
) -> WorkflowRun:
    """Cancel the latest run of ``workflow_id``.

    ``grace`` (seconds or a ``timedelta``): let the workflow clean up for that
    long (``WorkflowCancelled`` is thrown into it); ``None``: the workflow's
    ``cancel_grace``, else immediate. ``force=True``: immediate, whatever the
    grace. A run already cancel-requested is ended at once (a second cancel).
    """
    check_reason(reason)
    if force and grace is not None:
        raise ValueError(f"cancel: grace ({grace!r}) cannot be combined with force=True")
    grace_ms = optional_ms(grace, "cancel grace")
    db = get_settings().database
    current = latest_run(workflow_id, db)
    if current.status not in LIVE_STATUSES:
        raise InvalidTransitionError(workflow_id, current.status, "cancel")
    if grace_ms is None and not force:
        grace_ms = default_grace_ms(current)
    graceful = bool(
        not force
        and grace_ms  # a grace of 0 is no grace
        and current.cancel_requested_at is None
        and current.status in DRIVABLE_STATUSES
    )
    if not graceful:
        return run_stop(
            workflow_id, cancel_spec(reason or current.cancel_reason), actor=actor, run=current
        )
    assert grace_ms is not None
    return request_cancel(workflow_id, reason, grace_ms, actor=actor, run=current)


def _request_writes(
    run: WorkflowRun, reason: str, deadline: int, db: str, *, actor: str, now: int
) -> tuple[list[Condition], list[Write]]:
    """Mark ``run`` cancel-requested and rotate its claim (it stays drivable).

    Conditioned on no request being stored yet (not on the run's version, so
    a busy owner's commits do not make the request lose every retry): of two
    concurrent requests one commits, the other reads again, finds it, and
    ends the run as a second cancel.
    """
    conditions: list[Condition] = [
        RunCondition(run.pk, statuses=frozenset(DRIVABLE_STATUSES), label=f"run:{run.workflow_id}"),
        RowCondition(WorkflowRun, run.pk, {"cancel_requested_at": None}, label="no-cancel-request"),
    ]
    values: dict[str, Any] = {
        "cancel_requested_at": timezone.now(),
        "cancel_reason": reason[:2000],
        "cancel_deadline_at": deadline,
        "version": F("version") + 1,
        # A parked run needs a turn while wake_seq > parked_seq.
        "wake_seq": F("wake_seq") + 1,
    }
    writes: list[Write] = [Update(WorkflowRun, {"pk": run.pk}, values)]
    add_rotation(
        run, db, actor=actor, now=now, reason="cancel requested", into=(conditions, writes)
    )
    return conditions, writes


def request_cancel(
    workflow_id: str,
    reason: str,
    grace_ms: int,
    *,
    actor: str = "client",
    run: WorkflowRun | None = None,
) -> WorkflowRun:
    """The cancel-with-grace batch: the run and every live descendant.

    Descendants being driven get the same request with the same deadline
    (each cleans up in its own turn); those that are not (``pending``,
    ``suspended``) are cancelled at once in the same batch, as a cascade.
    """
    db = get_settings().database
    given = [run] if run is not None else []

    def attempt() -> Prepared[WorkflowRun]:
        current = given.pop() if given else latest_run(workflow_id, db)
        if current.status not in LIVE_STATUSES:
            raise InvalidTransitionError(workflow_id, current.status, "cancel")
        if current.cancel_requested_at is not None or current.status not in DRIVABLE_STATUSES:
            # Asked meanwhile (a second cancel) or no longer driven: the
            # caller's retry loop must not turn this into a grace request.
            raise _Immediate()
        now = now_ms()
        deadline = now + grace_ms
        conditions, writes = _request_writes(current, reason, deadline, db, actor=actor, now=now)
        requested, ended = [current], []
        for child in _live_descendants(current, db):
            if child.status in DRIVABLE_STATUSES and child.cancel_requested_at is None:
                c_conds, c_writes = _request_writes(
                    child, f"parent {workflow_id} was cancelled", deadline, db, actor=actor, now=now
                )
                requested.append(child)
            elif child.cancel_requested_at is None:
                c_conds, c_writes = _stop_writes(
                    child,
                    "cancelled",
                    {"type": "Cancelled", "message": f"parent {workflow_id} was cancelled"},
                    db,
                    actor=actor,
                    now=now,
                    reason="parent cancel",
                )
                ended.append(child)
            else:
                continue  # already cleaning up under its own request
            conditions.extend(c_conds)
            writes.extend(c_writes)

        def committed() -> WorkflowRun:
            # Released (an engine takes it over); without per-workflow claims,
            # the owner drives it because wake_seq moved.
            lease = get_settings().ownership == "workflow-lease"
            event: WakeSubject = "released" if lease else "signal"
            for each in requested:
                announce_event(event, each.pk, db, workflow_id=each.workflow_id)
            record_stops(db, [(each.name, "cancelled", each.created_at) for each in ended])
            for each in ended:
                announce_event("finished", each.pk, db, workflow_id=each.workflow_id)
            current.refresh_from_db(using=db)
            return current

        return Prepared(conditions, writes, committed)

    try:
        return commit_with_retries(workflow_id, "cancel", db, attempt)
    except _Immediate:
        latest = latest_run(workflow_id, db)
        return run_stop(
            workflow_id, cancel_spec(reason or latest.cancel_reason), actor=actor, run=latest
        )


class _Immediate(Exception):
    """Inside ``request_cancel``'s attempt: end the run at once instead."""


def end_cancel_grace(run: WorkflowRun, *, actor: str) -> WorkflowRun | None:
    """The run's cancel grace ran out: end it now (any engine may; the
    maintenance pass does). Today's immediate cancel -- rotation,
    ``cancelled``, cascade -- so a workflow still cleaning up stops where it
    is. ``None`` when the run already left the live statuses."""
    message = f"{run.cancel_reason or 'cancelled'} (cancel grace ran out)"
    try:
        return run_stop(run.workflow_id, cancel_spec(message), actor=actor, run=run)
    except InvalidTransitionError:
        return None


__all__ = ["cancel", "default_grace_ms", "end_cancel_grace", "request_cancel"]
