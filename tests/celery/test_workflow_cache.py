"""The workflow cache on a Celery node (issue #14): what the node's routing gives.

Celery hands each ``weft.drive`` to whichever pool slot is free, so a run's
consecutive turns land on any of the node's pool processes or threads.

- Threads pool: the pool engines of the process share one cache
  (``pool.PoolState.cache``), so every turn but each run's first (its
  pickup, nothing cached yet) resumes the replay the last turn parked:
  misses = runs, hits = signals, exactly.
- Prefork pool (2 processes): every turn counts one look; a turn on another
  process than the last is a miss, i.e. a full replay, and the results are
  the same: every step ran once, every run completed. The hit rate is
  printed (``-s``), not asserted: it is Celery's choice of process.

PostgreSQL only (asserted); ``processes`` marker: a real worker node.
"""

from __future__ import annotations

import pytest
from django.db.models import F, Q

from project.demo.models import SideEffect
from tests.celery.conftest import CeleryWorker, wait_for
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.processes]

RUNS = 6
STEPS = 4


def settled(run_ids: list[str]) -> bool:
    """Every run consumed every signal sent so far (parked again, or done)."""
    done = Q(status="completed") | Q(status="parked", parked_seq__gte=F("wake_seq"))
    return WorkflowRun.objects.filter(pk__in=run_ids).filter(done).count() == len(run_ids)


def drive_loops(worker: CeleryWorker, tag: str) -> None:
    """``RUNS`` signal loops of ``STEPS`` steps, one round of signals at a time."""
    handles = [
        client.start(
            "celery-signal-loop", {"id": f"{tag}{i}", "steps": STEPS}, workflow_id=f"{tag}{i}"
        )
        for i in range(RUNS)
    ]
    run_ids = [str(h.run_id) for h in handles]
    wait_for("every run parked", lambda: settled(run_ids), worker)
    for step in range(STEPS):
        for h in handles:
            client.signal(h.workflow_id, "go", step)
        wait_for(f"round {step + 1} consumed", lambda: settled(run_ids), worker)
    for i, h in enumerate(handles):
        assert h.result(timeout=30) == [f"{tag}{i}:{s}:{s}" for s in range(STEPS)]
    effects = SideEffect.objects.filter(kind="celery", key__startswith=tag)
    assert effects.count() == RUNS * STEPS  # every step ran once, hit or miss


def looks(worker: CeleryWorker) -> tuple[int, int]:
    metrics = worker.metrics_when(
        "every turn's look counted",
        lambda m: m.workflow_cache_hits + m.workflow_cache_misses >= RUNS * (STEPS + 1),
    )
    return metrics.workflow_cache_hits, metrics.workflow_cache_misses


@pytest.mark.django_db(transaction=True)
def test_threads_pool_turns_resume_the_cached_replay(postgres, celery_app, workers, tmp_path):
    worker = CeleryWorker("cachethreads", tmp_path, pool="threads", concurrency=2)
    workers.append(worker)
    worker.wait_ready()
    drive_loops(worker, "wct")
    assert looks(worker) == (RUNS * STEPS, RUNS)


@pytest.mark.django_db(transaction=True)
def test_prefork_turns_on_another_process_replay_with_the_same_result(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker("cacheprefork", tmp_path)  # prefork, 2 processes
    workers.append(worker)
    worker.wait_ready()
    drive_loops(worker, "wcp")
    hits, misses = looks(worker)
    assert hits + misses == RUNS * (STEPS + 1)
    assert misses >= RUNS  # each run's first turn has nothing cached
    rate = hits / (hits + misses)
    print(f"\nprefork -c 2: workflow cache hits {hits}, misses {misses} ({rate:.0%})")
