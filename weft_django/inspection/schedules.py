"""The schedules' read model: tick totals and one line per schedule.

``weft_status``, the Prometheus collector (``weft_schedule_ticks_total{outcome}``) and the
admin read the same numbers from here. They are read from the ``Schedule`` rows, whose tick
counters the drivers bump inside their fenced steps, so the totals are the cluster's,
counted once per tick whichever engine fired it (no per-engine sum that a
takeover could double). ``outcome`` is the closed set
``kernel.schedule_spec.TICK_OUTCOMES``: a schedule id never becomes a label.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Sum

from weft_django.kernel.schedule_spec import TICK_OUTCOMES, TickOutcome
from weft_django.models import Schedule


def tick_totals(using: str) -> dict[TickOutcome, int]:
    """Every outcome of ``TICK_OUTCOMES`` -> its count over every schedule."""
    sums = Schedule.objects.using(using).aggregate(
        **{outcome: Sum(f"{outcome}_count") for outcome in TICK_OUTCOMES}
    )
    return {outcome: int(sums[outcome] or 0) for outcome in TICK_OUTCOMES}


@dataclass(frozen=True)
class ScheduleLine:
    schedule_id: str
    workflow: str
    when: str
    paused: bool
    next_fire_ms: int | None
    last_tick_ms: int | None
    fired: int
    skipped: int
    missed: int


def schedule_lines(using: str, limit: int = 50) -> tuple[int, list[ScheduleLine]]:
    """``(count of schedules, the first ``limit`` of them by id)``."""
    rows = Schedule.objects.using(using).order_by("schedule_id")
    lines = [
        ScheduleLine(
            row.schedule_id,
            row.workflow,
            row.cron if row.cron is not None else f"every {(row.every_ms or 0) / 1000:g} s",
            row.paused,
            row.next_fire_ms,
            row.last_tick_ms,
            row.fired_count,
            row.skipped_count,
            row.missed_count,
        )
        for row in rows[:limit]
    ]
    return rows.count(), lines


__all__ = ["ScheduleLine", "schedule_lines", "tick_totals"]
