"""The maintenance pass of one engine (SPEC §2 "Maintenance", §4.4).

Renewal is separate (``renew``) so the background mode can run it on its
own thread. ``find_and_dispatch`` finds, in one pass: runs past their
execution deadline (any engine may time them out), stale claims to take
over and recover (reclaim scan), due timers and wakes of runs this engine
owns, runs whose turn stopped half-way, and pending runs to pick up — the
pickup folds the claim's acquire into the pending→running write.

A pass also says whether it found work besides pickups (``found_work``) and,
when it did not, how soon the database says work falls due (``due_in_ms``):
the background poll loop backs off on that (``engine.poll_cadence``).
"""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connections
from django.db.models import F, Q, QuerySet

from weft_django.engine import operations
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance.pickup import (
    announce_started,
    batch_applies,
    pending_due,
    pick_up_batch,
    pickup_parts,
)
from weft_django.engine.maintenance.reclaim import bulk_takeover_applies, take_over_gone
from weft_django.engine.queues.flow import admit_pending
from weft_django.kernel.vocab import TIMER_WAKE_KIND, timer_wake_kind
from weft_django.models import (
    DRIVABLE_STATUSES,
    LIVE_STATUSES,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.models.querysets import out_of_backoff_q, owes_turn_q
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.fold import commit_enabling_write
from weft_django.ownership.registry import takeover_with_retries

logger = logging.getLogger("weft_django.engine")

BATCH = 100
#: Drivable runs one pass checks for a missing claim row (``Maintenance.unclaimed``).
SWEEP = 500


class Maintenance:
    """The finding half of an engine; where found turns run is ``engine.scheduler``'s."""

    def __init__(self, engine: TurnHost) -> None:
        self.engine = engine
        self.heartbeat_due = 0
        self.retention_due = 0
        #: The last full pass found work besides pickups (timeouts, takeovers,
        #: timers, wakes, stranded runs not in flight).
        self.found_work = True
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

    # -- renewal ---------------------------------------------------------------
    def renew(self) -> None:
        engine = self.engine
        if engine.registry is not None:
            engine.registry.renew_all()
        if engine.lease is not None and not engine.lease.deposed:
            engine.lease.renew_once()
        now = engine.now_ms()
        if now >= self.heartbeat_due and engine.booted:
            engine.heartbeat()
            self.heartbeat_due = now + engine.settings.claim_renew_interval_ms

    # -- scope -------------------------------------------------------------------
    def owned(self, runs: QuerySet[WorkflowRun]) -> QuerySet[WorkflowRun] | None:
        engine = self.engine
        if engine.registry is not None:
            mine = WorkflowClaim.objects.using(self.db).filter(engine_id=engine.engine_id)
            return runs.filter(workflow_id__in=mine.values("workflow_id"))
        if engine.lease is not None and (engine.lease.epoch is None or engine.lease.deposed):
            return None
        return runs

    # -- the pass ------------------------------------------------------------------
    def find_and_dispatch(self) -> int:
        engine = self.engine
        if engine.halted:
            return 0
        found = 0
        self.found_work = True
        self.apply_retention()
        found += self.time_out_expired_runs()
        found += self.reclaim()
        runs = WorkflowRun.objects.using(self.db)
        owned = self.owned(runs)
        if owned is None:
            return found
        now = engine.now_ms()
        # A run waiting out a failed turn's backoff is not driven before its
        # ``turn_retry_at`` (``engine.turn_failures``): no timer, wake or
        # re-drive of it now, so a turn that keeps raising is no hot loop.
        owned = owned.filter(out_of_backoff_q(now))
        seen: set[str] = set()
        handed_over = engine.scheduler.dispatch_timers(owned, now)
        if handed_over is not None:
            # The scheduler handed the timers over itself (each timer once) and
            # returned the runs it dispatched for a turn now.
            seen.update(str(r) for r in handed_over)
            due: Any = ()
        else:
            due = (
                Timer.objects.using(self.db)
                .due(now)
                .filter(run__in=owned.values("pk"))
                .values_list("run_id", "kind")
                .order_by("fire_at")[: BATCH * 4]
            )
        for run_id, kind in due:
            if str(run_id) not in seen:
                seen.add(str(run_id))
                engine.dispatch(run_id, timer_wake_kind(kind))
        woken = owned.filter(status="parked", wake_seq__gt=F("parked_seq")).values_list(
            "pk", flat=True
        )[:BATCH]
        for run_id in woken:
            if str(run_id) not in seen:
                seen.add(str(run_id))
                engine.dispatch(run_id, "signal")
        stranded: Any = engine.scheduler.find_stranded(owned, now)
        if stranded is None:
            stranded = owned.filter(status="running").values_list("pk", flat=True)[:BATCH]
        busy = found + len(seen)
        for run_id in stranded:
            if str(run_id) not in seen:
                seen.add(str(run_id))
                # A turn in flight is no new work: it ends and leaves the run.
                busy += not engine.scheduler.is_inflight(str(run_id))
                engine.dispatch(run_id, "drive")
        found += len(seen)
        self.found_work = busy > 0
        found += self.pick_up_pending()
        return found

    def due_in_ms(self) -> int | None:
        """How soon (ms from now) known work falls due: the earliest timer or
        deadline of a parked run (``wake_at``), delayed start, deadline, or
        failed turn's retry of any live run; ``None`` when nothing is known.
        One statement, run only by a pass about to back off."""
        now = self.engine.now_ms()
        runs = WorkflowRun.objects.using(self.db).order_by()
        live = runs.filter(status__in=LIVE_STATUSES)
        # The earliest of each column, each an ordered LIMIT 1 an index answers
        # (``weft_run_status_wake_idx``, the ``weft_run_live_*_idx`` partial
        # ones): a MIN over every live run read every parked run.
        earliest = [
            runs.filter(status="parked", wake_at__isnull=False)
            .order_by("wake_at")
            .values("wake_at")[:1],
            runs.filter(status="pending", start_at__isnull=False)
            .order_by("start_at")
            .values("start_at")[:1],
            live.filter(deadline_at__isnull=False)
            .order_by("deadline_at")
            .values("deadline_at")[:1],
            live.filter(cancel_deadline_at__isnull=False)
            .order_by("cancel_deadline_at")
            .values("cancel_deadline_at")[:1],
            live.filter(turn_retry_at__isnull=False)
            .order_by("turn_retry_at")
            .values("turn_retry_at")[:1],
        ]
        connection = connections[self.db]
        parts = [qs.query.get_compiler(connection=connection).as_sql() for qs in earliest]
        sql = "SELECT " + ", ".join(f"({part_sql})" for part_sql, _ in parts)
        with connection.cursor() as cursor:
            cursor.execute(sql, [p for _, part_params in parts for p in part_params])
            row = cursor.fetchone()
        times = [t for t in row if t is not None]
        return max(0, min(times) - now) if times else None

    def apply_retention(self) -> int:
        """``RETENTION``: purge terminal runs older than it, at most once per renew interval.

        Runs in the maintenance pass, never in the renewal slot, so a large
        purge cannot delay renewals; each pass purges at most ``BATCH`` ids.
        """
        engine = self.engine
        retention_ms = engine.settings.retention_ms
        now = engine.now_ms()
        if retention_ms is None or now < self.retention_due:
            return 0
        self.retention_due = now + engine.settings.claim_renew_interval_ms
        try:
            return operations.purge_older_than(
                timedelta(milliseconds=retention_ms), actor=engine.engine_id, limit=BATCH
            )
        except Exception:
            logger.warning("retention pass failed", exc_info=True)
            return 0

    def time_out_expired_runs(self) -> int:
        """End live runs past their execution deadline (``timed_out``) or past
        their cancel grace (``cancelled``): one statement for both."""
        now = self.engine.now_ms()
        expired = WorkflowRun.objects.using(self.db).filter(
            Q(deadline_at__lte=now) | Q(cancel_deadline_at__lte=now), status__in=LIVE_STATUSES
        )[:BATCH]
        count = 0
        actor = self.engine.engine_id
        for run in expired:
            if run.cancel_deadline_at is not None and run.cancel_deadline_at <= now:
                ended = operations.end_cancel_grace(run, actor=actor)
            else:
                ended = operations.timeout(run, actor=actor)
            if ended is not None:
                count += 1
        return count

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

    def pick_up_pending(self) -> int:
        engine = self.engine
        if engine.halted or (engine.lease is not None and engine.lease.epoch is None):
            return 0
        admitted, left = 0, False
        if engine.settings.queues:  # the runs of a queue: admitted with a slot
            limit = engine.scheduler.pickup_capacity(BATCH)
            handoffs = admit_pending(engine, limit)
            for handoff in handoffs:
                engine.dispatch_handoff(handoff)
            admitted = len(handoffs)
            # A full admission may have left runs behind: pick up again once there is room.
            left = admitted >= limit
        if batch_applies(engine):
            return admitted + self.pick_up_batch(left)
        runs = list(pending_due(engine)[:BATCH])
        if len(runs) > 1 and engine.scheduler.background:
            # Engines polling together read the same oldest runs; starting each
            # at its own random point makes them race for the same run less.
            # (Inline — tests, the demo — runs keep their creation order.)
            start = random.randrange(len(runs))
            runs = runs[start:] + runs[:start]
        count = 0
        for run in runs:
            if engine.dispatch_pickup(run):
                count += 1
        return admitted + count

    def pick_up_batch(self, left: bool = False) -> int:
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


__all__ = ["BATCH", "SWEEP", "TIMER_WAKE_KIND", "Maintenance"]
