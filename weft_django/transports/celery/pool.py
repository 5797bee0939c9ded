"""A pool process's state and engine: what the ``weft.drive`` / ``weft.pickup``
task bodies (``tasks``) run on.

A pool process (a prefork child, or a worker thread) shares nothing with
the node's main process across the fork: it builds its own engine per
thread (``pool_engine()``: the node's engine id, never renewing, never
polling) and, before each turn, adopts from the database the claim the
message names. The node renews what the pool claims; after each task the
pool engine forgets its claims and adds its counters to the node's
``EngineRecord`` (``end_task``).

The pool engines of one process share ONE workflow cache (``PoolState.cache``):
with the threads pool, a run's next turn runs on whichever thread is free,
and it must still find the replay its last turn parked. Sharing is safe
because an entry is valid only for the claim epoch and run version it was
parked at, and ``take`` hands it to one turn only (``engine.workflow_cache``).
A prefork node has one engine per process, and Celery hands each message to
any free process: a turn that lands on another process than the last one is
a miss, i.e. a full replay -- the same result.

This process's mutable state is one ``PoolState`` object, reset after a fork.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from weft_django.engine import Engine
from weft_django.engine.db_connections import mark_engine_thread
from weft_django.engine.records import add_counters
from weft_django.kernel.vocab import WakeKind, WakeTransport
from weft_django.ownership.metrics import ClaimMetricsSnapshot
from weft_django.transports.celery.identity import identity
from weft_django.transports.celery.scheduling import MessageScheduler, build_engine
from weft_django.transports.celery.turn_marks import (
    DrivingRuns,
    clear_leftover_marks,
    drop_child_mark,
    leave_turn,
)

if TYPE_CHECKING:
    from weft_django.engine.replay.cache import WorkflowCache

logger = logging.getLogger("weft_django.transports.celery")


@dataclass
class PoolState:
    """Everything a pool process keeps between tasks (one object, reset after a fork)."""

    #: One engine per thread (an engine's turn state is not thread-safe).
    local: threading.local = field(default_factory=threading.local)
    #: The runs this process drives now (the main process reads it too: threads pool).
    driving: DrivingRuns = field(default_factory=DrivingRuns)
    #: A turn mark could not be cleared: clear leftovers before the next task.
    marks_dirty: bool = False
    #: The workflow cache of every pool engine of this process (the first one's).
    cache: WorkflowCache | None = None
    cache_lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        self.local = threading.local()
        self.driving.clear()
        self.marks_dirty = False
        self.cache = None

    def shared_cache(self, own: WorkflowCache | None) -> WorkflowCache | None:
        """This process's pool cache: the first engine's ``own`` cache becomes it."""
        with self.cache_lock:
            if self.cache is None:
                self.cache = own
            return self.cache


state = PoolState()
"""This process's pool state."""


class PoolScheduler(MessageScheduler):
    """A pool engine's scheduler: a turn that started a child hands it to the node."""

    def dispatch_turn(
        self, run_id: str, wake_kind: WakeKind | None, transport: WakeTransport = "local"
    ) -> None:
        if str(run_id) not in state.driving:
            drop_child_mark(self.engine.settings.database, run_id)
        super().dispatch_turn(run_id, wake_kind, transport)


class PoolEngine(Engine):
    """A pool process's engine (one per thread): its workflow cache is the process's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.workflow_cache = state.shared_cache(self.workflow_cache)


def pool_engine() -> Engine:
    """This thread's pool engine (same engine id as the node; never renews)."""
    ident = identity()
    assert ident is not None
    engine: Engine | None = getattr(state.local, "engine", None)
    if engine is None or engine.engine_id != ident.engine_id:
        engine = build_engine(ident, PoolScheduler(ident), PoolEngine)
        state.local.engine = engine
    return engine


def reset_after_fork() -> None:
    """A prefork child: forget the parent's pool state, build this process's engine."""
    if identity() is None:
        return
    state.reset()
    pool_engine()


def begin_task(engine: Engine) -> None:
    # A pool process drives turns: bound its sessions' idle transactions
    # (``engine.db_connections``). Not the test or web process's own threads.
    mark_engine_thread(engine.settings.claim_ttl_ms)
    if state.marks_dirty and clear_leftover_marks(engine, state.driving):
        state.marks_dirty = False


def end_task(engine: Engine) -> None:
    registry = engine.registry
    if registry is not None:
        for wid in registry.tracked():
            registry.forget(wid)  # the node renews; the next message adopts afresh
    engine.parked_commands.clear()
    delta = engine.metrics.snapshot() - ClaimMetricsSnapshot()  # the counters, no gauge
    if delta.is_zero():
        return
    try:
        add_counters(engine.settings.database, engine.engine_id, delta)
    except Exception:
        logger.warning("could not add pool counters to engine %s", engine.engine_id, exc_info=True)
        return
    engine.metrics.reset()


def leave_run(engine: Engine, run_id: str) -> None:
    if not leave_turn(engine, run_id, state.driving):
        state.marks_dirty = True


__all__ = [
    "PoolEngine",
    "PoolScheduler",
    "PoolState",
    "begin_task",
    "end_task",
    "leave_run",
    "pool_engine",
    "reset_after_fork",
    "state",
]
