"""``weft fork WORKFLOW_ID --at N`` and ``weft reset WORKFLOW_ID --at N --reason ...``.

Both write only through ``client.fork`` / ``client.reset``: every check
(the position within the journal, no ``ctx.all`` split, the workflow
registered, today's code replaying the prefix) runs before anything is
written, and a refusal exits 2 with the error's code. Both runs get the
admin History entry the admin and the API write (``client.audit``), under
the operator ``cli.operator`` settles: ``--user USERNAME`` (actor
``cli:USERNAME``), else the system user ``weft-cli`` (actor ``cli:weft``),
the OS user named in the message either way.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.client.audit import log_repair
from weft_django.models import WorkflowRun

from .args import json_option
from .console import Console, Subcommand
from .operator import add_user_argument, operator
from .runs import summary


def _add_fork(parser: CommandParser) -> None:
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run to fork (its latest)")
    parser.add_argument(
        "--at",
        dest="at_position",
        type=int,
        required=True,
        metavar="N",
        help="journal entries before position N are reused; the rest runs with today's code",
    )
    parser.add_argument("--id", dest="workflow_id_for_fork", help="the new workflow id")
    parser.add_argument("--input", help="the new run's input as JSON (default: the source's)")
    add_user_argument(parser)


def _fork(options: dict[str, Any], console: Console) -> None:
    op = operator(options)
    handle = client.fork(
        options["workflow_id"],
        at_position=options["at_position"],
        workflow_id_for_fork=options.get("workflow_id_for_fork"),
        input=json_option("--input", options.get("input")),
        actor=op.actor,
    )
    at = options["at_position"]
    log_repair("fork", handle.run_id, at, actor=op.described, user=op.history_user())
    run = WorkflowRun.objects.get(pk=handle.run_id)
    text = (
        f"fork: {options['workflow_id']} at position {options['at_position']} -> "
        f"{run.workflow_id} (run {run.pk}) is {run.status}"
    )
    console.emit({"action": "fork", "source": options["workflow_id"], **summary(run)}, text)


def _add_reset(parser: CommandParser) -> None:
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the run to reset (its latest)")
    parser.add_argument(
        "--at",
        dest="at_position",
        type=int,
        required=True,
        metavar="N",
        help="the new run keeps the journal before position N and continues from there",
    )
    parser.add_argument("--reason", default="", help="recorded on the terminated run")
    add_user_argument(parser)


def _reset(options: dict[str, Any], console: Console) -> None:
    op = operator(options)
    handle = client.reset(
        options["workflow_id"],
        at_position=options["at_position"],
        reason=options.get("reason") or "",
        actor=op.actor,
    )
    at = options["at_position"]
    log_repair("reset", handle.run_id, at, actor=op.described, user=op.history_user())
    run = WorkflowRun.objects.get(pk=handle.run_id)
    text = (
        f"reset: {run.workflow_id} continues from position {options['at_position']} "
        f"(new run {run.pk}, {run.status})"
    )
    console.emit({"action": "reset", **summary(run)}, text)


FORK = Subcommand(
    name="fork",
    help="Start a new run from a run's journal before a position (--at N).",
    description="""Fork through ``client.fork``: a new run (``--id``, default
    ``<id>-fork-<hex>``) whose journal is the latest run's entries before
    ``--at``; recorded results are reused, the rest runs with today's code. The
    source, live or ended, is untouched. A position beyond the journal or inside
    a ``ctx.all`` group, or a workflow no longer registered: exit 2, nothing
    written.""",
    add_arguments=_add_fork,
    run=_fork,
)
RESET = Subcommand(
    name="reset",
    help="End a run terminated and continue its id from a position (--at N).",
    description="""Reset through ``client.reset``: the latest run ends
    ``terminated`` (claim rotated, live children cancelled, ``--reason``
    recorded) and a new run of the same id continues from its journal before
    ``--at``, in one write. Bad input: exit 2, nothing written.""",
    add_arguments=_add_reset,
    run=_reset,
)

__all__ = ["FORK", "RESET"]
