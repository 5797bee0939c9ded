"""Pickup: a pending run becomes running under this engine's claim (SPEC §4.6).

The invariant (``ownership.fold``): no run is ``running`` unless its claim
is held, in the same commit -- the claim's acquire folds into the batch that
writes pending → running, and the registry tracks the claim only once that
batch committed.

Why a batch: engines polling together read the same oldest pending runs and
raced for them one at a time, each lost race a rolled-back transaction (and
two engines did less than one). Where the database has ``SKIP LOCKED``,
``pick_up_batch`` ensures and locks the claim rows of up to ``limit`` due
pending runs that no other engine is taking, then locks those runs the same
way (claims before runs: docs/reference/lock-order.md), and commits every
pending → running write with every acquire as ONE conditional batch. No
lock waits for a row another engine holds, so concurrent engines take
disjoint runs instead of racing for the same one; the one wait left, a
claim row's ``INSERT … ON CONFLICT`` behind another transaction's insert of
that row, happens while this transaction holds no run. A run whose claim is
still held (a stale holder an earlier run of the workflow left, or this
engine's own) is not folded: it goes back to the one-at-a-time ``pick_up``,
which takes a stale holder over -- a lost race or a lost fence affects only
its own workflow. Elsewhere (SQLite) the one-at-a-time path is
the whole story.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.utils import timezone

from weft_django import db as store
from weft_django.engine import signals as weft_signals
from weft_django.engine.handoff import Handoff, as_committed
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance import BATCH
from weft_django.models import WorkflowRun
from weft_django.ownership.batch import is_retryable
from weft_django.ownership.fold import commit_enabling_write, commit_with_claim_fold
from weft_django.ownership.ops import Condition, RunCondition, Update, Write
from weft_django.ownership.results import AcquirePreparation
from weft_django.ownership.transitions import ClaimSnapshot

logger = logging.getLogger("weft_django.engine")


def pending_due(engine: TurnHost, *, queued: bool = False) -> Any:
    """The pending runs due now, highest ``priority`` first, then oldest first
    (``start_at`` in the past or none).

    The runs of a declared queue are admitted by ``engine.queues`` instead
    (``queued=True``: every pending run, for it to filter)."""
    now = engine.now_ms()
    due = (
        WorkflowRun.objects.using(engine.settings.database)
        .filter(status="pending")
        .filter(Q(start_at__isnull=True) | Q(start_at__lte=now))
        .order_by("-priority", "created_at")
    )
    if engine.settings.queues and not queued:
        due = due.exclude(queue__in=list(engine.settings.queues))
    return due


def pickup_parts(
    engine: TurnHost, run: WorkflowRun, *, now_ms: int | None = None, now: Any = None
) -> tuple[list[Condition], list[Write]]:
    """The pending → running condition and write of ``run`` (claim not included).

    ``now_ms`` / ``now``: the batch's one instant, so the runs of a batch
    pickup get equal values and their writes are one statement
    (``ownership.write_plan``)."""
    values: dict[str, Any] = {
        "status": "running",
        "version": F("version") + 1,
        "turn_started_at": engine.now_ms() if now_ms is None else now_ms,
        "turn_pid": os.getpid(),
    }
    if run.started_at is None:
        values["started_at"] = timezone.now() if now is None else now
    conditions: list[Condition] = [
        RunCondition(run.pk, statuses=frozenset({"pending"}), label="pending")
    ]
    writes: list[Write] = [Update(WorkflowRun, {"pk": run.pk}, values)]
    return conditions, writes


def announce_started(run: WorkflowRun) -> None:
    run.status = "running"
    weft_signals.workflow_started.send(sender=WorkflowRun, run=run)


@dataclass
class BatchPickup:
    """What one batch pickup did."""

    #: Committed pending → running with the claim held: drive them (each as
    #: the pickup committed it, for its first turn: ``handoffs``).
    picked: list[WorkflowRun] = field(default_factory=list)
    #: The ids of the picked runs that had never been picked up before.
    fresh: set[str] = field(default_factory=set)
    #: Not folded (a claim still held): for the one-at-a-time ``pick_up``.
    single: list[WorkflowRun] = field(default_factory=list)
    #: Locked pending runs this pass looked at (picked, single or skipped).
    seen: int = 0

    def handoffs(self) -> list[Handoff]:
        """Each picked run for its first turn (``engine.handoff``)."""
        return [Handoff(run, fresh=str(run.pk) in self.fresh) for run in self.picked]


def batch_applies(engine: TurnHost) -> bool:
    """``SKIP LOCKED`` on this database and per-workflow claims to fold."""
    return (
        engine.ownership == "workflow-lease"
        and engine.registry is not None
        and store.ops(engine.settings.database).supports_skip_locked
    )


def pick_up_batch(engine: TurnHost, limit: int) -> BatchPickup:
    """Claim up to ``limit`` pending runs in one transaction (see the module doc).

    Only when ``batch_applies(engine)``.
    """
    registry = engine.registry
    assert registry is not None
    db = engine.settings.database
    out = BatchPickup()
    committed_folds: list[AcquirePreparation] = []
    try:
        with transaction.atomic(using=db):
            # Claims first, then their runs (docs/reference/lock-order.md);
            # neither step waits for a row another transaction holds.
            ops, queues, due = store.ops(db), list(engine.settings.queues or ()), engine.now_ms()
            rows = ops.lock_pending_claims_skip_locked(db, due, queues, limit)
            if not rows:
                return out
            runs = ops.pending_runs_skip_locked(db, due, queues, limit, workflow_ids=list(rows))
            out.seen = len(runs)
            if not runs:
                return out
            conditions: list[Condition] = []
            writes: list[Write] = []
            folds = []
            batch: list[WorkflowRun] = []
            committed_values: list[dict[str, Any]] = []
            now_ms, now = engine.now_ms(), timezone.now()
            for run in runs:
                row = rows.get(run.workflow_id)
                if row is None:  # another transaction holds the claim row: a later pass
                    continue
                snapshot = ClaimSnapshot(run.workflow_id, *row)
                held = registry.current_epoch(run.workflow_id) is not None
                if held or not snapshot.holder_absent:
                    out.single.append(run)
                    continue
                run_conditions, run_writes = pickup_parts(engine, run, now_ms=now_ms, now=now)
                conditions += run_conditions
                writes += run_writes
                committed_values += [w.values for w in run_writes if isinstance(w, Update)]
                folds.append(registry.prepare_acquire(run.workflow_id, snapshot))
                batch.append(run)
            if batch:
                # This transaction is the batch's own: if the batch raises, it
                # rolls back as a whole, so no savepoint is set around the batch;
                # the claims are tracked once it committed (below).
                result = commit_with_claim_fold(
                    engine, folds, conditions, writes, savepoint=False, track=False
                )
                if result.committed:
                    committed_folds = folds
                    for run, values in zip(batch, committed_values, strict=True):
                        # Never picked up before (the pickup sets ``started_at``
                        # only then): no journal, no timers -- unless it is a
                        # fork or reset, whose start copied a journal prefix.
                        if "started_at" in values and run.continued_from_id is None:
                            out.fresh.add(str(run.pk))
                        out.picked.append(as_committed(run, values))
                else:  # not expected under these locks; each run then on its own
                    out.single += batch
    except BaseException as exc:
        # Nothing was tracked: the transaction around the batch did not commit.
        if isinstance(exc, DatabaseError) and is_retryable(exc):
            # A serialization failure or busy database (no deadlock: claims
            # are locked before runs): nothing was taken; the next pass retries.
            logger.info("batch pickup lost a lock race; the next pass retries", exc_info=True)
            return BatchPickup()
        raise
    # Committed: only now does renewal see these claims (``commit_with_folds``).
    for fold in committed_folds:
        registry.record_folded_acquire(fold)
    for run in out.picked:
        announce_started(run)
    return out


class PendingPickup:
    """The pickup half of the maintenance pass: pending runs started under this
    engine's claim (a ``Maintenance`` mixin), in batches where the database
    can, else one at a time; queued runs through ``admission``."""

    engine: TurnHost

    def pick_up_what_fits(self, left: bool = False) -> int:
        """As many pending runs as the scheduler has room for, in one batch
        (``left``: the queues' admission left runs behind)."""
        engine = self.engine
        scheduler = engine.scheduler
        limit = scheduler.pickup_capacity(BATCH)
        if limit <= 0:
            scheduler.pickup_backlog(True)
            return 0
        got = pick_up_batch(engine, limit)
        # A full batch may have left pending runs behind: the scheduler asks
        # for the next pickup as soon as it has room again.
        scheduler.pickup_backlog(got.seen >= limit or left)
        for handoff in got.handoffs():
            engine.dispatch_handoff(handoff)
        return len(got.picked) + sum(1 for run in got.single if engine.dispatch_pickup(run))

    def pick_up(self, run: WorkflowRun) -> bool:
        """pending → running, with the claim's acquire folded into the same batch."""
        conditions, writes = pickup_parts(self.engine, run)
        # The claim's acquire (or a takeover of a stale holder an earlier run
        # left) folds into the same fenced batch as the status change.
        result = commit_enabling_write(self.engine, run.workflow_id, conditions, writes)
        if result.committed:
            announce_started(run)
        return result.committed


__all__ = [
    "BatchPickup",
    "PendingPickup",
    "announce_started",
    "batch_applies",
    "pending_due",
    "pick_up_batch",
    "pickup_parts",
]
