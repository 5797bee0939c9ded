"""The persistent threads that run an executor's plain (sync) activities.

How a sync attempt gets a thread, what that thread does with its database connections, and
what happens when a thread is stuck in an attempt nobody wants any more; the executor's
bound and queue are ``engine.activities.executor``'s.

The invariants it protects:

* **One connection per thread, not per activity.** Workers
  (``weft-activity-N``) are persistent: each keeps its Django database
  connections between attempts, closes one that became unusable after an
  attempt raised (``engine.db_connections.refresh_connections``: with
  ``CONN_MAX_AGE = 0`` a healthy one is kept), and closes them all when it
  exits.
* **A stuck thread never shrinks the executor's capacity.** A Python thread
  cannot be killed: a sync attempt that timed out or was abandoned while
  its thread is inside the function keeps that thread to its end. It is
  counted (``abandoned_live``, ``ClaimMetrics.record_abandoned_activity_thread``)
  and warned about once per activity name per process; the next attempt
  that finds no idle worker gets a replacement thread, and once a stuck
  thread returns, threads beyond the bound go away.
* **One reservation per dispatched attempt.** ``_idle`` counts workers
  waiting for work that no queued item is reserved for; each ``start``
  takes one or starts a thread, and an item that ended before a worker took
  it gives its reservation back.
* **A worker survives whatever the function raises** (``SystemExit`` and
  ``KeyboardInterrupt`` too): it becomes the attempt's outcome.

Everything marked "holds the lock" runs under the owning executor's lock,
the one that guards the attempts' run state.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Final

from django.db import connections

from weft_django.engine.activities.attempt import ActivityOutcome, Attempt
from weft_django.engine.activities.info import ActivityInfo, activity_scope
from weft_django.engine.db_connections import drop_closed_connections, refresh_connections
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.warnings import warn_activity_abandoned

logger = logging.getLogger("weft_django.engine")

_STOPPED: Final = object()  # the sentinel that makes a worker thread exit

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


def _call(attempt: Attempt) -> tuple[ActivityOutcome, bool]:
    """Call the function (in the attempt's context); the outcome and whether it raised."""
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


def _close_broken_connections() -> None:
    """After an attempt raised: close what no longer answers, keep the healthy ones."""
    try:
        refresh_connections()
    except Exception:  # closing a broken connection must not kill the worker
        logger.debug("closing an unusable connection failed", exc_info=True)


def _drop_closed_connections() -> None:
    """Before an attempt: reconnect what the server ended while the thread was idle."""
    try:
        drop_closed_connections()
    except Exception:  # a failed check must not kill the worker; the attempt reconnects
        logger.debug("checking idle connections failed", exc_info=True)


class _Worker:
    """One persistent sync activity thread and the attempt it is inside, if any."""

    def __init__(self, serve: Callable[[_Worker], None], name: str) -> None:
        self.current: Attempt | None = None  # guarded by the lock
        self.thread = threading.Thread(target=serve, args=(self,), name=name, daemon=True)


class SyncThreads:
    """The sync worker threads of one executor, at most ``concurrency`` beyond the stuck ones.

    ``finish(attempt, outcome)`` is the executor's: called (outside the
    lock) when the function returned or raised. ``thread_initializer``
    runs first in every worker thread.
    """

    def __init__(
        self,
        lock: threading.Lock,
        *,
        concurrency: int,
        finish: Callable[[Attempt, ActivityOutcome], None],
        metrics: ClaimMetrics | None = None,
        thread_initializer: Callable[[], None] | None = None,
    ) -> None:
        self._lock = lock
        self._concurrency = concurrency
        self._finish = finish
        self._metrics = metrics
        self._thread_initializer = thread_initializer
        self._work: queue.SimpleQueue[object] = queue.SimpleQueue()
        # Guarded by the lock:
        self._workers: set[_Worker] = set()
        self._idle = 0  # workers waiting for work that no queued item is reserved for
        self._abandoned_live = 0
        self._stopped = False
        self._stopping: list[_Worker] = []  # the workers ``stop`` sent the sentinel to
        self._numbers = itertools.count(1)

    @property
    def abandoned_live(self) -> int:
        """Threads still inside an attempt that was abandoned or timed out. Holds the lock."""
        return self._abandoned_live

    def start(self, attempt: Attempt) -> None:
        """Hand a running attempt to an idle worker, or to a new one."""
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                worker = None
            else:
                worker = _Worker(self._serve, f"weft-activity-{next(self._numbers)}")
                self._workers.add(worker)
        self._work.put(attempt)
        if worker is not None:
            worker.thread.start()

    def count_if_stuck(self, attempt: Attempt, reason: str) -> None:
        """``attempt`` ended while its thread is still inside the function: count it.

        Holds the lock. Counted once per attempt; the count goes down when
        the thread comes back.
        """
        if not attempt._thread_running or attempt._counted_abandoned:
            return
        attempt._counted_abandoned = True
        self._abandoned_live += 1
        if self._metrics is not None:
            self._metrics.record_abandoned_activity_thread()
        _warn_once(attempt.definition.name, reason, attempt.info)

    def stop(self) -> None:
        """Every worker exits once it is idle; one stuck in a function, when it returns."""
        with self._lock:
            self._stopped = True
            self._stopping = list(self._workers)
        for _ in self._stopping:
            self._work.put(_STOPPED)

    def join_idle(self) -> None:
        """Wait for the workers ``stop`` reached that were not inside a function.

        A thread stuck in an abandoned sync activity cannot be waited for: it
        ends when its function returns.
        """
        for worker in self._stopping:
            if worker.current is None:
                worker.thread.join()

    # ------------------------------------------------------------------ a worker

    def _serve(self, worker: _Worker) -> None:
        """A worker thread's life: take attempts until the sentinel, then close connections."""
        try:
            if self._thread_initializer is not None:
                try:
                    self._thread_initializer()
                except Exception:
                    logger.exception("activity thread initializer failed; the thread goes on")
            while True:
                item = self._work.get()
                if item is _STOPPED:
                    return
                assert isinstance(item, Attempt)
                if not self._takes(worker, item):
                    continue
                _drop_closed_connections()
                outcome, raised = item._context.run(_call, item)
                if raised:
                    _close_broken_connections()
                if not self._done(worker, item, outcome):
                    return
        finally:
            with self._lock:
                self._workers.discard(worker)
            connections.close_all()

    def _takes(self, worker: _Worker, attempt: Attempt) -> bool:
        """A worker got ``attempt``: run it unless it ended meanwhile."""
        with self._lock:
            if attempt._state != "running":
                self._idle += 1  # the reservation made for it is free again
                return False
            attempt._thread_running = True
            worker.current = attempt
            return True

    def _done(self, worker: _Worker, attempt: Attempt, outcome: ActivityOutcome) -> bool:
        """Hand ``outcome`` to the executor; whether the worker stays for more work."""
        with self._lock:
            attempt._thread_running = False
            worker.current = None
            if attempt._counted_abandoned:
                self._abandoned_live -= 1
            # Threads beyond the bound (replacements of stuck ones) go away.
            stays = not self._stopped and (
                len(self._workers) - self._abandoned_live <= self._concurrency
            )
            if stays:
                self._idle += 1
            else:
                self._workers.discard(worker)
        self._finish(attempt, outcome)
        return stays


__all__ = ["SyncThreads"]
