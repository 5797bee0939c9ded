"""Bulk cancel / resume / retry by filter (issue #20 part 3).

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

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from django.db import IntegrityError
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from weft_django.clock import now_ms
from weft_django.conf import get_settings
from weft_django.engine.operations.cancel import cancel, default_grace_ms
from weft_django.engine.operations.wake import resume, retry
from weft_django.engine.run_filters import RunFilter
from weft_django.engine.run_metrics import record_stops
from weft_django.engine.wakes import Wake, WakeSubject, announce_many
from weft_django.errors import InvalidRunFilter, InvalidTransitionError, WorkflowNotFound
from weft_django.models import (
    DRIVABLE_STATUSES,
    LIVE_STATUSES,
    JournalEntry,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership.batch import (
    Condition,
    Delete,
    RunCondition,
    Update,
    Write,
    conditional_batch,
)
from weft_django.ownership.transitions import ClaimSnapshot, build_bulk_rotation

BulkAction = Literal["cancel", "resume", "retry"]
BULK_ACTIONS: tuple[BulkAction, ...] = ("cancel", "resume", "retry")
#: Runs per chunk (per batch, per transaction) unless the caller says.
DEFAULT_CHUNK_SIZE = 200
MAX_CHUNK_SIZE = 1000
Progress = Callable[[int, int], None]

_RETRYABLE = ("failed", "timed_out")
_FIELDS = ("pk", "workflow_id", "name", "status", "parent_id", "created_at", "cancel_requested_at")


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
        return runs.filter(status="suspended")
    return runs.filter(status__in=_RETRYABLE).exclude(_newer_run())


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
) -> BulkResult:
    """Apply ``action`` to every run ``filter`` matches, chunk by chunk."""
    if action not in BULK_ACTIONS:
        raise ValueError(f"bulk action must be one of {', '.join(BULK_ACTIONS)}, got {action!r}")
    if not isinstance(filter, RunFilter):
        raise TypeError(f"{action}_many() needs a RunFilter, got {filter!r:.100}")
    if filter.is_empty() and not allow_all:
        raise InvalidRunFilter(
            "all",
            "false",
            f"this filter matches every run: {action}_many refuses it unless asked for every "
            "run (allow_all=True; the API's \"all\": true; the command's --all)",
        )
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise ValueError(f"chunk_size must be an integer, got {chunk_size!r}")
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise ValueError(f"chunk_size must be from 1 to {MAX_CHUNK_SIZE}, got {chunk_size}")
    db = get_settings().database
    runs = filter.queryset(db)
    total = runs.count()
    described = filter.describe()
    if dry_run:
        would = _eligible(action, runs).count()
        return BulkResult(action, total, would, total - would, True, filter=described)
    done = changed = skipped = cascaded = chunks = 0
    last: Any = None
    ordered = runs.order_by("pk")
    if action == "retry":
        ordered = ordered.annotate(superseded=_newer_run())
    fields = (*_FIELDS, "superseded") if action == "retry" else _FIELDS
    while True:
        page = ordered if last is None else ordered.filter(pk__gt=last)
        rows = list(page.values(*fields)[:chunk_size])
        if not rows:
            break
        last = rows[-1]["pk"]
        outcome = _apply_chunk(action, rows, db, reason=reason, actor=actor)
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
    action: BulkAction, rows: list[dict[str, Any]], db: str, *, reason: str, actor: str
) -> _Chunk:
    batched: list[dict[str, Any]] = []
    one_by_one: list[dict[str, Any]] = []
    for row in rows:
        if action == "cancel":
            if row["status"] not in LIVE_STATUSES or row["cancel_requested_at"] is not None:
                continue
            if row["status"] in DRIVABLE_STATUSES and _has_grace(row):
                one_by_one.append(row)  # a graceful request: the per-run path
                continue
        elif action == "resume":
            if row["status"] != "suspended":
                continue
        elif row["status"] not in _RETRYABLE or row["superseded"]:
            continue
        batched.append(row)
    changed = cascaded = 0
    if batched:
        done = _commit_batched(action, batched, db, reason=reason, actor=actor)
        if done is None:
            one_by_one.extend(batched)  # lost a race: run by run, each re-checked
        else:
            changed += len(batched)
            cascaded += done
    for row in one_by_one:
        if _one(action, row, db, reason=reason, actor=actor):
            changed += 1
    return _Chunk(changed, len(rows) - changed, cascaded)


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
        conditions, writes, ended, cascade = _cancel_batch(rows, db, reason=reason, actor=actor)
    else:
        conditions, writes = _reactivate_batch(action, rows)
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


def _run_conditions(rows: Sequence[dict[str, Any]]) -> list[Condition]:
    return [
        RunCondition(r["pk"], statuses=frozenset({r["status"]}), label=f"run:{r['workflow_id']}")
        for r in rows
    ]


def _cancel_batch(
    rows: list[dict[str, Any]], db: str, *, reason: str, actor: str
) -> tuple[list[Condition], list[Write], list[dict[str, Any]], list[dict[str, Any]]]:
    """``run_stop(cancel_spec(reason))`` of every row, cascade included, grouped."""
    cascade = _live_descendants(rows, db)
    ended = [*rows, *cascade]
    conditions = _run_conditions(ended)
    finished = timezone.now()

    def stopped(error: dict[str, Any]) -> dict[str, Any]:
        return {"status": "cancelled", "version": F("version") + 1, "error": error,
                "finished_at": finished}  # fmt: skip

    writes: list[Write] = [
        Update(
            WorkflowRun,
            {"pk__in": [r["pk"] for r in rows]},
            stopped({"type": "Cancelled", "message": reason or "cancelled"}),
        )
    ]
    by_top: dict[str, list[Any]] = {}
    for child in cascade:
        by_top.setdefault(child["top"], []).append(child["pk"])
    for top, pks in by_top.items():
        message = f"parent {top} was cancelled"
        writes.append(
            Update(WorkflowRun, {"pk__in": pks}, stopped({"type": "Cancelled", "message": message}))
        )
    ended_pks = {r["pk"] for r in ended}
    writes.append(Delete(Timer, {"run_id__in": sorted(ended_pks, key=str)}))
    parents = sorted({r["parent_id"] for r in ended if r["parent_id"] not in (None, *ended_pks)})
    if parents:  # a child reached a terminal state: wake its parent (``store.bump_parent``)
        writes.append(Update(WorkflowRun, {"pk__in": parents}, {"wake_seq": F("wake_seq") + 1}))
    if get_settings().ownership == "workflow-lease":
        now = now_ms()
        snapshots = _snapshots([r["workflow_id"] for r in rows], db)
        c, w = build_bulk_rotation(snapshots, actor=actor, now=now, reason=reason or "cancel")
        conditions.extend(c)
        writes.extend(w)
        if cascade:
            snapshots = _snapshots([r["workflow_id"] for r in cascade], db)
            c, w = build_bulk_rotation(snapshots, actor=actor, now=now, reason="parent cancel")
            conditions.extend(c)
            writes.extend(w)
    return conditions, writes, ended, cascade


def _reactivate_batch(
    action: BulkAction, rows: list[dict[str, Any]]
) -> tuple[list[Condition], list[Write]]:
    """``operations.wake``'s resume / retry of every row, grouped."""
    values: dict[str, Any] = {
        "status": "pending",
        "version": F("version") + 1,
        "wake_seq": F("wake_seq") + 1,
        "suspended_reason": "",
        "turn_failures": 0,
        "turn_retry_at": None,
        "error": None,
    }
    pks = [r["pk"] for r in rows]
    if action == "retry":
        values.update(result=None, finished_at=None, deadline_at=None, cancel_deadline_at=None)
    writes: list[Write] = [Update(WorkflowRun, {"pk__in": pks}, values)]
    if action == "retry":
        writes.append(DropTrailingErrors(pks))
    return _run_conditions(rows), writes


