"""The background side tasks of a started engine: renewal and polling.

Why two threads: renewal keeps every held claim alive, so it must never wait
behind a slow maintenance pass (a large reclaim scan, a retention purge);
it runs on its own thread and on its own stop event, which ``dispose`` sets
only after in-flight turns finished -- claims stay renewed until released.
The poll thread runs the maintenance pass every poll interval, or sooner
when a wake arrives; a wake that only made a run pending (a start, a
worker with room again) runs just the pickup on that thread -- pickups stay
serial there. While LISTEN is up and passes find nothing, the gap between
full passes backs off (``engine.poll_cadence``); a full wake or a turn that
left its run parked or running brings it back to the poll interval. Both
threads mark themselves as engine threads (``engine.db_connections``) and
survive any one failed pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import connections

from weft_django.engine.db_connections import mark_engine_thread, refresh_connections
from weft_django.engine.scheduling.cadence import PollCadence

logger = logging.getLogger("weft_django.engine")


@dataclass
class SideTasks:
    """The renewal and poll threads of one engine, with their events."""

    renew: Callable[[], object]
    poll: Callable[[], object]
    #: The pickup alone (what a pickup wake needs).
    pickup: Callable[[], object]
    renew_interval_ms: int
    poll_interval_ms: int
    claim_ttl_ms: int
    database: str
    #: When the next full pass comes; ``None``: every poll interval.
    cadence: PollCadence | None = None
    #: After a full pass: the gap (ms) before the next one (``cadence``).
    next_gap_ms: Callable[[PollCadence], int] | None = None
    #: Set by ``dispose`` first: the poll loop ends.
    stopping: threading.Event = field(default_factory=threading.Event)
    #: Set by ``dispose`` after the grace: renewal ends.
    renew_stop: threading.Event = field(default_factory=threading.Event)
    #: A wake: the poll loop runs its next pass now.
    wake: threading.Event = field(default_factory=threading.Event)
    #: Set once the first maintenance pass after ``start`` has run: until
    #: then, work that was waiting at boot may still be found by polling.
    first_pass: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    #: A wake asked for the full pass / a pickup pass / the poll interval's
    #: gap again (``soon``); guarded by ``_lock``.
    _full: bool = True
    _pickup: bool = False
    _soon: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, *, full: bool) -> None:
        """Wake the poll loop: a full pass, or (``full=False``) a pickup pass."""
        with self._lock:
            if full:
                self._full = True
            else:
                self._pickup = True
        if full and self.cadence is not None:
            self.cadence.reset()
        self.wake.set()

    def soon(self) -> None:
        """The next full pass within the poll interval (no pass now): wakes the
        loop only when it was backing off."""
        if self.cadence is None or not self.cadence.reset():
            return
        with self._lock:
            self._soon = True
        self.wake.set()

    def _take(self) -> tuple[bool, bool, bool]:
        with self._lock:
            taken = (self._full, self._pickup, self._soon)
            self._full = self._pickup = self._soon = False
        return taken

    def start(self) -> None:
        self.threads = [
            threading.Thread(target=self._renew_loop, name="weft-renew", daemon=True),
            threading.Thread(target=self._poll_loop, name="weft-poll", daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def join(self, timeout: float) -> None:
        for thread in self.threads:
            thread.join(timeout=timeout)

    def _renew_loop(self) -> None:
        self._loop(self.renew, self.renew_interval_ms, self.renew_stop, "claim renewal pass")

    def _poll_loop(self) -> None:
        mark_engine_thread(self.claim_ttl_ms)
        interval = self.poll_interval_ms / 1000
        next_full = 0.0
        last_full = 0.0
        while not self.stopping.is_set():
            # Read-and-reset before the pass: a wake during it is kept.
            full, pickup, soon = self._take()
            if soon:
                next_full = min(next_full, last_full + interval)
            if full or time.monotonic() >= next_full:
                last_full = time.monotonic()
                next_full = last_full + interval
                self._run_once(self.poll, "maintenance pass")
                if not self.first_pass.is_set():
                    self.first_pass.set()
                    logger.info("weft engine: first maintenance pass done")
                if self.cadence is not None and self.next_gap_ms is not None:
                    next_full = last_full + self._gap_s(self.cadence, self.next_gap_ms)
            elif pickup:
                self._run_once(self.pickup, "pickup pass")
            self.wake.wait(max(0.0, next_full - time.monotonic()))
            self.wake.clear()

    def _gap_s(self, cadence: PollCadence, next_gap_ms: Callable[[PollCadence], int]) -> float:
        """The gap after a full pass; the poll interval when working it out fails."""
        try:
            return next_gap_ms(cadence) / 1000
        except Exception:
            logger.warning("poll cadence failed; polling every interval", exc_info=True)
            connections[self.database].close_if_unusable_or_obsolete()
            cadence.reset()
            return self.poll_interval_ms / 1000

    def _loop(
        self, work: Callable[[], object], interval_ms: int, stop: threading.Event, what: str
    ) -> None:
        mark_engine_thread(self.claim_ttl_ms)
        interval = interval_ms / 1000
        while not stop.wait(interval):
            self._run_once(work, what)

    def _run_once(self, work: Callable[[], object], what: str) -> None:
        try:
            refresh_connections()
            work()
        except Exception:
            logger.exception("%s failed", what)
            connections[self.database].close_if_unusable_or_obsolete()


__all__ = ["SideTasks"]
