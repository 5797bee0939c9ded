"""The exceptions weft-django raises to its callers (SPEC §4.8).

An error is part of the public contract. The API maps each one to an HTTP
status and a stable machine-readable ``code``; the admin, the CLI and user code
match on the class; logs need the values that explain what happened (which
workflow, who holds it, configured versus stored mode). So every error here
(each a ``WeftError``, whose machinery is ``errors.base``):

* has a class-level ``code`` (stable, unique, snake_case) and ``http_status``;
* stores each constructor argument as an attribute of the same name;
* builds a message that names those values;
* serialises with ``as_dict()`` -> ``{"code", "message", **fields}``;
* survives ``pickle`` (Celery ships exceptions between processes).

Lost races inside the claim protocol are *not* errors (SPEC §4.9: registry
methods return result objects); these are raised only at the edges where a
caller asked for something specific and cannot have it. Those of the ownership
protocol's edges (claim, mode marker, deposed engine, global lease) are defined in
``errors.ownership`` and public from here like every other.

Over 400 lines: a catalogue of twenty-seven small public classes, read as one.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from weft_django.errors import ownership as _ownership
from weft_django.errors.base import WeftError, error_class, holder_text
from weft_django.errors.ownership import EngineDeposedError as EngineDeposedError
from weft_django.errors.ownership import (
    EngineLeaseAcquisitionTimeoutError as EngineLeaseAcquisitionTimeoutError,
)
from weft_django.errors.ownership import EngineLeaseCorruptedError as EngineLeaseCorruptedError
from weft_django.errors.ownership import OwnershipModeMismatchError as OwnershipModeMismatchError
from weft_django.errors.ownership import (
    WorkflowClaimUnavailableError as WorkflowClaimUnavailableError,
)

AsyncActivityTokenErrorKind = Literal["unknown", "used"]
ActivityErrorKind = Literal["error", "timeout", "non_retryable"]

_VERBS = {"error": "failed", "timeout": "timed out", "non_retryable": "failed (non-retryable)"}


@error_class
class WorkflowNotFound(WeftError):
    """No run exists for the workflow id."""

    code = "workflow_not_found"
    http_status = 404
    workflow_id: str

    def _message(self) -> str:
        return f'No workflow with id "{self.workflow_id}" exists.'


@error_class
class UnknownWorkflowType(WeftError):
    """No ``@workflow`` is registered under the name."""

    code = "unknown_workflow_type"
    http_status = 400
    name: str

    def _message(self) -> str:
        return (
            f'No workflow type named "{self.name}" is registered (check the @workflow name '
            "and that its module is autodiscovered in this process)."
        )


@error_class
class WorkflowAlreadyRunning(WeftError):
    """A live (non-terminal) run already exists for the workflow id."""

    code = "workflow_already_running"
    http_status = 409
    workflow_id: str
    run_id: str | None = None

    def _message(self) -> str:
        run = f" (run {self.run_id})" if self.run_id is not None else ""
        return f'Workflow "{self.workflow_id}" already has a live run{run}.'


@error_class
class IdempotencyConflictError(WeftError):
    """An idempotency key was reused for a different workflow name."""

    code = "idempotency_conflict"
    http_status = 409
    idempotency_key: str
    existing_name: str
    requested_name: str

    def _message(self) -> str:
        return (
            f'Idempotency key "{self.idempotency_key}" already started workflow '
            f'"{self.existing_name}"; it cannot be reused to start "{self.requested_name}".'
        )


@error_class
class InvalidTransitionError(WeftError):
    """The action does not fit the run's current status; nothing was written."""

    code = "invalid_transition"
    http_status = 409
    workflow_id: str
    status: str
    action: str

    def _message(self) -> str:
        return (
            f'Cannot {self.action} workflow "{self.workflow_id}": its latest run is {self.status}.'
        )


