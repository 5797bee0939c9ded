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
meant for ``name``).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F

from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.operations._loop import Prepared, commit_with_retries
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import InvalidArgumentError, WorkflowAlreadyRunning
from weft_django.kernel.ids import check_name, validate_workflow_id
from weft_django.models import LIVE_STATUSES, TERMINAL_STATUSES, SignalMessage, WorkflowRun
from weft_django.ownership.batch import Insert, RunCondition, UniqueAbsence, Update

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
    if not isinstance(name, str):
        raise InvalidArgumentError("name", f"workflow name must be a string, got {name!r:.100}")
    get_workflow(name)  # UnknownWorkflowType before anything is written
    stored_input = normalize("workflow input", input)
    workflow_id = validate_workflow_id(workflow_id)
    check_name("signal", signal)
    stored_payload = normalize(f"payload of signal {signal!r}", payload)
    db = get_settings().database

    def attempt() -> Prepared[tuple[WorkflowRun, SignalMessage, bool]]:
        run = WorkflowRun.objects.using(db).latest_for(workflow_id)
        if run is not None and run.status not in TERMINAL_STATUSES:
            if run.name != name:  # a live run of another workflow holds the id
                raise WorkflowAlreadyRunning(workflow_id, str(run.pk))
            return _signal_live(run, signal, stored_payload, db)
        return _start_signalled(name, stored_input, workflow_id, signal, stored_payload, db)

    return commit_with_retries(workflow_id, ACTION, db, attempt)


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
    name: str, input: Any, workflow_id: str, signal: str, payload: Any, db: str
) -> Prepared[tuple[WorkflowRun, SignalMessage, bool]]:
    run = WorkflowRun(
        workflow_id=workflow_id,
        name=name,
        status="pending",
        input=input,
        trace_context=tracing.carrier(),
    )
    message = SignalMessage(run_id=run.pk, name=signal, payload=payload)
    live = UniqueAbsence("one live run per workflow id")

    def committed() -> tuple[WorkflowRun, SignalMessage, bool]:
        announce(Wake("start", str(run.pk), db, workflow_id))
        return run, message, True

    return Prepared([live], [Insert(run, live), Insert(message)], committed)


__all__ = ["signal_with_start"]
