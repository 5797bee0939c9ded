"""What a running activity knows about itself: ``activity_info()``.

Why a context variable: the activity function is user code called by the
turn's activity step (``turn.activity``) through the engine's activity
executor (``engine.executor``). The step knows the run, the command's
journal position, the attempt number and the claim epoch, and builds the
``ActivityInfo``; the function only has its own arguments. The executor
sets ``_CURRENT`` around the call (``activity_scope``), in a copy of the
submitting thread's context, so the value is right on every path: on a
worker thread (``engine.activity_threads``), on the event loop
(``engine.activity_loop``), in a polling engine and in a Celery pool process
(which drives the same ``Turn``).

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

Heartbeats are cheap to call and throttled to write: liveness
(``last_beat_ms``, what ``heartbeat_timeout`` watches) is recorded on every
call, in memory; the durable write (the attempt's ``HeartbeatSink``, a
fenced batch) happens on the first call of an attempt and then at most once
per ``HEARTBEAT_WRITE_INTERVAL_MS``, carrying the latest details. So an
activity may heartbeat in a tight loop without loading the database.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from weft_django.engine.workflow.payload import normalize
from weft_django.errors import ActivityCancelled, PayloadError

__all__ = [
    "HEARTBEAT_WRITE_INTERVAL_MS",
    "ActivityInfo",
    "AttemptControl",
    "HeartbeatSink",
    "activity_info",
    "activity_scope",
    "idempotency_key",
]

logger = logging.getLogger("weft_django.engine")

HEARTBEAT_WRITE_INTERVAL_MS = 1_000
"""At most one durable heartbeat write per attempt in this many ms (the first is immediate)."""


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
        # Engine-clock ms of the last durable write this attempt began (None: none
        # yet); reserved under ``_lock`` so concurrent heartbeats write once.
        self.last_write_ms: int | None = None
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

    def note_alive(self) -> None:
        """A heartbeat without (valid) details: liveness only."""
        with self._lock:
            self.last_beat_ms = self.clock_ms()

    def record_beat(self, details: Any) -> bool:
        """Note a heartbeat now with its details; ``True`` when a durable write is due.

        Due: no write yet in this attempt, or the last one began at least
        ``HEARTBEAT_WRITE_INTERVAL_MS`` ago. A due write is reserved here, so
        two threads beating at once write once.
        """
        with self._lock:
            now = self.clock_ms()
            self.last_beat_ms = now
            self.details = details
            last = self.last_write_ms
            if last is not None and now - last < HEARTBEAT_WRITE_INTERVAL_MS:
                return False
            self.last_write_ms = now
            return True

    def latest_details(self) -> Any:
        with self._lock:
            return self.details


@dataclass(frozen=True)
class ActivityInfo:
    """One attempt of one activity command, as the engine running it sees it.

    ``position``: the journal position of the activity command.
    ``attempt``: 1-based; each retry adds one.
    ``epoch``: the claim epoch the running engine holds for the workflow.
    ``idempotency_key``: ``"<workflow_id>:<position>"``, the same across
    attempts and owners -- the key to hand to outside services.
    ``deadline``: when this attempt times out (aware, UTC, wall clock: an
    attempt's duration is real time even under a test's fake engine clock),
    ``None`` without an activity ``timeout``.
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

    def heartbeat(self, details: Any = None) -> None:
        """Report that this attempt is alive, with optional progress ``details``.

        Every call counts as liveness for ``@activity(heartbeat_timeout=...)``.
        ``details`` (any JSON payload: dataclasses and pydantic models too)
        are shown in the admin and the API; they are stored on the first
        heartbeat of the attempt and then at most once a second, the latest
        details winning, so calling this in a tight loop is fine.

        Raises ``ActivityCancelled`` when the attempt must stop: the workflow
        was cancelled, suspended or timed out, the attempt timed out, or this
        engine lost the workflow's claim. Let it propagate (clean up in a
        ``finally``): the attempt's result would be discarded anyway.

        Details that are not a valid payload (over ``MAX_PAYLOAD_BYTES``,
        NaN, not JSON) do not fail the activity: one warning is logged
        naming the workflow, the position and what was wrong (the size), the
        previously reported details are kept, and the call returns; the
        heartbeat still counts as liveness.

        Raises ``RuntimeError`` on an ``ActivityInfo`` the engine did not
        make (built by hand, in a test): there is no attempt to report on.
        """
        control = self.control
        if control is None:
            raise RuntimeError(
                "heartbeat() only works inside an activity the engine runs: this "
                f"ActivityInfo (workflow {self.workflow_id!r}, position {self.position}) "
                "has no attempt control (was it built by hand?)"
            )
        self._raise_if_cancelled(control)
        try:
            value = normalize("heartbeat details", details)
        except PayloadError as exc:
            control.note_alive()
            logger.warning(
                "heartbeat of the activity at position %d of workflow %r (attempt %d) "
                "ignored its details, keeping the previous ones: %s: %s",
                self.position,
                self.workflow_id,
                self.attempt,
                type(exc).__name__,
                exc,
            )
            return
        if not control.record_beat(value) or control.sink is None:
            return
        try:
            control.sink(control.latest_details())
        except ActivityCancelled as exc:
            control.cancel(exc.reason)
            raise
        self._raise_if_cancelled(control)

    def _raise_if_cancelled(self, control: AttemptControl) -> None:
        if control.cancelled:
            raise ActivityCancelled(self.workflow_id, control.cancel_reason or "cancelled")


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
