"""The one event loop thread that awaits an executor's ``async def`` activities.

An async attempt is not a thread but a task on a loop the executor owns
(``weft-activity-loop``, started on first use): this module creates that task in the right
context, cancels it, and stops the loop; the executor's bound and queue are
``engine.activities.executor``'s.

The invariants it protects:

* **An async attempt is cancelled for real.** Its task is cancelled: its
  ``finally`` blocks run, the code after its ``await`` does not. A cancelled
  coroutine leaves no thread behind, so it is never counted as abandoned.
* **A task starts only for an attempt still running**, checked under the
  executor's lock when the loop gets to it; ``_task`` is set under that
  lock too, so an abandon either finds the task to cancel or prevents it.
* **The task runs in the attempt's copied context**
  (``create_task(context=...)``), so ``activity_info()`` answers inside it.
* **Concurrent with each other**: every async attempt of the executor is a
  task on this one loop; the executor's bound counts them with the sync ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from weft_django.engine.activities.attempt import ActivityOutcome, Attempt
from weft_django.engine.activities.info import activity_scope

_SHUTDOWN = "the activity executor shut down"


class ActivityLoop:
    """The event loop of one executor's async attempts.

    ``finish(attempt, outcome)`` and ``abandon(attempt, reason)`` are the
    executor's; ``lock`` is the executor's lock.
    """

    def __init__(
        self,
        lock: threading.Lock,
        *,
        finish: Callable[[Attempt, ActivityOutcome], None],
        abandon: Callable[[Attempt, str], None],
    ) -> None:
        self._lock = lock
        self._finish = finish
        self._abandon = abandon
        self._loop: asyncio.AbstractEventLoop | None = None  # set once, under the lock
        self._thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[Any]] = set()  # touched on the loop only

    def start(self, attempt: Attempt) -> None:
        """Schedule a running attempt's task on the loop (started on first use)."""
        loop = self._ensure_loop()
        try:
            loop.call_soon_threadsafe(self._create_task, attempt)
        except RuntimeError:  # the loop was stopped by a shutdown meanwhile
            self._abandon(attempt, _SHUTDOWN)

    def cancel(self, task: asyncio.Task[Any] | None) -> None:
        """Cancel an attempt's task, from any thread."""
        loop = self._loop
        if task is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the task went with it
            loop.call_soon_threadsafe(task.cancel)

    def stop(self) -> None:
        """Cancel every task (waiting up to 5 s for them to end), then stop the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already stopped
                loop.call_soon_threadsafe(lambda: loop.create_task(self._stop_loop()))

    def join(self) -> None:
        """Wait for the loop thread to end (after ``stop``)."""
        if self._thread is not None:
            self._thread.join()

    # ------------------------------------------------------------------ the loop

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
                self._thread = threading.Thread(target=main, name="weft-activity-loop", daemon=True)
                self._thread.start()
                ready.wait()
            return self._loop

    def _create_task(self, attempt: Attempt) -> None:
        """On the loop: start the attempt's task in its copied context."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if attempt._state != "running":
                return
            task = loop.create_task(self._run(attempt), context=attempt._context)
            attempt._task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, attempt: Attempt) -> None:
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

    async def _stop_loop(self) -> None:
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        asyncio.get_running_loop().stop()


__all__ = ["ActivityLoop"]
