"""Bad input: each call fails with its error naming the values, and NOTHING is written."""

from __future__ import annotations

import contextlib

import pytest
from django.test import override_settings

from tests.e2e.helpers import latest, row_counts, run_state
from weft_django import activity, client, workflow
from weft_django.errors import (
    InvalidTransitionError,
    PayloadError,
    UnknownWorkflowType,
    WorkflowAlreadyRunning,
)

CAUGHT: list[BaseException] = []


@pytest.fixture(autouse=True)
def _reset():
    CAUGHT.clear()


@activity()
def resume_myself(workflow_id: str) -> str:
    # While this activity runs, the run is "running".
    try:
        client.resume(workflow_id)
    except InvalidTransitionError as exc:
        CAUGHT.append(exc)
    return latest(workflow_id).status


@workflow(name="bad-echo")
def bad_echo(ctx, data):
    return data


@workflow(name="bad-wait")
def bad_wait(ctx, data):
    return (yield ctx.wait_for_signal("go"))


@workflow(name="bad-self-resume")
def bad_self_resume(ctx, data):
    return (yield ctx.run(resume_myself, ctx.workflow_id))


def _deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


BAD_PAYLOADS = [
    pytest.param(object(), "not JSON-serialisable", id="object"),
    pytest.param({"x": float("nan")}, "nan", id="nan"),
    pytest.param([float("inf")], "inf", id="infinity"),
    pytest.param("a\u0000b", "\\u0000", id="nul"),
    pytest.param({"k\u0000": 1}, "\\u0000", id="nul-key"),
    pytest.param("\ud800", "surrogate", id="lone-surrogate"),
    pytest.param(_deep(200), "deeper than 100", id="nested-200"),
]


@contextlib.contextmanager
def nothing_written(env=None):
    before = row_counts()
    yield
    assert row_counts() == before, "a refused call wrote something"
    if env is not None:  # and an engine finds nothing to do afterwards
        env.run_until_idle()
        assert row_counts() == before, "a refused call left work behind"


@pytest.mark.django_db(transaction=True)
def test_unknown_workflow_name(weft_env):
    with nothing_written(weft_env), pytest.raises(UnknownWorkflowType) as info:
        client.start("bad-no-such-workflow", {"a": 1}, workflow_id="bad-1")
    assert info.value.name == "bad-no-such-workflow"
    assert "bad-no-such-workflow" in str(info.value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("payload", "reason"), BAD_PAYLOADS)
def test_bad_start_input(weft_env, payload, reason):
    with nothing_written(weft_env), pytest.raises((TypeError, ValueError)) as info:
        client.start("bad-echo", payload, workflow_id="bad-2")
    assert isinstance(info.value, PayloadError)
    assert info.value.what == "workflow input"
    assert reason.lower() in str(info.value).lower()


@pytest.mark.django_db(transaction=True)
def test_nesting_at_the_limit_is_accepted(weft_env):
    h = client.start("bad-echo", _deep(99), workflow_id="bad-deep-ok")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == _deep(99)


@pytest.mark.django_db(transaction=True)
def test_oversized_input(weft_env):
    with override_settings(WEFT={"MAX_PAYLOAD_BYTES": 1000}):
        with nothing_written(weft_env), pytest.raises(PayloadError) as info:
            client.start("bad-echo", {"blob": "x" * 1000}, workflow_id="bad-3")
        assert "MAX_PAYLOAD_BYTES (1000)" in str(info.value)
        # Just under the limit is fine.
        client.start("bad-echo", {"blob": "x" * 900}, workflow_id="bad-3")
    assert latest("bad-3").status == "pending"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("payload", "reason"), BAD_PAYLOADS)
def test_bad_signal_payload(weft_env, payload, reason):
    client.start("bad-wait", None, workflow_id="bad-sig")
    weft_env.run_until_idle()
    state = run_state("bad-sig")
    with nothing_written(weft_env), pytest.raises((TypeError, ValueError)) as info:
        client.signal("bad-sig", "go", payload)
    assert isinstance(info.value, PayloadError)
    assert reason.lower() in str(info.value).lower()
    assert run_state("bad-sig") == state


@pytest.mark.django_db(transaction=True)
def test_oversized_signal_payload(weft_env):
    client.start("bad-wait", None, workflow_id="bad-sig-big")
    weft_env.run_until_idle()
    with (
        override_settings(WEFT={"MAX_PAYLOAD_BYTES": 1000}),
        nothing_written(weft_env),
        pytest.raises(PayloadError, match="MAX_PAYLOAD_BYTES"),
    ):
        client.signal("bad-sig-big", "go", "y" * 2000)


