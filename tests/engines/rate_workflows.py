"""Workflows of the per-key rate process test (``test_per_key_rate_processes``),
loaded by the test and by every engine child (``Worker(..., imports=IMPORTS)``).

``rate-step`` runs on queue ``pkr-proc`` (at most 2 admissions per concurrency
key in any 2 s); its one activity holds the run a little so that a SIGKILL
can land while runs of both keys are admitted.
"""

from __future__ import annotations

import time
from typing import Any

from weft_django import activity, workflow

IMPORTS = ("tests.engines.rate_workflows",)
RATE_COUNT, RATE_WINDOW_MS = 2, 2_000
QUEUES = {"pkr-proc": {"per_key_rate": f"{RATE_COUNT}/2s"}}


@activity()
def rate_hold(token: str) -> str:
    time.sleep(0.2)
    return token


@workflow(name="rate-step", queue="pkr-proc")
def rate_step(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(rate_hold, ctx.workflow_id))
