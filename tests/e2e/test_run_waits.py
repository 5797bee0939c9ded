"""``engine.run_waits``: what a run waits for, one test per kind (issue #19).

Real runs, parked by an engine on a fake clock; the waits are read without
the owner (rows plus a read-only replay), as the admin and the API read them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.helpers import latest
from weft_django import activity, client, workflow
from weft_django.engine.runs.waits import run_waits, waits_summary
from weft_django.models import UpdateRequest
from weft_django.testing import WorkflowTestEnvironment

TOKENS: list[str] = []
FAILS = {"left": 0}


@activity(name="rw.hand_out")
def rw_hand_out(token: str, key: str) -> None:
    TOKENS.append(token)


@activity(name="rw.flaky", retries=3, backoff=timedelta(minutes=5))
def rw_flaky(key: str) -> str:
    if FAILS["left"] > 0:
        FAILS["left"] -= 1
        raise RuntimeError(f"flaky {key}")
    return key


@workflow(name="rw-sleep")
def rw_sleep(ctx: Any, data: Any) -> Any:
    yield ctx.sleep(timedelta(hours=2))


@workflow(name="rw-signal")
def rw_signal(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("approve", timeout=timedelta(minutes=10)))


@workflow(name="rw-async")
def rw_async(ctx: Any, data: Any) -> Any:
    return (yield ctx.async_activity(rw_hand_out, "k"))


@workflow(name="rw-parent")
def rw_parent(ctx: Any, data: Any) -> Any:
    return (yield ctx.start_child("rw-signal", None, workflow_id="rw-child-1"))


@workflow(name="rw-retry")
def rw_retry(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(rw_flaky, "x"))


@workflow(name="rw-condition")
def rw_condition(ctx: Any, data: Any) -> Any:
    seen: list[Any] = []
    ctx.on_signal("item", seen.append)
    yield ctx.wait_until(lambda: len(seen) >= 2)
    return seen


@pytest.fixture
def env(transactional_db: None) -> Any:
    TOKENS.clear()
    FAILS["left"] = 0
    environment = WorkflowTestEnvironment()
    try:
        yield environment
    finally:
        environment.close()


def kinds(workflow_id: str) -> list[dict[str, Any]]:
    return [w.as_dict() for w in run_waits(latest(workflow_id))]


def test_a_sleep_waits_for_its_timer(env: WorkflowTestEnvironment) -> None:
    client.start("rw-sleep", None, workflow_id="rw-1")
    env.run_until_idle()
    due = int(env.clock()) + 2 * 3_600_000
    [wait] = kinds("rw-1")
    assert wait["kind"] == "timer" and wait["timer_kind"] == "sleep"
    assert wait["due_at_ms"] == due
    assert wait["due_at"].endswith("Z")
    # One sentence: relative, then the clock time in the project's zone (no epoch ms).
    assert wait["text"].startswith("the sleep to end in 2 h (")
    assert str(due) not in wait["text"]


def test_a_signal_wait_names_the_signal_and_its_timeout(env: WorkflowTestEnvironment) -> None:
    client.start("rw-signal", None, workflow_id="rw-2")
    env.run_until_idle()
    waits = kinds("rw-2")
    assert [w["kind"] for w in waits] == ["signal"]  # the timeout folded into its sentence
    assert waits[0]["timer_kind"] == "timeout"
    assert waits[0]["name"] == "approve" and waits[0]["timeout_ms"] == 600_000
    summary = waits_summary(run_waits(latest("rw-2")))
    assert summary is not None
    assert summary.startswith("signal 'approve', or the timeout in 10 min (")
    client.signal("rw-2", "approve", True)
    env.run_until_idle()
    assert kinds("rw-2") == []  # ended: waits for nothing


def test_an_async_activity_shows_its_name_and_token_hash_never_the_token(
    env: WorkflowTestEnvironment,
) -> None:
    client.start("rw-async", None, workflow_id="rw-3")
    env.run_until_idle()
    [token] = TOKENS
    [wait] = kinds("rw-3")
    assert wait["kind"] == "async_activity" and wait["name"] == "rw.hand_out"
    assert len(wait["token_hash_prefix"]) == 12
    assert token not in repr(wait)


def test_a_parent_waits_for_its_child(env: WorkflowTestEnvironment) -> None:
    client.start("rw-parent", None, workflow_id="rw-4")
    env.run_until_idle()
    child = latest("rw-child-1")
    [wait] = kinds("rw-4")
    assert wait == {
        "kind": "child",
        "text": "child workflow 'rw-child-1' (rw-signal, parked)",
        "workflow_id": "rw-child-1",
        "run_id": str(child.pk),
        "name": "rw-signal",
        "status": "parked",
    }


def test_an_activity_between_attempts_waits_for_its_retry(env: WorkflowTestEnvironment) -> None:
    FAILS["left"] = 1
    client.start("rw-retry", None, workflow_id="rw-5")
    env.run_until_idle()
    waits = kinds("rw-5")
    assert [w["kind"] for w in waits] == ["activity"], waits
    assert waits[0]["timer_kind"] == "retry"
    assert waits[0]["name"] == "rw.flaky"
    assert waits[0]["text"].startswith("activity 'rw.flaky', attempt 2 in ")


def test_a_wait_until_condition_is_an_event_wait(env: WorkflowTestEnvironment) -> None:
    client.start("rw-condition", None, workflow_id="rw-6")
    env.run_until_idle()
    client.signal("rw-6", "item", 1)
    env.run_until_idle()
    assert [w["kind"] for w in kinds("rw-6")] == ["event"]


def test_an_undelivered_update_is_shown(env: WorkflowTestEnvironment) -> None:
    client.start("rw-signal", None, workflow_id="rw-7")
    env.run_until_idle()
    # As ``client.update`` stores it before the owner delivers it.
    UpdateRequest.objects.create(run=latest("rw-7"), update_id="u-1", name="rename", args=[])
    waits = kinds("rw-7")
    assert {"kind": "update", "name": "rename", "update_id": "u-1"}.items() <= waits[0].items()


def test_an_unregistered_workflow_shows_its_rows_only(env: WorkflowTestEnvironment) -> None:
    client.start("rw-signal", None, workflow_id="rw-8")
    env.run_until_idle()
    run = latest("rw-8")
    run.name = "not-registered-here"  # as a web process without the code would see it
    assert [w.kind for w in run_waits(run)] == ["timer"]
