"""``signal_with_start``: start the workflow unless a live run has the id, and
deliver the signal either way -- in one conditional batch.

Invariant: each attempt is ONE batch (one transaction, a savepoint inside the
caller's). Either it inserts the new ``pending`` run *and* its first signal
together, conditioned on no live run of the id (the partial unique
constraint: an ``IntegrityError`` is that condition failing), or it inserts
the signal into the live run it read, conditioned on that run still being
live. A lost race (another caller started the run, or the run ended between
the read and the commit) refuses the batch and the next attempt reads again:
two racing callers end with one run holding both signals. Nothing is written
for bad input, which is refused before the first read, nor when the live run
of the id is another workflow (``WorkflowAlreadyRunning``: the signal was
meant for ``name``). A run it starts is ``engine.operations.start``'s row and
insert: the workflow's queue, the one-live-run condition.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F

from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.operations._loop import Prepared, commit_with_retries
from weft_django.engine.operations.start import NewRun, live_insert, new_run, row
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import WorkflowAlreadyRunning
from weft_django.kernel.ids import check_name
from weft_django.models import LIVE_STATUSES, TERMINAL_STATUSES, SignalMessage, WorkflowRun
from weft_django.ownership.ops import Insert, RunCondition, Update

ACTION = "signal-with-start"


def signal_with_start(
    name: str, input: Any, workflow_id: str, signal: str, payload: Any = None
) -> tuple[WorkflowRun, SignalMessage, bool]:
    """Returns ``(run, message, started)``; ``started`` is ``True`` when this
    call created the run (traced as ``weft.start <name>``, ``engine.tracing``:
    a run it creates carries the span's context)."""
    with tracing.start_span(name, source="signal-with-start", workflow_id=workflow_id) as span:
        run, message, started = _signal_with_start(name, input, workflow_id, signal, payload)
        tracing.annotate(span, run_id=str(run.pk), start_created=started)
        return run, message, started


def _signal_with_start(
    name: str, input: Any, workflow_id: str, signal: str, payload: Any
) -> tuple[WorkflowRun, SignalMessage, bool]:
    new = new_run(name, input, workflow_id)  # nothing written for bad input
    check_name("signal", signal)
    stored_payload = normalize(f"payload of signal {signal!r}", payload)
    db = get_settings().database

    def attempt() -> Prepared[tuple[WorkflowRun, SignalMessage, bool]]:
        run = WorkflowRun.objects.using(db).latest_for(new.workflow_id)
        if run is not None and run.status not in TERMINAL_STATUSES:
            if run.name != name:  # a live run of another workflow holds the id
                raise WorkflowAlreadyRunning(new.workflow_id, str(run.pk))
            return _signal_live(run, signal, stored_payload, db)
        return _start_signalled(new, signal, stored_payload, db)

    return commit_with_retries(new.workflow_id, ACTION, db, attempt)


def _signal_live(
    run: WorkflowRun, signal: str, payload: Any, db: str
) -> Prepared[tuple[WorkflowRun, SignalMessage, bool]]:
    message = SignalMessage(run_id=run.pk, name=signal, payload=payload)

    def committed() -> tuple[WorkflowRun, SignalMessage, bool]:
        announce(Wake("signal", str(run.pk), db, run.workflow_id))
        return run, message, False

    return Prepared(
        [RunCondition(run.pk, statuses=frozenset(LIVE_STATUSES))],
        [
            Insert(message),
            Update(WorkflowRun, {"pk": run.pk}, {"wake_seq": F("wake_seq") + 1}),
        ],
        committed,
    )


def _start_signalled(
    new: NewRun, signal: str, payload: Any, db: str
) -> Prepared[tuple[WorkflowRun, SignalMessage, bool]]:
    run = row(new)
    message = SignalMessage(run_id=run.pk, name=signal, payload=payload)
    absence, insert = live_insert(run)

    def committed() -> tuple[WorkflowRun, SignalMessage, bool]:
        announce(Wake("start", str(run.pk), db, new.workflow_id))
        return run, message, True

    return Prepared([absence], [insert, Insert(message)], committed)


__all__ = ["signal_with_start"]
