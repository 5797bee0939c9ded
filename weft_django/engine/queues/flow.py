"""Queues with fenced flow control: admission of pending runs (issue #16).

Design. A run started with a ``queue`` (``client.start(queue=...)`` or
``@workflow(queue=...)``) is left out of the ordinary pickup
(``pickup.pending_due``) and admitted here instead, one queue at a time, in
ONE transaction:

1. lock the queue's ``QueueLock`` row (``ownership.slots.lock_queue``): the
   first lock, so admitters of one queue take turns and see each other's
   commits (PostgreSQL ``FOR UPDATE``; SQLite: one writer at a time);
2. count the live slots, the live slots per ``concurrency_key`` and the
   admissions inside the rate window (``ownership.slots.usage``);
3. take up to the room left of the queue's pending runs, highest
   ``priority`` first and FIFO within one (``SKIP LOCKED`` on PostgreSQL,
   so another engine's ordinary pickup never waits), skipping a run whose
   key is at ``per_key_concurrency``;
4. commit each pending → running write, each claim acquire and each
   ``QueueSlot`` at the acquire's new epoch as ONE fenced batch
   (``ownership.fold.commit_with_claim_fold`` → ``conditional_batch``).

The slot is the claim generation's (``ownership.slots``): whatever ends the
generation frees it in that commit. A run taken over after its engine died
comes to ``gate`` (every turn of a queued run passes it, from
``Engine.drive``) with a new epoch and no slot: the gate admits it again
under the same lock and count (no rate: it is no new start), or, when the
queue is full, backs the turn off by a second (a fenced write of
``turn_retry_at``) and tries again -- it is never driven without a slot.
Runs without a queue never reach this module: no statement is added to
their path.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import F

from weft_django import db as store
from weft_django.conf import get_settings
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance.pickup import announce_started, pending_due, pickup_parts
from weft_django.engine.turn.handoff import Handoff, as_committed
from weft_django.errors import EngineDeposedError
from weft_django.kernel.clock import now_ms as clock_now_ms
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueSlot, WorkflowRun
from weft_django.ownership.batch import Insert, RunCondition, Update, is_retryable
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.fold import ClaimFold, commit_with_claim_fold
from weft_django.ownership.ops import Condition, Write
from weft_django.ownership.slots import forget_old, lock_queue, usage
from weft_django.ownership.transitions import ClaimSnapshot

logger = logging.getLogger("weft_django.engine")

#: The share of admissions that also sweep the queue's dead slots (``slots.forget_old``).
SWEEP_CHANCE = 0.2

#: How long a taken-over run waits before asking again for a slot of a full queue.
READMIT_RETRY_MS = 1000


def _slot_cache(engine: Any) -> dict[str, int]:
    """workflow id → the epoch this engine admitted it at (a slot it knows is live)."""
    cache: dict[str, int] | None = getattr(engine, "_weft_queue_slots", None)
    if cache is None:
        cache = {}
        engine._weft_queue_slots = cache
    return cache


def _room(spec: QueueSpec, total: int, recent: int, limit: int, *, rate: bool) -> int:
    room = limit
    if spec.concurrency is not None:
        room = min(room, spec.concurrency - total)
    if rate and spec.rate is not None:
        room = min(room, spec.rate[0] - recent)
    return room


def admit_pending(engine: TurnHost, limit: int) -> list[Handoff]:
    """Admit pending runs of every declared queue, up to ``limit`` in all."""
    queues = engine.settings.queues
    if not queues or engine.registry is None or limit <= 0:
        return []
    db = engine.settings.database
    waiting = list(
        pending_due(engine, queued=True)
        .filter(queue__in=list(queues))
        .order_by()
        .values_list("queue", flat=True)
        .distinct()
    )
    random.shuffle(waiting)  # engines admitting together start on different queues
    out: list[Handoff] = []
    for name in waiting:
        if len(out) >= limit:
            break
        try:
            out += _admit_queue(engine, queues[name], limit - len(out), db)
        except DatabaseError as exc:
            if not is_retryable(exc):
                raise
            logger.info("queue %s admission lost a lock race; the next pass retries", name)
    return out


def _admit_queue(engine: TurnHost, spec: QueueSpec, limit: int, db: str) -> list[Handoff]:
    registry = engine.registry
    assert registry is not None
    vendor = store.ops(db)
    picked: list[tuple[WorkflowRun, dict[str, Any], ClaimFold]] = []
    with transaction.atomic(using=db):
        lock_queue(spec.name, db)
        # Read after the lock: the wait for it may be long (a holder paused
        # mid-admission), and a slot stamped with the time before the wait
        # leaves the others' rate windows that much early.
        now = engine.now_ms()
        total, per_key, recent = usage(spec, db, now)
        room = _room(spec, total, recent, limit, rate=True)
        if room <= 0:
            return []
        candidates = pending_due(engine, queued=True).filter(queue=spec.name)
        candidates = candidates.order_by("-priority", "created_at")
        extra = 50 if spec.per_key_concurrency is not None else 0
        if vendor.supports_skip_locked:
            # Claims before runs (docs/reference/lock-order.md): the
            # candidates read unlocked, their claims ensured and locked
            # without waiting for a held row, then their runs the same way.
            ids = list(candidates.values_list("workflow_id", flat=True)[: room + extra])
            if not ids:
                return []
            rows = vendor.lock_claims_skip_locked(db, ids)
            snapshots = {w: ClaimSnapshot(w, *row) for w, row in rows.items()}
            held = candidates.filter(workflow_id__in=list(rows))
            runs = list(held.select_for_update(skip_locked=True)[: room + extra])
        else:
            runs = list(candidates[: room + extra])
            snapshots = {r.workflow_id: registry.read(r.workflow_id) for r in runs}
        if not runs:
            return []
        conditions: list[Condition] = []
        writes: list[Write] = []
        folds: list[ClaimFold] = []
        for run in runs:
            if len(picked) >= room:
                break
            key = run.concurrency_key
            if (
                key is not None
                and spec.per_key_concurrency is not None
                and per_key.get(key, 0) >= spec.per_key_concurrency
            ):
                continue
            snapshot = snapshots.get(run.workflow_id)
            if snapshot is None or not snapshot.holder_absent:
                continue  # locked elsewhere, or a holder still there: a later pass
            if registry.current_epoch(run.workflow_id) is not None:
                continue
            run_conditions, run_writes = pickup_parts(engine, run)
            fold = registry.prepare_acquire(run.workflow_id, snapshot)
            holder = fold.transition.holder
            slot = QueueSlot(
                queue=spec.name,
                workflow_id=run.workflow_id,
                epoch=fold.transition.epoch,
                run_id=run.pk,
                concurrency_key=key,
                # The acquire's own instant (its ClaimEvent's), never before the
                # rate check's ``now``: later admitters count the slot at least
                # that long, so no window of the rate holds more than R stamps.
                admitted_at=holder.claimed_at if holder is not None else now,
                counts_for_rate=run.started_at is None,
            )
            conditions += run_conditions
            writes += [*run_writes, Insert(slot)]
            folds.append(fold)
            values = next(w.values for w in run_writes if isinstance(w, Update))
            picked.append((run, values, fold))
            if key is not None:
                per_key[key] = per_key.get(key, 0) + 1
        if not picked:
            return []
        if random.random() < SWEEP_CHANCE:
            forget_old(spec, db, now)
        result = commit_with_claim_fold(
            engine, folds, conditions, writes, savepoint=False, track=False
        )
        if not result.committed:
            return []
    # Committed: only now does renewal see these claims (``fence.commit_with_folds``).
    for _, _, fold in picked:
        registry.record_folded_acquire(fold)
    cache = _slot_cache(engine)
    out = []
    for run, values, fold in picked:
        cache[run.workflow_id] = fold.transition.epoch
        fresh = "started_at" in values
        committed = as_committed(run, values)
        announce_started(committed)
        out.append(Handoff(committed, fresh=fresh))
    return out


def gate(engine: TurnHost, run: WorkflowRun) -> bool:
    """May this engine drive ``run`` (a run with a queue) now? See the module doc."""
    spec = engine.settings.queues.get(run.queue or "")
    registry = engine.registry
    if spec is None or registry is None:
        return True  # a queue no longer declared limits nothing
    epoch = registry.current_epoch(run.workflow_id)
    if epoch is None:
        return True  # not held here: the turn's own fence refuses it
    db = engine.settings.database
    if not spec.parked_holds_slot and run.status == "parked":
        try:
            return _wake_parked(engine, spec, run, epoch, db)
        except EngineDeposedError:
            return False
    cache = _slot_cache(engine)
    if cache.get(run.workflow_id) == epoch:
        return True
    mine = QueueSlot.objects.using(db).filter(
        workflow_id=run.workflow_id, epoch=epoch, position__isnull=True, released=False
    )
    if mine.exists():
        cache[run.workflow_id] = epoch
        return True
    try:
        return _readmit(engine, spec, run, epoch, db)
    except EngineDeposedError:
        return False


def _wake_parked(engine: TurnHost, spec: QueueSpec, run: WorkflowRun, epoch: int, db: str) -> bool:
    """``parked_holds_slot=False``: a parked run holds no slot, so its wake must
    find one before its turn runs. Under the queue lock: when there is room,
    parked → running in one fenced batch (with a slot row at this generation
    if it has none), so the count sees it before the body runs; else the turn
    backs off like a full queue's readmission."""
    with transaction.atomic(using=db):
        lock_queue(spec.name, db)
        now = engine.now_ms()  # after the lock (see ``_admit_queue``)
        total, per_key, _ = usage(spec, db, now)
        key = run.concurrency_key
        room = _room(spec, total, 0, 1, rate=False) > 0 and (
            key is None
            or spec.per_key_concurrency is None
            or per_key.get(key, 0) < spec.per_key_concurrency
        )
        if not room:
            backoff = {"turn_retry_at": now + READMIT_RETRY_MS, "version": F("version") + 1}
            fenced_commit(
                engine, run.workflow_id, [], [Update(WorkflowRun, {"pk": run.pk}, backoff)]
            )
            return False
        writes: list[Write] = [
            Update(
                WorkflowRun,
                {"pk": run.pk},
                {"status": "running", "version": F("version") + 1, "turn_started_at": now},
            )
        ]
        mine = QueueSlot.objects.using(db).filter(
            workflow_id=run.workflow_id, epoch=epoch, position__isnull=True, released=False
        )
        if not mine.exists():
            writes.append(
                Insert(
                    QueueSlot(
                        queue=spec.name,
                        workflow_id=run.workflow_id,
                        epoch=epoch,
                        run_id=run.pk,
                        concurrency_key=key,
                        admitted_at=now,
                        counts_for_rate=False,
                    )
                )
            )
        parked = RunCondition(run.pk, statuses=frozenset({"parked"}), version=run.version)
        if not fenced_commit(engine, run.workflow_id, [parked], writes).committed:
            return False
    run.status = "running"
    run.version += 1
    run.turn_started_at = now
    return True


