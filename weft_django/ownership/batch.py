"""The one conditional-batch executor (SPEC §4.2).

Invariant: *check these conditions and apply these writes atomically, or
apply nothing and say which condition failed.* Every ownership write and
every fenced workflow write goes through ``conditional_batch``.

How, in Django: one ``transaction.atomic()`` (a savepoint when the caller is
already in a transaction, so ``client`` writes join the caller's outbox);
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

A bare claim transition on PostgreSQL (one claim condition, the claim write
and its ``ClaimEvent``) skips all of that and runs as one statement whose
``WHERE`` is the condition: see ``claim_statement``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from django.db import DatabaseError, IntegrityError, connections, models, transaction

from weft_django.models import GlobalLease, WorkflowClaim, WorkflowRun
from weft_django.ownership.codec import decode_holder_row

HolderColumns = tuple[str | None, int | None, int | None]
"""``(engine_id, expires_at, claimed_at)`` exactly as stored."""

ABSENT_HOLDER: HolderColumns = (None, None, None)

#: Global lock order: rank of the model, then primary key.
LOCK_RANK: dict[type[models.Model], int] = {WorkflowClaim: 0, GlobalLease: 1, WorkflowRun: 2}

MAX_RETRIES = 12


class Condition(Protocol):
    """A precondition of a batch; ``label`` says which one failed."""

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class ClaimCondition:
    """The claim row of ``workflow_id`` must have ``epoch`` and a holder that
    matches: ``exact`` (all three columns, ``ABSENT_HOLDER`` = absent),
    ``owner`` (a holder that decodes, held by ``holder[0]``) or ``any``."""

    workflow_id: str
    epoch: int
    holder: HolderColumns = ABSENT_HOLDER
    match: Literal["exact", "owner", "any"] = "exact"
    label: str = "claim"

    def holds_for(self, row: WorkflowClaim) -> bool:
        if row.epoch != self.epoch:
            return False
        actual = (row.engine_id, row.expires_at, row.claimed_at)
        if self.match == "exact":
            return actual == self.holder
        if self.match == "owner":
            # Fail-closed (SPEC §4.1): a holder that does not decode -- half-null,
            # out-of-range times -- is never "me", as the wake guard and takeover see it.
            holder = decode_holder_row(row.engine_id, row.epoch, row.expires_at, row.claimed_at)
            return holder is not None and holder.engine_id == self.holder[0]
        return True


@dataclass(frozen=True)
class RunCondition:
    """The run must exist, with a status in ``statuses``, ``version``, ``wake_seq``."""

    run_id: Any
    statuses: frozenset[str] | None = None
    version: int | None = None
    wake_seq: int | None = None
    label: str = "run"

    def holds_for(self, row: WorkflowRun | None) -> bool:
        if row is None:
            return False
        if self.statuses is not None and row.status not in self.statuses:
            return False
        if self.wake_seq is not None and row.wake_seq != self.wake_seq:
            return False
        return self.version is None or row.version == self.version


@dataclass(frozen=True)
class LeaseCondition:
    """The global lease must be at ``epoch`` and held by ``holder_id``."""

    epoch: int
    holder_id: str | None
    label: str = "lease"

    def holds_for(self, row: GlobalLease | None) -> bool:
        epoch = row.epoch if row is not None else 0
        holder = row.holder_id if row is not None else None
        return epoch == self.epoch and holder == self.holder_id


@dataclass(frozen=True)
class RowCondition:
    """A row of ``model`` must exist with the ``expected`` field values."""

    model: type[models.Model]
    pk: Any
    expected: dict[str, Any]
    label: str = "row"

    def holds_for(self, row: models.Model | None) -> bool:
        if row is None:
            return False
        return all(getattr(row, name) == value for name, value in self.expected.items())


@dataclass(frozen=True)
class UniqueAbsence:
    """No row may exist yet under a unique key; enforced by ``Insert``."""

    label: str


class Write(Protocol):
    """A write applied inside the batch's transaction."""

    def apply(self, using: str) -> None: ...


