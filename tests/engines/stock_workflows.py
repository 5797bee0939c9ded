"""Workflows of the stock scenario (``test_atomic_stock``): exactly-once checkout.

Loaded by the test (to start runs by name) and by every engine child
(``Worker(..., imports=IMPORTS)``). ``procs-stock-order`` reserves one unit
of its own product and one of a shared, contended one in an atomic step,
takes a payment (a plain activity that declines some orders), and on a
decline releases both units in another atomic step.

The evidence: ``Stock`` quantities and ``StockMove`` rows (written in the
step's transaction: a step applied twice leaves two moves), and one line per
*execution* of an atomic body appended to the file ``WEFT_STOCK_LOG`` names
(outside the transaction, before it commits: executions the kills rolled
back are counted there and nowhere else).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from weft_django import activity, activity_info, workflow
from weft_django.errors import ActivityError

IMPORTS = ("tests.engines.stock_workflows",)
HOT_SKU = "stock-hot"
BODY_SECONDS = 0.12  # the transaction stays open this long: kills land inside it


class PaymentDeclined(Exception):
    """The payment provider said no (never retried)."""


def _apply(sku: str, kind: str, delta: int) -> int:
    from project.demo.models import Stock, StockMove

    info = activity_info()
    left = 0
    for name in (sku, HOT_SKU):  # one order for every step: own row, then the hot one
        row = Stock.objects.select_for_update().get(pk=name)
        row.quantity += delta
        row.save(update_fields=["quantity"])
        StockMove.objects.create(sku=name, workflow_id=info.workflow_id, kind=kind, delta=delta)
        left = left or row.quantity
    log = os.environ.get("WEFT_STOCK_LOG")
    if log:
        with open(log, "a") as out:  # one short O_APPEND write per execution
            out.write(f"{info.workflow_id} {kind} {info.epoch} {os.getpid()}\n")
    time.sleep(BODY_SECONDS)
    return left


@activity(name="procs_stock_reserve", atomic=True, retries=10, backoff=timedelta(milliseconds=50))
def reserve(sku: str) -> int:
    return _apply(sku, "reserve", -1)


@activity(name="procs_stock_release", atomic=True, retries=10, backoff=timedelta(milliseconds=50))
def release(sku: str) -> int:
    return _apply(sku, "release", +1)


@activity(name="procs_stock_pay", non_retryable=(PaymentDeclined,))
def pay(order_id: str, decline: bool) -> str:
    time.sleep(0.1)
    if decline:
        raise PaymentDeclined(f"card declined for {order_id}")
    return f"paid:{order_id}"


@workflow(name="procs-stock-order")
def stock_order(ctx: Any, data: dict[str, Any]) -> Any:
    yield ctx.run(reserve, data["sku"])
    yield ctx.sleep(timedelta(milliseconds=data.get("pause_ms", 500)))
    try:
        receipt = yield ctx.run(pay, data["sku"], data["decline"])
    except ActivityError:
        yield ctx.run(release, data["sku"])
        return "released"
    return receipt
