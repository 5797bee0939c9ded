"""Routed activities on real Celery workers (issue #16 part 3). PostgreSQL, Redis.

One weft node (``celery -A project worker``: the engine that owns the runs)
and a plain Celery worker of ``tests.celery.routed_app`` consuming only the
queue ``gpu`` (no engine, no claim): ``task_always_eager`` is off, every
attempt is a real message. What ran is read from durable records
(``SideEffect``, ``RoutedAttempt``, the journal), never from durations.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

import tests.celery.routed_workflows  # noqa: F401  (registers the workflow here)
from project.demo.models import SideEffect
from tests.celery.conftest import HANG_TIMEOUT_S, REDIS_URL, CeleryWorker, wait_for
from tests.support import ChildGroup, child_env, python
from weft_django import client
from weft_django.models import JournalEntry, RoutedAttempt

pytestmark = [pytest.mark.processes]

IMPORTS = (
    "tests.celery.workflows",
    "tests.celery.routed_workflows",
    "tests.celery.routed_activities",
)
#: Hang protection for a run that waits out one routed timeout (8 s) and more.
RUN_TIMEOUT_S = 90.0


class GpuWorker(ChildGroup):
    """``celery -A tests.celery.routed_app worker -Q gpu``: routed activities only."""

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(self, name: str, logs: Path, *, concurrency: int = 1) -> None:
        self.node = f"{name}-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        command = [
            python(),
            "-m",
            "celery",
            "-A",
            "tests.celery.routed_app",
            "worker",
            "-n",
            self.node,
            "-Q",
            "gpu",
            "-P",
            "prefork",
            "-c",
            str(concurrency),
            "-l",
            "INFO",
            "-I",
            "tests.celery.routed_activities",
            "--without-mingle",
            "--without-gossip",
        ]
        env = child_env(CELERY_BROKER_URL=REDIS_URL, WEFT_TEST_TIMINGS="1")
        super().__init__(command, logs / f"{name}.log", env)

    def wait_ready(self) -> None:
        wait_for(f"{self.node} to be ready", lambda: f"{self.node} ready." in self.log(), self)


@pytest.fixture
def nodes(postgres, celery_app, workers, tmp_path):
    engine = CeleryWorker("engine", tmp_path, REDIS_URL, imports=IMPORTS)
    workers.append(engine)
    gpus: list[GpuWorker] = []

    def gpu(name: str) -> GpuWorker:
        worker = GpuWorker(name, tmp_path)
        gpus.append(worker)
        worker.wait_ready()
        return worker

    try:
        engine.wait_ready()
        yield engine, gpu
    finally:
        for worker in gpus:
            worker.kill()


def _effects(kind: str, key: str) -> list[tuple[int, int]]:
    """``(attempt, pid)`` of each ``kind`` side effect of ``key``, in order."""
    rows = SideEffect.objects.filter(kind=kind, key__startswith=f"{key}|").order_by("id")
    found = []
    for value in rows.values_list("key", flat=True):
        _, attempt, pid = value.split("|")
        found.append((int(attempt), int(pid)))
    return found


def _rows(run_id) -> list[tuple[int, str]]:
    return list(
        RoutedAttempt.objects.filter(run_id=run_id)
        .order_by("attempt", "created_at")
        .values_list("attempt", "status")
    )


def _results(run_id) -> int:
    return JournalEntry.objects.filter(
        run_id=run_id, kind="activity", target="celery.gpu_square"
    ).count()


@pytest.mark.django_db(transaction=True)
def test_a_routed_activity_runs_on_the_gpu_worker_and_its_result_lands(nodes) -> None:
    _engine, gpu = nodes
    worker = gpu("gpu-a")
    h = client.start("celery-routed", {"key": "r1", "x": 7}, workflow_id="routed-1")
    result = h.result(timeout=RUN_TIMEOUT_S)
    assert result["square"] == 49 and result["attempt"] == 1
    assert worker.proc.pid != result["pid"], "it ran in a pool process of the gpu worker"
    assert _effects("gpu-done", "r1") == [(1, result["pid"])]
    assert _rows(h.run_id) == [(1, "completed")]
    row = RoutedAttempt.objects.get(run_id=h.run_id)
    assert row.worker.startswith("gpu-a-"), row.worker
    assert _results(h.run_id) == 1
    _print_latencies(worker)


def _print_latencies(worker: GpuWorker, runs: int = 5) -> None:
    """Answer -> journal and start -> result of a few sequential runs (printed, not asserted)."""
    to_journal, round_trip = [], []
    for i in range(runs):
        started = time.monotonic()
        h = client.start("celery-routed", {"key": f"lat{i}", "x": i}, workflow_id=f"lat-{i}")
        h.result(timeout=RUN_TIMEOUT_S)
        round_trip.append(round((time.monotonic() - started) * 1000))
        row = RoutedAttempt.objects.get(run_id=h.run_id)
        entry = JournalEntry.objects.get(run_id=h.run_id, kind="activity")
        assert row.completed_at is not None
        to_journal.append(entry.at_ms - round(row.completed_at.timestamp() * 1000))
    print(
        f"routed answer->journal ms: {sorted(to_journal)}; start->result ms: {sorted(round_trip)}"
    )


@pytest.mark.django_db(transaction=True)
def test_a_routed_failure_is_retried_per_policy(nodes) -> None:
    _engine, gpu = nodes
    gpu("gpu-a")
    h = client.start("celery-routed", {"key": "r2", "x": 3, "fail": 2}, workflow_id="routed-2")
    assert h.result(timeout=RUN_TIMEOUT_S)["attempt"] == 3
    assert [a for a, _ in _effects("gpu-start", "r2")] == [1, 2, 3]
    assert _rows(h.run_id) == [(1, "failed"), (2, "failed"), (3, "completed")]

    h = client.start("celery-routed", {"key": "r3", "x": 3, "fail": 9}, workflow_id="routed-3")
    assert h.result(timeout=RUN_TIMEOUT_S) == {"error": "ConnectionError", "attempts": 3}


@pytest.mark.django_db(transaction=True)
def test_a_result_after_the_run_was_cancelled_is_discarded(nodes) -> None:
    engine, gpu = nodes
    worker = gpu("gpu-a")
    h = client.start(
        "celery-routed", {"key": "r4", "x": 2, "sleep_first": 3}, workflow_id="routed-4"
    )
    wait_for("attempt 1 to start", lambda: _effects("gpu-start", "r4"), engine, worker)
    client.cancel("routed-4", "not needed")
    wait_for("the run to be cancelled", lambda: h.status() == "cancelled", engine, worker)
    wait_for("the attempt to return", lambda: _effects("gpu-done", "r4"), engine, worker)
    wait_for("its answer to be refused", lambda: "'discarded'" in worker.log(), worker)
    assert _rows(h.run_id) == [(1, "pending")], "the refused answer wrote nothing"
    assert _results(h.run_id) == 0


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_task_the_attempt_is_re_sent_and_the_run_completes_once(
    nodes,
) -> None:
    engine, gpu = nodes
    first = gpu("gpu-a")
    h = client.start(
        "celery-routed", {"key": "r5", "x": 5, "sleep_first": 60}, workflow_id="routed-5"
    )
    wait_for("attempt 1 to start", lambda: _effects("gpu-start", "r5"), engine, first)
    first.kill()
    second = gpu("gpu-b")
    result = h.result(timeout=RUN_TIMEOUT_S)
    assert result["square"] == 25 and result["attempt"] == 2
    assert [a for a, _ in _effects("gpu-start", "r5")] == [1, 2]
    assert _effects("gpu-done", "r5") == [(2, result["pid"])], "only the re-sent attempt returned"
    assert _rows(h.run_id) == [(1, "expired"), (2, "completed")]
    assert _results(h.run_id) == 1
    assert h.status() == "completed"
    assert second.alive()
