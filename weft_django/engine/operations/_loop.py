"""The one shape of an external transition: read -> check -> commit -> retry.

Why one loop: an action from outside the owning engine (a web request, the
admin, another engine's maintenance pass) decides on a read that may be
stale by the time it commits. So every action reads, checks the status it
read (``InvalidTransitionError`` and nothing written), then commits through
the conditional batch, whose conditions re-check that same status under
lock; a concurrent change refuses the batch and the action reads again, up
to ``MAX_ATTEMPTS`` times, then gives up with the status it last saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from weft_django.conf import get_settings
from weft_django.errors import InvalidTransitionError, WorkflowNotFound
from weft_django.kernel.ids import check_lookup_id
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import Condition, Write
from weft_django.ownership.transitions import ClaimSnapshot

MAX_ATTEMPTS = 8

T = TypeVar("T")


def latest_run(workflow_id: str, using: str | None = None) -> WorkflowRun:
    """The newest run of ``workflow_id`` (``WorkflowNotFound`` if none)."""
    db = using or get_settings().database
    run = WorkflowRun.objects.using(db).latest_for(check_lookup_id(workflow_id))
    if run is None:
        raise WorkflowNotFound(workflow_id)
    return run


def claim_snapshot(workflow_id: str, db: str) -> ClaimSnapshot:
    """The claim row as a rotation reads it (an absent row: epoch 0)."""
    row = (
        WorkflowClaim.objects.using(db)
        .filter(pk=workflow_id)
        .values_list("epoch", "engine_id", "expires_at", "claimed_at")
        .first()
    )
    return ClaimSnapshot(workflow_id, *row) if row is not None else ClaimSnapshot(workflow_id)


@dataclass(frozen=True)
class Prepared(Generic[T]):
    """One attempt: the batch to commit, and what to do once it committed."""

    conditions: Sequence[Condition]
    writes: Sequence[Write]
    #: Runs inside the caller's transaction after the batch committed
    #: (announce wakes, refresh rows); its value is the action's result.
    committed: Callable[[], T]


def commit_with_retries(
    workflow_id: str,
    action: str,
    db: str,
    attempt: Callable[[], Prepared[T]],
    *,
    last_status: Callable[[], str] | None = None,
) -> T:
    """Run ``attempt`` (read, check -- raising -- and build) and commit its batch,
    again on a concurrent change; ``InvalidTransitionError`` after
    ``MAX_ATTEMPTS`` with ``last_status()`` (default: the latest run's status)."""
    for _ in range(MAX_ATTEMPTS):
        prepared = attempt()
        if conditional_batch(prepared.conditions, prepared.writes, using=db).committed:
            return prepared.committed()
    status = last_status() if last_status is not None else latest_run(workflow_id, db).status
    raise InvalidTransitionError(workflow_id, status, action)


__all__ = [
    "MAX_ATTEMPTS",
    "Prepared",
    "claim_snapshot",
    "commit_with_retries",
    "latest_run",
]
