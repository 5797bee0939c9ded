"""Start a schedule's run: ``client.start``'s keyed path, for the schedule package.

Why not ``client.start`` itself: ``engine.client`` re-exports the schedule
calls, so the schedule package may not import it back (``devtools.
check_cycles``). This is the same write as ``client.start`` with an
idempotency key -- one ``Insert`` through ``conditional_batch`` guarded by
the unique constraints (one live run per workflow id, one run per
idempotency key), its start wake announced on the caller's commit -- so
inside the driver's atomic step it commits with the step's fence, or not at
all. A second start of the same tick finds the key and returns that run.
"""

from __future__ import annotations

from typing import Any

from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import IdempotencyConflictError, WorkflowAlreadyRunning
from weft_django.kernel.ids import validate_workflow_id
from weft_django.models import TERMINAL_STATUSES, WorkflowRun
from weft_django.ownership.batch import Insert, UniqueAbsence, conditional_batch


def start_run(
    name: str, input: Any, workflow_id: str, idempotency_key: str | None
) -> tuple[WorkflowRun, bool]:
    """``(run, created)``: the run of ``idempotency_key`` (created now or before).

    ``WorkflowAlreadyRunning`` when a live run of another key holds the id;
    ``IdempotencyConflictError`` when the key names a run of another workflow.
    Traced as ``weft.start <name>`` (``engine.tracing``) when it creates the run.
    """
    with tracing.start_span(name, source="schedule", workflow_id=workflow_id) as span:
        run, created = _start_run(name, input, workflow_id, idempotency_key)
        tracing.annotate(span, run_id=str(run.pk), start_created=created)
        return run, created


def _start_run(
    name: str, input: Any, workflow_id: str, idempotency_key: str | None
) -> tuple[WorkflowRun, bool]:
    get_workflow(name)  # UnknownWorkflowType before anything is written
    stored_input = normalize("workflow input", input)
    workflow_id = validate_workflow_id(workflow_id)
    db = get_settings().database
    runs = WorkflowRun.objects.using(db)

    def existing() -> WorkflowRun | None:
        if idempotency_key is None:
            return None
        found = runs.filter(idempotency_key=idempotency_key).first()
        if found is not None and found.name != name:
            raise IdempotencyConflictError(idempotency_key, found.name, name)
        return found

    found = existing()
    if found is not None:
        return found, False
    previous = runs.latest_for(workflow_id)
    if previous is not None and previous.status not in TERMINAL_STATUSES:
        raise WorkflowAlreadyRunning(workflow_id, str(previous.pk))
    run = WorkflowRun(
        workflow_id=workflow_id,
        name=name,
        status="pending",
        input=stored_input,
        idempotency_key=idempotency_key,
        trace_context=tracing.carrier(),
    )
    live = UniqueAbsence("one live run per workflow id")
    if not conditional_batch([live], [Insert(run, live)], using=db).committed:
        found = existing()
        if found is not None:
            return found, False
        raise WorkflowAlreadyRunning(workflow_id)
    announce(Wake("start", str(run.pk), db, workflow_id, None))
    return run, True


__all__ = ["start_run"]
