"""The state vocabularies of stored rows, as ``TextChoices`` with their groups.

These are the values of model fields (``WorkflowRun.status``, ``ClaimEvent.kind``,
``Timer.kind``, ``AsyncActivity.status``), so the field's ``choices``, the API's enums, the
admin's filters, the metric labels and the querysets' ``live()`` / ``drivable()`` /
``terminal()`` all read this one definition; closed vocabularies that are no field's
values live in ``kernel.vocab``. ``querysets`` (which the models' managers use) imports
these without a cycle because this module imports no model; ``weft_django.models``
re-exports every name.
"""

from __future__ import annotations

from typing import Final, Literal

from django.db import models

# Labels equal the stored values: the admin, the API and metric labels show
# the value itself, so a label can never drift from what a query filters on.


class RunStatus(models.TextChoices):
    """The status of one run (SPEC §4.1); a run changes status only in a fenced batch."""

    # Written, not yet picked up: any engine may claim it (a new run, resume, retry).
    PENDING = "pending", "pending"
    # An engine holds the claim and is driving (or about to drive) a turn.
    RUNNING = "running", "running"
    # Waiting on a timer, a signal, an async activity or a child; its owner wakes it.
    PARKED = "parked", "parked"
    # Stopped by an operator; nothing drives it until resume.
    SUSPENDED = "suspended", "suspended"
    # Terminal: the workflow returned.
    COMPLETED = "completed", "completed"
    # Terminal: the workflow raised (retry may reopen it).
    FAILED = "failed", "failed"
    # Terminal: cancelled by an operator or a parent.
    CANCELLED = "cancelled", "cancelled"
    # Terminal: its execution timeout passed (retry may reopen it).
    TIMED_OUT = "timed_out", "timed_out"
    # Terminal: ended by a start with ``on_conflict="terminate-existing"`` or by an
    # operator's reset (a new run of the id continues from a journal position of
    # this one: ``engine.operations.fork``).
    TERMINATED = "terminated", "terminated"


RunStatusValue = Literal[
    "pending",
    "running",
    "parked",
    "suspended",
    "completed",
    "failed",
    "cancelled",
    "timed_out",
    "terminated",
]
"""``RunStatus`` as a ``Literal``, for annotations (a test keeps the two equal)."""

RUN_STATUSES: Final[tuple[RunStatusValue, ...]] = tuple(RunStatus.values)  # type: ignore[arg-type]
"""Every run status, in the order above (the metric label set)."""
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.TERMINATED,
    }
)
"""A terminal run never changes again (except retry of failed/timed_out, a new turn)."""
LIVE_STATUSES: Final[tuple[str, ...]] = (
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.PARKED,
    RunStatus.SUSPENDED,
)
"""At most one run of a workflow id is live (the unique constraint below)."""
DRIVABLE_STATUSES: Final[frozenset[str]] = frozenset({RunStatus.RUNNING, RunStatus.PARKED})
"""Runs an owner drives: their due timers and wakes are the owner's to serve."""


class ClaimEventKind(models.TextChoices):
    """A claim transition, recorded in the batch that makes it (SPEC §4.4)."""

    # A claim of a released (or never claimed) workflow id.
    ACQUIRE = "acquire", "acquire"
    # A claim of an id whose holder expired past the takeover grace.
    TAKEOVER = "takeover", "takeover"
    # The holder gave the claim up (terminal commit, shutdown).
    RELEASE = "release", "release"
    # The epoch was bumped without a new holder (cancel, suspend, purge).
    ROTATE = "rotate", "rotate"
    # An operator rotated the epoch away from a live holder.
    FORCE_RELEASE = "force_release", "force_release"


ClaimEventKindValue = Literal["acquire", "takeover", "release", "rotate", "force_release"]
CLAIM_EVENT_KINDS: Final[tuple[ClaimEventKindValue, ...]] = tuple(ClaimEventKind.values)  # type: ignore[arg-type]


class TimerKind(models.TextChoices):
    """What a durable timer wakes (``vocab.TimerKindValue`` is the same set as a ``Literal``)."""

    # A ``ctx.sleep`` that ends.
    SLEEP = "sleep", "sleep"
    # The deadline of a wait (a signal wait or an async activity).
    TIMEOUT = "timeout", "timeout"
    # The backoff before an activity's next attempt.
    RETRY = "retry", "retry"
    # An activity attempt started and not yet settled (``engine.activities.started``):
    # never fires; found by the next owner, it is the attempt its engine's death ended.
    ATTEMPT = "attempt", "attempt"


class AsyncStatus(models.TextChoices):
    """The single-use state of an async activity's token."""

    # Handed out; the outside world has not answered yet.
    PENDING = "pending", "pending"
    # Answered with a result (the token is used).
    COMPLETED = "completed", "completed"
    # Answered with an error (the token is used).
    FAILED = "failed", "failed"


__all__ = [
    "CLAIM_EVENT_KINDS",
    "DRIVABLE_STATUSES",
    "LIVE_STATUSES",
    "RUN_STATUSES",
    "TERMINAL_STATUSES",
    "AsyncStatus",
    "ClaimEventKind",
    "ClaimEventKindValue",
    "RunStatus",
    "RunStatusValue",
    "TimerKind",
]
