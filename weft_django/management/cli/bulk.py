"""The filter form of ``weft cancel|retry|resume``: every run a filter matches.

Why the guards: one command can change thousands of runs. A filter that
matches everything is refused unless ``--all`` says so (the client refuses
it: ``invalid_run_filter`` on the key ``all``); ``--dry-run`` prints how many
runs match and how many the action would change, and changes nothing; a
person at a terminal is asked to confirm the count first (``--yes`` skips
the question; a script -- no terminal, or ``--json`` -- is not asked: its
filter and ``--all`` are its confirmation). The work itself is
``client.cancel_many`` / ``retry_many`` / ``resume_many``: ``RunFilter``
reads the flags, the client acts in fenced chunks (an interruption leaves
each run done or untouched; running the command again finishes the rest)
and reports each chunk to the progress bar drawn on stderr. Every run
changed gets an admin History entry naming the operator (``cli.operator``).
This module only wires the flags to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.engine.operations.bulk import BULK_ACTIONS, BulkLog, run_many
from weft_django.engine.runs.filters import RunFilter
from weft_django.models import WorkflowRun

from .console import EXIT_FAILED, EXIT_USAGE, CliError, Console
from .operator import Operator, audit_runs

#: The flags only the filter form takes.
BULK_FLAGS = ("all", "dry_run", "yes")

#: What a History entry says the action did.
PAST = {"cancel": "Cancelled", "retry": "Retried", "resume": "Resumed"}

_MANY: dict[str, Callable[..., client.BulkResult]] = {
    "cancel": client.cancel_many,
    "retry": client.retry_many,
    "resume": client.resume_many,
}


def add_arguments(parser: CommandParser) -> None:
    group = parser.add_argument_group("the filter form")
    group.add_argument(
        "--all",
        dest="all",
        action="store_true",
        help="act on every run when no filter narrows it (required then)",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="print how many runs the filter matches and would change; change nothing",
    )
    group.add_argument(
        "--yes", action="store_true", help="do not ask for confirmation at a terminal"
    )


def refuse_bulk_flags(options: dict[str, Any]) -> None:
    """The one-run form takes none of ``BULK_FLAGS``: say so rather than ignore it."""
    given = [f"--{name.replace('_', '-')}" for name in BULK_FLAGS if options.get(name)]
    if given:
        raise CliError(
            "invalid_argument",
            f"only the filter form (filter flags instead of a WORKFLOW_ID) takes "
            f"{', '.join(given)}; got the workflow id {options['workflow_id']!r}",
            EXIT_USAGE,
        )


def run(
    action: str, params: dict[str, Any], options: dict[str, Any], console: Console, op: Operator
) -> None:
    run_filter = RunFilter.from_params(params)  # InvalidRunFilter names the bad key and value
    many = _MANY[action]
    kwargs: dict[str, Any] = {
        "allow_all": bool(options["all"]),
        "reason": options.get("reason") or "",
        "actor": op.actor,
    }
    if options["dry_run"]:
        _report(many(run_filter, dry_run=True, **kwargs), console)
        return
    if console.interactive and not options["yes"]:
        preview = many(run_filter, dry_run=True, **kwargs)
        question = (
            f"{action}: {preview.matched} run(s) match {preview.filter}; "
            f"{preview.changed} would change. Go on?"
        )
        if not console.confirm(question):
            raise CliError(
                "aborted", f"{action} not confirmed: nothing changed", EXIT_FAILED, action=action
            )
    log = BulkLog()
    bulk_action = next(a for a in BULK_ACTIONS if a == action)
    result = run_many(bulk_action, run_filter, progress=console.progress(action), log=log, **kwargs)
    changed = [
        WorkflowRun(pk=row["pk"], workflow_id=row["workflow_id"], name=row["name"])
        for row in log.changed
    ]
    audit_runs(op, changed, f"{PAST[action]} with weft {action} ({result.filter})")
    _report(result, console)


def _report(result: client.BulkResult, console: Console) -> None:
    if result.dry_run:
        text = (
            f"{result.action} (dry run): {result.matched} run(s) match, {result.changed} would "
            f"change, {result.skipped} would be skipped; nothing changed"
        )
    else:
        text = (
            f"{result.action}: {result.matched} run(s) matched, {result.changed} changed, "
            f"{result.skipped} skipped"
        )
        if result.cascaded:
            text += f" ({result.cascaded} live descendant run(s) cancelled with their parents)"
    console.emit(result.as_dict(), text)