@error_class
class AsyncActivityTokenError(WeftError):
    """An async-activity completion named an unknown or already-used token."""

    code = "async_activity_token"
    http_status = 404  # class default (unknown); a used token gives 409 on the instance
    kind: AsyncActivityTokenErrorKind

    def __post_init__(self) -> None:
        self.http_status = 409 if self.kind == "used" else 404  # type: ignore[misc]
        super().__post_init__()

    def _message(self) -> str:
        if self.kind == "used":
            return "This async-activity token was already used; a token completes once."
        return "This async-activity token is unknown (never issued, or purged)."


@error_class
class NonDeterminismError(WeftError):
    """Replay produced a different command than the journal recorded at a position."""

    code = "non_determinism"
    http_status = 409
    workflow_id: str
    position: int
    recorded: str
    new: str

    def _message(self) -> str:
        return (
            f'Workflow "{self.workflow_id}" is not deterministic: at journal position '
            f"{self.position} it recorded {self.recorded} but replay now yields {self.new}. "
            "Workflow code changed under a live run, or depends on something other than its "
            "input and journal."
        )


@error_class
class CrashLoopError(WeftError):
    """A run whose turns kept dying with their engine: parked ``suspended`` for repair.

    Recorded as the suspended run's error when ``attempts`` turns in a row
    (``WEFT["MAX_RECOVERY_ATTEMPTS"]``) ended with the death of the engine
    running them, without a journal entry recorded in between.
    """

    code = "crash_loop"
    http_status = 409
    workflow_id: str
    position: int
    attempts: int
    engines: tuple[str, ...] = ()

    def _message(self) -> str:
        lost = ", ".join(f'"{e}"' for e in self.engines) or "unknown engines"
        return (
            f'Workflow "{self.workflow_id}" was suspended at journal position {self.position}: '
            f"{self.attempts} turns in a row ended with the death of their engine ({lost}). "
            "Fix the workflow or activity that kills its process, then resume the run."
        )


@error_class
class PayloadTypeMismatch(NonDeterminismError):
    """A stored value no longer fits the type the code declares for it (a
    deploy changed the type under a live run): the run is suspended, like a
    divergence. ``recorded`` names the value, ``new`` the field and why."""

    code = "payload_type_mismatch"

    def _message(self) -> str:
        return (
            f'Workflow "{self.workflow_id}": {self.recorded} at journal position '
            f"{self.position} no longer fits its declared type: {self.new}. The type changed "
            "under a live run; the run is suspended until code that accepts the stored value "
            "is deployed."
        )


@error_class
class ActivityError(WeftError):
    """An activity failed for good (retries exhausted, timed out, or non-retryable).

    ``err.message`` is the activity's own error text; ``str(err)`` is the full
    sentence, and ``as_dict()`` carries the activity's text as ``"error_message"``.
    """

    code = "activity_failed"
    http_status = 500
    _dict_keys = {"message": "error_message"}
    activity: str
    message: str
    kind: ActivityErrorKind = "error"
    error_type: str | None = None
    attempts: int = 1

    def _message(self) -> str:
        verb, plural = _VERBS.get(self.kind, self.kind), "" if self.attempts == 1 else "s"
        typ = f"{self.error_type}: " if self.error_type else ""
        return (
            f'Activity "{self.activity}" {verb} after {self.attempts} attempt{plural}: '
            f"{typ}{self.message}"
        )


@error_class
class ChildWorkflowError(WeftError):
    """A child workflow ended without a result (failed, cancelled or timed out)."""

    code = "child_workflow_failed"
    http_status = 500
    workflow_id: str
    status: str
    error: Any

    def _message(self) -> str:
        return f'Child workflow "{self.workflow_id}" ended {self.status}: {self.error!r}'


@error_class
class WorkflowTimeoutError(WeftError):
    """Raised inside a workflow when one of its waits times out."""

    code = "workflow_timeout"
    http_status = 504
    workflow_id: str
    what: str

    def _message(self) -> str:
        return f'Workflow "{self.workflow_id}" timed out waiting for {self.what}.'


