"""Concurrency inside a workflow (issue #14, item 1-2): all, race, map,
nesting, first-error cancellation, return_exceptions, async activities.

In-process (one engine, inline turns; activities run on its executor's
threads and event loop). The process-level proofs -- two engines, SIGKILL
during a ``ctx.all`` -- are in ``tests/engines`` and ``tests/celery``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

from tests.e2e.helpers import latest
from weft_django import ActivityCancelled, activity, activity_info, client, workflow
from weft_django.engine.workflow.context import WorkflowContext
from weft_django.errors import ActivityError, AsyncActivityTokenError

CALLS: Counter[str] = Counter()
INTERVALS: dict[str, tuple[float, float]] = {}
SEEN: list[str] = []
RUNNING = {"now": 0, "max": 0}
LOCK = threading.Lock()
STARTED = threading.Event()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    INTERVALS.clear()
    SEEN.clear()
    RUNNING.update(now=0, max=0)
    STARTED.clear()


class Refused(Exception):
    pass


@activity()
def nap(label: str, seconds: float = 0.3) -> str:
    began = time.monotonic()
    with LOCK:
        RUNNING["now"] += 1
        RUNNING["max"] = max(RUNNING["max"], RUNNING["now"])
    time.sleep(seconds)
    with LOCK:
        RUNNING["now"] -= 1
    INTERVALS[label] = (began, time.monotonic())
    CALLS[label] += 1
    return label


@activity(non_retryable=(Refused,))
def refuse(label: str) -> None:
    CALLS[label] += 1
    raise Refused(f"{label} refused")


@activity()
def beat_until_cancelled(label: str) -> str:
    """Heartbeats until its attempt is cancelled; records what it saw."""
    CALLS[label] += 1
    STARTED.set()
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            activity_info().heartbeat({"label": label})
            time.sleep(0.02)
    except ActivityCancelled as exc:
        SEEN.append(f"cancelled: {exc.reason}")
        raise
    return "never cancelled"


@activity()
async def async_nap(label: str, seconds: float = 0.3) -> str:
    began = time.monotonic()
    await asyncio.sleep(seconds)
    INTERVALS[label] = (began, time.monotonic())
    return f"async {label}"


@activity(timeout=0.2)
async def async_hangs(label: str) -> str:
    try:
        await asyncio.sleep(5)
        SEEN.append("after the await")  # never: the timeout cancels the coroutine
    finally:
        SEEN.append("finally ran")
    return "too late"


TOKENS: list[str] = []


@activity()
def hand_out(token: str) -> None:
    TOKENS.append(token)


@workflow(name="cc-race-async")
def cc_race_async(ctx, data):
    index, value = yield ctx.race(ctx.async_activity(hand_out), ctx.wait_for_signal("stop"))
    return {"index": index, "value": value}


@activity()
def announced_nap(label: str) -> str:
    STARTED.set()
    time.sleep(0.5)
    CALLS[label] += 1
    return label


@workflow(name="cc-graceful")
def cc_graceful(ctx, data):
    return (yield ctx.run(announced_nap, "graceful"))


@activity(heartbeat_timeout=0.3, retries=1, backoff=0)
def stalls_once(label: str) -> str:
    CALLS[label] += 1
    activity_info().heartbeat({"attempt": activity_info().attempt})
    if activity_info().attempt == 1:
        time.sleep(1.0)  # no heartbeat for longer than heartbeat_timeout
        return "stalled"
    return f"attempt {activity_info().attempt}"


@workflow(name="cc-heartbeat-timeout")
def cc_heartbeat_timeout(ctx, data):
    return (yield ctx.run(stalls_once, "stall"))


@workflow(name="cc-all-four")
def cc_all_four(ctx, data):
    return (yield ctx.all(*(ctx.run(nap, f"n{i}") for i in range(4))))


@workflow(name="cc-nested")
def cc_nested(ctx, data):
    a, (index, b), mapped = yield ctx.all(
        ctx.run(nap, "outer", 0.05),
        ctx.race(ctx.wait_for_signal("never"), ctx.run(nap, "racer", 0.05)),
        ctx.map(nap, ["m0", "m1", "m2"]),
    )
    return {"a": a, "race": [index, b], "map": mapped}


@workflow(name="cc-return-exceptions")
def cc_return_exceptions(ctx, data):
    ok, failed = yield ctx.all(
        ctx.run(nap, "fine", 0.05), ctx.run(refuse, "bad"), return_exceptions=True
    )
    assert isinstance(failed, ActivityError)
    return {"ok": ok, "error": [type(failed).__name__, failed.message]}


@workflow(name="cc-first-error")
def cc_first_error(ctx, data):
    try:
        yield ctx.all(ctx.run(beat_until_cancelled, "slow"), ctx.run(refuse, "fast"))
    except ActivityError as exc:
        return {"error": exc.message}
    return "unreachable"


@workflow(name="cc-race-signals")
def cc_race_signals(ctx, data):
    index, value = yield ctx.race(ctx.wait_for_signal("a"), ctx.wait_for_signal("b"))
    return {"index": index, "value": value}


@workflow(name="cc-map-bounded")
def cc_map_bounded(ctx, data):
    return (yield ctx.map(nap, [f"b{i}" for i in range(6)], max_concurrency=2))


@workflow(name="cc-async")
def cc_async(ctx, data):
    return (yield ctx.all(ctx.run(async_nap, "x"), ctx.run(async_nap, "y"), ctx.run(nap, "z")))


@workflow(name="cc-async-timeout")
def cc_async_timeout(ctx, data):
    try:
        yield ctx.run(async_hangs, "h")
    except ActivityError as exc:
        return {"kind": exc.kind}
    return "unreachable"


@workflow(name="cc-cancel-me")
def cc_cancel_me(ctx, data):
    return (yield ctx.run(beat_until_cancelled, "long"))


def _overlap(*labels: str) -> bool:
    """Every pair of these activities' intervals overlaps."""
    spans = [INTERVALS[label] for label in labels]
    return max(start for start, _ in spans) < min(end for _, end in spans)


