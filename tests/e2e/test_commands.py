"""ctx.run (retries, durable backoff, non-retryable, timeout), ctx.sleep, recorded
values (now / uuid4 / random), queries and the replay-silent logger."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import timedelta

import pytest

from tests.e2e.helpers import journal, latest
from weft_django import activity, client, workflow
from weft_django.errors import ActivityError
from weft_django.models import JournalEntry, Timer

CALLS: Counter[str] = Counter()
FAIL_TIMES: dict[str, int] = {}
SEEN: list[dict[str, object]] = []
RELEASE = threading.Event()


class Declined(Exception):
    pass


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    FAIL_TIMES.clear()
    SEEN.clear()
    RELEASE.clear()
    yield
    RELEASE.set()  # let abandoned (timed-out) activity threads finish


@activity(retries=3, backoff=timedelta(seconds=10))
def flaky(key: str) -> str:
    CALLS[key] += 1
    if CALLS[key] <= FAIL_TIMES.get(key, 0):
        raise RuntimeError(f"boom {CALLS[key]}")
    return f"ok:{key}:{CALLS[key]}"


@activity(retries=5, non_retryable=(Declined,))
def declines(key: str) -> None:
    CALLS[key] += 1
    raise Declined("card declined")


@activity(retries=1, backoff=timedelta(seconds=1), timeout=timedelta(seconds=0.2))
def hangs(key: str) -> str:
    CALLS[key] += 1
    RELEASE.wait(5)
    return "too late"


@activity()
def count(key: str) -> int:
    CALLS[key] += 1
    return CALLS[key]


@workflow(name="cmd-flaky")
def cmd_flaky(ctx, data):
    try:
        value = yield ctx.run(flaky, data["key"])
    except ActivityError as exc:
        return {"error": exc.kind, "attempts": exc.attempts, "message": exc.message}
    return {"value": value}


@workflow(name="cmd-flaky-uncaught")
def cmd_flaky_uncaught(ctx, data):
    return (yield ctx.run(flaky, data["key"]))


@workflow(name="cmd-declines")
def cmd_declines(ctx, data):
    try:
        yield ctx.run(declines, data["key"])
    except ActivityError as exc:
        return {"error": exc.kind, "attempts": exc.attempts, "type": exc.error_type}
    return "unreachable"


@workflow(name="cmd-hangs")
def cmd_hangs(ctx, data):
    try:
        yield ctx.run(hangs, data["key"])
    except ActivityError as exc:
        return {"error": exc.kind, "attempts": exc.attempts}
    return "unreachable"


@workflow(name="cmd-sleep")
def cmd_sleep(ctx, data):
    yield ctx.sleep(timedelta(minutes=10))
    return (yield ctx.run(count, data["key"]))


@workflow(name="cmd-recorded")
def cmd_recorded(ctx, data):
    values = {"now": ctx.now().isoformat(), "uuid": str(ctx.uuid4()), "random": ctx.random()}
    SEEN.append(dict(values))
    yield ctx.sleep(timedelta(seconds=30))
    later = ctx.now().isoformat()
    return {**values, "later": later}


@workflow(name="cmd-query")
def cmd_query(ctx, data):
    ctx.state["steps"] = []
    ctx.on_query("progress", lambda: {"steps": list(ctx.state["steps"])})
    ctx.on_query("echo", lambda a, b: [a, b])
    for _ in range(2):
        ctx.state["steps"].append((yield ctx.run(count, data["key"])))
    yield ctx.wait_for_signal("finish")
    return ctx.state["steps"]


@workflow(name="cmd-logger")
def cmd_logger(ctx, data):
    ctx.logger.info("first step of %s", data["key"])
    yield ctx.sleep(timedelta(seconds=5))
    ctx.logger.info("second step")
    yield ctx.sleep(timedelta(seconds=5))
    ctx.logger.info("done")
    return "ok"


# -- ctx.run ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_run_retries_on_durable_timers_with_exponential_backoff(weft_env):
    FAIL_TIMES["r1"] = 2
    h = client.start("cmd-flaky", {"key": "r1"}, workflow_id="cmd-retry-1")
    t0 = weft_env.clock.now
    weft_env.run_until_idle()
    assert CALLS["r1"] == 1
    assert h.status() == "parked"
    timer = Timer.objects.get(run_id=h.run_id, kind="retry")
    assert timer.payload["attempt"] == 2
    assert "boom 1" in timer.payload["error"]
    assert timer.fire_at == t0 + 10_000  # backoff base

    weft_env.advance(timedelta(seconds=9.999))
    weft_env.run_until_idle()
    assert CALLS["r1"] == 1, "a retry ran before its backoff elapsed"

    weft_env.advance(timedelta(milliseconds=1))
    weft_env.run_until_idle()
    assert CALLS["r1"] == 2
    timer = Timer.objects.get(run_id=h.run_id, kind="retry")
    assert timer.payload["attempt"] == 3
    assert timer.fire_at == weft_env.clock.now + 20_000  # base × 2

    weft_env.advance(timedelta(seconds=19))
    weft_env.run_until_idle()
    assert CALLS["r1"] == 2
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert CALLS["r1"] == 3
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == {"value": "ok:r1:3"}
    assert not Timer.objects.filter(run_id=h.run_id).exists()
    # Only the final outcome is journaled: one activity entry.
    assert [k for k, _ in journal(h.run_id)] == ["activity"]


@pytest.mark.django_db(transaction=True)
def test_run_exhausts_retries_and_the_workflow_catches_activity_error(weft_env):
    FAIL_TIMES["r2"] = 99
    h = client.start("cmd-flaky", {"key": "r2"}, workflow_id="cmd-retry-2")
    weft_env.run_until_idle()
    for _ in range(3):
        weft_env.advance(timedelta(minutes=5))
        weft_env.run_until_idle()
    assert CALLS["r2"] == 4  # retries=3 → 4 attempts
    assert h.result(timeout=1) == {"error": "error", "attempts": 4, "message": "boom 4"}


@pytest.mark.django_db(transaction=True)
def test_uncaught_activity_error_fails_the_run(weft_env):
    FAIL_TIMES["r3"] = 99
    h = client.start("cmd-flaky-uncaught", {"key": "r3"}, workflow_id="cmd-retry-3")
    weft_env.run_until_idle()
    for _ in range(3):
        weft_env.advance(timedelta(minutes=5))
        weft_env.run_until_idle()
    assert h.status() == "failed"
    error = h.error()
    assert error["type"] == "ActivityError"
    assert error["fields"]["attempts"] == 4
    assert "boom 4" in error["message"]


@pytest.mark.django_db(transaction=True)
def test_non_retryable_fails_at_once(weft_env):
    h = client.start("cmd-declines", {"key": "nr"}, workflow_id="cmd-nr")
    weft_env.run_until_idle()
    assert CALLS["nr"] == 1
    assert not Timer.objects.filter(kind="retry").exists()
    assert h.result(timeout=1) == {"error": "non_retryable", "attempts": 1, "type": "Declined"}


@pytest.mark.django_db(transaction=True)
def test_activity_timeout_after_the_last_attempt(weft_env):
    h = client.start("cmd-hangs", {"key": "to"}, workflow_id="cmd-timeout")
    weft_env.run_until_idle()
    assert CALLS["to"] == 1
    assert h.status() == "parked"
    assert Timer.objects.get(run_id=h.run_id, kind="retry").payload["attempt"] == 2
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert CALLS["to"] == 2
    assert h.result(timeout=1) == {"error": "timeout", "attempts": 2}


# -- ctx.sleep -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_sleep_fires_only_once_the_clock_passes_it(weft_env):
    h = client.start("cmd-sleep", {"key": "s"}, workflow_id="cmd-sleep-1")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    timer = Timer.objects.get(run_id=h.run_id, kind="sleep")
    assert timer.fire_at == weft_env.clock.now + 600_000

    weft_env.advance(timedelta(minutes=9, seconds=59))
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert CALLS["s"] == 0

    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == 1
    assert not Timer.objects.filter(run_id=h.run_id).exists()


# -- recorded values ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_now_uuid_random_replay_identically(weft_env):
    h = client.start("cmd-recorded", {}, workflow_id="cmd-recorded-1")
    start_ms = weft_env.clock.now
    weft_env.run_until_idle()
    assert len(SEEN) == 1
    # A miss of the workflow cache (a restart, another engine) replays the body.
    weft_env.engine.workflow_cache.clear()
    weft_env.advance(timedelta(seconds=30))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    # The body ran twice (live, then replayed after the sleep) and saw the same values.
    assert len(SEEN) == 2
    assert SEEN[0] == SEEN[1]
    result = h.result(timeout=1)
    assert {k: result[k] for k in ("now", "uuid", "random")} == SEEN[0]
    assert result["now"].startswith("2023-11-14T22:13:20")  # the fake clock at start
    assert start_ms == 1_700_000_000_000
    assert result["later"] > result["now"]  # recorded live after the clock moved
    kinds = [k for k, _ in journal(h.run_id)]
    assert kinds == ["now", "uuid", "random", "sleep", "now"]


# -- queries -----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_query_replays_read_only_in_the_calling_process(weft_env):
    h = client.start("cmd-query", {"key": "q"}, workflow_id="cmd-query-1")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert CALLS["q"] == 2
    entries = JournalEntry.objects.count()
    before = latest("cmd-query-1")

    assert client.query("cmd-query-1", "progress") == {"steps": [1, 2]}
    assert client.query("cmd-query-1", "echo", "a", 2) == ["a", 2]
    assert CALLS["q"] == 2, "a query ran an activity"
    assert JournalEntry.objects.count() == entries
    after = latest("cmd-query-1")
    assert (after.version, after.wake_seq) == (before.version, before.wake_seq)
    assert after.status == "parked"
    with pytest.raises(LookupError, match="nope"):
        client.query("cmd-query-1", "nope")

    client.signal("cmd-query-1", "finish", None)
    weft_env.run_until_idle()
    assert h.result(timeout=1) == [1, 2]
    # A finished run can still be queried.
    assert client.query("cmd-query-1", "progress") == {"steps": [1, 2]}
    assert CALLS["q"] == 2


# -- logger --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_logger_is_silent_during_replay(weft_env, caplog):
    caplog.set_level(logging.INFO, logger="weft_django.workflow.cmd-logger")
    h = client.start("cmd-logger", {"key": "L"}, workflow_id="cmd-logger-1")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    messages = [
        r.getMessage() for r in caplog.records if r.name == "weft_django.workflow.cmd-logger"
    ]
    assert messages == [
        "[cmd-logger-1] first step of L",
        "[cmd-logger-1] second step",
        "[cmd-logger-1] done",
    ]
    # A query replays the whole body read-only: it logs nothing either.
    caplog.clear()
    with pytest.raises(LookupError):
        client.query("cmd-logger-1", "anything")
    assert not [r for r in caplog.records if r.name == "weft_django.workflow.cmd-logger"]


# -- mistakes in workflow code ---------------------------------------------------------


@activity()
def returns_garbage(key: str) -> object:
    CALLS[key] += 1
    return {"not json": object()}


@workflow(name="cmd-garbage")
def cmd_garbage(ctx, data):
    try:
        yield ctx.run(returns_garbage, "g")
    except ActivityError as exc:
        return {"kind": exc.kind, "type": exc.error_type}
    return "unreachable"


@workflow(name="cmd-yields-junk")
def cmd_yields_junk(ctx, data):
    yield 42


@activity()
def signal_myself(workflow_id: str) -> None:
    client.signal(workflow_id, "note", "sent while running")


@workflow(name="cmd-self-signal")
def cmd_self_signal(ctx, data):
    yield ctx.run(signal_myself, ctx.workflow_id)
    return (yield ctx.wait_for_signal("note"))


@pytest.mark.django_db(transaction=True)
def test_a_non_json_activity_result_is_a_non_retryable_activity_error(weft_env):
    h = client.start("cmd-garbage", None, workflow_id="cmd-garbage-1")
    weft_env.run_until_idle()
    assert CALLS["g"] == 1
    assert h.result(timeout=1) == {"kind": "non_retryable", "type": "PayloadError"}


@pytest.mark.django_db(transaction=True)
def test_yielding_something_else_than_a_command_fails_the_run(weft_env):
    h = client.start("cmd-yields-junk", None, workflow_id="cmd-junk-1")
    weft_env.run_until_idle()
    assert h.status() == "failed"
    assert h.error()["type"] == "TypeError"
    assert "not a ctx command" in h.error()["message"]


@pytest.mark.django_db(transaction=True)
def test_a_signal_sent_while_the_run_is_running_is_not_lost(weft_env):
    h = client.start("cmd-self-signal", None, workflow_id="cmd-self-sig")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == "sent while running"
