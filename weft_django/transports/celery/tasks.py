"""The ``weft.drive`` and ``weft.pickup`` task bodies (registered in ``install``).

A drive message names a run, an engine id and an epoch: the body adopts the
claim through the wake guard, which discards the wake unless the holder row
carries this node's engine id at exactly that epoch, then takes the run's turn
mark and drives one turn. A pickup claims a pending run (or, for a declared
queue, admits what the queue has room for) and drives it. Each wake is counted
once (``proceed`` or ``discard``); a busy run's message comes back a bounded
number of times, then polling takes over. Each task begins and ends with the
pool's bookkeeping (``pool.begin_task`` / ``pool.end_task``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db.models import Min

from weft_django.engine import Engine
from weft_django.engine.maintenance.admission import admit_pending
from weft_django.engine.turn.failures import record_turn_failure
from weft_django.kernel.clock import wall_ms
from weft_django.kernel.vocab import WAKE_KINDS, WakeKind, WakeTransport
from weft_django.models import Timer, WorkflowRun
from weft_django.ownership.guard import decide_wake, record_wake
from weft_django.transports.celery.identity import NodeIdentity, identity
from weft_django.transports.celery.messages import DriveMessage, send_drive
from weft_django.transports.celery.pool import begin_task, end_task, leave_run, pool_engine, state
from weft_django.transports.celery.room import node_room, reoffer_pickup
from weft_django.transports.celery.timers import after_turn
from weft_django.transports.celery.turn_marks import restamp_pickup, take_turn
from weft_django.transports.celery.wake_report import (
    TaskOutcome,
    is_previous_boot,
    leftovers,
    outcome_of,
)

logger = logging.getLogger("weft_django.transports.celery")

#: A run whose turn mark is busy: the message comes back after this long ...
BUSY_RETRY_MS = 200
#: ... at most this many times (then polling takes over).
BUSY_RETRIES = 50
#: An ``eta`` that fires a little early waits for its timer instead of being discarded.
EARLY_TIMER_MS = 2_000


def _wait_until_due(due_ms: int, now_ms: int) -> None:
    # Sleep, not a wait-for: the condition is the clock reaching ``due_ms``,
    # nothing else to observe. Bounded by EARLY_TIMER_MS; re-sending the
    # message instead would cost a broker round trip and a second guard pass.
    time.sleep((due_ms - now_ms) / 1000 + 0.002)


def _runnable(engine: Engine, run_id: str) -> bool:
    """Is there anything for a turn to do? (Else the wake was a duplicate.)"""
    db = engine.settings.database
    row = (
        WorkflowRun.objects.using(db)
        .filter(pk=run_id)
        .values_list("status", "wake_seq", "parked_seq")
        .first()
    )
    if row is None:
        return False
    status, wake_seq, parked_seq = row
    if status == "running":
        return True
    if status != "parked":
        return False
    if wake_seq > parked_seq:
        return True
    first = Timer.objects.using(db).filter(run__pk=run_id).aggregate(first=Min("fire_at"))["first"]
    if first is None:
        return False
    now = engine.now_ms()
    if first <= now:
        return True
    if first - now <= EARLY_TIMER_MS:  # an eta that fired a hair early
        _wait_until_due(first, now)
        return True
    return False


def _log_wake(
    decision: str, run_id: str, workflow_id: str, kind: str, via: str, due_ms: Any, reason: str
) -> None:
    latency = wall_ms() - int(due_ms) if isinstance(due_ms, int) else None
    logger.info(
        "weft wake %s run=%s workflow=%s kind=%s via=%s reason=%s latency_ms=%s",
        decision,
        run_id,
        workflow_id,
        kind,
        via,
        reason or "-",
        latency,
    )


def run_drive(
    run_id: str,
    wake_kind: str | None,
    engine_id: str,
    epoch: int,
    *,
    via: str = "celery",
    due_ms: int | None = None,
    attempt: int = 0,
    workflow_id: str = "",
    **_: Any,
) -> TaskOutcome:
    """The ``weft.drive`` task body (a pool process of the owning node).

    Returns the outcome with the run's workflow id (``wake_report``).
    """
    ident = identity()
    if ident is None:
        logger.error("weft.drive ran outside a weft Celery node; ignored")
        return TaskOutcome("no-node", workflow_id)
    engine = pool_engine()
    kind: WakeKind = wake_kind if wake_kind in WAKE_KINDS else "drive"  # type: ignore[assignment]
    channel: WakeTransport = "polling" if via == "polling" else "celery"
    if is_previous_boot(str(engine_id), ident):
        # Left in this node's direct queue by a previous boot: stale by
        # construction. Counted, summarised once per node, not warned per run.
        record_wake(engine, kind, "discard", channel)
        end_task(engine)
        leftovers.note(ident, str(engine_id), run_id, workflow_id)
        return TaskOutcome("leftover", workflow_id)
    begin_task(engine)
    try:
        outcome = outcome_of(
            _wake(engine, ident, str(run_id), kind, engine_id, int(epoch), channel, due_ms),
            workflow_id,
        )
    finally:
        end_task(engine)
    if outcome == "busy":
        if attempt < BUSY_RETRIES:
            send_drive(
                DriveMessage(
                    ident.node_name,
                    str(run_id),
                    wake_kind,
                    engine_id,
                    int(epoch),
                    via=via,
                    eta_ms=wall_ms() + BUSY_RETRY_MS,
                    attempt=attempt + 1,
                    due_ms=due_ms,
                    workflow_id=outcome.workflow_id,
                )
            )
        else:
            logger.info("run %s still busy after %s tries; polling takes over", run_id, attempt)
    return outcome


def _wake(
    engine: Engine,
    ident: NodeIdentity,
    run_id: str,
    kind: WakeKind,
    engine_id: str,
    epoch: int,
    channel: WakeTransport,
    due_ms: Any,
) -> TaskOutcome:
    """Guard (and adopt), take the turn mark, then drive one turn.

    The wake is counted once: ``discard`` when the guard or the duplicate
    check says so, ``proceed`` just before the turn; a busy or gone run is
    not counted (its message comes back, or there is nothing left to wake).
    """
    db = engine.settings.database
    row = WorkflowRun.objects.using(db).filter(pk=run_id).values_list("workflow_id").first()
    if row is None:
        return TaskOutcome("gone")
    wid = row[0]
    verdict = decide_wake(engine, wid, kind, epoch, expected_engine_id=engine_id, adopt=True)
    if verdict.decision == "discard":
        record_wake(engine, kind, "discard", channel)
        _log_wake("discarded", run_id, wid, kind, channel, due_ms, str(verdict.reason))
        return TaskOutcome("discarded", wid)
    holder = verdict.holder
    taken = take_turn(
        engine, run_id, holder.claimed_at if holder is not None else None, ident, state.driving
    )
    if taken != "ok":
        return TaskOutcome(taken, wid)
    try:
        if not _runnable(engine, run_id):
            # A second wake of a turn already taken (not a stale generation):
            # counted and traced, no ``WeftWorkflowWakeDiscardedWarning``.
            record_wake(engine, kind, "discard", channel)
            _log_wake("discarded", run_id, wid, kind, channel, due_ms, "duplicate")
            return TaskOutcome("duplicate", wid)
        record_wake(engine, kind, "proceed", channel)
        _log_wake("proceed", run_id, wid, kind, channel, due_ms, "")
        # The guard ran above (and adopted the claim): drive without a second one.
        try:
            left = engine.drive(run_id, None)
        except Exception as exc:
            record_turn_failure(engine, run_id, exc)  # the one runtime answer
            return TaskOutcome("turn-failed", wid)
        after_turn(engine, wid, node_name=ident.node_name)
        return TaskOutcome(left or "driven", wid)
    finally:
        leave_run(engine, run_id)


def run_pickup(
    run_id: str, *, due_ms: int | None = None, workflow_id: str = "", attempt: int = 0, **_: Any
) -> TaskOutcome:
    """The ``weft.pickup`` task body (any node): claim a pending run, drive it
    (``attempt``: how many times a node without room re-offered it)."""
    ident = identity()
    if ident is None:
        logger.error("weft.pickup ran outside a weft Celery node; ignored")
        return TaskOutcome("no-node", workflow_id)
    engine = pool_engine()
    db = engine.settings.database
    begin_task(engine)
    try:
        run = WorkflowRun.objects.using(db).filter(pk=run_id).first()
        if run is None or run.status != "pending":
            return TaskOutcome("not-pending", run.workflow_id if run is not None else workflow_id)
        wid = run.workflow_id
        now = engine.now_ms()
        if run.start_at is not None and run.start_at > now:
            if run.start_at - now > EARLY_TIMER_MS:
                return TaskOutcome("not-due", wid)
            _wait_until_due(run.start_at, now)
        if run.queue is not None and run.queue in engine.settings.queues:
            if engine.served_queues is not None and run.queue not in engine.served_queues:
                # Not one of this node's queues (a pickup sent before the node's
                # queues changed): a node serving it admits it.
                return TaskOutcome("not-served", wid)
            # A run of a declared queue is admitted with a slot, under the queue's
            # lock, count and rate (``engine.queues``), never picked up directly:
            # a direct pickup would be re-admitted at its first turn's gate, which
            # checks the concurrency but (a re-admission being no new start) not
            # the rate. Admit what the queue has room for, as the node's scan does.
            for handoff in admit_pending(engine, 1):
                engine.dispatch_handoff(handoff)
            return TaskOutcome("queued", wid)
        if node_room(db, ident.engine_id, ident.concurrency, now, 1) <= 0:
            # The node owes its pool more turns than it can drive soon: the
            # turns it owes go first; the run stays pending for an engine with
            # room, and comes back here shortly (``room.reoffer_pickup``).
            reoffer_pickup(
                run_id,
                wid,
                attempt=attempt,
                due_ms=due_ms,
                renew_interval_ms=engine.settings.claim_renew_interval_ms,
            )
            return TaskOutcome("no-room", wid)
        key = str(run.pk)
        if not state.driving.enter(key):
            return TaskOutcome("busy", wid)
        try:
            if not engine.maintenance.pick_up(run):
                return TaskOutcome("lost-race", wid)
            if not restamp_pickup(engine, run.pk):
                return TaskOutcome("busy", wid)
            _log_wake("pickup", key, run.workflow_id, "-", "celery", due_ms, "")
            try:
                left = engine.drive(run.pk, None)
            except Exception as exc:
                record_turn_failure(engine, run.pk, exc)  # the one runtime answer
                return TaskOutcome("turn-failed", wid)
            after_turn(engine, run.workflow_id, node_name=ident.node_name)
            return TaskOutcome(left or "driven", wid)
        finally:
            leave_run(engine, key)
    finally:
        end_task(engine)


__all__ = [
    "BUSY_RETRIES",
    "BUSY_RETRY_MS",
    "EARLY_TIMER_MS",
    "run_drive",
    "run_pickup",
]
