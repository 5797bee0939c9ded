"""ctx.start_child, ctx.all and ctx.race."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tests.e2e.helpers import claim_events, latest
from weft_django import activity, client, workflow
from weft_django.errors import ActivityError, ChildWorkflowError
from weft_django.models import Timer, WorkflowRun

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()


class Broken(Exception):
    pass


@activity()
def double(n: int) -> int:
    CALLS["double"] += 1
    return n * 2


@activity(non_retryable=(Broken,))
def breaks(label: str) -> None:
    CALLS[label] += 1
    raise Broken(f"{label} broke")


@workflow(name="kids-double")
def kids_double(ctx, data):
    value = yield ctx.run(double, data["n"])
    return {"doubled": value, "me": ctx.workflow_id}


@workflow(name="kids-waits")
def kids_waits(ctx, data):
    return (yield ctx.wait_for_signal("release"))


@workflow(name="kids-fails")
def kids_fails(ctx, data):
    yield ctx.sleep(1)
    raise ValueError(f"child says no: {data}")


@workflow(name="kids-parent")
def kids_parent(ctx, data):
    a = yield ctx.start_child("kids-double", {"n": 1})
    b = yield ctx.start_child("kids-double", {"n": 2}, workflow_id=f"explicit-{ctx.workflow_id}")
    return [a, b]


@workflow(name="kids-catches")
def kids_catches(ctx, data):
    try:
        yield ctx.start_child("kids-fails", "x")
    except ChildWorkflowError as exc:
        return {"child": exc.workflow_id, "status": exc.status, "type": exc.error["type"]}
    return "unreachable"


@workflow(name="kids-uncaught")
def kids_uncaught(ctx, data):
    return (yield ctx.start_child("kids-fails", "y"))


@workflow(name="kids-waiting-parent")
def kids_waiting_parent(ctx, data):
    return (yield ctx.start_child("kids-waits", None))


@workflow(name="kids-all")
def kids_all(ctx, data):
    results = yield ctx.all(
        ctx.sleep(timedelta(seconds=30)),
        ctx.run(double, 5),
        ctx.start_child("kids-double", {"n": 7}),
        ctx.wait_for_signal("go"),
    )
    return results


@workflow(name="kids-all-error")
def kids_all_error(ctx, data):
    try:
        yield ctx.all(
            ctx.sleep(timedelta(seconds=10)),
            ctx.run(breaks, "first"),
            ctx.run(breaks, "second"),
        )
    except ActivityError as exc:
        return {"error": exc.message, "at": ctx.now().isoformat()}
    return "unreachable"


@workflow(name="kids-race-timer")
def kids_race_timer(ctx, data):
    winner = yield ctx.race(ctx.sleep(timedelta(hours=1)), ctx.wait_for_signal("go"))
    final = yield ctx.wait_for_signal("end")
    return {"winner": winner, "final": final}


@workflow(name="kids-race-sleep-wins")
def kids_race_sleep_wins(ctx, data):
    winner = yield ctx.race(ctx.sleep(timedelta(seconds=10)), ctx.wait_for_signal("go"))
    return {"winner": winner}


@workflow(name="kids-race-child")
def kids_race_child(ctx, data):
    winner = yield ctx.race(ctx.start_child("kids-waits", None), ctx.wait_for_signal("stop"))
    yield ctx.sleep(timedelta(seconds=5))
    return {"winner": winner}


# -- start_child ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_child_results_reach_the_parent_with_deterministic_and_explicit_ids(weft_env):
    h = client.start("kids-parent", None, workflow_id="kp")
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == [
        {"doubled": 2, "me": "kp:0"},
        {"doubled": 4, "me": "explicit-kp"},
    ]
    parent = latest("kp")
    for child_id, position in (("kp:0", 0), ("explicit-kp", 1)):
        child = latest(child_id)
        assert (child.status, child.parent_id, child.parent_position) == (
            "completed",
            parent.pk,
            position,
        )
        # The child was claimed in its create batch and released at its end.
        assert claim_events(child_id) == [("acquire", 1), ("release", 1)]
    assert CALLS["double"] == 2


@pytest.mark.django_db(transaction=True)
def test_parent_waits_for_a_parked_child(weft_env):
    h = client.start("kids-waiting-parent", None, workflow_id="kw")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert latest("kw:0").status == "parked"
    client.signal("kw:0", "release", {"from": "outside"})
    weft_env.run_until_idle()
    assert latest("kw:0").status == "completed"
    assert h.result(timeout=1) == {"from": "outside"}


@pytest.mark.django_db(transaction=True)
def test_child_failure_is_a_child_workflow_error_the_parent_can_catch(weft_env):
    h = client.start("kids-catches", None, workflow_id="kc")
    weft_env.run_until_idle()
    weft_env.advance(1)
    weft_env.run_until_idle()
    assert latest("kc:0").status == "failed"
    assert h.result(timeout=1) == {"child": "kc:0", "status": "failed", "type": "ValueError"}


@pytest.mark.django_db(transaction=True)
def test_uncaught_child_failure_fails_the_parent(weft_env):
    h = client.start("kids-uncaught", None, workflow_id="ku")
    weft_env.run_until_idle()
    weft_env.advance(1)
    weft_env.run_until_idle()
    assert h.status() == "failed"
    assert h.error()["type"] == "ChildWorkflowError"
    assert h.error()["fields"]["workflow_id"] == "ku:0"


# -- all --------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_all_returns_every_result_in_order(weft_env):
    h = client.start("kids-all", None, workflow_id="ka")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal("ka", "go", "signalled")
    weft_env.run_until_idle()
    assert h.status() == "parked"  # the sleep is still pending
    weft_env.advance(timedelta(seconds=30))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == [None, 10, {"doubled": 14, "me": "ka:2"}, "signalled"]


@pytest.mark.django_db(transaction=True)
def test_all_raises_the_first_error_and_cancels_the_rest(weft_env):
    h = client.start("kids-all-error", None, workflow_id="kae")
    start = weft_env.clock.now
    weft_env.run_until_idle()
    # Both activities were started at once; the first failure decided (the
    # other may not have begun on its thread yet): the 10 s sleep was
    # dropped, not waited for.
    assert CALLS["first"] + CALLS["second"] in (1, 2)
    assert max(CALLS["first"], CALLS["second"]) == 1
    assert h.status() == "completed", h.error()
    result = h.result(timeout=1)
    assert result["error"] in {"first broke", "second broke"}
    from datetime import UTC, datetime

    assert result["at"] == datetime.fromtimestamp(start / 1000, tz=UTC).isoformat()
    assert not Timer.objects.filter(run_id=h.run_id).exists()


# -- race ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_race_first_wins_and_the_losing_timer_is_dropped(weft_env):
    h = client.start("kids-race-timer", None, workflow_id="kr")
    weft_env.run_until_idle()
    assert Timer.objects.filter(run_id=h.run_id, kind="sleep").count() == 1
    client.signal("kr", "go", "signal first")
    weft_env.run_until_idle()
    assert h.status() == "parked"  # now waiting for "end"
    assert not Timer.objects.filter(run_id=h.run_id).exists(), "the losing sleep's timer is left"
    weft_env.advance(timedelta(hours=2))  # the dropped sleep must not wake anything
    weft_env.run_until_idle()
    assert h.status() == "parked"
    client.signal("kr", "end", 1)
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"winner": [1, "signal first"], "final": 1}


@pytest.mark.django_db(transaction=True)
def test_race_won_by_the_timer(weft_env):
    h = client.start("kids-race-sleep-wins", None, workflow_id="krs")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=10))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"winner": [0, None]}  # (index, value) of the sleep
    # A signal for the loser arrives afterwards: the run is over.
    from weft_django.errors import InvalidTransitionError

    with pytest.raises(InvalidTransitionError):
        client.signal("krs", "go", 1)


@pytest.mark.django_db(transaction=True)
def test_race_cancels_the_losing_child(weft_env):
    h = client.start("kids-race-child", None, workflow_id="krc")
    weft_env.run_until_idle()
    assert latest("krc:0").status == "parked"
    client.signal("krc", "stop", "stopped")
    weft_env.run_until_idle()
    child = latest("krc:0")
    assert child.status == "cancelled"
    assert claim_events("krc:0") == [("acquire", 1), ("rotate", 2)]
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"winner": [1, "stopped"]}
    assert WorkflowRun.objects.filter(workflow_id="krc:0").count() == 1


@workflow(name="kids-unknown")
def kids_unknown(ctx, data):
    try:
        yield ctx.start_child("kids-no-such-workflow", None)
    except ChildWorkflowError as exc:
        return {"child": exc.workflow_id, "status": exc.status, "code": exc.error.get("code")}
    return "unreachable"


@workflow(name="kids-taken-id")
def kids_taken_id(ctx, data):
    try:
        yield ctx.start_child("kids-waits", None, workflow_id="kids-taken")
    except ChildWorkflowError as exc:
        return {"child": exc.workflow_id, "status": exc.status}
    return "unreachable"


@pytest.mark.django_db(transaction=True)
def test_child_of_an_unknown_workflow_type(weft_env):
    h = client.start("kids-unknown", None, workflow_id="kun")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {
        "child": "kun:0",
        "status": "failed",
        "code": "unknown_workflow_type",
    }
    assert not WorkflowRun.objects.filter(workflow_id="kun:0").exists()


@pytest.mark.django_db(transaction=True)
def test_child_with_an_explicit_id_that_is_already_live(weft_env):
    client.start("kids-waits", None, workflow_id="kids-taken")
    weft_env.run_until_idle()
    h = client.start("kids-taken-id", None, workflow_id="kti")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"child": "kids-taken", "status": "conflict"}
    assert WorkflowRun.objects.filter(workflow_id="kids-taken").count() == 1
    assert latest("kids-taken").parent_id is None
