"""Post-commit wake hooks: how a durable write reaches a message transport.

``client`` and the external transitions call ``wake_on_commit`` after each
write that makes a run runnable (a start, a resume or retry, a signal, an
async-activity completion, a child's end). When a transport registered a
hook (``weft_django.celery.install`` does), the hook runs once the caller's
transaction commits (``transaction.on_commit``), so a rolled-back write
wakes nobody and a committed one is visible to whoever the wake reaches.
The polling transport registers nothing: then this is a no-op and costs
nothing. A hook that fails is logged and swallowed — the durable rows stay
the truth and polling picks up what a lost wake missed.

This module imports neither the models nor the runtime, so any layer may
call it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

logger = logging.getLogger("weft_django.transports")

WakeEvent = Literal["start", "resume", "retry", "signal", "async-activity", "child-completion"]
WAKE_EVENTS: tuple[WakeEvent, ...] = (
    "start",
    "resume",
    "retry",
    "signal",
    "async-activity",
    "child-completion",
)
#: Events that make a ``pending`` run (any engine may pick it up); the others
#: wake a run its owner must drive.
PICKUP_EVENTS: frozenset[str] = frozenset({"start", "resume", "retry"})


@dataclass(frozen=True)
class WakeRequest:
    """One committed write that should wake ``run_id``."""

    event: WakeEvent
    run_id: str
    using: str
    workflow_id: str | None = None
    #: A delayed start's time (engine-clock ms), for ``start``.
    start_at: int | None = None


WakeHook = Callable[[WakeRequest], Any]

_lock = threading.Lock()
_hooks: list[WakeHook] = []


def register(hook: WakeHook) -> None:
    """Add ``hook`` (idempotent)."""
    with _lock:
        if hook not in _hooks:
            _hooks.append(hook)


def unregister(hook: WakeHook) -> None:
    with _lock:
        if hook in _hooks:
            _hooks.remove(hook)


def registered() -> tuple[WakeHook, ...]:
    with _lock:
        return tuple(_hooks)


def fire(request: WakeRequest) -> None:
    """Call every hook now (exceptions are logged, never raised)."""
    for hook in registered():
        try:
            hook(request)
        except Exception:  # a lost wake costs one polling interval, never correctness
            logger.warning(
                "wake hook %r failed for %s of run %s",
                hook,
                request.event,
                request.run_id,
                exc_info=True,
            )


def wake_on_commit(
    event: WakeEvent,
    *,
    run_id: Any,
    using: str,
    workflow_id: str | None = None,
    start_at: int | None = None,
) -> None:
    """Run the registered hooks for ``event`` once the current transaction commits."""
    if run_id is None or not registered():
        return
    request = WakeRequest(event, str(run_id), using, workflow_id, start_at)
    transaction.on_commit(lambda: fire(request), using=using)


__all__ = [
    "PICKUP_EVENTS",
    "WAKE_EVENTS",
    "WakeEvent",
    "WakeHook",
    "WakeRequest",
    "fire",
    "register",
    "registered",
    "unregister",
    "wake_on_commit",
]
