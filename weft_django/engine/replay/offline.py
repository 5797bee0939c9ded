"""One read-only replay of a recorded journal, and what it proves.

The one code path the deploy gate (``check``: live runs and exported
histories) and ``testing.replay_history`` share: a ``Replay(record=False)``
advanced over the whole journal in the calling thread (so a breakpoint in
the body stops there), and the rule that decides whether the code breaks
the run.

Invariants:

* **Nothing is written.** The replay runs with database access refused
  for every connection (``sandbox.database_refused``), not only inside the
  body: a replay needs no row, so a query during one is a bug, and it fails.
* **A divergence is certain** (``divergence``): a command other than the
  recorded one, or a body that stops (raises, continues as new) while
  recorded events are still unapplied. A body that fails or finishes at the
  frontier is not one: the live run would do the same with the old code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from weft_django.engine.replay.events import (
    INFO_KINDS,
    ContinuedAsNew,
    Diverged,
    Event,
    Failed,
    Outcome,
)
from weft_django.engine.replay.machine import Replay
from weft_django.engine.replay.sandbox import database_refused
from weft_django.engine.workflow.definitions import WorkflowDefinition
from weft_django.errors import NonDeterminismError
from weft_django.kernel.clock import now_ms


def replay_journal(
    definition: WorkflowDefinition,
    *,
    workflow_id: str,
    run_id: str,
    input: Any,
    events: Iterable[Event],
) -> tuple[Replay, Outcome]:
    """Advance ``definition``'s body over ``events`` read-only; the replay and
    its outcome. Raises what a signal or update handler raises on replay."""
    with database_refused():
        replay = Replay(
            definition,
            workflow_id=workflow_id,
            run_id=run_id,
            input=input,
            events=list(events),
            clock_ms=now_ms,
            record=False,
        )
        return replay, replay.advance()


def divergence(replay: Replay, outcome: Outcome) -> NonDeterminismError | None:
    """Why this code cannot continue the recorded run, or ``None`` if it can."""
    if isinstance(outcome, Diverged):
        return outcome.error
    if isinstance(outcome, Failed | ContinuedAsNew):
        unapplied = [e for e in replay.events[replay.pos :] if e.kind not in INFO_KINDS]
        if unapplied:
            first = unapplied[0]
            recorded = f"{first.kind} {first.target}".strip()
            if isinstance(outcome, Failed):
                new = f"an error ({outcome.error.get('type')}: {outcome.error.get('message')})"
            else:
                new = "continue_as_new"
            return NonDeterminismError(replay.workflow_id, first.position, recorded, new)
    return None


__all__ = ["divergence", "replay_journal"]
