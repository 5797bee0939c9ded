"""The presence watch: which other engines are gone, checked every ~0.25 s.

Why its own thread: the maintenance pass of a Celery node runs only every
CLAIM_RENEW_INTERVAL, and a polling engine's pass may be busy; the watch is
one cheap statement on the presence connection (``ownership.presence``),
and when it sees an engine newly gone it wakes the maintenance pass, whose
reclaim then treats that engine's claims as takeable (``gone``). The set it
keeps is only a hint to the reclaim: the takeover itself is the fenced CAS.
In manual mode (no threads) the reclaim refreshes the set itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from weft_django.conf import WeftSettings
from weft_django.engine.db_connections import mark_engine_thread
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER, presence
from weft_django.ownership.presence import SessionPresence

logger = logging.getLogger("weft_django.engine")

#: How often the watch looks (ms): well under the issue's 1 s takeover target.
WATCH_INTERVAL_MS = 250


class PresenceWatch:
    """The gone engines as last seen, and the thread that keeps looking."""

    def __init__(
        self,
        presence: SessionPresence,
        *,
        clock: Callable[[], int],
        window_ms: int,
        on_gone: Callable[[], object],
        claim_ttl_ms: int,
        interval_ms: int = WATCH_INTERVAL_MS,
    ) -> None:
        """``window_ms``: how long an engine marked stopped stays in the set (past
        it, its claims have expired anyway); ``on_gone``: wake the maintenance pass."""
        self.presence = presence
        self.clock = clock
        self.window_ms = window_ms
        self.on_gone = on_gone
        self.claim_ttl_ms = claim_ttl_ms
        self.interval_ms = interval_ms
        self.gone: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def check(self) -> bool:
        """One look; ``True`` when an engine is gone that was not gone before."""
        rows = self.presence.gone_engines(now_ms=self.clock(), window_ms=self.window_ms)
        for engine_id, marked in rows:
            if marked:
                logger.warning(
                    "engine %s is gone (its database session ended): marked stopped; "
                    "its claims may be taken over now",
                    engine_id,
                )
        gone = frozenset(engine_id for engine_id, _ in rows)
        new = bool(gone - self.gone)
        self.gone = gone
        return new

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="weft-presence", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None

    def _loop(self) -> None:
        mark_engine_thread(self.claim_ttl_ms)
        while not self._stop.wait(self.interval_ms / 1000):
            try:
                if self.check():
                    self.on_gone()
            except Exception:
                # The presence reconnects on its next look; until then the TTL
                # path still covers every engine.
                logger.warning("presence watch failed", exc_info=True)


def open_presence(
    settings: WeftSettings,
    engine_id: str,
    *,
    clock: Callable[[], int],
    on_gone: Callable[[], object],
) -> tuple[SessionPresence, PresenceWatch]:
    """Take this engine's presence lock (boot, before its record and any claim)
    and build the watch of the others (started with the engine's threads)."""
    presence = SessionPresence(settings.database, engine_id)
    presence.open()
    grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms
    # Reconnected after its own session ended (a database restart ends them
    # all): give the others the takeover grace to retake their locks.
    presence.quiet_after_reconnect_ms = grace
    watch = PresenceWatch(
        presence,
        clock=clock,
        window_ms=settings.claim_ttl_ms + grace,
        on_gone=on_gone,
        claim_ttl_ms=settings.claim_ttl_ms,
    )
    return presence, watch


class WatchesPresence:
    """The ``Engine`` methods of session presence: its own session held open,
    and the watch that tells it when another engine's session ended."""

    settings: WeftSettings
    engine_id: str
    registry: Any
    presence: SessionPresence | None
    presence_watch: PresenceWatch | None

    def now_ms(self) -> int:
        raise NotImplementedError

    def wake(self) -> None:
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        raise NotImplementedError

    def uses_session_presence(self) -> bool:
        """Claims, ``SESSION_PRESENCE`` on, PostgreSQL (elsewhere: the TTL path alone)."""
        return (
            self.registry is not None
            and self.settings.session_presence
            and presence.supported(self.settings.database)
        )

    def _open_presence(self) -> int | None:
        if not self.uses_session_presence():
            return None
        self.presence, self.presence_watch = open_presence(
            self.settings, self.engine_id, clock=self.now_ms, on_gone=self.wake
        )
        return self.presence.key

    def gone_holders(self, refresh: bool = False) -> frozenset[str]:
        """Engines whose database session ended (their claims are takeable now);
        ``refresh``: look again when no watch thread runs (manual mode)."""
        watch = self.presence_watch
        if watch is None:
            return frozenset()
        if refresh and not watch.running and not self.stopping:
            try:
                watch.check()
            except Exception:
                logger.warning("presence check failed", exc_info=True)
        return watch.gone


__all__ = ["WATCH_INTERVAL_MS", "PresenceWatch", "WatchesPresence", "open_presence"]
