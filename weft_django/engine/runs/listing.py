"""``client.list_runs`` / ``client.count_runs``: the runs a ``RunFilter`` matches.

A listing is bounded (``limit``), ordered newest first (``created_at``, then
the run id on a tie, as the API's list is), and keyset-pageable: pass the
last run id of a page as ``after`` to get the next (older) page -- no
``OFFSET``, so a page costs the same however deep it is. Each summary
carries the run's search attributes, read in one more query for the page.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.db.models import Q

from weft_django.conf import get_settings
from weft_django.engine.runs.filters import RunFilter
from weft_django.errors import InvalidRunFilter
from weft_django.models import RunSearchAttribute, WorkflowRun

#: The most runs one ``list_runs`` call returns (page with ``after`` for more).
MAX_LIMIT = 10_000
_FILTER_FIELDS = frozenset(f.name for f in fields(RunFilter))


@dataclass(frozen=True)
class RunSummary:
    """One run as ``list_runs`` returns it (a read, not a handle to act on)."""

    run_id: str
    workflow_id: str
    name: str
    status: str
    created_at: datetime
    finished_at: datetime | None
    parent_workflow_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)


def build_filter(filter: RunFilter | None, fields_: dict[str, Any]) -> RunFilter:
    """``filter``, or one built from ``RunFilter`` keyword fields (not both)."""
    unknown = sorted(set(fields_) - _FILTER_FIELDS)
    if unknown:
        raise TypeError(
            f"unknown RunFilter field(s) {', '.join(unknown)} "
            f"(fields: {', '.join(sorted(_FILTER_FIELDS))})"
        )
    if filter is not None and fields_:
        raise TypeError("give a RunFilter or RunFilter fields as keywords, not both")
    if filter is None:
        return RunFilter(**fields_)
    if not isinstance(filter, RunFilter):
        raise TypeError(f"filter must be a RunFilter, got {filter!r:.100}")
    return filter


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


def list_runs(
    filter: RunFilter | None = None,
    /,
    *,
    limit: int = 100,
    after: str | None = None,
    **fields_: Any,
) -> list[RunSummary]:
    """The runs ``filter`` matches, newest first, at most ``limit``.

    ``fields_``: ``RunFilter`` fields as a shortcut
    (``list_runs(status="failed", attributes={"customer": "acme"})``).
    ``after``: a run id from the previous page; the runs listed after it.
    """
    chosen = build_filter(filter, fields_)
    count = _check_limit(limit)
    db = get_settings().database
    runs = chosen.queryset(db)
    if after is not None:
        after = _run_id(after)
        anchor = WorkflowRun.objects.using(db).filter(pk=after).values("created_at").first()
        if anchor is None:
            raise InvalidRunFilter("after", str(after), "no run has this id")
        moment = anchor["created_at"]
        runs = runs.filter(Q(created_at__lt=moment) | Q(created_at=moment, pk__lt=after))
    rows = list(
        runs.order_by("-created_at", "-pk").values(
            "pk", "workflow_id", "name", "status", "created_at", "finished_at",
            "parent__workflow_id",
        )[:count]
    )  # fmt: skip
    attributes = attributes_of([row["pk"] for row in rows], db)
    return [
        RunSummary(
            run_id=str(row["pk"]),
            workflow_id=row["workflow_id"],
            name=row["name"],
            status=row["status"],
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            parent_workflow_id=row["parent__workflow_id"],
            attributes=attributes.get(str(row["pk"]), {}),
        )
        for row in rows
    ]


def count_runs(filter: RunFilter | None = None, /, **fields_: Any) -> int:
    """How many runs ``filter`` matches (one ``COUNT``)."""
    return build_filter(filter, fields_).queryset().count()


def attributes_of(run_ids: list[Any], db: str) -> dict[str, dict[str, Any]]:
    """``{run id: {name: value}}`` for ``run_ids`` (one query)."""
    found: dict[str, dict[str, Any]] = defaultdict(dict)
    if not run_ids:
        return found
    for row in RunSearchAttribute.objects.using(db).filter(run_id__in=run_ids).order_by("name"):
        found[str(row.run_id)][row.name] = row.value
    return found


def _run_id(value: str) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise InvalidRunFilter("after", str(value), "must be a run id (a UUID)") from None


__all__ = ["MAX_LIMIT", "RunSummary", "attributes_of", "build_filter", "count_runs", "list_runs"]
