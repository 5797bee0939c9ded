"""Ownership warnings: the loud, non-fatal signals of a fenced engine (SPEC §4.8).

Why this module exists: losing a claim or discarding a stale wake is *correct*
behaviour under fenced ownership (another engine took over; this one must
stop), so it must not raise -- but an operator has to be able to see it, and
a test suite has to be able to assert it. The same holds for an activity
thread abandoned still running (it cannot be stopped; the engine goes on).
Each event is therefore reported twice through one helper:

* ``warnings.warn(<instance>)`` with a ``RuntimeWarning`` subclass that
  carries its fields as attributes (``pytest.warns`` / ``-W error`` friendly;
  a project running pytest with ``-W error`` adds
  ``ignore::weft_django.warnings.WeftWarning`` to its ``filterwarnings``);
* a WARNING on the ``weft_django.ownership`` logger (``weft_django.engine``
  for the activity warning) whose record carries
  ``record.weft = {..fields, "event": <name>}`` for structured log pipelines.

The closed sets these warnings carry (``WakeKind``, ``LeaseLostReason``) are
defined in ``weft_django.kernel.vocab`` and re-exported here, their old home.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Final

from weft_django.kernel.vocab import LEASE_LOST_REASONS, WAKE_KINDS, LeaseLostReason, WakeKind

__all__ = [
    "LEASE_LOST_REASONS",
    "WAKE_KINDS",
    "WARNING_CLASSES",
    "LeaseLostReason",
    "WakeKind",
    "WeftActivityAbandonedWarning",
    "WeftAtomicOtherAliasWarning",
    "WeftLeaseLostWarning",
    "WeftScheduleRemovedWarning",
    "WeftWarning",
    "WeftWorkflowClaimLostWarning",
    "WeftWorkflowWakeDiscardedWarning",
    "warn_activity_abandoned",
    "warn_claim_lost",
    "warn_lease_lost",
    "warn_wake_discarded",
]

logger = logging.getLogger("weft_django.ownership")
engine_logger = logging.getLogger("weft_django.engine")


def _rebuild_warning(cls: type[WeftWarning], fields: dict[str, Any]) -> WeftWarning:
    return cls(**fields)


class WeftWarning(RuntimeWarning):
    """Base class of every weft-django warning. Filter on this to silence them all."""

    _fields: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        """The warning's fields by name (what its logging ``extra`` carries)."""
        return {name: getattr(self, name) for name in self._fields}

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from fields, not from ``args`` (which holds only the message).
        return (_rebuild_warning, (type(self), self.fields()))


class WeftWorkflowClaimLostWarning(WeftWarning):
    """This engine lost one workflow's claim; it stops driving only that workflow."""

    _fields = ("workflow_id",)

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        super().__init__(
            f'workflow "{workflow_id}" lost its ownership claim: another engine now holds it '
            "at a newer epoch. This engine stops driving that workflow; its other claimed "
            "workflows are unaffected."
        )


class WeftWorkflowWakeDiscardedWarning(WeftWarning):
    """A wake scheduled under an older claim generation was dropped undriven."""

    _fields = ("workflow_id", "wake_kind")

    def __init__(self, workflow_id: str, wake_kind: WakeKind) -> None:
        self.workflow_id = workflow_id
        self.wake_kind = wake_kind
        super().__init__(
            f'discarded a stale "{wake_kind}" wake for workflow "{workflow_id}": this engine '
            "no longer holds the claim generation the wake was scheduled under, so the "
            "workflow is not driven by it."
        )


class WeftLeaseLostWarning(WeftWarning):
    """The store-wide lease (``"lease"`` mode) was lost (weft's ``WeftEngineLeaseLostWarning``)."""

    _fields = ("holder_id", "reason")

    def __init__(self, holder_id: str, reason: LeaseLostReason = "deposed") -> None:
        self.holder_id = holder_id
        self.reason = reason
        if reason == "renewal-unconfirmable":
            message = (
                f'engine "{holder_id}" could not confirm the renewal of the store\'s ownership '
                "lease; it keeps running and retries, and halts only if a fenced write is "
                "refused."
            )
        else:
            message = (
                f'engine "{holder_id}" was deposed: a durable write was fenced out because '
                "another engine now holds this store's ownership lease at a newer epoch. "
                "This engine is halting to avoid split-brain writes."
            )
        super().__init__(message)


