"""Workflows of the concurrent-runtime process tests (``test_concurrent_commands``).

Loaded by the test (to start runs by name) and by every engine child
(``Worker(..., imports=IMPORTS)``: weft autodiscovers only installed apps'
``workflows.py``, and this package is not an app).

What the activities leave behind is the evidence the tests read, written to
``SideEffect`` rows by the engine process itself *before* the activity
returns, so a crash can never hide an execution:

* ``START`` / ``END`` rows (key ``<workflow key>:<branch>``) bracket each
  execution of ``procs_span``; their ``at`` (set by the child when it writes
  the row, on the machine's wall clock) are the interval the execution ran
  in. A branch with more ``START`` rows than one ran again.
* ``CANCELLED`` (key ``<workflow key>:<reason>``): ``procs_beating`` saw
  ``ActivityCancelled``.
* ``START`` rows of ``procs_stalling`` are keyed ``<workflow key>:<attempt>``.

Names carry a ``procs-`` / ``procs_`` prefix: the registries are
process-wide and the suite loads many workflow modules.
"""

from __future__ import annotations

import time
from typing import Any

from weft_django import ActivityCancelled, activity, activity_info, workflow

IMPORTS = ("tests.engines.workflows",)

START = "procs-start"
END = "procs-end"
CANCELLED = "procs-cancelled"

#: How long ``procs_beating`` goes on when nothing cancels it (hang protection).
BEATING_LIMIT_S = 30.0
#: Between two heartbeats of ``procs_beating``.
BEAT_EVERY_S = 0.05
#: How long the first attempt of ``procs_stalling`` stalls without a heartbeat:
#: far past its ``heartbeat_timeout``, so a result from it means no timeout fired.
STALL_S = 8.0


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def procs_span(key: str, seconds: float) -> str:
    """Sleeps ``seconds`` between a ``START`` and an ``END`` row."""
    _record(START, key)
    time.sleep(seconds)
    _record(END, key)
    return key


@workflow(name="procs-fan-out")
def procs_fan_out(ctx: Any, data: dict[str, Any]) -> Any:
    """``ctx.all`` of one ``procs_span`` per entry of ``seconds``; then, when
    ``after`` is set, one more ``procs_span`` (branch ``after``) of that length."""
    key = data["id"]
    branches = [ctx.run(procs_span, f"{key}:{i}", s) for i, s in enumerate(data["seconds"])]
    results = list((yield ctx.all(*branches)))
    if data.get("after") is not None:
        results.append((yield ctx.run(procs_span, f"{key}:after", float(data["after"]))))
    return results


@workflow(name="procs-all-with-sleep")
def procs_all_with_sleep(ctx: Any, data: dict[str, Any]) -> Any:
    """``ctx.all`` of one ``procs_span`` (branch ``0``) and a sleep."""
    key = data["id"]
    branches = ctx.run(procs_span, f"{key}:0", float(data["seconds"])), ctx.sleep(data["sleep"])
    return (yield ctx.all(*branches))


@activity()
def procs_beating(key: str) -> str:
    """Heartbeats ``{"beat": n}`` every 50 ms until cancelled.

    On ``ActivityCancelled`` it records ``CANCELLED`` and then *returns* a
    value, as an activity that ignores the advice to let the exception
    propagate would: the engine must discard that value all the same.
    """
    _record(START, key)
    info = activity_info()
    beat = 0
    deadline = time.monotonic() + BEATING_LIMIT_S
    try:
        while time.monotonic() < deadline:
            beat += 1
            info.heartbeat({"beat": beat})
            time.sleep(BEAT_EVERY_S)
    except ActivityCancelled as cancelled:
        _record(CANCELLED, f"{key}:{cancelled.reason}")
        return f"{key}:after-cancel"
    return f"{key}:never-cancelled"


@workflow(name="procs-beating")
def procs_beating_workflow(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(procs_beating, data["id"]))


@activity(heartbeat_timeout=0.3, retries=1, backoff=1.0)
def procs_stalling(key: str) -> str:
    """Attempt 1 heartbeats once, then stalls ``STALL_S`` without another;
    attempt 2 heartbeats and returns at once."""
    info = activity_info()
    _record(START, f"{key}:{info.attempt}")
    info.heartbeat({"attempt": info.attempt})
    if info.attempt == 1:
        time.sleep(STALL_S)
        return f"{key}:stale"
    return f"{key}:ok:{info.attempt}"


@workflow(name="procs-stalling")
def procs_stalling_workflow(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(procs_stalling, data["id"]))


def _refuse(payload: Any) -> None:
    raise ValueError(f"handler refuses {payload!r}")


@workflow(name="procs-bad-handler")
def procs_bad_handler(ctx: Any, data: Any) -> Any:
    """A bug in a signal handler: the turn that delivers ``boom`` raises
    (no command failed, so there is no workflow failure to record)."""
    ctx.on_signal("boom", _refuse)
    return (yield ctx.wait_for_signal("never"))
