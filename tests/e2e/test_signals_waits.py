"""wait_for_signal (buffered signals, timeouts) and wait_until + on_signal + ctx.state."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.e2e.helpers import journal, latest
from weft_django import client, workflow
from weft_django.errors import WorkflowTimeoutError
from weft_django.models import SignalMessage, Timer

HANDLED: list[object] = []


@pytest.fixture(autouse=True)
def _reset():
    HANDLED.clear()


@workflow(name="sig-after-sleep")
def sig_after_sleep(ctx, data):
    yield ctx.sleep(timedelta(seconds=60))
    first = yield ctx.wait_for_signal("approve")
    second = yield ctx.wait_for_signal("approve")
    return [first, second]


@workflow(name="sig-timeout")
def sig_timeout(ctx, data):
    return (yield ctx.wait_for_signal("approve", timeout=timedelta(minutes=2)))


@workflow(name="sig-timeout-caught")
def sig_timeout_caught(ctx, data):
    try:
        yield ctx.wait_for_signal("approve", timeout=timedelta(seconds=30))
    except WorkflowTimeoutError as exc:
        return {"timed_out": exc.what}
    return "signalled"


@workflow(name="sig-condition")
def sig_condition(ctx, data):
    ctx.state["total"] = 0
    ctx.state["items"] = []

    def on_add(payload):
        HANDLED.append(payload)
        ctx.state["total"] += payload["n"]
        ctx.state["items"].append(payload["n"])

    ctx.on_signal("add", on_add)
    ctx.on_query("total", lambda: ctx.state["total"])
    try:
        yield ctx.wait_until(
            lambda: ctx.state["total"] >= data["target"], timeout=data.get("timeout")
        )
    except WorkflowTimeoutError:
        return {"timed_out": True, "total": ctx.state["total"]}
    return {"total": ctx.state["total"], "items": ctx.state["items"]}


@pytest.mark.django_db(transaction=True)
def test_a_signal_sent_before_the_wait_is_kept(weft_env):
    h = client.start("sig-after-sleep", None, workflow_id="sig-early")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    # Both signals arrive while the workflow is still sleeping.
    client.signal("sig-early", "approve", {"n": 1})
    client.signal("sig-early", "approve", {"n": 2})
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert SignalMessage.objects.filter(consumed_at_position__isnull=True).count() == 2
    weft_env.advance(timedelta(seconds=60))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == [{"n": 1}, {"n": 2}]  # in the order sent
    assert not SignalMessage.objects.filter(consumed_at_position__isnull=True).exists()
    assert [k for k, _ in journal(h.run_id)] == ["sleep", "signal", "signal"]


@pytest.mark.django_db(transaction=True)
def test_wait_for_signal_delivers_the_payload(weft_env):
    h = client.start("sig-timeout", None, workflow_id="sig-plain")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal("sig-plain", "other", 1)  # a different name does not satisfy it
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal("sig-plain", "approve", {"ok": True, "by": "ana"})
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"ok": True, "by": "ana"}
    assert not Timer.objects.filter(run_id=h.run_id).exists()


@pytest.mark.django_db(transaction=True)
def test_wait_for_signal_timeout_uncaught_fails_the_run(weft_env):
    h = client.start("sig-timeout", None, workflow_id="sig-to")
    weft_env.run_until_idle()
    timer = Timer.objects.get(run_id=h.run_id, kind="timeout")
    assert timer.fire_at == weft_env.clock.now + 120_000
    weft_env.advance(timedelta(seconds=119))
    weft_env.run_until_idle()
    assert h.status() == "parked"
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert h.status() == "failed"
    error = h.error()
    assert error["type"] == "WorkflowTimeoutError"
    assert error["code"] == WorkflowTimeoutError.code
    assert "approve" in error["message"]
    assert not Timer.objects.filter(run_id=h.run_id).exists()
    # A signal that comes too late is refused: the run is terminal.
    from weft_django.errors import InvalidTransitionError

    with pytest.raises(InvalidTransitionError):
        client.signal("sig-to", "approve", True)


@pytest.mark.django_db(transaction=True)
def test_wait_for_signal_timeout_can_be_caught(weft_env):
    h = client.start("sig-timeout-caught", None, workflow_id="sig-to-caught")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=31))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"timed_out": "signal 'approve'"}


@pytest.mark.django_db(transaction=True)
def test_wait_until_is_re_evaluated_after_each_signal_handler(weft_env):
    h = client.start("sig-condition", {"target": 5}, workflow_id="sig-cond")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal("sig-cond", "add", {"n": 2})
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert client.query("sig-cond", "total") == 2
    client.signal("sig-cond", "ignored", {"n": 100})  # no handler: no effect
    client.signal("sig-cond", "add", {"n": 1})
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert client.query("sig-cond", "total") == 3
    client.signal("sig-cond", "add", {"n": 4})
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {"total": 7, "items": [2, 1, 4]}
    kinds = [k for k, _ in journal(h.run_id)]
    assert kinds == ["signal-handler", "signal-handler", "signal-handler", "wait-condition"]
    # Handlers re-ran on each replay, but only with the recorded deliveries.
    assert all(p in ({"n": 2}, {"n": 1}, {"n": 4}) for p in HANDLED)


@pytest.mark.django_db(transaction=True)
def test_wait_until_times_out(weft_env):
    h = client.start("sig-condition", {"target": 10, "timeout": 60}, workflow_id="sig-cond-to")
    weft_env.run_until_idle()
    client.signal("sig-cond-to", "add", {"n": 3})
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=59))
    weft_env.run_until_idle()
    assert h.status() == "parked"
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"timed_out": True, "total": 3}
    assert latest("sig-cond-to").status == "completed"
