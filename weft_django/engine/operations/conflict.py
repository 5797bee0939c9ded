"""Start policies for a workflow id another run holds (``on_conflict``).

``"error"`` and ``"start-new"`` are the start write's own (``start``:
``WorkflowAlreadyRunning`` for a live run; a finished one stands in the way
unless ``start-new``). This module adds:

- ``"use-existing"``: a live run of the id is the answer (its row, nothing
  written); a finished one does not stand in the way. Of two callers racing
  on a free id, one inserts and the other's insert fails the live-run
  constraint: it reads the winner's run and returns it -- both get the same
  run, and exactly one was written.
- ``"terminate-existing"``: the live run is ended ``terminated`` (its live
  descendants cancelled in the same batch, as a cancel would:
  ``stop.run_stop``, one conditional batch that also rotates its claim, so
  its owner commits nothing more), then the new run is inserted by the one
  start write. A concurrent caller that inserted first is terminated the same
  way; the loop is bounded, and at most one run of the id is ever live.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Literal

from weft_django.conf import get_settings
from weft_django.engine.operations.start import NewRun, start
from weft_django.engine.operations.stop import run_stop, terminate_spec
from weft_django.errors import InvalidTransitionError, WorkflowAlreadyRunning
from weft_django.models import LIVE_STATUSES, WorkflowRun

OnConflict = Literal["error", "start-new", "use-existing", "terminate-existing"]
ON_CONFLICT: tuple[str, ...] = ("error", "start-new", "use-existing", "terminate-existing")

#: Rounds of terminate-then-insert before a start gives up on a contended id.
ATTEMPTS = 8


def _live(workflow_id: str, db: str) -> WorkflowRun | None:
    return (
        WorkflowRun.objects.using(db)
        .filter(workflow_id=workflow_id, status__in=LIVE_STATUSES)
        .first()
    )


def start_with_policy(new: NewRun, on_conflict: str) -> tuple[WorkflowRun, bool]:
    """``start(new)`` under ``on_conflict``: ``(run, created)``."""
    if on_conflict in ("error", "start-new"):
        return start(dataclasses.replace(new, after_finished=on_conflict == "start-new"))
    db = get_settings().database
    fresh = dataclasses.replace(new, after_finished=True)
    for _ in range(ATTEMPTS):
        if on_conflict == "use-existing":
            live = _live(new.workflow_id, db)
            if live is not None:
                return live, False
        else:
            live = _live(new.workflow_id, db)
            if live is not None:
                # It may end meanwhile: nothing left to terminate then.
                with contextlib.suppress(InvalidTransitionError):
                    run_stop(
                        new.workflow_id,
                        terminate_spec(f"terminated by a new start of {new.workflow_id}"),
                        actor="client",
                        run=live,
                    )
        try:
            return start(fresh)
        except WorkflowAlreadyRunning:
            continue  # another caller's run got in first: look again
    raise WorkflowAlreadyRunning(new.workflow_id)


__all__ = ["ATTEMPTS", "ON_CONFLICT", "OnConflict", "start_with_policy"]
