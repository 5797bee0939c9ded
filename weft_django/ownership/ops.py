"""The conditional batch's vocabulary: conditions and writes, as data.

The executor (``ownership.batch``) and the vendor fast paths it chooses among all speak
this vocabulary, and nothing here depends on how a batch is run. A condition compares one
locked row against the value the caller read (``holds_for``); a write applies itself
inside the batch's transaction (``apply``). Both are frozen: a batch is built once and
never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from django.db import IntegrityError, models
from django.utils import timezone

from weft_django.db.single_row import insert_row, update_by_pk
from weft_django.models import GlobalLease, WorkflowClaim, WorkflowRun
from weft_django.ownership.codec import decode_holder_row

HolderColumns = tuple[str | None, int | None, int | None]
"""``(engine_id, expires_at, claimed_at)`` exactly as stored."""

ABSENT_HOLDER: HolderColumns = (None, None, None)


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
        values = {
            "epoch": self.epoch,
            "engine_id": engine_id,
            "expires_at": expires_at,
            "claimed_at": claimed_at,
        }
        if not update_by_pk(WorkflowClaim, {"pk": self.workflow_id}, values, using):
            WorkflowClaim.objects.using(using).filter(pk=self.workflow_id).update(**values)


@dataclass(frozen=True)
class Insert:
    """Insert a model instance; an ``IntegrityError`` fails ``absence`` (if given).

    No savepoint of its own: the ``WriteConflict`` leaves the batch's
    ``atomic`` (its transaction, or its savepoint when nested), which undoes
    the failed insert together with every write of the batch before it.
    """

    instance: models.Model
    absence: UniqueAbsence | None = None

    def apply(self, using: str) -> None:
        if self.absence is None:
            if not insert_row(self.instance, using):
                self.instance.save(using=using, force_insert=True)
            return
        try:
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
        values = stamped(self.model, self.values)
        if not update_by_pk(self.model, self.filters, values, using):
            self.model._default_manager.using(using).filter(**self.filters).update(**values)


def stamped(model: type[models.Model], values: dict[str, Any], now: Any = None) -> dict[str, Any]:
    """``values`` with ``updated_at`` set when they write a ``WorkflowRun``.

    Invariant: every write of a run row moves its ``updated_at`` (the API's
    ``?updated_after=``). Every run write is an ``Update`` of a fenced batch,
    so setting the column here puts it in that same ``UPDATE`` -- no extra
    statement, and no writer can forget it. ``auto_now`` alone would not do:
    it applies to ``save()``, never to ``QuerySet.update()``. The wall clock,
    as for ``started_at`` / ``finished_at``: an engine's injected clock is a
    protocol time base (ms), not the time a row changed.
    """
    if model is not WorkflowRun or "updated_at" in values:
        return values
    return {**values, "updated_at": timezone.now() if now is None else now}


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
]
