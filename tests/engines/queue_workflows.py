"""Workflows of the queue process tests (``test_queues``), loaded by the test and
by every engine child (``Worker(..., imports=IMPORTS)``).

``procs-queue-slow`` runs one activity that sleeps ``seconds`` and returns
the wall-clock interval it ran in: the journal then holds, for every run,
when its activity held the run's slot (the audit of ``test_queues``). Each
attempt's start is also appended to the file ``WEFT_QUEUE_LOG`` names, so an
attempt a SIGKILL cut short (never journaled) is counted too.
"""

from __future__ import annotations

import os
import time
from typing import Any

from weft_django import activity, workflow
from weft_django.kernel.clock import wall_ms

IMPORTS = ("tests.engines.queue_workflows",)
QUEUES = {
    "procs-q2": {"concurrency": 2},
    "procs-q1": {"concurrency": 1},
    "procs-keyed": {"per_key_concurrency": 1},
    "procs-rated": {"rate": "60/m"},
}


@activity()
def queue_slow_step(key: str, seconds: float) -> dict[str, Any]:
    start = wall_ms()
    path = os.environ.get("WEFT_QUEUE_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{key} {start} {os.getpid()}\n")
    time.sleep(seconds)
    return {"key": key, "start": start, "end": wall_ms()}


@workflow(name="procs-queue-slow")
def queue_slow(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(queue_slow_step, data["key"], data["seconds"]))
