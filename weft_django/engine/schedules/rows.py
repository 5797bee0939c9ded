"""A schedule's row: validated before it is written, its driver woken with it.

Invariants: every argument is validated before anything is written
(``build_spec``, the workflow registry), so a bad call leaves the database
as it was; a write of the spec columns and the wake of the schedule's
driver (one ``signal_with_start``) commit together. The driver
(``ticking``) is the only writer of the tick columns; everyone else only
``F()``-increments ``triggered``/``backfilled``. Used by the client's
schedule calls and by the boot-time sync of ``WEFT["SCHEDULES"]``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction

from weft_django.conf import get_settings
from weft_django.engine.operations.signal_with_start import signal_with_start
from weft_django.engine.schedules.ticking import spec_of
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    InvalidArgumentError,
    ScheduleAlreadyExists,
    ScheduleNotFound,
    WeftError,
)
from weft_django.kernel.clock import now_ms
from weft_django.kernel.schedule_spec import (
    CHANGED_SIGNAL,
    DRIVER_WORKFLOW,
    SPEC_FIELDS,
    ScheduleSpec,
    build_spec,
    driver_workflow_id,
    next_ticks,
    run_id_prefix,
    validate_schedule_id,
)
from weft_django.models import Schedule, WorkflowRun


def database() -> str:
    return get_settings().database


def checked_id(value: object) -> str:
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


def get_row(schedule_id: str, *, lock: bool = False) -> Schedule:
    qs = Schedule.objects.using(database())
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
    with transaction.atomic(using=database()):
        if Schedule.objects.using(database()).filter(pk=spec.schedule_id).exists():
            raise ScheduleAlreadyExists(spec.schedule_id)
        row.save(using=database(), force_insert=True)
        wake_driver(spec.schedule_id, row.version)
    return row


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
    schedule_id = checked_id(schedule_id)
    unknown = sorted(set(fields) - set(SPEC_FIELDS))
    if unknown:
        raise InvalidArgumentError(
            "fields",
            f"update_schedule: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(SPEC_FIELDS)}",
        )
    db = database()
    with transaction.atomic(using=db):
        row = get_row(schedule_id, lock=True)
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


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
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
        WorkflowRun.objects.using(database())
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


__all__ = [
    "COUNT_COLUMNS",
    "apply_update",
    "checked_id",
    "database",
    "get_row",
    "insert",
    "recent_runs",
    "summary",
    "validated",
    "wake_driver",
]
