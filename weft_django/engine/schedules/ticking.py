"""One step of a schedule's driver: fire what is due, say when to look again.

Invariant: each tick fires at most once. ``step`` runs as
the body of an ``@activity(atomic=True)`` of the driver workflow
(``engine.schedules.driver``), so the runs it starts, the previous run it
cancels (``cancel_previous``) and the tick counters it bumps on the
``Schedule`` row commit in ONE transaction with the driver's journal entry,
under the driver's claim fence (``engine.atomic``). An engine that lost the
driver's claim -- SIGKILLed, paused, deposed -- has its step rolled back,
and the new owner's replay runs the step again from the same journaled
state. On top of that, every tick's run carries an idempotency key derived
from the schedule id and the tick's nominal instant (``tick_key``): even a
``backfill_schedule`` of the same tick cannot make a second run.

The driver's state (the last tick handled, the buffered tick, the run it
last started) is the step's journaled result, never read back from the
row: the row is for readers (admin, API, ``describe_schedule``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db.models import F

from weft_django.codecs.stored import readable
from weft_django.conf import get_settings
from weft_django.engine.operations.start import UnknownQueueError, start_run
from weft_django.errors import (
    IdempotencyConflictError,
    UnknownWorkflowType,
    WorkflowAlreadyRunning,
)
from weft_django.kernel.schedule_spec import (
    ScheduleSpec,
    TickOutcome,
    build_spec,
    count_ticks,
    jitter_offset_ms,
    tick_key,
    tick_workflow_id,
    ticks_after,
)
from weft_django.models import TERMINAL_STATUSES, Schedule, WorkflowRun

logger = logging.getLogger("weft_django.schedules")

MAX_FIRES_PER_STEP = 100
"""Ticks one step starts at most (a long catch-up continues at once in the next step)."""
BUFFER_POLL_MIN_MS = 1_000
BUFFER_POLL_MAX_MS = 30_000


def spec_of(row: Schedule) -> ScheduleSpec:
    """The row's spec, validated again (a row is data: fail loudly if corrupt)."""
    return build_spec(
        row.schedule_id,
        {
            "workflow": row.workflow,
            "input": row.input,
            "cron": row.cron,
            "every": None if row.every_ms is None else row.every_ms / 1000,
            "timezone": row.timezone,
            "overlap": row.overlap,
            "catchup_window": row.catchup_window_ms / 1000,
            "jitter": None if row.jitter_ms is None else row.jitter_ms / 1000,
            "start_at": row.start_at_ms,
            "end_at": row.end_at_ms,
            "paused": row.paused,
        },
    )


@dataclass
class _Counts:
    fired: int = 0
    skipped: int = 0
    buffered: int = 0
    missed: int = 0
    failed: int = 0

    def add(self, outcome: TickOutcome, n: int = 1) -> None:
        setattr(self, outcome, getattr(self, outcome) + n)

    def updates(self) -> dict[str, Any]:
        return {
            f"{name}_count": F(f"{name}_count") + value
            for name, value in vars(self).items()
            if value
        }


def is_live(workflow_id: str | None, db: str) -> bool:
    if workflow_id is None:
        return False
    run = WorkflowRun.objects.using(db).latest_for(workflow_id)
    return run is not None and run.status not in TERMINAL_STATUSES


def start_tick(spec: ScheduleSpec, tick_ms: int) -> str | None:
    """Start the tick's run (idempotent per tick); its workflow id, or ``None``
    when it could not be started (counted ``failed`` by the caller)."""
    try:
        run, _created = start_run(
            spec.workflow,
            spec.input,
            tick_workflow_id(spec.schedule_id, tick_ms),
            tick_key(spec.schedule_id, tick_ms),
        )
    except (
        UnknownWorkflowType,
        UnknownQueueError,
        IdempotencyConflictError,
        WorkflowAlreadyRunning,
    ) as exc:
        logger.warning("schedule %s: tick %s not started: %s", spec.schedule_id, tick_ms, exc)
        return None
    return str(run.workflow_id)


