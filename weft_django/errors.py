"""The exceptions weft-django raises to its callers (SPEC §4.8).

Why this module exists: an error is part of the public contract. The API maps
each one to an HTTP status and a stable machine-readable ``code``; the admin,
the CLI and user code match on the class; logs need the values that explain
what happened (which workflow, who holds it, configured versus stored mode).
So every error here:

* has a class-level ``code`` (stable, unique, snake_case) and ``http_status``;
* stores each constructor argument as an attribute of the same name;
* builds a message that names those values;
* serialises with ``as_dict()`` -> ``{"code", "message", **fields}``;
* survives ``pickle`` (Celery ships exceptions between processes).

Lost races inside the claim protocol are *not* errors (SPEC §4.9: registry
methods return result objects); these are raised only at the edges where a
caller asked for something specific and cannot have it.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, ClassVar, Final, Literal

AsyncActivityTokenErrorKind = Literal["unknown", "used"]
ActivityErrorKind = Literal["error", "timeout", "non_retryable"]


def _rebuild_error(cls: type[WeftError], fields: dict[str, Any]) -> WeftError:
    return cls(**fields)


def _holder_text(held_by: str | None) -> str:
    return f'"{held_by}"' if held_by is not None else "an unknown or vanished holder"


_VERBS = {"error": "failed", "timeout": "timed out", "non_retryable": "failed (non-retryable)"}


def _ms_to_iso(ms: int) -> str:
    try:
        moment = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return f"{ms} ms"
    return f"{moment.isoformat().replace('+00:00', 'Z')} ({ms} ms)"


class WeftError(Exception):
    """Base class of every weft-django error (never raised itself)."""

    code: ClassVar[str] = "weft_error"
    http_status: int = 500
    _fields: ClassVar[tuple[str, ...]] = ()
    # as_dict() key for a field whose name clashes with "code" or "message".
    _dict_keys: ClassVar[dict[str, str]] = {}

    def fields(self) -> dict[str, Any]:
        """The constructor fields by name."""
        return {name: getattr(self, name) for name in self._fields}

    def as_dict(self) -> dict[str, Any]:
        """``{"code", "message", **fields}`` -- the API's error body."""
        body: dict[str, Any] = {"code": self.code, "message": str(self)}
        for name, value in self.fields().items():
            body[self._dict_keys.get(name, name)] = value
        return body

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (type(self), self.fields()))


class WorkflowClaimUnavailableError(WeftError):
    """Another engine holds a live, unexpired claim on the workflow."""

    code = "workflow_claim_unavailable"
    http_status = 409
    _fields = ("workflow_id", "held_by")

    def __init__(self, workflow_id: str, held_by: str | None) -> None:
        self.workflow_id = workflow_id
        self.held_by = held_by
        super().__init__(
            f'Could not acquire the ownership claim for workflow "{workflow_id}" (held by '
            f"{_holder_text(held_by)}): its claim is live. Retry later; if that engine crashed, "
            "its claim becomes eligible for takeover once it expires."
        )


class OwnershipModeMismatchError(WeftError):
    """This engine's configured ownership mode disagrees with the store's marker."""

    code = "ownership_mode_mismatch"
    http_status = 409
    _fields = ("configured_mode", "stored_mode", "established_at")

    def __init__(self, configured_mode: str, stored_mode: str, established_at: int) -> None:
        self.configured_mode = configured_mode
        self.stored_mode = stored_mode
        self.established_at = established_at
        super().__init__(
            f"This engine is configured with OWNERSHIP={configured_mode!r}, but the store's "
            f"ownership-mode marker records {stored_mode!r} (established at "
            f"{_ms_to_iso(established_at)}). Every engine sharing a database must agree on "
            "the mode: stop every engine, pick one mode, and restart them all. Run "
            "`manage.py weft_reset_mode` only while no engine is alive."
        )


class EngineDeposedError(WeftError):
    """A fenced write lost its precondition: another engine owns the work now (internal)."""

    code = "engine_deposed"
    http_status = 409
    _fields = ("workflow_id",)

    def __init__(self, workflow_id: str | None = None) -> None:
        self.workflow_id = workflow_id
        what, then = (
            ("the store's ownership lease", "This engine is halting.")
            if workflow_id is None
            else (f'workflow "{workflow_id}"\'s ownership claim', "This engine stops driving it.")
        )
        super().__init__(
            "Engine was deposed: a fenced durable write lost its precondition because another "
            f"engine now holds {what} at a newer epoch. {then}"
        )


