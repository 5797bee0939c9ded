"""Demo workflows: the order of the README, and the ones the process tests run.

Activities write a ``SideEffect`` row so tests can count how often each
really ran (a recorded step must never run again after a crash).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from weft_django import activity, workflow


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity(retries=3, backoff=timedelta(milliseconds=200))
def charge_card(order_id: str, amount: int) -> dict[str, Any]:
    _record("charge", order_id)
    return {"order": order_id, "charged": amount}


@activity()
def reserve_stock(order_id: str) -> str:
    _record("reserve", order_id)
    return f"reserved:{order_id}"


@activity()
def ship(order_id: str) -> str:
    _record("ship", order_id)
    return f"shipped:{order_id}"


@activity()
def slow_step(key: str, seconds: float) -> str:
    _record("slow", key)
    time.sleep(seconds)
    return key


@workflow(name="pack")
def pack(ctx: Any, data: dict[str, Any]) -> Any:
    label = yield ctx.run(reserve_stock, data["order"])
    return {"packed": label}


@workflow(name="order")
def order(ctx: Any, data: dict[str, Any]) -> Any:
    """The README's order: charge, sleep, wait for approval, pack as a child, ship."""
    ctx.logger.info("charging %s", data["id"])
    receipt = yield ctx.run(charge_card, data["id"], data["amount"])
    yield ctx.sleep(timedelta(seconds=data.get("sleep", 2)))
    approved = yield ctx.wait_for_signal("approved", timeout=timedelta(hours=2))
    packed = yield ctx.start_child("pack", {"order": data["id"]})
    shipped = yield ctx.run(ship, data["id"])
    return {"receipt": receipt, "approved": approved, "packed": packed, "shipped": shipped}


@workflow(name="three-steps")
def three_steps(ctx: Any, data: dict[str, Any]) -> Any:
    """Three trivial activities: the commits-per-workflow figure."""
    a = yield ctx.run(reserve_stock, data["id"])
    b = yield ctx.run(charge_card, data["id"], 1)
    c = yield ctx.run(ship, data["id"])
    return [a, b, c]


@workflow(name="slow-chain")
def slow_chain(ctx: Any, data: dict[str, Any]) -> Any:
    """Several slow steps: long enough to kill an engine in the middle."""
    out = []
    for i in range(int(data.get("steps", 5))):
        out.append((yield ctx.run(slow_step, f"{data['id']}:{i}", float(data.get("seconds", 0.5)))))
    return out


# -- the multi-engine process tests (tests/engines/test_many_engines.py) -------


@activity()
def mixed_step(key: str) -> str:
    _record("mixed", key)
    return key


@activity()
def hand_out_token(token: str, workflow_id: str, key: str) -> None:
    """Give the token to "the outside world": a row the test (or an operator) reads."""
    from project.demo.models import AsyncToken

    _record("mixed", f"{key}:handout")
    AsyncToken.objects.get_or_create(token=token, defaults={"workflow_id": workflow_id, "key": key})


@workflow(name="mixed-child")
def mixed_child(ctx: Any, data: dict[str, Any]) -> Any:
    return (yield ctx.run(mixed_step, f"{data['id']}:child"))


@workflow(name="mixed")
def mixed(ctx: Any, data: dict[str, Any]) -> Any:
    """Every kind of park in one run: an activity, a sleep, an async activity
    (its token handed out through ``AsyncToken``), a signal wait, a child."""
    key = data["id"]
    a = yield ctx.run(mixed_step, f"{key}:a")
    yield ctx.sleep(float(data.get("sleep", 0.2)))
    paid = yield ctx.async_activity(hand_out_token, ctx.workflow_id, key)
    approved = yield ctx.wait_for_signal("go")
    child = yield ctx.start_child("mixed-child", {"id": key})
    b = yield ctx.run(mixed_step, f"{key}:b")
    return {"a": a, "paid": paid, "approved": approved, "child": child, "b": b}


@workflow(name="signal-wait")
def signal_wait(ctx: Any, data: dict[str, Any]) -> Any:
    """Parks until the signal ``go`` arrives; returns its payload."""
    return (yield ctx.wait_for_signal("go"))


@workflow(name="demo-progress")
def demo_progress(ctx: Any, data: dict[str, Any]) -> Any:
    """The progress-bar page's workflow (docs/howto/progress.md): one stream
    value per step; ``"signal_steps"`` waits for a ``next`` signal per step
    instead of a slow activity (the browser test drives it step by step)."""
    steps = int(data.get("steps", 5))
    ctx.set_event("status", "running")
    for i in range(steps):
        if data.get("signal_steps"):
            yield ctx.wait_for_signal("next")
        else:
            yield ctx.run(slow_step, f"{ctx.workflow_id}:{i}", float(data.get("seconds", 1.0)))
        ctx.write_stream("progress", {"step": i + 1, "of": steps, "pct": 100 * (i + 1) // steps})
    ctx.close_stream("progress")
    ctx.set_event("status", "done")
    return {"steps": steps}
