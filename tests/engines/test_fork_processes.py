"""Fork and reset under two real ``weft_worker`` engines, one SIGKILLed while
it drives the forked run: the other takes the fork over and completes it from
its copied journal (steps before the position never run again); a reset of a
parked run ends it ``terminated`` and the new run continues on the fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from project.demo.models import SideEffect
from tests.engines.fork_workflows import IMPORTS
from tests.engines.harness import HANG_TIMEOUT_S, Worker, kill_all, wait_for
from weft_django import client
from weft_django.models import ClaimEvent, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def _steps(workflow_id: str) -> list[int]:
    return [
        SideEffect.objects.filter(kind="pf-step", key=f"{workflow_id}:{step}").count()
        for step in range(4)
    ]


def _status(run_id: str) -> str:
    return WorkflowRun.objects.get(pk=run_id).status


def test_fork_survives_a_sigkilled_engine_and_reset_continues(tmp_path: Path) -> None:
    workers = [Worker(f"fork-{n}", tmp_path, imports=IMPORTS) for n in (1, 2)]
    try:
        for worker in workers:
            worker.wait_booted()
        source = client.start("pf-four", {"pause": 0}, workflow_id="pf-src")
        wait_for("the source", lambda: _status(source.run_id) == "completed", timeout=30)
        assert _steps("pf-src") == [1, 1, 1, 1]

        forked = client.fork(
            "pf-src", at_position=2, workflow_id_for_fork="pf-fork", input={"pause": 1.5}
        )
        # The engine that claims the fork runs step 2 (1.5 s): kill it mid-step.
        holder = wait_for(
            "the fork's step 2 to start",
            lambda: (
                SideEffect.objects.filter(kind="pf-step", key="pf-fork:2").exists()
                and ClaimEvent.objects.filter(workflow_id="pf-fork", kind="acquire").first()
            ),
            timeout=HANG_TIMEOUT_S,
        )
        victim = next(w for w in workers if w.engine_id == holder.engine_id)
        victim.kill()
        survivor = next(w for w in workers if w is not victim)

        wait_for(
            "the fork to complete on the survivor",
            lambda: _status(forked.run_id) == "completed",
            survivor,
            timeout=HANG_TIMEOUT_S * 3,
        )
        assert forked.result(timeout=1) == ["pf-src:0", "pf-src:1", "pf-fork:2", "pf-fork:3"]
        steps = _steps("pf-fork")
        assert steps[:2] == [0, 0]  # reused from the source's journal, never run again
        assert 1 <= steps[2] <= 2 and steps[3] == 1  # step 2 at most once more (the kill)
        assert _steps("pf-src") == [1, 1, 1, 1]  # the source is untouched
        assert _status(source.run_id) == "completed"
        kinds = list(
            ClaimEvent.objects.filter(workflow_id="pf-fork").values_list("kind", "engine_id")
        )
        assert ("takeover", survivor.engine_id) in kinds, kinds

        parked = client.start("pf-wait", {}, workflow_id="pf-reset")
        wait_for("the run to park", lambda: _status(parked.run_id) == "parked", timeout=30)
        new = client.reset("pf-reset", at_position=1, reason="redo step 1")
        assert _status(parked.run_id) == "terminated"
        wait_for("the new run to park", lambda: _status(new.run_id) == "parked", timeout=30)
        client.signal("pf-reset", "go", "again")
        wait_for("the new run to end", lambda: _status(new.run_id) == "completed", timeout=30)
        assert new.result(timeout=1) == ["pf-reset:0", "pf-reset:1", "again"]
        assert _steps("pf-reset")[:2] == [1, 2]
    finally:
        kill_all(workers)
