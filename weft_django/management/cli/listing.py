"""``weft list [filters] [--limit N]``: runs, newest first, as a table or JSON.

Why the filters are flags collected into ``RunFilter.from_params``: the API,
the admin and the bulk actions read a filter through the same code
(``engine.run_filters``), so ``weft list --status failed --workflow order``
lists exactly the runs ``weft retry --status failed --workflow order``
retries. A bad value (an unknown status, a date that is not ISO 8601, an
unknown search attribute or a value of the wrong type) is refused with a
message naming it. Pages are keyset pages (``--after`` the last run id
shown), so a deep page costs what the first does. Read-only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.engine.runs.filters import RunFilter
from weft_django.engine.runs.listing import MAX_LIMIT, RunSummary

from .args import add_filter_arguments, filter_params, positive_int
from .console import Console, Subcommand
from .runs import iso, short, table

#: Runs listed by default.
DEFAULT_LIMIT = 100


def add_arguments(parser: CommandParser) -> None:
    add_filter_arguments(parser)
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"list at most N runs (default {DEFAULT_LIMIT}; at most {MAX_LIMIT})",
    )
    parser.add_argument(
        "--after",
        metavar="RUN_ID",
        help="the runs listed after this run id (the next page: pass the last run id shown)",
    )


def run(options: dict[str, Any], console: Console) -> None:
    limit = positive_int("--limit", options["limit"]) or DEFAULT_LIMIT
    run_filter = RunFilter.from_params(filter_params(options))
    runs = client.list_runs(run_filter, limit=limit, after=options["after"])
    # A full page: one more (bounded) read says whether anything is left.
    truncated = len(runs) == limit and bool(
        client.list_runs(run_filter, limit=1, after=runs[-1].run_id)
    )
    rows = [_row(r) for r in runs]
    body = {"runs": rows, "count": len(rows), "limit": limit, "truncated": truncated}
    console.emit(body, _text(rows, runs, limit, truncated))


def _row(run: RunSummary) -> dict[str, Any]:
    return {
        "workflow_id": run.workflow_id,
        "run_id": run.run_id,
        "name": run.name,
        "status": run.status,
        "created_at": iso(run.created_at),
        "finished_at": iso(run.finished_at),
        "parent_workflow_id": run.parent_workflow_id,
        "attributes": {k: _value(v) for k, v in run.attributes.items()},
    }


def _value(value: Any) -> Any:
    return iso(value) if isinstance(value, datetime) else value


def _text(
    rows: list[dict[str, Any]], runs: list[RunSummary], limit: int, truncated: bool
) -> list[str]:
    if not rows:
        return ["(no runs match)"]
    header = ("WORKFLOW ID", "NAME", "STATUS", "CREATED (UTC)", "FINISHED (UTC)")
    with_attributes = any(row["attributes"] for row in rows)
    cells = [header + (("ATTRIBUTES",) if with_attributes else ())]
    for row, summary in zip(rows, runs, strict=True):
        line: tuple[str, ...] = (
            row["workflow_id"],
            row["name"],
            row["status"],
            short(summary.created_at),
            short(summary.finished_at),
        )
        if with_attributes:
            line += (" ".join(f"{k}={v}" for k, v in row["attributes"].items()),)
        cells.append(line)
    lines = table(cells)
    if truncated:
        lines.append(
            f"(the newest {limit} shown; more with --after {runs[-1].run_id} or a larger --limit)"
        )
    return lines


#: What `--help` says (for people using the command).
USAGE = """List runs, newest first, as a table (or JSON with --json).

Narrow the list with filter flags (--status, --workflow, --id, --parent,
--created-after, --attr NAME=VALUE, ...): the same flags select the runs of
`weft cancel`, `weft retry` and `weft resume`. A bad filter value is refused
with a message naming it (exit 2). Page on with --after, the last run id shown."""


LIST = Subcommand(
    name="list",
    help="List runs, newest first (filters: status, workflow, id, parent, times, attributes).",
    description=USAGE,
    add_arguments=add_arguments,
    run=run,
)
