"""Rows as the CLI shows them: a run's summary, times, and JSON cut for a terminal.

``start``, ``list``, ``show`` and the actions print the same fields of a run the same way
(ISO 8601 in JSON, a short UTC text in tables), so a script that reads one subcommand's
JSON can read another's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.operations import latest_run
from weft_django.models import WorkflowRun


def db() -> str:
    """The database weft's rows live in (``WEFT["DATABASE"]``)."""
    return get_settings().database


def latest(workflow_id: str) -> WorkflowRun:
    """The newest run of ``workflow_id`` (``WorkflowNotFound`` naming it)."""
    return latest_run(workflow_id, db())


def iso(moment: datetime | None) -> str | None:
    """A datetime as ISO 8601 in UTC (``Z``), ``None`` stays ``None``."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iso_ms(ms: int | None) -> str | None:
    """Engine-clock milliseconds as ISO 8601 in UTC."""
    if ms is None:
        return None
    try:
        return iso(datetime.fromtimestamp(ms / 1000, tz=UTC))
    except (OverflowError, OSError, ValueError):
        return None


def short(moment: datetime | None) -> str:
    """A datetime for a table cell: ``2026-12-04 17:02:11`` in the project's
    time zone (``inspection.format``), ``-`` for none."""
    if moment is None:
        return "-"
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


def clip(value: Any, limit: int = 80) -> str:
    """``value`` as one line of JSON; over ``limit`` characters, its first
    ``limit`` and a marker saying how many were left out."""
    text = json.dumps(value, sort_keys=True, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit} more characters]"


def summary(run: WorkflowRun) -> dict[str, Any]:
    """The fields ``list`` shows of a run (and ``show`` starts from)."""
    return {
        "workflow_id": run.workflow_id,
        "run_id": str(run.pk),
        "name": run.name,
        "status": run.status,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
    }


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows (the first is the header) as left-aligned columns."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


__all__ = ["clip", "db", "iso", "iso_ms", "latest", "short", "summary", "table"]
