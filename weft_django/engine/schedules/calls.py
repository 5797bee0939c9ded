"""The client calls of schedules: create, pause, resume, trigger, delete, ...

Why here and re-exported by ``engine.client``: client.py is shared by every
feature; this module holds the schedule half. These are client writes, like
``client.start``: they write the ``Schedule`` row's spec columns and wake
(or start) the schedule's driver workflow with one ``signal_with_start``.
Every argument is validated before anything is written (``build_spec``,
the workflow registry), so a bad call leaves the database as it was.

The driver (``ticking``) is the only writer of the tick columns; the
client only ``F()``-increments ``triggered``/``backfilled``.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from weft_django.clock import now_ms
from weft_django.conf import get_settings
from weft_django.engine.definitions import get_workflow, workflow_name_of
from weft_django.engine.operations import signal
from weft_django.engine.operations.signal_with_start import signal_with_start
from weft_django.engine.payload import normalize
from weft_django.engine.schedules.starting import start_run
from weft_django.engine.schedules.ticking import spec_of
from weft_django.errors import (
    InvalidArgumentError,
    InvalidTransitionError,
    ScheduleAlreadyExists,
    ScheduleNotFound,
    WeftError,
    WorkflowNotFound,
)
from weft_django.models import Schedule, WorkflowRun
from weft_django.schedule_spec import (
    CHANGED_SIGNAL,
    DEFAULT_CATCHUP_WINDOW,
    DRIVER_WORKFLOW,
    SPEC_FIELDS,
    ScheduleSpec,
    build_spec,
    driver_workflow_id,
    next_ticks,
    run_id_prefix,
    tick_key,
    tick_workflow_id,
    ticks_after,
    validate_schedule_id,
)

MAX_BACKFILL_TICKS = 1000


def _db() -> str:
    return get_settings().database


def _schedule_id(value: object) -> str:
    """``validate_schedule_id`` refusing with ``InvalidArgumentError`` (a ``ValueError``)."""
    try:
        return validate_schedule_id(value)
    except ValueError as exc:
        raise InvalidArgumentError("schedule_id", str(exc)) from None


def validated(schedule_id: object, fields: dict[str, Any]) -> ScheduleSpec:
    """``build_spec`` plus what the kernel cannot check: the workflow is
    registered here, the input is JSON of allowed size. A bad field is an
    ``InvalidArgumentError`` (a ``ValueError``, as ``build_spec`` raises for
    settings) naming it."""
    try:
        spec = build_spec(schedule_id, fields)
    except WeftError:
        raise
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError("schedule", str(exc)) from None
    get_workflow(spec.workflow)  # UnknownWorkflowType, naming it
    normalize(f"input of schedule {spec.schedule_id!r}", spec.input)
    return spec


def wake_driver(schedule_id: str, version: int) -> None:
    """Start the driver when it is not running, else signal it to look again."""
    signal_with_start(
        DRIVER_WORKFLOW,
        {"schedule_id": schedule_id},
        driver_workflow_id(schedule_id),
        CHANGED_SIGNAL,
        version,
    )


def _row(schedule_id: str, *, lock: bool = False) -> Schedule:
    qs = Schedule.objects.using(_db())
    if lock:
        qs = qs.select_for_update()
    row = qs.filter(pk=schedule_id).first()
    if row is None:
        raise ScheduleNotFound(schedule_id)
    return row


def insert(spec: ScheduleSpec, *, declared_spec: Any = None) -> Schedule:
    now = now_ms()
    row = Schedule(
        schedule_id=spec.schedule_id,
        declared=declared_spec is not None,
        declared_spec=declared_spec,
        since_ms=now,
        created_at_ms=now,
        updated_at_ms=now,
        **spec.fields(),
    )
    with transaction.atomic(using=_db()):
        if Schedule.objects.using(_db()).filter(pk=spec.schedule_id).exists():
            raise ScheduleAlreadyExists(spec.schedule_id)
        row.save(using=_db(), force_insert=True)
        wake_driver(spec.schedule_id, row.version)
    return row


def create_schedule(
    schedule_id: str,
    workflow: str,
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
    spec = validated(
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
    insert(spec)
    return describe_schedule(spec.schedule_id)


def _current_fields(row: Schedule) -> dict[str, Any]:
    spec = spec_of(row)
    fields = spec.fields()
    fields["every"] = None if spec.every_ms is None else timedelta(milliseconds=spec.every_ms)
    fields["catchup_window"] = timedelta(milliseconds=spec.catchup_window_ms)
    fields["jitter"] = None if spec.jitter_ms is None else timedelta(milliseconds=spec.jitter_ms)
    fields["start_at"], fields["end_at"] = spec.start_at_ms, spec.end_at_ms
    for key in ("every_ms", "catchup_window_ms", "jitter_ms", "start_at_ms", "end_at_ms"):
        del fields[key]
    return fields


def apply_update(schedule_id: str, fields: dict[str, Any], *, declared_spec: Any = ...) -> Schedule:
    """Merge ``fields`` over the stored spec, validate, write, wake the driver."""
    schedule_id = _schedule_id(schedule_id)
    unknown = sorted(set(fields) - set(SPEC_FIELDS))
    if unknown:
        raise InvalidArgumentError(
            "fields",
            f"update_schedule: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(SPEC_FIELDS)}",
        )
    db = _db()
    with transaction.atomic(using=db):
        row = _row(schedule_id, lock=True)
        was_paused = row.paused
        merged = _current_fields(row)
        merged.update(fields)
        if "cron" in fields and fields["cron"] is not None and "every" not in fields:
            merged["every"] = None
        if "every" in fields and fields["every"] is not None and "cron" not in fields:
            merged["cron"] = None
        spec = validated(schedule_id, merged)
        now = now_ms()
        for key, value in spec.fields().items():
            setattr(row, key, value)
        if was_paused and not spec.paused:
            row.since_ms = max(row.since_ms, now)  # a paused stretch is not caught up
        if declared_spec is not ...:
            row.declared = declared_spec is not None
            row.declared_spec = declared_spec
        row.version += 1
        row.updated_at_ms = now
        row.save(using=db)
        wake_driver(schedule_id, row.version)
    return row


def update_schedule(schedule_id: str, **fields: Any) -> dict[str, Any]:
    """Change some fields (those of ``create_schedule``); ``cron`` replaces ``every``
    and the other way round. Ticks already handled are not fired again."""
    row = apply_update(schedule_id, fields)
    return describe_schedule(row.schedule_id)


def pause_schedule(schedule_id: str) -> dict[str, Any]:
    """No tick fires until ``resume_schedule``; ticks meanwhile are not caught up."""
    apply_update(schedule_id, {"paused": True})
    return describe_schedule(schedule_id)


def resume_schedule(schedule_id: str) -> dict[str, Any]:
    apply_update(schedule_id, {"paused": False})
    return describe_schedule(schedule_id)


def delete_schedule(schedule_id: str) -> None:
    """Delete the row; the driver sees it gone and completes. Runs stay."""
    schedule_id = _schedule_id(schedule_id)
    db = _db()
    with transaction.atomic(using=db):
        deleted, _ = Schedule.objects.using(db).filter(pk=schedule_id).delete()
        if not deleted:
            raise ScheduleNotFound(schedule_id)
        # The driver sees the row gone and completes; no live driver: nothing to stop.
        with contextlib.suppress(InvalidTransitionError, WorkflowNotFound):
            signal(driver_workflow_id(schedule_id), CHANGED_SIGNAL, 0)


def _start_counted(
    spec: ScheduleSpec, workflow_id: str, key: str | None, column: str
) -> tuple[str, str]:
    """Start one run and count it in ``column``, in one transaction;
    ``(workflow_id, run_id)`` (``engine.client`` makes it a handle)."""
    db = _db()
    with transaction.atomic(using=db):
        run, created = start_run(spec.workflow, spec.input, workflow_id, key)
        if created:
            Schedule.objects.using(db).filter(pk=spec.schedule_id).update(**{column: F(column) + 1})
    return str(run.workflow_id), str(run.pk)


def trigger_schedule(schedule_id: str) -> tuple[str, str]:
    """Start one run now, outside the ticks (whatever the overlap policy);
    ``(workflow_id, run_id)``."""
    row = _row(_schedule_id(schedule_id))
    spec = spec_of(row)
    now = now_ms()
    workflow_id = f"{tick_workflow_id(spec.schedule_id, now)}-t{uuid.uuid4().hex[:6]}"
    return _start_counted(spec, workflow_id, None, "triggered_count")


def _ms(value: datetime, what: str) -> int:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidArgumentError(
            what, f"backfill_schedule {what} must be an aware datetime, got {value!r:.100}"
        )
    return int(value.timestamp() * 1000)


def backfill_schedule(schedule_id: str, start: datetime, end: datetime) -> list[tuple[str, str]]:
    """Start the run of every tick in ``[start, end]`` that has none yet (each
    tick's run is the one its idempotency key names: a tick the driver fired,
    or an earlier backfill, is not started twice). ``(workflow_id, run_id)``
    of each tick's run, in tick order."""
    row = _row(_schedule_id(schedule_id))
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


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    from datetime import UTC

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


