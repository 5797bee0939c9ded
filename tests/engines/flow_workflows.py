"""Workflows of the every-path flow-control process test (``test_flow_paths``),
loaded by the test and by every engine child (``Worker(..., imports=IMPORTS)``).

``flow-slot`` runs on queue ``flow-c2`` (concurrency 2) however it is
started -- a child, a detached child, a schedule's tick, ``signal_with_start``
-- and its one activity records in a table (``SideEffect``) when it began
(``flow-in``) and ended (``flow-out``), in wall-clock ms: an attempt a SIGKILL
cut short has its ``flow-in`` row only, and counts until the kill.
"""

from __future__ import annotations

import os
import time
from typing import Any

from project.demo.models import SideEffect
from weft_django import activity, workflow
from weft_django.kernel.clock import wall_ms

IMPORTS = ("tests.engines.flow_workflows",)
QUEUES = {"flow-c2": {"concurrency": 2}}
HOLD_S = 0.4


@activity()
def flow_hold(token: str) -> int:
    start = wall_ms()
    SideEffect.objects.create(kind="flow-in", key=f"{token}|{start}|{os.getpid()}")
    time.sleep(HOLD_S)
    end = wall_ms()
    SideEffect.objects.create(kind="flow-out", key=f"{token}|{start}|{end}")
    return end


@workflow(name="flow-slot", queue="flow-c2")
def flow_slot(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(flow_hold, ctx.workflow_id))


@workflow(name="flow-parent")
def flow_parent(ctx: Any, data: str) -> Any:
    detached = []
    for i in range(2):
        detached.append((yield ctx.start_child("flow-slot", i, f"{data}-d{i}", detached=True)))
    attached = [ctx.start_child("flow-slot", i, f"{data}-c{i}") for i in range(4)]
    return {"attached": (yield ctx.all(*attached)), "detached": detached}
