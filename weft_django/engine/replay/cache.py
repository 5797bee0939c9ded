"""The workflow cache: an engine keeps each owned run's live replay between turns.

Why it is safe: a cached ``Replay`` is exactly the state a full replay of
the run's journal would rebuild, as long as nobody wrote the run since this
engine parked it. Every write of a run bumps its ``version`` (turns, cancel,
resume, a failed turn's backoff), and every turn's commit is fenced on the
claim epoch, so an entry is reused only when both still match what the
engine recorded at the park: ``take(run_id, epoch=, version=)``. Anything
else -- a claim lost, rotated or released and taken again, a run changed by
an operator, an entry evicted by the LRU bound -- is a miss, and a miss is a
full replay with the same result. ``take`` removes the entry: a turn owns
the replay while it runs and puts it back only after a committed park, so a
turn that fails, aborts or is deposed can never leave a half-fed replay
behind ("on any doubt, drop").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from weft_django.engine.replay.machine import Replay

__all__ = ["CacheStats", "WorkflowCache"]


@dataclass(frozen=True)
class CacheStats:
    size: int
    capacity: int
    hits: int
    misses: int
    evictions: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass
class _Entry:
    epoch: int
    version: int
    replay: Replay


class WorkflowCache:
    """An LRU of parked runs' replays, bounded by ``capacity`` (0: off). Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, int(capacity))
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._evictions = 0

    def take(self, run_id: str, *, epoch: int, version: int) -> Replay | None:
        """The cached replay of ``run_id`` if it is still valid, removed from the cache."""
        if self.capacity == 0:
            return None
        with self._lock:
            entry = self._entries.pop(run_id, None)
            if entry is None or entry.epoch != epoch or entry.version != version:
                self._misses += 1
                return None
            self._hits += 1
            return entry.replay

    def put(self, run_id: str, *, epoch: int, version: int, replay: Replay) -> None:
        """Keep ``replay`` as the state of ``run_id`` at ``version`` under ``epoch``."""
        if self.capacity == 0:
            return
        with self._lock:
            self._entries[run_id] = _Entry(epoch, version, replay)
            self._entries.move_to_end(run_id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
                self._evictions += 1

    def discard(self, run_id: str) -> None:
        with self._lock:
            self._entries.pop(run_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                len(self._entries), self.capacity, self._hits, self._misses, self._evictions
            )
