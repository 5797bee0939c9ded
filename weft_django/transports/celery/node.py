"""The node's main process: one engine per boot, which never drives a turn.

Its maintenance (renewal of every claim carrying the node's engine id,
reclaim scan, timers, pending pickup, stranded-turn re-drive, heartbeat)
runs on threads; every turn it finds is a ``weft.drive`` message to the
node's own direct queue (``CeleryNodeScheduler``), driven by a pool process.
Warm shutdown (after the pool drained) releases every claim.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import connections

from weft_django.engine import Engine
from weft_django.engine.records import add_counters
from weft_django.models import WorkflowRun
from weft_django.ownership.metrics import ClaimMetricsSnapshot
from weft_django.transports.celery.identity import NodeIdentity, identity
from weft_django.transports.celery.pool import state as pool_state
from weft_django.transports.celery.redrive import RedriveBackoff
from weft_django.transports.celery.room import node_room
from weft_django.transports.celery.scheduling import MessageScheduler, build_engine
from weft_django.transports.celery.timers import dispatch_timers
from weft_django.transports.celery.turn_marks import find_stranded, pool_pids
from weft_django.transports.celery.wake_report import leftovers

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from weft_django.kernel.vocab import WakeKind

logger = logging.getLogger("weft_django.transports.celery")


class CeleryNodeScheduler(MessageScheduler):
    """The main process's scheduler: found turns, due timers and stranded runs
    all become messages to this node's queue."""

    via: ClassVar[str] = "polling"

    def __init__(self, ident: NodeIdentity, worker: Any) -> None:
        super().__init__(ident)
        self.worker = worker
        self.redrives: RedriveBackoff | None = None

    def pickup_capacity(self, most: int) -> int:
        """Room for twice the pool's processes, less the turns this node owes.

        A claimed run waits for a pool process; a node that claims faster
        than its pool drives (a burst, a loaded machine) holds runs other
        engines could drive, renews their claims, and queues their wakes
        behind each other -- the chaos soak saw a two-process node hold 250
        runs with its wakes a minute late while standalone engines idled.
        The turns it owes are its claimed runs that need one now
        (``querysets.owes_turn_q``: running, or parked with a wake or a due
        timer), queued or under way; one count per pass.
        """
        engine = self.engine
        ident = self.identity
        return node_room(
            engine.settings.database, ident.engine_id, ident.concurrency, engine.now_ms(), most
        )

    def reclaim_capacity(self, most: int) -> int:
        """The node claims a taken-over run at once and drives it later (its
        turn waits in the node's queue), so a run that needs a turn is taken
        only into the room a pickup would have: a backlogged node that kept
        taking over left cancelled runs' cleanups a minute behind its queue
        until their grace ran out, while standalone engines could have run
        them (the chaos soak)."""
        return self.pickup_capacity(most)

    def admit_redrive(self, run_id: str, epoch: int, wake_kind: WakeKind | None) -> bool:
        """Polling re-drives of one run and generation, spaced out (``redrive``)."""
        if self.redrives is None:
            self.redrives = RedriveBackoff(self.engine.settings.claim_renew_interval_ms)
        return self.redrives.admit((run_id, epoch, wake_kind or ""), self.engine.now_ms())

    def dispatch_timers(self, owned: QuerySet[WorkflowRun], now_ms: int) -> Iterable[str] | None:
        return dispatch_timers(
            self.engine,
            owned,
            now_ms,
            node_name=self.identity.node_name,
            found_by_polling=True,
        )

    def find_stranded(self, owned: QuerySet[WorkflowRun], now_ms: int) -> Iterable[Any] | None:
        """``running`` runs whose turn is nobody's: re-drive them."""
        return find_stranded(
            owned,
            now_ms,
            using=self.engine.settings.database,
            interval_ms=self.engine.settings.claim_renew_interval_ms,
            ident=self.identity,
            driving=pool_state.driving,
            pool=pool_pids(self.worker),
        )


class NodeEngine(Engine):
    """The node's engine: its heartbeat adds its counters to the record, never
    overwrites them (pool processes add theirs too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: What the last heartbeat added (the next one adds only what is new).
        self._flushed = ClaimMetricsSnapshot()

    def heartbeat(self) -> None:
        snapshot = self.metrics.snapshot()
        add_counters(
            self.settings.database,
            self.engine_id,
            snapshot - self._flushed,
            active_claims=snapshot.active_claims,
            heartbeat_at=self.now_ms(),
        )
        self._flushed = snapshot


class NodeRuntime:
    """The main process of one node boot."""

    def __init__(self, ident: NodeIdentity, worker: Any) -> None:
        self.identity = ident
        self.worker = worker
        self.scheduler = CeleryNodeScheduler(ident, worker)
        self.engine = build_engine(ident, self.scheduler, NodeEngine)

    def start(self) -> None:
        engine = self.engine
        try:
            if engine.settings.background_tasks == "manual":
                engine.boot()  # the host calls engine.run_maintenance()
            else:
                engine.start()
        finally:
            # Pool processes are forked from this (main) thread later on
            # (replacements): it must hold no database connection then.
            connections.close_all()
        logger.info(
            "weft node %s: engine %s (pool %s) started",
            self.identity.node_name,
            engine.engine_id,
            self.identity.pool,
        )

    def shutdown(self) -> None:
        engine = self.engine
        if engine.registry is not None and engine.booted:
            # Adopt what pool processes claimed since the last pass, then release all.
            with contextlib.suppress(Exception):
                engine.registry.renew_all()
        engine.dispose(grace=2.0)


class _Running:
    """This process's node runtime (main process only; a forked child drops it)."""

    current: NodeRuntime | None = None


running = _Running()


def start_node(worker: Any) -> None:
    """Bootstep start, main process: boot the node's engine and its threads."""
    ident = identity()
    if ident is None or running.current is not None:
        return
    running.current = NodeRuntime(ident, worker)
    running.current.start()


def shutdown_node() -> None:
    """Warm shutdown (after the pool drained) or cold: release every claim."""
    node, running.current = running.current, None
    if node is not None:
        node.shutdown()
        leftovers.forget(node.identity)


def forget_after_fork() -> None:
    """A prefork child: the parent's engine, threads and connections are not ours."""
    running.current = None


__all__ = [
    "CeleryNodeScheduler",
    "NodeEngine",
    "NodeRuntime",
    "forget_after_fork",
    "shutdown_node",
    "start_node",
]
