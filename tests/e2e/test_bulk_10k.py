"""Bulk cancel and retry by filter on 10,000 runs (issue #20 part 3), PostgreSQL.

The issue's "done when": a bulk operation on 10,000 runs, with a dry run,
its progress reaching the total, and an interruption that leaves every run
done or untouched and a rerun that finishes the rest. Seeded with
``bulk_create`` in the shapes the engine leaves (parked runs holding a
claim; failed runs with an errored journal entry after a good one).
In the processes tier: it runs once, on PostgreSQL.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

from benchmarks.bulk import SEEDED_ENGINE, seed_runs
from weft_django import client
from weft_django.engine.runs.filters import RunFilter
from weft_django.models import (
    ClaimEvent,
    JournalEntry,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

N = 10_000


@pytest.fixture(autouse=True)
def postgres_only(settings: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("the 10,000-run bulk test runs on PostgreSQL")
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": {"batch": "str"}}


def seed(status: str, batch: str, count: int = N) -> list[uuid.UUID]:
    return seed_runs(status, batch, count, name="bulk-order")


def test_bulk_cancel_of_10000_runs_dry_run_interrupted_and_resumed() -> None:
    seed("parked", "b1")
    seed("parked", "other", 50)  # not matched: must stay untouched
    chosen = RunFilter(attributes={"batch": "b1"}, status=("parked", "pending"))

    dry = client.cancel_many(chosen, dry_run=True)
    assert (dry.matched, dry.changed, dry.skipped, dry.dry_run) == (N, N, 0, True)
    assert WorkflowRun.objects.filter(status="parked").count() == N + 50
    assert ClaimEvent.objects.count() == 0

    calls: list[tuple[int, int]] = []

    def interrupt_after_three(done: int, total: int) -> None:
        calls.append((done, total))
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C in the command

    with pytest.raises(KeyboardInterrupt):
        client.cancel_many(chosen, reason="bad batch", progress=interrupt_after_three)
    assert calls == [(200, N), (400, N), (600, N)]
    assert WorkflowRun.objects.filter(status="cancelled").count() == 600
    # Done or untouched: a cancelled run has its claim rotated, a parked one not.
    assert WorkflowClaim.objects.filter(epoch=2, engine_id__isnull=True).count() == 600
    assert WorkflowClaim.objects.filter(epoch=1, engine_id=SEEDED_ENGINE).count() == N - 600 + 50

    # The same filter again (status=parked now matches only the rest).
    seen: list[tuple[int, int]] = []
    rerun = client.cancel_many(
        RunFilter(attributes={"batch": "b1"}),
        reason="bad batch",
        progress=lambda done, total: seen.append((done, total)),
    )
    assert (rerun.matched, rerun.changed, rerun.skipped) == (N, N - 600, 600)
    assert seen[-1] == (N, N) and len(seen) == N // 200
    assert WorkflowRun.objects.filter(status="cancelled").count() == N
    assert (
        WorkflowRun.objects.filter(workflow_id__startswith="other-", status="parked").count() == 50
    )
    assert WorkflowClaim.objects.filter(epoch=2, engine_id__isnull=True).count() == N
    assert ClaimEvent.objects.filter(kind="rotate", reason="bad batch").count() == N
    assert not WorkflowRun.objects.filter(status="cancelled", finished_at__isnull=True).exists()


def test_bulk_retry_of_10000_runs() -> None:
    seed("failed", "f1")
    chosen = RunFilter(status=("failed",), workflow=("bulk-order",))
    dry = client.retry_many(chosen, dry_run=True)
    assert (dry.matched, dry.changed) == (N, N)
    assert WorkflowRun.objects.filter(status="failed").count() == N

    seen: list[tuple[int, int]] = []
    result = client.retry_many(chosen, progress=lambda d, t: seen.append((d, t)))
    assert (result.matched, result.changed, result.skipped) == (N, N, 0)
    assert seen[-1] == (N, N)
    assert WorkflowRun.objects.filter(status="pending", wake_seq=2, version=4).count() == N
    # Each run's trailing failed entry is gone, its good one kept.
    assert JournalEntry.objects.filter(error__isnull=False).count() == 0
    assert JournalEntry.objects.count() == N
    again = client.retry_many(chosen)
    assert (again.matched, again.changed) == (0, 0)