@error_class
class WorkflowFailedError(WeftError):
    """The run ended failed, cancelled or timed out; carries the recorded error dict."""

    code = "workflow_failed"
    http_status = 500
    workflow_id: str
    status: str
    error: Any

    def _message(self) -> str:
        return f'Workflow "{self.workflow_id}" ended {self.status}: {self.error!r}'


@error_class
class NotLocallyOwned(WeftError):
    """An engine-level local call for a run this engine does not own."""

    code = "not_locally_owned"
    http_status = 409
    workflow_id: str
    held_by: str | None

    def _message(self) -> str:
        return (
            f'This engine does not own workflow "{self.workflow_id}" (held by '
            f"{holder_text(self.held_by)}); call it through the client, which routes to the "
            "owner."
        )


@error_class
class PayloadError(WeftError, TypeError, ValueError):
    """A JSON payload (input, result, signal, API body) was rejected.

    Both a ``TypeError`` and a ``ValueError``: a value the JSON contract
    refuses is a bad argument to the call that received it, and Python
    callers catch a bad argument as either (``json.dumps`` itself raises one
    or the other depending on what was wrong). One class, so its ``code``,
    its HTTP status and the error type a journal records stay the same.
    """

    code = "invalid_payload"
    http_status = 400
    what: str
    reason: str

    def _message(self) -> str:
        return f"Invalid {self.what}: {self.reason}"


@error_class
class ActivityCancelled(WeftError):
    """Raised inside an activity by ``heartbeat()``: its attempt must stop.

    The workflow was cancelled, suspended or timed out, the attempt timed out,
    or this engine lost the claim: whatever the activity returns now would be
    discarded, so it should clean up and let the exception propagate.
    """

    code = "activity_cancelled"
    http_status = 409
    workflow_id: str
    reason: str

    def _message(self) -> str:
        return (
            f'The activity attempt of workflow "{self.workflow_id}" must stop: {self.reason}. '
            "Its result would be discarded; let this exception propagate."
        )


@error_class
class StaleFenceError(WeftError):
    """``fenced_update(..., on_stale="raise")`` was refused: a newer owner wrote the row."""

    code = "stale_fence"
    http_status = 409
    model: str
    pk: Any
    workflow_id: str
    epoch: int
    stored_epoch: int

    def _message(self) -> str:
        return (
            f"Refused a stale write to {self.model} pk={self.pk!r}: workflow "
            f'"{self.workflow_id}" wrote it at epoch {self.stored_epoch}, newer than this '
            f"writer's epoch {self.epoch}. Another engine owns the workflow now and ran this "
            "step; this attempt's result will be discarded."
        )


@error_class
class WorkflowCancelled(WeftError):
    """Thrown into a workflow at its current wait when a cancel with a grace reaches it.

    The workflow may catch it (or use ``try/finally``) and yield cleanup
    commands until the grace runs out; the run then ends ``cancelled``
    whatever the body returns (``failed`` if the cleanup raised something else).
    """

    code = "workflow_cancelled"
    http_status = 409
    workflow_id: str
    reason: str

    def _message(self) -> str:
        return f'Workflow "{self.workflow_id}" was cancelled: {self.reason or "no reason given"}'


@error_class
class SagaCompensationError(WeftError):
    """At least one compensation of ``saga.compensate()`` failed for good.

    Raised only after every compensation was tried, in reverse order;
    ``outcomes`` lists each one as ``{"compensation", "status": "ok" | "failed",
    "error"}`` in the order they ran, so nothing that did run is hidden.
    """

    code = "saga_compensation_failed"
    http_status = 500
    workflow_id: str
    outcomes: list[dict[str, Any]]

    def _message(self) -> str:
        failed = [o for o in self.outcomes if o.get("status") != "ok"]
        names = ", ".join(f"{o.get('compensation')} ({o.get('error')})" for o in failed)
        return (
            f'Workflow "{self.workflow_id}": {len(failed)} of {len(self.outcomes)} '
            f"compensations failed: {names}"
        )


