"""The row that records an ended attempt, for the commit of its outcome to carry.

The invariant (``models.attempts``): the attempt's history row is written by
the same fenced batch that records its outcome -- passed as one more write
of that batch (``TurnState.settle(writes=)``, ``TurnState.commit``) or,
when the outcome's commit is someone else's (a hand-out's ``on_success``),
as a write riding on the turn's next commit (``TurnState.deferred``). It
never has a batch of its own, so it costs no commit and a deposed engine,
whose batches the fence refuses, records none.

When an attempt started: its started marker's ``started_at`` (written before
its code ran, ``engine.activities.started``); an attempt without one (a
routed attempt) counts from its submission.
"""

from __future__ import annotations

import time

from weft_django.engine.activities.attempt_context import AttemptHost
from weft_django.engine.activities.started import AttemptInterrupted
from weft_django.models import ActivityAttempt, AttemptOutcome, Timer, WorkflowRun
from weft_django.ownership.ops import Insert


def marker_started_ms(marker: Timer | None) -> int | None:
    """The engine-clock instant a started marker recorded (``None``: none)."""
    value = (marker.payload or {}).get("started_at") if marker is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def started_since(now_ms: int, submitted: float) -> int:
    """The start of an attempt without a marker: ``submitted`` is its ``time.monotonic()``."""
    return now_ms - max(0, int((time.monotonic() - submitted) * 1000))


def attempt_row(
    host: AttemptHost,
    run: WorkflowRun,
    position: int,
    attempt: int,
    activity: str,
    started_ms: int | None,
    error: BaseException | None = None,
    message: str = "",
) -> Insert:
    """The write that records attempt ``attempt`` at ``position`` as ended now.

    ``error`` ``None``: it succeeded; an ``AttemptInterrupted``: its engine
    (named by the error) stopped while it ran; any other: it failed, with
    ``message`` (the text as it may be shown) in its headline.
    ``started_ms`` ``None``: unknown, counted as now.
    """
    now = host.now_ms()
    outcome = AttemptOutcome.OK
    headline, engine_id = "", host.engine_id
    if error is not None:
        interrupted = isinstance(error, AttemptInterrupted)
        outcome = AttemptOutcome.INTERRUPTED if interrupted else AttemptOutcome.FAILED
        headline = f"{type(error).__name__}: {message or error}"[:500]
        if isinstance(error, AttemptInterrupted) and error.engine_id:
            engine_id = error.engine_id  # the engine that ran it, not the one settling it
    return Insert(
        ActivityAttempt(
            run_id=run.pk,
            position=position,
            attempt=attempt,
            activity=activity[:200],
            started_at=now if started_ms is None else min(started_ms, now),
            ended_at=now,
            outcome=outcome,
            error=headline or None,
            engine_id=engine_id[:200],
            epoch=host.epoch_for(run.workflow_id) or 0,
        )
    )


__all__ = ["attempt_row", "marker_started_ms", "started_since"]
