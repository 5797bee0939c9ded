"""What a type checker infers (``tests/unit/test_typed_example.py`` reads each
``reveal_type`` line's expectation from its trailing comment)."""

from __future__ import annotations

from typing import reveal_type

from examples.typed.workflows import Order, charge, order, price, reserve
from weft_django import WorkflowContext, client


async def body(ctx: WorkflowContext) -> None:
    reveal_type(await ctx.run(charge, Order("o", 1), 250))  # expect: Receipt
    reveal_type(await ctx.run(reserve, "sku", 1))  # expect: bool
    both = ctx.all(ctx.run(price, "a"), ctx.run(reserve, "b", 1))
    reveal_type(await both)  # expect: tuple[int, bool]
    reveal_type(await ctx.map(price, ["a", "b"]))  # expect: list[int]
    reveal_type(await ctx.start_child(order, Order("c", 1)))  # expect: Receipt


def caller() -> None:
    handle = client.start(order, Order("o-1", 2))
    reveal_type(handle.result())  # expect: Receipt
    reveal_type(client.start("typed-order", {"order_id": "o"}).result())  # expect: Any
