"""``Engine``: boot, the maintenance pass, background mode, dispose (SPEC §2, §7).

An engine is one process (or one Celery node) that holds claims and drives
workflows. ``boot()`` runs the start-up gates before anything else;
``run_maintenance()`` is one full pass -- renew every held claim, take over
stale claims and recover their runs, fire due timers, react to wakes, pick
up pending runs; ``run_until_idle()`` repeats passes and drives every ready
turn inline (tests, the demo); ``start()`` runs the same work on background
threads (``engine.scheduling.loops``); ``dispose()`` releases every claim so a rolling
restart hands work over without waiting for expiry.

*Where* a found turn runs is the scheduler's business (``scheduler=``, a
``TurnScheduler``; ``LocalScheduler`` by default), and how wakes arrive is
the installed wake backends' (``engine.wakes``): the engine names no
transport.

The engine wires its parts (registry, presence, maintenance, scheduler, side tasks,
cadence) in their boot and dispose order, and that order is written down only here; the
parts themselves live in the engine's wings (``scheduling``, ``maintenance``, ...).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from weft_django.conf import OwnershipMode, WeftSettings, get_settings
from weft_django.engine import records
from weft_django.engine.activities.executor import ActivityExecutor, ActivityOutcome
from weft_django.engine.activities.heartbeats import close_heartbeat_thread
from weft_django.engine.handoff import Handoff
from weft_django.engine.maintenance.passes import Maintenance
from weft_django.engine.queues.flow import gate as queue_gate
from weft_django.engine.replay.cache import WorkflowCache
from weft_django.engine.schedules.sync import boot_sync
from weft_django.engine.scheduling.background import BackgroundMode
from weft_django.engine.scheduling.base import TurnScheduler
from weft_django.engine.scheduling.cadence import PollCadence, idle_cap_ms
from weft_django.engine.scheduling.local import LocalScheduler
from weft_django.engine.scheduling.loops import SideTasks
from weft_django.engine.scheduling.presence_watch import PresenceWatch, WatchesPresence
from weft_django.engine.turn import Turn, TurnAborted
from weft_django.engine.wakes import Listening
from weft_django.errors import EngineDeposedError
from weft_django.inspection.totals import prune_engine_records
from weft_django.kernel.clock import Clock, process_clock, wall_ms
from weft_django.kernel.vocab import WakeKind, WakeTransport
from weft_django.models import DRIVABLE_STATUSES, WorkflowRun
from weft_django.models.querysets import in_backoff
from weft_django.ownership import presence
from weft_django.ownership.gates import check_clock_skew, run_gates
from weft_django.ownership.guard import confirm_wake_ownership
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.loss import log_stopped_driving
from weft_django.ownership.metrics import ClaimMetrics
from weft_django.ownership.registry import ClaimRegistry

logger = logging.getLogger("weft_django.engine")


def new_engine_id() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Engine(BackgroundMode, WatchesPresence):
    """One engine: a ``TurnHost`` that drives workflows."""

    #: The queues it admits runs of (``engine.queues.serving``); ``None``: all.
    #: Set before ``boot`` (``weft_worker --queues``): the record names them.
    served_queues: frozenset[str] | None = None

    def __init__(
        self,
        engine_id: str | None = None,
        clock: Clock | None = None,
        *,
        scheduler: TurnScheduler | None = None,
        **overrides: Any,
    ) -> None:
        """``clock``: the engine clock (ms; a test injects a fake one).
        ``scheduler``: where found turns run (default: this engine's own
        ``LocalScheduler``). ``overrides``: lower-case ``WEFT`` keys."""
        base = get_settings()
        self.settings: WeftSettings = base.with_overrides(**overrides) if overrides else base
        self.engine_id = engine_id or new_engine_id()
        self.uses_injected_clock = clock is not None
        self._clock: Clock = clock or wall_ms
        self.scheduler: TurnScheduler = scheduler if scheduler is not None else LocalScheduler()
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
                renew_scope=self.scheduler.renew_scope,
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
        #: This engine's session presence and the watch of the others' (boot).
        self.presence: presence.SessionPresence | None = None
        self.presence_watch: PresenceWatch | None = None
        self.booted = False
        self.halted = False
        renew_ms = (
            self.settings.lease_renew_interval_ms
            if self.ownership == "lease"
            else self.settings.claim_renew_interval_ms
        )
        poll_ms = self.scheduler.poll_interval_ms(self.settings)
        self._tasks = SideTasks(
            renew=self.maintenance.renew,
            poll=self.maintenance.find_and_dispatch,
            pickup=self.maintenance.pick_up_pending,
            renew_interval_ms=renew_ms,
            poll_interval_ms=poll_ms,
            claim_ttl_ms=self.settings.claim_ttl_ms,
            database=self.settings.database,
            # Only an engine that LISTENs may back off (it still polls every
            # POLL_INTERVAL while no wake backend's connection is up).
            cadence=PollCadence(poll_ms, idle_cap_ms(poll_ms, renew_ms))
            if self.scheduler.listens
            else None,
            next_gap_ms=self._next_poll_gap_ms,
        )
        self._listening: list[Listening] = []
        # run id -> leaf commands its body had yielded when this engine last
        # parked it: keeps ctx.logger silent for body code a later turn
        # re-runs (an in-memory hint only, like a cached generator).
        self.parked_commands: dict[str, int] = {}
        self.workflow_cache: WorkflowCache | None = (
            WorkflowCache(self.settings.workflow_cache_size)
            if self.settings.workflow_cache_size > 0
            else None
        )
        self.turn_attention: dict[str, threading.Event] = {}
        self._activity_executor: ActivityExecutor | None = None
        self._executor_lock = threading.Lock()
        self.scheduler.bind(self)

    # -- OwnershipHost -----------------------------------------------------------
    @property
    def ownership(self) -> OwnershipMode:
        return self.settings.ownership

    @property
    def node_name(self) -> str:
        return self.scheduler.node_name

    @property
    def pool_name(self) -> str:
        return self.scheduler.pool_name

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
        # The lock first: a record naming a key is never one whose lock is not yet taken.
        presence_key = self._open_presence()
        try:
            records.create_record(
                self.settings.database,
                self.engine_id,
                node_name=self.node_name,
                pool=self.pool_name,
                mode=self.ownership,
                transport=self.settings.transport,
                now_ms=self.now_ms(),
                presence_key=presence_key,
                queues=None if self.served_queues is None else sorted(self.served_queues),
            )
        except BaseException:
            if self.presence is not None:  # no record names it: just end the session
                self.presence.close()
                self.presence, self.presence_watch = None, None
            raise
        self.booted = True
        # Each boot adds a record; folding the long-silent ones here keeps the
        # record count (and scrape cost) bounded with counters still monotonic.
        prune_engine_records(
            self.settings.database,
            now_ms=self.now_ms(),
            retention_ms=self.settings.engine_record_retention_ms,
        )
        if self.uses_injected_clock:
            # Client-side times of this process compare with this engine's.
            process_clock.install(self._clock)
        boot_sync(self.settings)  # WEFT["SCHEDULES"] (engine.schedules.sync)
        logger.info("engine %s booted (ownership=%s)", self.engine_id, self.ownership)
        return self

    def _on_lease_lost(self, reason: str) -> None:
        self.halted = True
        self._tasks.stopping.set()

    def heartbeat(self) -> None:
        records.write_heartbeat(
            self.settings.database,
            self.engine_id,
            now_ms=self.now_ms(),
            metrics=self.metrics.snapshot(),
        )

    def dispose(self, grace: float = 10.0) -> None:
        """Stop taking turns, finish in-flight ones (up to ``grace`` s), release claims."""
        self._tasks.stopping.set()
        self._tasks.wake.set()
        for listening in self._listening:
            listening.stop()
        self._listening = []
        if self.presence_watch is not None:
            self.presence_watch.stop()
        self.scheduler.stop(grace)
        if self._activity_executor is not None:
            self._activity_executor.shutdown(wait=False)
        close_heartbeat_thread()
        self._tasks.renew_stop.set()
        self._tasks.join(timeout=max(1.0, grace))
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
                records.mark_stopped(self.settings.database, self.engine_id, now_ms=self.now_ms())
            except Exception:
                logger.warning("could not mark engine %s stopped", self.engine_id, exc_info=True)
        if self.presence is not None:
            # Last: until the record says stopped, no one reads this engine as gone.
            self.presence.close()
        if self.uses_injected_clock:
            process_clock.remove(self._clock)
        logger.info("engine %s stopped", self.engine_id)

    # -- driving (where: the scheduler) ------------------------------------------------
    def dispatch(
        self, run_id: Any, wake_kind: WakeKind | None, transport: WakeTransport = "local"
    ) -> None:
        """Drive ``run_id`` soon (the scheduler decides where)."""
        self.scheduler.dispatch_turn(str(run_id), wake_kind, transport)

    def dispatch_handoff(self, handoff: Handoff) -> None:
        """Drive the run this engine's pickup just committed, from ``handoff``."""
        self.scheduler.dispatch_handoff(handoff)

    def dispatch_pickup(self, run: WorkflowRun) -> bool:
        """Pick up a pending run (claim acquire + pending→running), then drive it.

        The turn follows the pickup on the same worker, so pickups do not
        queue behind each other on the maintenance thread. Returns whether it
        was picked up (or handed on).
        """
        return self.scheduler.claim_then_drive(
            str(run.pk), lambda: self.maintenance.pick_up(run), None, drive_here=True
        )

    def dispatch_reclaim(self, run_id: Any, workflow_id: str) -> bool:
        """Take over a stale claim found by the reclaim scan, then drive its run.

        Takeovers run on the workers, not serially on the maintenance thread,
        and each turn is queued behind the other takeovers: after a crash
        every claim is taken over before the first recovered turn runs.
        """
        return self.scheduler.claim_then_drive(
            str(run_id),
            lambda: self.maintenance.reclaim_one(workflow_id),
            "drive",
            drive_here=False,
        )

    def adopt_inflight(self, run_id: Any) -> None:
        """The current turn drives ``run_id`` inline from now on (``continue_as_new``)."""
        self.scheduler.adopt_inflight(run_id)

    def drive(
        self,
        run_id: Any,
        wake_kind: WakeKind | None = None,
        *,
        expected_epoch: int | None = None,
        transport: WakeTransport = "local",
        handoff: Handoff | None = None,
    ) -> str | None:
        """One turn of ``run_id`` behind the wake guard; returns the status left.

        ``handoff``: the run as this engine's pickup just committed it
        (``engine.handoff``): the turn starts from it instead of reading it."""
        db = self.settings.database
        if handoff is not None and str(handoff.run.pk) == str(run_id):
            run: WorkflowRun | None = handoff.run
        else:
            handoff = None
            run = WorkflowRun.objects.using(db).filter(pk=run_id).first()
        if run is None or run.status not in DRIVABLE_STATUSES:
            return None
        if self.halted:
            return None
        if in_backoff(run.turn_retry_at, self.now_ms()):
            # A failed turn's backoff (``engine.turn_failures``): whatever woke
            # the run, the retry at ``turn_retry_at`` sees it.
            return None
        if wake_kind is not None:
            decision = confirm_wake_ownership(
                self, run.workflow_id, wake_kind, expected_epoch, transport=transport
            )
            if decision == "discard":
                return None
        elif self.registry is not None and self.registry.current_epoch(run.workflow_id) is None:
            return None
        if run.queue is not None and not queue_gate(self, run):
            return None  # no slot of its queue at this claim generation (``engine.queues``)
        try:
            return Turn(self, run, fresh=handoff is not None and handoff.fresh).drive()
        except EngineDeposedError:
            log_stopped_driving(self, run.workflow_id)
            return None
        except TurnAborted as aborted:
            logger.info("turn of %s aborted: %s", run.workflow_id, aborted)
            return None

    @property
    def activity_executor(self) -> ActivityExecutor:
        """This engine's activity executor (started on first use)."""
        executor = self._activity_executor
        if executor is None:
            with self._executor_lock:
                if self._activity_executor is None:
                    self._activity_executor = ActivityExecutor.for_engine(
                        self.settings, self.metrics
                    )
                executor = self._activity_executor
        return executor

    # -- maintenance -------------------------------------------------------------------
    def run_maintenance(self) -> int:
        """One full pass; returns how many turns it found work for."""
        if not self.booted:
            self.boot()
        self.maintenance.renew()
        found = self.maintenance.find_and_dispatch()
        if not self.scheduler.background:
            self.scheduler.drain()
        return found

    def run_until_idle(self, timeout: float = 30.0) -> int:
        """Pass after pass until nothing is ready; returns the passes that found work."""
        deadline = time.monotonic() + timeout
        busy = 0
        while time.monotonic() < deadline:
            if self.run_maintenance() == 0:
                return busy
            busy += 1
        raise TimeoutError(f"engine {self.engine_id} still busy after {timeout} s")


__all__ = ["ActivityOutcome", "Engine", "new_engine_id"]
