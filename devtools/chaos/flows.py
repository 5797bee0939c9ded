"""The soak's flow-control and poison workloads, loaded by the harness and by
every engine with ``devtools.chaos.workflows`` (``harness.IMPORTS``).

Each has an outcome the audit can predict, and leaves the evidence its
audit needs (``devtools.chaos.check_flow``):

- ``chaos-kids``: ``KIDS`` attached children and one detached child, all
  started into ``CHILD_QUEUE`` (concurrency 2) by ``ctx.start_child``; the
  schedule's runs (``chaos-ticked``) share that queue, so the audit checks
  its concurrency over children and ticks together;
- ``chaos-fair``: one short step through ``FAIR_QUEUE`` (``fair``,
  concurrency 1); the harness starts a busy fairness key's runs and then a
  few small keys' runs at once, and the audit checks no small key waited
  behind more of another key's admissions than that key's weight;
- ``chaos-debounced``: started only through ``client.debounce`` in bursts;
  its result names the input it ran with (the last call's of its burst);
- ``chaos-poison-act``: an activity that exits its engine's process
  (``os._exit``), ``retries=2``: after three deaths the workflow catches
  ``ActivityError`` (``engine.activities.started``);
- ``chaos-poison-body``: a body that exits its engine's process: after
  ``MAX_RECOVERY_ATTEMPTS`` deaths the run is ``suspended`` with
  ``CrashLoopError`` (``engine.turn.failures``).

Every process exit is announced first by a line in the poison log (the
file ``POISON_LOG_ENV`` names: workflow id, engine label, wall ms, synced
to disk): the audit's record of which engine died when, whether the
harness saw the death (a standalone engine) or not (a Celery pool
process).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

from devtools.chaos.workflows import (
    CHILD_QUEUE,
    ENGINE_ENV,
    FAIR_QUEUE,
    KIDS,
    chaos_step,
    detached_id,
)
from weft_django import ActivityError, activity, workflow
from weft_django.kernel.clock import wall_ms

#: The engines' environment names the file each poison exit is announced in
#: (``POISON_LOG`` in the soak's log directory).
POISON_LOG_ENV = "WEFT_CHAOS_POISON_LOG"
POISON_LOG = "poison.jsonl"
#: The poison activity's retries (so ``POISON_RETRIES + 1`` engine deaths).
POISON_RETRIES = 2
#: What each debounce burst's run returns: ``f"{key}:{n}"`` of the last call.
DEBOUNCED = "chaos-debounced"


def _announce_exit(workflow_id: str) -> None:
    """One line in the poison log, on disk before the process exits (a body
    may not touch the database: a file is what both kinds can write)."""
    path = os.environ.get(POISON_LOG_ENV)
    if not path:
        return
    line = {"workflow_id": workflow_id, "engine": os.environ.get(ENGINE_ENV, "?"), "at": wall_ms()}
    with open(path, "a") as log:
        log.write(json.dumps(line) + "\n")
        log.flush()
        os.fsync(log.fileno())


@workflow(name="chaos-kid")
def chaos_kid(ctx: Any, data: dict[str, Any]) -> Any:
    """A child through ``CHILD_QUEUE``: two steps and a sleep, so its journal
    spans the slot it holds."""
    key = f"{data['key']}:k{data['n']}"
    yield ctx.run(chaos_step, f"{key}:0", 0.2)
    yield ctx.sleep(0.1)
    return (yield ctx.run(chaos_step, key))


@workflow(name="chaos-kids")
def chaos_kids(ctx: Any, data: dict[str, Any]) -> Any:
    key = data["key"]
    kids = yield ctx.all(
        *(
            ctx.start_child("chaos-kid", {"key": key, "n": n}, queue=CHILD_QUEUE)
            for n in range(KIDS)
        )
    )
    child = yield ctx.start_child(
        "chaos-kid",
        {"key": key, "n": "det"},
        workflow_id=detached_id(ctx.workflow_id),
        detached=True,
        queue=CHILD_QUEUE,
    )
    return {"kids": kids, "detached": child == detached_id(ctx.workflow_id)}


@workflow(name="chaos-fair", queue=FAIR_QUEUE)
def chaos_fair(ctx: Any, data: dict[str, Any]) -> Any:
    """Two steps and a sleep (a journal that spans its slot), admitted in the
    fair order (the harness starts it with a ``fairness_key``)."""
    yield ctx.run(chaos_step, f"{ctx.workflow_id}:fair0", 0.1)
    yield ctx.sleep(0.05)
    return (yield ctx.run(chaos_step, f"{ctx.workflow_id}:fair"))


@workflow(name=DEBOUNCED)
def chaos_debounced(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(chaos_step, f"{data['key']}:{data['n']}"))


@activity(retries=POISON_RETRIES, backoff=timedelta(milliseconds=50))
def chaos_poison_exit(workflow_id: str) -> None:
    _announce_exit(workflow_id)
    os._exit(1)


@workflow(name="chaos-poison-act")
def chaos_poison_act(ctx: Any, data: dict[str, Any]) -> Any:
    try:
        yield ctx.run(chaos_poison_exit, ctx.workflow_id)
    except ActivityError as exc:
        return {"caught": exc.message, "attempts": exc.attempts}
    return {"caught": None}


@workflow(name="chaos-poison-body")
def chaos_poison_body(ctx: Any, data: dict[str, Any]) -> Any:
    _announce_exit(ctx.workflow_id)
    os._exit(1)
    yield ctx.sleep(0)  # pragma: no cover - never reached


POISON_NAMES = ("chaos-poison-act", "chaos-poison-body")