@error_class
class ScheduleNotFound(WeftError):
    """No schedule has this id."""

    code = "schedule_not_found"
    http_status = 404
    schedule_id: str

    def _message(self) -> str:
        return f'No schedule with id "{self.schedule_id}" exists.'


@error_class
class ScheduleAlreadyExists(WeftError):
    """``create_schedule`` with an id that is taken."""

    code = "schedule_already_exists"
    http_status = 409
    schedule_id: str

    def _message(self) -> str:
        return (
            f'Schedule "{self.schedule_id}" already exists (update_schedule changes it, '
            "delete_schedule removes it)."
        )


@error_class
class UpdateRejected(WeftError):
    """An update's validator raised: nothing was recorded (no request, no journal entry)."""

    code = "update_rejected"
    http_status = 422
    workflow_id: str
    name: str
    reason: str

    def _message(self) -> str:
        return f'Update "{self.name}" of workflow "{self.workflow_id}" was rejected: {self.reason}'


@error_class
class UnknownUpdate(WeftError):
    """The workflow registered no ``ctx.on_update`` handler of that name."""

    code = "unknown_update"
    http_status = 404
    workflow_id: str
    name: str
    registered: list[str]

    def _message(self) -> str:
        known = ", ".join(sorted(self.registered)) or "none"
        return (
            f'Workflow "{self.workflow_id}" has no update handler "{self.name}" '
            f"(registered: {known})."
        )


@error_class
class UnknownQuery(WeftError, LookupError):
    """The workflow registered no ``ctx.on_query`` handler of that name (also a
    ``LookupError``, what ``client.query`` raised for it before)."""

    code = "unknown_query"
    http_status = 400
    workflow_id: str
    name: str
    registered: list[str]

    def _message(self) -> str:
        known = sorted(self.registered) or "none"
        return (
            f"workflow {self.workflow_id!r} has no query handler {self.name!r} "
            f"(registered: {known})"
        )


@error_class
class WorkflowFinishedError(WeftError):
    """A wait that only the run could satisfy, on a run that already ended."""

    code = "workflow_finished"
    http_status = 409
    workflow_id: str
    status: str
    what: str

    def _message(self) -> str:
        return (
            f'Workflow "{self.workflow_id}" finished ({self.status}) without {self.what}; '
            "waiting longer cannot help."
        )


@error_class
class InvalidRunFilter(WeftError, ValueError):
    """A run filter (``RunFilter``: ``list_runs``, the API, the admin, bulk
    operations) named an unknown key or attribute, or a value of the wrong
    type -- or, for a bulk operation, matched every run without ``all``.
    Nothing was read or changed."""

    code = "invalid_run_filter"
    http_status = 400
    key: str
    value: str
    reason: str

    def _message(self) -> str:
        return f"Invalid run filter {self.key}={self.value!r:.200}: {self.reason}"


@error_class
class InvalidArgumentError(WeftError, TypeError, ValueError):
    """A client call's argument (a workflow id, a signal, update or query name,
    an idempotency key, a duration, a queue field) has the wrong type or value.
    Nothing was read or written.

    Both a ``TypeError`` and a ``ValueError``, like ``PayloadError``: callers
    that caught the plain ``ValueError`` these calls raised before still do.
    """

    code = "invalid_argument"
    http_status = 400
    argument: str
    reason: str

    def _message(self) -> str:
        return self.reason


ERROR_CLASSES: Final[tuple[type[WeftError], ...]] = tuple(
    dict.fromkeys(
        value
        for value in [*vars(_ownership).values(), *globals().values()]
        if isinstance(value, type) and issubclass(value, WeftError) and value is not WeftError
    )
)
"""Every concrete error class (the abstract base ``WeftError`` is not listed), in the
order they are defined: ``errors.ownership``'s first, then this module's."""

__all__ = [
    "ERROR_CLASSES",
    "ActivityErrorKind",
    "AsyncActivityTokenErrorKind",
    "WeftError",
    *(cls.__name__ for cls in ERROR_CLASSES),
]
