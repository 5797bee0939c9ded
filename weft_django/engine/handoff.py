"""``Handoff``: the run a pickup just committed, handed to its first turn.

Why: a batch pickup locks the pending run, writes pending → running and
commits; the turn that follows on the same engine used to read the run, its
journal and its timers again (three statements) to learn what the pickup
already knew. The handoff carries the run as the pickup committed it.

The invariants that make it safe:

- It is handed to exactly one dispatch of the run in this process, made by
  the maintenance thread right after the pickup committed (nothing can drive
  the run in between: until that commit it was ``pending``, and every other
  dispatch of a run comes from that same thread). A scheduler that finds the
  run already in flight drops it; one that drives turns elsewhere (Celery)
  never uses it: that turn reads the run itself.
- ``fresh`` only when the run had never been picked up (``started_at`` was
  null under the pickup's lock) and is no fork or reset (``continued_from``
  null: those start with a copied journal): no turn ever ran, so it has no journal
  entries and no timers, and only this engine's fenced turns can write
  either from now on.
- A snapshot older than the stored row is harmless: every write of the turn
  is still fenced and conditioned on the run being drivable, and a stale
  ``wake_seq`` only makes a park go round once more (``turn.commit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models.expressions import CombinedExpression

from weft_django.models import WorkflowRun


@dataclass(frozen=True)
class Handoff:
    """``run`` as a committed pickup left it; ``fresh``: it never had a turn."""

    run: WorkflowRun
    fresh: bool


def as_committed(run: WorkflowRun, values: dict[str, Any]) -> WorkflowRun:
    """Apply a committed pickup's ``values`` to the ``run`` it read under its lock.

    The one expression a pickup writes is ``version + 1``; the lock made the
    read version exact, so the stored one is that plus one.
    """
    for name, value in values.items():
        if isinstance(value, CombinedExpression):
            if name != "version":
                raise ValueError(f"a pickup handoff cannot apply {name} = {value!r}")
            run.version += 1
        else:
            setattr(run, name, value)
    return run


__all__ = ["Handoff", "as_committed"]