@pytest.mark.django_db(transaction=True)
def test_all_of_four_runs_them_at_once(weft_env):
    h = client.start("cc-all-four", None, workflow_id="cc-four")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == ["n0", "n1", "n2", "n3"]
    assert _overlap("n0", "n1", "n2", "n3"), INTERVALS
    assert all(CALLS[f"n{i}"] == 1 for i in range(4))


@pytest.mark.django_db(transaction=True)
def test_nested_combinators_complete_with_results_in_command_order(weft_env):
    h = client.start("cc-nested", None, workflow_id="cc-nested")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"a": "outer", "race": [1, "racer"], "map": ["m0", "m1", "m2"]}
    assert _overlap("outer", "racer", "m0", "m1", "m2"), INTERVALS


@pytest.mark.django_db(transaction=True)
def test_return_exceptions_gives_every_outcome(weft_env):
    h = client.start("cc-return-exceptions", None, workflow_id="cc-rex")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"ok": "fine", "error": ["ActivityError", "bad refused"]}
    assert CALLS["fine"] == 1 and CALLS["bad"] == 1


@pytest.mark.django_db(transaction=True)
def test_the_first_failure_cancels_the_running_rest(weft_env):
    h = client.start("cc-first-error", None, workflow_id="cc-first")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"error": "fast refused"}
    # The slow branch's attempt was abandoned: its next heartbeat raised.
    deadline = time.monotonic() + 5
    while not SEEN and time.monotonic() < deadline:
        time.sleep(0.01)
    # (or, when its heartbeat write raced the end: "run is completed")
    assert len(SEEN) == 1 and SEEN[0].startswith("cancelled: "), SEEN
    kinds = [k for k, _ in weft_env.journal("cc-first")]
    assert kinds.count("activity") == 1  # only the failure: the cancelled branch left nothing


