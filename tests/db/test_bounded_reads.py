"""The reads that keep cost bounded as history grows (issue #21): capped counts,
distinct values by index, and the windowed sweep for runs without a claim row.

Invariants protected: a count under its cap is exact (and says so); above
it, on PostgreSQL, it is the planner's estimate, never below ``cap + 1`` and
marked inexact (SQLite keeps the exact count); the value filters list every
distinct value once, in order, with ``None`` for NULL; and a drivable run
whose claim row is missing is found by the reclaim sweep within
ceil(drivable / SWEEP) passes, while a run with a claim row never is.
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.support import ManualClock
from weft_django.db.counting import (
    BoundedCount,
    BoundedCountPaginator,
    bounded_count,
    bounded_counts,
    common_value_estimates,
)
from weft_django.db.distinct import distinct_values
from weft_django.engine import Engine
from weft_django.engine.maintenance import reclaim as maintenance_module
from weft_django.models import WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.django_db


def _runs(n: int, *, status: str = "completed", name: str = "w", queue: str | None = None) -> None:
    WorkflowRun.objects.bulk_create(
        WorkflowRun(workflow_id=f"{name}-{status}-{i}", name=name, status=status, queue=queue)
        for i in range(n)
    )


def _analyze() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE weft_workflowrun")


def test_a_count_under_its_cap_is_exact() -> None:
    _runs(7)
    assert bounded_count(WorkflowRun.objects.all(), cap=7) == BoundedCount(7, True)
    assert bounded_count(WorkflowRun.objects.filter(name="nope"), cap=0) == BoundedCount(0, True)


def test_a_count_over_its_cap_is_an_estimate_on_postgresql() -> None:
    _runs(30)
    _analyze()
    counted = bounded_count(WorkflowRun.objects.all(), cap=10)
    if connection.vendor == "postgresql":
        assert not counted.exact
        assert counted.value >= 11  # never below what was seen
    else:
        assert counted == BoundedCount(30, True)  # no cheap estimate: exact


def test_counts_in_one_statement_with_known_estimates() -> None:
    _runs(12, status="completed")
    _runs(3, status="failed")
    _analyze()
    runs = WorkflowRun.objects.all()
    postgresql = connection.vendor == "postgresql"
    # Elsewhere there are no statistics to estimate from: the caller passes none.
    known = (
        {"completed": 4_242}
        if postgresql
        else common_value_estimates(WorkflowRun, "status", "default")
    )
    counted = bounded_counts(
        {s: runs.filter(status=s) for s in ("completed", "failed", "parked")},
        cap=5,
        estimates=known,
    )
    assert counted["failed"] == BoundedCount(3, True)
    assert counted["parked"] == BoundedCount(0, True)
    if postgresql:
        assert counted["completed"] == BoundedCount(4_242, False)
        estimates = common_value_estimates(WorkflowRun, "status", "default")
        assert estimates.get("completed", 0) >= 10  # ANALYZE saw them
    else:
        assert counted["completed"] == BoundedCount(12, True)
        assert common_value_estimates(WorkflowRun, "status", "default") == {}
    with pytest.raises(ValueError, match="-1"):
        bounded_counts({"x": runs}, cap=-1)


def test_the_paginator_counts_with_the_cap() -> None:
    _runs(3)
    paginator = BoundedCountPaginator(WorkflowRun.objects.order_by("pk"), 2)
    assert paginator.count == 3 and paginator.count_exact and paginator.num_pages == 2


def test_distinct_values_in_order_with_null_last() -> None:
    _runs(3, name="b", queue="q2")
    _runs(2, name="a")
    _runs(1, name="c", queue="q1")
    assert distinct_values(WorkflowRun, "name", "default") == ["a", "b", "c"]
    assert distinct_values(WorkflowRun, "queue", "default") == ["q1", "q2", None]
    assert distinct_values(WorkflowRun, "name", "default", limit=2) == ["a", "b"]
    with pytest.raises(ValueError, match="0"):
        distinct_values(WorkflowRun, "name", "default", limit=0)


def test_the_sweep_finds_every_unclaimed_run_within_its_passes(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(maintenance_module, "SWEEP", 3)
    _runs(8, status="parked", name="sw")
    claimed = [f"sw-parked-{i}" for i in (0, 4, 7)]
    WorkflowClaim.objects.bulk_create(
        WorkflowClaim(workflow_id=w, epoch=1, engine_id=None) for w in claimed
    )
    engine = Engine("engine-sweep", clock=clock)
    found: list[str] = []
    for _ in range(3):  # ceil(8 / 3) passes cover every drivable run
        got = engine.maintenance.unclaimed(limit=100)
        assert len(got) <= 3
        found += [wid for _, wid in got]
    expected = sorted(f"sw-parked-{i}" for i in range(8) if f"sw-parked-{i}" not in claimed)
    assert sorted(found) == expected
    # The window wraps around: any ceil(8 / 3) passes in a row find them all again.
    again = [wid for _ in range(3) for _, wid in engine.maintenance.unclaimed(limit=100)]
    assert set(again) == set(expected)  # some twice: a window may wrap mid-way


def test_a_small_store_is_swept_whole_every_pass(clock: ManualClock) -> None:
    _runs(4, status="parked", name="sm")
    engine = Engine("engine-small", clock=clock)
    for _ in range(2):
        assert len(engine.maintenance.unclaimed(limit=100)) == 4
