"""``manage.py weft_demo``: start an engine, run the order workflow, show it.

The order charges a card (an activity), sleeps a few seconds (a durable
timer), waits for an ``approved`` signal (sent early on purpose: a signal
sent before the wait is kept), packs in a child workflow and ships. The
command prints each journal entry as it is recorded, the result, and the
claim history, then exits 0.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from weft_django.inspection.format import format_ms
from weft_django.management import checked_args as checked
from weft_django.models import TERMINAL_STATUSES


class Command(BaseCommand):
    help = "Run the demo order workflow on an in-process engine."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sleep", type=float, default=2.0, help="the workflow's sleep (s)")
        parser.add_argument("--timeout", type=float, default=60.0)

    def handle(self, *args: Any, **options: Any) -> None:
        from weft_django import client
        from weft_django.engine import Engine
        from weft_django.engine.workflow.definitions import has_workflow
        from weft_django.models import ClaimEvent, JournalEntry, WorkflowRun

        checked.seconds("--sleep", options["sleep"])
        checked.seconds("--timeout", options["timeout"], positive=True)
        if not has_workflow("order"):
            raise CommandError("the demo workflow 'order' is not registered (add project.demo)")
        engine = Engine().start()
        workflow_id = f"demo-order-{uuid.uuid4().hex[:6]}"
        try:
            handle = client.start(
                "order",
                {"id": workflow_id, "amount": 500, "sleep": options["sleep"]},
                workflow_id=workflow_id,
            )
            self.stdout.write(
                f"started {workflow_id} (run {handle.run_id}) on engine {engine.engine_id}"
            )
            client.signal(workflow_id, "approved", {"by": "demo"})
            self.stdout.write("sent the 'approved' signal early: it is buffered until the wait")
            seen: set[tuple[str, int]] = set()
            deadline = time.monotonic() + options["timeout"]
            status = ""
            while time.monotonic() < deadline:
                for run in WorkflowRun.objects.filter(workflow_id__startswith=workflow_id).order_by(
                    "created_at"
                ):
                    for entry in JournalEntry.objects.filter(run=run).order_by("position"):
                        key = (str(run.pk), entry.position)
                        if key not in seen:
                            seen.add(key)
                            outcome = entry.error if entry.error is not None else entry.result
                            self.stdout.write(
                                f"  {format_ms(entry.at_ms)}  [{run.workflow_id}] "
                                f"#{entry.position} {entry.kind} {entry.target} -> "
                                f"{_json(outcome)} (epoch {entry.epoch})"
                            )
                current = handle.status()
                if current != status:
                    status = current
                    self.stdout.write(f"status: {status}")
                if status in TERMINAL_STATUSES:
                    break
                time.sleep(0.1)
            if status != "completed":
                raise CommandError(f"demo workflow ended {status}: {_json(handle.error())}")
            self.stdout.write(f"result: {_json(handle.result(timeout=1))}")
            self.stdout.write("claim history:")
            for event in ClaimEvent.objects.filter(workflow_id__startswith=workflow_id).order_by(
                "id"
            ):
                self.stdout.write(
                    f"  {event.workflow_id}: {event.kind} epoch {event.epoch} "
                    f"by {event.engine_id} at {format_ms(event.at_ms)}"
                )
        finally:
            engine.dispose(grace=5)
        self.stdout.write(self.style.SUCCESS("demo finished"))


def _json(value: object) -> str:
    """A payload as a person reads it: JSON, not a Python repr."""
    return json.dumps(value, sort_keys=True, default=str)
