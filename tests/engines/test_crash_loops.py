"""Crash-loop containment with real engine processes that die (``os._exit``).

Three ``weft_worker`` children; whenever one dies the test starts a
replacement under a new engine id (a fleet that restarts its dead). Then:

- an activity that exits its process, with ``retries=2``: each death is a
  failed attempt ("the engine running it stopped"); after 3 deaths the
  workflow gets ``ActivityError`` and completes its ``except`` branch;
- a workflow body that exits its process: after ``MAX_RECOVERY_ATTEMPTS``
  (3 here) deaths the run is ``suspended`` with ``CrashLoopError``;
- the same for a body that exits its process as soon as a wake resumes it
  (after a ``ctx.sleep``, after a signal), before the wake's turn committed
  anything: the turn's started mark made the run ``running`` first;
- the fleet is still up afterwards (a fresh workflow completes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from project.demo.models import SideEffect
from tests.engines.harness import HANG_TIMEOUT_S, Worker, kill_all, wait_for
from tests.engines.poison_workflows import IMPORTS
from weft_django import client
from weft_django.models import ActivityAttempt, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

ENV = {"WEFT_MAX_RECOVERY_ATTEMPTS": "3"}


class Fleet:
    """Three engines; a dead one is replaced by a new engine id."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.generation = 0
        self.workers: list[Worker] = []
        self.spawned: list[Worker] = []
        self.deaths = 0
        for _ in range(3):
            self.workers.append(self._spawn())

    def _spawn(self) -> Worker:
        self.generation += 1
        worker = Worker(f"poison-{self.generation}", self.logs, env=ENV, imports=IMPORTS)
        self.spawned.append(worker)
        return worker

    def keep_up(self) -> None:
        for i, worker in enumerate(self.workers):
            if worker.proc.poll() is not None:
                self.deaths += 1
                self.workers[i] = self._spawn()

    def stop(self) -> None:
        kill_all(self.workers)


def _status(workflow_id: str) -> str | None:
    run = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-created_at").first()
    return run.status if run else None


def test_poison_runs_are_contained_and_the_fleet_stays_up(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    try:
        for w in fleet.workers:
            w.wait_booted()
        act = client.start("poison-activity", {"id": "pa"}, workflow_id="poison-act")

        def done() -> bool:
            fleet.keep_up()
            return _status("poison-act") in ("completed", "failed", "suspended")

        wait_for("the poison activity to be contained", done, timeout=HANG_TIMEOUT_S * 6)
        result = act.result(timeout=5)
        assert result["attempts"] == 3, result
        assert "the engine running it stopped" in result["caught"], result
        assert SideEffect.objects.filter(kind="poison-attempt", key="pa").count() == 3
        # Each death is in the run's attempt history, named by the engine that died.
        tried = list(ActivityAttempt.objects.filter(run__workflow_id="poison-act"))
        assert [(a.attempt, a.outcome) for a in tried] == [(n, "interrupted") for n in (1, 2, 3)]
        assert all(a.error.startswith("AttemptInterrupted: the engine running it") for a in tried)
        assert len({a.engine_id for a in tried}) == 3, [a.engine_id for a in tried]
        assert all(a.engine_id.startswith("poison-") for a in tried)
        assert all(a.started_at <= a.ended_at and a.epoch >= 1 for a in tried)

        deaths_before = fleet.deaths
        client.start("poison-body", {}, workflow_id="poison-body")

        def parked() -> bool:
            fleet.keep_up()
            return _status("poison-body") == "suspended"

        wait_for("the poison body to be suspended", parked, timeout=HANG_TIMEOUT_S * 6)
        run = WorkflowRun.objects.filter(workflow_id="poison-body").get()
        assert run.error["type"] == "CrashLoopError", run.error
        assert "journal position 0" in run.error["message"]
        assert run.recoveries["count"] == 3
        # 1 death on the first pickup, then one per recovery before the bound.
        fleet.keep_up()
        assert fleet.deaths - deaths_before >= 3

        # The fleet is still up: every worker alive and booted, none dying any more.
        for w in fleet.workers:
            w.wait_booted()
        deaths_after = fleet.deaths
        fleet.keep_up()
        assert fleet.deaths == deaths_after
        assert all(w.proc.poll() is None for w in fleet.workers)
    finally:
        fleet.stop()


def _contain(fleet: Fleet, workflow_id: str) -> WorkflowRun:
    def contained() -> bool:
        fleet.keep_up()
        return _status(workflow_id) == "suspended"

    wait_for(f"the wake of {workflow_id} to be contained", contained, timeout=HANG_TIMEOUT_S * 6)
    run = WorkflowRun.objects.get(workflow_id=workflow_id)
    assert run.error["type"] == "CrashLoopError", (workflow_id, run.error)
    assert run.recoveries["count"] == 3, (workflow_id, run.recoveries)
    # The wake's event never committed: the journal is as the run parked it.
    assert "journal position 0" in run.error["message"], run.error
    assert run.recoveries["position"] == 0
    assert len(run.recoveries["engines"]) == 3
    # Logged right after the suspending commit (one poison run at a time: no
    # other wake kills the suspending engine before its WARNING is written).
    wait_for(
        f"the crash-loop WARNING about {workflow_id}",
        lambda: any(
            " WARNING " in line and "event=crash_loop" in line
            for w in fleet.spawned
            for line in w.lines_about(workflow_id)
        ),
        timeout=HANG_TIMEOUT_S,
    )
    return run


def test_a_wake_that_kills_its_engine_is_contained(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    try:
        for w in fleet.workers:
            w.wait_booted()
        client.start("poison-wake", {"sleep": 0.5}, workflow_id="poison-sleep")
        _contain(fleet, "poison-sleep")
        deaths = fleet.deaths
        assert deaths >= 3  # the first wake's, then one per counted recovery before the bound

        signalled = client.start("poison-wake", {"signal": True}, workflow_id="poison-signal")

        def parked() -> bool:
            fleet.keep_up()
            return _status("poison-signal") == "parked"

        wait_for("the signal run to park", parked, timeout=HANG_TIMEOUT_S)
        client.signal("poison-signal", "go", 1)
        run = _contain(fleet, "poison-signal")
        assert str(run.pk) == signalled.run_id
        fleet.keep_up()
        assert fleet.deaths - deaths >= 3

        # The fleet is still up: every worker alive, none dying, a fresh run completes.
        for w in fleet.workers:
            w.wait_booted()
        deaths_after = fleet.deaths
        fresh = client.start("signal-wait", {}, workflow_id="after-poison")
        wait_for("the fresh run to park", lambda: _status("after-poison") == "parked")
        client.signal("after-poison", "go", "ok")
        assert fresh.result(timeout=HANG_TIMEOUT_S) == "ok"
        fleet.keep_up()
        assert fleet.deaths == deaths_after
        assert all(w.proc.poll() is None for w in fleet.workers)
    finally:
        fleet.stop()
