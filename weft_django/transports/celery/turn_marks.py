"""Turn marks: turns of one run never overlap inside a node.

A turn takes the run's mark (``WorkflowRun.turn_pid``, ``turn_started_at``)
with a compare-and-set on the WHOLE mark and clears it at the end; a live
mark of another process means "busy" (the message comes back shortly).
There is no live turn under a mark that is empty, the main process's
pickup hand-off, or older than the current claim (another engine's); a
mark whose process is gone is free too -- and, written under the current
claim, it is a turn that died with its pool process: the next turn counts
it toward ``MAX_RECOVERY_ATTEMPTS`` (``ClaimRegistry.note_turn_died``),
as a takeover's first turn counts its dead engine's. The node's main process re-drives
its ``running`` runs whose mark has had no live turn for one renew
interval, or whose turn process died (a pool child killed mid-turn).

Fencing exemption: turn marks are scheduling marks, not workflow state.
They are written with plain ``.update()``, never through the fenced batch,
and are never part of a fence condition: a wrong mark can delay a turn or
start a duplicate one, and the duplicate's fenced commit is what fails.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Literal

from django.db.models import OuterRef, QuerySet, Subquery

from weft_django.models import DRIVABLE_STATUSES, WorkflowClaim, WorkflowRun
from weft_django.models.querysets import out_of_backoff_q

if TYPE_CHECKING:
    from weft_django.engine import Engine
    from weft_django.transports.celery.identity import NodeIdentity

logger = logging.getLogger("weft_django.transports.celery")

BATCH = 100

TakeOutcome = Literal["ok", "busy", "gone"]


class DrivingRuns:
    """The runs whose turn THIS process is driving now (threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: set[str] = set()

    def enter(self, run_id: str) -> bool:
        """Start driving ``run_id``; ``False`` if this process already does."""
        with self._lock:
            if run_id in self._runs:
                return False
            self._runs.add(run_id)
            return True

    def leave(self, run_id: str) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def snapshot(self) -> set[str]:
        with self._lock:
            return set(self._runs)

    def __contains__(self, run_id: object) -> bool:
        with self._lock:
            return run_id in self._runs

    def clear(self) -> None:
        with self._lock:
            self._runs.clear()


def no_live_turn_under(
    pid: int | None, started: int | None, claimed: int | None, ident: NodeIdentity
) -> bool:
    """No turn is (or can be) running under this mark: empty, the main process's
    pickup hand-off, or written before the current claim (another engine's)."""
    return (
        pid is None
        or pid == ident.main_pid
        or started is None
        or (claimed is not None and started < claimed)
    )


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (a dead child awaiting its reap)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def pool_pids(worker: Any) -> set[int] | None:
    """The worker's live pool processes (Celery's public ``pool.info``), or
    ``None`` when the pool does not list them (threads) or is not up."""
    pool = getattr(worker, "pool", None)
    try:
        processes = pool.info.get("processes") if pool is not None else None
    except Exception:  # a pool that is not started (or already stopped)
        return None
    if not isinstance(processes, list):
        return None
    return {int(pid) for pid in processes if pid}


def turn_process_alive(pid: int, pool: set[int] | None) -> bool:
    if pool is not None and pid not in pool:
        return False
    return pid_alive(pid)


def take_turn(
    engine: Engine,
    run_id: str,
    claimed_at: int | None,
    ident: NodeIdentity,
    driving: DrivingRuns,
) -> TakeOutcome:
    """``ok`` (this process now drives ``run_id``), ``busy`` or ``gone``."""
    if not driving.enter(run_id):
        return "busy"
    taken = False
    try:
        db = engine.settings.database
        row = (
            WorkflowRun.objects.using(db)
            .filter(pk=run_id)
            .values_list("status", "turn_pid", "turn_started_at", "workflow_id")
            .first()
        )
        if row is None or row[0] not in DRIVABLE_STATUSES:
            return "gone"
        _, pid, started, workflow_id = row
        # A mark of a turn under this claim whose process is gone: that turn
        # died with its pool process (``os._exit``, the OOM killer).
        died = (
            pid is not None
            and pid != os.getpid()
            and not no_live_turn_under(pid, started, claimed_at, ident)
            and not pid_alive(pid)
        )
        free = pid == os.getpid() or no_live_turn_under(pid, started, claimed_at, ident) or died
        if not free:
            return "busy"
        cas = WorkflowRun.objects.using(db).filter(pk=run_id, status__in=DRIVABLE_STATUSES)
        cas = cas.filter(turn_pid__isnull=True) if pid is None else cas.filter(turn_pid=pid)
        # The whole mark, not only the pid: a pickup re-stamps its own mark
        # (same pid, fresh time) right after committing; a sibling that read
        # the older stamp must not take the turn over.
        cas = (
            cas.filter(turn_started_at__isnull=True)
            if started is None
            else cas.filter(turn_started_at=started)
        )
        if not cas.update(turn_pid=os.getpid(), turn_started_at=engine.now_ms()):
            return "busy"
        if died and engine.registry is not None:
            # Counted by the turn (``engine.turn.failures.note_recovery``), so a
            # body that kills its pool process ends ``CrashLoopError`` as it
            # does on standalone engines, instead of killing pool processes forever.
            engine.registry.note_turn_died(workflow_id, f"{engine.engine_id} pid {pid}")
        taken = True
        return "ok"
    finally:
        if not taken:
            driving.leave(run_id)


def restamp_pickup(engine: Engine, run_id: Any) -> bool:
    """After a pickup committed: re-stamp this process's mark (the pickup
    stamped it before the claim's ``claimed_at``) so a sibling sees a live turn."""
    return bool(
        WorkflowRun.objects.using(engine.settings.database)
        .filter(pk=run_id, turn_pid=os.getpid())
        .update(turn_started_at=engine.now_ms())
    )


def leave_turn(engine: Engine, run_id: str, driving: DrivingRuns) -> bool:
    """Clear this process's mark; ``False`` if it could not (clear it later)."""
    try:
        WorkflowRun.objects.using(engine.settings.database).filter(
            pk=run_id, turn_pid=os.getpid()
        ).update(turn_pid=None)
        return True
    except Exception:
        logger.warning("could not clear the turn mark of %s", run_id, exc_info=True)
        return False
    finally:
        driving.leave(run_id)


def clear_leftover_marks(engine: Engine, driving: DrivingRuns) -> bool:
    """Clear this process's marks on this engine's runs it no longer drives."""
    db = engine.settings.database
    mine = WorkflowClaim.objects.using(db).filter(engine_id=engine.engine_id)
    try:
        WorkflowRun.objects.using(db).filter(
            turn_pid=os.getpid(), workflow_id__in=mine.values("workflow_id")
        ).exclude(pk__in=list(driving.snapshot())).update(turn_pid=None)
        return True
    except Exception:
        logger.warning("could not clear leftover turn marks", exc_info=True)
        return False


def drop_child_mark(using: str, run_id: Any) -> None:
    """A child's insert stamped this process's pid; this process will not drive it."""
    WorkflowRun.objects.using(using).filter(pk=run_id, turn_pid=os.getpid()).update(turn_pid=None)


def find_stranded(
    owned: QuerySet[WorkflowRun],
    now: int,
    *,
    using: str,
    interval_ms: int,
    ident: NodeIdentity,
    driving: DrivingRuns,
    pool: set[int] | None,
) -> list[Any]:
    """``running`` runs whose turn is nobody's: the main process re-drives them."""
    claims = WorkflowClaim.objects.using(using).filter(workflow_id=OuterRef("workflow_id"))
    rows = (
        owned.filter(status="running")
        .filter(out_of_backoff_q(now))  # a failed turn's backoff (engine.turn_failures)
        .annotate(c_claimed=Subquery(claims.values("claimed_at")[:1]))
        .values_list("pk", "turn_pid", "turn_started_at", "c_claimed")[:BATCH]
    )
    in_process = driving.snapshot()
    stranded: list[Any] = []
    for pk, pid, started, claimed in rows:
        if str(pk) in in_process:
            continue
        if no_live_turn_under(pid, started, claimed, ident):
            if started is None or now - started >= interval_ms:
                stranded.append(pk)
        elif pid is not None and not turn_process_alive(pid, pool):
            logger.info("run %s: its turn process %s is gone; re-driving it", pk, pid)
            stranded.append(pk)
    return stranded


__all__ = [
    "DrivingRuns",
    "clear_leftover_marks",
    "drop_child_mark",
    "find_stranded",
    "leave_turn",
    "no_live_turn_under",
    "pid_alive",
    "pool_pids",
    "restamp_pickup",
    "take_turn",
]
