"""Takeover cooldown (SPEC §4.4): an in-memory anti-thrash window per workflow.

After this engine is deposed from a workflow it must not immediately take
that workflow back (two engines trading a claim every pass). The window is
fixed — one renew interval from the deposition — not exponential; a second
deposition restarts it; at ``now == until`` it is no longer active; a
successful acquire or takeover clears it.
"""

from __future__ import annotations

import threading


class TakeoverCooldown:
    """``is_active(id, now)``, ``record_deposition(id, now)``, ``clear(id)``."""

    def __init__(self, window_ms: int) -> None:
        if isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 0:
            raise ValueError(
                f"cooldown window must be a non-negative integer of ms, got {window_ms!r}"
            )
        self.window_ms = window_ms
        self._until: dict[str, int] = {}
        self._lock = threading.Lock()

    def is_active(self, workflow_id: str, now: int) -> bool:
        with self._lock:
            until = self._until.get(workflow_id)
            if until is None:
                return False
            if now < until:
                return True
            del self._until[workflow_id]
            return False

    def record_deposition(self, workflow_id: str, now: int) -> None:
        with self._lock:
            self._until[workflow_id] = now + self.window_ms

    def clear(self, workflow_id: str) -> None:
        with self._lock:
            self._until.pop(workflow_id, None)

    def active_ids(self, now: int) -> list[str]:
        with self._lock:
            return [wid for wid, until in self._until.items() if now < until]
