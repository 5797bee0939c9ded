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
