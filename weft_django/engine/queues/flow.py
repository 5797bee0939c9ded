"""Queues with fenced flow control: a start's queue fields, the gate of a
queued run's turn, re-admission after a takeover, and what a waiting run
waits for. Admission itself is the maintenance pass's
(``engine.maintenance.admission``).

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
from typing import Any

from django.db import transaction
from django.db.models import F

from weft_django.conf import get_settings
from weft_django.engine.host import TurnHost
from weft_django.errors import EngineDeposedError
from weft_django.kernel.clock import now_ms as clock_now_ms
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueSlot, WorkflowRun
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.ops import Insert, RunCondition, Update, Write
from weft_django.ownership.slots import key_rate_usage, lock_queue, usage

logger = logging.getLogger("weft_django.engine")


#: How long a taken-over run waits before asking again for a slot of a full queue.
READMIT_RETRY_MS = 1000


def slot_cache(engine: Any) -> dict[str, int]:
    """workflow id → the epoch this engine admitted it at (a slot it knows is live)."""
    cache: dict[str, int] | None = getattr(engine, "_weft_queue_slots", None)
    if cache is None:
        cache = {}
        engine._weft_queue_slots = cache
    return cache


def room_left(spec: QueueSpec, total: int, recent: int, limit: int, *, rate: bool) -> int:
    room = limit
    if spec.concurrency is not None:
        room = min(room, spec.concurrency - total)
    if rate and spec.rate is not None:
        room = min(room, spec.rate[0] - recent)
    return room


def key_has_room(
    spec: QueueSpec, per_key: dict[str, int], key_recent: dict[str, int], key: str
) -> bool:
    """May one more run of ``key`` be admitted: under ``per_key_concurrency``
    (live slots) and ``per_key_rate`` (admissions in its window)?"""
    if spec.per_key_concurrency is not None and per_key.get(key, 0) >= spec.per_key_concurrency:
        return False
    return spec.per_key_rate is None or key_recent.get(key, 0) < spec.per_key_rate[0]


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
    cache = slot_cache(engine)
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
        room = room_left(spec, total, 0, 1, rate=False) > 0 and (
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
        room = room_left(spec, total, 0, 1, rate=False) > 0 and (
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
                slot_cache(engine)[run.workflow_id] = epoch
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
    if key is not None and spec.per_key_rate is not None:
        admitted = key_rate_usage(spec, settings.database, now).get(key, 0)
        if admitted >= spec.per_key_rate[0]:
            return (
                f"waiting for the rate limit of concurrency key {key!r} in queue {name!r} "
                f"({spec.per_key_rate_text}: {admitted} admitted)"
            )
    if spec.rate is not None and recent >= spec.rate[0]:
        return f"waiting for the rate limit of queue {name!r} ({spec.rate_text}: {recent} admitted)"
    return f"waiting in queue {name!r} for an engine to admit it (priority {run.priority})"


__all__ = [
    "READMIT_RETRY_MS",
    "gate",
    "key_has_room",
    "room_left",
    "slot_cache",
    "waiting_reason",
]
