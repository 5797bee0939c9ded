"""``LocalScheduler``: found turns run on this engine's own thread pool (the default).

Why one object: a run must never have two concurrent turns in one engine.
The in-flight set is that guarantee -- a run enters it when a turn (or the
claim that precedes one) is handed to a thread, and leaves it only when that
turn ended, so the maintenance pass cannot dispatch the same run twice.
Without ``start()`` (tests, the demo, ``run_until_idle``) turns queue and
``drain()`` drives them inline, in order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections

from weft_django.engine.db_connections import mark_engine_thread, refresh_connections
from weft_django.engine.handoff import Handoff
from weft_django.engine.host import TurnHost
from weft_django.engine.scheduling.base import TurnScheduler
from weft_django.engine.turn.failures import record_turn_failure
from weft_django.kernel.vocab import WakeKind, WakeTransport

logger = logging.getLogger("weft_django.engine")

_Queued = tuple[str, WakeKind | None, WakeTransport, Handoff | None]


class LocalScheduler(TurnScheduler):
    """In-flight set, inline queue and (after ``start()``) a thread pool."""

    engine: TurnHost

    def __init__(self, *, listens: bool = True) -> None:
        """``listens``: the engine LISTENs through the installed wake backends
        (polling stays on either way)."""
        self.listens = listens
        self._lock = threading.Lock()
        self._inflight: set[str] = set()
        # Runs a pooled turn took on inline (``continue_as_new``): in flight
        # until that turn ends (a thread-local list, set by ``_drive_and_clear``).
        self._adopted = threading.local()
        self._queue: list[_Queued] = []
        self._pool: ThreadPoolExecutor | None = None
        # A pickup left pending runs behind for want of room: the next turn
        # to end asks for a pickup (``pickup_backlog``).
        self._backlog = False

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        settings = self.engine.settings
        # Every thread started here drives work: its sessions get the
        # idle-in-transaction bound (``engine.db_connections``).
        self._pool = ThreadPoolExecutor(
            max_workers=settings.worker_concurrency,
            thread_name_prefix="weft-turn",
            initializer=mark_engine_thread,
            initargs=(settings.claim_ttl_ms,),
        )

    def stop(self, grace: float) -> None:
        if self._pool is None:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._lock:
                if not self._inflight:
                    break
            time.sleep(0.05)
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def background(self) -> bool:
        """``start()`` runs the work on this engine's own threads."""
        return self._pool is not None

    @property
    def inflight(self) -> int:
        with self._lock:
            return len(self._inflight)

    def is_inflight(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._inflight

    def pickup_capacity(self, most: int) -> int:
        """Room for twice the pool's threads: a claimed run waits at most one
        turn of each thread; more would hold runs other engines could drive."""
        if self._pool is None:
            return most
        room = 2 * self.engine.settings.worker_concurrency - self.inflight
        return max(0, min(most, room))

    def pickup_backlog(self, left: bool) -> None:
        self._backlog = left

    # -- dispatching -----------------------------------------------------------------
    def dispatch_turn(
        self,
        run_id: str,
        wake_kind: WakeKind | None,
        transport: WakeTransport = "local",
        handoff: Handoff | None = None,
    ) -> None:
        """On the pool when running, else queued for the next ``drain()``.

        A run already in flight keeps its turn, and a ``handoff`` for it is
        dropped: only the dispatch that puts the run in flight carries one."""
        with self._lock:
            if run_id in self._inflight or self.engine.stopping:
                attention = self.engine.turn_attention.get(run_id)
                if attention is not None:
                    attention.set()  # its turn waits on activities: look again
                return
            self._inflight.add(run_id)
            if self._pool is None:
                self._queue.append((run_id, wake_kind, transport, handoff))
                return
        self._pool.submit(self._drive_and_clear, run_id, wake_kind, transport, handoff)

    def dispatch_handoff(self, handoff: Handoff) -> None:
        """The turn runs here, in this process: it starts from the snapshot."""
        self.dispatch_turn(str(handoff.run.pk), None, "local", handoff)

    def claim_then_drive(
        self,
        run_id: str,
        claim: Callable[[], bool],
        wake_kind: WakeKind | None,
        *,
        drive_here: bool,
    ) -> bool:
        """With the pool running, the claim happens on a turn thread (the run is
        in flight from now on); then the turn runs there (``drive_here``) or is
        queued behind the other claims. Inline, the claim happens now and the
        turn is queued."""
        if self._pool is None:
            if not claim():
                return False
            self.dispatch_turn(run_id, wake_kind)
            return True
        with self._lock:
            if run_id in self._inflight or self.engine.stopping:
                return False
            self._inflight.add(run_id)
        self._pool.submit(self._claim_on_pool, run_id, claim, wake_kind, drive_here)
        return True

    def drain(self) -> int:
        driven = 0
        while True:
            with self._lock:
                if not self._queue:
                    return driven
                run_id, kind, transport, handoff = self._queue.pop(0)
            self._drive_and_clear(run_id, kind, transport, handoff)
            driven += 1

    def adopt_inflight(self, run_id: Any) -> None:
        """The current turn drives ``run_id`` inline from now on (a run it continued
        as new): mark it in flight, so the stranded re-drive of this engine's
        ``running`` runs does not start a second, concurrent turn of it. Outside
        ``_drive_and_clear`` a no-op."""
        keys = getattr(self._adopted, "keys", None)
        if keys is None:
            return
        with self._lock:
            self._inflight.add(str(run_id))
        keys.append(str(run_id))

    # -- on a turn thread ------------------------------------------------------------
    def _claim_on_pool(
        self, run_id: str, claim: Callable[[], bool], wake_kind: WakeKind | None, drive_here: bool
    ) -> None:
        try:
            refresh_connections()
            # Still queued when dispose() began: claim nothing.
            claimed = not self.engine.stopping and claim()
        except Exception:
            logger.exception("claiming run %s failed; it will be retried", run_id)
            connections[self.engine.settings.database].close_if_unusable_or_obsolete()
            claimed = False
        if claimed and drive_here:
            self._drive_and_clear(run_id, wake_kind, "local")  # clears the in-flight mark
            return
        with self._lock:
            self._inflight.discard(run_id)
        if claimed:
            self.dispatch_turn(run_id, wake_kind)

    def _drive_and_clear(
        self,
        run_id: str,
        wake_kind: WakeKind | None,
        transport: WakeTransport,
        handoff: Handoff | None = None,
    ) -> None:
        self._adopted.keys = []
        try:
            refresh_connections()
            left = self.engine.drive(run_id, wake_kind, transport=transport, handoff=handoff)
            if left in ("parked", "running"):
                # Its timers, or a re-drive of a turn that stopped half-way,
                # are for the polling pass to find.
                self.engine.poll_soon()
        except Exception as exc:
            connections[self.engine.settings.database].close_if_unusable_or_obsolete()
            # Counted, backed off, suspended at the bound (logs the traceback).
            record_turn_failure(self.engine, run_id, exc)
            self.engine.poll_soon()  # its retry (``turn_retry_at``) is the pass's
        finally:
            with self._lock:
                self._inflight.discard(run_id)
                self._inflight.difference_update(self._adopted.keys)
                backlog, self._backlog = self._backlog, False
            self._adopted.keys = None
            if backlog and self._pool is not None:
                self.engine.wake_pickup()


__all__ = ["LocalScheduler"]
