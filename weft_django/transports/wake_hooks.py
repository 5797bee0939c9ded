"""Deprecated: post-commit wake hooks, kept for imports.

Moved to ``weft_django.engine.wakes``: the runtime announces every wake with
``announce(Wake(...))`` and each installed ``WakeBackend`` delivers it once
the writing transaction committed. A transport that used ``register(hook)``
should implement a ``WakeBackend`` instead. Until then ``register`` installs
one ``HookBackend`` that calls every registered ``hook(WakeRequest)`` with
the wake events (never with ``"finished"`` or ``"released"``, which hooks
never received), so a registered hook sees exactly what it saw before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from django.db import transaction

from weft_django.engine.wakes import Wake, WakeBackend, backends
from weft_django.vocab import PICKUP_EVENTS, WAKE_EVENTS, WakeEvent

logger = logging.getLogger("weft_django.transports")

WakeRequest = Wake
"""Moved to ``weft_django.engine.wakes.Wake``; kept for imports."""

WakeHook = Callable[[WakeRequest], Any]


class HookBackend(WakeBackend):
    """Delivers the wake events to the hooks registered with ``register``."""

    name: ClassVar[str] = "wake-hooks"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[WakeHook] = []

    def add(self, hook: WakeHook) -> None:
        with self._lock:
            if hook not in self._hooks:
                self._hooks.append(hook)

    def discard(self, hook: WakeHook) -> bool:
        """Remove ``hook``; returns whether any hook is left."""
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)
            return bool(self._hooks)

    def hooks(self) -> tuple[WakeHook, ...]:
        with self._lock:
            return tuple(self._hooks)

    def deliver(self, wake: Wake) -> None:
        if wake.event in WAKE_EVENTS:
            fire(wake)


_backend = HookBackend()


def register(hook: WakeHook) -> None:
    """Add ``hook`` (idempotent) and install the backend that calls it."""
    _backend.add(hook)
    backends.install(_backend)


def unregister(hook: WakeHook) -> None:
    if not _backend.discard(hook):
        backends.uninstall(_backend)


def registered() -> tuple[WakeHook, ...]:
    return _backend.hooks()


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
    """Run the registered hooks (only them) for ``event`` once the current
    transaction commits; new code calls ``weft_django.engine.wakes.announce``."""
    if run_id is None or not registered():
        return
    request = Wake(event, str(run_id), using, workflow_id, start_at)
    transaction.on_commit(lambda: fire(request), using=using)


__all__ = [
    "PICKUP_EVENTS",
    "WAKE_EVENTS",
    "HookBackend",
    "WakeEvent",
    "WakeHook",
    "WakeRequest",
    "fire",
    "register",
    "registered",
    "unregister",
    "wake_on_commit",
]
