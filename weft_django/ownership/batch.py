"""The one conditional-batch executor (SPEC §4.2).

Invariant: *check these conditions and apply these writes atomically, or
apply nothing and say which condition failed.* Every ownership write and
every fenced workflow write goes through ``conditional_batch``.

How, in Django: one ``transaction.atomic()`` (a savepoint when the caller is
already in a transaction, so ``client`` writes join the caller's outbox --
none when the caller says its transaction is the batch's own and no write
can fail as a condition);
``select_for_update()`` on every condition row in ONE global order — model
rank, then primary key — so two batches that touch the same two workflows
(a child's start, a child's completion waking its parent) can never
deadlock each other; then each condition is compared against the value the
*caller read before* (that is what makes a lost race observable); then the
writes. Claim rows are ensured first (``INSERT … ON CONFLICT DO NOTHING``)
so they can be locked. Absence that is not workflow-scoped is enforced by
unique constraints: an ``IntegrityError`` of an ``Insert`` is reported as its
``UniqueAbsence`` condition failing. Deadlocks, serialization failures and
SQLite's "database is locked" are retried — only when the batch owns its
transaction (a nested batch cannot retry inside an aborted outer one).

Where the database can do better (``weft_django.db``'s capability flags), a
bare claim transition (one claim condition, the claim write and its
``ClaimEvent``) runs as one statement whose ``WHERE`` is the condition, and
a batch's claims and runs are locked in one round trip.

The vocabulary (conditions, writes, ``BatchResult``) lives in ``ops`` and is
re-exported here: this is its public path (SPEC §7).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import DatabaseError, connections, models, transaction

from weft_django import db as store
from weft_django.conf import get_settings
from weft_django.models import ClaimEvent, GlobalLease, WorkflowClaim, WorkflowRun
from weft_django.ownership.ops import (
    ABSENT_HOLDER,
    BatchResult,
    ClaimCondition,
    Condition,
    Insert,
    LeaseCondition,
    PutClaim,
    RowCondition,
    RunCondition,
    UniqueAbsence,
    Write,
    WriteConflict,
)
from weft_django.ownership.write_plan import apply_writes, try_checked_statement

#: Global lock order: rank of the model, then primary key.
LOCK_RANK: dict[type[models.Model], int] = {WorkflowClaim: 0, GlobalLease: 1, WorkflowRun: 2}

MAX_RETRIES = 12


def conditional_batch(
    conditions: Iterable[Condition],
    writes: Iterable[Write],
    *,
    using: str | None = None,
    savepoint: bool = True,
) -> BatchResult:
    """Check ``conditions`` and apply ``writes`` atomically, or apply nothing.

    ``savepoint=False``: the caller's transaction is this batch's own -- it
    rolls back as a whole when the batch raises -- so a nested batch sets no
    savepoint (two statements less). A batch with an ``Insert`` under a
    ``UniqueAbsence`` keeps it anyway: its ``WriteConflict`` is a failed
    condition, reported while the caller's transaction goes on, so the
    writes before it must be undone on their own.
    """
    db = using or get_settings().database
    conds = list(conditions)
    ops = list(writes)
    vendor = store.ops(db)
    savepoint = savepoint or any(isinstance(op, Insert) and op.absence is not None for op in ops)
    attempt = 0
    while True:
        attempt += 1
        try:
            single = try_claim_statement(vendor, conds, ops, db)
            if single is not None:  # a bare claim transition: one atomic statement
                return BatchResult(single, None if single else conds[0], attempt)
            # Lock, check and write as one statement where the batch's shape
            # allows -- when the batch owns its transaction, or the caller's
            # transaction is the batch's own (``savepoint=False``: a statement
            # that raises aborts it as the general path's would). A condition
            # that did not hold there goes on to the general path, which names it.
            if (not savepoint or not connections[db].in_atomic_block) and try_checked_statement(
                vendor, conds, ops, db
            ):
                return BatchResult(True, None, attempt)
            # A failed condition returns before any write: nothing to undo.
            with transaction.atomic(using=db, savepoint=savepoint):
                failed = _lock_and_check(vendor, conds, ops, db)
                if failed is not None:
                    return BatchResult(False, failed, attempt)
                apply_writes(vendor, ops, db)
            return BatchResult(True, None, attempt)
        except WriteConflict as conflict:
            return BatchResult(False, conflict.condition, attempt)
        except DatabaseError as exc:
            # Nested (inside the caller's transaction): no retry. Asked only
            # here -- a thread-local lookup the claim cycle need not pay --
            # and unchanged by the failed attempt: the claim statement opens
            # no atomic block, and ``atomic`` restores the flag on its way out.
            nested = connections[db].in_atomic_block
            if nested or attempt >= MAX_RETRIES or not is_retryable(exc):
                raise
            time.sleep(min(0.5, 0.005 * 2**attempt) * (0.5 + random.random()))


def is_retryable(exc: BaseException) -> bool:
    """Deadlock, serialization failure, or SQLite's busy database."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in {"40P01", "40001", "55P03"}:
        return True
    message = str(exc).lower()
    return "database is locked" in message or "database table is locked" in message