class WriteConflict(Exception):
    """Raised by a write whose uniqueness condition failed; rolls back the batch."""

    def __init__(self, condition: Condition) -> None:
        super().__init__(condition.label)
        self.condition = condition


@dataclass(frozen=True)
class PutClaim:
    """Set a claim's epoch and holder columns (``ABSENT_HOLDER`` deletes the holder)."""

    workflow_id: str
    epoch: int
    holder: HolderColumns

    def apply(self, using: str) -> None:
        engine_id, expires_at, claimed_at = self.holder
        WorkflowClaim.objects.using(using).filter(pk=self.workflow_id).update(
            epoch=self.epoch, engine_id=engine_id, expires_at=expires_at, claimed_at=claimed_at
        )


@dataclass(frozen=True)
class Insert:
    """Insert a model instance; an ``IntegrityError`` fails ``absence`` (if given)."""

    instance: models.Model
    absence: UniqueAbsence | None = None

    def apply(self, using: str) -> None:
        if self.absence is None:
            from weft_django.ownership.fast_sql import insert_row

            if not insert_row(self.instance, using):
                self.instance.save(using=using, force_insert=True)
            return
        try:
            with transaction.atomic(using=using):
                self.instance.save(using=using, force_insert=True)
        except IntegrityError:
            raise WriteConflict(self.absence) from None


@dataclass(frozen=True)
class BulkInsert:
    """Insert several rows of one model in one statement."""

    instances: Sequence[models.Model]

    def apply(self, using: str) -> None:
        if self.instances:
            type(self.instances[0])._default_manager.using(using).bulk_create(list(self.instances))


@dataclass(frozen=True)
class Update:
    """``model.objects.filter(**filters).update(**values)``."""

    model: type[models.Model]
    filters: dict[str, Any]
    values: dict[str, Any]

    def apply(self, using: str) -> None:
        from weft_django.ownership.fast_sql import update_by_pk

        if not update_by_pk(self.model, self.filters, self.values, using):
            self.model._default_manager.using(using).filter(**self.filters).update(**self.values)


@dataclass(frozen=True)
class Delete:
    """``model.objects.filter(**filters).delete()``."""

    model: type[models.Model]
    filters: dict[str, Any]

    def apply(self, using: str) -> None:
        self.model._default_manager.using(using).filter(**self.filters).delete()


@dataclass(frozen=True)
class Call:
    """Escape hatch for a write that needs the open transaction (kept rare)."""

    fn: Callable[[str], None]

    def apply(self, using: str) -> None:
        self.fn(using)


@dataclass(frozen=True)
class BatchResult:
    """``committed``; otherwise ``failed_condition`` is the condition that failed."""

    committed: bool
    failed_condition: Condition | None = None
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def conditional_batch(
    conditions: Iterable[Condition],
    writes: Iterable[Write],
    *,
    using: str | None = None,
) -> BatchResult:
    """Check ``conditions`` and apply ``writes`` atomically, or apply nothing."""
    from weft_django.conf import get_settings

    db = using or get_settings().database
    conds = list(conditions)
    ops = list(writes)
    from weft_django.ownership.claim_statement import try_claim_statement

    nested = connections[db].in_atomic_block
    attempt = 0
    while True:
        attempt += 1
        try:
            single = try_claim_statement(conds, ops, db)
            if single is not None:  # a bare claim transition: one atomic statement
                return BatchResult(single, None if single else conds[0], attempt)
            with transaction.atomic(using=db):
                failed = _lock_and_check(conds, ops, db)
                if failed is not None:
                    return BatchResult(False, failed, attempt)
                for op in ops:
                    op.apply(db)
            return BatchResult(True, None, attempt)
        except WriteConflict as conflict:
            return BatchResult(False, conflict.condition, attempt)
        except DatabaseError as exc:
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


