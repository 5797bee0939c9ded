"""External transitions (SPEC §2, §4.4, §4.5): any process may commit them.

Cancel, suspend, timeout, purge and force release are *terminal* for the
current owner: in the same batch that writes the new state they rotate the
claim (epoch + 1, holder deleted), so the running owner's next fenced write
fails and it stops that workflow. Signals, async completions, resume and
retry are not terminal and do not rotate; they bump ``wake_seq`` so the
owner (or, for ``pending``, any engine) notices. Every action first checks
the status (``InvalidTransitionError`` and nothing written) and re-checks it
under lock in the batch, retrying on a concurrent change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from weft_django.clock import now_ms, process_clock
from weft_django.conf import get_settings
from weft_django.engine.payload import normalize
from weft_django.engine.store import bump_parent, hash_token
from weft_django.errors import AsyncActivityTokenError, InvalidTransitionError, WorkflowNotFound
from weft_django.models import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    AsyncActivity,
    SignalMessage,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership.batch import (
    Condition,
    Delete,
    Insert,
    RowCondition,
    RunCondition,
    Update,
    Write,
    conditional_batch,
)
from weft_django.ownership.transitions import ClaimSnapshot, build_rotation
from weft_django.transports import wake_hooks
from weft_django.transports.notify import WAKE_CHANNEL, notify_on_commit

MAX_ATTEMPTS = 8


def wall_ms() -> int:
    """Moved to ``weft_django.clock.now_ms``; kept for imports."""
    return now_ms()


def use_engine_clock(clock: Callable[[], int] | None) -> None:
    """Install (or, with ``None``, remove every) injected engine clock of this
    process: ``weft_django.clock.process_clock``; kept for imports."""
    if clock is not None:
        process_clock.install(clock)
        return
    while (current := process_clock.current()) is not None:
        process_clock.remove(current)


def engine_clock() -> Callable[[], int] | None:
    """``weft_django.clock.process_clock.current()``; kept for imports."""
    return process_clock.current()


def latest_run(workflow_id: str, using: str | None = None) -> WorkflowRun:
    db = using or get_settings().database
    run = (
        WorkflowRun.objects.using(db)
        .filter(workflow_id=workflow_id)
        .order_by("-created_at", "-pk")
        .first()
    )
    if run is None:
        raise WorkflowNotFound(workflow_id)
    return run


def _claim_snapshot(workflow_id: str, db: str) -> ClaimSnapshot:
    row = (
        WorkflowClaim.objects.using(db)
        .filter(pk=workflow_id)
        .values_list("epoch", "engine_id", "expires_at", "claimed_at")
        .first()
    )
    return ClaimSnapshot(workflow_id, *row) if row is not None else ClaimSnapshot(workflow_id)


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
    kind: str = "rotate",
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
    if get_settings().ownership == "workflow-lease":
        rotation = build_rotation(
            _claim_snapshot(run.workflow_id, db), actor=actor, now=now, reason=reason, kind=kind
        )
        conditions.extend(rotation.conditions)
        writes.extend(rotation.writes)
    return conditions, writes


def _run_stop(
    workflow_id: str,
    action: str,
    allowed: Iterable[str],
    status: str,
    error: dict[str, Any] | None,
    *,
    actor: str,
    reason: str,
    cascade: bool = False,
    run: WorkflowRun | None = None,
    using: str | None = None,
) -> WorkflowRun:
    db = using or get_settings().database
    allowed_set = frozenset(allowed)
    for _ in range(MAX_ATTEMPTS):
        current = run if run is not None else latest_run(workflow_id, db)
        run = None
        if current.status not in allowed_set:
            raise InvalidTransitionError(workflow_id, current.status, action)
        now = wall_ms()
        conditions, writes = _stop_writes(
            current, status, error, db, actor=actor, now=now, reason=reason
        )
        if cascade:
            for child in _live_descendants(current, db):
                c_conds, c_writes = _stop_writes(
                    child,
                    "cancelled",
                    {"type": "Cancelled", "message": f"parent {workflow_id} was cancelled"},
                    db,
                    actor=actor,
                    now=now,
                    reason=f"parent {action}",
                )
                conditions.extend(c_conds)
                writes.extend(c_writes)
        result = conditional_batch(conditions, writes, using=db)
        if result.committed:
            notify_on_commit(WAKE_CHANNEL, workflow_id, db)
            if status in TERMINAL_STATUSES and current.parent_id is not None:
                wake_hooks.wake_on_commit("child-completion", run_id=current.parent_id, using=db)
            current.refresh_from_db(using=db)
            return current
    raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, action)


def cancel(workflow_id: str, reason: str = "", *, actor: str = "client") -> WorkflowRun:
    return _run_stop(
        workflow_id,
        "cancel",
        LIVE_STATUSES,
        "cancelled",
        {"type": "Cancelled", "message": reason or "cancelled"},
        actor=actor,
        reason=reason or "cancel",
        cascade=True,
    )


def suspend(workflow_id: str, reason: str = "", *, actor: str = "client") -> WorkflowRun:
    return _run_stop(
        workflow_id,
        "suspend",
        ("pending", "running", "parked"),
        "suspended",
        None,
        actor=actor,
        reason=reason or "suspend",
    )


def timeout(run: WorkflowRun, *, actor: str) -> WorkflowRun | None:
    """The execution deadline passed: ``timed_out`` (any engine may do this)."""
    try:
        return _run_stop(
            run.workflow_id,
            "timeout",
            LIVE_STATUSES,
            "timed_out",
            {"type": "WorkflowTimeoutError", "message": "execution timeout exceeded"},
            actor=actor,
            reason="execution timeout",
            cascade=True,
            run=run,
        )
    except InvalidTransitionError:
        return None


def _reactivate(
    workflow_id: str, action: str, allowed: tuple[str, ...], extra: dict[str, Any]
) -> WorkflowRun:
    db = get_settings().database
    for _ in range(MAX_ATTEMPTS):
        run = latest_run(workflow_id, db)
        if run.status not in allowed:
            raise InvalidTransitionError(workflow_id, run.status, action)
        values: dict[str, Any] = {
            "status": "pending",
            "version": F("version") + 1,
            "wake_seq": F("wake_seq") + 1,
            "suspended_reason": "",
            **extra,
        }
        writes: list[Write] = [Update(WorkflowRun, {"pk": run.pk}, values)]
        if action == "retry":
            writes.append(_DropTrailingErrors(run.pk))
        result = conditional_batch(
            [RunCondition(run.pk, statuses=frozenset({run.status}))], writes, using=db
        )
        if result.committed:
            notify_on_commit(WAKE_CHANNEL, workflow_id, db)
            wake_hooks.wake_on_commit(
                "resume" if action == "resume" else "retry",
                run_id=run.pk,
                using=db,
                workflow_id=workflow_id,
            )
            run.refresh_from_db(using=db)
            return run
    raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, action)


class _DropTrailingErrors:
    """Retry: the failed step runs again, so its recorded failure is dropped."""

    def __init__(self, run_id: Any) -> None:
        self.run_id = run_id

    def apply(self, using: str) -> None:
        from weft_django.models import JournalEntry

        entries = JournalEntry.objects.using(using).filter(run_id=self.run_id)
        last = entries.order_by("-position").first()
        while last is not None and last.error is not None:
            last.delete(using=using)
            last = entries.order_by("-position").first()


def resume(workflow_id: str) -> WorkflowRun:
    return _reactivate(workflow_id, "resume", ("suspended",), {"error": None})


def retry(workflow_id: str) -> WorkflowRun:
    return _reactivate(
        workflow_id,
        "retry",
        ("failed", "timed_out"),
        {"error": None, "result": None, "finished_at": None, "deadline_at": None},
    )


def force_release(workflow_id: str, *, actor: str = "admin") -> int:
    """Rotate the claim (epoch + 1, holder deleted) without touching the run."""
    db = get_settings().database
    for _ in range(MAX_ATTEMPTS):
        snapshot = _claim_snapshot(workflow_id, db)
        rotation = build_rotation(
            snapshot, actor=actor, now=wall_ms(), reason="force release", kind="force_release"
        )
        if conditional_batch(rotation.conditions, rotation.writes, using=db).committed:
            notify_on_commit(WAKE_CHANNEL, workflow_id, db)
            return rotation.epoch
    raise InvalidTransitionError(workflow_id, "contended", "force_release")


def purge(
    workflow_id: str, *, actor: str = "client", finished_before: datetime | None = None
) -> int:
    """Delete terminal runs of ``workflow_id``; the claim row (epoch) stays.

    Without ``finished_before`` every run must be terminal (a live latest run
    → ``InvalidTransitionError``) and all are deleted, rotating the epoch.
    With it (retention), only terminal runs finished before then go; the
    epoch rotates only when no live run of the id remains, so retention never
    deposes a running owner.
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
            _claim_snapshot(workflow_id, db), actor=actor, now=wall_ms(), reason="purge"
        )
        conditions.extend(rotation.conditions)
        writes.extend(rotation.writes)
    result = conditional_batch(conditions, writes, using=db)
    if not result.committed:
        raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, "purge")
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


