"""The errors of the ownership protocol's edges: a claim another engine holds, a store
whose ownership mode disagrees with this engine's, a deposed engine, a global lease that
cannot be had or read.

Part of the public catalogue (``weft_django.errors``, which imports them and lists them
first in ``ERROR_CLASSES``); the same rules hold: a stable ``code``, fields as attributes,
a message naming them, pickling by fields.
"""

from __future__ import annotations

import datetime as _dt

from weft_django.errors.base import WeftError, error_class, holder_text


def _ms_to_iso(ms: int) -> str:
    try:
        moment = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return f"{ms} ms"
    return f"{moment.isoformat().replace('+00:00', 'Z')} ({ms} ms)"


@error_class
class WorkflowClaimUnavailableError(WeftError):
    """Another engine holds a live, unexpired claim on the workflow."""

    code = "workflow_claim_unavailable"
    http_status = 409
    workflow_id: str
    held_by: str | None

    def _message(self) -> str:
        return (
            f'Could not acquire the ownership claim for workflow "{self.workflow_id}" (held by '
            f"{holder_text(self.held_by)}): its claim is live. Retry later; if that engine "
            "crashed, its claim becomes eligible for takeover once it expires."
        )


@error_class
class OwnershipModeMismatchError(WeftError):
    """This engine's configured ownership mode disagrees with the store's marker."""

    code = "ownership_mode_mismatch"
    http_status = 409
    configured_mode: str
    stored_mode: str
    established_at: int

    def _message(self) -> str:
        return (
            f"This engine is configured with OWNERSHIP={self.configured_mode!r}, but the "
            f"store's ownership-mode marker records {self.stored_mode!r} (established at "
            f"{_ms_to_iso(self.established_at)}). Every engine sharing a database must agree "
            "on the mode: stop every engine, pick one mode, and restart them all. Run "
            "`manage.py weft_reset_mode` only while no engine is alive."
        )


@error_class
class EngineDeposedError(WeftError):
    """A fenced write lost its precondition: another engine owns the work now (internal)."""

    code = "engine_deposed"
    http_status = 409
    workflow_id: str | None = None

    def _message(self) -> str:
        what, then = (
            ("the store's ownership lease", "This engine is halting.")
            if self.workflow_id is None
            else (
                f'workflow "{self.workflow_id}"\'s ownership claim',
                "This engine stops driving it.",
            )
        )
        return (
            "Engine was deposed: a fenced durable write lost its precondition because another "
            f"engine now holds {what} at a newer epoch. {then}"
        )


@error_class
class EngineLeaseAcquisitionTimeoutError(WeftError):
    """A standby engine waited ``LEASE_WAIT_TIMEOUT`` without getting the global lease."""

    code = "engine_lease_acquisition_timeout"
    http_status = 503
    waited_ms: int
    held_by: str | None

    def _message(self) -> str:
        return (
            f"Could not acquire the store's ownership lease within {self.waited_ms} ms "
            f"(currently held by {holder_text(self.held_by)}). Another engine still holds "
            "it; this engine takes over only once that lease expires."
        )


@error_class
class EngineLeaseCorruptedError(WeftError):
    """The global lease rows cannot be decoded and so cannot be used safely."""

    code = "engine_lease_corrupted"
    http_status = 500
    detail: str

    def _message(self) -> str:
        return (
            "The ownership lease stored in the database is corrupt and cannot be used "
            f"safely: {self.detail}. Repair it (with every engine stopped) before restarting."
        )


__all__ = [
    "EngineDeposedError",
    "EngineLeaseAcquisitionTimeoutError",
    "EngineLeaseCorruptedError",
    "OwnershipModeMismatchError",
    "WorkflowClaimUnavailableError",
]
