"""The stock scenario (issue #17, "Done when"): exactly-once atomic steps under SIGKILL.

30 orders (``tests/engines/stock_workflows.py``) each reserve a unit of
their own product (99 in stock) and of a shared, contended one in an
atomic step; every third payment is declined and undone by an atomic
release. Three ``weft_worker`` processes drive them while the test SIGKILLs
one at seeded random instants -- at least 20 kills, each victim replaced by
a fresh engine, so runs are taken over again and again. Every other kill is
aimed: it waits for an atomic body to open (its log line) and kills that
engine within 80 ms, inside the transaction (the body holds it ~120 ms).

What could fail, read from durable rows only: a product not back at 99
after its release, or not at 98 after a payment; the shared product off by
any unit; a step with more (or fewer) than one ``StockMove``; a run left
unfinished. The executions the kills rolled back are counted from a log the
bodies append to before they commit, and printed (``-s``).

Runs on PostgreSQL and on SQLite (file-backed, WAL: there an atomic body
holds the database's write lock, and a kill releases it with the process).
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from project.demo.models import Stock, StockMove
from tests.engines.harness import HANG_TIMEOUT_S, Worker, kill_all, wait_for
from tests.engines.stock_workflows import HOT_SKU, IMPORTS
from weft_django import client
from weft_django.models import ClaimEvent, WorkflowRun

pytestmark = [pytest.mark.processes]

SEED = int(os.environ.get("WEFT_STOCK_SEED", "17"))  # another seed: another kill schedule
ORDERS = 30
KILLS = 20
ENGINES = 3
FINISH_TIMEOUT_S = 75.0  # hang protection only


def _inside_a_body(log: Path, alive: list[Worker]) -> Worker | None:
    """The worker whose atomic body just opened (its log line appeared), or
    ``None`` when none did within 3 s (the orders are nearly done)."""
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    deadline = time.monotonic() + 3.0
    by_pid = {worker.proc.pid: worker for worker in alive}
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines[seen:]:
            worker = by_pid.get(int(line.rsplit(" ", 1)[1]))
            if worker is not None:
                return worker
        seen = max(seen, len(lines))
        time.sleep(0.01)
    return None


def _declined(i: int) -> bool:
    return i % 3 == 0


@pytest.mark.django_db(transaction=True)
def test_stock_is_exact_after_twenty_kills_and_takeovers(tmp_path):
    rng = random.Random(SEED)
    log = tmp_path / "executions.log"
    env = {"WEFT_STOCK_LOG": str(log)}
    ids = [f"stock-{i}" for i in range(ORDERS)]
    Stock.objects.bulk_create(
        [Stock(sku=wid, quantity=99) for wid in ids] + [Stock(sku=HOT_SKU, quantity=1000)]
    )
    serial = iter(range(1000))
    workers: list[Worker] = []

    def new_worker() -> Worker:
        worker = Worker(f"stock-w{next(serial)}", tmp_path, env=env, imports=IMPORTS)
        workers.append(worker)
        return worker

    started = time.monotonic()
    try:
        alive = [new_worker() for _ in range(ENGINES)]
        for worker in alive:
            worker.wait_booted()
        for i, wid in enumerate(ids):
            client.start(
                "procs-stock-order",
                {"sku": wid, "decline": _declined(i), "pause_ms": rng.randrange(200, 1500)},
                workflow_id=wid,
            )
        aimed = 0
        for n in range(KILLS):
            victim = _inside_a_body(log, alive) if n % 2 == 0 else None
            if victim is None:
                time.sleep(rng.uniform(0.3, 1.1))  # the seeded kill instant itself, not a wait
                victim = alive[rng.randrange(len(alive))]
            else:
                aimed += 1
                time.sleep(rng.uniform(0.0, 0.08))  # somewhere inside its open transaction
            alive.remove(victim)
            victim.kill()
            alive.append(new_worker())
        killed_at = time.monotonic()

        def all_finished() -> bool:
            left = WorkflowRun.objects.filter(workflow_id__in=ids).exclude(
                status__in=("completed", "failed", "cancelled", "suspended")
            )
            return not left.exists()

        wait_for("every order to finish", all_finished, *alive, timeout=FINISH_TIMEOUT_S)
    finally:
        kill_all(workers)
    runs = dict(
        WorkflowRun.objects.filter(workflow_id__in=ids).values_list("workflow_id", "status")
    )
    assert set(runs.values()) == {"completed"}, runs
    results = dict(
        WorkflowRun.objects.filter(workflow_id__in=ids).values_list("workflow_id", "result")
    )
    stock = dict(Stock.objects.values_list("sku", "quantity"))
    moves = Counter(StockMove.objects.values_list("workflow_id", "sku", "kind"))
    paid = 0
    for i, wid in enumerate(ids):
        if _declined(i):
            assert results[wid] == "released", (wid, results[wid])
            assert stock[wid] == 99, (wid, stock[wid])
            expected = {"reserve", "release"}
        else:
            paid += 1
            assert results[wid] == f"paid:{wid}", (wid, results[wid])
            assert stock[wid] == 98, (wid, stock[wid])
            expected = {"reserve"}
        for sku in (wid, HOT_SKU):
            for kind in ("reserve", "release"):
                want = 1 if kind in expected else 0
                assert moves[(wid, sku, kind)] == want, (wid, sku, kind, moves[(wid, sku, kind)])
    assert stock[HOT_SKU] == 1000 - paid
    takeovers = ClaimEvent.objects.filter(workflow_id__in=ids, kind="takeover").count()
    assert takeovers >= 1
    executions = log.read_text().splitlines() if log.exists() else []
    applied = sum(moves.values()) // 2
    rolled_back = len(executions) - applied
    # Aimed kills land inside open transactions: some executions were undone.
    assert rolled_back >= 1, (len(executions), applied)
    print(
        f"\n[{connection.vendor}] stock: {KILLS} kills, {len(workers)} engines, {takeovers} "
        f"takeovers; {aimed} kills aimed at an open atomic body; {len(executions)} atomic "
        f"executions, {applied} applied ({rolled_back} rolled back); kills took "
        f"{killed_at - started:.1f} s, finished {time.monotonic() - started:.1f} s after the start"
        f" (hang bound {HANG_TIMEOUT_S} s per wait)"
    )
