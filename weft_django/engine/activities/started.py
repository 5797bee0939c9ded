"""An activity attempt recorded as started before its code runs.

The invariant: **an attempt whose engine died counts as a failed attempt.**
Without a record, an activity that kills its process (``os._exit``, a
segfaulting extension, the OOM killer) leaves nothing behind; the next owner
starts the same attempt again, dies the same way, and retries never run
out. So before user code runs, the owner writes a *started* marker: a
``Timer`` row of kind ``attempt`` at the command's position, carrying the
attempt number. It never fires (``fire_at`` is ``NEVER``): no due-timer
query, no poll and no Celery ETA ever finds it.

* The attempt ends normally: the commit of its outcome deletes the marker
  with the command's other timers (its result, its final error, or its
  retry timer) -- in that same batch, no statement of its own.
* The engine died (or the turn ended) first: the next owner's step finds
  the marker and settles that attempt as failed with ``AttemptInterrupted``
  ("the engine running it stopped"), which obeys ``retries`` and the
  backoff like any other failure.

Why a batch of its own (``fenced_commit``), fenced but not versioned: it is written when the
attempt starts, after the turn's last commit and before the next, and it
must be durable before user code runs. Like a heartbeat (``heartbeats``)
it is conditioned on the claim fence and a drivable run, and it never
bumps the run's ``version``, so it never disturbs the turn's next write.
A deposed engine's marker is refused, and that engine runs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.models import DRIVABLE_STATUSES, Timer
from weft_django.ownership.fence import fence_conditions, fenced_commit
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.ops import ClaimCondition, Insert, LeaseCondition, RunCondition

__all__ = [
    "INTERRUPTED",
    "MARKER_KIND",
    "NEVER",
    "AttemptInterrupted",
    "interrupted_policy",
    "marked_attempt",
    "record_started",
]

MARKER_KIND: Final = "attempt"
"""The ``Timer.kind`` of a started marker."""

NEVER: Final = 253_402_214_400_000
"""The marker's ``fire_at`` (9999-12-31, the last day a ``datetime`` shows):
after every clock value, so it is never due."""

INTERRUPTED: Final = "the engine running it stopped"
"""The error text of an attempt found started and never settled."""


class AttemptInterrupted(Exception):
    """The failure of an attempt whose engine stopped (died) while it ran."""

    def __init__(self, engine_id: str = "") -> None:
        self.engine_id = engine_id
        super().__init__(INTERRUPTED + (f" ({engine_id})" if engine_id else ""))


def marked_attempt(timer: Timer | None) -> int | None:
    """The attempt number a started marker records (``None``: no marker)."""
    if timer is None or timer.kind != MARKER_KIND:
        return None
    number = (timer.payload or {}).get("attempt")
    return number if isinstance(number, int) and number >= 1 else 1


def record_started(
    host: OwnershipHost, *, run_id: Any, workflow_id: str, position: int, attempt: int
) -> Timer | None:
    """Write the started marker of ``attempt`` at ``position``: ONE fenced batch.

    Returns the stored row, or ``None`` when the run is no longer drivable
    (stopped under the turn); raises ``EngineDeposedError`` when the fence
    refuses it. Either way the attempt must not run: its outcome could never
    be recorded.
    """
    epoch = _epoch(fence_conditions(host, workflow_id))
    marker = Timer(
        run_id=run_id,
        position=position,
        kind=MARKER_KIND,
        fire_at=NEVER,
        engine_id=host.engine_id,
        epoch=epoch,
        payload={"attempt": attempt, "started_at": host.now_ms()},
    )
    drivable = RunCondition(run_id, statuses=DRIVABLE_STATUSES, label="attempt-started-run")
    # The fence first: a deposed engine learns it here (and forgets the claim).
    result = fenced_commit(host, workflow_id, [drivable], [Insert(marker)])
    if result.committed:
        return marker
    return None  # the run's status refused it (a fence failure raised)


def _epoch(fence: list[Any]) -> int:
    for condition in fence:
        if isinstance(condition, ClaimCondition | LeaseCondition):
            return condition.epoch
    return 0


def interrupted_policy(
    definition: ActivityDefinition, max_recovery_attempts: int
) -> ActivityDefinition:
    """The retry policy an attempt its engine's death interrupted obeys.

    An activity that declares ``retries`` obeys them: a poison activity that
    kills its process fails after ``retries + 1`` engine deaths. One that
    declares none (``retries=0``, the default) still survives an engine's
    death -- durable execution's promise -- but only ``MAX_RECOVERY_ATTEMPTS``
    times, so a poison activity cannot take the fleet down one engine at a time.
    """
    if definition.retries > 0:
        return definition
    return dataclasses.replace(definition, retries=max(1, max_recovery_attempts) - 1)