COUNT_COLUMNS = (
    "fired",
    "skipped",
    "buffered",
    "missed",
    "triggered",
    "backfilled",
    "failed",
)


def summary(row: Schedule, *, next_count: int = 1) -> dict[str, Any]:
    """A JSON-ready view of a row (``list_schedules``; the admin; the API)."""
    spec = spec_of(row)
    upcoming: list[int] = []
    if not spec.paused:
        upcoming = next_ticks(spec, max(now_ms(), row.last_tick_ms or 0), next_count)
    return {
        "schedule_id": row.schedule_id,
        "workflow": row.workflow,
        "input": row.input,
        "cron": row.cron,
        "every_s": None if row.every_ms is None else row.every_ms / 1000,
        "timezone": row.timezone,
        "overlap": row.overlap,
        "catchup_window_s": row.catchup_window_ms / 1000,
        "jitter_s": None if row.jitter_ms is None else row.jitter_ms / 1000,
        "start_at": _iso(row.start_at_ms),
        "end_at": _iso(row.end_at_ms),
        "paused": row.paused,
        "declared": row.declared,
        "version": row.version,
        "next_fire_at": _iso(upcoming[0]) if upcoming else None,
        "next_fire_times": [_iso(t) for t in upcoming],
        "last_tick_at": _iso(row.last_tick_ms),
        "ticks": {name: getattr(row, f"{name}_count") for name in COUNT_COLUMNS},
    }


