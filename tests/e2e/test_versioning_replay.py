"""Versioning (ctx.patched), non-determinism, database access from a body, and
continue_as_new."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tests.e2e.helpers import claim_events, journal, latest, swapped_workflow
from weft_django import activity, client, workflow
from weft_django.errors import NonDeterminismError
from weft_django.models import JournalEntry, SignalMessage, WorkflowClaim, WorkflowRun

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()


@activity()
def step_a(key: str) -> str:
    CALLS["a"] += 1
    return f"a:{key}"


@activity()
def step_b(key: str) -> str:
    CALLS["b"] += 1
    return f"b:{key}"


@activity()
def survey(key: str) -> str:
    CALLS["survey"] += 1
    return f"survey:{key}"


@activity()
def bump(n: int) -> int:
    CALLS["bump"] += 1
    return n + 1


# -- ctx.patched ----------------------------------------------------------------------------


@workflow(name="ver-order")
def ver_order_v1(ctx, data):
    a = yield ctx.run(step_a, data["id"])
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"a": a, "approved": approved, "patched": None}


def ver_order_v2(ctx, data):
    a = yield ctx.run(step_a, data["id"])
    patched = ctx.patched("send-survey")
    if patched:
        yield ctx.run(survey, data["id"])
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"a": a, "approved": approved, "patched": patched}


@pytest.mark.django_db(transaction=True)
def test_patched_keeps_old_runs_on_the_old_path(weft_env):
    old = client.start("ver-order", {"id": "old"}, workflow_id="ver-old")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=10))
    weft_env.run_until_idle()
    assert old.status() == "parked"  # past the sleep, waiting for approval
    assert [k for k, _ in journal(old.run_id)] == ["activity", "sleep"]

    with swapped_workflow("ver-order", ver_order_v2):  # the deploy
        new = client.start("ver-order", {"id": "new"}, workflow_id="ver-new")
        weft_env.run_until_idle()
        client.signal("ver-old", "approved", True)
        weft_env.run_until_idle()
        assert old.status() == "completed", old.error()
        assert old.result(timeout=1) == {"a": "a:old", "approved": True, "patched": False}
        assert CALLS["survey"] == 1  # only the new run took the new path
        assert [k for k, _ in journal(new.run_id)] == ["activity", "patch", "activity"]

        weft_env.advance(timedelta(seconds=10))
        weft_env.run_until_idle()
        client.signal("ver-new", "approved", "yes")
        weft_env.run_until_idle()
        assert new.result(timeout=1) == {"a": "a:new", "approved": "yes", "patched": True}
        assert CALLS["survey"] == 1  # replays of the new run do not run it again
    assert CALLS["a"] == 2


# -- non-determinism ------------------------------------------------------------------------


@workflow(name="ver-nondet")
def ver_nondet_v1(ctx, data):
    a = yield ctx.run(step_a, "x")
    got = yield ctx.wait_for_signal("go")
    got2 = yield ctx.wait_for_signal("go2")
    return [a, got, got2]


def ver_nondet_v2(ctx, data):
    b = yield ctx.run(step_b, "x")  # a different activity at recorded position 0
    got = yield ctx.wait_for_signal("go")
    return [b, got]


def ver_nondet_v3(ctx, data):
    a = yield ctx.run(step_a, "x")
    yield ctx.sleep(5)  # a sleep where the signal "go" was recorded (position 1)
    return [a]


@pytest.mark.django_db(transaction=True)
def test_changed_activity_suspends_the_run_with_non_determinism_error(weft_env):
    h = client.start("ver-nondet", None, workflow_id="ver-nd")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    journal_before = JournalEntry.objects.filter(run_id=h.run_id).count()
    with swapped_workflow("ver-nondet", ver_nondet_v2):
        client.signal("ver-nd", "go", 1)  # wakes the run: it replays against the new code
        weft_env.run_until_idle()
        run = latest("ver-nd")
        assert run.status == "suspended"  # not failed: a fixed deploy can resume it
        assert run.error["code"] == NonDeterminismError.code == "non_determinism"
        fields = run.error["fields"]
        assert fields["position"] == 0
        assert fields["recorded"] == "activity tests.e2e.test_versioning_replay.step_a"
        assert fields["new"] == "activity tests.e2e.test_versioning_replay.step_b"
        assert "position 0" in run.error["message"]
        assert CALLS["b"] == 0, "the diverging command must not run"
        assert JournalEntry.objects.filter(run_id=h.run_id).count() == journal_before
        assert claim_events("ver-nd") == [("acquire", 1), ("release", 1)]
        # While the code is still wrong nothing drives it.
        weft_env.advance(timedelta(hours=1))
        weft_env.run_until_idle()
        assert latest("ver-nd").status == "suspended"
    # The fixed deploy (the original code) resumes it; the buffered signal is kept.
    client.resume("ver-nd")
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert claim_events("ver-nd")[-1] == ("acquire", 2)
    client.signal("ver-nd", "go2", 2)
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == ["a:x", 1, 2]
    assert CALLS["a"] == 1
    assert claim_events("ver-nd")[-1] == ("release", 2)


@pytest.mark.django_db(transaction=True)
def test_changed_command_kind_at_a_later_position(weft_env):
    h = client.start("ver-nondet", None, workflow_id="ver-nd2")
    weft_env.run_until_idle()
    client.signal("ver-nd2", "go", "first")
    weft_env.run_until_idle()
    assert [k for k, _ in journal(h.run_id)] == ["activity", "signal"]
    with swapped_workflow("ver-nondet", ver_nondet_v3):
        client.signal("ver-nd2", "go2", "second")
        weft_env.run_until_idle()
    run = latest("ver-nd2")
    assert run.status == "suspended"
    fields = run.error["fields"]
    assert (fields["position"], fields["recorded"], fields["new"]) == (1, "signal go", "sleep")
    assert "position 1" in run.error["message"]
    unconsumed = SignalMessage.objects.filter(run_id=h.run_id, consumed_at_position__isnull=True)
    assert unconsumed.count() == 1


# -- database access ---------------------------------------------------------------------------


@workflow(name="ver-db")
def ver_db(ctx, data):
    yield ctx.run(step_a, "db")
    count = WorkflowRun.objects.count()  # not allowed: ORM work belongs in activities
    return count


@pytest.mark.django_db(transaction=True)
def test_database_access_from_a_workflow_body_fails_the_run(weft_env):
    h = client.start("ver-db", None, workflow_id="ver-db-1")
    weft_env.run_until_idle()
    assert h.status() == "failed"
    error = h.error()
    assert error["type"] == "WorkflowDatabaseAccessError"
    assert "activit" in error["message"]
    assert "workflow body" in error["message"]
    assert CALLS["a"] == 1


# -- continue_as_new ------------------------------------------------------------------------------


@workflow(name="ver-loop")
def ver_loop(ctx, data):
    value = yield ctx.run(bump, data["n"])
    if value < 3:
        yield ctx.sleep(1)
        yield ctx.continue_as_new({"n": value})
    return {"final": value, "run": ctx.run_id}


@pytest.mark.django_db(transaction=True)
def test_continue_as_new_starts_a_fresh_run_of_the_same_id(weft_env):
    h = client.start("ver-loop", {"n": 0}, workflow_id="ver-loop-1")
    weft_env.run_until_idle()
    for _ in range(3):
        weft_env.advance(1)
        weft_env.run_until_idle()
    runs = list(WorkflowRun.objects.filter(workflow_id="ver-loop-1").order_by("created_at"))
    assert len(runs) == 3
    first, second, third = runs
    assert str(first.pk) == h.run_id
    assert first.status == second.status == third.status == "completed"
    assert first.result == {"continued_as_new": str(second.pk)}
    assert second.result == {"continued_as_new": str(third.pk)}
    assert (second.continued_from_id, third.continued_from_id) == (first.pk, second.pk)
    assert [r.input for r in runs] == [{"n": 0}, {"n": 1}, {"n": 2}]
    # Each run has its own fresh journal.
    for run in runs[:2]:
        assert [k for k, _ in journal(run)] == ["activity", "sleep"]
    assert [k for k, _ in journal(third)] == ["activity"]
    assert CALLS["bump"] == 3
    # The handle follows the chain to the run that carried on.
    assert h.result(timeout=1) == {"final": 3, "run": str(third.pk)}
    assert latest("ver-loop-1").pk == third.pk
    # One claim for the whole chain: the epoch sequence goes on, never reset.
    events = claim_events("ver-loop-1")
    assert events[0] == ("acquire", 1)
    assert events[-1][0] == "release"
    assert "rotate" not in [kind for kind, _ in events]
    epochs = [epoch for _, epoch in events]
    assert epochs == sorted(epochs)
    claim = WorkflowClaim.objects.get(pk="ver-loop-1")
    assert (claim.epoch, claim.engine_id) == (epochs[-1], None)
