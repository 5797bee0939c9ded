"""The schedule calls of the client: create, update, pause, resume, delete,
trigger, backfill, describe, list.

Invariants: every argument is validated before anything is written, and a
change of the row commits with the wake of the schedule's driver
(``engine.schedules.rows``). A run started here (trigger, backfill) is the
engine's one start write (``engine.operations.start``) counted on the row in
the same transaction; a backfilled tick's run is the one its idempotency
key names, so no tick is ever started twice.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from weft_django.client.aio import asyncify
from weft_django.client.handle import WorkflowHandle
from weft_django.engine.operations import signal
from weft_django.engine.operations.start import start_run
from weft_django.engine.schedules import rows
from weft_django.engine.schedules.ticking import spec_of
from weft_django.engine.workflow.definitions import workflow_name_of
from weft_django.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    ScheduleNotFound,
    WorkflowNotFound,
)
from weft_django.kernel.clock import now_ms
from weft_django.kernel.schedule_spec import (
    CHANGED_SIGNAL,
    DEFAULT_CATCHUP_WINDOW,
    ScheduleSpec,
    driver_workflow_id,
    tick_key,
    tick_workflow_id,
    ticks_after,
)
from weft_django.models import Schedule, WorkflowRun

MAX_BACKFILL_TICKS = 1000


def create_schedule(
    schedule_id: str,
    workflow: Any,
    input: Any = None,
    *,
    cron: str | None = None,
    every: timedelta | float | None = None,
    timezone: str = "UTC",
    overlap: str = "skip",
    catchup_window: timedelta | float = DEFAULT_CATCHUP_WINDOW,
    jitter: timedelta | float | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    paused: bool = False,
) -> dict[str, Any]:
    """Create a schedule; its driver starts at once. ``describe_schedule``'s dict.

    ``workflow``: a name, an ``@workflow`` function or a Django task of a
    ``WeftTaskBackend`` (its input: ``{"args": [...], "kwargs": {...}}``)."""
    spec = rows.validated(
        schedule_id,
        {
            "workflow": workflow_name_of(workflow),
            "input": input,
            "cron": cron,
            "every": every,
            "timezone": timezone,
            "overlap": overlap,
            "catchup_window": catchup_window,
            "jitter": jitter,
            "start_at": start_at,
            "end_at": end_at,
            "paused": paused,
        },
    )
    rows.insert(spec)
    return describe_schedule(spec.schedule_id)


acreate_schedule = asyncify(create_schedule)


def update_schedule(schedule_id: str, **fields: Any) -> dict[str, Any]:
    """Change some fields (those of ``create_schedule``); ``cron`` replaces ``every``
    and the other way round. Ticks already handled are not fired again."""
    row = rows.apply_update(schedule_id, fields)
    return describe_schedule(row.schedule_id)


aupdate_schedule = asyncify(update_schedule)


def pause_schedule(schedule_id: str) -> dict[str, Any]:
    """No tick fires until ``resume_schedule``; ticks meanwhile are not caught up."""
    rows.apply_update(schedule_id, {"paused": True})
    return describe_schedule(schedule_id)


apause_schedule = asyncify(pause_schedule)


def resume_schedule(schedule_id: str) -> dict[str, Any]:
    rows.apply_update(schedule_id, {"paused": False})
    return describe_schedule(schedule_id)


aresume_schedule = asyncify(resume_schedule)


def delete_schedule(schedule_id: str) -> None:
    """Delete the row; the driver sees it gone and completes. Runs stay."""
    schedule_id = rows.checked_id(schedule_id)
    db = rows.database()
    with transaction.atomic(using=db):
        deleted, _ = Schedule.objects.using(db).filter(pk=schedule_id).delete()
        if not deleted:
            raise ScheduleNotFound(schedule_id)
        # The driver sees the row gone and completes; no live driver: nothing to stop.
        with contextlib.suppress(InvalidTransitionError, WorkflowNotFound):
            signal(driver_workflow_id(schedule_id), CHANGED_SIGNAL, 0)


adelete_schedule = asyncify(delete_schedule)


def _start_counted(
    spec: ScheduleSpec, workflow_id: str, key: str | None, column: str
) -> WorkflowHandle:
    """Start one run and count it in ``column``, in one transaction; its handle."""
    db = rows.database()
    with transaction.atomic(using=db):
        run, created = start_run(spec.workflow, spec.input, workflow_id, key)
        if created:
            Schedule.objects.using(db).filter(pk=spec.schedule_id).update(**{column: F(column) + 1})
    return WorkflowHandle(str(run.workflow_id), str(run.pk))


def trigger_schedule(schedule_id: str) -> WorkflowHandle:
    """Start one run of the schedule now, outside its ticks (whatever the overlap
    policy); its handle."""
    row = rows.get_row(rows.checked_id(schedule_id))
    spec = spec_of(row)
    now = now_ms()
    workflow_id = f"{tick_workflow_id(spec.schedule_id, now)}-t{uuid.uuid4().hex[:6]}"
    return _start_counted(spec, workflow_id, None, "triggered_count")


atrigger_schedule = asyncify(trigger_schedule)


def _ms(value: datetime, what: str) -> int:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(
            what, f"backfill_schedule {what} must be an aware datetime, got {value!r:.100}"
        )
    return int(value.timestamp() * 1000)


def backfill_schedule(schedule_id: str, start: datetime, end: datetime) -> list[WorkflowHandle]:
    """Start the run of every tick in ``[start, end]`` that has none yet (each
    tick's run is the one its idempotency key names: a tick the driver fired,
    or an earlier backfill, is not started twice). The handles of every
    tick's run, in tick order."""
    row = rows.get_row(rows.checked_id(schedule_id))
    spec = spec_of(row)
    low, high = _ms(start, "start"), _ms(end, "end")
    if high < low:
        raise InvalidArgumentError("end", "backfill_schedule: end must not be before start")
    ticks: list[int] = []
    for tick in ticks_after(spec, low - 1):
        if tick > high:
            break
        ticks.append(tick)
        if len(ticks) > MAX_BACKFILL_TICKS:
            raise InvalidArgumentError(
                "end",
                f"backfill_schedule: more than {MAX_BACKFILL_TICKS} ticks in that range; split it",
            )
    handles = []
    for tick in ticks:
        handles.append(
            _start_counted(
                spec,
                tick_workflow_id(spec.schedule_id, tick),
                tick_key(spec.schedule_id, tick),
                "backfilled_count",
            )
        )
    return handles