def recent_runs(schedule_id: str, limit: int = 10) -> list[dict[str, Any]]:
    runs = (
        WorkflowRun.objects.using(_db())
        .filter(workflow_id__startswith=run_id_prefix(schedule_id))
        .order_by("-created_at", "-pk")[:limit]
    )
    return [
        {
            "workflow_id": run.workflow_id,
            "run_id": str(run.pk),
            "status": run.status,
            "created_at": run.created_at.isoformat() if run.created_at else None,
        }
        for run in runs
    ]


def describe_schedule(schedule_id: str, *, next_count: int = 5) -> dict[str, Any]:
    """The schedule, its next ``next_count`` fire times, tick counts and recent runs."""
    row = _row(_schedule_id(schedule_id))
    out = summary(row, next_count=next_count)
    out["recent_runs"] = recent_runs(schedule_id)
    driver = WorkflowRun.objects.using(_db()).latest_for(driver_workflow_id(schedule_id))
    out["driver"] = {
        "workflow_id": driver_workflow_id(schedule_id),
        "status": None if driver is None else driver.status,
    }
    return out


def list_schedules() -> list[dict[str, Any]]:
    return [summary(row) for row in Schedule.objects.using(_db()).all()]


__all__ = [
    "MAX_BACKFILL_TICKS",
    "backfill_schedule",
    "create_schedule",
    "delete_schedule",
    "describe_schedule",
    "list_schedules",
    "pause_schedule",
    "resume_schedule",
    "summary",
    "trigger_schedule",
    "update_schedule",
]
