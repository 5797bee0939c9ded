"""The claim timeline and the journal timeline of a workflow id (one copy each).

The run page and the holder page render a workflow id's claim events through the same
``claim_timeline``, so both show the same rows; the run page interleaves them with the journal,
so a reader sees which engine wrote which position under which epoch, and where the writer
changed hands.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string

from weft_django.inspection import format_age, format_ms
from weft_django.models import ClaimEvent, ClaimEventKind, WorkflowRun

from .base import db, payload_text

#: The claim timeline and the journal timeline show at most this many rows.
TIMELINE_LIMIT = 500

#: Journal entries on one page of the run page's journal timeline.
JOURNAL_PAGE_SIZE = 200

#: The run page's query parameter naming the journal page (1-based).
JOURNAL_PAGE_PARAM = "journal_page"

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


def journal_timeline(run: WorkflowRun, page: int = 1) -> str:
    """One page (``JOURNAL_PAGE_SIZE`` entries, by position) of the run's journal,
    with its workflow id's claim events of that stretch of time interleaved.

    Bounded: a page reads at most ``JOURNAL_PAGE_SIZE`` entries and
    ``TIMELINE_LIMIT`` claim events whatever the run's length, so the run
    page's size and time do not grow with its history.
    """
    journal = run.journal.order_by("position")
    total = journal.count()
    pages = max(1, -(-total // JOURNAL_PAGE_SIZE))
    page = min(max(1, page), pages)
    offset = (page - 1) * JOURNAL_PAGE_SIZE
    entries = list(journal[offset : offset + JOURNAL_PAGE_SIZE])
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
            "outcome": payload_text(e.error if e.error is not None else e.result, 160),
        }
        for e in entries
    ]
    events = ClaimEvent.objects.using(db()).filter(workflow_id=run.workflow_id)
    if entries and page > 1:
        events = events.filter(at_ms__gte=entries[0].at_ms)
    if entries and page < pages:
        events = events.filter(at_ms__lte=entries[-1].at_ms)
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
        for ev in reversed(events.order_by("-id")[:TIMELINE_LIMIT])
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
        {
            "items": items,
            "total": total,
            "shown": len(entries),
            "first": offset,
            "last": offset + len(entries) - 1,
            "page": page,
            "pages": pages,
            "previous_page": page - 1 if page > 1 else None,
            "next_page": page + 1 if page < pages else None,
            "param": JOURNAL_PAGE_PARAM,
        },
    )


__all__ = [
    "JOURNAL_PAGE_PARAM",
    "JOURNAL_PAGE_SIZE",
    "TIMELINE_LIMIT",
    "claim_timeline",
    "journal_timeline",
]
