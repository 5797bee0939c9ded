"""Workflows of the fork/reset process test (``test_fork_processes``): each step
records a ``SideEffect`` keyed by the workflow id and step, so a test counts
which steps ran for which run. Loaded by the test and by every engine child."""

from __future__ import annotations

import time
from typing import Any

from weft_django import activity, workflow

IMPORTS = ("tests.engines.fork_workflows",)


@activity(retries=2, backoff=0.05)  # an attempt whose engine died counts as failed
def pf_step(key: str, pause: float) -> str:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind="pf-step", key=key)
    time.sleep(pause)
    return key


@workflow(name="pf-four")
def pf_four(ctx: Any, data: dict[str, Any]) -> Any:
    done = []
    for step in range(4):
        done.append((yield ctx.run(pf_step, f"{ctx.workflow_id}:{step}", data["pause"])))
    return done


@workflow(name="pf-wait")
def pf_wait(ctx: Any, data: dict[str, Any]) -> Any:
    first = yield ctx.run(pf_step, f"{ctx.workflow_id}:0", 0)
    second = yield ctx.run(pf_step, f"{ctx.workflow_id}:1", 0)
    got = yield ctx.wait_for_signal("go")
    return [first, second, got]