class EngineLeaseAcquisitionTimeoutError(WeftError):
    """A standby engine waited ``LEASE_WAIT_TIMEOUT`` without getting the global lease."""

    code = "engine_lease_acquisition_timeout"
    http_status = 503
    _fields = ("waited_ms", "held_by")

    def __init__(self, waited_ms: int, held_by: str | None) -> None:
        self.waited_ms = waited_ms
        self.held_by = held_by
        super().__init__(
            f"Could not acquire the store's ownership lease within {waited_ms} ms (currently "
            f"held by {_holder_text(held_by)}). Another engine still holds it; this engine "
            "takes over only once that lease expires."
        )


class EngineLeaseCorruptedError(WeftError):
    """The global lease rows cannot be decoded and so cannot be used safely."""

    code = "engine_lease_corrupted"
    http_status = 500
    _fields = ("detail",)

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(
            "The ownership lease stored in the database is corrupt and cannot be used "
            f"safely: {detail}. Repair it (with every engine stopped) before restarting."
        )


class WorkflowNotFound(WeftError):
    """No run exists for the workflow id."""

    code = "workflow_not_found"
    http_status = 404
    _fields = ("workflow_id",)

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(f'No workflow with id "{workflow_id}" exists.')


class UnknownWorkflowType(WeftError):
    """No ``@workflow`` is registered under the name."""

    code = "unknown_workflow_type"
    http_status = 400
    _fields = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f'No workflow type named "{name}" is registered (check the @workflow name and that '
            "its module is autodiscovered in this process)."
        )


class WorkflowAlreadyRunning(WeftError):
    """A live (non-terminal) run already exists for the workflow id."""

    code = "workflow_already_running"
    http_status = 409
    _fields = ("workflow_id", "run_id")

    def __init__(self, workflow_id: str, run_id: str | None = None) -> None:
        self.workflow_id = workflow_id
        self.run_id = run_id
        run = f" (run {run_id})" if run_id is not None else ""
        super().__init__(f'Workflow "{workflow_id}" already has a live run{run}.')


class IdempotencyConflictError(WeftError):
    """An idempotency key was reused for a different workflow name."""

    code = "idempotency_conflict"
    http_status = 409
    _fields = ("idempotency_key", "existing_name", "requested_name")

    def __init__(self, idempotency_key: str, existing_name: str, requested_name: str) -> None:
        self.idempotency_key = idempotency_key
        self.existing_name = existing_name
        self.requested_name = requested_name
        super().__init__(
            f'Idempotency key "{idempotency_key}" already started workflow "{existing_name}"; '
            f'it cannot be reused to start "{requested_name}".'
        )


class InvalidTransitionError(WeftError):
    """The action does not fit the run's current status; nothing was written."""

    code = "invalid_transition"
    http_status = 409
    _fields = ("workflow_id", "status", "action")

    def __init__(self, workflow_id: str, status: str, action: str) -> None:
        self.workflow_id = workflow_id
        self.status = status
        self.action = action
        super().__init__(f'Cannot {action} workflow "{workflow_id}": its latest run is {status}.')


class AsyncActivityTokenError(WeftError):
    """An async-activity completion named an unknown or already-used token."""

    code = "async_activity_token"
    http_status = 404  # class default (unknown); a used token gives 409 on the instance
    _fields = ("kind",)

    def __init__(self, kind: AsyncActivityTokenErrorKind) -> None:
        self.kind = kind
        self.http_status = 409 if kind == "used" else 404
        super().__init__(
            "This async-activity token was already used; a token completes once."
            if kind == "used"
            else "This async-activity token is unknown (never issued, or purged)."
        )


class NonDeterminismError(WeftError):
    """Replay produced a different command than the journal recorded at a position."""

    code = "non_determinism"
    http_status = 409
    _fields = ("workflow_id", "position", "recorded", "new")

    def __init__(self, workflow_id: str, position: int, recorded: str, new: str) -> None:
        self.workflow_id = workflow_id
        self.position = position
        self.recorded = recorded
        self.new = new
        super().__init__(
            f'Workflow "{workflow_id}" is not deterministic: at journal position {position} '
            f"it recorded {recorded} but replay now yields {new}. Workflow code changed under "
            "a live run, or depends on something other than its input and journal."
        )


