"""The activity executor: every attempt of a turn runs at once, within one bound.

A turn submits all its runnable activity attempts together and waits on their futures; the
executor admits them under one bound and ends each exactly once. How they run is its
parts': plain functions on persistent threads (``activities.threads``), ``async def`` ones
on one event loop (``activities.loop``), their deadlines on one watchdog
(``activities.watchdog``); the attempt they share is ``activities.attempt``
(``Attempt``, ``ActivityOutcome`` and ``AttemptAbandoned`` are re-exported here, their
public home).

The invariants it protects:

* **At most ``concurrency`` attempts run at once** (sync and async
  together); the rest wait FIFO. A stuck attempt must never shrink that
  capacity: an attempt that timed out or was abandoned gives its slot back at
  once, whether or not its thread has ended (``activities.threads`` starts a
  replacement thread when one is needed).
* **Each future resolves exactly once**, with an ``ActivityOutcome``: the
  function's value, its exception, a timeout, or ``AttemptAbandoned``. A
  result that arrives after its attempt timed out or was abandoned is
  dropped -- it is never the outcome. Every ending goes through
  ``_finish``, ``_time_out`` or ``_abandon`` here, which move the state
  under the lock first and resolve the future after.
* **Time queued does not count**: an attempt's deadline (``timeout``) and
  its heartbeat bound start when it starts running (``_pump``), and
  ``attempt.info`` carries that deadline.
* **One lock**: the executor's lock guards every attempt's run state and the
  parts' bookkeeping; the parts take it, never a lock of their own, so an
  ending and a start are never seen half done.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from weft_django.conf import WeftSettings
from weft_django.engine.activities.attempt import (
    ActivityOutcome,
    Attempt,
    AttemptAbandoned,
    AttemptState,
)
from weft_django.engine.activities.info import ActivityInfo, AttemptControl, deadline_from_ms
from weft_django.engine.activities.loop import ActivityLoop
from weft_django.engine.activities.threads import SyncThreads
from weft_django.engine.activities.watchdog import Watchdog
from weft_django.engine.db_connections import mark_engine_thread
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.kernel.clock import wall_ms
from weft_django.ownership.metrics import ClaimMetrics

__all__ = ["ActivityExecutor", "ActivityOutcome", "Attempt", "AttemptAbandoned"]

_SHUTDOWN = "the activity executor shut down"


class ActivityExecutor:
    """Runs activity attempts: at most ``concurrency`` at once, sync and async together.

    ``clock_ms`` is the engine clock (deadlines are on it; a fake one is
    re-read every 50 ms). ``metrics`` receives the abandoned-thread counter.
    ``thread_initializer`` runs first in every worker thread.
    """

    @classmethod
    def for_engine(cls, settings: WeftSettings, metrics: ClaimMetrics) -> ActivityExecutor:
        """An engine's executor: ``ACTIVITY_CONCURRENCY`` threads on the wall clock
        (an activity's duration is real time: a test's fake engine clock must not
        stop its timeouts), each thread marked as an engine thread."""
        claim_ttl_ms = settings.claim_ttl_ms
        return cls(
            settings.activity_concurrency,
            clock_ms=wall_ms,
            metrics=metrics,
            thread_initializer=lambda: mark_engine_thread(claim_ttl_ms),
        )

    def __init__(
        self,
        concurrency: int,
        *,
        clock_ms: Callable[[], int],
        metrics: ClaimMetrics | None = None,
        thread_initializer: Callable[[], None] | None = None,
    ) -> None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(
                f"ActivityExecutor concurrency must be an integer of at least 1, "
                f"got {concurrency!r}"
            )
        self._concurrency = concurrency
        self._clock_ms = clock_ms
        self._lock = threading.Lock()  # the one lock: attempts' run state, the parts' books
        # Guarded by the lock:
        self._queued: deque[Attempt] = deque()
        self._running: set[Attempt] = set()  # the attempts holding a slot
        self._shut = False
        # The parts, which share the lock:
        self._threads = SyncThreads(
            self._lock,
            concurrency=concurrency,
            finish=self._finish,
            metrics=metrics,
            thread_initializer=thread_initializer,
        )
        self._loop = ActivityLoop(self._lock, finish=self._finish, abandon=self._abandon)
        self._watchdog = Watchdog(
            self._lock, running=self._running, clock_ms=clock_ms, time_out=self._time_out
        )

    # ------------------------------------------------------------------ public

    @property
    def concurrency(self) -> int:
        return self._concurrency

    @property
    def running(self) -> int:
        """Attempts holding a slot now (an abandoned or timed-out one holds none)."""
        with self._lock:
            return len(self._running)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queued)

    @property
    def abandoned_threads(self) -> int:
        """Sync threads still running an attempt that was abandoned or timed out."""
        with self._lock:
            return self._threads.abandoned_live

    def submit(
        self,
        definition: ActivityDefinition,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        info: ActivityInfo,
    ) -> Attempt:
        """Queue one attempt; it starts as soon as a slot is free (FIFO)."""
        control = info.control
        if control is None:
            control = AttemptControl(
                self._clock_ms, heartbeat_timeout_ms=definition.heartbeat_timeout_ms
            )
            info = dataclasses.replace(info, control=control)
        elif control.heartbeat_timeout_ms is None:
            control.heartbeat_timeout_ms = definition.heartbeat_timeout_ms
        attempt = Attempt(self._abandon, definition, tuple(args), dict(kwargs), info, control)
        with self._lock:
            if self._shut:
                raise RuntimeError("this ActivityExecutor was shut down; it runs no more attempts")
            self._queued.append(attempt)
            started = self._pump()
        self._dispatch(started)
        return attempt

    def shutdown(self, wait: bool = False) -> None:
        """Abandon every attempt not finished, cancel async tasks, stop the threads.

        ``wait=True`` also waits for the event loop thread and the idle
        worker threads to end (a thread stuck in an abandoned sync activity
        cannot be waited for: it ends when its function returns).
        """
        with self._lock:
            if self._shut:
                pending: list[Attempt] = []
            else:
                self._shut = True
                pending = [*self._queued, *self._running]
            self._watchdog.stop()
        for attempt in pending:
            self._abandon(attempt, _SHUTDOWN)
        self._threads.stop()
        self._loop.stop()
        if wait:
            self._loop.join()
            self._threads.join_idle()
            self._watchdog.join()

    # ------------------------------------------------------------------ slots

    def _pump(self) -> list[Attempt]:
        """Start queued attempts while slots are free. Holds the lock."""
        started: list[Attempt] = []
        while self._queued and len(self._running) < self._concurrency and not self._shut:
            attempt = self._queued.popleft()
            now = self._clock_ms()
            timeout_ms = attempt.definition.timeout_ms
            if timeout_ms is not None:
                attempt._deadline_ms = now + timeout_ms
                attempt.info = dataclasses.replace(
                    attempt.info, deadline=deadline_from_ms(attempt._deadline_ms)
                )
            # The heartbeat bound, like the timeout, counts from the start.
            attempt.control.started_ms = attempt.control.last_beat_ms = now
            attempt._state = "running"
            self._running.add(attempt)
            started.append(attempt)
        if started:
            self._watchdog.notify()
        return started

    def _dispatch(self, started: list[Attempt]) -> None:
        """Hand started attempts to a worker thread or the loop (outside the lock)."""
        for attempt in started:
            if attempt.definition.is_async:
                self._loop.start(attempt)
            else:
                self._threads.start(attempt)
            bounded = attempt.control.heartbeat_timeout_ms is not None
            if attempt._deadline_ms is not None or bounded:
                self._watchdog.ensure_started()

    def _release(self, attempt: Attempt, state: AttemptState) -> list[Attempt]:
        """``attempt`` leaves its slot as ``state``; returns what started. Holds the lock."""
        attempt._state = state
        self._running.discard(attempt)
        return self._pump()

    def _resolve(self, attempt: Attempt, outcome: ActivityOutcome) -> None:
        """Set the future (outside the lock: its callbacks may call back in)."""
        if not attempt.future.done():
            attempt.future.set_result(outcome)

    # ------------------------------------------------------------------ ending

    def _abandon(self, attempt: Attempt, reason: str) -> None:
        with self._lock:
            state = attempt._state
            if state in ("done", "timed_out", "abandoned"):
                return
            if state == "queued":
                self._queued.remove(attempt)
                attempt._state = "abandoned"
                started: list[Attempt] = []
            else:
                started = self._release(attempt, "abandoned")
                self._threads.count_if_stuck(attempt, reason)
            task = attempt._task
        attempt.control.cancel(reason)
        self._loop.cancel(task)
        self._resolve(
            attempt, ActivityOutcome(False, error=AttemptAbandoned(attempt.definition.name, reason))
        )
        self._dispatch(started)

    def _time_out(self, attempt: Attempt, error: TimeoutError) -> None:
        with self._lock:
            if attempt._state != "running":
                return
            started = self._release(attempt, "timed_out")
            self._threads.count_if_stuck(attempt, str(error))
            task = attempt._task
        attempt.control.cancel(str(error))
        self._loop.cancel(task)
        self._resolve(attempt, ActivityOutcome(False, error=error, timed_out=True))
        self._dispatch(started)

    def _finish(self, attempt: Attempt, outcome: ActivityOutcome) -> None:
        """The function ended: its outcome, unless the attempt already ended otherwise."""
        with self._lock:
            if attempt._state != "running":
                return  # timed out or abandoned: the late result is dropped
            started = self._release(attempt, "done")
        self._resolve(attempt, outcome)
        self._dispatch(started)