def _readmit(engine: TurnHost, spec: QueueSpec, run: WorkflowRun, epoch: int, db: str) -> bool:
    with transaction.atomic(using=db):
        lock_queue(spec.name, db)
        now = engine.now_ms()  # after the lock (see ``_admit_queue``)
        total, per_key, _ = usage(spec, db, now)
        key = run.concurrency_key
        room = _room(spec, total, 0, 1, rate=False) > 0 and (
            key is None
            or spec.per_key_concurrency is None
            or per_key.get(key, 0) < spec.per_key_concurrency
        )
        if room:
            slot = QueueSlot(
                queue=spec.name,
                workflow_id=run.workflow_id,
                epoch=epoch,
                run_id=run.pk,
                concurrency_key=key,
                admitted_at=now,
                counts_for_rate=False,
            )
            if fenced_commit(engine, run.workflow_id, [], [Insert(slot)]).committed:
                _slot_cache(engine)[run.workflow_id] = epoch
                return True
            return False
        backoff = {"turn_retry_at": now + READMIT_RETRY_MS, "version": F("version") + 1}
        fenced_commit(engine, run.workflow_id, [], [Update(WorkflowRun, {"pk": run.pk}, backoff)])
    logger.info("queue %s is full: %s waits for a slot again", spec.name, run.workflow_id)
    return False


