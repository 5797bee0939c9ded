"""Export one run as a history document (``engine.replay.history``).

Invariant: **read-only.** Four reads (the run, its journal, its signals, its
updates), no write, no lock: an export is safe against production at any
time, and what it reads is what a replay of the run would read (values as
stored, payload codecs already applied).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from weft_django.conf import get_settings
from weft_django.engine.replay.history import HISTORY_FORMAT, HISTORY_VERSION, seal
from weft_django.errors import WorkflowNotFound
from weft_django.kernel.ids import check_lookup_id
from weft_django.models import JournalEntry, SignalMessage, UpdateRequest, WorkflowRun


def export_history(workflow_id: str, *, run_id: str | None = None) -> dict[str, Any]:
    """The history of ``workflow_id``'s latest run (or its run ``run_id``), sealed.

    ``WorkflowNotFound`` when the id has no run; ``ValueError`` naming a
    ``run_id`` that is not a UUID of one of its runs.
    """
    db = get_settings().database
    runs = WorkflowRun.objects.using(db)
    if run_id is None:
        run = runs.latest_for(check_lookup_id(workflow_id))
        if run is None:
            raise WorkflowNotFound(workflow_id)
    else:
        try:
            pk = uuid.UUID(str(run_id))
        except ValueError as exc:
            raise ValueError(f"--run must be a run id (a UUID), got {run_id!r}") from exc
        run = runs.filter(workflow_id=check_lookup_id(workflow_id), pk=pk).first()
        if run is None:
            raise ValueError(f"workflow {workflow_id!r} has no run {run_id!r}")
    return history_of(run, db)


def history_of(run: WorkflowRun, db: str) -> dict[str, Any]:
    """``run`` as a sealed history document."""
    journal = [
        {
            "position": position,
            "kind": kind,
            "command": command,
            "target": target,
            "result": result,
            "error": error,
            "at_ms": at_ms,
        }
        for position, kind, command, target, result, error, at_ms in JournalEntry.objects.using(db)
        .filter(run_id=run.pk)
        .order_by("position")
        .values_list("position", "kind", "command", "target", "result", "error", "at_ms")
    ]
    signals = [
        {
            "name": name,
            "payload": payload,
            "received_at": _iso(received_at),
            "consumed_at_position": consumed,
        }
        for name, payload, received_at, consumed in SignalMessage.objects.using(db)
        .filter(run_id=run.pk)
        .order_by("received_at", "pk")
        .values_list("name", "payload", "received_at", "consumed_at_position")
    ]
    updates = [
        {
            "update_id": update_id,
            "name": name,
            "args": args,
            "received_at": _iso(received_at),
            "consumed_at_position": consumed,
        }
        for update_id, name, args, received_at, consumed in UpdateRequest.objects.using(db)
        .filter(run_id=run.pk)
        .order_by("received_at", "pk")
        .values_list("update_id", "name", "args", "received_at", "consumed_at_position")
    ]
    patches = sorted({str(entry["target"]) for entry in journal if entry["kind"] == "patch"})
    return seal(
        {
            "format": HISTORY_FORMAT,
            "version": HISTORY_VERSION,
            "exported_at": _iso(datetime.now(UTC)),
            "workflow": {"name": run.name, "patches": patches},
            "run": {
                "workflow_id": run.workflow_id,
                "run_id": str(run.pk),
                "status": run.status,
                "input": run.input,
                "result": run.result,
                "error": run.error,
                "created_at": _iso(run.created_at),
                "finished_at": _iso(run.finished_at),
            },
            "journal": journal,
            "signals": signals,
            "updates": updates,
        }
    )


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


__all__ = ["export_history", "history_of"]