@dataclass(frozen=True)
class DropTrailingErrors:
    """Retry of many runs: ``wake._DropTrailingErrors`` of each, as one ``DELETE``
    -- every entry after the run's last entry without an error."""

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


def _live_descendants(rows: list[dict[str, Any]], db: str) -> list[dict[str, Any]]:
    """Every live descendant of ``rows`` not among them, with ``top``: the
    workflow id of the row it descends from (one query per generation)."""
    seen = {r["pk"] for r in rows}
    top_of = {r["pk"]: r["workflow_id"] for r in rows}
    found: list[dict[str, Any]] = []
    frontier = list(seen)
    while frontier:
        children = list(
            WorkflowRun.objects.using(db)
            .filter(parent_id__in=frontier, status__in=LIVE_STATUSES)
            .values(*_FIELDS)
        )
        frontier = []
        for child in children:
            if child["pk"] in seen:
                continue
            seen.add(child["pk"])
            top_of[child["pk"]] = child["top"] = top_of[child["parent_id"]]
            found.append(child)
            frontier.append(child["pk"])
    return found


def _snapshots(workflow_ids: list[str], db: str) -> list[ClaimSnapshot]:
    """The claim rows as rotations read them, in one query (absent: epoch 0)."""
    rows = {
        row[0]: ClaimSnapshot(*row)
        for row in WorkflowClaim.objects.using(db)
        .filter(pk__in=workflow_ids)
        .values_list("workflow_id", "epoch", "engine_id", "expires_at", "claimed_at")
    }
    return [rows.get(wid, ClaimSnapshot(wid)) for wid in sorted(set(workflow_ids))]


__all__ = [
    "BULK_ACTIONS",
    "DEFAULT_CHUNK_SIZE",
    "BulkAction",
    "BulkResult",
    "DropTrailingErrors",
    "Progress",
    "run_many",
]
