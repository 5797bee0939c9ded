"""What an attempt starts with: its ``activity_info()`` and its span.

Why here, built from the run and the host rather than by the turn: the
attempt's identity (workflow, run, position, attempt number, claim epoch,
idempotency key) must be the same in the info its code reads, in the span
its trace shows and in the rows its outcome writes, whichever path starts
it (plain, atomic, routed). One place builds both from the same values.
"""

from __future__ import annotations

from typing import Any, Protocol

from weft_django.engine import tracing
from weft_django.engine.activities.info import ActivityInfo, AttemptControl, idempotency_key
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.models import WorkflowRun


class AttemptHost(Protocol):
    """What of the engine an attempt's records need (``engine.host.TurnHost`` has it;
    not imported: ``engine.host`` names the activity executor)."""

    @property
    def engine_id(self) -> str: ...

    def now_ms(self) -> int: ...

    def epoch_for(self, workflow_id: str) -> int: ...


def attempt_span(
    host: AttemptHost, run: WorkflowRun, position: int, definition: ActivityDefinition, number: int
) -> Any:
    """The attempt's ``weft.activity <name>`` span (``None``: tracing is off)."""
    if not tracing.enabled():
        return None
    return tracing.attempt_span(
        activity=definition.name,
        position=position,
        attempt=number,
        workflow_name=run.name,
        workflow_id=run.workflow_id,
        run_id=str(run.pk),
        engine_id=host.engine_id,
        epoch=host.epoch_for(run.workflow_id),
        celery_queue=definition.celery_queue,
    )


def attempt_info(
    host: AttemptHost, run: WorkflowRun, position: int, number: int, control: AttemptControl
) -> ActivityInfo:
    """The attempt's ``activity_info()``; the executor sets ``deadline`` when it starts."""
    workflow_id = run.workflow_id
    return ActivityInfo(
        workflow_id=workflow_id,
        run_id=str(run.pk),
        position=position,
        attempt=number,
        epoch=host.epoch_for(workflow_id),
        idempotency_key=idempotency_key(workflow_id, position),
        deadline=None,
        control=control,
    )


__all__ = ["AttemptHost", "attempt_info", "attempt_span"]
