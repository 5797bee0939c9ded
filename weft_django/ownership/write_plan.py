"""The writes of a checked batch, grouped into as few statements as they allow.

Why: once ``conditional_batch`` has locked and compared its condition rows,
its writes are a fixed list, and every statement is a round trip plus
client CPU (most of an engine's CPU, py-spy of a burst). ``apply_writes``
turns that list into statements of ``db.write_statements``:

- consecutive-per-table writes of one shape merge: inserts of one
  append-only model; updates by key with the same values (a pickup's N runs
  going ``pending`` → ``running``); claim puts of distinct workflows;
- writes on different tables may change order: no weft table has a trigger,
  and Django's foreign keys on PostgreSQL are ``DEFERRABLE INITIALLY
  DEFERRED``; writes on one table keep their order;
- a delete by equal columns of a row nothing refers to (a turn's timers)
  is a statement of its own shape, never merged with another;
- a write of any other shape (another delete, a ``Call``, an insert that may fail
  as a ``UniqueAbsence``, a project's signal listener) is a barrier: what was
  grouped before it is written, then it is applied as before.

The invariant is the batch's: this changes how the checked writes reach the
database, never which writes, and never outside the batch's transaction.
Only where the store says ``supports_coalesced_writes`` (PostgreSQL).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import models
from django.db.models import signals
from django.utils import timezone

from weft_django import db as store
from weft_django.db.postgresql import writes as write_statements
from weft_django.db.postgresql.writes import ClaimPredicate, RunPredicate, Statement
from weft_django.db.single_row import APPEND_ONLY_MODELS, update_assignments
from weft_django.models import WorkflowClaim
from weft_django.ownership.codec import (
    MAX_TIMESTAMP_EXCLUSIVE,
    is_valid_engine_id,
    is_valid_epoch,
)
from weft_django.ownership.ops import (
    ClaimCondition,
    Condition,
    Delete,
    Insert,
    PutClaim,
    RunCondition,
    Update,
    Write,
    stamped,
)


@dataclass
class _Group:
    """Writes of one table and one shape, to become one statement."""

    kind: str  # "insert" | "update" | "claim" | "delete"
    model: type[models.Model]
    #: insert: instances; update: keys; claim: claim rows.
    items: list[Any] = field(default_factory=list)
    #: update: the ``SET`` clause and its parameters, shared by every key.
    assignments: tuple[str, list[Any]] | None = None
    #: delete: the column filters.
    filters: dict[str, Any] | None = None

    def statement(self, using: str, gate: str | None = None) -> Statement:
        if self.kind == "insert":
            built = write_statements.insert_statement(self.items, using, gate)
            assert built is not None  # ``_insertable`` said so
            return built
        if self.kind == "update":
            assert self.assignments is not None
            return write_statements.update_statement(
                self.model, self.items, self.assignments, using, gate
            )
        if self.kind == "delete":
            assert self.filters is not None
            deleted = write_statements.delete_statement(self.model, self.filters, using, gate)
            assert deleted is not None  # ``_join`` built it once already
            return deleted
        return write_statements.claim_put_statement(self.items, using, gate)


def apply_writes(vendor: store.StoreOps, ops: Sequence[Write], using: str) -> None:
    """Apply ``ops`` (already checked, inside the batch's transaction)."""
    if not vendor.supports_coalesced_writes or len(ops) < 2:
        for op in ops:
            op.apply(using)
        return
    now = timezone.now()  # one ``updated_at`` for the batch's run rows
    groups: list[_Group] = []

    def flush() -> None:
        statements = [g.statement(using) for g in groups]
        groups.clear()
        write_statements.execute(statements, using)

    for op in ops:
        if not _join(groups, op, using, now):
            flush()
            op.apply(using)
    flush()


def try_checked_statement(
    vendor: store.StoreOps, conds: Sequence[Condition], ops: Sequence[Write], using: str
) -> bool | None:
    """The whole batch -- lock, check, write -- as ONE statement; ``None`` =
    not that shape, ``False`` = a condition did not hold there (nothing was
    written: the general batch runs and says which).

    The shape: claim and run conditions whose SQL is at least
    as strict as ``holds_for`` -- so a write here is a write the general
    batch would have made -- and writes that group into one statement per
    table. A turn's checkpoint (the fence, its run, journal entries and the
    run update) is 1 round trip instead of BEGIN, lock, write and COMMIT.
    """
    if not vendor.supports_coalesced_writes or not ops:
        return None
    claims: list[ClaimPredicate] = []
    runs: list[RunPredicate] = []
    for cond in conds:
        if isinstance(cond, ClaimCondition):
            predicate = _claim_predicate(cond)
            if predicate is None:
                return None
            claims.append(predicate)
        elif isinstance(cond, RunCondition):
            run = _run_predicate(cond)
            if run is None:
                return None
            runs.append(run)
        else:
            return None
    groups: list[_Group] = []
    now = timezone.now()
    for op in ops:
        if not _join(groups, op, using, now):
            return None
    if len({g.model for g in groups}) < len(groups):
        return None
    statements = [g.statement(using, write_statements.GATE) for g in groups]
    return write_statements.execute_checked(using, claims, runs, statements)


def _claim_predicate(cond: ClaimCondition) -> ClaimPredicate | None:
    """``cond`` in SQL, or ``None`` where SQL would not be as strict: an
    ``owner`` fence only with a valid epoch and engine id (``decode_holder_row``
    is fail-closed on anything else). A claim row that does not exist yet
    (a new workflow's epoch 0) is not found: the general batch creates it."""
    if cond.match == "owner" and not (
        is_valid_epoch(cond.epoch) and is_valid_engine_id(cond.holder[0])
    ):
        return None
    if cond.match not in ("exact", "owner", "any"):
        return None
    return ClaimPredicate(
        cond.workflow_id, cond.epoch, cond.match, cond.holder, MAX_TIMESTAMP_EXCLUSIVE
    )


def _run_predicate(cond: RunCondition) -> RunPredicate | None:
    try:
        run_id = str(uuid.UUID(str(cond.run_id)))
    except ValueError:  # not a run key: the general batch reports it
        return None
    statuses = None if cond.statuses is None else tuple(sorted(cond.statuses))
    return RunPredicate(run_id, statuses, cond.version, cond.wake_seq)


def _join(groups: list[_Group], op: Write, using: str, now: Any) -> bool:
    """Add ``op`` to the last group of its table when it has the same shape,
    else to a new group; ``False`` = not a groupable write (a barrier)."""
    if isinstance(op, Insert):
        if op.absence is not None or not _insertable(op.instance):
            return False
        model: type[models.Model] = type(op.instance)
        last = _last_of(groups, model)
        if last is not None and last.kind == "insert":
            last.items.append(op.instance)
        else:
            groups.append(_Group("insert", model, [op.instance]))
        return True
    if isinstance(op, Update):
        if set(op.filters) != {"pk"}:
            return False
        assignments = update_assignments(op.model, stamped(op.model, op.values, now), using)
        if assignments is None:
            return False
        last = _last_of(groups, op.model)
        if (
            last is not None
            and last.kind == "update"
            and last.assignments is not None
            and _same_assignments(last.assignments, assignments)
        ):
            if op.filters["pk"] not in last.items:
                last.items.append(op.filters["pk"])
            return True
        groups.append(_Group("update", op.model, [op.filters["pk"]], assignments))
        return True
    if isinstance(op, Delete):
        if write_statements.delete_statement(op.model, op.filters, using) is None:
            return False
        groups.append(_Group("delete", op.model, filters=dict(op.filters)))
        return True
    if isinstance(op, PutClaim):
        row = (op.workflow_id, op.epoch, *op.holder)
        last = _last_of(groups, WorkflowClaim)
        # Two puts of one claim in one UPDATE … FROM would apply only one.
        if (
            last is not None
            and last.kind == "claim"
            and all(r[0] != op.workflow_id for r in last.items)
        ):
            last.items.append(row)
        else:
            groups.append(_Group("claim", WorkflowClaim, [row]))
        return True
    return False


def _last_of(groups: list[_Group], model: type[models.Model]) -> _Group | None:
    for group in reversed(groups):
        if group.model is model:
            return group
    return None


def _insertable(instance: models.Model) -> bool:
    """One of weft's append-only rows with a key the database assigns, and
    nobody listening to its save signals (``write_statements.insert_statement``)."""
    model = type(instance)
    if model not in APPEND_ONLY_MODELS or instance.pk is not None:
        return False
    return not (signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model))


def _same_assignments(a: tuple[str, list[Any]], b: tuple[str, list[Any]]) -> bool:
    if a[0] != b[0] or len(a[1]) != len(b[1]):
        return False
    try:
        return all(
            x is y or (type(x) is type(y) and bool(x == y)) for x, y in zip(a[1], b[1], strict=True)
        )
    except Exception:  # a value without a usable ``==``: keep them apart
        return False


__all__ = ["apply_writes", "try_checked_statement"]