class WeftActivityAbandonedWarning(WeftWarning):
    """A sync activity's thread was abandoned still running: Python cannot stop it.

    Raised once per activity name per process, the first time an attempt of
    it timed out (``timeout``, ``heartbeat_timeout``) or its result stopped
    being wanted while its thread was still running. The thread keeps running
    to its end; its result is dropped. The
    ``weft_activity_abandoned_threads_total`` counter counts every such thread.
    """

    _fields = ("activity", "reason")

    def __init__(self, activity: str, reason: str) -> None:
        self.activity = activity
        self.reason = reason
        super().__init__(
            f'activity "{activity}" was abandoned while its thread was still running '
            f"({reason}): a Python thread cannot be stopped, so it keeps running to its end "
            "and its result is dropped. Make the activity return (or heartbeat and stop on "
            "ActivityCancelled), or write it as an async def, whose timeout cancels it. "
            "This warning is shown once per activity per process."
        )


class WeftAtomicOtherAliasWarning(WeftWarning):
    """An atomic activity wrote through a database alias other than weft's.

    Those writes are not in the activity's transaction: they are at-least-once
    like any plain activity's. Shown once per activity and alias per process.
    """

    _fields = ("activity", "alias")

    def __init__(self, activity: str, alias: str) -> None:
        self.activity = activity
        self.alias = alias
        super().__init__(
            f'atomic activity "{activity}" wrote through the database alias "{alias}", which '
            "is not the weft alias: those writes do not commit with its result and are not "
            "exactly-once (they may run again after a crash or a takeover). This warning is "
            "shown once per activity and alias per process."
        )


class WeftScheduleRemovedWarning(WeftWarning):
    """A schedule declared in ``WEFT["SCHEDULES"]`` is no longer declared.

    The boot-time sync pauses it (it does not delete it: its history and
    counters stay; ``client.delete_schedule`` removes it). Shown once, by the
    engine whose sync paused it.
    """

    _fields = ("schedule_id",)

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(
            f'schedule "{schedule_id}" is no longer in WEFT["SCHEDULES"]: it was paused, not '
            "deleted. Delete it with client.delete_schedule, or declare it again to resume it."
        )


WARNING_CLASSES: Final[tuple[type[WeftWarning], ...]] = (
    WeftWorkflowClaimLostWarning,
    WeftWorkflowWakeDiscardedWarning,
    WeftLeaseLostWarning,
    WeftActivityAbandonedWarning,
    WeftAtomicOtherAliasWarning,
    WeftScheduleRemovedWarning,
)
"""Every concrete warning class (the docs test compares against this)."""


def _report(
    instance: WeftWarning,
    event: str,
    extra_fields: dict[str, Any],
    log: logging.Logger = logger,
) -> None:
    # stacklevel=3: this helper -> warn_* -> the caller of warn_*, which is the
    # code that detected the event (same attribution as ``stacklevel=2`` from
    # inside warn_*).
    warnings.warn(instance, stacklevel=3)
    payload: dict[str, Any] = {**extra_fields, **instance.fields(), "event": event}
    log.warning("%s", instance, extra={"weft": payload})


def warn_claim_lost(workflow_id: str, **fields: Any) -> WeftWorkflowClaimLostWarning:
    """Warn and log that this engine lost ``workflow_id``'s claim.

    ``fields`` (e.g. ``engine_id``, ``epoch``) are added to the structured log
    record; the warning's own fields win on a name clash.
    """
    instance = WeftWorkflowClaimLostWarning(workflow_id)
    _report(instance, "workflow_claim_lost", fields)
    return instance


def warn_wake_discarded(
    workflow_id: str, wake_kind: WakeKind, **fields: Any
) -> WeftWorkflowWakeDiscardedWarning:
    """Warn and log that a stale ``wake_kind`` wake for ``workflow_id`` was discarded.

    ``fields`` (e.g. ``reason``, ``observed_engine_id``, ``observed_epoch``)
    are added to the structured log record.
    """
    instance = WeftWorkflowWakeDiscardedWarning(workflow_id, wake_kind)
    _report(instance, "workflow_wake_discarded", fields)
    return instance


def warn_lease_lost(
    holder_id: str, reason: LeaseLostReason = "deposed", **fields: Any
) -> WeftLeaseLostWarning:
    """Warn and log that engine ``holder_id`` lost (or could not confirm) the global lease."""
    instance = WeftLeaseLostWarning(holder_id, reason)
    _report(instance, "lease_lost", fields)
    return instance


def warn_activity_abandoned(
    activity: str, reason: str, **fields: Any
) -> WeftActivityAbandonedWarning:
    """Warn and log (on ``weft_django.engine``) that ``activity``'s thread was abandoned.

    The caller decides how often (the executor: once per activity name per
    process). ``fields`` (e.g. ``workflow_id``, ``position``) are added to the
    structured log record.
    """
    instance = WeftActivityAbandonedWarning(activity, reason)
    _report(instance, "activity_abandoned", fields, engine_logger)
    return instance
