"""``weft start NAME --input JSON [--id WORKFLOW_ID] [--idempotency-key KEY]``.

Why it prints the workflow id alone on stdout (the sentence goes to stderr):
``WID=$(python manage.py weft start order --input '{"id": 7}')`` is how a
script starts a run and keeps its id. The input is parsed before the client
is called, so an invalid ``--input`` writes nothing; an unknown name is the
client's ``unknown_workflow_type`` (raised before it writes). With an
idempotency key that already started a run, that run is returned and
``created`` is false -- the API's 200-versus-201.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.kernel.ids import is_storable_text
from weft_django.models import WorkflowRun

from .args import json_option
from .console import Console, Subcommand
from .runs import db, summary


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the @workflow name")
    parser.add_argument(
        "--input", metavar="JSON", help="the workflow's input as JSON (default: null)"
    )
    parser.add_argument(
        "--id", dest="workflow_id", metavar="WORKFLOW_ID", help="the workflow id (default: a UUID)"
    )
    parser.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="start at most one run for this key; a repeat returns that run",
    )


def run(options: dict[str, Any], console: Console) -> None:
    data = json_option("--input", options["input"])
    key: str | None = options["idempotency_key"]
    existing = None
    if key is not None and is_storable_text(key):  # else client.start refuses it, naming it
        existing = (
            WorkflowRun.objects.using(db())
            .filter(idempotency_key=key)
            .values_list("pk", flat=True)
            .first()
        )
    handle = client.start(
        options["name"], data, workflow_id=options["workflow_id"], idempotency_key=key
    )
    started = WorkflowRun.objects.using(db()).get(pk=handle.run_id)
    created = existing is None or str(existing) != handle.run_id
    body = {**summary(started), "created": created}
    if not console.json_mode:
        verb = "started" if created else "already started (idempotency key)"
        console.note(f"{verb}: {started.name} {handle.workflow_id} run {handle.run_id}")
    console.emit(body, handle.workflow_id)


#: What `--help` says (for people using the command).
USAGE = """Start a run of workflow NAME with --input (JSON) and print its workflow id.

The workflow id goes alone to stdout, so a script can keep it:
  WID=$(python manage.py weft start order --input '{"id": 7}')
An invalid --input or an unknown workflow name starts nothing (exit 2). With
--idempotency-key, a key that already started a run returns that run."""


START = Subcommand(
    name="start",
    help="Start a run of a workflow; prints its workflow id.",
    description=USAGE,
    add_arguments=add_arguments,
    run=run,
)