def signal(workflow_id: str, name: str, payload: Any) -> SignalMessage:
    db = get_settings().database
    if not isinstance(name, str) or not name or len(name) > 200:
        raise ValueError(
            f"signal name must be a non-empty string of at most 200 characters, got {name!r}"
        )
    # JSON only (SPEC §1): refused here, before anything is written.
    payload = normalize(f"payload of signal {name!r}", payload)
    for _ in range(MAX_ATTEMPTS):
        run = latest_run(workflow_id, db)
        if run.status in TERMINAL_STATUSES:
            raise InvalidTransitionError(workflow_id, run.status, "signal")
        message = SignalMessage(run_id=run.pk, name=name, payload=payload)
        result = conditional_batch(
            [RunCondition(run.pk, statuses=frozenset(LIVE_STATUSES))],
            [
                Insert(message),
                Update(WorkflowRun, {"pk": run.pk}, {"wake_seq": F("wake_seq") + 1}),
            ],
            using=db,
        )
        if result.committed:
            notify_on_commit(WAKE_CHANNEL, workflow_id, db)
            wake_hooks.wake_on_commit("signal", run_id=run.pk, using=db, workflow_id=workflow_id)
            return message
    raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, "signal")


def settle_async(
    token: str, *, result: Any = None, error: dict[str, Any] | None = None
) -> AsyncActivity:
    """Record an async activity's completion or failure (single use)."""
    db = get_settings().database
    if not isinstance(token, str) or not token:
        raise AsyncActivityTokenError("unknown")
    token_hash = hash_token(token)
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
    notify_on_commit(WAKE_CHANNEL, row.run.workflow_id, db)
    wake_hooks.wake_on_commit(
        "async-activity", run_id=row.run_id, using=db, workflow_id=row.run.workflow_id
    )
    row.refresh_from_db(using=db)
    return row
