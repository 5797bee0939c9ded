"""``async def`` workflows and their generator twins, for ``test_async_twins``.

Every scenario is written twice -- ``pa-*`` awaits, ``pg-*`` yields -- with the
same commands in the same order, so both must end with the same result. Every
activity writes a ``SideEffect`` row (kind ``pa-start``) when it begins and
returns its own key (``<workflow key>:<step>``), so the journal says which
execution was recorded and the rows say how often each one ran.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async

from weft_django import ActivityError, WorkflowContext, activity, workflow

IMPORTS = ("tests.engines.async_twins",)
START = "pa-start"
SLOW_S = 2.0


def _record(key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=START, key=key)


@dataclass
class PaOrder:
    key: str
    qty: int


@dataclass
class PaReceipt:
    key: str
    total: int


@dataclass
class PaGo:
    extra: int


@activity(name="pa-mark")
def pa_mark(key: str, step: str, seconds: float = 0.0) -> str:
    _record(f"{key}:{step}")
    time.sleep(seconds)
    return f"{key}:{step}"


@activity(name="pa-item")
async def pa_item(item: str) -> str:
    await sync_to_async(_record)(item)
    return item


@activity(name="pa-receipt")
def pa_receipt(key: str, qty: int) -> PaReceipt:
    _record(f"{key}:receipt")
    return PaReceipt(f"{key}:receipt", qty * 10)


@activity(name="pa-fail", non_retryable=(RuntimeError,))
def pa_fail(key: str) -> None:
    _record(f"{key}:fail")
    raise RuntimeError("declined")


# -- children ----------------------------------------------------------------


@workflow(name="pa-child")
async def pa_child(ctx: WorkflowContext, order: PaOrder) -> PaReceipt:
    receipt = await ctx.run(pa_receipt, order.key, order.qty)
    return PaReceipt(receipt.key, receipt.total + 1)


@workflow(name="pg-child")
def pg_child(ctx: Any, order: dict[str, Any]) -> Any:
    receipt = yield ctx.run(pa_receipt, order["key"], order["qty"])
    return {"key": receipt["key"], "total": receipt["total"] + 1}


# -- the main flow -------------------------------------------------------------


@workflow(name="pa-main")
async def pa_main(ctx: WorkflowContext, order: PaOrder) -> dict[str, Any]:
    k = order.key
    state: dict[str, Any] = {"bumps": 0, "added": []}
    ctx.on_query("state", lambda: dict(state))

    async def add(item: str) -> int:
        await ctx.run(pa_mark, k, f"upd-{item}")
        state["added"].append(item)
        return len(state["added"])

    ctx.on_update("add", add)
    ctx.on_signal("bump", lambda _: state.update(bumps=state["bumps"] + 1))
    receipt = await ctx.run(pa_receipt, k, order.qty)
    await ctx.sleep(0.2)
    slow = await ctx.run(pa_mark, k, "slow", SLOW_S)
    first, (index, raced), mapped = await ctx.all(
        ctx.run(pa_mark, k, "b1"),
        ctx.race(ctx.run(pa_mark, k, "r1"), ctx.sleep(timedelta(minutes=5))),
        ctx.map(pa_item, [f"{k}:m1", f"{k}:m2"], max_concurrency=1),
    )
    go = await ctx.wait_for_signal("go", type=PaGo)
    assert isinstance(go, PaGo)
    await ctx.wait_until(lambda: state["bumps"] >= 1 and len(state["added"]) >= 1)
    child_a = await ctx.start_child(pa_child, PaOrder(f"{k}-ca", 2), workflow_id=f"{k}-ca")
    child_g = await ctx.start_child("pg-child", {"key": f"{k}-cg", "qty": 3}, workflow_id=f"{k}-cg")
    path = "new" if ctx.patched("pa-v2") else "old"
    return {
        "total": receipt.total,
        "steps": [slow, first, index, raced, mapped],
        "go": go.extra,
        "children": [child_a.total, child_g["total"]],
        "path": path,
        "added": state["added"],
    }


@workflow(name="pg-main")
def pg_main(ctx: Any, order: dict[str, Any]) -> Any:
    k = order["key"]
    state: dict[str, Any] = {"bumps": 0, "added": []}
    ctx.on_query("state", lambda: dict(state))

    def add(item: str) -> Any:
        yield ctx.run(pa_mark, k, f"upd-{item}")
        state["added"].append(item)
        return len(state["added"])

    ctx.on_update("add", add)
    ctx.on_signal("bump", lambda _: state.update(bumps=state["bumps"] + 1))
    receipt = yield ctx.run(pa_receipt, k, order["qty"])
    yield ctx.sleep(0.2)
    slow = yield ctx.run(pa_mark, k, "slow", SLOW_S)
    first, (index, raced), mapped = yield ctx.all(
        ctx.run(pa_mark, k, "b1"),
        ctx.race(ctx.run(pa_mark, k, "r1"), ctx.sleep(timedelta(minutes=5))),
        ctx.map(pa_item, [f"{k}:m1", f"{k}:m2"], max_concurrency=1),
    )
    go = yield ctx.wait_for_signal("go")
    yield ctx.wait_until(lambda: state["bumps"] >= 1 and len(state["added"]) >= 1)
    child_a = yield ctx.start_child("pa-child", {"key": f"{k}-ca", "qty": 2}, f"{k}-ca")
    child_g = yield ctx.start_child("pg-child", {"key": f"{k}-cg", "qty": 3}, f"{k}-cg")
    path = "new" if ctx.patched("pa-v2") else "old"
    return {
        "total": receipt["total"],
        "steps": [slow, first, index, raced, mapped],
        "go": go["extra"],
        "children": [child_a["total"], child_g["total"]],
        "path": path,
        "added": state["added"],
    }


# -- saga, cancel, continue_as_new ------------------------------------------------


@workflow(name="pa-saga")
async def pa_saga(ctx: WorkflowContext, key: str) -> Any:
    saga = ctx.saga()
    try:
        await ctx.run(pa_mark, key, "s1", SLOW_S)
        saga.add(pa_mark, key, "undo-s1")
        await ctx.run(pa_fail, key)
    except ActivityError:
        return await saga.compensate()
    return "unreachable"


@workflow(name="pg-saga")
def pg_saga(ctx: Any, key: str) -> Any:
    saga = ctx.saga()
    try:
        yield ctx.run(pa_mark, key, "s1", SLOW_S)
        saga.add(pa_mark, key, "undo-s1")
        yield ctx.run(pa_fail, key)
    except ActivityError:
        return (yield from saga.compensate())
    return "unreachable"


@workflow(name="pa-cancel", cancel_grace=timedelta(minutes=1))
async def pa_cancel(ctx: WorkflowContext, key: str) -> str:
    try:
        await ctx.run(pa_mark, key, "before")
        await ctx.wait_for_signal("never")
    finally:
        await ctx.run(pa_mark, key, "cleanup")
    return "unreachable"


@workflow(name="pg-cancel", cancel_grace=timedelta(minutes=1))
def pg_cancel(ctx: Any, key: str) -> Any:
    try:
        yield ctx.run(pa_mark, key, "before")
        yield ctx.wait_for_signal("never")
    finally:
        yield ctx.run(pa_mark, key, "cleanup")
    return "unreachable"


@workflow(name="pa-loop")
async def pa_loop(ctx: WorkflowContext, data: dict[str, Any]) -> int:
    await ctx.run(pa_mark, data["key"], f"loop-{data['n']}", SLOW_S / 2)
    if data["n"] > 0:
        await ctx.continue_as_new({"key": data["key"], "n": data["n"] - 1})
    return int(data["n"])


@workflow(name="pg-loop")
def pg_loop(ctx: Any, data: dict[str, Any]) -> Any:
    yield ctx.run(pa_mark, data["key"], f"loop-{data['n']}", SLOW_S / 2)
    if data["n"] > 0:
        yield ctx.continue_as_new({"key": data["key"], "n": data["n"] - 1})
    return int(data["n"])
