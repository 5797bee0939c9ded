"""The activity executor: every attempt of a turn runs at once, within one bound.

Why its own module: a turn submits all its runnable activity attempts
together and waits on their futures; how they run -- threads for plain
functions, one event loop for ``async def`` ones, one watchdog for their
deadlines -- is one job, kept apart from the turn's journaling.

The invariants it protects:

* **At most ``concurrency`` attempts run at once** (sync and async
  together); the rest wait FIFO. A stuck attempt must never shrink that
  capacity: an attempt that timed out or was abandoned gives its slot back at
  once, whether or not its thread has ended (a replacement thread is
  started when one is needed).
* **Each future resolves exactly once**, with an ``ActivityOutcome``: the
  function's value, its exception, a timeout, or ``AttemptAbandoned``. A
  result that arrives after its attempt timed out or was abandoned is
  dropped -- it is never the outcome.
* **A Python thread cannot be killed.** A timed-out or abandoned sync
  attempt's thread keeps running to its end; it is counted
  (``ClaimMetrics.record_abandoned_activity_thread``, the
  ``abandoned_threads`` gauge) and warned about once per activity name per
  process. An ``async def`` attempt is cancelled for real (its task is
  cancelled: its ``finally`` blocks run, the code after its ``await`` does
  not).
* **Time queued does not count**: an attempt's deadline (``timeout``) and
  its heartbeat bound start when it starts running, and ``attempt.info``
  carries that deadline.

Sync workers are persistent threads (``weft-activity-N``): each keeps its
Django database connections between attempts -- one connection per thread,
not per activity -- closes a connection that became unusable after an
attempt raised (``db_connections.refresh_connections``: with
``CONN_MAX_AGE = 0`` a healthy one is kept), and closes them all when it
exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import inspect
import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.db import connections

from weft_django.clock import wall_ms
from weft_django.engine.activity_context import (
    ActivityInfo,
    AttemptControl,
    activity_scope,
    deadline_from_ms,
)
from weft_django.engine.db_connections import refresh_connections
from weft_django.engine.definitions import ActivityDefinition
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.warnings import warn_activity_abandoned

__all__ = ["ActivityExecutor", "ActivityOutcome", "Attempt", "AttemptAbandoned"]

logger = logging.getLogger("weft_django.engine")

#: How often the watchdog re-reads an injected (fake) clock, which does not
#: move by itself: a test's ``clock.advance()`` is seen within this.
_FAKE_CLOCK_RECHECK_S: Final = 0.05

_State = Literal["queued", "running", "done", "timed_out", "abandoned"]
_STOPPED: Final = object()  # the sentinel that makes a worker thread exit


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


_warned_lock = threading.Lock()
_warned_activities: set[str] = set()


def _warn_once(activity: str, reason: str, info: ActivityInfo) -> None:
    """The abandoned-thread warning, once per activity name per process."""
    with _warned_lock:
        if activity in _warned_activities:
            return
        _warned_activities.add(activity)
    try:
        warn_activity_abandoned(
            activity, reason, workflow_id=info.workflow_id, position=info.position
        )
    except Exception:  # a project running with -W error: the engine goes on
        logger.warning("activity %r abandoned still running (%s)", activity, reason)


class Attempt:
    """One submitted activity attempt and the future of its ``ActivityOutcome``.

    ``info`` is replaced when the attempt starts (its ``deadline`` then
    counts from the start); ``control`` is ``info.control``.
    """

    def __init__(
        self,
        executor: ActivityExecutor,
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
        self._executor = executor
        self._args = args
        self._kwargs = kwargs
        self._context = contextvars.copy_context()
        # Guarded by the executor's lock:
        self._state: _State = "queued"
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
        self._executor._abandon(self, reason)

    def __repr__(self) -> str:
        return f"<Attempt {self.definition.name!r} {self.info.idempotency_key} {self._state}>"


class _Worker:
    """One persistent sync activity thread."""

    def __init__(self, executor: ActivityExecutor, number: int) -> None:
        self.executor = executor
        self.current: Attempt | None = None
        self.thread = threading.Thread(
            target=self._main, name=f"weft-activity-{number}", daemon=True
        )

    def _main(self) -> None:
        executor = self.executor
        try:
            if executor._thread_initializer is not None:
                try:
                    executor._thread_initializer()
                except Exception:
                    logger.exception("activity thread initializer failed; the thread goes on")
            while True:
                item = executor._work.get()
                if item is _STOPPED:
                    return
                assert isinstance(item, Attempt)
                if not executor._worker_takes(self, item):
                    continue
                outcome, raised = item._context.run(executor._call_sync, item)
                if raised:
                    _close_broken_connections()
                if not executor._worker_done(self, item, outcome):
                    return
        finally:
            executor._worker_exits(self)
            connections.close_all()


def _close_broken_connections() -> None:
    """After an attempt raised: close what no longer answers, keep the healthy ones."""
    try:
        refresh_connections()
    except Exception:  # closing a broken connection must not kill the worker
        logger.debug("closing an unusable connection failed", exc_info=True)


class ActivityExecutor:
    """Runs activity attempts: at most ``concurrency`` at once, sync and async together.

    ``clock_ms`` is the engine clock (deadlines are on it; a fake one is
    re-read every 50 ms). ``metrics`` receives the abandoned-thread counter.
    ``thread_initializer`` runs first in every worker thread.
    """

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
        self._metrics = metrics
        self._thread_initializer = thread_initializer
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # wakes the watchdog
        self._queued: deque[Attempt] = deque()
        self._running: set[Attempt] = set()  # the attempts holding a slot
        self._abandoned_live = 0
        self._shut = False
        # Sync workers.
        self._work: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._workers: set[_Worker] = set()
        self._idle = 0  # workers waiting for work that no queued item is reserved for
        self._numbers = itertools.count(1)
        # The event loop of async attempts.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watchdog: threading.Thread | None = None

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
            return self._abandoned_live

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
        attempt = Attempt(self, definition, tuple(args), dict(kwargs), info, control)
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
            workers = list(self._workers)
            self._changed.notify_all()
        for attempt in pending:
            self._abandon(attempt, "the activity executor shut down")
        for _ in workers:
            self._work.put(_STOPPED)
        loop, loop_thread = self._loop, self._loop_thread
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already stopped
                loop.call_soon_threadsafe(lambda: loop.create_task(self._stop_loop()))
        if wait:
            if loop_thread is not None:
                loop_thread.join()
            for worker in workers:
                if worker.current is None:
                    worker.thread.join()
            if self._watchdog is not None:
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
            self._changed.notify_all()
        return started

    def _dispatch(self, started: list[Attempt]) -> None:
        """Hand started attempts to a worker thread or the loop (outside the lock)."""
        for attempt in started:
            if attempt.definition.is_async:
                self._start_async(attempt)
            else:
                self._start_sync(attempt)
            bounded = attempt.control.heartbeat_timeout_ms is not None
            if attempt._deadline_ms is not None or bounded:
                self._ensure_watchdog()

    def _release(self, attempt: Attempt, state: _State) -> list[Attempt]:
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
                self._count_if_stuck(attempt, reason)
            task = attempt._task
        attempt.control.cancel(reason)
        self._cancel_task(task)
        self._resolve(
            attempt, ActivityOutcome(False, error=AttemptAbandoned(attempt.definition.name, reason))
        )
        self._dispatch(started)

    def _time_out(self, attempt: Attempt, error: TimeoutError) -> None:
        with self._lock:
            if attempt._state != "running":
                return
            started = self._release(attempt, "timed_out")
            self._count_if_stuck(attempt, str(error))
            task = attempt._task
        attempt.control.cancel(str(error))
        self._cancel_task(task)
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

    def _count_if_stuck(self, attempt: Attempt, reason: str) -> None:
        """A sync attempt left still running on its thread: count it. Holds the lock."""
        if not attempt._thread_running or attempt._counted_abandoned:
            return
        attempt._counted_abandoned = True
        self._abandoned_live += 1
        if self._metrics is not None:
            self._metrics.record_abandoned_activity_thread()
        _warn_once(attempt.definition.name, reason, attempt.info)

    # ------------------------------------------------------------------ sync

    def _start_sync(self, attempt: Attempt) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                worker = None
            else:
                worker = _Worker(self, next(self._numbers))
                self._workers.add(worker)
        self._work.put(attempt)
        if worker is not None:
            worker.thread.start()

    def _worker_takes(self, worker: _Worker, attempt: Attempt) -> bool:
        """A worker got ``attempt``: run it unless it ended meanwhile."""
        with self._lock:
            if attempt._state != "running":
                self._idle += 1  # the reservation made for it is free again
                return False
            attempt._thread_running = True
            worker.current = attempt
            return True

    def _call_sync(self, attempt: Attempt) -> tuple[ActivityOutcome, bool]:
        """Call the function in the attempt's context; never raises."""
        definition = attempt.definition
        try:
            with activity_scope(attempt.info):
                value = definition.fn(*attempt._args, **attempt._kwargs)
            if inspect.isawaitable(value):
                if inspect.iscoroutine(value):
                    value.close()
                raise TypeError(
                    f"activity {definition.name!r} returned an awaitable from a plain function; "
                    "declare it with async def so the engine awaits it"
                )
            return ActivityOutcome(True, value), False
        except BaseException as exc:  # SystemExit, KeyboardInterrupt too: the worker survives
            return ActivityOutcome(False, error=exc), True

    def _worker_done(self, worker: _Worker, attempt: Attempt, outcome: ActivityOutcome) -> bool:
        """Record ``outcome``; whether the worker stays for more work."""
        with self._lock:
            attempt._thread_running = False
            worker.current = None
            if attempt._counted_abandoned:
                self._abandoned_live -= 1
            # Threads beyond the bound (replacements of stuck ones) go away.
            stays = not self._shut and len(self._workers) - self._abandoned_live <= (
                self._concurrency
            )
            if stays:
                self._idle += 1
            else:
                self._workers.discard(worker)
        self._finish(attempt, outcome)
        return stays

    def _worker_exits(self, worker: _Worker) -> None:
        with self._lock:
            self._workers.discard(worker)

    # ------------------------------------------------------------------ async

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    try:
                        loop.run_forever()
                    finally:
                        loop.close()

                self._loop = loop
                self._loop_thread = threading.Thread(
                    target=main, name="weft-activity-loop", daemon=True
                )
                self._loop_thread.start()
                ready.wait()
            return self._loop

    def _start_async(self, attempt: Attempt) -> None:
        loop = self._ensure_loop()
        try:
            loop.call_soon_threadsafe(self._create_task, attempt)
        except RuntimeError:  # the loop was stopped by a shutdown meanwhile
            self._abandon(attempt, "the activity executor shut down")

    def _create_task(self, attempt: Attempt) -> None:
        """On the loop: start the attempt's task in its copied context."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if attempt._state != "running":
                return
            task = loop.create_task(self._run_async(attempt), context=attempt._context)
            attempt._task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_async(self, attempt: Attempt) -> None:
        definition = attempt.definition
        try:
            with activity_scope(attempt.info):
                value = await definition.fn(*attempt._args, **attempt._kwargs)
            outcome = ActivityOutcome(True, value)
        except asyncio.CancelledError:
            # Not ours (ours resolved the future first): the activity was cancelled.
            outcome = ActivityOutcome(
                False, error=RuntimeError(f"activity {definition.name!r} was cancelled")
            )
        except Exception as exc:
            outcome = ActivityOutcome(False, error=exc)
        self._finish(attempt, outcome)

    def _cancel_task(self, task: asyncio.Task[Any] | None) -> None:
        loop = self._loop
        if task is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the task went with it
            loop.call_soon_threadsafe(task.cancel)

    async def _stop_loop(self) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        asyncio.get_running_loop().stop()

    # ------------------------------------------------------------------ watchdog

    def _ensure_watchdog(self) -> None:
        with self._lock:
            if self._watchdog is not None or self._shut:
                return
            self._watchdog = threading.Thread(
                target=self._watch, name="weft-activity-watchdog", daemon=True
            )
            self._watchdog.start()

    def _watch(self) -> None:
        """Time out attempts past their deadline or their heartbeat bound.

        Waits until the earliest deadline (or a change); with an injected
        clock, which does not move by itself, re-reads it every 50 ms.
        """
        real_clock = self._clock_ms is wall_ms
        while True:
            with self._lock:
                if self._shut:
                    return
                now = self._clock_ms()
                expired: list[tuple[Attempt, TimeoutError]] = []
                earliest: int | None = None
                for attempt in self._running:
                    error, due = self._due(attempt, now)
                    if error is not None:
                        expired.append((attempt, error))
                    elif due is not None:
                        earliest = due if earliest is None else min(earliest, due)
                if not expired:
                    if earliest is None:
                        self._changed.wait()
                    else:
                        wait_s = max(earliest - now, 1) / 1000
                        if not real_clock:
                            wait_s = min(wait_s, _FAKE_CLOCK_RECHECK_S)
                        self._changed.wait(wait_s)
                    continue
            for attempt, error in expired:
                self._time_out(attempt, error)

    def _due(self, attempt: Attempt, now: int) -> tuple[TimeoutError | None, int | None]:
        """The attempt's timeout error if it is due, else when it next could be."""
        name = attempt.definition.name
        deadline = attempt._deadline_ms
        if deadline is not None and now >= deadline:
            timeout_ms = attempt.definition.timeout_ms
            return TimeoutError(f"activity {name!r} timed out after {timeout_ms} ms"), None
        control = attempt.control
        beat_limit = control.heartbeat_timeout_ms
        if beat_limit is not None and control.heartbeat_overdue(now):
            return (
                TimeoutError(
                    f"activity {name!r} sent no heartbeat for {beat_limit} ms (heartbeat_timeout)"
                ),
                None,
            )
        candidates = [d for d in (deadline,) if d is not None]
        if beat_limit is not None:
            candidates.append(control.last_beat_ms + beat_limit + 1)
        return None, min(candidates) if candidates else None
