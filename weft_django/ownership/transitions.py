"""Pure claim transitions (SPEC §4.4): ``(state read, now) -> conditions + writes``.

No I/O and no clock reads here: every builder receives the snapshot the
caller read and the engine clock's ``now``, and returns the exact conditions
and writes that ``batch.conditional_batch`` executes. Epochs are always
minted from the *stored* epoch (``snapshot.epoch + 1``), never from a
holder's self-reported epoch, so a corrupt holder cannot rewind the fence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import F

from weft_django.models import ClaimEvent, WorkflowClaim
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.codec import (
    MAX_EPOCH_EXCLUSIVE,
    HolderRecord,
    decode_holder_row,
    holder_row_absent,
)
from weft_django.ownership.ops import (
    ABSENT_HOLDER,
    BulkInsert,
    ClaimCondition,
    Condition,
    HolderColumns,
    Insert,
    PutClaim,
    Update,
    Write,
)


@dataclass(frozen=True)
class ClaimSnapshot:
    """One read of a claim row (``epoch`` 0 and no holder when the row is missing)."""

    workflow_id: str
    epoch: int = 0
    engine_id: str | None = None
    expires_at: int | None = None
    claimed_at: int | None = None

    @property
    def holder_columns(self) -> HolderColumns:
        return (self.engine_id, self.expires_at, self.claimed_at)

    @property
    def holder_absent(self) -> bool:
        return holder_row_absent(self.engine_id, self.expires_at, self.claimed_at)

    @property
    def holder(self) -> HolderRecord | None:
        """The decoded holder, or ``None`` when absent *or* undecodable."""
        return decode_holder_row(self.engine_id, self.epoch, self.expires_at, self.claimed_at)

    @property
    def holder_undecodable(self) -> bool:
        return not self.holder_absent and self.holder is None


@dataclass(frozen=True)
class Transition:
    """What a transition needs committed, and the holder it would install."""

    conditions: tuple[Condition, ...]
    writes: tuple[Write, ...]
    holder: HolderRecord | None
    epoch: int


class EpochExhaustedError(RuntimeError):
    """The stored epoch cannot be incremented without leaving the safe range."""


def next_epoch(stored: int) -> int:
    """The epoch after ``stored``; a corrupt (negative) one counts as 0."""
    base = stored if isinstance(stored, int) and stored > 0 else 0
    nxt = base + 1
    if nxt >= MAX_EPOCH_EXCLUSIVE:
        raise EpochExhaustedError(f"epoch {stored} cannot be incremented safely")
    return nxt


def holder_columns(holder: HolderRecord | None) -> HolderColumns:
    if holder is None:
        return ABSENT_HOLDER
    return (holder.engine_id, holder.expires_at, holder.claimed_at)


#: ``ClaimEvent``'s concrete fields in declaration order: what ``_event`` passes
#: positionally (Django's fast constructor path, half the keyword path's cost).
_EVENT_FIELDS = (
    "id",
    "workflow_id",
    "epoch",
    "engine_id",
    "kind",
    "at_ms",
    "reason",
    "previous_engine_id",
    "previous_expires_at",
)
_event_positional: bool | None = None


#: ``ClaimEvent.reason``'s length (a longer cancel reason failed on PostgreSQL).
REASON_LENGTH = 200


def _event(
    kind: str,
    snapshot: ClaimSnapshot,
    epoch: int,
    engine_id: str,
    now: int,
    reason: str = "",
) -> Insert:
    global _event_positional
    if _event_positional is None:  # the model's field order, checked once
        fields = tuple(f.attname for f in ClaimEvent._meta.concrete_fields)
        _event_positional = fields == _EVENT_FIELDS
    previous_engine_id = snapshot.engine_id or ""
    reason = reason[:REASON_LENGTH]  # the column's length; the run keeps the whole reason
    if _event_positional:
        return Insert(
            ClaimEvent(
                None,
                snapshot.workflow_id,
                epoch,
                engine_id,
                kind,
                now,
                reason,
                previous_engine_id,
                snapshot.expires_at,
            )
        )
    return Insert(
        ClaimEvent(
            workflow_id=snapshot.workflow_id,
            epoch=epoch,
            engine_id=engine_id,
            kind=kind,
            at_ms=now,
            reason=reason,
            previous_engine_id=previous_engine_id,
            previous_expires_at=snapshot.expires_at,
        )
    )


def build_acquire(
    snapshot: ClaimSnapshot, *, engine_id: str, now: int, ttl_ms: int, label: str = "claim"
) -> Transition:
    """CAS {holder absent, epoch = e} → epoch e+1, holder {me, e+1, now+ttl, now}."""
    epoch = next_epoch(snapshot.epoch)
    holder = HolderRecord(engine_id=engine_id, epoch=epoch, expires_at=now + ttl_ms, claimed_at=now)
    return Transition(
        conditions=(
            ClaimCondition(snapshot.workflow_id, snapshot.epoch, ABSENT_HOLDER, "exact", label),
        ),
        writes=(
            PutClaim(snapshot.workflow_id, epoch, holder_columns(holder)),
            _event("acquire", snapshot, epoch, engine_id, now),
        ),
        holder=holder,
        epoch=epoch,
    )


def build_takeover(
    snapshot: ClaimSnapshot, *, engine_id: str, now: int, ttl_ms: int, label: str = "claim"
) -> Transition:
    """CAS {holder = the stale holder read, epoch = e read} → epoch e+1, fresh holder."""
    epoch = next_epoch(snapshot.epoch)
    holder = HolderRecord(engine_id=engine_id, epoch=epoch, expires_at=now + ttl_ms, claimed_at=now)
    return Transition(
        conditions=(
            ClaimCondition(
                snapshot.workflow_id, snapshot.epoch, snapshot.holder_columns, "exact", label
            ),
        ),
        writes=(
            PutClaim(snapshot.workflow_id, epoch, holder_columns(holder)),
            _event("takeover", snapshot, epoch, engine_id, now),
        ),
        holder=holder,
        epoch=epoch,
    )


def build_renew(current: HolderRecord, *, workflow_id: str, now: int, ttl_ms: int) -> HolderRecord:
    """Same engine, epoch and ``claimed_at``; a fresh ``expires_at``."""
    return HolderRecord(
        engine_id=current.engine_id,
        epoch=current.epoch,
        expires_at=now + ttl_ms,
        claimed_at=current.claimed_at,
    )


def build_release(
    workflow_id: str, current: HolderRecord, *, now: int, exact: bool = True, reason: str = ""
) -> Transition:
    """CAS {epoch = mine, holder = mine} → delete the holder, keep the epoch.

    ``exact`` compares the whole holder (the registry's own release, which
    knows the bytes it last wrote); ``exact=False`` compares the owner at the
    epoch only, for a release folded into a turn's terminal commit, which may
    race the renewal thread's fresh ``expires_at``.
    """
    snapshot = ClaimSnapshot(
        workflow_id, current.epoch, current.engine_id, current.expires_at, current.claimed_at
    )
    return Transition(
        conditions=(
            ClaimCondition(
                workflow_id, current.epoch, holder_columns(current), "exact" if exact else "owner"
            ),
        ),
        writes=(
            PutClaim(workflow_id, current.epoch, ABSENT_HOLDER),
            _event("release", snapshot, current.epoch, current.engine_id, now, reason),
        ),
        holder=None,
        epoch=current.epoch,
    )


def build_rotation(
    snapshot: ClaimSnapshot,
    *,
    actor: str,
    now: int,
    reason: str,
    kind: str = "rotate",
    label: str = "claim",
) -> Transition:
    """External terminal rotation: CAS {epoch = e read} → epoch e+1, holder deleted."""
    epoch = next_epoch(snapshot.epoch)
    return Transition(
        conditions=(
            ClaimCondition(snapshot.workflow_id, snapshot.epoch, ABSENT_HOLDER, "any", label),
        ),
        writes=(
            PutClaim(snapshot.workflow_id, epoch, ABSENT_HOLDER),
            _event(kind, snapshot, epoch, actor, now, reason),
        ),
        holder=None,
        epoch=epoch,
    )


def build_bulk_rotation(
    snapshots: Sequence[ClaimSnapshot], *, actor: str, now: int, reason: str
) -> tuple[tuple[Condition, ...], tuple[Write, ...]]:
    """``build_rotation`` of many claims (a bulk cancel), in O(1) statements.

    The conditions are exactly ``build_rotation``'s, one per claim (the
    epoch read); the writes are grouped: one ``UPDATE`` of every claim whose
    next epoch is its stored epoch + 1 -- which, under the conditions' row
    locks, *is* the epoch each was read at + 1 -- and one ``INSERT`` of the
    ``ClaimEvent`` rows. A corrupt (negative) stored epoch restarts at 1, so
    such a claim gets its own ``PutClaim``, as ``build_rotation`` writes it.
    """
    conditions: list[Condition] = []
    grouped: list[str] = []
    writes: list[Write] = []
    events: list[ClaimEvent] = []
    for snapshot in snapshots:
        single = build_rotation(snapshot, actor=actor, now=now, reason=reason)
        conditions.extend(single.conditions)
        if single.epoch == snapshot.epoch + 1:
            grouped.append(snapshot.workflow_id)
        else:
            writes.append(PutClaim(snapshot.workflow_id, single.epoch, ABSENT_HOLDER))
        events.extend(w.instance for w in single.writes if isinstance(w, Insert))  # type: ignore[misc]
    if grouped:
        writes.insert(
            0,
            Update(
                WorkflowClaim,
                {"pk__in": grouped},
                {
                    "epoch": F("epoch") + 1,
                    "engine_id": None,
                    "expires_at": None,
                    "claimed_at": None,
                },
            ),
        )
    if events:
        writes.append(BulkInsert(events))
    return tuple(conditions), tuple(writes)


def is_claim_expired(*, expires_at: int, now: int, renew_interval_ms: int) -> bool:
    """Expired only once ``expires_at + GRACE × renew_interval < now`` (strictly)."""
    return expires_at + WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * renew_interval_ms < now


def fence_condition(workflow_id: str, epoch: int, engine_id: str) -> ClaimCondition:
    """The fence of a workflow-scoped write: this engine holds the claim at ``epoch``."""
    return ClaimCondition(workflow_id, epoch, (engine_id, None, None), "owner", "fence")
