"""The schedule-every-second scenario shared by the engine and Celery process
tests (issue #16 "Done when"): not a test module.

A schedule ticks every second for ``SPAN_S`` seconds (``end_at``); halfway,
the node holding the schedule's driver is SIGKILLed. Then, from durable
records only: every tick in (created, end_at] has exactly one run (by its
idempotency key, and the counters say so: nothing counted twice, nothing
missed), and every journal entry of the driver was written by the engine
that held the current claim epoch (the firing was fenced).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import tests.engines.schedule_workflows  # noqa: F401  (registers the workflow here)
from tests.engines.harness import (
    assert_journal_fenced,
    events_of,
    journals_by_run,
    wait_for,
)
from tests.support import ChildGroup
from weft_django import client
from weft_django.kernel.clock import wall_ms
from weft_django.kernel.schedule_spec import driver_workflow_id, tick_key
from weft_django.models import Schedule, WorkflowClaim, WorkflowRun

SPAN_S = 20
HANG_TIMEOUT_S = 90.0  # hang protection only


def run_scenario(
    schedule_id: str,
    nodes: Sequence[ChildGroup],
    engine_of: Callable[[ChildGroup], str],
) -> dict[str, Any]:
    start_ms = (wall_ms() // 1000 + 1) * 1000
    end_ms = start_ms + SPAN_S * 1000
    client.create_schedule(
        schedule_id,
        "sched-proc-echo",
        {"from": schedule_id},
        every=1,
        overlap="allow",
        start_at=datetime.fromtimestamp(start_ms / 1000, UTC),
        end_at=datetime.fromtimestamp(end_ms / 1000, UTC),
    )
    since = Schedule.objects.get(pk=schedule_id).since_ms
    driver = driver_workflow_id(schedule_id)
    by_engine = {engine_of(node): node for node in nodes}
    holder = wait_for(
        "a node to hold the driver",
        lambda: (
            WorkflowClaim.objects.filter(pk=driver, engine_id__in=list(by_engine))
            .values_list("engine_id", flat=True)
            .first()
        ),
        *nodes,
        timeout=HANG_TIMEOUT_S,
    )
    wait_for(
        "half of the span",
        lambda: wall_ms() >= start_ms + SPAN_S * 500,
        *nodes,
        timeout=HANG_TIMEOUT_S,
    )
    victim = by_engine[holder]
    victim.kill()
    alive = [n for n in nodes if n is not victim]
    new_holder = wait_for(
        "another node to take the driver over",
        lambda: (
            WorkflowClaim.objects.filter(pk=driver)
            .exclude(engine_id=holder)
            .exclude(engine_id=None)
            .values_list("engine_id", flat=True)
            .first()
        ),
        *alive,
        timeout=HANG_TIMEOUT_S,
    )
    expected = [t for t in range(start_ms, end_ms + 1, 1000) if t > since]
    wait_for(
        "the last tick's run",
        lambda: Schedule.objects.get(pk=schedule_id).last_tick_ms == expected[-1],
        *alive,
        timeout=HANG_TIMEOUT_S,
    )
    runs = list(WorkflowRun.objects.filter(workflow_id__startswith=f"{schedule_id}@"))
    keys = sorted(r.idempotency_key for r in runs)
    assert keys == sorted(tick_key(schedule_id, t) for t in expected), (len(keys), len(expected))
    assert len({r.workflow_id for r in runs}) == len(runs) == len(expected)
    row = Schedule.objects.get(pk=schedule_id)
    assert (row.fired_count, row.missed_count, row.skipped_count, row.failed_count) == (
        len(expected),
        0,
        0,
        0,
    )
    wait_for(
        "every tick's run to complete",
        lambda: (
            not WorkflowRun.objects.filter(workflow_id__startswith=f"{schedule_id}@")
            .exclude(status="completed")
            .exists()
        ),
        *alive,
        timeout=HANG_TIMEOUT_S,
    )
    driver_runs = list(WorkflowRun.objects.filter(workflow_id=driver).values_list("pk", flat=True))
    events = events_of(driver)
    for entries in journals_by_run(driver_runs).values():
        assert_journal_fenced(entries, events)
    lags = [
        int(r.created_at.timestamp() * 1000) - int(r.idempotency_key.rsplit(":", 1)[1])
        for r in runs
    ]
    return {
        "ticks": len(expected),
        "killed": holder,
        "took_over": new_holder,
        "lag_ms_max": max(lags),
        "lag_ms_median": sorted(lags)[len(lags) // 2],
    }
