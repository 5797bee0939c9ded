"""``ctx.signal_workflow`` and detached children (issue #18 part 5), SQLite and PostgreSQL.

What could fail: a signal sent twice (a replay from the journal, a second
engine), a signal lost or not waking its target, a detached child cancelled
with its parent (with or without a grace) or awaited by it, a detached
child started twice on replay.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.helpers import journal, latest
from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.models import SignalMessage, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="bw-receiver")
def bw_receiver(ctx: Any, data: Any) -> Any:
    got = yield ctx.wait_for_signal("ping")
    return got


@workflow(name="bw-sender")
def bw_sender(ctx: Any, target: str) -> Any:
    yield ctx.signal_workflow(target, "ping", {"from": ctx.workflow_id})
    yield ctx.wait_for_signal("go")
    return "sent"


@workflow(name="bw-sender-missing")
def bw_sender_missing(ctx: Any, target: str) -> Any:
    try:
        yield ctx.signal_workflow(target, "ping", 1)
    except Exception as exc:
        return type(exc).__name__
    return "sent"


@workflow(name="bw-child")
def bw_child(ctx: Any, data: Any) -> Any:
    value = yield ctx.wait_for_signal("finish")
    return {"child": value}


@workflow(name="bw-parent")
def bw_parent(ctx: Any, data: Any) -> Any:
    child_id = yield ctx.start_child("bw-child", None, detached=True)
    attached = ctx.start_child("bw-child", None, workflow_id=f"{ctx.workflow_id}-attached")
    if data == "end":
        return child_id
    if data == "attached":
        yield attached
    yield ctx.wait_for_signal("never")
    return child_id


def _signals_to(workflow_id: str) -> list[Any]:
    return list(
        SignalMessage.objects.filter(run__workflow_id=workflow_id).values_list("payload", flat=True)
    )


def test_a_workflow_signals_another_once_and_wakes_it(weft_env: Any) -> None:
    receiver = client.start("bw-receiver", None, workflow_id="bw-r1")
    weft_env.run_until_idle()
    sender = client.start("bw-sender", "bw-r1", workflow_id="bw-s1")
    weft_env.run_until_idle()
    assert receiver.result(timeout=5) == {"from": "bw-s1"}
    assert latest("bw-s1").status == "parked"
    assert ("signal-workflow", "ping") in journal(latest("bw-s1"))
    client.signal("bw-s1", "go", None)
    weft_env.run_until_idle()
    assert sender.result(timeout=5) == "sent"
    assert _signals_to("bw-r1") == [{"from": "bw-s1"}]


def test_a_replay_from_the_journal_does_not_send_again(clock: Any) -> None:
    """The sender parks after signalling; a fresh engine (no cached replay)
    replays it from the journal and finishes it: still one signal."""
    first = Engine(clock=clock, background_tasks="manual", workflow_cache_size=0).boot()
    try:
        client.start("bw-receiver", None, workflow_id="bw-r2")
        client.start("bw-sender", "bw-r2", workflow_id="bw-s2")
        first.run_until_idle()
    finally:
        first.dispose(grace=0)
    assert latest("bw-s2").status == "parked"
    second = Engine(clock=clock, background_tasks="manual", workflow_cache_size=0).boot()
    try:
        client.signal("bw-s2", "go", None)
        second.run_until_idle()
    finally:
        second.dispose(grace=0)
    assert latest("bw-s2").status == "completed", latest("bw-s2").error
    assert _signals_to("bw-r2") == [{"from": "bw-s2"}]
    assert latest("bw-r2").result == {"from": "bw-s2"}


def test_signalling_a_missing_or_finished_workflow_raises_in_the_body(weft_env: Any) -> None:
    missing = client.start("bw-sender-missing", "bw-nobody", workflow_id="bw-s3")
    weft_env.run_until_idle()
    assert missing.result(timeout=5) == "WorkflowNotFound"
    done = client.start("bw-receiver", None, workflow_id="bw-r4")
    weft_env.run_until_idle()
    client.signal("bw-r4", "ping", 0)
    weft_env.run_until_idle()
    assert done.result(timeout=5) == 0
    late = client.start("bw-sender-missing", "bw-r4", workflow_id="bw-s4")
    weft_env.run_until_idle()
    assert late.result(timeout=5) == "InvalidTransitionError"


def test_start_child_detached_returns_its_id_and_is_not_awaited(weft_env: Any) -> None:
    parent = client.start("bw-parent", "end", workflow_id="bw-p1")
    weft_env.run_until_idle()
    child_id = parent.result(timeout=5)
    assert child_id == "bw-p1:0"
    child = latest(child_id)
    assert child.status == "parked" and child.parent_id is None
    client.signal(child_id, "finish", 7)
    weft_env.run_until_idle()
    assert latest(child_id).result == {"child": 7}
    assert WorkflowRun.objects.filter(workflow_id=child_id).count() == 1


@pytest.mark.parametrize("grace", [None, 30.0])
def test_a_detached_child_survives_the_parents_cancel(weft_env: Any, grace: Any) -> None:
    parent = client.start("bw-parent", "attached", workflow_id="bw-p2")
    weft_env.run_until_idle()
    assert latest("bw-p2-attached").status == "parked"
    client.cancel("bw-p2", "stop", grace=grace)
    weft_env.run_until_idle()
    # A cancel request rotated the claims: this engine takes them back after
    # one renew interval (``test_cancel_cleanup.settle``).
    weft_env.advance(weft_env.engine.settings.claim_renew_interval_ms / 1000)
    weft_env.run_until_idle()
    assert parent.status() == "cancelled"
    assert latest("bw-p2-attached").status == "cancelled"  # the attached one goes with it
    detached = latest("bw-p2:0")
    assert detached.status == "parked"  # the detached one does not
    client.signal("bw-p2:0", "finish", "alive")
    weft_env.run_until_idle()
    assert latest("bw-p2:0").result == {"child": "alive"}
