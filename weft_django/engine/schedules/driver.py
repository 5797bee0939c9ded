"""The system workflow ``weft.schedule`` that owns and fires one schedule.

Invariant: a schedule must fire each tick exactly once
whatever the number of engines or Celery nodes. Making the schedule a
workflow gives it the ownership protocol for free: one engine at a time
holds the driver's claim, a crashed holder is taken over, and the firing
step is an ``atomic=True`` activity, so its effects (the tick's run, the
counters) commit under the driver's fence or not at all (``ticking``). The
wait until the next tick is a durable timer raced with the
``weft.schedule.changed`` signal that every client change sends, so a
pause, an update or a resume takes effect at once.

The journal stays bounded: after ``STEPS_PER_RUN`` steps the driver
continues as new, carrying its state in its input.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from weft_django.engine.activities.info import activity_info
from weft_django.engine.schedules import ticking
from weft_django.engine.workflow.definitions import activity, workflow
from weft_django.errors import ActivityError
from weft_django.kernel.clock import now_ms
from weft_django.kernel.schedule_spec import CHANGED_SIGNAL, DRIVER_WORKFLOW

logger = logging.getLogger("weft_django.schedules")

STEPS_PER_RUN = 50
STEP_FAILURE_PAUSE_S = 30.0


@activity(
    name="weft.schedule.step",
    atomic=True,
    retries=5,
    backoff=timedelta(milliseconds=500),
    max_backoff=timedelta(seconds=10),
)
def schedule_step(schedule_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """Fire what is due now (``ticking.step``), in the driver's fenced transaction."""
    return ticking.step(schedule_id, state, now_ms(), run_id=activity_info().run_id)


@workflow(name=DRIVER_WORKFLOW)
def schedule_driver(ctx: Any, data: dict[str, Any]) -> Any:
    schedule_id = data["schedule_id"]
    state: dict[str, Any] = dict(data.get("state") or {})
    for _ in range(STEPS_PER_RUN):
        try:
            out = yield ctx.run(schedule_step, schedule_id, state)
        except ActivityError as exc:  # a corrupt row, a database outage: look again later
            ctx.logger.warning("schedule %s: step failed: %s", schedule_id, exc)
            yield ctx.race(ctx.sleep(STEP_FAILURE_PAUSE_S), ctx.wait_for_signal(CHANGED_SIGNAL))
            continue
        if out.get("stop"):
            return {"schedule_id": schedule_id, "deleted": True}
        state = out["state"]
        sleep_ms = out["sleep_ms"]
        if sleep_ms is None:
            yield ctx.wait_for_signal(CHANGED_SIGNAL)
        elif sleep_ms > 0:
            yield ctx.race(ctx.sleep(sleep_ms / 1000), ctx.wait_for_signal(CHANGED_SIGNAL))
    yield ctx.continue_as_new({"schedule_id": schedule_id, "state": state})


__all__ = ["STEPS_PER_RUN", "schedule_driver", "schedule_step"]