def try_claim_statement(
    vendor: store.StoreOps, conds: Sequence[Condition], ops: Sequence[Write], db: str
) -> bool | None:
    """Run a bare claim transition as one statement; ``None`` = not that shape
    (or the database cannot), and the general path runs.

    The shape: one ``exact`` or ``any`` claim condition, a ``PutClaim`` of the
    same id and an ``Insert`` of its ``ClaimEvent``. A condition at epoch 0
    with no holder is also met by a missing row (the general path ensures
    the row at epoch 0 first), so that case is an upsert.
    """
    if not vendor.supports_claim_statement or len(conds) != 1 or len(ops) != 2:
        return None
    cond = conds[0]
    if not isinstance(cond, ClaimCondition) or cond.match not in ("exact", "any"):
        return None
    first, second = ops
    put = first if isinstance(first, PutClaim) else second if isinstance(second, PutClaim) else None
    event = first if isinstance(first, Insert) else second if isinstance(second, Insert) else None
    if (
        put is None
        or event is None
        or put.workflow_id != cond.workflow_id
        or event.absence is not None
        or type(event.instance) is not ClaimEvent
    ):
        return None
    return vendor.claim_statement(
        db,
        workflow_id=cond.workflow_id,
        epoch=cond.epoch,
        holder=None if cond.match == "any" else cond.holder,
        new_epoch=put.epoch,
        new_holder=put.holder,
        upsert=cond.epoch == 0 and (cond.match == "any" or cond.holder == ABSENT_HOLDER),
        event=event.instance,
    )


def _lock_and_check(
    vendor: store.StoreOps, conds: list[Condition], ops: list[Write], db: str
) -> Condition | None:
    """Lock every condition row in the global order, then compare each."""
    claim_ids = sorted(
        {c.workflow_id for c in conds if isinstance(c, ClaimCondition)}
        | {w.workflow_id for w in ops if isinstance(w, PutClaim)}
    )
    run_ids = sorted({str(c.run_id) for c in conds if isinstance(c, RunCondition)})
    needs_lease = any(isinstance(c, LeaseCondition) for c in conds)

    row_conds = [c for c in conds if isinstance(c, RowCondition)]
    claims: dict[str, Any] = {}
    runs: dict[str, Any] = {}
    locked_together = False
    # (The lease would rank between claims and runs: no joint lock with it.)
    if claim_ids and run_ids and not needs_lease and vendor.supports_joint_lock:
        locked_together = vendor.lock_claims_and_runs(db, claim_ids, run_ids, claims, runs)
        if not locked_together:  # a claim row to create first (a new workflow id)
            _ensure_claim_rows([i for i in claim_ids if i not in claims], db)
            claims.clear()
            runs.clear()
            locked_together = vendor.lock_claims_and_runs(db, claim_ids, run_ids, claims, runs)
    if claim_ids and not locked_together:
        claims = _lock(WorkflowClaim, claim_ids, db)
        missing = [i for i in claim_ids if i not in claims]
        if missing:
            _ensure_claim_rows(missing, db)
            claims = _lock(WorkflowClaim, claim_ids, db)
    lease: GlobalLease | None = None
    if needs_lease:
        GlobalLease.objects.using(db).bulk_create([GlobalLease(key="lease")], ignore_conflicts=True)
        lease = GlobalLease.objects.using(db).select_for_update().filter(pk="lease").first()
    if run_ids and not locked_together:
        runs = _lock(WorkflowRun, run_ids, db)
    others: dict[tuple[type[Any], str], Any] = {}
    for model in sorted(
        {c.model for c in row_conds}, key=lambda m: (LOCK_RANK.get(m, 10), m._meta.label)
    ):
        pks = sorted({str(c.pk) for c in row_conds if c.model is model})
        for pk, row in _lock(model, pks, db).items():
            others[(model, pk)] = row

    for cond in conds:
        if isinstance(cond, ClaimCondition):
            if not cond.holds_for(claims[cond.workflow_id]):
                return cond
        elif isinstance(cond, RunCondition):
            if not cond.holds_for(runs.get(str(cond.run_id))):
                return cond
        elif isinstance(cond, LeaseCondition):
            if not cond.holds_for(lease):
                return cond
        elif isinstance(cond, RowCondition):
            if not cond.holds_for(others.get((cond.model, str(cond.pk)))):
                return cond
        elif not isinstance(cond, UniqueAbsence):
            raise TypeError(f"conditional_batch: unknown condition {cond!r}")
    return None


def _ensure_claim_rows(workflow_ids: list[str], db: str) -> None:
    WorkflowClaim.objects.using(db).bulk_create(
        [WorkflowClaim(workflow_id=i) for i in workflow_ids], ignore_conflicts=True
    )


def _lock(model: type[Any], pks: list[str], db: str) -> dict[str, Any]:
    rows = model._default_manager.using(db).select_for_update().filter(pk__in=pks).order_by("pk")
    return {str(row.pk): row for row in rows}


__all__ = ["BatchResult", "conditional_batch", "is_retryable"]
