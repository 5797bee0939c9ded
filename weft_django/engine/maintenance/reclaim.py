"""Reclaim (SPEC §4.4): the maintenance pass's takeover of runs whose claim holder
expired, is absent or is gone, and its check that every held claim has a drivable run.

The invariant is the takeover's own: a claim changes hands only through the exact-holder
CAS at stored epoch + 1, with a ``takeover`` event, and the registry tracks it only once
that commit is durable. A gone engine's claims are first taken in one batch where the
database allows it (``bulk_takeover``); the rest, one at a time
(``takeover_with_retries``).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from django.db import DatabaseError

from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance import BATCH
from weft_django.engine.maintenance.bulk_takeover import bulk_takeover_applies, take_over_gone
from weft_django.models import DRIVABLE_STATUSES, WorkflowClaim, WorkflowRun
from weft_django.models.querysets import owes_turn_q
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.registry import takeover_with_retries

logger = logging.getLogger("weft_django.engine")


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


__all__ = ["SWEEP", "ReclaimScan"]