@pytest.mark.django_db(transaction=True)
def test_bad_async_completion_payload(weft_env):
    with nothing_written(weft_env), pytest.raises(PayloadError):
        client.complete_async_activity("whatever", float("nan"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["", "x" * 201, None])
def test_bad_signal_name(weft_env, name):
    client.start("bad-wait", None, workflow_id="bad-sig-name")
    weft_env.run_until_idle()
    with nothing_written(weft_env), pytest.raises(ValueError, match="signal name"):
        client.signal("bad-sig-name", name, 1)


@pytest.mark.django_db(transaction=True)
def test_signal_to_a_terminal_run(weft_env):
    h = client.start("bad-echo", 1, workflow_id="bad-done")
    weft_env.run_until_idle()
    assert h.status() == "completed"
    state = run_state("bad-done")
    with nothing_written(weft_env), pytest.raises(InvalidTransitionError) as info:
        client.signal("bad-done", "go", {"late": True})
    assert (info.value.workflow_id, info.value.status, info.value.action) == (
        "bad-done",
        "completed",
        "signal",
    )
    assert run_state("bad-done") == state


@pytest.mark.django_db(transaction=True)
def test_resume_of_a_running_run(weft_env):
    h = client.start("bad-self-resume", None, workflow_id="bad-running")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == "running"
    assert len(CAUGHT) == 1
    exc = CAUGHT[0]
    assert (exc.workflow_id, exc.status, exc.action) == ("bad-running", "running", "resume")


@pytest.mark.django_db(transaction=True)
def test_resume_of_a_parked_run(weft_env):
    client.start("bad-wait", None, workflow_id="bad-parked")
    weft_env.run_until_idle()
    state = run_state("bad-parked")
    with nothing_written(weft_env), pytest.raises(InvalidTransitionError) as info:
        client.resume("bad-parked")
    assert (info.value.workflow_id, info.value.status, info.value.action) == (
        "bad-parked",
        "parked",
        "resume",
    )
    assert run_state("bad-parked") == state


@pytest.mark.django_db(transaction=True)
def test_retry_of_a_completed_run(weft_env):
    client.start("bad-echo", 1, workflow_id="bad-retry")
    weft_env.run_until_idle()
    state = run_state("bad-retry")
    with nothing_written(weft_env), pytest.raises(InvalidTransitionError) as info:
        client.retry("bad-retry")
    assert (info.value.workflow_id, info.value.status, info.value.action) == (
        "bad-retry",
        "completed",
        "retry",
    )
    assert run_state("bad-retry") == state


@pytest.mark.django_db(transaction=True)
def test_suspend_and_cancel_of_terminal_runs(weft_env):
    client.start("bad-echo", 1, workflow_id="bad-term")
    weft_env.run_until_idle()
    for action in (client.suspend, client.cancel):
        with nothing_written(weft_env), pytest.raises(InvalidTransitionError) as info:
            action("bad-term")
        assert info.value.status == "completed"


@pytest.mark.django_db(transaction=True)
def test_second_live_start_of_the_same_id(weft_env):
    h = client.start("bad-wait", None, workflow_id="bad-twice")
    with nothing_written(), pytest.raises(WorkflowAlreadyRunning) as info:
        client.start("bad-wait", None, workflow_id="bad-twice")
    assert info.value.workflow_id == "bad-twice"
    weft_env.run_until_idle()
    with nothing_written(weft_env), pytest.raises(WorkflowAlreadyRunning) as info:
        client.start("bad-echo", 2, workflow_id="bad-twice")
    assert info.value.run_id == h.run_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "workflow_id",
    ["has space", "slash/es", "", "x" * 201, "émoji", "new\nline", "semi;colon", 42],
)
def test_invalid_workflow_id(weft_env, workflow_id):
    with nothing_written(weft_env), pytest.raises(ValueError) as info:
        client.start("bad-echo", 1, workflow_id=workflow_id)
    assert repr(workflow_id) in str(info.value)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "kwargs",
    [
        {"start_after": -1},
        {"start_after": True},
        {"start_after": float("inf")},
        {"execution_timeout": "10"},
        {"start_after": 1, "start_at": None, "on_conflict": "replace"},
        {"idempotency_key": ""},
    ],
)
def test_bad_start_options(weft_env, kwargs):
    with nothing_written(weft_env), pytest.raises((TypeError, ValueError)):
        client.start("bad-echo", 1, workflow_id="bad-opts", **kwargs)
