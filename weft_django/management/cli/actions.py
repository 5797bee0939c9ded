"""``weft cancel|retry|resume WORKFLOW_ID`` -- or filter flags instead of the id.

The three subcommands differ only in the client call (``client.cancel`` with a ``--reason``,
``client.retry``, ``client.resume``) and share the rest: one workflow id acts on its latest
run; filter flags act on every matching run through ``client.cancel_many`` /
``retry_many`` / ``resume_many`` (the CLI's ``bulk``). A run whose status does not allow
the action is refused by the client (``invalid_transition``, exit 4) and nothing is
written. Every run changed gets an admin History entry naming the operator
(``cli.operator``: ``--user``, else the system user, the OS user either way).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.models import WorkflowRun

from . import bulk
from .args import add_filter_arguments, filter_params
from .console import EXIT_USAGE, CliError, Console, Subcommand
from .operator import Operator, add_user_argument, audit_runs, operator
from .runs import summary


def did(action: str, status: str) -> str:
    """``Cancelled``, ``Cancel requested`` (a grace: the run cleans up first) ..."""
    if action == "cancel" and status != "cancelled":
        return "Cancel requested"
    return bulk.PAST[action]


@dataclass(frozen=True)
class Action:
    """One action: its name, the one-run client call and what it says."""

    name: str
    call: Callable[[str, dict[str, Any], Operator], WorkflowRun]
    help: str
    description: str


def _cancel(workflow_id: str, options: dict[str, Any], op: Operator) -> WorkflowRun:
    return client.cancel(workflow_id, options["reason"] or "", actor=op.actor)


ACTIONS: dict[str, Action] = {
    "cancel": Action(
        "cancel",
        _cancel,
        "Cancel a workflow's latest run, or every run a filter matches (--dry-run, --all).",
        """A workflow with a cancel grace cleans up first (the run shows "cancel
        requested" until it ends cancelled); otherwise it ends at once, with its
        live children. --reason is recorded on the run. A finished run refuses
        (exit 4). With filter flags instead of a workflow id, every matching run
        is cancelled: --dry-run prints the count and changes nothing; --all is
        required when no filter narrows it; a terminal is asked to confirm
        unless --yes.""",
    ),
    "retry": Action(
        "retry",
        lambda workflow_id, _options, _op: client.retry(workflow_id),
        "Retry a failed or timed-out run, or every run a filter matches (--dry-run, --all).",
        """A failed or timed-out run goes back to pending and replays its history
        up to the step that failed, which runs again. Any other status refuses
        (exit 4). With filter flags instead of a workflow id, every matching run
        is retried.""",
    ),
    "resume": Action(
        "resume",
        lambda workflow_id, _options, _op: client.resume(workflow_id),
        "Resume a suspended run, or every run a filter matches (--dry-run, --all).",
        """A suspended run goes on from where it stopped. Any other status refuses
        (exit 4). With filter flags instead of a workflow id, every matching run
        is resumed.""",
    ),
}


def _adder(action: Action) -> Callable[[CommandParser], None]:
    def add_arguments(parser: CommandParser) -> None:
        parser.add_argument(
            "workflow_id",
            nargs="?",
            metavar="WORKFLOW_ID",
            help="the workflow to act on (or filter flags instead)",
        )
        if action.name == "cancel":
            parser.add_argument("--reason", help="recorded with the cancellation (default: none)")
        add_filter_arguments(parser)
        bulk.add_arguments(parser)
        add_user_argument(parser)

    return add_arguments


def _runner(action: Action) -> Callable[[dict[str, Any], Console], None]:
    def run(options: dict[str, Any], console: Console) -> None:
        workflow_id: str | None = options["workflow_id"]
        params = filter_params(options)
        op = operator(options)
        if workflow_id is None:
            bulk.run(action.name, params, options, console, op)
            return
        if params:
            raise CliError(
                "invalid_argument",
                f"give a WORKFLOW_ID ({workflow_id!r}) or filter flags "
                f"({', '.join(sorted(params))}), not both",
                EXIT_USAGE,
            )
        bulk.refuse_bulk_flags(options)
        run = action.call(workflow_id, options, op)
        audit_runs(op, [run], f"{did(action.name, run.status)} with weft {action.name}")
        body = {"action": action.name, **summary(run)}
        text = f"{action.name}: {run.workflow_id} (run {run.pk}) is now {run.status}"
        if action.name == "cancel" and run.status not in ("cancelled",):
            text += "; cancel requested: the workflow cleans up, then ends cancelled"
        console.emit(body, text)

    return run


def _subcommand(action: Action) -> Subcommand:
    return Subcommand(
        name=action.name,
        help=action.help,
        description=action.help + "\n\n" + inspect.cleandoc(action.description),
        add_arguments=_adder(action),
        run=_runner(action),
    )


CANCEL = _subcommand(ACTIONS["cancel"])
RETRY = _subcommand(ACTIONS["retry"])
RESUME = _subcommand(ACTIONS["resume"])
