"""Workflows of the Celery tests, imported by the test process and, through
``celery worker -I tests.celery.workflows``, by every worker node.

Activities write ``SideEffect`` rows (kind ``celery``) so a test can count
how often each step really ran; the async activity hands its token out as a
``SideEffect`` of kind ``celery-token`` (key ``<key>|<token>``).

``celery_meet`` is a rendezvous: each of ``parties`` attempts of one key
waits (bounded) until all of them have started, in the pool process that
runs them. It returns only if they really ran at the same time; else it
raises, and the workflow fails.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from weft_django import ActivityCancelled, activity, activity_info, workflow
from weft_django.kernel.clock import wall_ms

#: How long a rendezvous waits for the other attempts (hang protection only).
MEET_TIMEOUT_S = 15.0
#: The heartbeat period of an activity that runs until it is cancelled.
BEAT_S = 0.05

_meetings_lock = threading.Lock()
_meetings: dict[str, threading.Barrier] = {}


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def celery_step(key: str) -> str:
    _record("celery", key)
    return key


@activity()
def celery_hand_out(token: str, key: str) -> None:
    _record("celery-token", f"{key}|{token}")


@activity()
def celery_meet(key: str, parties: int) -> dict[str, int]:
    """Wait until ``parties`` attempts of ``key`` all started (this process)."""
    started = wall_ms()
    with _meetings_lock:
        barrier = _meetings.setdefault(key, threading.Barrier(parties))
    barrier.wait(timeout=MEET_TIMEOUT_S)  # BrokenBarrierError: they did not overlap
    return {
        "start": started,
        "end": wall_ms(),
        "pid": os.getpid(),
        "thread": threading.get_ident(),
    }


@activity()
def celery_until_cancelled(key: str) -> str:
    """Heartbeats until its attempt is cancelled (a race it lost); records that."""
    deadline = time.monotonic() + MEET_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            activity_info().heartbeat()
            time.sleep(BEAT_S)
    except ActivityCancelled:
        _record("celery-cancelled", key)
        raise
    return "never cancelled"


@workflow(name="celery-all-four")
def celery_all_four(ctx: Any, data: dict[str, Any]) -> Any:
    key = data["id"]
    return (yield ctx.all(*(ctx.run(celery_meet, key, 4) for _ in range(4))))


@workflow(name="celery-race-nested")
def celery_race_nested(ctx: Any, data: dict[str, Any]) -> Any:
    """A race an activity wins, one a sleep wins (the activity is cancelled),
    then an ``all`` nesting an ``all`` and a race."""
    key = data["id"]
    fast = yield ctx.race(ctx.run(celery_step, f"{key}:fast"), ctx.sleep(60))
    slow = yield ctx.race(ctx.run(celery_until_cancelled, key), ctx.sleep(0.5))
    a, (b, c), won = yield ctx.all(
        ctx.run(celery_step, f"{key}:a"),
        ctx.all(ctx.run(celery_step, f"{key}:b"), ctx.run(celery_step, f"{key}:c")),
        ctx.race(ctx.wait_for_signal("never"), ctx.run(celery_step, f"{key}:d")),
    )
    return {"fast": list(fast), "slow": list(slow), "nested": [a, [b, c], list(won)]}


@workflow(name="celery-leaf")
def celery_leaf(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(celery_step, f"{data['id']}:leaf"))


@workflow(name="celery-tour")
def celery_tour(ctx: Any, data: dict[str, Any]) -> Any:
    """One of each wake: a sleep, a signal, an async activity, a child."""
    key = data["id"]
    a = yield ctx.run(celery_step, f"{key}:a")
    yield ctx.sleep(float(data.get("sleep", 1.0)))
    go = yield ctx.wait_for_signal("go")
    paid = yield ctx.async_activity(celery_hand_out, key)
    child = yield ctx.start_child("celery-leaf", {"id": key})
    return {"a": a, "go": go, "paid": paid, "child": child}


@workflow(name="celery-waiter")
def celery_waiter(ctx: Any, data: dict[str, Any]) -> Any:
    """Parks on ``go``, runs one step, parks on ``finish``."""
    key = data["id"]
    go = yield ctx.wait_for_signal("go")
    step = yield ctx.run(celery_step, f"{key}:a")
    finish = yield ctx.wait_for_signal("finish")
    return {"go": go, "step": step, "finish": finish}


@workflow(name="celery-signal-loop")
def celery_signal_loop(ctx: Any, data: dict[str, Any]) -> Any:
    """``steps`` times: wait for ``go``, then one step (one turn a signal)."""
    key, done = data["id"], []
    for i in range(int(data["steps"])):
        go = yield ctx.wait_for_signal("go")
        done.append((yield ctx.run(celery_step, f"{key}:{i}:{go}")))
    return done


@workflow(name="celery-sleeper")
def celery_sleeper(ctx: Any, data: dict[str, Any]) -> Any:
    yield ctx.sleep(float(data["seconds"]))
    return (yield ctx.run(celery_step, f"{data['id']}:woke"))


def _refuse(payload: Any) -> None:
    raise ValueError(f"handler refuses {payload!r}")


@workflow(name="celery-bad-handler")
def celery_bad_handler(ctx: Any, data: dict[str, Any]) -> Any:
    """An ``on_signal`` handler that raises: the turn delivering the signal
    escapes (no command failed, so no workflow failure to record)."""
    ctx.on_signal("boom", _refuse)
    return (yield ctx.wait_for_signal("never"))
