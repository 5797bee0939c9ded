"""The claim timeline and the journal timeline of a workflow id (one copy each).

Why one module: the run page and the holder page both show a workflow id's
claim events; the run page interleaves them with the journal, so a reader
sees which engine wrote which position under which epoch, and where the
writer changed hands.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from weft_django.inspection import format_age, format_ms
from weft_django.models import ClaimEvent, ClaimEventKind, WorkflowRun

from .base import db, json_text

#: The claim timeline and the journal timeline show at most this many rows.
TIMELINE_LIMIT = 500

#: At equal times a claim is taken before, and released after, the journal
#: writes of the same commit.
_TAKES = frozenset({ClaimEventKind.ACQUIRE, ClaimEventKind.TAKEOVER})


def _last_events(workflow_id: str) -> list[ClaimEvent]:
    """The newest ``TIMELINE_LIMIT`` claim events of ``workflow_id``, oldest first."""
    events = ClaimEvent.objects.using(db()).filter(workflow_id=workflow_id)
    return list(reversed(events.order_by("-id")[:TIMELINE_LIMIT]))


def _event_row(event: ClaimEvent) -> dict[str, Any]:
    return {
        "at": format_ms(event.at_ms),
        "kind": event.kind,
        "epoch": event.epoch,
        "engine_id": event.engine_id or "-",
        "previous_engine_id": event.previous_engine_id or "-",
        "previous_expires_at": format_ms(event.previous_expires_at),
        "reason": event.reason,
    }


def claim_timeline(workflow_id: str) -> str:
    """Every claim transition of ``workflow_id`` (the newest ``TIMELINE_LIMIT``)."""
    total = ClaimEvent.objects.using(db()).filter(workflow_id=workflow_id).count()
    rows = _last_events(workflow_id)
    return render_to_string(
        "admin/weft/includes/claim_timeline.html",
        {"events": [_event_row(e) for e in rows], "total": total, "shown": len(rows)},
    )


def journal_timeline(run: WorkflowRun) -> str:
    """The run's journal with its workflow id's claim events, interleaved by time."""
    entries = list(run.journal.order_by("position")[:TIMELINE_LIMIT])
    total = run.journal.count()
    items: list[dict[str, Any]] = [
        {
            "at_ms": e.at_ms,
            "sort": (e.at_ms, 1, e.position),
            "type": "journal",
            "position": e.position,
            "kind": e.kind,
            "target": e.target,
            "engine_id": e.engine_id,
            "epoch": e.epoch,
            "failed": e.error is not None,
            "outcome": json_text(e.error if e.error is not None else e.result, 160),
        }
        for e in entries
    ]
    items.extend(
        {
            "at_ms": ev.at_ms,
            "sort": (ev.at_ms, 0 if ev.kind in _TAKES else 2, ev.pk),
            "type": "claim",
            "kind": ev.kind,
            "engine_id": ev.engine_id,
            "epoch": ev.epoch,
            "reason": ev.reason,
        }
        for ev in _last_events(run.workflow_id)
    )
    items.sort(key=lambda item: item["sort"])
    start = items[0]["at_ms"] if items else 0
    previous_writer: tuple[str, int] | None = None
    for item in items:
        item["at"] = format_ms(item["at_ms"])
        item["offset"] = format_age((item["at_ms"] - start) / 1000)
        if item["type"] == "journal":
            writer = (item["engine_id"], item["epoch"])
            item["handover"] = previous_writer is not None and writer != previous_writer
            previous_writer = writer
    return render_to_string(
        "admin/weft/includes/journal_timeline.html",
        {"items": items, "total": total, "shown": len(entries)},
    )


__all__ = ["TIMELINE_LIMIT", "claim_timeline", "journal_timeline"]
