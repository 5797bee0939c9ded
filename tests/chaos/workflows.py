"""Workflows of the chaos soak, loaded by the harness and by every engine
(``python -m tests.procs.worker tests.chaos.workflows weft_worker ...`` for a
standalone engine, ``celery worker -I tests.chaos.workflows`` for a node).

Between them they use every ``ctx`` command: activities (one slow enough to
be killed inside, one that fails once and is retried on a durable timer),
``sleep``, ``wait_for_signal`` (delivered, buffered before the wait, and one
that times out), ``on_signal`` + ``wait_until``, ``async_activity`` (its
token handed out as a ``SideEffect`` row the harness completes), children
through ``start_child``, ``all`` and ``race``, ``now`` / ``uuid4`` /
``random``, ``patched`` and ``continue_as_new``. Their results depend only on
their input and the harness's signals, so the audit can check every result.

Every activity execution writes a ``SideEffect`` (kind ``chaos``, key
``<step>@<engine label>``) *before* it returns, so a step whose engine died
after the side effect but before the journal entry shows as two rows: the
audit counts such duplicates and names the engine that ran each.

The atomic step (``chaos_atomic``, ``@activity(atomic=True)``) is the
opposite promise: its ``StockMove`` row (kind ``chaos-atomic``, keyed by the
step in ``workflow_id``) commits with its journal entry, so the audit
allows no duplicate at all (``atomic_double_applied``), whatever the faults.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from weft_django import activity, workflow
from weft_django.errors import WorkflowTimeoutError

#: Which engine ran an activity: set in each engine's environment by the harness.
ENGINE_ENV = "WEFT_CHAOS_ENGINE"
#: Long enough never to fire under chaos; the timers are still written.
PATIENCE_S = 600.0
STEP_KIND = "chaos"
FLAKY_KIND = "chaos-flaky"
TOKEN_KIND = "chaos-token"
ATOMIC_KIND = "chaos-atomic"


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=f"{key}@{os.environ.get(ENGINE_ENV, '?')}")


@activity()
def chaos_step(key: str, seconds: float = 0.0) -> str:
    _record(STEP_KIND, key)
    if seconds:
        time.sleep(seconds)
    return key


@activity(retries=3, backoff=timedelta(milliseconds=100))
def chaos_flaky(key: str) -> str:
    """Fails on its first execution, succeeds afterwards (a durable retry)."""
    from project.demo.models import SideEffect

    before = SideEffect.objects.filter(kind=FLAKY_KIND, key__startswith=f"{key}@").count()
    _record(FLAKY_KIND, key)
    if before == 0:
        raise RuntimeError(f"first attempt of {key} fails")
    return key


@activity(atomic=True, retries=5, backoff=timedelta(milliseconds=100))
def chaos_atomic(key: str, seconds: float = 0.0) -> str:
    """Exactly once: its row and its journal entry commit in one transaction."""
    from project.demo.models import StockMove

    StockMove.objects.create(sku="chaos", workflow_id=key, kind=ATOMIC_KIND, delta=1)
    if seconds:
        time.sleep(seconds)  # the transaction stays open: faults land inside it
    return key


@activity()
def chaos_hand_out(token: str, key: str) -> None:
    """Give the token to the outside world (the harness completes it)."""
    _record(TOKEN_KIND, f"{key}|{token}")


@workflow(name="chaos-leaf")
def chaos_leaf(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(chaos_step, f"{data['key']}:leaf{data.get('n', 0)}"))


@workflow(name="chaos-tour")
def chaos_tour(ctx: Any, data: dict[str, Any]) -> Any:
    """Every kind of park, then ``continue_as_new`` into a one-step second run."""
    key = data["key"]
    if data.get("gen"):
        last = yield ctx.run(chaos_step, f"{key}:next")
        return {"prior": data["prior"], "next": last}
    ctx.state["bumps"] = 0

    def bump(payload: Any) -> None:
        ctx.state["bumps"] += 1

    ctx.on_signal("bump", bump)
    a = yield ctx.run(chaos_step, f"{key}:a", float(data.get("slow", 0.0)))
    stamp, ident, roll = ctx.now(), ctx.uuid4(), ctx.random()
    yield ctx.sleep(float(data.get("sleep", 0.2)))
    go = yield ctx.wait_for_signal("go", timeout=PATIENCE_S)
    try:
        yield ctx.wait_for_signal("never", timeout=0.2)
        timed_out = False
    except WorkflowTimeoutError:
        timed_out = True
    yield ctx.wait_until(lambda: ctx.state["bumps"] >= 2, timeout=PATIENCE_S)
    paid = yield ctx.async_activity(chaos_hand_out, key, timeout=PATIENCE_S)
    b, child = yield ctx.all(
        ctx.run(chaos_step, f"{key}:b", float(data.get("slow", 0.0))),
        ctx.start_child("chaos-leaf", {"key": key}),
    )
    won = yield ctx.race(ctx.sleep(0.05), ctx.wait_for_signal("never-either"))
    flaky = yield ctx.run(chaos_flaky, f"{key}:flaky")
    prior = {
        "a": a,
        "go": go,
        "timed_out": timed_out,
        "bumps": ctx.state["bumps"],
        "paid": paid,
        "b": b,
        "child": child,
        "won": won,
        "flaky": flaky,
        "patched": ctx.patched("chaos-v2"),
        "recorded": [stamp.year > 2000, len(str(ident)), 0 <= roll < 1],
    }
    yield ctx.continue_as_new({"key": key, "gen": 1, "prior": prior})


@workflow(name="chaos-chain")
def chaos_chain(ctx: Any, data: dict[str, Any]) -> Any:
    """Slow steps with sleeps between: long turns to be killed inside."""
    key = data["key"]
    out = []
    for i in range(int(data.get("steps", 3))):
        out.append((yield ctx.run(chaos_step, f"{key}:s{i}", float(data.get("slow", 0.3)))))
        yield ctx.sleep(float(data.get("sleep", 0.2)))
    if data.get("atomic"):
        out.append((yield ctx.run(chaos_atomic, f"{key}:atomic", float(data.get("slow", 0.3)))))
    return out


@workflow(name="chaos-fan")
def chaos_fan(ctx: Any, data: dict[str, Any]) -> Any:
    """Children in parallel, a signal racing a long timer, a retried step."""
    key = data["key"]
    kids = yield ctx.all(*(ctx.start_child("chaos-leaf", {"key": key, "n": n}) for n in range(2)))
    go = yield ctx.race(ctx.wait_for_signal("go"), ctx.sleep(PATIENCE_S))
    flaky = yield ctx.run(chaos_flaky, f"{key}:flaky")
    if data.get("atomic"):
        both = yield ctx.all(
            ctx.run(chaos_atomic, f"{key}:atomic0", 0.1), ctx.run(chaos_atomic, f"{key}:atomic1")
        )
        return {"kids": kids, "go": go, "flaky": flaky, "atomic": both}
    return {"kids": kids, "go": go, "flaky": flaky}


def expected_result(name: str, key: str) -> Any:
    """What a run of ``name`` for ``key`` returns once the harness played its part
    (the final run's result, for a tour that continued as new)."""
    atomic = uses_atomic(key)
    if name == "chaos-tour":
        prior = {
            "a": f"{key}:a",
            "go": key,
            "timed_out": True,
            "bumps": 2,
            "paid": {"paid": key},
            "b": f"{key}:b",
            "child": f"{key}:leaf0",
            "won": [0, None],  # ctx.race: (index, value) of the sleep
            "flaky": f"{key}:flaky",
            "patched": True,
            "recorded": [True, 36, True],
        }
        return {"prior": prior, "next": f"{key}:next"}
    if name == "chaos-chain":
        return [f"{key}:s{i}" for i in range(3)] + ([f"{key}:atomic"] if atomic else [])
    if name == "chaos-fan":
        fan: dict[str, Any] = {
            "kids": [f"{key}:leaf0", f"{key}:leaf1"],
            "go": [0, key],  # ctx.race: (index, value) of the signal
            "flaky": f"{key}:flaky",
        }
        if atomic:
            fan["atomic"] = [f"{key}:atomic0", f"{key}:atomic1"]
        return fan
    raise ValueError(name)


def uses_atomic(key: str) -> bool:
    """Whether the chain or fan of ``key`` (``w0001``) runs its atomic steps: half
    of them, those whose number is odd (the harness says so in their input)."""
    return bool(key) and key[-1] in "13579"
