"""Spacing of a node's polling re-drives: no congestion collapse behind a backlog.

Why: the node's maintenance pass (every renew interval) sends a ``weft.drive``
message for each run it holds that looks undriven -- woken but parked,
``running`` with no live turn, a pickup. A message already in the node's
queue is not lost; it is only late. When the queue's latency exceeds the
renew interval (a burst, a slow database, a node catching up after a
pause), re-sending every pass adds one more message per run per pass ahead
of the pool, the latency grows, and so does the re-send rate: the chaos soak
saw wakes a minute late, most of the queue duplicates of itself.

The invariant kept: a run that stays undriven is still re-sent -- a message
that really was lost costs a bounded delay -- but each (run, claim
generation, wake kind) is re-sent after one interval, then after twice the
previous gap, up to ``CAP_INTERVALS`` intervals. A key not asked for over two
of its gaps starts afresh, and a new generation (a new claim) is a new key,
so a fresh pickup or takeover is sent at once.
"""

from __future__ import annotations

import threading

#: The longest gap between two re-drives of one key, in renew intervals.
CAP_INTERVALS = 16
#: Keys kept at most (the oldest are dropped first; a dropped key only starts afresh).
MAX_KEYS = 100_000

RedriveKey = tuple[str, int, str]
"""(run id, claim epoch, wake kind)."""


class RedriveBackoff:
    """Admits a re-drive of a key after one interval, then doubling gaps (thread-safe)."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = max(1, int(interval_ms))
        self.cap_ms = self.interval_ms * CAP_INTERVALS
        self._sent: dict[RedriveKey, tuple[int, int]] = {}  # key -> (last sent, gap)
        self._lock = threading.Lock()

    def admit(self, key: RedriveKey, now_ms: int) -> bool:
        """True when a message for ``key`` may be sent now (and records it)."""
        with self._lock:
            last = self._sent.get(key)
            if last is not None:
                sent_at, gap = last
                if now_ms < sent_at + gap:
                    return False
                # Asked again within two gaps: still the same undriven run, back off more.
                gap = min(gap * 2, self.cap_ms) if now_ms < sent_at + 3 * gap else self.interval_ms
            else:
                gap = self.interval_ms
            self._sent.pop(key, None)
            self._sent[key] = (now_ms, gap)
            while len(self._sent) > MAX_KEYS:
                del self._sent[next(iter(self._sent))]
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._sent)


__all__ = ["CAP_INTERVALS", "MAX_KEYS", "RedriveBackoff", "RedriveKey"]
