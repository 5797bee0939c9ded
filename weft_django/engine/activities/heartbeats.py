"""The durable half of ``activity_info().heartbeat()``: one fenced write per beat.

The invariant: a heartbeat row is written only by the engine that holds the
workflow's fence, and only while the run is drivable (running or parked).
The same batch that writes the row checks both, so a heartbeat of an
attempt whose workflow was cancelled, suspended, timed out or taken over is
refused -- and the refusal is how the activity learns it must stop
(``ActivityCancelled``).

What it must never do: disturb the turn. The batch carries the claim (or
lease) fence but not the run's ``version`` and never bumps it, so the
turn's optimistic write of the same run still commits after any number of
heartbeats. It runs on the activity's own thread, on that thread's own
connection, outside any transaction of the turn.

An ``async def`` activity heartbeats on an event loop, where Django refuses
ORM calls (``SynchronousOnlyOperation``). There the batch runs on the
process's one heartbeat thread (which keeps its connection) and the loop
waits for it: one short batch at most once a second per attempt (the
throttle in ``activity_context``), so the refusal still reaches the activity
as an exception at the call. One thread is enough: a loop is one thread, so
its calls are serial anyway. ``close_heartbeat_thread()`` ends it and closes
its connection (an engine's dispose).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import DatabaseError, connections

from weft_django.engine.activities.info import HeartbeatSink
from weft_django.engine.db_connections import refresh_connections
from weft_django.errors import ActivityCancelled, EngineDeposedError
from weft_django.models import DRIVABLE_STATUSES, ActivityHeartbeat, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.fence import fence_conditions
from weft_django.ownership.host import OwnershipHost
from weft_django.ownership.ops import (
    ClaimCondition,
    Condition,
    Delete,
    Insert,
    LeaseCondition,
    RunCondition,
)

__all__ = ["CLAIM_LOST", "close_heartbeat_thread", "heartbeat_sink"]

logger = logging.getLogger("weft_django.engine")

CLAIM_LOST = "claim lost"
"""``ActivityCancelled.reason`` when the fence refused the heartbeat."""

_off_loop: ThreadPoolExecutor | None = None
_off_loop_lock = threading.Lock()


def heartbeat_sink(
    host: OwnershipHost, *, run_id: Any, workflow_id: str, position: int, attempt: int
) -> HeartbeatSink:
    """The ``HeartbeatSink`` of one attempt: each call is ONE fenced conditional batch.

    The batch upserts the ``ActivityHeartbeat`` row of ``(run_id, position)``
    under ``fence_conditions(host, workflow_id)`` and "the run is drivable".
    Raises ``ActivityCancelled("run is <status>")`` when the run is no longer
    drivable, ``ActivityCancelled("claim lost")`` when the fence fails (or no
    fence is held any more) while the run still is. A database error is
    logged and swallowed: progress is best effort, and losing one beat must
    not fail the activity (the next due beat carries the latest details).
    """
    db = host.settings.database

    def write(details: Any) -> None:
        try:
            fence = fence_conditions(host, workflow_id)
        except EngineDeposedError:
            raise ActivityCancelled(workflow_id, _refusal(run_id, db)) from None
        drivable = RunCondition(run_id, statuses=DRIVABLE_STATUSES, label="heartbeat-run")
        row = ActivityHeartbeat(
            run_id=run_id,
            position=position,
            attempt=attempt,
            details=details,
            beat_at=host.now_ms(),
            engine_id=host.engine_id,
            epoch=_fence_epoch(fence),
        )
        try:
            # The run's status is checked first: when the run was stopped (which
            # also rotates the claim), its status is the reason the activity sees.
            result = conditional_batch(
                [drivable, *fence],
                [Delete(ActivityHeartbeat, {"run_id": run_id, "position": position}), Insert(row)],
                using=db,
            )
        except DatabaseError as exc:
            logger.warning(
                "heartbeat of the activity at position %d of workflow %r (attempt %d) was "
                "not stored: %s",
                position,
                workflow_id,
                attempt,
                exc,
            )
            return
        if result.committed:
            return
        failed = result.failed_condition
        if failed is not drivable and not any(failed is f for f in fence):
            raise RuntimeError(f"heartbeat batch failed on an unexpected condition {failed!r}")
        raise ActivityCancelled(workflow_id, _refusal(run_id, db))

    def sink(details: Any) -> None:
        if _on_event_loop():
            _run_off_loop(write, details)
        else:
            write(details)

    return sink


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_off_loop(write: Callable[[Any], None], details: Any) -> None:
    """``write(details)`` on a heartbeat thread; its exception is raised here."""
    global _off_loop
    with _off_loop_lock:
        if _off_loop is None:
            _off_loop = ThreadPoolExecutor(1, thread_name_prefix="weft-heartbeat")
        pool = _off_loop

    def on_thread() -> None:
        refresh_connections()  # a broken connection is dropped, a healthy one kept
        write(details)

    pool.submit(on_thread).result()


def close_heartbeat_thread() -> None:
    """End the heartbeat thread (if one was started) and close its connections."""
    global _off_loop
    with _off_loop_lock:
        pool, _off_loop = _off_loop, None
    if pool is not None:
        pool.submit(connections.close_all).result()
        pool.shutdown(wait=True)


def _fence_epoch(fence: list[Condition]) -> int:
    """The epoch the fence holds (0 under ``OWNERSHIP="none"``: no epoch)."""
    for condition in fence:
        if isinstance(condition, ClaimCondition | LeaseCondition):
            return condition.epoch
    return 0


def _refusal(run_id: Any, db: str) -> str:
    """Why a heartbeat was refused, read after the refusal.

    ``"run is <status>"`` when the run is no longer drivable (cancelled,
    suspended, timed out...: stopping a run also rotates its claim, and the
    status is the reason that matters to the activity), ``"run no longer
    exists"`` after a purge, else ``CLAIM_LOST``: another engine holds the
    workflow now (a takeover, a force release).
    """
    found = WorkflowRun.objects.using(db).filter(pk=run_id).values_list("status", flat=True)
    status = found.first()
    if status is None:
        return "run no longer exists"
    return CLAIM_LOST if status in DRIVABLE_STATUSES else f"run is {status}"