abackfill_schedule = asyncify(backfill_schedule)


def describe_schedule(schedule_id: str, *, next_count: int = 5) -> dict[str, Any]:
    """The schedule, its next ``next_count`` fire times, tick counts and recent runs."""
    row = rows.get_row(rows.checked_id(schedule_id))
    out = rows.summary(row, next_count=next_count)
    out["recent_runs"] = rows.recent_runs(schedule_id)
    driver = WorkflowRun.objects.using(rows.database()).latest_for(driver_workflow_id(schedule_id))
    out["driver"] = {
        "workflow_id": driver_workflow_id(schedule_id),
        "status": None if driver is None else driver.status,
    }
    return out


adescribe_schedule = asyncify(describe_schedule)


def list_schedules() -> list[dict[str, Any]]:
    return [rows.summary(row) for row in Schedule.objects.using(rows.database()).all()]


alist_schedules = asyncify(list_schedules)


__all__ = [
    "MAX_BACKFILL_TICKS",
    "abackfill_schedule",
    "acreate_schedule",
    "adelete_schedule",
    "adescribe_schedule",
    "alist_schedules",
    "apause_schedule",
    "aresume_schedule",
    "atrigger_schedule",
    "aupdate_schedule",
    "backfill_schedule",
    "create_schedule",
    "delete_schedule",
    "describe_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "trigger_schedule",
    "update_schedule",
]
