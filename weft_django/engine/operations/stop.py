"""Stops: cancel, suspend, timeout, purge, retention, force release (SPEC §2, §4.4).

(``operations.cancel`` decides between an immediate cancel -- ``run_stop``
with ``cancel_spec`` -- and a cancel with a grace for cleanup.)

Why these rotate the claim: each one ends the current owner's right to the
workflow. In the same batch that writes the new state they rotate the claim
(epoch + 1, holder deleted), so the running owner's next fenced write fails
and it stops that workflow; a stop never waits for the owner to agree.
Each stopped run is announced ``"finished"`` (whoever waits for its result
wakes) and a stopped child wakes its parent (``"child-completion"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.journal import bump_parent
from weft_django.engine.operations._loop import (
    Prepared,
    claim_snapshot,
    commit_with_retries,
    latest_run,
)
from weft_django.engine.payload_rows import blobs_of_runs, release_blobs
from weft_django.engine.queues.freed import announce_slot_freed
from weft_django.engine.runs.metrics import record_stops
from weft_django.engine.wakes import announce_event
from weft_django.errors import InvalidTransitionError, WorkflowNotFound
from weft_django.kernel.clock import now_ms
from weft_django.kernel.ids import check_reason, validate_workflow_id
from weft_django.models import (
    DRIVABLE_STATUSES,
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    Timer,
    WorkflowRun,
)
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import Condition, Delete, RunCondition, Update, Write
from weft_django.ownership.transitions import build_rotation


@dataclass(frozen=True)
class StopSpec:
    """What one stop action does to a run."""

    action: str
    #: The statuses the run may be in (else ``InvalidTransitionError``).
    allowed: frozenset[str]
    status: str
    error: dict[str, Any] | None
    #: Recorded on the rotation's ``ClaimEvent`` (and as ``suspended_reason``).
    reason: str
    #: Also cancel every live descendant, in the same batch.
    cascade: bool = False


def cancel_spec(reason: str = "") -> StopSpec:
    return StopSpec(
        "cancel",
        frozenset(LIVE_STATUSES),
        "cancelled",
        {"type": "Cancelled", "message": reason or "cancelled"},
        reason or "cancel",
        cascade=True,
    )


def suspend_spec(reason: str = "") -> StopSpec:
    return StopSpec(
        "suspend",
        frozenset({"pending", "running", "parked"}),
        "suspended",
        None,
        reason or "suspend",
    )


def terminate_spec(reason: str = "") -> StopSpec:
    """``on_conflict="terminate-existing"``: end the live run ``terminated``,
    its live descendants cancelled in the same batch, as a cancel would."""
    return StopSpec(
        "terminate",
        frozenset(LIVE_STATUSES),
        "terminated",
        {"type": "Terminated", "message": reason or "terminated"},
        reason or "terminate",
        cascade=True,
    )


TIMEOUT = StopSpec(
    "timeout",
    frozenset(LIVE_STATUSES),
    "timed_out",
    {"type": "WorkflowTimeoutError", "message": "execution timeout exceeded"},
    "execution timeout",
    cascade=True,
)


def _live_descendants(run: WorkflowRun, db: str) -> list[WorkflowRun]:
    found: list[WorkflowRun] = []
    frontier = [run.pk]
    while frontier:
        children = list(
            WorkflowRun.objects.using(db).filter(parent_id__in=frontier, status__in=LIVE_STATUSES)
        )
        found.extend(children)
        frontier = [child.pk for child in children]
    return found


def _stop_writes(
    run: WorkflowRun,
    status: str,
    error: dict[str, Any] | None,
    db: str,
    *,
    actor: str,
    now: int,
    reason: str,
) -> tuple[list[Condition], list[Write]]:
    """Conditions and writes that stop one run and rotate its claim."""
    conditions: list[Condition] = [
        RunCondition(run.pk, statuses=frozenset({run.status}), label=f"run:{run.workflow_id}")
    ]
    values: dict[str, Any] = {"status": status, "version": F("version") + 1}
    if status in TERMINAL_STATUSES:
        values.update(error=error, finished_at=timezone.now())
    else:
        values.update(suspended_reason=reason)
        if error is not None:
            values["error"] = error
    writes: list[Write] = [Update(WorkflowRun, {"pk": run.pk}, values)]
    if status in TERMINAL_STATUSES:
        writes.append(Delete(Timer, {"run_id": run.pk}))
        writes.extend(bump_parent(run))
    else:
        writes.append(Delete(Timer, {"run_id": run.pk, "kind__in": ["sleep", "retry", "timeout"]}))
    add_rotation(run, db, actor=actor, now=now, reason=reason, into=(conditions, writes))
    return conditions, writes


def add_rotation(
    run: WorkflowRun,
    db: str,
    *,
    actor: str,
    now: int,
    reason: str,
    into: tuple[list[Condition], list[Write]],
) -> None:
    """Under workflow-lease ownership, append the claim rotation (epoch + 1,
    holder deleted) to a stop's batch: the running owner's next fenced write
    fails. The other modes have no per-workflow claim to rotate."""
    if get_settings().ownership != "workflow-lease":
        return
    snapshot = claim_snapshot(run.workflow_id, db)
    rotation = build_rotation(snapshot, actor=actor, now=now, reason=reason)
    into[0].extend(rotation.conditions)
    into[1].extend(rotation.writes)


def run_stop(
    workflow_id: str,
    spec: StopSpec,
    *,
    actor: str,
    run: WorkflowRun | None = None,
    using: str | None = None,
) -> WorkflowRun:
    """Apply ``spec`` to the latest run of ``workflow_id`` (first to ``run``, if given)."""
    db = using or get_settings().database
    given = [run] if run is not None else []

    def attempt() -> Prepared[WorkflowRun]:
        current = given.pop() if given else latest_run(workflow_id, db)
        if current.status not in spec.allowed:
            raise InvalidTransitionError(workflow_id, current.status, spec.action)
        now = now_ms()
        conditions, writes = _stop_writes(
            current, spec.status, spec.error, db, actor=actor, now=now, reason=spec.reason
        )
        stopped = [current]
        if spec.cascade:
            for child in _live_descendants(current, db):
                c_conds, c_writes = _stop_writes(
                    child,
                    "cancelled",
                    {"type": "Cancelled", "message": f"parent {workflow_id} was cancelled"},
                    db,
                    actor=actor,
                    now=now,
                    reason=f"parent {spec.action}",
                )
                conditions.extend(c_conds)
                writes.extend(c_writes)
                stopped.append(child)

        def committed() -> WorkflowRun:
            record_stops(
                db,
                [
                    (each.name, spec.status if each is current else "cancelled", each.created_at)
                    for each in stopped
                ],
            )
            for each in stopped:
                announce_event("finished", each.pk, db, workflow_id=each.workflow_id)
            for queue in sorted({each.queue for each in stopped if each.queue is not None}):
                announce_slot_freed(queue, db)
            if spec.status in TERMINAL_STATUSES:
                announce_event("child-completion", current.parent_id, db)
            current.refresh_from_db(using=db)
            return current

        return Prepared(conditions, writes, committed)

    return commit_with_retries(workflow_id, spec.action, db, attempt)


def suspend(workflow_id: str, reason: str = "", *, actor: str = "client") -> WorkflowRun:
    return run_stop(workflow_id, suspend_spec(check_reason(reason)), actor=actor)


def timeout(run: WorkflowRun, *, actor: str) -> WorkflowRun | None:
    """The execution deadline passed: ``timed_out`` (any engine may do this)."""
    try:
        return run_stop(run.workflow_id, TIMEOUT, actor=actor, run=run)
    except InvalidTransitionError:
        return None


def force_release_refusal(ownership: str) -> str | None:
    """Why force release is refused under ``ownership`` (``None``: allowed).

    The one home of the rule: only ``workflow-lease`` has a per-workflow claim
    to rotate. The admin asks before showing its confirmation page.
    """
    if ownership == "workflow-lease":
        return None
    return f'force release applies to OWNERSHIP="workflow-lease" only (configured: "{ownership}")'


def force_release(workflow_id: str, *, actor: str = "admin") -> int:
    """Rotate the claim (epoch + 1, holder deleted) without touching the run.

    Only under ``OWNERSHIP="workflow-lease"`` (the other modes have no
    per-workflow claim to rotate): ``ImproperlyConfigured`` otherwise, with
    nothing written. The workflow's drivable run, if any, is announced
    ``"released"`` so an engine takes it over without waiting for a poll.
    A ``workflow_id`` outside the id grammar is refused (``InvalidArgumentError``)
    before anything is read: no claim row can have it.
    """
    validate_workflow_id(workflow_id)
    settings = get_settings()
    refusal = force_release_refusal(settings.ownership)
    if refusal is not None:
        raise ImproperlyConfigured(refusal)
    db = settings.database

    def attempt() -> Prepared[int]:
        rotation = build_rotation(
            claim_snapshot(workflow_id, db),
            actor=actor,
            now=now_ms(),
            reason="force release",
            kind="force_release",
        )

        def committed() -> int:
            live = (
                WorkflowRun.objects.using(db)
                .filter(workflow_id=workflow_id, status__in=DRIVABLE_STATUSES)
                .values_list("pk", flat=True)
                .first()
            )
            announce_event("released", live, db, workflow_id=workflow_id)
            return rotation.epoch

        return Prepared(rotation.conditions, rotation.writes, committed)

    return commit_with_retries(
        workflow_id, "force_release", db, attempt, last_status=lambda: "contended"
    )


def purge(
    workflow_id: str, *, actor: str = "client", finished_before: datetime | None = None
) -> int:
    """Delete terminal runs of ``workflow_id``; the claim row (epoch) stays.

    Without ``finished_before`` every run must be terminal (a live latest run
    → ``InvalidTransitionError``) and all are deleted, rotating the epoch.
    With it (retention), only terminal runs finished before then go; the
    epoch rotates only when no live run of the id remains, so retention never
    deposes a running owner. Nothing is announced: only finished runs are
    deleted, so nobody waits for them and no run becomes runnable.
    """
    db = get_settings().database
    run = latest_run(workflow_id, db)
    if finished_before is None and run.status not in TERMINAL_STATUSES:
        raise InvalidTransitionError(workflow_id, run.status, "purge")
    selected = WorkflowRun.objects.using(db).filter(
        workflow_id=workflow_id, status__in=TERMINAL_STATUSES
    )
    if finished_before is not None:
        selected = selected.filter(finished_at__lt=finished_before)
    runs = list(selected.values_list("pk", flat=True))
    if not runs:
        return 0
    conditions: list[Condition] = [RunCondition(pk, statuses=TERMINAL_STATUSES) for pk in runs]
    writes: list[Write] = [Delete(WorkflowRun, {"pk__in": runs})]
    if get_settings().ownership == "workflow-lease" and run.status in TERMINAL_STATUSES:
        rotation = build_rotation(
            claim_snapshot(workflow_id, db), actor=actor, now=now_ms(), reason="purge"
        )
        conditions.extend(rotation.conditions)
        writes.extend(rotation.writes)
    held = blobs_of_runs(runs)  # large payloads in PAYLOAD_STORAGE
    result = conditional_batch(conditions, writes, using=db)
    if not result.committed:
        raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, "purge")
    release_blobs(held)
    return len(runs)


def purge_older_than(age: timedelta, *, actor: str = "client", limit: int | None = None) -> int:
    """Retention: delete terminal runs that finished more than ``age`` ago.

    ``limit`` bounds how many workflow ids one call purges (the engine's
    retention pass), so a backlog is worked off over several passes.
    """
    db = get_settings().database
    cutoff = timezone.now() - age
    ids = list(
        WorkflowRun.objects.using(db)
        .filter(status__in=TERMINAL_STATUSES, finished_at__lt=cutoff)
        .values_list("workflow_id", flat=True)
        .distinct()
        .order_by("workflow_id")[: limit or None]
    )
    total = 0
    for workflow_id in ids:
        try:
            total += purge(workflow_id, actor=actor, finished_before=cutoff)
        except (InvalidTransitionError, WorkflowNotFound):
            continue
    return total


__all__ = [
    "TIMEOUT",
    "StopSpec",
    "cancel_spec",
    "force_release",
    "purge",
    "purge_older_than",
    "run_stop",
    "suspend",
    "suspend_spec",
    "terminate_spec",
    "timeout",
]
