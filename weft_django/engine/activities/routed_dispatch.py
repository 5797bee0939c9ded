"""The dispatcher registry of routed activities, and the message they send.

A transport installs its dispatcher from the project's ``celery.py``, which may be imported
while Django's settings are still loading -- so this module imports no model and
``engine.activities.routed`` stays out of that import (``install(app)`` "starts nothing and
reads no Django setting"). The runtime asks ``dispatchers.current()`` for the dispatcher
when an attempt is sent; it never imports a transport (lint-imports "engine-no-interfaces").
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from weft_django.kernel.clock import wall_ms


@dataclass(frozen=True)
class RoutedMessage:
    """What a routed attempt sends: everything a worker needs, and the token.

    ``token`` is the raw single-use token (only its hash is stored);
    ``args``/``kwargs`` are JSON payloads; ``deadline_ms`` (wall clock) is
    when the attempt times out on the owner -- a message still queued then
    is useless, and ``expires_s`` says so to the broker. ``trace_context``:
    ids only (a W3C carrier), never data.
    """

    token: str
    activity: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    workflow_id: str
    run_id: str
    position: int
    attempt: int
    epoch: int
    idempotency_key: str
    deadline_ms: int | None
    #: The sending attempt's span as a W3C carrier (``engine.tracing``), or None.
    trace_context: dict[str, str] | None = None

    @property
    def expires_s(self) -> float | None:
        if self.deadline_ms is None:
            return None
        return max(0.001, (self.deadline_ms - wall_ms()) / 1000)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RoutedMessage:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


class RoutedDispatcher(Protocol):
    """Sends a routed attempt's message to its queue (installed by a transport)."""

    name: str

    def send(self, message: RoutedMessage) -> None: ...


class _Dispatchers:
    """The one dispatcher of this process (the last installed wins)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: RoutedDispatcher | None = None

    def install(self, dispatcher: RoutedDispatcher) -> None:
        with self._lock:
            self._current = dispatcher

    def uninstall(self, dispatcher: RoutedDispatcher | None = None) -> None:
        """Remove ``dispatcher`` (or whichever is installed)."""
        with self._lock:
            if dispatcher is None or self._current is dispatcher:
                self._current = None

    def current(self) -> RoutedDispatcher | None:
        with self._lock:
            return self._current


dispatchers = _Dispatchers()


__all__ = ["RoutedDispatcher", "RoutedMessage", "dispatchers"]