def waiting_reason(run: WorkflowRun, *, now_ms: int | None = None) -> str | None:
    """Why a pending run of a queue is not running yet (admin, API); ``None``:
    it is not waiting for its queue (a few counting reads, never on a hot path)."""
    settings = get_settings()
    if run.queue is None or run.status != "pending":
        return None
    spec = settings.queues.get(run.queue)
    if spec is None:
        return None
    now = clock_now_ms() if now_ms is None else now_ms
    if run.start_at is not None and run.start_at > now:
        return None  # a delayed start: not the queue's doing
    total, per_key, recent = usage(spec, settings.database, now)
    name = spec.name
    if spec.concurrency is not None and total >= spec.concurrency:
        return f"waiting for a slot of queue {name!r} ({total}/{spec.concurrency} in use)"
    key = run.concurrency_key
    if key is not None and spec.per_key_concurrency is not None:
        used = per_key.get(key, 0)
        if used >= spec.per_key_concurrency:
            return (
                f"waiting for a slot of concurrency key {key!r} in queue {name!r} "
                f"({used}/{spec.per_key_concurrency} in use)"
            )
    if spec.rate is not None and recent >= spec.rate[0]:
        return f"waiting for the rate limit of queue {name!r} ({spec.rate_text}: {recent} admitted)"
    return f"waiting in queue {name!r} for an engine to admit it (priority {run.priority})"


__all__ = [
    "READMIT_RETRY_MS",
    "admit_pending",
    "gate",
    "waiting_reason",
]
