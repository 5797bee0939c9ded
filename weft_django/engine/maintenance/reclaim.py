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
import random
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, models, transaction

from weft_django import db as store
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance import BATCH
from weft_django.models import DRIVABLE_STATUSES, WorkflowClaim, WorkflowRun
from weft_django.models.querysets import owes_turn_q
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.batch import conditional_batch, is_retryable
from weft_django.ownership.ops import (
    BulkInsert,
    Condition,
    Insert,
    PutClaim,
    Write,
    WriteConflict,
)
from weft_django.ownership.registry import takeover_with_retries
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


#: Drivable runs one pass checks for a missing claim row (``ReclaimScan.unclaimed``).
SWEEP = 500


class ReclaimScan:
    """The reclaim half of the maintenance pass: runs whose holder expired, is
    absent or is gone, taken over and driven (a ``Maintenance`` mixin).

    Invariant: a claim is held only for a workflow with a drivable run; an
    acquire whose check could not run stays in ``unverified`` until a pass
    has checked it (and released it when there is nothing to drive).
    """

    engine: TurnHost

    def __init__(self) -> None:
        #: Where the next ``unclaimed`` window starts (a workflow id; "" = the start).
        self.sweep_after = ""
        #: Claims ``reclaim_one`` acquired whose run it has not yet found drivable.
        self.unverified: set[str] = set()
        #: workflow id -> when the reclaim scan first left it for an engine with
        #: room (``_within_room``); dropped once it is no longer found takeable.
        self.left_for_others: dict[str, int] = {}

    @property
    def db(self) -> str:
        return self.engine.settings.database

    def reclaim(self) -> int:
        """Take over runs whose holder expired, is absent or is gone, and drive them.

        A gone engine's claims are taken in batches (``engine.bulk_takeover``)
        where the database can; the rest one at a time on the turn threads.
        """
        engine = self.engine
        registry = engine.registry
        if registry is None or engine.halted:
            return 0
        if self.unverified:
            self.verify_acquired()
        now = engine.now_ms()
        grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * engine.settings.claim_renew_interval_ms
        stale = WorkflowClaim.objects.using(self.db).takeable(now, grace)
        gone = engine.gone_holders(refresh=True)
        bulk: list[tuple[str, str]] = []
        if gone and bulk_takeover_applies(engine):
            # Every claim of a gone engine this engine can lock, in batches; a
            # row another survivor locked is its to take, not one to retry here.
            while not engine.halted:
                got = take_over_gone(engine, gone, BATCH)
                bulk += got.taken
                if len(got.taken) < BATCH:
                    break
            gone = frozenset()
        for run_id, _ in bulk:
            engine.dispatch(run_id, "drive")
        if gone:
            # Holders whose database session ended: takeable before they expire.
            stale = stale | WorkflowClaim.objects.using(self.db).filter(engine_id__in=gone)
        # Driven from the claims: the takeable ones are few (the partial index
        # ``weft_claim_odd_idx`` and ``weft_claim_expires_idx`` find them).
        candidates = list(
            WorkflowRun.objects.using(self.db)
            .filter(status__in=DRIVABLE_STATUSES, workflow_id__in=stale.values("workflow_id"))
            .order_by()
            .values_list("pk", "workflow_id")[:BATCH]
        )
        if len(candidates) < BATCH:
            seen_ids = {pk for pk, _ in candidates}
            candidates += [
                c for c in self.unclaimed(BATCH - len(candidates)) if c[0] not in seen_ids
            ]
        tracked = set(registry.tracked())
        found = [(r, w) for r, w in candidates if w not in tracked]
        if len(found) > 1 and engine.scheduler.background:
            start = random.randrange(len(found))  # engines scanning together collide less
            found = found[start:] + found[:start]
        found = self._within_room(found, now)
        return len(bulk) + sum(
            1 for run_id, workflow_id in found if engine.dispatch_reclaim(run_id, workflow_id)
        )

    def _within_room(self, found: list[tuple[Any, str]], now: int) -> list[tuple[Any, str]]:
        """``found`` less what a scheduler that claims ahead of its turns has
        no room for.

        Such a scheduler (a Celery node: the claim is taken now, the turn
        waits in its queue) takes the runs that need a turn now only into
        its ``reclaim_capacity``; a run it leaves is an engine with room's to
        take, and it takes the run anyway by its next pass if it is still
        takeable (no engine had room, and a late turn is better than an
        owner-less run). A parked run with nothing due is taken (and driven:
        its takeover turn resumes what its old owner had under way) without
        counting against the room. Other schedulers claim on their own turn
        threads and take everything they find."""
        if not found or not self.engine.scheduler.claims_ahead_of_turns:
            self.left_for_others.clear()
            return found
        owing = set(
            WorkflowRun.objects.using(self.db)
            .filter(owes_turn_q(now), pk__in=[run_id for run_id, _ in found])
            .values_list("pk", flat=True)
        )
        room = self.engine.scheduler.reclaim_capacity(len(owing))
        # Half an interval: the next pass (passes are an interval apart, give or take).
        patience = self.engine.settings.claim_renew_interval_ms // 2
        left = self.left_for_others
        still = {workflow_id for _, workflow_id in found}
        for workflow_id in [w for w in left if w not in still]:
            del left[workflow_id]  # taken elsewhere, or no longer takeable
        kept: list[tuple[Any, str]] = []
        for run_id, workflow_id in found:
            if run_id in owing:
                if room > 0:
                    room -= 1
                elif now - left.setdefault(workflow_id, now) < patience:
                    continue  # left for an engine with room; the next pass looks again
            left.pop(workflow_id, None)
            kept.append((run_id, workflow_id))
        return kept

    def unclaimed(self, limit: int) -> list[tuple[Any, str]]:
        """Drivable runs with no claim row at all (``limit`` at most), looked for
        in a window of ``SWEEP`` runs per pass.

        Why a window: no index can list the runs a claim row is missing for, and
        reading every parked run each pass made a pass cost grow with the
        history. The window moves on in workflow-id order from where the last
        pass stopped and wraps around, so every drivable run is looked at within
        ceil(drivable / SWEEP) passes -- and in a store with at most ``SWEEP``
        drivable runs, every pass looks at all of them, as before. (Claim rows
        are never deleted: a run without one predates ``workflow-lease``.)
        """
        runs = (
            WorkflowRun.objects.using(self.db)
            .filter(status__in=DRIVABLE_STATUSES)
            .order_by("workflow_id")
            .values_list("pk", "workflow_id")
        )
        window = list(runs.filter(workflow_id__gt=self.sweep_after)[:SWEEP])
        if len(window) < SWEEP and self.sweep_after:  # the end: wrap around
            window += runs.filter(workflow_id__lte=self.sweep_after)[: SWEEP - len(window)]
        self.sweep_after = window[-1][1] if len(window) >= SWEEP else ""
        if not window:
            return []
        # By primary key, for the window's ids only (an EXISTS per row was
        # planned as a hash of every claim).
        claimed = set(
            WorkflowClaim.objects.using(self.db)
            .filter(workflow_id__in=[wid for _, wid in window])
            .values_list("workflow_id", flat=True)
        )
        return [(pk, wid) for pk, wid in window if wid not in claimed][:limit]

    def reclaim_one(self, workflow_id: str) -> bool:
        """Take over ``workflow_id``'s expired claim (or acquire a released one)."""
        engine = self.engine
        registry = engine.registry
        if registry is None:
            return False
        gone = engine.gone_holders()
        status = takeover_with_retries(registry, workflow_id, gone_holders=gone).status
        how = "took over"
        if status == "no-claim":  # released (e.g. a graceful shutdown): a plain acquire
            status = registry.acquire(workflow_id).status
            how = "acquired released"
        if status != "acquired":
            return False
        # The scan's read may be stale: another engine may have taken the claim
        # over, finished the run and released it since. A claim is held only
        # for a workflow with a drivable run: one held for nothing would be
        # renewed for nothing, and left behind if this engine died.
        # The acquire has committed: until the check below has run (and, when
        # there is nothing to drive, the release), the id stays in
        # ``unverified`` and every reclaim pass checks it again -- a database
        # that went away between the two would otherwise leave a claim held and
        # renewed for nothing until this engine stops (the chaos soak).
        self.unverified.add(workflow_id)
        if not self.has_drivable_run(workflow_id):
            registry.release(workflow_id)
            self.unverified.discard(workflow_id)
            return False
        self.unverified.discard(workflow_id)
        logger.info("engine %s %s %s", engine.engine_id, how, workflow_id)
        return True

    def has_drivable_run(self, workflow_id: str) -> bool:
        return (
            WorkflowRun.objects.using(self.db)
            .filter(workflow_id=workflow_id, status__in=DRIVABLE_STATUSES)
            .exists()
        )

    def verify_acquired(self) -> int:
        """Release the claims ``reclaim_one`` acquired but could not check
        (see there) whose workflow has nothing to drive; returns how many."""
        registry = self.engine.registry
        released = 0
        for workflow_id in list(self.unverified):
            try:
                if registry is not None and registry.current_epoch(workflow_id) is not None:
                    if self.has_drivable_run(workflow_id):
                        self.unverified.discard(workflow_id)  # the owned-run passes drive it
                        continue
                    registry.release(workflow_id)
                    released += 1
                self.unverified.discard(workflow_id)
            except DatabaseError:
                logger.info("could not check the claim of %s; the next pass will", workflow_id)
        return released


__all__ = [
    "SWEEP",
    "BulkTakeover",
    "ReclaimScan",
    "TakeoverClaims",
    "bulk_takeover_applies",
    "take_over_gone",
]
