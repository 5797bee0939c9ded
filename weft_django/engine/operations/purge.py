"""Purge several workflow ids, and optionally their descendants, in one batch.

Invariants:

* **All or nothing.** Every run of every selected workflow id is deleted by
  one conditional batch, each under the condition that it is still terminal
  (and, under ``workflow-lease``, each id's claim rotated in it): a run that
  came back to life meanwhile fails the batch and nothing is deleted.
* **Checked before anything is written.** An unknown id, or a selected run
  that is live (pending, running, parked, suspended), refuses the whole
  purge with ``InvalidTransitionError`` naming that workflow id and its
  status -- a descendant's too -- before the batch.
* **Descendants** (``children=True``): the workflow ids of runs whose parent
  is a run being purged, recursively. A detached child has no parent link
  (it outlives its parent by design, ``turn.detached``) and is not reached.
  Each id is visited once, so the walk ends whatever the rows say.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weft_django.conf import get_settings
from weft_django.engine.operations._loop import claim_snapshot
from weft_django.errors import InvalidTransitionError, WorkflowNotFound
from weft_django.kernel.clock import now_ms
from weft_django.models import TERMINAL_STATUSES, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import Condition, Delete, RunCondition, Write
from weft_django.ownership.transitions import build_rotation


def purge_ids(workflow_ids: Iterable[str], *, children: bool = False, actor: str = "client") -> int:
    """Delete every run of ``workflow_ids`` (and of their descendants); how many."""
    db = get_settings().database
    ids = list(dict.fromkeys(workflow_ids))
    rows = _runs_of(db, ids)
    found = {row[1] for row in rows}
    for workflow_id in ids:
        if workflow_id not in found:
            raise WorkflowNotFound(workflow_id)
    selected = set(ids)
    frontier = [row[0] for row in rows]
    while children and frontier:
        kids = set(
            WorkflowRun.objects.using(db)
            .filter(parent_id__in=frontier)
            .values_list("workflow_id", flat=True)
            .distinct()
        )
        new = sorted(kids - selected)
        selected.update(new)
        more = _runs_of(db, new)
        rows.extend(more)
        frontier = [row[0] for row in more]
    _refuse_live(rows)
    run_ids = [row[0] for row in rows]
    conditions: list[Condition] = [RunCondition(pk, statuses=TERMINAL_STATUSES) for pk in run_ids]
    writes: list[Write] = [Delete(WorkflowRun, {"pk__in": run_ids})]
    if get_settings().ownership == "workflow-lease":
        now = now_ms()
        for workflow_id in sorted(selected):
            rotation = build_rotation(
                claim_snapshot(workflow_id, db), actor=actor, now=now, reason="purge"
            )
            conditions.extend(rotation.conditions)
            writes.extend(rotation.writes)
    if not conditional_batch(conditions, writes, using=db).committed:
        _refuse_live(_runs_of(db, sorted(selected)))  # names the run that came back
        raise InvalidTransitionError(", ".join(sorted(selected)), "changed meanwhile", "purge")
    return len(run_ids)


def _runs_of(db: str, workflow_ids: list[str]) -> list[tuple[Any, str, str, Any]]:
    """``(pk, workflow_id, status, created_at)`` of every run of ``workflow_ids``."""
    if not workflow_ids:
        return []
    return list(
        WorkflowRun.objects.using(db)
        .filter(workflow_id__in=workflow_ids)
        .order_by("workflow_id", "created_at", "pk")
        .values_list("pk", "workflow_id", "status", "created_at")
    )


def _refuse_live(rows: list[tuple[Any, str, str, Any]]) -> None:
    for _, workflow_id, status, _ in rows:
        if status not in TERMINAL_STATUSES:
            raise InvalidTransitionError(workflow_id, status, "purge")


__all__ = ["purge_ids"]