def step(
    schedule_id: str, state: dict[str, Any], now: int, *, run_id: Any = None
) -> dict[str, Any]:
    """Fire the due ticks of ``schedule_id`` at ``now``; the driver's next state.

    An input that does not decode raises ``PayloadUnreadable`` naming the
    driver's run (``run_id``) and the schedule: the atomic step lets it
    through, so the driver is suspended at once instead of retrying a step
    that cannot succeed (and no tick starts with a guessed input).

    Returns ``{"stop": True}`` when the schedule was deleted, else
    ``{"state": {...}, "sleep_ms": int | None}`` (``None``: nothing will be
    due until the schedule changes -- paused, or past ``end_at``).
    """
    db = get_settings().database
    row = Schedule.objects.using(db).filter(pk=schedule_id).first()
    if row is None:
        return {"stop": True}
    readable(row.input, run_id, f"schedule {schedule_id!r} (input)")
    spec = spec_of(row)
    last = state.get("last")
    cursor = row.since_ms if last is None else max(int(last), row.since_ms)
    buffered: int | None = state.get("buffered")
    buffered_since: int | None = state.get("buffered_since")
    previous: str | None = state.get("previous")
    counts = _Counts()

    if spec.paused:
        buffered = None  # a paused schedule holds nothing back
        Schedule.objects.using(db).filter(pk=schedule_id).update(next_fire_ms=None)
        return {
            "state": {"last": cursor, "previous": previous},
            "sleep_ms": None,
        }

    # A buffered tick starts as soon as the run it waited for has ended.
    if buffered is not None and not is_live(previous, db):
        started = start_tick(spec, buffered)
        counts.add("fired" if started else "failed")
        previous = started or previous
        buffered = buffered_since = None

    # Ticks older than the catch-up window are skipped and counted.
    horizon = now - spec.catchup_window_ms
    if cursor < horizon:
        counts.add("missed", count_ticks(spec, cursor, horizon))
        cursor = horizon

    fired_here = 0
    handled: int | None = None
    next_due: int | None = None
    for tick in ticks_after(spec, cursor):
        due_at = tick + jitter_offset_ms(spec, tick)
        if due_at > now or fired_here >= MAX_FIRES_PER_STEP:
            next_due = due_at if due_at > now else now
            break
        cursor = handled = tick
        fired_here += 1
        live = is_live(previous, db)
        if spec.overlap == "skip" and live:
            counts.add("skipped")
            continue
        if spec.overlap == "buffer_one" and (live or buffered is not None):
            if buffered is None:
                buffered, buffered_since = tick, now
                counts.add("buffered")
            else:
                counts.add("skipped")
            continue
        if spec.overlap == "cancel_previous" and live and previous is not None:
            from weft_django.engine.operations import cancel

            cancel(previous, f"schedule {schedule_id}: superseded by the tick at {tick}")
        started = start_tick(spec, tick)
        counts.add("fired" if started else "failed")
        previous = started or previous

    sleep_ms: int | None = None if next_due is None else max(0, next_due - now)
    if buffered is not None:
        waited = now - (buffered_since or now)
        poll = min(BUFFER_POLL_MAX_MS, max(BUFFER_POLL_MIN_MS, waited // 4))
        sleep_ms = poll if sleep_ms is None else min(sleep_ms, poll)
    updates: dict[str, Any] = {
        "next_fire_ms": next_due,
        **counts.updates(),
    }
    if handled is not None:
        updates["last_tick_ms"] = handled
    Schedule.objects.using(db).filter(pk=schedule_id).update(**updates)
    return {
        "state": {
            "last": cursor,
            "buffered": buffered,
            "buffered_since": buffered_since,
            "previous": previous,
        },
        "sleep_ms": sleep_ms,
    }


__all__ = ["MAX_FIRES_PER_STEP", "spec_of", "start_tick", "step"]
