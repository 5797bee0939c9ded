"""``Engine``: boot, turns, fenced checkpoints, the maintenance loop (SPEC §2, §7).

An engine is one process (or one Celery node) that holds claims and drives
workflows. ``boot()`` runs the start-up gates before anything else;
``run_maintenance()`` is one full pass — renew every held claim, take over
stale claims and recover their runs, fire due timers, react to wakes, pick
up pending runs; ``run_until_idle()`` repeats passes and drives every ready
turn inline (tests, the demo); ``start()`` runs the same work on background
threads (renewal in its own thread so a slow pass never delays it);
``dispose()`` releases every claim so a rolling restart hands work over
without waiting for expiry.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.db import connections

from weft_django.conf import OwnershipMode, WeftSettings, get_settings
from weft_django.engine.db_connections import mark_engine_thread, refresh_connections
from weft_django.engine.definitions import ActivityDefinition
from weft_django.engine.maintenance import Maintenance
from weft_django.engine.turn import Turn, TurnAborted
from weft_django.errors import EngineDeposedError
from weft_django.models import EngineRecord, WorkflowRun
from weft_django.ownership.gates import check_clock_skew, run_gates
from weft_django.ownership.guard import confirm_wake_ownership
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.registry import ClaimRegistry, RenewScope
from weft_django.warnings import WakeKind

logger = logging.getLogger("weft_django.engine")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def new_engine_id() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class ActivityOutcome:
    ok: bool
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False


class Engine:
    """One engine: an ``OwnershipHost`` that drives workflows."""

    def __init__(
        self,
        engine_id: str | None = None,
        clock: Callable[[], int] | None = None,
        *,
        node_name: str = "",
        pool: str = "",
        renew_scope: RenewScope = "held",
        listen: bool = True,
        dispatcher: Callable[[str, WakeKind | None, str], None] | None = None,
        **overrides: Any,
    ) -> None:
        """``listen``: LISTEN for NOTIFY wakes on PostgreSQL (polling stays on).
        ``dispatcher``: hands a turn to another transport (a Celery node sends
        it to its own queue) instead of this engine's thread pool."""
        base = get_settings()
        self.listen = listen
        self.dispatcher = dispatcher
        # Transport hooks of the maintenance pass (None: the polling defaults).
        # ``timer_dispatcher(owned_runs, now_ms)`` hands timers over (a Celery
        # node: an ``eta`` message once due within CELERY_ETA_HORIZON) and returns
        # the run ids it dispatched for a turn now; ``stranded_finder(owned_runs,
        # now_ms)`` returns the ``running`` run ids whose turn must be re-driven.
        self.timer_dispatcher: Callable[[Any, int], Iterable[Any]] | None = None
        self.stranded_finder: Callable[[Any, int], Iterable[Any]] | None = None
        self.settings: WeftSettings = base.with_overrides(**overrides) if overrides else base
        self.engine_id = engine_id or new_engine_id()
        self.uses_injected_clock = clock is not None
        self._clock = clock or wall_clock_ms
        self.node_name = node_name
        self.pool_name = pool
        self.metrics = ClaimMetrics()
        self.registry: ClaimRegistry | None = None
        self.lease: GlobalLeaseManager | None = None
        if self.ownership == "workflow-lease":
            self.registry = ClaimRegistry(
                engine_id=self.engine_id,
                clock=self.now_ms,
                claim_ttl_ms=self.settings.claim_ttl_ms,
                claim_renew_interval_ms=self.settings.claim_renew_interval_ms,
                using=self.settings.database,
                metrics=self.metrics,
                renew_scope=renew_scope,
            )
        elif self.ownership == "lease":
            self.lease = GlobalLeaseManager(
                holder_id=self.engine_id,
                clock=self.now_ms,
                ttl_ms=self.settings.lease_ttl_ms,
                renew_interval_ms=self.settings.lease_renew_interval_ms,
                wait_timeout_ms=self.settings.lease_wait_timeout_ms,
                using=self.settings.database,
                poll_interval_ms=min(1000, self.settings.lease_renew_interval_ms),
                on_lost=self._on_lease_lost,
            )
        self.maintenance = Maintenance(self)
        self.booted = False
        self.halted = False
        self._lock = threading.Lock()
        self._inflight: set[str] = set()
        # Runs a pooled turn took on inline (``continue_as_new``): in flight
        # until that turn ends (a thread-local list, set by ``_drive_and_clear``).
        self._adopted = threading.local()
        self._queue: list[tuple[Any, WakeKind | None, str]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        # Renewal outlives ``_stopping``: claims stay renewed while in-flight
        # turns finish during ``dispose``'s grace, until they are released.
        self._renew_stop = threading.Event()
        self._wake = threading.Event()
        self._listener: Any = None
        # run id -> leaf commands its body had yielded when this engine last
        # parked it: keeps ctx.logger silent for body code a later turn
        # re-runs (an in-memory hint only, like a cached generator).
        self.parked_commands: dict[str, int] = {}

    # -- OwnershipHost -----------------------------------------------------------
    @property
    def ownership(self) -> OwnershipMode:
        return self.settings.ownership

    def now_ms(self) -> int:
        return int(self._clock())

    def epoch_for(self, workflow_id: str) -> int:
        if self.registry is not None:
            return self.registry.current_epoch(workflow_id) or 0
        if self.lease is not None:
            return self.lease.epoch or 0
        return 0

    # -- lifecycle -----------------------------------------------------------------
    def boot(self) -> Engine:
        """Gates, clock check, lease (``lease`` mode), then the ``EngineRecord``."""
        if self.booted:
            return self
        run_gates(self)
        check_clock_skew(self)
        if self.lease is not None:
            self.lease.acquire()
        now = self.now_ms()
        EngineRecord.objects.using(self.settings.database).create(
            engine_id=self.engine_id,
            node_name=self.node_name,
            host=socket.gethostname()[:200],
            pid=os.getpid(),
            mode=self.ownership,
            pool=self.pool_name,
            transport=self.settings.transport,
            started_at=now,
            heartbeat_at=now,
        )
        self.booted = True
        if self.uses_injected_clock:
            from weft_django.engine import external

            external.use_engine_clock(self._clock)
        logger.info("engine %s booted (ownership=%s)", self.engine_id, self.ownership)
        return self

    def _on_lease_lost(self, reason: str) -> None:
        self.halted = True
        self._stopping.set()

    def heartbeat(self) -> None:
        EngineRecord.objects.using(self.settings.database).filter(pk=self.engine_id).update(
            heartbeat_at=self.now_ms(), metrics=self.metrics.snapshot().to_json()
        )

    def dispose(self, grace: float = 10.0) -> None:
        """Stop taking turns, finish in-flight ones (up to ``grace`` s), release claims."""
        self._stopping.set()
        self._wake.set()
        if self._listener is not None:
            self._listener.stop()
        if self._pool is not None:
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                with self._lock:
                    if not self._inflight:
                        break
                time.sleep(0.05)
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._renew_stop.set()
        for thread in self._threads:
            thread.join(timeout=max(1.0, grace))
        try:
            if self.registry is not None:
                self.registry.release_all()
            if self.lease is not None and not self.lease.deposed:
                self.lease.release()
        except Exception:
            logger.warning("releasing claims at shutdown failed", exc_info=True)
        if self.booted:
            try:
                self.heartbeat()
                EngineRecord.objects.using(self.settings.database).filter(pk=self.engine_id).update(
                    stopped_at=self.now_ms()
                )
            except Exception:
                logger.warning("could not mark engine %s stopped", self.engine_id, exc_info=True)
        if self.uses_injected_clock:
            from weft_django.engine import external

            if external.engine_clock() is self._clock:
                external.use_engine_clock(None)
        logger.info("engine %s stopped", self.engine_id)

    # -- driving ---------------------------------------------------------------------
    def dispatch(self, run_id: Any, wake_kind: WakeKind | None, transport: str = "local") -> None:
        """Drive ``run_id`` soon: on the pool when running, else in the next idle loop."""
        key = str(run_id)
        with self._lock:
            if key in self._inflight or self._stopping.is_set():
                return
            self._inflight.add(key)
        if self.dispatcher is not None:
            try:
                self.dispatcher(key, wake_kind, transport)
            finally:
                with self._lock:
                    self._inflight.discard(key)
            return
        if self._pool is not None:
            self._pool.submit(self._drive_and_clear, key, wake_kind, transport)
        else:
            with self._lock:
                self._queue.append((key, wake_kind, transport))

    def dispatch_pickup(self, run: WorkflowRun) -> bool:
        """Pick up a pending run (claim acquire + pending→running), then drive it.

        Doing every pickup serially on the maintenance thread capped how fast
        new runs started (issue #7); on the pool, the turn follows the pickup
        on the same thread. Returns whether it was picked up (or handed on).
        """
        return self._claim_then_drive(
            str(run.pk), lambda: self.maintenance.pick_up(run), None, drive_here=True
        )

    def dispatch_reclaim(self, run_id: Any, workflow_id: str) -> bool:
        """Take over a stale claim found by the reclaim scan, then drive its run.

        After a crash the survivors take the dead engine's claims over one
        transition each; done serially on the maintenance thread, the last
        takeover missed the bound of issue #7. On the pool, the turn is
        queued behind the other takeovers, so every claim is taken first.
        """
        return self._claim_then_drive(
            str(run_id),
            lambda: self.maintenance.reclaim_one(workflow_id),
            "inline-macrotask-drive",
            drive_here=False,
        )

    def _claim_then_drive(
        self,
        key: str,
        claim: Callable[[], bool],
        wake_kind: WakeKind | None,
        *,
        drive_here: bool,
    ) -> bool:
        """``claim`` a run for this engine, then drive it.

        With the pool running, the claim happens on a turn thread (the run is
        in flight from now on); then the turn runs there (``drive_here``) or
        is queued. Inline (``run_until_idle``, a Celery node's dispatcher),
        the claim happens now and the turn is dispatched.
        """
        if self._pool is None or self.dispatcher is not None:
            if not claim():
                return False
            self.dispatch(key, wake_kind)
            return True
        with self._lock:
            if key in self._inflight or self._stopping.is_set():
                return False
            self._inflight.add(key)
        self._pool.submit(self._claim_on_pool, key, claim, wake_kind, drive_here)
        return True

    def _claim_on_pool(
        self, key: str, claim: Callable[[], bool], wake_kind: WakeKind | None, drive_here: bool
    ) -> None:
        try:
            refresh_connections()
            # Still queued when dispose() began: claim nothing.
            claimed = not self._stopping.is_set() and claim()
        except Exception:
            logger.exception("claiming run %s failed; it will be retried", key)
            connections[self.settings.database].close_if_unusable_or_obsolete()
            claimed = False
        if claimed and drive_here:
            self._drive_and_clear(key, wake_kind, "local")  # clears the in-flight mark
            return
        with self._lock:
            self._inflight.discard(key)
        if claimed:
            self.dispatch(key, wake_kind)

    def _drive_and_clear(self, run_id: str, wake_kind: WakeKind | None, transport: str) -> None:
        self._adopted.keys = []
        try:
            refresh_connections()
            self.drive(run_id, wake_kind, transport=transport)
        except Exception:
            logger.exception("turn of run %s failed; it will be retried", run_id)
            connections[self.settings.database].close_if_unusable_or_obsolete()
        finally:
            with self._lock:
                self._inflight.discard(run_id)
                self._inflight.difference_update(self._adopted.keys)
            self._adopted.keys = None

    def adopt_inflight(self, run_id: Any) -> None:
        """The current turn drives ``run_id`` inline from now on (a run it continued
        as new): mark it in flight, so the stranded re-drive of this engine's
        ``running`` runs does not start a second, concurrent turn of it. Outside
        ``_drive_and_clear`` (a Celery pool task: its turn mark guards it) a no-op."""
        keys = getattr(self._adopted, "keys", None)
        if keys is None:
            return
        with self._lock:
            self._inflight.add(str(run_id))
        keys.append(str(run_id))

    def drive(
        self,
        run_id: Any,
        wake_kind: WakeKind | None = None,
        *,
        expected_epoch: int | None = None,
        transport: str = "local",
    ) -> str | None:
        """One turn of ``run_id`` behind the wake guard; returns the status left."""
        db = self.settings.database
        run = WorkflowRun.objects.using(db).filter(pk=run_id).first()
        if run is None or run.status not in ("running", "parked"):
            return None
        if self.halted:
            return None
        if wake_kind is not None:
            decision = confirm_wake_ownership(
                self, run.workflow_id, wake_kind, expected_epoch, transport=transport
            )
            if decision == "discard":
                return None
        elif self.registry is not None and self.registry.current_epoch(run.workflow_id) is None:
            return None
        try:
            return Turn(self, run).drive()
        except EngineDeposedError:
            logger.warning("engine %s was deposed from %s", self.engine_id, run.workflow_id)
            return None
        except TurnAborted as aborted:
            logger.info("turn of %s aborted: %s", run.workflow_id, aborted)
            return None

    def run_activity(
        self, definition: ActivityDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> ActivityOutcome:
        """Call an activity; with a timeout it runs on its own thread and is abandoned."""
        if definition.timeout_ms is None:
            try:
                return ActivityOutcome(True, definition.fn(*args, **kwargs))
            except Exception as exc:
                return ActivityOutcome(False, error=exc)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = definition.fn(*args, **kwargs)
            except Exception as exc:
                box["error"] = exc
            finally:
                connections.close_all()

        thread = threading.Thread(
            target=target, name=f"weft-activity:{definition.name}", daemon=True
        )
        thread.start()
        thread.join(definition.timeout_ms / 1000)
        if thread.is_alive():
            return ActivityOutcome(
                False,
                error=TimeoutError(
                    f"activity {definition.name!r} timed out after {definition.timeout_ms} ms"
                ),
                timed_out=True,
            )
        if "error" in box:
            return ActivityOutcome(False, error=box["error"])
        return ActivityOutcome(True, box.get("value"))

    # -- maintenance -------------------------------------------------------------------
    def run_maintenance(self) -> int:
        """One full pass; returns how many turns it found work for."""
        if not self.booted:
            self.boot()
        self.maintenance.renew()
        found = self.maintenance.find_and_dispatch()
        if self._pool is None:
            self._drain_queue()
        return found

    def _drain_queue(self) -> int:
        driven = 0
        while True:
            with self._lock:
                if not self._queue:
                    return driven
                run_id, kind, transport = self._queue.pop(0)
            self._drive_and_clear(run_id, kind, transport)
            driven += 1

    def run_until_idle(self, timeout: float = 30.0) -> int:
        """Pass after pass until nothing is ready; returns the passes that found work."""
        deadline = time.monotonic() + timeout
        busy = 0
        while time.monotonic() < deadline:
            if self.run_maintenance() == 0:
                return busy
            busy += 1
        raise TimeoutError(f"engine {self.engine_id} still busy after {timeout} s")

    # -- background mode ----------------------------------------------------------------
    def start(self) -> Engine:
        """Run maintenance on background threads (``BACKGROUND_TASKS="auto"``)."""
        self.boot()
        # Every thread started here drives work: its sessions get the
        # idle-in-transaction bound (``engine.db_connections``).
        self._pool = ThreadPoolExecutor(
            max_workers=self.settings.worker_concurrency,
            thread_name_prefix="weft-turn",
            initializer=mark_engine_thread,
            initargs=(self.settings.claim_ttl_ms,),
        )
        self._threads = [
            threading.Thread(target=self._renew_loop, name="weft-renew", daemon=True),
            threading.Thread(target=self._poll_loop, name="weft-poll", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        from weft_django.transports.notify import WAKE_CHANNEL, Listener

        if self.listen and Listener.available(self.settings.database):
            self._listener = Listener(
                self.settings.database, (WAKE_CHANNEL,), lambda channel, payload: self._wake.set()
            )
            self._listener.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def _renew_loop(self) -> None:
        mark_engine_thread(self.settings.claim_ttl_ms)
        interval = self.settings.claim_renew_interval_ms / 1000
        if self.ownership == "lease":
            interval = self.settings.lease_renew_interval_ms / 1000
        while not self._renew_stop.wait(interval):
            try:
                refresh_connections()
                self.maintenance.renew()
            except Exception:
                logger.exception("claim renewal pass failed")
                connections[self.settings.database].close_if_unusable_or_obsolete()

    def _poll_loop(self) -> None:
        mark_engine_thread(self.settings.claim_ttl_ms)
        interval = self.settings.poll_interval_ms / 1000
        if self.settings.transport == "celery":
            interval = self.settings.claim_renew_interval_ms / 1000
        while not self._stopping.is_set():
            try:
                refresh_connections()
                self.maintenance.find_and_dispatch()
            except Exception:
                logger.exception("maintenance pass failed")
                connections[self.settings.database].close_if_unusable_or_obsolete()
            self._wake.wait(interval)
            self._wake.clear()

    @property
    def background(self) -> bool:
        """``start()`` runs the work on this engine's own threads."""
        return self._pool is not None

    @property
    def stopping(self) -> bool:
        """``dispose()`` began (or the lease was lost): turns stop at their next checkpoint."""
        return self._stopping.is_set()

    @property
    def inflight(self) -> int:
        with self._lock:
            return len(self._inflight)
