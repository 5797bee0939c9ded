"""One submitted activity attempt: ``Attempt``, its ``ActivityOutcome``, ``AttemptAbandoned``.

The executor (``activities.executor``) and each of its parts -- the sync threads
(``activities.threads``), the event loop (``activities.loop``) and the watchdog
(``activities.watchdog``) -- read and move the same attempt. It sits below all of them, so
none of them imports another in a circle; ``activities.executor`` re-exports the three
public names.

The invariants it protects:

* **One lock guards an attempt's run state**: ``_state``, ``_deadline_ms``,
  ``_thread_running``, ``_counted_abandoned`` and ``_task`` are read and
  written only under the lock of the executor that owns the attempt (the
  one lock its parts share).
* **The future resolves exactly once**, with an ``ActivityOutcome``; the
  executor sets it, never the parts directly.
* **The attempt runs in the submitter's context**: ``_context`` is a copy
  of the ``contextvars`` context of the thread that submitted it, taken at
  submission, so whatever the turn set is seen by the function, on a worker
  thread or on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from weft_django.engine.activities.info import ActivityInfo, AttemptControl
from weft_django.engine.workflow.activity_definition import ActivityDefinition

AttemptState = Literal["queued", "running", "done", "timed_out", "abandoned"]


@dataclass(frozen=True)
class ActivityOutcome:
    """How an attempt ended: its value, its error, a timeout, or ``AttemptAbandoned``."""

    ok: bool
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False


class AttemptAbandoned(RuntimeError):
    """The error of an attempt whose result is no longer wanted (``Attempt.abandon``)."""

    def __init__(self, activity: str, reason: str) -> None:
        self.activity = activity
        self.reason = reason
        super().__init__(f"activity {activity!r} was abandoned: {reason}")


class Attempt:
    """One submitted activity attempt and the future of its ``ActivityOutcome``.

    ``info`` is replaced when the attempt starts (its ``deadline`` then
    counts from the start); ``control`` is ``info.control``. ``abandon``
    is the owning executor's, so the attempt needs no import of it.
    """

    def __init__(
        self,
        abandon: Callable[[Attempt, str], None],
        definition: ActivityDefinition,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        info: ActivityInfo,
        control: AttemptControl,
    ) -> None:
        self.definition = definition
        self.info = info
        self.control = control
        self.future: concurrent.futures.Future[ActivityOutcome] = concurrent.futures.Future()
        self._abandon = abandon
        self._args = args
        self._kwargs = kwargs
        self._context = contextvars.copy_context()
        # Guarded by the owning executor's lock:
        self._state: AttemptState = "queued"
        self._deadline_ms: int | None = None
        self._thread_running = False  # a worker thread is inside the function now
        self._counted_abandoned = False
        self._task: asyncio.Task[Any] | None = None

    @property
    def state(self) -> str:
        """queued, running, done, timed_out or abandoned."""
        return self._state

    def abandon(self, reason: str) -> None:
        """The turn no longer wants the result (a race lost, ``all()`` failed, a
        cancel, a lost claim, the turn ending). Idempotent.

        The control is cancelled; a queued attempt never starts; an async
        one's task is cancelled; a running sync one keeps its thread, which is
        counted as abandoned, and its late result is dropped. The future
        resolves with ``AttemptAbandoned`` unless it had resolved already.
        """
        self._abandon(self, reason)

    def __repr__(self) -> str:
        return f"<Attempt {self.definition.name!r} {self.info.idempotency_key} {self._state}>"


__all__ = ["ActivityOutcome", "Attempt", "AttemptAbandoned", "AttemptState"]
