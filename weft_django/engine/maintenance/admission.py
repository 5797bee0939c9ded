"""Admission: the pending runs of declared queues taken into their slots.

Invariant: a queued run becomes ``running`` only in the ONE fenced batch that
also writes its claim's acquire and its ``QueueSlot`` at the acquire's new
epoch, taken under the queue's lock after counting the live slots, the slots
per ``concurrency_key`` and the admissions inside the rate windows (the
queue's and each key's) -- so no
engine admits past a limit, and a deposed admitter's batch writes nothing.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from django.db import DatabaseError, transaction

from weft_django import db as store
from weft_django.engine.handoff import Handoff, as_committed
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance.pickup import announce_started, pending_due, pickup_parts
from weft_django.engine.queues.fair import fair_ids
from weft_django.engine.queues.flow import key_has_room, room_left, slot_cache
from weft_django.engine.queues.serving import served_specs
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueSlot, WorkflowRun
from weft_django.ownership.batch import is_retryable
from weft_django.ownership.fold import ClaimFold, commit_with_claim_fold
from weft_django.ownership.ops import Condition, Insert, Update, Write
from weft_django.ownership.slots import forget_old, key_rate_usage, lock_queue, usage
from weft_django.ownership.transitions import ClaimSnapshot

logger = logging.getLogger("weft_django.engine")

#: The share of admissions that also sweep the queue's dead slots (``slots.forget_old``).
SWEEP_CHANCE = 0.2


def admit_pending(engine: TurnHost, limit: int) -> list[Handoff]:
    """Admit pending runs of every declared queue, up to ``limit`` in all."""
    queues = served_specs(engine, engine.settings.queues)
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
        key_recent = key_rate_usage(spec, db, now)
        room = room_left(spec, total, recent, limit, rate=True)
        if room <= 0:
            return []
        candidates = pending_due(engine, queued=True).filter(queue=spec.name)
        candidates = candidates.order_by("-priority", "created_at")
        extra = 50 if spec.per_key_concurrency is not None or spec.per_key_rate else 0
        fair = (
            fair_ids(spec, candidates, db, now, room + min(extra, 10), per_key, key_recent)
            if spec.fair
            else None
        )
        if vendor.supports_skip_locked:
            # Claims before runs (docs/reference/lock-order.md): the
            # candidates read unlocked, their claims ensured and locked
            # without waiting for a held row, then their runs the same way.
            if fair is not None:
                ids = fair
            else:
                ids = list(candidates.values_list("workflow_id", flat=True)[: room + extra])
            if not ids:
                return []
            rows = vendor.lock_claims_skip_locked(db, ids)
            snapshots = {w: ClaimSnapshot(w, *row) for w, row in rows.items()}
            held = candidates.filter(workflow_id__in=list(rows))
            runs = list(held.select_for_update(skip_locked=True)[: room + extra])
        elif fair is not None:
            runs = list(candidates.filter(workflow_id__in=fair))
            snapshots = {r.workflow_id: registry.read(r.workflow_id) for r in runs}
        else:
            runs = list(candidates[: room + extra])
            snapshots = {r.workflow_id: registry.read(r.workflow_id) for r in runs}
        if fair is not None:
            order = {w: n for n, w in enumerate(fair)}
            runs.sort(key=lambda r: order.get(r.workflow_id, len(order)))
        if not runs:
            return []
        conditions: list[Condition] = []
        writes: list[Write] = []
        folds: list[ClaimFold] = []
        for run in runs:
            if len(picked) >= room:
                break
            key = run.concurrency_key
            if key is not None and not key_has_room(spec, per_key, key_recent, key):
                continue
            snapshot = snapshots.get(run.workflow_id)
            if snapshot is None or not snapshot.holder_absent:
                continue  # locked elsewhere, or a holder still there: a later pass
            if registry.current_epoch(run.workflow_id) is not None:
                continue
            run_conditions, run_writes = pickup_parts(engine, run)
            counts_for_rate = run.started_at is None
            fold = registry.prepare_acquire(run.workflow_id, snapshot)
            holder = fold.transition.holder
            slot = QueueSlot(
                queue=spec.name,
                workflow_id=run.workflow_id,
                epoch=fold.transition.epoch,
                run_id=run.pk,
                concurrency_key=key,
                fairness_key=run.fairness_key,
                # The acquire's own instant (its ClaimEvent's), never before the
                # rate check's ``now``: later admitters count the slot at least
                # that long, so no window of the rate holds more than R stamps.
                admitted_at=holder.claimed_at if holder is not None else now,
                counts_for_rate=counts_for_rate,
            )
            conditions += run_conditions
            writes += [*run_writes, Insert(slot)]
            folds.append(fold)
            values = next(w.values for w in run_writes if isinstance(w, Update))
            picked.append((run, values, fold))
            if key is not None:
                per_key[key] = per_key.get(key, 0) + 1
                if counts_for_rate:
                    key_recent[key] = key_recent.get(key, 0) + 1
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
    cache = slot_cache(engine)
    out = []
    for run, values, fold in picked:
        cache[run.workflow_id] = fold.transition.epoch
        fresh = "started_at" in values
        committed = as_committed(run, values)
        announce_started(committed)
        out.append(Handoff(committed, fresh=fresh))
    return out


__all__ = ["admit_pending"]
