"""An order workflow as a typed project writes it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pydantic import BaseModel

from weft_django import WorkflowContext, activity, workflow


@dataclass
class Order:
    order_id: str
    quantity: int
    note: str | None = None


class Receipt(BaseModel):
    order_id: str
    total_cents: int


@dataclass
class Shipped:
    carrier: str


@activity(retries=2)
def charge(order: Order, cents_each: int) -> Receipt:
    return Receipt(order_id=order.order_id, total_cents=order.quantity * cents_each)


@activity()
async def reserve(sku: str, quantity: int) -> bool:
    return quantity > 0


@activity()
def refund(receipt_id: str) -> None:
    return None


@activity()
def price(sku: str) -> int:
    return len(sku) * 100


@workflow(name="typed-order")
async def order(ctx: WorkflowContext, order: Order) -> Receipt:
    saga = ctx.saga()
    reserved = await ctx.run(reserve, "sku-1", order.quantity)
    if not reserved:
        return Receipt(order_id=order.order_id, total_cents=0)
    receipt = await ctx.run(charge, order, 250)
    saga.add(refund, receipt.order_id)
    try:
        await ctx.wait_for_signal("shipped", timeout=timedelta(days=3), type=Shipped)
    except Exception:
        await saga.compensate()
        raise
    return receipt


@workflow(name="typed-quote")
async def quote(ctx: WorkflowContext, skus: list[str]) -> int:
    prices = await ctx.map(price, skus, max_concurrency=4)
    first, second = await ctx.all(ctx.run(price, "a"), ctx.run(reserve, "b", 1))
    index, _winner = await ctx.race(ctx.sleep(60), ctx.run(price, "c"))
    child = await ctx.start_child(order, Order("child", 1))
    return sum(prices) + first + int(second) + index + child.total_cents
