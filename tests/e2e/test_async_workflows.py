"""``async def`` workflows: every ctx command awaited, driven by the same replay
as generator bodies; foreign awaitables refused where they are awaited; values
rebuilt as the code declares them, live and on replay alike."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pydantic
import pytest

from tests.e2e.helpers import journal, latest
from weft_django import activity, client, workflow
from weft_django.engine.workflow.definitions import registry

RAN: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


@dataclasses.dataclass
class Order:
    order_id: str
    qty: int
    note: str | None = None


class Receipt(pydantic.BaseModel):
    order_id: str
    total: int


@activity(name="aw-charge")
def charge(order: Order) -> Receipt:
    RAN.append(f"charge {order.order_id}")
    return Receipt(order_id=order.order_id, total=order.qty * 10)


@activity(name="aw-double")
async def double(x: int) -> int:
    RAN.append(f"double {x}")
    return x * 2


@activity(name="aw-echo")
def echo(x: Any) -> Any:
    RAN.append(f"echo {x}")
    return x


@activity(name="aw-undo")
def undo(what: str) -> None:
    RAN.append(f"undo {what}")


@activity(name="aw-fail", non_retryable=(RuntimeError,))
def fail(what: str) -> None:
    RAN.append(f"fail {what}")
    raise RuntimeError(f"{what} failed")


SEEN: list[Any] = []


@workflow(name="aw-order")
async def order_flow(ctx: Any, order: Order) -> Receipt:
    SEEN.append(("input", type(order).__name__))
    receipt = await ctx.run(charge, order)
    SEEN.append(("receipt", type(receipt).__name__))
    await ctx.sleep(timedelta(seconds=5))
    extra = await ctx.wait_for_signal("extra", type=Order)
    SEEN.append(("signal", type(extra).__name__))
    return Receipt(order_id=receipt.order_id, total=receipt.total + extra.qty)


@pytest.mark.django_db(transaction=True)
def test_an_async_body_gets_typed_values_live_and_on_replay(weft_env: Any) -> None:
    SEEN.clear()
    h = client.start(order_flow, Order("o-1", 3), workflow_id="aw-1")
    weft_env.run_until_idle()
    weft_env.advance(6)
    weft_env.run_until_idle()
    client.signal("aw-1", "extra", Order("x", 4))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    result = h.result(timeout=1)
    assert isinstance(result, Receipt) and result == Receipt(order_id="o-1", total=34)
    assert ("input", "Order") in SEEN and ("receipt", "Receipt") in SEEN
    assert ("signal", "Order") in SEEN
    assert RAN == ["charge o-1"]  # replays of the body never ran it again
    # A read-only replay (a query-style replay) rebuilds the same types.
    assert client.get_handle("aw-1").result(timeout=1) == {"order_id": "o-1", "total": 34}


@workflow(name="aw-groups")
async def groups(ctx: Any, n: int) -> dict[str, Any]:
    a, (b, c) = await ctx.all(ctx.run(double, n), ctx.all(ctx.run(echo, "x"), ctx.run(double, 1)))
    index, value = await ctx.race(ctx.sleep(60), ctx.run(echo, "fast"))
    mapped = await ctx.map(double, [1, 2, 3], max_concurrency=2)
    outcomes = await ctx.all(ctx.run(fail, "f"), ctx.run(echo, 1), return_exceptions=True)
    return {
        "all": [a, b, c],
        "race": [index, value],
        "map": mapped,
        "errors": [type(o).__name__ for o in outcomes],
    }


@pytest.mark.django_db(transaction=True)
def test_nested_all_race_map_in_an_async_body(weft_env: Any) -> None:
    h = client.start("aw-groups", 5, workflow_id="aw-2")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {
        "all": [10, "x", 2],
        "race": [1, "fast"],
        "map": [2, 4, 6],
        "errors": ["ActivityError", "int"],
    }


@workflow(name="aw-gen-child")
def gen_child(ctx: Any, x: int) -> Any:
    y = yield ctx.run(double, x)
    return {"order_id": "c", "total": y}


@workflow(name="aw-async-child")
async def async_child(ctx: Any, x: int) -> Receipt:
    return Receipt(order_id="a", total=await ctx.run(double, x))


@workflow(name="aw-parent")
async def parent(ctx: Any, x: int) -> list[Any]:
    from_gen = await ctx.start_child(gen_child, x)
    from_async = await ctx.start_child(async_child, x + 1)
    detached = await ctx.start_child("aw-async-child", 0, workflow_id="aw-det", detached=True)
    return [from_gen, type(from_async).__name__, from_async.total, detached]


@workflow(name="aw-gen-parent")
def gen_parent(ctx: Any, x: int) -> Any:
    result = yield ctx.start_child("aw-async-child", x)
    return result  # a generator body gets the stored JSON


@pytest.mark.django_db(transaction=True)
def test_children_of_either_kind(weft_env: Any) -> None:
    h = client.start("aw-parent", 2, workflow_id="aw-3")
    g = client.start("aw-gen-parent", 7, workflow_id="aw-3g")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == [{"order_id": "c", "total": 4}, "Receipt", 6, "aw-det"]
    assert g.result(timeout=1) == {"order_id": "a", "total": 14}


@workflow(name="aw-saga")
async def saga_flow(ctx: Any, order: str) -> Any:
    saga = ctx.saga()
    try:
        await ctx.run(echo, f"reserve {order}")
        saga.add(undo, f"reserve {order}")
        await ctx.run(fail, order)
    except Exception:
        return await saga.compensate()
    return "unreachable"


@pytest.mark.django_db(transaction=True)
def test_await_saga_compensate(weft_env: Any) -> None:
    h = client.start("aw-saga", "o", workflow_id="aw-4")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == [{"compensation": "aw-undo", "status": "ok", "error": None}]
    assert RAN == ["echo reserve o", "fail o", "undo reserve o"]


@workflow(name="aw-cancel", cancel_grace=timedelta(minutes=1))
async def cancel_flow(ctx: Any, x: int) -> str:
    try:
        await ctx.wait_for_signal("never")
    finally:
        await ctx.run(undo, "cleanup")
    return "unreachable"


@pytest.mark.django_db(transaction=True)
def test_cancel_runs_awaited_cleanup_in_finally(weft_env: Any) -> None:
    h = client.start("aw-cancel", 1, workflow_id="aw-5")
    weft_env.run_until_idle()
    client.cancel("aw-5", "stop")
    weft_env.run_until_idle()
    weft_env.advance(weft_env.engine.settings.claim_renew_interval_ms / 1000)
    weft_env.run_until_idle()
    assert h.status() == "cancelled", h.error()
    assert RAN == ["undo cleanup"]


@workflow(name="aw-more")
async def more(ctx: Any, n: int) -> Any:
    state = {"items": [], "go": False}
    ctx.on_query("items", lambda: list(state["items"]))

    async def add(item: str) -> int:
        await ctx.run(echo, item)
        state["items"].append(item)
        return len(state["items"])

    ctx.on_update("add", add)
    ctx.on_signal("go", lambda _: state.update(go=True))
    if ctx.patched("v2"):
        state["items"].append("patched")
    await ctx.wait_until(lambda: state["go"])
    if n > 0:
        await ctx.continue_as_new(n - 1)
    return state["items"]


@pytest.mark.django_db(transaction=True)
def test_query_update_wait_until_patched_continue_as_new(weft_env: Any) -> None:
    client.start("aw-more", 1, workflow_id="aw-6")
    weft_env.run_until_idle()
    assert client.query("aw-6", "items") == ["patched"]
    import threading

    answers: list[Any] = []
    caller = threading.Thread(target=lambda: answers.append(client.update("aw-6", "add", "pear")))
    caller.start()
    while caller.is_alive():
        weft_env.run_until_idle()
        caller.join(0.05)
    assert answers == [2]
    client.signal("aw-6", "go", None)
    weft_env.run_until_idle()
    client.signal("aw-6", "go", None)
    weft_env.run_until_idle()
    assert client.get_handle("aw-6").result(timeout=5) == ["patched"]


@workflow(name="aw-foreign")
async def foreign(ctx: Any, which: str) -> str:
    try:
        if which == "sleep":
            await asyncio.sleep(1)
        elif which == "sleep0":
            await asyncio.sleep(0)
        else:
            await asyncio.gather(ctx.run(echo, 1))
    except TypeError as exc:
        refused = str(exc)
    await ctx.run(echo, "after")
    return refused


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("which", "named", "instead"),
    [
        ("sleep", "asyncio.sleep", "ctx.sleep"),
        ("sleep0", "asyncio.sleep", "ctx.sleep"),
        ("gather", "asyncio.gather", "ctx.all"),
    ],
)
def test_a_foreign_awaitable_raises_type_error_into_the_body(
    weft_env: Any, which: str, named: str, instead: str
) -> None:
    h = client.start("aw-foreign", which, workflow_id=f"aw-f-{which}")
    weft_env.run_until_idle()
    message = h.result(timeout=1)
    assert named in message and f"await {instead}" in message
    assert [kind for kind, _ in journal(latest(f"aw-f-{which}"))] == ["activity"]


@workflow(name="aw-twice")
async def twice(ctx: Any, x: int) -> Any:
    command = ctx.run(echo, x)
    await command
    await command
    return "unreachable"


@pytest.mark.django_db(transaction=True)
def test_a_command_awaited_twice_is_refused(weft_env: Any) -> None:
    h = client.start("aw-twice", 1, workflow_id="aw-7")
    weft_env.run_until_idle()
    assert h.status() == "failed"
    assert "awaited twice" in h.error()["message"]


def test_a_ctx_command_awaited_outside_a_body_is_refused() -> None:
    from weft_django.engine.workflow.commands import Sleep

    async def outside() -> None:
        await Sleep(10)

    with pytest.raises(RuntimeError, match="outside a workflow body"):
        asyncio.run(outside())


class Opaque:
    """Not a dataclass nor a model: no way back from JSON."""


def test_an_annotation_that_cannot_be_rebuilt_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match="Opaque"):

        @workflow(name="aw-opaque")
        async def opaque(ctx: Any, value: Opaque) -> None:
            return None

    with pytest.raises(TypeError, match="Opaque"):

        @activity(name="aw-opaque-activity")
        def opaque_activity() -> Opaque:
            return Opaque()

    assert "aw-opaque" not in registry.workflows
    assert "aw-opaque-activity" not in registry.activities


@dataclasses.dataclass
class RenamedReceipt:
    order_id: str
    amount: int  # was "total" when the run stored its receipt


@pytest.mark.django_db(transaction=True)
def test_a_stored_value_that_no_longer_fits_suspends_the_run(weft_env: Any) -> None:
    from weft_django.engine.workflow.payload_types import rebuilder

    client.start(order_flow, Order("o-9", 1), workflow_id="aw-8")
    weft_env.run_until_idle()  # charged; now asleep
    before = registry.activities["aw-charge"]
    # The deploy: the activity's declared result changed under the live run.
    deployed = dataclasses.replace(before, result_rebuild=rebuilder(RenamedReceipt, "test"))
    registry.activities["aw-charge"] = deployed
    charge.__weft_activity__ = deployed  # type: ignore[attr-defined]
    try:
        if weft_env.engine.workflow_cache is not None:  # a takeover: a fresh replay
            weft_env.engine.workflow_cache.clear()
        weft_env.advance(6)
        weft_env.run_until_idle()
    finally:
        registry.activities["aw-charge"] = before
        charge.__weft_activity__ = before  # type: ignore[attr-defined]
    run = latest("aw-8")
    assert run.status == "suspended"
    assert run.error["type"] == "PayloadTypeMismatch"
    assert "amount" in run.error["message"] and "position 0" in run.error["message"]


@workflow(name="aw-orm")
async def orm_in_body(ctx: Any, x: int) -> Any:
    from weft_django.models import WorkflowRun

    return WorkflowRun.objects.count()


@pytest.mark.django_db(transaction=True)
def test_the_database_is_refused_in_an_async_body(weft_env: Any) -> None:
    h = client.start("aw-orm", 1, workflow_id="aw-9")
    weft_env.run_until_idle()
    assert h.status() == "failed"
    assert h.error()["type"] in ("SynchronousOnlyOperation", "WorkflowDatabaseAccessError")
