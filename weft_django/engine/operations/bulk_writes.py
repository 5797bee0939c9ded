"""The grouped conditions and writes of one bulk chunk (``operations.bulk``).

Invariant: for every run of the chunk, the batch carries exactly the
conditions its per-run operation would (``stop._stop_writes`` for a cancel,
cascade included; ``wake.reactivation_writes`` for resume and retry) -- only the
*writes* are grouped (``pk__in`` updates, one claim rotation ``UPDATE``
under per-claim conditions, one claim-event ``INSERT``, one journal
``DELETE``), so a chunk costs O(1) statements and is fenced the same.
Pure builders plus two reads (descendants, claim snapshots); nothing here
commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from django.db.models import F
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.operations.wake import reactivation_writes
from weft_django.kernel.clock import now_ms
from weft_django.models import LIVE_STATUSES, Timer, WorkflowClaim, WorkflowRun
from weft_django.ownership.ops import Condition, Delete, RunCondition, Update, Write
from weft_django.ownership.transitions import ClaimSnapshot, build_bulk_rotation

#: The run columns a chunk reads (and a cascade reads of each descendant).
FIELDS = ("pk", "workflow_id", "name", "status", "parent_id", "created_at", "cancel_requested_at")


def run_conditions(rows: Sequence[dict[str, Any]]) -> list[Condition]:
    return [
        RunCondition(r["pk"], statuses=frozenset({r["status"]}), label=f"run:{r['workflow_id']}")
        for r in rows
    ]


def cancel_batch(
    rows: list[dict[str, Any]], db: str, *, reason: str, actor: str
) -> tuple[list[Condition], list[Write], list[dict[str, Any]], list[dict[str, Any]]]:
    """``run_stop(cancel_spec(reason))`` of every row, cascade included, grouped."""
    cascade = live_descendants(rows, db)
    ended = [*rows, *cascade]
    conditions = run_conditions(ended)
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
        read = snapshots([r["workflow_id"] for r in rows], db)
        c, w = build_bulk_rotation(read, actor=actor, now=now, reason=reason or "cancel")
        conditions.extend(c)
        writes.extend(w)
        if cascade:
            read = snapshots([r["workflow_id"] for r in cascade], db)
            c, w = build_bulk_rotation(read, actor=actor, now=now, reason="parent cancel")
            conditions.extend(c)
            writes.extend(w)
    return conditions, writes, ended, cascade


def reactivate_batch(
    action: Literal["resume", "retry"], rows: list[dict[str, Any]]
) -> tuple[list[Condition], list[Write]]:
    """``operations.wake``'s resume / retry of every row, grouped."""
    return run_conditions(rows), reactivation_writes(action, [r["pk"] for r in rows])


def live_descendants(rows: list[dict[str, Any]], db: str) -> list[dict[str, Any]]:
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
            .values(*FIELDS)
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


def snapshots(workflow_ids: list[str], db: str) -> list[ClaimSnapshot]:
    """The claim rows as rotations read them, in one query (absent: epoch 0)."""
    rows = {
        row[0]: ClaimSnapshot(*row)
        for row in WorkflowClaim.objects.using(db)
        .filter(pk__in=workflow_ids)
        .values_list("workflow_id", "epoch", "engine_id", "expires_at", "claimed_at")
    }
    return [rows.get(wid, ClaimSnapshot(wid)) for wid in sorted(set(workflow_ids))]


__all__ = [
    "FIELDS",
    "cancel_batch",
    "live_descendants",
    "reactivate_batch",
    "run_conditions",
    "snapshots",
]
