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

from django.db.models import F, Q, QuerySet

from weft_django.db.portable import first_values
from weft_django.engine import operations
from weft_django.engine.host import TurnHost
from weft_django.engine.maintenance import BATCH
from weft_django.engine.maintenance.admission import admit_pending
from weft_django.engine.maintenance.pickup import (
    PendingPickup,
    batch_applies,
    pending_due,
)
from weft_django.engine.maintenance.reclaim import ReclaimScan
from weft_django.kernel.vocab import TIMER_WAKE_KIND, timer_wake_kind
from weft_django.models import (
    LIVE_STATUSES,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.models.querysets import out_of_backoff_q

logger = logging.getLogger("weft_django.engine")


class Maintenance(ReclaimScan, PendingPickup):
    """The finding half of an engine; where found turns run is ``engine.scheduler``'s."""

    def __init__(self, engine: TurnHost) -> None:
        self.engine = engine
        self.heartbeat_due = 0
        self.retention_due = 0
        #: The last full pass found work besides pickups (timeouts, takeovers,
        #: timers, wakes, stranded runs not in flight).
        self.found_work = True
        ReclaimScan.__init__(self)

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
        row = first_values(self.db, earliest)
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
            return admitted + self.pick_up_what_fits(left)
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


__all__ = ["TIMER_WAKE_KIND", "Maintenance"]
