"""``weft show WORKFLOW_ID [--journal N]``: one run, what it waits for, its journal.

Why these three: an operator asking "where is this workflow?" needs its
status and times (and error), what it is waiting for now -- timers, signals,
async activities, children, a queue slot: ``engine.run_waits``, the same
answer the admin and the API give -- and what it did, as the journal's
timeline. The journal is bounded: the last ``--journal`` entries (default
50, ``0`` for none), with the total, so a run of a million events prints
fast. Read-only: nothing is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser

from weft_django.engine.runs.listing import attributes_of
from weft_django.engine.runs.waits import run_waits
from weft_django.inspection.attempts import latest_attempts, shown_error
from weft_django.inspection.format import format_age, format_instant
from weft_django.inspection.payload_view import may_view_payloads, shown, viewing
from weft_django.models import ActivityAttempt, JournalEntry, WorkflowRun

from .console import EXIT_USAGE, CliError, Console, Subcommand
from .error_text import error_lines
from .runs import clip, db, iso, iso_ms, latest, summary

#: Journal entries shown by default.
DEFAULT_JOURNAL = 50


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the workflow to show")
    parser.add_argument(
        "--as-user",
        metavar="USERNAME",
        help="show payloads as this user may see them (hidden without weft.view_payload)",
    )
    parser.add_argument(
        "--journal",
        type=int,
        default=DEFAULT_JOURNAL,
        metavar="N",
        help=f"show the last N journal entries (default {DEFAULT_JOURNAL}; 0: none)",
    )


def run(options: dict[str, Any], console: Console) -> None:
    limit: int = options["journal"]
    if limit < 0:
        raise CliError(
            "invalid_argument",
            f"--journal must be 0 or more, got {limit}",
            EXIT_USAGE,
            option="--journal",
            value=limit,
        )
    allowed = _may_view(options.get("as_user"))
    with viewing(allowed):
        _show(options, console, limit)


def _may_view(username: str | None) -> bool:
    """The shell's operator holds the settings and keys; ``--as-user`` narrows it."""
    if not username:
        return True
    from django.contrib.auth import get_user_model

    user = get_user_model()._default_manager.filter(username=username).first()
    if user is None:
        raise CliError(
            "invalid_argument",
            f"--as-user {username!r}: no such user",
            EXIT_USAGE,
            option="--as-user",
            value=username,
        )
    return may_view_payloads(user)


def _show(options: dict[str, Any], console: Console, limit: int) -> None:
    run = latest(options["workflow_id"])
    waits = [w.as_dict() for w in run_waits(run)]
    journal = JournalEntry.objects.using(db()).filter(run_id=run.pk)
    total = journal.count()
    entries = list(reversed(journal.order_by("-position")[:limit])) if limit else []
    attempts, attempts_total = latest_attempts(run.pk, db(), limit)
    body = {
        **summary(run),
        "updated_at": iso(run.updated_at),
        "input": shown(run.input),
        "result": shown(run.result),
        "error": shown(run.error),
        "parent_workflow_id": _parent(run),
        "attributes": {
            name: iso(value) if isinstance(value, datetime) else value
            for name, value in attributes_of([run.pk], db()).get(str(run.pk), {}).items()
        },
        "queue": run.queue,
        "cancel_requested_at": iso(run.cancel_requested_at),
        "cancel_reason": run.cancel_reason,
        "suspended_reason": run.suspended_reason,
        "waiting_for": waits,
        "journal": [_entry(e) for e in entries],
        "journal_total": total,
        "attempts": [_attempt(a) for a in attempts],
        "attempts_total": attempts_total,
    }
    console.emit(body, _text(body))


def _parent(run: WorkflowRun) -> str | None:
    if run.parent_id is None:
        return None
    parent = WorkflowRun.objects.using(db()).filter(pk=run.parent_id).values_list("workflow_id")
    row = parent.first()
    return row[0] if row else None


