"""Bulk cancel / resume / retry by filter.

Invariant: *interrupting a bulk operation leaves every run either done or
untouched, and running it again finishes the rest.* The matched runs are
walked in chunks (keyset by primary key, ``chunk_size`` per chunk); each
chunk is ONE conditional batch -- its own transaction when the caller has
none -- carrying, for every run, exactly the conditions the per-run
operation (``operations.stop``/``wake``) would check: the status read (and,
for a cancel under ``workflow-lease``, the claim epoch read, rotated in the
same batch). So a chunk commits whole or not at all, and a run changed
meanwhile (a concurrent cancel, an engine finishing it) fails the chunk's
batch, which is then redone run by run through the per-run operations.
A run that is not in a status the action applies to (already cancelled,
not suspended, not failed) is counted ``skipped``, never an error, which is
what makes a rerun idempotent.

Why a batched path next to the per-run one: the per-run operations read
and write a handful of rows each (the run, its claim, its descendants,
the claim event, the wake) -- O(runs) statements for 10,000 runs. Here
a chunk's reads and writes are grouped (``pk__in`` updates, one claim
rotation ``UPDATE`` under per-claim conditions, one ``INSERT`` of the claim
events, one ``NOTIFY`` statement): O(chunks) statements, fenced the same.

Left to the per-run path on purpose: a cancel of a run whose workflow
declares a ``cancel_grace`` (a graceful request, delivered into the body),
and every run of a chunk whose batch lost a race.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from django.db import IntegrityError
from django.db.models import Exists, OuterRef, Q, QuerySet

from weft_django.conf import get_settings
from weft_django.engine.operations.bulk_writes import FIELDS, cancel_batch, reactivate_batch
from weft_django.engine.operations.cancel import cancel, default_grace_ms
from weft_django.engine.operations.wake import REACTIVATABLE, resume, retry
from weft_django.engine.runs.filters import RunFilter
from weft_django.engine.runs.metrics import record_stops
from weft_django.engine.wakes import Wake, WakeSubject, announce_many
from weft_django.errors import (
    InvalidArgumentError,
    InvalidRunFilter,
    InvalidTransitionError,
    WorkflowNotFound,
)
from weft_django.kernel.ids import check_reason
from weft_django.models import DRIVABLE_STATUSES, LIVE_STATUSES, TERMINAL_STATUSES, WorkflowRun
from weft_django.ownership.batch import conditional_batch

BulkAction = Literal["cancel", "resume", "retry"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("cancel", "resume", "retry")
#: Runs per chunk (per batch, per transaction) unless the caller says.
DEFAULT_CHUNK_SIZE = 200
MAX_CHUNK_SIZE = 1000
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class BulkResult:
    """What a bulk operation did (or, ``dry_run``, would do).

    ``matched``: runs the filter matched. ``changed``: runs this call
    changed (dry run: would change). ``skipped``: matched runs the action
    does not apply to now -- already cancelled, not suspended, not failed,
    superseded by a newer run of the workflow id, or changed by someone
    else meanwhile (dry run: would skip). ``cascaded``: live descendants a
    cancel ended with their parent (not matched themselves, or matched in a
    later chunk and then skipped). ``chunks``: batches committed or tried.
    """

    action: str
    matched: int
    changed: int
    skipped: int
    dry_run: bool
    cascaded: int = 0
    chunks: int = 0
    filter: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BulkLog:
    """Which runs a bulk operation changed and why it skipped the others
    (the admin's one summary and its ``LogEntry`` rows; optional)."""

    #: ``{"pk", "workflow_id", "name", "status"}`` of each run changed (status before).
    changed: list[dict[str, Any]] = field(default_factory=list)
    #: ``(workflow_id, reason)``: "already finished", "already cancelling", a status
    #: ("parked"), "not the latest run of their workflow id", "changed meanwhile".
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Chunk:
    changed: int
    skipped: int
    cascaded: int = 0


def _newer_run() -> Exists:
    """A run of the same workflow id listed before it (``latest_for``'s order)."""
    return Exists(
        WorkflowRun.objects.filter(workflow_id=OuterRef("workflow_id")).filter(
            Q(created_at__gt=OuterRef("created_at"))
            | Q(created_at=OuterRef("created_at"), pk__gt=OuterRef("pk"))
        )
    )


def _eligible(action: BulkAction, runs: QuerySet[WorkflowRun]) -> QuerySet[WorkflowRun]:
    """The runs of ``runs`` the action applies to now (what a dry run counts)."""
    if action == "cancel":
        return runs.filter(status__in=LIVE_STATUSES, cancel_requested_at__isnull=True)
    if action == "resume":
        return runs.filter(status__in=REACTIVATABLE["resume"])
    return runs.filter(status__in=REACTIVATABLE["retry"]).exclude(_newer_run())


def run_many(
    action: BulkAction,
    filter: RunFilter,
    *,
    dry_run: bool = False,
    allow_all: bool = False,
    reason: str = "",
    progress: Progress | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str = "client",
    log: BulkLog | None = None,
) -> BulkResult:
    """Apply ``action`` to every run ``filter`` matches, chunk by chunk
    (``log``: filled with the runs changed and skipped, for an audit)."""
    if action not in BULK_ACTIONS:
        raise ValueError(f"bulk action must be one of {', '.join(BULK_ACTIONS)}, got {action!r}")
    if not isinstance(filter, RunFilter):
        raise InvalidArgumentError(
            "filter", f"{action}_many() needs a RunFilter, got {filter!r:.100}"
        )
    if filter.is_empty() and not allow_all:
        raise InvalidRunFilter(
            "all",
            "false",
            f"this filter matches every run: {action}_many refuses it unless asked for every "
            "run (allow_all=True; the API's \"all\": true; the command's --all)",
        )
    db = get_settings().database
    return _run(
        action,
        filter.queryset(db),
        db,
        described=filter.describe(),
        dry_run=dry_run,
        reason=reason,
        progress=progress,
        chunk_size=chunk_size,
        actor=actor,
        log=log,
    )


def run_many_on(
    action: BulkAction,
    runs: QuerySet[WorkflowRun],
    *,
    reason: str = "",
    progress: Progress | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str = "client",
    log: BulkLog | None = None,
    described: str = "(selected runs)",
) -> BulkResult:
    """``run_many`` over runs picked another way (the admin's selection, its
    "select all" over a filtered changelist): the same chunks, the same fence.
    No ``allow_all`` check: the caller's selection is explicit."""
    if action not in BULK_ACTIONS:
        raise ValueError(f"bulk action must be one of {', '.join(BULK_ACTIONS)}, got {action!r}")
    db = get_settings().database
    chosen = WorkflowRun.objects.using(db).filter(pk__in=runs.order_by().values("pk"))
    return _run(
        action,
        chosen,
        db,
        described=described,
        dry_run=False,
        reason=reason,
        progress=progress,
        chunk_size=chunk_size,
        actor=actor,
        log=log,
    )


def _run(
    action: BulkAction,
    runs: QuerySet[WorkflowRun],
    db: str,
    *,
    described: str,
    dry_run: bool,
    reason: str,
    progress: Progress | None,
    chunk_size: int,
    actor: str,
    log: BulkLog | None = None,
) -> BulkResult:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgumentError(
            "chunk_size", f"chunk_size must be an integer, got {chunk_size!r:.100}"
        )
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise InvalidArgumentError(
            "chunk_size", f"chunk_size must be from 1 to {MAX_CHUNK_SIZE}, got {chunk_size}"
        )
    check_reason(reason)
    total = runs.count()
    if dry_run:
        would = _eligible(action, runs).count()
        return BulkResult(action, total, would, total - would, True, filter=described)
    done = changed = skipped = cascaded = chunks = 0
    last: Any = None
    ordered = runs.order_by("pk")
    if action == "retry":
        ordered = ordered.annotate(superseded=_newer_run())
    fields = (*FIELDS, "superseded") if action == "retry" else FIELDS
    while True:
        page = ordered if last is None else ordered.filter(pk__gt=last)
        rows = list(page.values(*fields)[:chunk_size])
        if not rows:
            break
        last = rows[-1]["pk"]
        outcome = _apply_chunk(action, rows, db, reason=reason, actor=actor, log=log)
        changed += outcome.changed
        skipped += outcome.skipped
        cascaded += outcome.cascaded
        chunks += 1
        done += len(rows)
        total = max(total, done)
        if progress is not None:
            progress(done, total)
    if progress is not None and done < total:
        progress(done, done)  # runs left the filter meanwhile: the bar still ends
    return BulkResult(action, done, changed, skipped, False, cascaded, chunks, described)


# -- one chunk -------------------------------------------------------------------
def _apply_chunk(
    action: BulkAction,
    rows: list[dict[str, Any]],
    db: str,
    *,
    reason: str,
    actor: str,
    log: BulkLog | None = None,
) -> _Chunk:
    batched: list[dict[str, Any]] = []
    one_by_one: list[dict[str, Any]] = []
    refused: list[tuple[str, str]] = []
    for row in rows:
        why = _not_applicable(action, row)
        if why is not None:
            refused.append((row["workflow_id"], why))
        elif action == "cancel" and row["status"] in DRIVABLE_STATUSES and _has_grace(row):
            one_by_one.append(row)  # a graceful request: the per-run path
        else:
            batched.append(row)
    changed: list[dict[str, Any]] = []
    cascaded = 0
    if batched:
        done = _commit_batched(action, batched, db, reason=reason, actor=actor)
        if done is None:
            one_by_one.extend(batched)  # lost a race: run by run, each re-checked
        else:
            changed.extend(batched)
            cascaded += done
    for row in one_by_one:
        if _one(action, row, db, reason=reason, actor=actor):
            changed.append(row)
        else:
            refused.append((row["workflow_id"], "changed meanwhile"))
    if log is not None:
        log.changed.extend(changed)
        log.skipped.extend(refused)
    return _Chunk(len(changed), len(rows) - len(changed), cascaded)


def _not_applicable(action: BulkAction, row: dict[str, Any]) -> str | None:
    """Why ``action`` does not apply to ``row`` as read (``None``: it does)."""
    status = row["status"]
    if action == "retry" and row.get("superseded"):
        return "not the latest run of their workflow id"
    wanted = LIVE_STATUSES if action == "cancel" else REACTIVATABLE[action]
    if status not in wanted:
        return "already finished" if status in TERMINAL_STATUSES else str(status)
    if action == "cancel" and row["cancel_requested_at"] is not None:
        return "already cancelling"
    return None


def _has_grace(row: dict[str, Any]) -> bool:
    probe = WorkflowRun(name=row["name"])
    return bool(default_grace_ms(probe))


def _one(action: BulkAction, row: dict[str, Any], db: str, *, reason: str, actor: str) -> bool:
    """The per-run operation, if ``row`` is still its workflow's latest run."""
    workflow_id = row["workflow_id"]
    latest = WorkflowRun.objects.using(db).latest_for(workflow_id)
    if latest is None or latest.pk != row["pk"]:
        return False
    try:
        if action == "cancel":
            if latest.cancel_requested_at is not None:
                return False  # asked already: a second cancel would end it at once
            cancel(workflow_id, reason, actor=actor)
        elif action == "resume":
            resume(workflow_id)
        else:
            retry(workflow_id)
    except (InvalidTransitionError, WorkflowNotFound):
        return False
    return True


def _commit_batched(
    action: BulkAction, rows: list[dict[str, Any]], db: str, *, reason: str, actor: str
) -> int | None:
    """Commit the chunk's batch; the descendants it cascaded to, or ``None``
    when a condition failed (nothing written)."""
    if action == "cancel":
        conditions, writes, ended, cascade = cancel_batch(rows, db, reason=reason, actor=actor)
    else:
        conditions, writes = reactivate_batch(action, rows)
        ended, cascade = [], []
    try:
        result = conditional_batch(conditions, writes, using=db)
    except IntegrityError:  # e.g. a retry racing a new start of the same workflow id
        return None
    if not result.committed:
        return None
    if action == "cancel":
        record_stops(db, [(r["name"], "cancelled", r["created_at"]) for r in ended])
        wakes = [Wake("finished", str(r["pk"]), db, r["workflow_id"]) for r in ended]
        parents = {str(r["parent_id"]) for r in rows if r["parent_id"] is not None}
        wakes += [Wake("child-completion", parent, db) for parent in sorted(parents)]
    else:
        event: WakeSubject = action  # resume / retry: pickup wakes
        wakes = [Wake(event, str(r["pk"]), db, r["workflow_id"]) for r in rows]
    announce_many(wakes)
    return len(cascade)


__all__ = [
    "BULK_ACTIONS",
    "DEFAULT_CHUNK_SIZE",
    "BulkAction",
    "BulkLog",
    "BulkResult",
    "Progress",
    "run_many",
    "run_many_on",
]
