"""Poison workflows of the crash-loop process test (``test_crash_loops``).

Each kills the engine process that runs it: ``os._exit(1)`` in an activity
(with ``retries=2``) or in the workflow body itself. Loaded by the test and
by every engine child (``Worker(..., imports=IMPORTS)``).
"""

from __future__ import annotations

import os
from typing import Any

from weft_django import ActivityError, activity, workflow

IMPORTS = ("tests.engines.poison_workflows",)


@activity(retries=2, backoff=0.05)
def poison_exit(key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind="poison-attempt", key=key)
    os._exit(1)


@workflow(name="poison-activity")
def poison_activity(ctx: Any, data: dict[str, Any]) -> Any:
    try:
        yield ctx.run(poison_exit, data["id"])
    except ActivityError as exc:
        return {"caught": exc.message, "attempts": exc.attempts}
    return {"caught": None}


@workflow(name="poison-body")
def poison_body(ctx: Any, data: dict[str, Any]) -> Any:
    os._exit(1)
    yield ctx.sleep(0)  # pragma: no cover - never reached


@workflow(name="poison-wake")
def poison_wake(ctx: Any, data: dict[str, Any]) -> Any:
    """Parks on a sleep (or a signal), then kills its engine as soon as the
    wake resumes the body -- before the wake's turn commits anything."""
    if data.get("signal"):
        yield ctx.wait_for_signal("go")
    else:
        yield ctx.sleep(float(data.get("sleep", 0.5)))
    os._exit(1)
