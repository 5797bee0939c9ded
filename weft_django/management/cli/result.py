"""``weft result WORKFLOW_ID [--timeout S]``: a finished run's result.

Why it answers at once by default: a run may wait for a signal for days, and
a script that polls wants "not yet" (exit 5, ``timeout``) rather than a
command that hangs; ``--timeout S`` waits up to S seconds (through
``WorkflowHandle.result``: NOTIFY on PostgreSQL, polling elsewhere). The
result is printed as JSON on stdout (so it pipes into ``jq``); a run that
ended failed, cancelled or timed out exits 1 and prints its error: the
headline, then the traceback (with ``--json``: the ``workflow_failed`` error
document, with ``status`` and ``error``). A run that continued as new is
followed to the run that carries on.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from weft_django import client
from weft_django.errors import WorkflowFailedError

from .console import EXIT_FAILED, EXIT_USAGE, CliError, Console, Subcommand
from .error_text import error_lines


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "workflow_id", metavar="WORKFLOW_ID", help="the workflow whose result to print"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for the run to finish (default 0: answer at once)",
    )


def run(options: dict[str, Any], console: Console) -> None:
    timeout: float = options["timeout"]
    if not timeout >= 0:
        raise CliError(
            "invalid_argument",
            f"--timeout must be a non-negative number of seconds, got {timeout}",
            EXIT_USAGE,
            option="--timeout",
            value=timeout,
        )
    workflow_id: str = options["workflow_id"]
    handle = client.get_handle(workflow_id)
    try:
        value = handle.result(timeout=timeout)
    except WorkflowFailedError as exc:
        if console.json_mode:
            raise  # the recorded error, in the JSON document's shape
        lines = [f'Workflow "{exc.workflow_id}" ended {exc.status}:', *error_lines(exc.error)]
        raise CliError(
            exc.code, "\n".join(lines), EXIT_FAILED, status=exc.status, error=exc.error
        ) from exc
    console.emit(
        {
            "workflow_id": workflow_id,
            "run_id": handle.run_id,
            "status": "completed",
            "result": value,
        },
        json.dumps(value, indent=2, sort_keys=True, default=str),
    )


#: What `--help` says (for people using the command).
USAGE = """Print a finished run's result as JSON.

Answers at once unless --timeout SECONDS waits for the run to finish. Exit 0
with the result; 1 if the run failed, was cancelled or timed out (its error's
headline and traceback are printed); 5 if it has not finished yet."""


RESULT = Subcommand(
    name="result",
    help="Print a finished run's result (exit 1 if it failed, 5 if not finished in --timeout).",
    description=USAGE,
    add_arguments=add_arguments,
    run=run,
)
