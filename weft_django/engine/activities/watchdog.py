"""The one watchdog thread that times out an executor's attempts.

Every attempt of an executor with a ``timeout`` or a ``heartbeat_timeout`` is watched by
one thread (``weft-activity-watchdog``, started when the first bounded attempt starts),
not one timer thread per attempt; when an attempt is due is one rule, ``due``, kept apart
from the executor's bound and queue (``engine.activities.executor``).

The invariants it protects:

* **Time queued does not count**: both bounds are measured from when the
  attempt started running (``_deadline_ms`` and ``control.started_ms`` are
  set then, by the executor), on the engine clock.
* **Only a running attempt times out**: the watchdog reads the executor's
  running set under the executor's lock; the executor's ``time_out``
  re-checks the state, so an attempt that finished meanwhile keeps its
  outcome.
* **An injected clock is still seen to move**: a fake clock does not wake
  the watchdog, so with one it re-reads the clock every
  ``FAKE_CLOCK_RECHECK_S``; with ``wall_ms`` it sleeps until the earliest
  bound (or a change).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from typing import Final

from weft_django.engine.activities.attempt import Attempt
from weft_django.kernel.clock import wall_ms

#: How often the watchdog re-reads an injected (fake) clock, which does not
#: move by itself: a test's ``clock.advance()`` is seen within this.
FAKE_CLOCK_RECHECK_S: Final = 0.05


def due(attempt: Attempt, now: int) -> tuple[TimeoutError | None, int | None]:
    """The attempt's timeout error if it is due at ``now``, else when it next could be."""
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


class Watchdog:
    """Times out the attempts of ``running`` (the executor's set, read under ``lock``).

    ``time_out(attempt, error)`` is the executor's, called outside the lock.
    """

    def __init__(
        self,
        lock: threading.Lock,
        *,
        running: Collection[Attempt],
        clock_ms: Callable[[], int],
        time_out: Callable[[Attempt, TimeoutError], None],
    ) -> None:
        self._changed = threading.Condition(lock)
        self._running = running
        self._clock_ms = clock_ms
        self._time_out = time_out
        # Guarded by the lock:
        self._thread: threading.Thread | None = None
        self._stopped = False

    def notify(self) -> None:
        """Attempts started or the executor is stopping: look again. Holds the lock."""
        self._changed.notify_all()

    def ensure_started(self) -> None:
        """Start the watchdog thread unless it runs or was stopped."""
        with self._changed:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(
                target=self._watch, name="weft-activity-watchdog", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """The thread ends at its next look; none starts any more. Holds the lock."""
        self._stopped = True
        self._changed.notify_all()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        """Time out attempts past their deadline or their heartbeat bound.

        Waits until the earliest bound (or a change); with an injected
        clock, which does not move by itself, re-reads it every
        ``FAKE_CLOCK_RECHECK_S``.
        """
        real_clock = self._clock_ms is wall_ms
        while True:
            with self._changed:
                if self._stopped:
                    return
                now = self._clock_ms()
                expired: list[tuple[Attempt, TimeoutError]] = []
                earliest: int | None = None
                for attempt in self._running:
                    error, next_due = due(attempt, now)
                    if error is not None:
                        expired.append((attempt, error))
                    elif next_due is not None:
                        earliest = next_due if earliest is None else min(earliest, next_due)
                if not expired:
                    if earliest is None:
                        self._changed.wait()
                    else:
                        wait_s = max(earliest - now, 1) / 1000
                        if not real_clock:
                            wait_s = min(wait_s, FAKE_CLOCK_RECHECK_S)
                        self._changed.wait(wait_s)
                    continue
            for attempt, error in expired:
                self._time_out(attempt, error)


__all__ = ["FAKE_CLOCK_RECHECK_S", "Watchdog", "due"]
