"""Closed vocabularies with no other home: wake kinds, wake events, wake
transports, timer kinds, claim-attempt outcomes, lease-lost reasons.

Each of these names a metric label, a warning field or a message field, so a copy that
drifts silently breaks a dashboard or an alert: every layer imports them from here, and
this module imports nothing of weft_django. Statuses of stored rows live on the models as
``TextChoices`` (``models.RunStatus``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

WakeKind = Literal[
    "sleep",
    "wait-condition",
    "signal",
    "async-activity",
    "child-completion",
    "drive",
]
WAKE_KINDS: Final[tuple[WakeKind, ...]] = get_args(WakeKind)
"""weft's six wake kinds, in weft's order (SPEC §4.7): why the guard is asked."""

WakeEvent = Literal["start", "resume", "retry", "signal", "async-activity", "child-completion"]
WAKE_EVENTS: Final[tuple[WakeEvent, ...]] = get_args(WakeEvent)
"""The committed writes that make a run runnable: what a wake announces."""

PICKUP_EVENTS: Final[frozenset[WakeEvent]] = frozenset({"start", "resume", "retry"})
"""Events that make a ``pending`` run (any engine may pick it up); the others
wake a run its owner must drive."""

WakeTransport = Literal["polling", "notify", "celery", "local"]
WAKE_TRANSPORTS: Final[tuple[WakeTransport, ...]] = get_args(WakeTransport)
"""How a wake reached the guard (a metric label)."""

TimerKindValue = Literal["sleep", "timeout", "retry", "attempt"]
TIMER_KINDS: Final[tuple[TimerKindValue, ...]] = get_args(TimerKindValue)

TIMER_WAKE_KIND: Final[dict[str, WakeKind]] = {
    "sleep": "sleep",
    # A timed-out wait: a signal wait's or an async activity's deadline. weft
    # names every deadline of a wait "wait-condition".
    "timeout": "wait-condition",
    "retry": "drive",
    # Never due (``engine.activities.started``); a plain drive if one ever were.
    "attempt": "drive",
}
"""The wake kind a due timer of each kind asks the guard with."""

ClaimAttemptOutcome = Literal[
    "acquired", "takeover", "lost_race", "deposed", "rotated", "backoff_skipped"
]

LeaseLostReason = Literal["deposed", "renewal-unconfirmable"]
LEASE_LOST_REASONS: Final[tuple[LeaseLostReason, ...]] = get_args(LeaseLostReason)
"""Why the global lease was reported lost: fenced out, or a renewal that could
not be confirmed (transient; the engine does not halt for it)."""


def timer_wake_kind(kind: str) -> WakeKind:
    """The wake kind for a due timer of ``kind`` (unknown kinds: a plain drive)."""
    return TIMER_WAKE_KIND.get(kind, "drive")


__all__ = [
    "LEASE_LOST_REASONS",
    "PICKUP_EVENTS",
    "TIMER_KINDS",
    "TIMER_WAKE_KIND",
    "WAKE_EVENTS",
    "WAKE_KINDS",
    "WAKE_TRANSPORTS",
    "ClaimAttemptOutcome",
    "LeaseLostReason",
    "TimerKindValue",
    "WakeEvent",
    "WakeKind",
    "WakeTransport",
    "timer_wake_kind",
]
