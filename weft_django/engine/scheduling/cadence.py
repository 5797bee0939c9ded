"""When the next full maintenance pass of a background engine runs.

Why a cadence and not a fixed period: a full pass is about seven statements
(timeouts, reclaim scan, due timers, woken, stranded, pickup); every engine
ran one every ``POLL_INTERVAL``, found nothing most of the time, and on a
small machine N engines' idle passes took the CPU the turns needed. While
the engine's LISTEN connection is up, every write that makes work for it
wakes it at once (``engine.wakes``), so polling is only the backstop for a
lost NOTIFY -- and the backstop may back off.

The invariants:

- The gap is ``POLL_INTERVAL`` unless backing off is *allowed* (a wake
  backend's connection LISTENs now) and the last pass found no work besides
  pickups (pickups arrive as pickup wakes). Without LISTEN (``--no-listen``,
  SQLite, a lost connection) the engine polls every ``POLL_INTERVAL``.
- Backing off doubles the gap, up to ``cap_ms`` (at most
  ``IDLE_POLL_CAP_MS``, never more than ``CLAIM_RENEW_INTERVAL``), and never
  past the earliest time the database says work falls due (a timer, a
  delayed start, a deadline, a failed turn's retry: ``due_in_ms``).
- ``reset`` (a full wake, a turn of this engine that left its run parked or
  running) brings the gap back to ``POLL_INTERVAL`` at once.
"""

from __future__ import annotations

import threading

#: The longest gap between two full passes of an idle, LISTENing engine (ms).
IDLE_POLL_CAP_MS = 2000


def idle_cap_ms(poll_interval_ms: int, renew_interval_ms: int) -> int:
    """The backed-off gap's bound: never below the poll interval, never above
    the renew interval (the reclaim of expired claims keeps that period)."""
    return max(poll_interval_ms, min(IDLE_POLL_CAP_MS, renew_interval_ms))


class PollCadence:
    """The gap before the next full pass (seconds); thread-safe."""

    def __init__(self, base_ms: int, cap_ms: int) -> None:
        self.base_ms = base_ms
        self.cap_ms = max(base_ms, cap_ms)
        self._gap_ms = base_ms
        self._lock = threading.Lock()

    @property
    def gap_ms(self) -> int:
        with self._lock:
            return self._gap_ms

    @property
    def backed_off(self) -> bool:
        return self.gap_ms > self.base_ms

    def reset(self) -> bool:
        """Back to ``POLL_INTERVAL``; ``True`` when the gap was longer."""
        with self._lock:
            longer = self._gap_ms > self.base_ms
            self._gap_ms = self.base_ms
        return longer

    def after_pass(self, *, found_work: bool, allowed: bool, due_in_ms: int | None) -> int:
        """The gap (ms) after a full pass: ``found_work`` (besides pickups),
        ``allowed`` (LISTEN is up), ``due_in_ms`` (the earliest known due work,
        from now; ``None``: none known)."""
        with self._lock:
            if found_work or not allowed:
                self._gap_ms = self.base_ms
            else:
                self._gap_ms = min(self.cap_ms, 2 * self._gap_ms)
            gap = self._gap_ms
        if due_in_ms is not None:
            gap = max(self.base_ms, min(gap, due_in_ms))
        return gap


__all__ = ["IDLE_POLL_CAP_MS", "PollCadence", "idle_cap_ms"]
