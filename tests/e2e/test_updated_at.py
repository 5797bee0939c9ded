"""``WorkflowRun.updated_at`` moves on every state change (issue #19).

Why a test per transition: every run write is an ``Update`` of a fenced
batch, and ``updated_at`` rides in that same statement
(``ownership.ops.stamped``); a transition written some other way would leave
the column behind, which is what this suite catches. Real runs, driven by an
engine on a fake clock (``WorkflowTestEnvironment``), on SQLite and
PostgreSQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine.activities.info import activity_info
from weft_django.models import WorkflowRun
from weft_django.testing import WorkflowTestEnvironment

SEEN_WHILE_RUNNING: list[tuple[str, datetime]] = []


@activity()
def ua_look(_: Any) -> str:
    """Records the run row as the activity sees it: running, mid-turn."""
    info = activity_info()
    run = WorkflowRun.objects.get(pk=info.run_id)
    SEEN_WHILE_RUNNING.append((run.status, run.updated_at))
    return "looked"


@activity()
def ua_boom(_: Any) -> None:
    raise ValueError("ua boom")


@workflow(name="ua-steps")
def ua_steps(ctx: Any, data: Any) -> Any:
    yield ctx.run(ua_look, data)
    yield ctx.sleep(timedelta(hours=1))
    got = yield ctx.wait_for_signal("go")
    return {"got": got}


@workflow(name="ua-waits")
def ua_waits(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("go"))


@workflow(name="ua-fails")
def ua_fails(ctx: Any, data: Any) -> Any:
    yield ctx.run(ua_boom, data)


@pytest.fixture
def env(transactional_db: None) -> Any:
    SEEN_WHILE_RUNNING.clear()
    environment = WorkflowTestEnvironment()
    try:
        yield environment
    finally:
        environment.close()


class Stamps:
    """The run's ``updated_at`` after each step; each must be newer than the last."""

    def __init__(self, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        self.last = latest(workflow_id).updated_at
        self.created = latest(workflow_id).created_at
        assert self.last >= self.created

    def moved(self, step: str, status: str) -> WorkflowRun:
        run = latest(self.workflow_id)
        assert run.status == status, f"after {step}: status {run.status}, expected {status}"
        assert run.updated_at > self.last, (
            f"after {step} ({status}): updated_at {run.updated_at} did not move past {self.last}"
        )
        self.last = run.updated_at
        return run


def test_updated_at_moves_through_a_whole_run(env: WorkflowTestEnvironment) -> None:
    client.start("ua-steps", {"n": 1}, workflow_id="ua-1")
    stamps = Stamps("ua-1")
    env.run_until_idle()
    # pending -> running: the activity read its own row mid-turn.
    assert len(SEEN_WHILE_RUNNING) == 1
    status, while_running = SEEN_WHILE_RUNNING[0]
    assert status == "running"
    assert while_running > stamps.last
    stamps.last = while_running
    stamps.moved("park on the sleep", "parked")
    env.advance(timedelta(hours=1, seconds=1))
    env.run_until_idle()
    stamps.moved("timer wake, park on the signal", "parked")
    client.signal("ua-1", "go", 7)
    stamps.moved("signal delivered (wake)", "parked")
    env.run_until_idle()
    run = stamps.moved("completion", "completed")
    assert run.updated_at >= run.finished_at


def test_updated_at_moves_on_suspend_resume_and_cancel(env: WorkflowTestEnvironment) -> None:
    client.start("ua-waits", None, workflow_id="ua-2")
    stamps = Stamps("ua-2")
    env.run_until_idle()
    stamps.moved("park", "parked")
    client.suspend("ua-2", "look at it")
    stamps.moved("suspend", "suspended")
    client.resume("ua-2")
    stamps.moved("resume", "pending")
    env.run_until_idle()
    stamps.moved("park again", "parked")
    client.cancel("ua-2", "no longer needed")
    stamps.moved("cancel", "cancelled")


def test_updated_at_moves_on_failure_and_retry(env: WorkflowTestEnvironment) -> None:
    client.start("ua-fails", None, workflow_id="ua-3")
    stamps = Stamps("ua-3")
    env.run_until_idle()
    stamps.moved("failure", "failed")
    client.retry("ua-3")
    stamps.moved("retry", "pending")
    env.run_until_idle()
    stamps.moved("failure again", "failed")


def test_updated_at_moves_on_execution_timeout(env: WorkflowTestEnvironment) -> None:
    client.start("ua-waits", None, workflow_id="ua-4", execution_timeout=timedelta(seconds=5))
    stamps = Stamps("ua-4")
    env.run_until_idle()
    stamps.moved("park", "parked")
    env.advance(timedelta(seconds=6))
    env.run_until_idle()
    stamps.moved("execution timeout", "timed_out")
