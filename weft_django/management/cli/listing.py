"""``weft list [filters] [--limit N]``: runs, newest first, as a table or JSON.

Why the filters are flags collected into ``RunFilter.from_params``: the API,
the admin and the bulk actions read a filter through the same code
(``engine.run_filters``), so ``weft list --status failed --workflow order``
lists exactly the runs ``weft retry --status failed --workflow order``
retries. A bad value (an unknown status, a date that is not ISO 8601, an
unknown search attribute or a value of the wrong type) is refused with a
message naming it. Read-only.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from weft_django.models import WorkflowRun

from .args import add_filter_arguments, filter_params, positive_int
from .console import Console, Subcommand
from .runs import db, short, summary, table

#: Runs listed by default.
DEFAULT_LIMIT = 100


def add_arguments(parser: CommandParser) -> None:
    add_filter_arguments(parser)
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"list at most N runs (default {DEFAULT_LIMIT})",
    )


def run(options: dict[str, Any], console: Console) -> None:
    limit = positive_int("--limit", options["limit"]) or DEFAULT_LIMIT
    params = filter_params(options)
    runs = _runs(params, limit + 1)
    truncated = len(runs) > limit
    runs = runs[:limit]
    rows = [summary(r) for r in runs]
    body = {"runs": rows, "count": len(rows), "limit": limit, "truncated": truncated}
    lines = table(
        [("WORKFLOW ID", "NAME", "STATUS", "CREATED (UTC)", "FINISHED (UTC)")]
        + [
            (r.workflow_id, r.name, r.status, short(r.created_at), short(r.finished_at))
            for r in runs
        ]
    )
    if truncated:
        lines.append(f"(the newest {limit} shown; --limit to see more)")
    elif not runs:
        lines = ["(no runs match)"]
    console.emit(body, lines)


def _runs(params: dict[str, Any], limit: int) -> list[WorkflowRun]:
    runs = WorkflowRun.objects.using(db()).order_by("-created_at", "-pk")
    if "status" in params:
        runs = runs.filter(status__in=params["status"])
    if "workflow" in params:
        runs = runs.filter(name__in=params["workflow"])
    return list(runs[:limit])


LIST = Subcommand(
    name="list",
    help="List runs, newest first (filters: status, workflow, id, parent, times, attributes).",
    description=__doc__ or "",
    add_arguments=add_arguments,
    run=run,
)
