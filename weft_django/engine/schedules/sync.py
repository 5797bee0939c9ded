"""``WEFT["SCHEDULES"]``: declared schedules synced when an engine boots.

Why a sync and not a source of truth read on every tick: a schedule is a
row the admin and API can pause or change; the declaration says what the
code wants. The invariants protected:

- **idempotent**: an engine that boots with the same declaration changes
  nothing (the normalised declaration last applied is stored in
  ``declared_spec``; an operator's pause in the admin survives a restart);
  any number of engines booting at once converge (a lost insert race is
  re-read and compared);
- a **changed** entry is applied (its ``paused`` too) and the driver woken;
- a **removed** entry is paused, never deleted, with a
  ``WeftScheduleRemovedWarning`` -- once: the row is then no longer
  ``declared``.

Every write is a schedule row write (``rows``), as the client makes it.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from django.core import checks
from django.db import IntegrityError

from weft_django.conf import CHECK_IDS, WeftSettings
from weft_django.engine.schedules import rows
from weft_django.engine.workflow.definitions import get_workflow, registry
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import ScheduleAlreadyExists
from weft_django.kernel.schedule_spec import ScheduleSpec
from weft_django.models import Schedule
from weft_django.warnings import WeftScheduleRemovedWarning

logger = logging.getLogger("weft_django.schedules")


def _declaration(spec: ScheduleSpec) -> dict[str, Any]:
    fields = spec.fields()
    fields["input"] = normalize(f"input of schedule {spec.schedule_id!r}", spec.input)
    return fields


def _apply(spec: ScheduleSpec, declaration: dict[str, Any]) -> str:
    row = Schedule.objects.using(rows.database()).filter(pk=spec.schedule_id).first()
    if row is None:
        try:
            rows.insert(spec, declared_spec=declaration)
            return "created"
        except (IntegrityError, ScheduleAlreadyExists):
            row = Schedule.objects.using(rows.database()).filter(pk=spec.schedule_id).first()
            if row is None:
                raise
    if row.declared and row.declared_spec == declaration:
        return "unchanged"
    fields: dict[str, Any] = {
        "workflow": spec.workflow,
        "input": spec.input,
        "cron": spec.cron,
        "every": None if spec.every_ms is None else spec.every_ms / 1000,
        "timezone": spec.timezone,
        "overlap": spec.overlap,
        "catchup_window": spec.catchup_window_ms / 1000,
        "jitter": None if spec.jitter_ms is None else spec.jitter_ms / 1000,
        "start_at": spec.start_at_ms,
        "end_at": spec.end_at_ms,
        "paused": spec.paused,
    }
    rows.apply_update(spec.schedule_id, fields, declared_spec=declaration)
    return "updated"


def sync_declared(settings: WeftSettings) -> dict[str, str]:
    """Make the rows match ``WEFT["SCHEDULES"]``; ``{schedule id: what happened}``
    (``created``, ``updated``, ``unchanged``, ``paused``, or ``error: ...``)."""
    done: dict[str, str] = {}
    declared = {spec.schedule_id for spec in settings.schedules}
    for spec in settings.schedules:
        try:
            get_workflow(spec.workflow)  # UnknownWorkflowType (weft.E029 said so too)
            done[spec.schedule_id] = _apply(spec, _declaration(spec))
        except Exception as exc:  # one bad entry must not keep the engine from booting
            logger.error("schedule %s not synced: %s", spec.schedule_id, exc)
            done[spec.schedule_id] = f"error: {exc}"
    removed = Schedule.objects.using(settings.database).filter(declared=True)
    for row in removed.exclude(pk__in=declared):
        rows.apply_update(row.schedule_id, {"paused": True}, declared_spec=None)
        warnings.warn(WeftScheduleRemovedWarning(row.schedule_id), stacklevel=2)
        logger.warning("%s", WeftScheduleRemovedWarning(row.schedule_id))
        done[row.schedule_id] = "paused"
    return done


def declared_workflow_problems(settings: WeftSettings) -> list[checks.CheckMessage]:
    """``weft.E029``: a declared schedule names a workflow no ``@workflow`` registers."""
    out: list[checks.CheckMessage] = []
    for spec in settings.schedules:
        if spec.workflow not in registry.workflows:
            out.append(
                checks.Error(
                    f"WEFT['SCHEDULES'][{spec.schedule_id!r}] names the workflow "
                    f"{spec.workflow!r}, which no @workflow registers",
                    hint="Check the name and that its workflows.py is in an installed app.",
                    id=CHECK_IDS["unknown-schedule-workflow"],
                )
            )
    return out


def boot_sync(settings: WeftSettings) -> None:
    """``sync_declared`` at engine boot; a failure is logged, never fatal to the boot."""
    try:
        done = sync_declared(settings)
    except Exception:
        logger.exception("WEFT['SCHEDULES'] sync failed")
        return
    if any(what != "unchanged" for what in done.values()):
        logger.info("WEFT['SCHEDULES'] synced: %s", done)


__all__ = ["boot_sync", "declared_workflow_problems", "sync_declared"]
