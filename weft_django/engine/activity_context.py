"""What a running activity knows about itself: ``activity_info()``.

Why a context variable: the activity function is user code called by the
turn's activity step (``turn.activity.attempt``) through the engine's
activity runner (``engine.activities.run_activity``). The step knows the
run, the command's journal position, the attempt number and the claim
epoch; the function only has its own arguments. The step sets
``_CURRENT`` around the call (``activity_scope``), and the runner copies
the context into the timeout thread it starts, so the value is right on
every path: inline, on a timeout thread, in a polling engine and in a Celery
pool process (which drives the same ``Turn``).

The invariant ``idempotency_key`` protects: one activity command of one
workflow has one key, whatever the attempt and whichever engine owns the
workflow -- ``f"{workflow_id}:{position}"``. Positions are journal
positions, fixed by the workflow's code (a replay that disagrees raises
``NonDeterminismError``), so a takeover cannot give the same command
another key. Pass it to outside services that deduplicate (a payment
provider's idempotency key): at-least-once attempts become one effect.

``heartbeat(details=None)`` reaches the engine through the attempt's
``AttemptControl``, the one object shared by the turn that started the
attempt, the executor that runs it (its timeouts) and the activity itself:
whoever learns first that the attempt must stop (a timeout, a cancel seen by
the turn, a heartbeat write the fence refused) calls ``cancel``; the next
heartbeat then raises ``ActivityCancelled`` inside the activity.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

__all__ = [
    "ActivityInfo",
    "AttemptControl",
    "HeartbeatSink",
    "activity_info",
    "activity_scope",
    "idempotency_key",
]


class HeartbeatSink(Protocol):
    """Where an attempt's heartbeat details go durably (a fenced write).

    Raises ``ActivityCancelled`` when the write was refused: the run is no
    longer drivable or this engine no longer holds the claim.
    """

    def __call__(self, details: Any) -> None: ...


class AttemptControl:
    """One activity attempt's shared state: cancelled?, last heartbeat.

    Thread-safe: the activity (its thread or the engine's event loop), the
    executor's watchdog and the turn all touch it. ``clock_ms`` is the
    engine clock; ``heartbeat_timeout_ms`` is ``None`` without
    ``@activity(heartbeat_timeout=...)``.
    """

    def __init__(
        self,
        clock_ms: Callable[[], int],
        *,
        heartbeat_timeout_ms: int | None = None,
        sink: HeartbeatSink | None = None,
    ) -> None:
        self.clock_ms = clock_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.sink = sink
        self.started_ms = clock_ms()
        self.last_beat_ms = self.started_ms
        self.details: Any = None
        self._cancelled = threading.Event()
        self.cancel_reason = ""
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self, reason: str) -> None:
        """The attempt must stop (its result will be discarded); first reason wins."""
        with self._lock:
            if not self._cancelled.is_set():
                self.cancel_reason = reason
                self._cancelled.set()

    def heartbeat_overdue(self, now_ms: int) -> bool:
        """No heartbeat for longer than ``heartbeat_timeout_ms``."""
        timeout = self.heartbeat_timeout_ms
        return timeout is not None and now_ms - self.last_beat_ms > timeout


@dataclass(frozen=True)
class ActivityInfo:
    """One attempt of one activity command, as the engine running it sees it.

    ``position``: the journal position of the activity command.
    ``attempt``: 1-based; each retry adds one.
    ``epoch``: the claim epoch the running engine holds for the workflow.
    ``idempotency_key``: ``"<workflow_id>:<position>"``, the same across
    attempts and owners -- the key to hand to outside services.
    ``deadline``: when this attempt times out (aware, UTC, on the engine
    clock: the wall clock unless a test injected one), ``None`` without an
    activity ``timeout``.
    """

    workflow_id: str
    run_id: str
    position: int
    attempt: int
    epoch: int
    idempotency_key: str
    deadline: datetime | None
    control: AttemptControl | None = field(default=None, repr=False, compare=False)
    """The engine's handle on this attempt (``heartbeat`` goes through it)."""


_CURRENT: ContextVar[ActivityInfo | None] = ContextVar("weft_activity_info", default=None)


def idempotency_key(workflow_id: str, position: int) -> str:
    """The one spelling of an activity command's idempotency key."""
    return f"{workflow_id}:{position}"


def deadline_from_ms(deadline_ms: int | None) -> datetime | None:
    """An engine-clock deadline (ms since the epoch) as an aware UTC datetime."""
    if deadline_ms is None:
        return None
    return datetime.fromtimestamp(deadline_ms / 1000, tz=UTC)


@contextlib.contextmanager
def activity_scope(info: ActivityInfo) -> Iterator[ActivityInfo]:
    """Make ``info`` what ``activity_info()`` returns while the activity runs."""
    token = _CURRENT.set(info)
    try:
        yield info
    finally:
        _CURRENT.reset(token)


def activity_info() -> ActivityInfo:
    """The running activity's ``ActivityInfo``.

    Raises ``RuntimeError`` outside an activity (in a workflow body, a
    view, a shell): there is no attempt to describe.
    """
    info = _CURRENT.get()
    if info is None:
        raise RuntimeError(
            "activity_info() was called outside a running activity: it is only "
            "available inside an @activity function while the engine runs it"
        )
    return info
