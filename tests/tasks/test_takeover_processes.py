"""Django tasks on two real ``weft_worker`` processes (PostgreSQL, SPEC §8).

A task whose worker is SIGKILLed while the function runs is taken over by
the other worker and completes there: its ``TaskResult``, read in this (a
third) process, says SUCCESSFUL with ``attempts == 2`` -- one engine id per
attempt, the dead one first -- and the claim history shows the takeover.
Safety is read from durable records; no duration is asserted.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.engines.harness import HANG_TIMEOUT_S, Worker, events_of, wait_for
from tests.tasks import tasks
from weft_django.tasks import WorkerLost, compat

pytestmark = [pytest.mark.processes]

API = compat.default_api()
RESULT_TIMEOUT_S = 60.0


def wait_result(result, status, timeout=RESULT_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result.refresh()
        if result.status == status:
            return result
        time.sleep(0.1)
    raise AssertionError(f"task {result.id} is {result.status}, not {status}")


@pytest.mark.django_db(transaction=True)
def test_sigkilled_worker_s_task_completes_on_the_other_with_two_attempts(tmp_path):
    assert connection.vendor == "postgresql"
    markers = tmp_path / "markers"
    markers.mkdir()
    workers = [Worker("tasks-w1", tmp_path), Worker("tasks-w2", tmp_path)]
    try:
        for worker in workers:
            worker.wait_booted()
        result = tasks.slow_marked.enqueue(str(markers), 2.0)

        def first_marker() -> Path | None:
            found = sorted(markers.iterdir())
            return found[0] if found else None

        marker = wait_for(
            "the first attempt to start", first_marker, *workers, timeout=HANG_TIMEOUT_S
        )
        pid = int(marker.name.rsplit("-", 1)[1])
        (victim,) = [w for w in workers if w.proc.pid == pid]
        (survivor,) = [w for w in workers if w is not victim]
        assert result.status == API.TaskResultStatus.READY  # the object as enqueued
        result.refresh()
        assert result.status == API.TaskResultStatus.RUNNING
        assert result.worker_ids == [victim.engine_id]
        victim.kill()
        assert victim.proc.returncode == -signal.SIGKILL

        wait_result(result, API.TaskResultStatus.SUCCESSFUL)
        assert result.attempts == 2
        assert result.worker_ids == [victim.engine_id, survivor.engine_id]
        assert result.return_value["attempt"] == 2
        assert result.return_value["pid"] == survivor.proc.pid
        assert [e.exception_class for e in result.errors] == [WorkerLost]
        assert result.started_at < result.last_attempted_at <= result.finished_at
        assert sorted(m.name.split("-")[1] for m in markers.iterdir()) == ["1", "2"]

        events = events_of(result.id)
        assert [(e.kind, e.engine_id) for e in events] == [
            ("acquire", victim.engine_id),
            ("takeover", survivor.engine_id),
            ("release", survivor.engine_id),
        ]
        # The claim was taken from the dead worker (how soon -- its session seen
        # gone, or its TTL expired -- is the engine's own tests' subject).
        assert events[1].previous_engine_id == victim.engine_id
    finally:
        for worker in workers:
            worker.kill()


@pytest.mark.django_db(transaction=True)
def test_tasks_run_on_a_worker_and_results_read_here(tmp_path):
    worker = Worker("tasks-w3", tmp_path)
    try:
        worker.wait_booted()
        results = [tasks.add.enqueue(i, i) for i in range(5)]
        flaky = tasks.flaky.enqueue(1)
        for i, result in enumerate(results):
            assert wait_result(result, API.TaskResultStatus.SUCCESSFUL).return_value == 2 * i
            assert result.worker_ids == ["tasks-w3"]
        wait_result(flaky, API.TaskResultStatus.SUCCESSFUL)
        assert flaky.attempts == 2 and flaky.return_value == 2
    finally:
        worker.kill()