def _lock_and_check(conds: list[Condition], ops: list[Write], db: str) -> Condition | None:
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
    if claim_ids and run_ids and not needs_lease and connections[db].vendor == "postgresql":
        # (The lease would rank between claims and runs.)
        locked_together = _lock_claims_and_runs(claim_ids, run_ids, db, claims, runs)
        if not locked_together:  # a claim row to create first (a new workflow id)
            WorkflowClaim.objects.using(db).bulk_create(
                [WorkflowClaim(workflow_id=i) for i in claim_ids if i not in claims],
                ignore_conflicts=True,
            )
            claims.clear()
            runs.clear()
            locked_together = _lock_claims_and_runs(claim_ids, run_ids, db, claims, runs)
    if claim_ids and not locked_together:
        claims = _lock(WorkflowClaim, claim_ids, db)
        missing = [i for i in claim_ids if i not in claims]
        if missing:
            WorkflowClaim.objects.using(db).bulk_create(
                [WorkflowClaim(workflow_id=i) for i in missing], ignore_conflicts=True
            )
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


@dataclass(frozen=True)
class _LockedClaim:
    epoch: int
    engine_id: str | None
    expires_at: int | None
    claimed_at: int | None


@dataclass(frozen=True)
class _LockedRun:
    status: str
    version: int
    wake_seq: int


def _lock_claims_and_runs(
    claim_ids: list[str],
    run_ids: list[str],
    db: str,
    claims: dict[str, Any],
    runs: dict[str, Any],
) -> bool:
    """PostgreSQL: lock the claim rows, then the run rows, in ONE round trip.

    A turn's commit conditions on its claim (the fence) and its run; two
    ``SELECT … FOR UPDATE`` were two round trips of every checkpoint. The
    ``UNION ALL`` reads (and locks) its first branch before the second, so
    the global lock order (claims, then runs, each by key) is kept. Fills
    ``claims`` and ``runs``; ``False`` when a claim row is missing (the
    caller then takes the general path, which creates it first).
    """
    claim_table = WorkflowClaim._meta.db_table
    run_table = WorkflowRun._meta.db_table
    sql = (
        "WITH c AS (SELECT workflow_id, epoch, engine_id, expires_at, claimed_at "
        f"FROM {claim_table} WHERE workflow_id = ANY(%s) ORDER BY workflow_id FOR UPDATE), "
        f"r AS (SELECT id, version, status, wake_seq FROM {run_table} "
        "WHERE id = ANY(%s::uuid[]) ORDER BY id FOR UPDATE) "
        "SELECT 'c', workflow_id, epoch, engine_id, expires_at, claimed_at FROM c "
        "UNION ALL SELECT 'r', id::text, version, status, wake_seq, NULL FROM r"
    )
    with connections[db].cursor() as cursor:
        cursor.execute(sql, [claim_ids, run_ids])
        for kind, key, number, text, second, third in cursor.fetchall():
            if kind == "c":
                claims[key] = _LockedClaim(number, text, second, third)
            else:
                runs[key] = _LockedRun(text, number, second)
    return len(claims) == len(claim_ids)


def _lock(model: type[Any], pks: list[str], db: str) -> dict[str, Any]:
    rows = model._default_manager.using(db).select_for_update().filter(pk__in=pks).order_by("pk")
    return {str(row.pk): row for row in rows}


__all__ = [
    "ABSENT_HOLDER",
    "BatchResult",
    "BulkInsert",
    "Call",
    "ClaimCondition",
    "Condition",
    "Delete",
    "HolderColumns",
    "Insert",
    "LeaseCondition",
    "PutClaim",
    "RowCondition",
    "RunCondition",
    "UniqueAbsence",
    "Update",
    "Write",
    "WriteConflict",
    "conditional_batch",
    "is_retryable",
]
