"""``weft signal WORKFLOW_ID NAME [--payload JSON]``: send a signal to the latest run.

Why through ``client.signal``: it is the one write that delivers a signal
(a fenced batch that wakes the owner); a signal sent before the workflow
waits for it is kept. The payload is parsed first, so an invalid
``--payload`` writes nothing; a finished run refuses (``invalid_transition``,
exit 4). ``--idempotency-key KEY`` records the signal once per key per
workflow id: a retried command returns the recorded signal, sends nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from weft_django import client

from .args import json_option
from .console import Console, Subcommand


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the workflow to signal")
    parser.add_argument("signal", metavar="NAME", help="the signal name")
    parser.add_argument(
        "--payload", metavar="JSON", help="the signal's payload as JSON (default: null)"
    )
    parser.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="record the signal once per KEY for this workflow (a retried command sends nothing)",
    )


def run(options: dict[str, Any], console: Console) -> None:
    payload = json_option("--payload", options["payload"])
    workflow_id: str = options["workflow_id"]
    name: str = options["signal"]
    message = client.signal(
        workflow_id, name, payload, idempotency_key=options.get("idempotency_key")
    )
    run_id = str(message.run_id)
    console.emit(
        {"workflow_id": workflow_id, "run_id": run_id, "signal": name, "sent": True},
        f"sent signal {name!r} to {workflow_id} (run {run_id})",
    )


#: What `--help` says (for people using the command).
USAGE = """Send signal NAME (with an optional --payload JSON) to a workflow's latest run.

A signal sent before the workflow waits for it is kept until it does. An
invalid --payload sends nothing (exit 2); a finished run refuses (exit 4)."""


SIGNAL = Subcommand(
    name="signal",
    help="Send a signal (with an optional JSON payload) to a workflow's latest run.",
    description=USAGE,
    add_arguments=add_arguments,
    run=run,
)
