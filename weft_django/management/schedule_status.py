"""The schedule lines of ``weft_status``, kept out of the command module."""

from __future__ import annotations

from collections.abc import Callable

from weft_django.inspection.format import format_ms
from weft_django.inspection.schedules import schedule_lines, tick_totals


def print_schedules(out: Callable[[str], None], using: str) -> None:
    """``schedules: N; ticks: fired .., skipped .., ...`` then one line per schedule."""
    count, lines = schedule_lines(using)
    totals = ", ".join(f"{outcome} {n}" for outcome, n in tick_totals(using).items())
    out(f"schedules: {count}; ticks (all schedules): {totals}")
    for line in lines:
        state = "paused" if line.paused else f"next {format_ms(line.next_fire_ms)}"
        out(
            f"  {line.schedule_id}: {line.workflow} ({line.when}); {state}; "
            f"last tick {format_ms(line.last_tick_ms)}; fired {line.fired}, "
            f"skipped {line.skipped}, missed {line.missed}"
        )
    if count > len(lines):
        out(f"  ... and {count - len(lines)} more")
