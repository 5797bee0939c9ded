"""``weft history export WORKFLOW_ID [--run RUN_ID] > run.json``: a run, out of production.

Prints the run's history (``engine.replay.history``, documented in
docs/howto/histories.md) as one JSON document on stdout -- its input,
journal, signals and updates received, workflow name and patches seen,
sealed with a checksum -- for ``weft_django.testing.replay_history`` on a
laptop or ``manage.py weft_replay_check --history``. Read-only: nothing is
written. No such workflow id: exit 3; a ``--run`` that is not one of its
runs: exit 2.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from weft_django.engine.runs.export import export_history

from .console import Console, Subcommand


def add_arguments(parser: CommandParser) -> None:
    parser.add_argument("action", choices=["export"], help="export: print the history as JSON")
    parser.add_argument("workflow_id", metavar="WORKFLOW_ID", help="the workflow to export")
    parser.add_argument(
        "--run", dest="run_id", metavar="RUN_ID", help="one of its runs (default: the latest)"
    )


def run(options: dict[str, Any], console: Console) -> None:
    document = export_history(options["workflow_id"], run_id=options.get("run_id"))
    # The same document with or without --json: the history is the answer.
    console.stdout.write(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))


HISTORY = Subcommand(
    name="history",
    help="Export a run's history as versioned JSON (history export ID [--run RUN_ID]).",
    description=__doc__ or "",
    add_arguments=add_arguments,
    run=run,
)

__all__ = ["HISTORY"]
