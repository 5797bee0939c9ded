"""Concurrent commands on a Celery node (issue #14): a turn in a prefork pool
process starts every open activity at once on that process's executor.

- ``ctx.all`` of 4 activities: each is a rendezvous that returns only once
  all 4 have started in the same pool process (else it raises and the run
  fails), so their recorded start-end intervals all overlap.
- ``ctx.race`` an activity wins, one a sleep wins (the losing activity's
  attempt is cancelled: its heartbeat raises ``ActivityCancelled``), and an
  ``all`` nesting an ``all`` and a race: each gives the right values and
  ``(index, value)``.

PostgreSQL only (asserted); ``processes`` marker: a real worker node.
"""

from __future__ import annotations

import pytest

from project.demo.models import SideEffect
from tests.celery.conftest import CeleryWorker, wait_for
from weft_django import client

pytestmark = [pytest.mark.processes]


@pytest.mark.django_db(transaction=True)
def test_all_of_four_activities_run_at_once_in_a_pool_process(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker("all4", tmp_path)  # prefork, 2 processes
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("celery-all-four", {"id": "all4"}, workflow_id="celery-all4")
    intervals = handle.result(timeout=30)
    assert handle.status() == "completed", handle.error()
    assert len(intervals) == 4
    # One pool process (the turn's), four executor threads.
    assert len({i["pid"] for i in intervals}) == 1, intervals
    assert len({i["thread"] for i in intervals}) == 4, intervals
    assert {i["pid"] for i in intervals} != {worker.proc.pid}  # not the node's main process
    # Every interval overlaps every other: the last start precedes the first end.
    assert max(i["start"] for i in intervals) <= min(i["end"] for i in intervals), intervals
    spans = sorted((i["start"], i["end"]) for i in intervals)
    print(f"\nctx.all of 4 on a pool process: intervals (ms) {spans}")


@pytest.mark.django_db(transaction=True)
def test_race_and_nested_all_on_a_pool_process(postgres, celery_app, workers, tmp_path):
    worker = CeleryWorker("race", tmp_path)
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("celery-race-nested", {"id": "rn"}, workflow_id="celery-race-nested")
    result = handle.result(timeout=30)
    assert handle.status() == "completed", handle.error()
    assert result == {
        "fast": [0, "rn:fast"],
        "slow": [1, None],
        "nested": ["rn:a", ["rn:b", "rn:c"], [1, "rn:d"]],
    }
    # The activity that lost to the sleep was cancelled where it ran.
    wait_for(
        "the losing activity to see its cancellation",
        lambda: SideEffect.objects.filter(kind="celery-cancelled", key="rn").exists(),
        worker,
    )
    for step in ("fast", "a", "b", "c", "d"):
        assert SideEffect.objects.filter(kind="celery", key=f"rn:{step}").count() == 1, step