class ActivityError(WeftError):
    """An activity failed for good (retries exhausted, timed out, or non-retryable).

    ``err.message`` is the activity's own error text; ``str(err)`` is the full
    sentence, and ``as_dict()`` carries the activity's text as ``"error_message"``.
    """

    code = "activity_failed"
    http_status = 500
    _fields = ("activity", "message", "kind", "error_type", "attempts")
    _dict_keys = {"message": "error_message"}

    def __init__(
        self,
        activity: str,
        message: str,
        kind: ActivityErrorKind = "error",
        error_type: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.activity = activity
        self.message = message
        self.kind = kind
        self.error_type = error_type
        self.attempts = attempts
        verb, plural = _VERBS.get(kind, kind), "" if attempts == 1 else "s"
        typ = f"{error_type}: " if error_type else ""
        super().__init__(
            f'Activity "{activity}" {verb} after {attempts} attempt{plural}: {typ}{message}'
        )


class ChildWorkflowError(WeftError):
    """A child workflow ended without a result (failed, cancelled or timed out)."""

    code = "child_workflow_failed"
    http_status = 500
    _fields = ("workflow_id", "status", "error")

    def __init__(self, workflow_id: str, status: str, error: Any) -> None:
        self.workflow_id = workflow_id
        self.status = status
        self.error = error
        super().__init__(f'Child workflow "{workflow_id}" ended {status}: {error!r}')


class WorkflowTimeoutError(WeftError):
    """Raised inside a workflow when one of its waits times out."""

    code = "workflow_timeout"
    http_status = 504
    _fields = ("workflow_id", "what")

    def __init__(self, workflow_id: str, what: str) -> None:
        self.workflow_id = workflow_id
        self.what = what
        super().__init__(f'Workflow "{workflow_id}" timed out waiting for {what}.')


class WorkflowFailedError(WeftError):
    """The run ended failed, cancelled or timed out; carries the recorded error dict."""

    code = "workflow_failed"
    http_status = 500
    _fields = ("workflow_id", "status", "error")

    def __init__(self, workflow_id: str, status: str, error: Any) -> None:
        self.workflow_id = workflow_id
        self.status = status
        self.error = error
        super().__init__(f'Workflow "{workflow_id}" ended {status}: {error!r}')


class NotLocallyOwned(WeftError):
    """An engine-level local call for a run this engine does not own."""

    code = "not_locally_owned"
    http_status = 409
    _fields = ("workflow_id", "held_by")

    def __init__(self, workflow_id: str, held_by: str | None) -> None:
        self.workflow_id = workflow_id
        self.held_by = held_by
        super().__init__(
            f'This engine does not own workflow "{workflow_id}" (held by '
            f"{_holder_text(held_by)}); call it through the client, which routes to the owner."
        )


class PayloadError(WeftError, ValueError):
    """A JSON payload (input, result, signal, API body) was rejected."""

    code = "invalid_payload"
    http_status = 400
    _fields = ("what", "reason")

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(f"Invalid {what}: {reason}")


ERROR_CLASSES: Final[tuple[type[WeftError], ...]] = (
    WorkflowClaimUnavailableError,
    OwnershipModeMismatchError,
    EngineDeposedError,
    EngineLeaseAcquisitionTimeoutError,
    EngineLeaseCorruptedError,
    WorkflowNotFound,
    UnknownWorkflowType,
    WorkflowAlreadyRunning,
    IdempotencyConflictError,
    InvalidTransitionError,
    AsyncActivityTokenError,
    NonDeterminismError,
    ActivityError,
    ChildWorkflowError,
    WorkflowTimeoutError,
    WorkflowFailedError,
    NotLocallyOwned,
    PayloadError,
)
"""Every concrete error class (the abstract base ``WeftError`` is not listed)."""

__all__ = [
    "ERROR_CLASSES",
    "ActivityErrorKind",
    "AsyncActivityTokenErrorKind",
    "WeftError",
    *(cls.__name__ for cls in ERROR_CLASSES),
]
