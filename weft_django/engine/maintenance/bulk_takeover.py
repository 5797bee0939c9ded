"""Bulk takeover: a gone engine's claims taken over in one batch (SPEC §4.4).

The invariant is the takeover's own: a claim changes hands only through the
exact-holder CAS at stored epoch + 1, with a ``takeover`` event, and the
registry tracks it only once that commit is durable.

Why a batch: after an engine's session ended (``ownership.presence``) every
claim it held is takeable at once; taken one at a time on the turn threads
(a read and a CAS each) a hundred of them queued behind each other and the
last waited over a second. Where the database has ``SKIP LOCKED``,
``take_over_gone`` locks up to ``limit`` claim rows held by a gone engine
whose workflow has a drivable run, without waiting for a row another
transaction holds (a second survivor takes it: survivors share the work),
and commits every ``build_takeover`` as ONE conditional batch: its claim
writes as one ``UPDATE … FROM (VALUES …)`` (``TakeoverClaims``), its
``takeover`` events as one ``INSERT``. Its conditions hold because the rows
are locked, and still are checked by the batch; the ``UPDATE`` repeats the
fence in its own ``WHERE`` (each row only at the epoch read) and a row
count short of the batch fails it as a whole. A holder that is not gone is
not selected, and the exact-holder CAS would refuse a changed one anyway.
Expired-by-TTL holders, released claims and SQLite stay with the
one-at-a-time reclaim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import DatabaseError, models, transaction

from weft_django import db as store
from weft_django.engine.host import TurnHost
from weft_django.models import DRIVABLE_STATUSES
from weft_django.ownership.batch import conditional_batch, is_retryable
from weft_django.ownership.ops import (
    BulkInsert,
    Condition,
    Insert,
    PutClaim,
    Write,
    WriteConflict,
)
from weft_django.ownership.slots import carry_on_takeover
from weft_django.ownership.transitions import ClaimSnapshot, Transition, build_takeover

logger = logging.getLogger("weft_django.engine")


@dataclass
class BulkTakeover:
    """What one bulk takeover did."""

    #: ``(run_id, workflow_id)`` whose claims this engine holds now: drive them.
    taken: list[tuple[str, str]] = field(default_factory=list)
    #: Locked rows this pass looked at (taken, or skipped for this engine's cooldown).
    seen: int = 0


@dataclass(frozen=True)
class TakeoverClaims:
    """Every claim write of one bulk takeover as ONE conditional ``UPDATE``.

    ``puts``: each ``PutClaim`` with the epoch its condition read. Each row
    is written only at that epoch (the fence, again in the statement); when
    fewer rows match than there are puts, ``WriteConflict`` on ``condition``
    undoes the whole batch. Not PostgreSQL: one ``PutClaim`` at a time.
    """

    puts: tuple[tuple[PutClaim, int], ...]
    condition: Condition

    def apply(self, using: str) -> None:
        if not self.puts:
            return
        vendor = store.ops(using)
        if not vendor.supports_bulk_claim_update:
            for put, _ in self.puts:
                put.apply(using)
            return
        rows = [
            (put.workflow_id, read_epoch, put.epoch, *put.holder) for put, read_epoch in self.puts
        ]
        if vendor.bulk_put_claims(using, rows) != len(self.puts):
            raise WriteConflict(self.condition)


def bulk_takeover_applies(engine: TurnHost) -> bool:
    """``SKIP LOCKED`` on this database and per-workflow claims to take."""
    return (
        engine.ownership == "workflow-lease"
        and engine.registry is not None
        and store.ops(engine.settings.database).supports_skip_locked
    )


def take_over_gone(engine: TurnHost, gone: frozenset[str], limit: int) -> BulkTakeover:
    """Take over up to ``limit`` claims of the ``gone`` engines in one batch.

    Only when ``bulk_takeover_applies(engine)``. Returns after one
    transaction; nothing in it waits for a row another transaction holds.
    """
    registry = engine.registry
    assert registry is not None
    db = engine.settings.database
    out = BulkTakeover()
    if not gone or limit <= 0:
        return out
    now = engine.now_ms()
    adopted: list[tuple[str, str, Transition]] = []
    previous: dict[str, str] = {}  # workflow id -> the gone engine it was taken from
    try:
        with transaction.atomic(using=db):
            rows = store.ops(db).lock_gone_claims_skip_locked(
                db, sorted(gone), sorted(DRIVABLE_STATUSES), limit
            )
            out.seen = len(rows)
            conditions: list[Condition] = []
            writes: list[Write] = []
            events: list[models.Model] = []
            puts: list[tuple[PutClaim, int]] = []
            batch: list[tuple[str, str, Transition]] = []
            for locked in rows:
                if registry.cooldown.is_active(locked.workflow_id, now):
                    registry.metrics.record_claim_attempt("backoff_skipped")
                    continue
                snapshot = ClaimSnapshot(locked.workflow_id, *locked.row)
                transition = build_takeover(
                    snapshot, engine_id=engine.engine_id, now=now, ttl_ms=registry.claim_ttl_ms
                )
                conditions += transition.conditions
                for write in transition.writes:
                    if isinstance(write, Insert):  # its ClaimEvent: one INSERT for all
                        events.append(write.instance)
                    elif isinstance(write, PutClaim):  # its claim: one UPDATE for all
                        puts.append((write, snapshot.epoch))
                    else:
                        writes.append(write)
                batch.append((locked.run_id, locked.workflow_id, transition))
                previous[locked.workflow_id] = snapshot.engine_id or ""
            if batch:
                writes.append(TakeoverClaims(tuple(puts), conditions[0]))
                writes.append(BulkInsert(events))
                # Queue slots go on with the new generations (``ownership.slots``).
                moves = [(put.workflow_id, old, put.epoch) for put, old in puts]
                writes += carry_on_takeover(moves, now)
                result = conditional_batch(conditions, writes, using=db)
                if result.committed:
                    adopted = batch
                else:  # not expected under these locks: the one-at-a-time path decides
                    logger.info(
                        "bulk takeover refused (%s); the next pass retries",
                        result.failed_condition,
                    )
    except DatabaseError as exc:
        if not is_retryable(exc):
            raise
        # Locks taken in the global order cannot deadlock with a batch; a busy
        # or serialization error means nothing was taken: the next pass retries.
        logger.info("bulk takeover lost a lock race; the next pass retries", exc_info=True)
        return BulkTakeover()
    # Durable now: track each claim (the renewals keep it from here).
    for run_id, workflow_id, transition in adopted:
        registry.adopt_taken_over(workflow_id, transition, previous.get(workflow_id))
        out.taken.append((run_id, workflow_id))
    if out.taken:
        logger.info(
            "engine %s took over %d claims of gone engine(s) %s in one batch",
            engine.engine_id,
            len(out.taken),
            ", ".join(sorted(gone)),
        )
    return out


__all__ = ["BulkTakeover", "TakeoverClaims", "bulk_takeover_applies", "take_over_gone"]