def _entry(entry: JournalEntry) -> dict[str, Any]:
    failed = entry.error is not None
    return {
        "position": entry.position,
        "at": iso_ms(entry.at_ms),
        "kind": entry.kind,
        "target": entry.target,
        "failed": failed,
        "summary": clip(shown(entry.error if failed else entry.result)),
        "engine_id": entry.engine_id,
        "epoch": entry.epoch,
    }


def _attempt(attempt: ActivityAttempt) -> dict[str, Any]:
    return {
        "position": attempt.position,
        "attempt": attempt.attempt,
        "activity": attempt.activity,
        "started_at": iso_ms(attempt.started_at),
        "ended_at": iso_ms(attempt.ended_at),
        "took_s": (attempt.ended_at - attempt.started_at) / 1000,
        "outcome": attempt.outcome,
        "error": shown_error(attempt),
        "engine_id": attempt.engine_id,
        "epoch": attempt.epoch,
    }


def _text(body: dict[str, Any]) -> list[str]:
    lines = [
        f"workflow {body['workflow_id']}  ({body['name']})",
        f"  run:       {body['run_id']}",
        f"  status:    {body['status']}",
        f"  created:   {_when(body['created_at'])}",
        f"  started:   {_when(body['started_at'])}",
        f"  finished:  {_when(body['finished_at'])}",
    ]
    if body["parent_workflow_id"]:
        lines.append(f"  parent:    {body['parent_workflow_id']}")
    if body["attributes"]:
        pairs = " ".join(f"{k}={v}" for k, v in body["attributes"].items())
        lines.append(f"  attributes: {pairs}")
    if body["cancel_requested_at"]:
        lines.append(
            f"  cancel requested at {_when(body['cancel_requested_at'])}: {body['cancel_reason']}"
        )
    if body["suspended_reason"]:
        lines.append(f"  suspended: {body['suspended_reason']}")
    if body["status"] == "completed":
        lines.append(f"  result:    {clip(body['result'], 200)}")
    if body["error"] is not None:
        lines.append("  error:")
        lines += error_lines(body["error"], indent="    ")
    lines.append("waiting for:")
    lines += [f"  - {w['text']}" for w in body["waiting_for"]] or ["  (nothing)"]
    shown, total = len(body["journal"]), body["journal_total"]
    more = f", the last {shown} shown" if shown < total else ""
    lines.append(f"journal ({total} entries{more}):")
    for e in body["journal"]:
        mark = "FAILED " if e["failed"] else ""
        target = f" {e['target']}" if e["target"] else ""
        lines.append(
            f"  {e['position']:>5}  {_when(e['at'], False)}  {e['kind']}{target}  "
            f"{mark}{e['summary']}"
        )
    if body["attempts_total"]:
        shown, total = len(body["attempts"]), body["attempts_total"]
        more = f", the last {shown} shown" if shown < total else ""
        lines.append(f"activity attempts ({total}{more}):")
        for a in body["attempts"]:
            error = a["error"] if isinstance(a["error"], str) else ("hidden" if a["error"] else "")
            lines.append(
                f"  {a['position']:>5}  {_when(a['started_at'], False)}  {a['activity']} "
                f"attempt {a['attempt']}  {a['outcome']} after {format_age(a['took_s'])}"
                f"  {a['engine_id']}{'  ' + error if error else ''}"
            )
    return lines


#: What `--help` says (for people using the command).
USAGE = """Show a workflow's latest run: its status and times, its error (headline and
traceback), what it waits for now, and the last --journal entries of its
history and of its activity attempts. Changes nothing."""


def _when(value: str | None, with_relative: bool = True) -> str:
    """An ISO instant of the JSON body as a person reads it (``inspection.format``)."""
    if not value:
        return "-"
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return format_instant(moment, with_relative=with_relative)


SHOW = Subcommand(
    name="show",
    help="Show a workflow's latest run: status, what it waits for, its journal timeline.",
    description=USAGE,
    add_arguments=add_arguments,
    run=run,
)
