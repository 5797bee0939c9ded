"""The lock order of atomic steps (PostgreSQL): a step's own rows, then the fence.

Two engines drive 8 runs at once, each an atomic step that updates two
contended ``Stock`` rows -- half of them in the opposite order, so the
*bodies* deadlock each other for real (``40P01``). What could fail:

* the fence (claim, then run row; no user code inside it) joining a cycle
  with a body's row locks -- a run would then end failed or hang;
* a body's deadlock not being rolled back and retried under the
  activity's policy -- a move would be missing or applied twice.

At the end every run completed, each row lost exactly one unit per run,
and every run left exactly one move per row.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection

from project.demo.models import Stock, StockMove
from weft_django import activity, activity_info, client, workflow
from weft_django.engine import Engine
from weft_django.models import WorkflowRun

RUNS = 8
ATTEMPTS: list[int] = []


@activity(
    name="atomic-pair",
    atomic=True,
    retries=20,
    backoff=timedelta(milliseconds=20),
    max_backoff=timedelta(milliseconds=200),
    jitter=0.5,
)
def take_pair(first: str, second: str) -> int:
    info = activity_info()
    ATTEMPTS.append(info.attempt)
    for index, sku in enumerate((first, second)):
        row = Stock.objects.select_for_update().get(pk=sku)
        row.quantity -= 1
        row.save(update_fields=["quantity"])
        StockMove.objects.create(sku=sku, workflow_id=info.workflow_id, kind="pair", delta=-1)
        if index == 0:
            time.sleep(0.03)  # hold the first row while the other order takes the second
    return info.attempt


@workflow(name="atomic-pair-flow")
def pair_flow(ctx, data):
    return (yield ctx.run(take_pair, *data["order"]))


@pytest.mark.django_db(transaction=True)
def test_contended_rows_and_the_fence_do_not_deadlock():
    if connection.vendor != "postgresql":
        pytest.skip("row locks are PostgreSQL's (SQLite has one writer at a time)")
    ATTEMPTS.clear()
    Stock.objects.bulk_create(
        [Stock(sku="hot-a", quantity=1000), Stock(sku="hot-b", quantity=1000)]
    )
    ids = [f"pair-{i}" for i in range(RUNS)]
    for i, wid in enumerate(ids):
        order = ["hot-a", "hot-b"] if i % 2 == 0 else ["hot-b", "hot-a"]
        client.start("atomic-pair-flow", {"order": order}, workflow_id=wid)
    # Background engines: each drives several turns at once, on its own threads.
    engines = [Engine(f"pair-engine-{n}").start() for n in range(2)]
    try:
        deadline = time.monotonic() + 60  # hang protection only
        while time.monotonic() < deadline:
            left = WorkflowRun.objects.filter(workflow_id__in=ids).exclude(status="completed")
            if not left.exists():
                break
            time.sleep(0.05)
    finally:
        for engine in engines:
            engine.dispose(grace=5)
    statuses = dict(
        WorkflowRun.objects.filter(workflow_id__in=ids).values_list("workflow_id", "status")
    )
    assert set(statuses.values()) == {"completed"}, statuses
    assert dict(Stock.objects.values_list("sku", "quantity")) == {
        "hot-a": 1000 - RUNS,
        "hot-b": 1000 - RUNS,
    }
    for wid in ids:
        moves = sorted(StockMove.objects.filter(workflow_id=wid).values_list("sku", flat=True))
        assert moves == ["hot-a", "hot-b"], (wid, moves)
    print(
        f"\natomic-pair attempts: {len(ATTEMPTS)} for {RUNS} runs (retried: "
        f"{sum(1 for a in ATTEMPTS if a > 1)})"
    )