@pytest.mark.django_db(transaction=True)
def test_race_says_which_branch_won_even_with_a_null_payload(weft_env):
    h = client.start("cc-race-signals", None, workflow_id="cc-race")
    weft_env.run_until_idle()
    client.signal("cc-race", "b", None)
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"index": 1, "value": None}


@pytest.mark.django_db(transaction=True)
def test_map_honours_max_concurrency_and_keeps_input_order(weft_env):
    h = client.start("cc-map-bounded", None, workflow_id="cc-map")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == [f"b{i}" for i in range(6)]
    assert RUNNING["max"] == 2


@pytest.mark.django_db(transaction=True)
def test_async_activities_run_concurrently_with_each_other_and_threads(weft_env):
    h = client.start("cc-async", None, workflow_id="cc-async")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == ["async x", "async y", "z"]
    assert _overlap("x", "y", "z"), INTERVALS


@pytest.mark.django_db(transaction=True)
def test_an_async_timeout_cancels_the_coroutine(weft_env):
    h = client.start("cc-async-timeout", None, workflow_id="cc-async-to")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"kind": "timeout"}
    assert SEEN == ["finally ran"]


@pytest.mark.django_db(transaction=True)
def test_cancelling_the_run_raises_activity_cancelled_in_the_running_activity(weft_env):
    h = client.start("cc-cancel-me", None, workflow_id="cc-cancel")
    canceller = threading.Thread(
        target=lambda: (STARTED.wait(5), client.cancel("cc-cancel", "enough")), daemon=True
    )
    canceller.start()
    weft_env.run_until_idle()
    canceller.join(5)
    assert latest("cc-cancel").status == "cancelled"
    deadline = time.monotonic() + 5
    while not SEEN and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(SEEN) == 1 and SEEN[0].startswith("cancelled: "), SEEN
    assert "activity" not in [k for k, _ in weft_env.journal("cc-cancel")]
    assert h.status() == "cancelled"


@pytest.mark.parametrize(
    "bad, error",
    [
        (lambda ctx: ctx.map(nap, 3), TypeError),
        (lambda ctx: ctx.map(nap, [1], max_concurrency=0), ValueError),
        (lambda ctx: ctx.map(nap, [1], max_concurrency=True), ValueError),
        (lambda ctx: ctx.map("no-such-activity", [1]), TypeError),
        (lambda ctx: ctx.all(ctx.run(nap, "a"), "not a command"), TypeError),
        (lambda ctx: ctx.race(), ValueError),
    ],
)
def test_bad_combinator_input_is_a_clear_error_at_call_time(bad, error):
    # The combinators validate before anything runs: no runtime is needed.
    ctx = WorkflowContext(None, "wid", "rid", "name")  # type: ignore[arg-type]
    with pytest.raises(error) as raised:
        bad(ctx)
    assert "ctx." in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_a_lost_race_voids_the_async_token(weft_env):
    TOKENS.clear()
    h = client.start("cc-race-async", None, workflow_id="cc-race-async")
    weft_env.run_until_idle()
    [token] = TOKENS
    client.signal("cc-race-async", "stop", "enough")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"index": 1, "value": "enough"}
    with pytest.raises(AsyncActivityTokenError) as refused:
        client.complete_async_activity(token, "too late")
    assert refused.value.kind == "used"


@pytest.mark.django_db(transaction=True)
def test_a_graceful_stop_commits_the_attempt_that_lands_within_the_grace(clock):
    from weft_django.engine.engine import Engine

    engine = Engine(clock=clock).start()
    try:
        client.start("cc-graceful", None, workflow_id="cc-graceful")
        assert STARTED.wait(10)
    finally:
        engine.dispose(grace=5)
    run = latest("cc-graceful")
    assert run.status == "completed", run.status
    assert run.result == "graceful" and CALLS["graceful"] == 1


@pytest.mark.django_db(transaction=True)
def test_a_missed_heartbeat_times_the_attempt_out_and_it_is_retried(weft_env):
    h = client.start("cc-heartbeat-timeout", None, workflow_id="cc-hb-timeout")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == "attempt 2"
    assert CALLS["stall"] == 2
