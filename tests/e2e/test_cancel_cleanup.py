"""Cancellation that runs cleanup (issue #17 part 3): grace, force, second cancel,
children, a swallowed cancel, replay of the cleanup path."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from tests.e2e.helpers import claim_epoch, journal, latest
from weft_django import WorkflowCancelled, activity, client, workflow
from weft_django.engine.workflow.definitions import registry
from weft_django.errors import InvalidTransitionError
from weft_django.models import WorkflowRun

calls: Counter[str] = Counter()
SEEN: list[str] = []


@pytest.fixture(autouse=True)
def _reset():
    calls.clear()
    SEEN.clear()


def settle(env) -> None:
    """Drive until idle, then once more past the takeover cooldown: the engine that
    held a run whose claim a cancel request rotated takes it back only after one
    renew interval (another engine would take it at once)."""
    env.run_until_idle()
    env.advance(env.engine.settings.claim_renew_interval_ms / 1000)
    env.run_until_idle()


@activity()
def cleanup_step(label: str) -> str:
    calls[label] += 1
    return f"cleaned {label}"


class CleanupBroke(Exception):
    pass


@activity(non_retryable=(CleanupBroke,))
def cleanup_breaks(label: str) -> None:
    calls[label] += 1
    raise CleanupBroke(f"{label} broke")


@workflow(name="cc-finally")
def cc_finally(ctx, data):
    try:
        return (yield ctx.wait_for_signal("never"))
    finally:
        yield ctx.run(cleanup_step, "finally")


@workflow(name="cc-catch")
def cc_catch(ctx, data):
    try:
        yield ctx.sleep(timedelta(hours=1))
    except WorkflowCancelled as exc:
        SEEN.append(exc.reason)
        first = yield ctx.run(cleanup_step, "a")
        yield ctx.sleep(timedelta(seconds=5))  # a cleanup that waits
        second = yield ctx.run(cleanup_step, "b")
        return [first, second]
    return "not cancelled"


@workflow(name="cc-slow-cleanup")
def cc_slow_cleanup(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    except WorkflowCancelled:
        yield ctx.sleep(timedelta(minutes=10))  # longer than any grace given
        yield ctx.run(cleanup_step, "too late")


@workflow(name="cc-swallow")
def cc_swallow(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    except Exception:  # swallows the cancel and returns normally
        SEEN.append("swallowed")
    return "returned normally"


@workflow(name="cc-cleanup-raises")
def cc_cleanup_raises(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    finally:
        yield ctx.run(cleanup_breaks, "broken cleanup")


@workflow(name="cc-default-grace", cancel_grace=timedelta(seconds=30))
def cc_default_grace(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    finally:
        yield ctx.run(cleanup_step, "default")


@workflow(name="cc-child")
def cc_child(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    finally:
        yield ctx.run(cleanup_step, f"child {data}")


@workflow(name="cc-parent")
def cc_parent(ctx, data):
    try:
        yield ctx.start_child("cc-child", "one")
    finally:
        yield ctx.run(cleanup_step, "parent")


# -- without a grace: as before -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_without_grace_a_cancel_is_immediate_and_runs_no_workflow_code(weft_env):
    h = client.start("cc-finally", None, workflow_id="cc-now")
    weft_env.run_until_idle()
    epoch = claim_epoch("cc-now")
    client.cancel("cc-now", "stop")
    run = latest("cc-now")
    assert run.status == "cancelled"
    assert run.error == {"type": "Cancelled", "message": "stop"}
    assert run.cancel_requested_at is None
    assert claim_epoch("cc-now") == epoch + 1
    settle(weft_env)
    assert calls == Counter()
    assert h.status() == "cancelled"


# -- with a grace ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_grace_throws_workflow_cancelled_and_cleanup_runs_once(weft_env):
    h = client.start("cc-finally", None, workflow_id="cc-fin")
    weft_env.run_until_idle()
    epoch = claim_epoch("cc-fin")
    run = client.cancel("cc-fin", "customer asked", grace=60)
    # Requested, not ended: the claim rotated in the same batch, the run stays drivable.
    assert run.status == "parked"
    assert run.cancel_requested_at is not None
    assert run.cancel_reason == "customer asked"
    assert run.cancel_deadline_at == weft_env.clock.now + 60_000
    assert claim_epoch("cc-fin") == epoch + 1
    settle(weft_env)
    run = latest("cc-fin")
    assert run.status == "cancelled", run.error
    assert run.error == {"type": "Cancelled", "message": "customer asked"}
    assert calls == Counter({"finally": 1})
    kinds = [kind for kind, _ in journal(run)]
    assert kinds == ["cancel", "activity"]
    assert h.status() == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_caught_cancel_may_yield_several_cleanup_commands_within_the_grace(weft_env):
    client.start("cc-catch", None, workflow_id="cc-c")
    weft_env.run_until_idle()
    client.cancel("cc-c", "why", grace=timedelta(minutes=1))
    settle(weft_env)
    assert latest("cc-c").status == "parked"  # sleeping inside the cleanup
    assert calls == Counter({"a": 1})
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    run = latest("cc-c")
    assert run.status == "cancelled"
    assert calls == Counter({"a": 1, "b": 1})
    assert SEEN == ["why"]


@pytest.mark.django_db(transaction=True)
def test_the_grace_running_out_ends_the_run_at_once(weft_env):
    client.start("cc-slow-cleanup", None, workflow_id="cc-slow")
    weft_env.run_until_idle()
    client.cancel("cc-slow", "hurry", grace=30)
    settle(weft_env)
    assert latest("cc-slow").status == "parked"  # cleaning up (sleeping)
    weft_env.advance(timedelta(seconds=31))
    weft_env.run_until_idle()
    run = latest("cc-slow")
    assert run.status == "cancelled"
    assert run.error["message"] == "hurry (cancel grace ran out)"
    weft_env.advance(timedelta(minutes=20))
    weft_env.run_until_idle()
    assert calls == Counter()


@pytest.mark.django_db(transaction=True)
def test_a_second_cancel_ends_it_immediately(weft_env):
    client.start("cc-slow-cleanup", None, workflow_id="cc-2nd")
    weft_env.run_until_idle()
    client.cancel("cc-2nd", "first", grace=300)
    settle(weft_env)
    epoch = claim_epoch("cc-2nd")
    run = client.cancel("cc-2nd", grace=300)
    assert run.status == "cancelled"
    assert run.error == {"type": "Cancelled", "message": "first"}
    assert claim_epoch("cc-2nd") == epoch + 1
    with pytest.raises(InvalidTransitionError):
        client.cancel("cc-2nd")


@pytest.mark.django_db(transaction=True)
def test_force_ignores_the_workflow_default_grace(weft_env):
    client.start("cc-default-grace", None, workflow_id="cc-force")
    weft_env.run_until_idle()
    run = client.cancel("cc-force", "now", force=True)
    assert run.status == "cancelled"
    settle(weft_env)
    assert calls == Counter()


@pytest.mark.django_db(transaction=True)
def test_the_workflow_default_grace_applies_when_the_caller_names_none(weft_env):
    client.start("cc-default-grace", None, workflow_id="cc-def")
    weft_env.run_until_idle()
    run = client.cancel("cc-def")
    assert run.status == "parked" and run.cancel_deadline_at == weft_env.clock.now + 30_000
    settle(weft_env)
    assert latest("cc-def").status == "cancelled"
    assert calls == Counter({"default": 1})


@pytest.mark.django_db(transaction=True)
def test_a_swallowed_cancel_still_ends_cancelled(weft_env):
    client.start("cc-swallow", None, workflow_id="cc-sw")
    weft_env.run_until_idle()
    client.cancel("cc-sw", "stop it", grace=10)
    settle(weft_env)
    assert SEEN == ["swallowed"]
    run = latest("cc-sw")
    assert run.status == "cancelled"
    assert run.result is None
    assert run.error == {"type": "Cancelled", "message": "stop it"}


@pytest.mark.django_db(transaction=True)
def test_cleanup_that_raises_fails_the_run(weft_env):
    client.start("cc-cleanup-raises", None, workflow_id="cc-raise")
    weft_env.run_until_idle()
    client.cancel("cc-raise", grace=10)
    settle(weft_env)
    run = latest("cc-raise")
    assert run.status == "failed"
    assert run.error["type"] == "ActivityError"
    assert calls == Counter({"broken cleanup": 1})


@pytest.mark.django_db(transaction=True)
def test_bad_grace_values_are_refused_naming_the_value(weft_env):
    client.start("cc-finally", None, workflow_id="cc-bad")
    weft_env.run_until_idle()
    with pytest.raises(ValueError, match="-1"):
        client.cancel("cc-bad", grace=-1)
    with pytest.raises(ValueError, match="force"):
        client.cancel("cc-bad", grace=5, force=True)
    assert latest("cc-bad").cancel_requested_at is None
    with pytest.raises(ValueError, match="cancel_grace"):
        workflow(name="cc-bad-default", cancel_grace=-3)


@pytest.mark.django_db(transaction=True)
def test_a_pending_run_is_cancelled_at_once_even_with_a_grace(weft_env):
    client.start("cc-finally", None, workflow_id="cc-pending")
    run = client.cancel("cc-pending", grace=60)
    assert run.status == "cancelled"


# -- children -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_parent_cancelled_with_grace_gives_its_children_the_same_grace(weft_env):
    client.start("cc-parent", None, workflow_id="cc-p")
    weft_env.run_until_idle()
    assert latest("cc-p:0").status == "parked"
    parent = client.cancel("cc-p", "parent stop", grace=45)
    child = latest("cc-p:0")
    assert child.cancel_requested_at is not None
    assert child.cancel_deadline_at == parent.cancel_deadline_at
    assert child.cancel_reason == "parent cc-p was cancelled"
    settle(weft_env)
    assert latest("cc-p").status == "cancelled"
    assert latest("cc-p:0").status == "cancelled"
    assert calls == Counter({"parent": 1, "child one": 1})


@pytest.mark.django_db(transaction=True)
def test_a_second_cancel_of_the_parent_ends_the_children_too(weft_env):
    client.start("cc-parent", None, workflow_id="cc-p2")
    weft_env.run_until_idle()
    client.cancel("cc-p2", grace=45)
    client.cancel("cc-p2")
    assert latest("cc-p2").status == "cancelled"
    assert latest("cc-p2:0").status == "cancelled"
    settle(weft_env)
    assert calls == Counter()


# -- replay ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_cleanup_path_replays_from_the_journal(weft_env):
    """A cache miss (or a takeover) during cleanup replays the cancel event at the
    same wait: the cleanup already done is not done again."""
    client.start("cc-catch", None, workflow_id="cc-rp")
    weft_env.run_until_idle()
    client.cancel("cc-rp", grace=60)
    settle(weft_env)
    assert calls == Counter({"a": 1})
    # Drop every cached replay: the next turn replays the journal from the start.
    cache = weft_env.engine.workflow_cache
    if cache is not None:
        cache.clear()
    assert registry.workflows["cc-catch"].cancel_grace_ms is None
    weft_env.advance(timedelta(seconds=5))
    weft_env.run_until_idle()
    assert latest("cc-rp").status == "cancelled"
    assert calls == Counter({"a": 1, "b": 1})
    assert SEEN == ["", ""]  # the body saw the cancel live, then again on the replay
    assert [kind for kind, _ in journal(latest("cc-rp"))] == [
        "cancel",
        "activity",
        "sleep",
        "activity",
    ]
    assert WorkflowRun.objects.filter(workflow_id="cc-rp").count() == 1


# -- other ownership modes ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["none", "lease"])
def test_grace_works_without_per_workflow_claims(mode):
    """No claim to rotate: the request's version bump fences the driver, and the
    wake_seq bump makes the owner drive the run again."""
    from django.test import override_settings

    from tests.support import ManualClock
    from weft_django.engine.engine import Engine
    from weft_django.models import ClaimEvent, OwnershipModeMarker

    OwnershipModeMarker.objects.all().delete()
    clock = ManualClock()
    with override_settings(WEFT={"OWNERSHIP": mode}):
        engine = Engine(clock=clock, background_tasks="manual", ownership=mode).boot()
        try:
            client.start("cc-finally", None, workflow_id=f"cc-mode-{mode}")
            engine.run_until_idle()
            run = client.cancel(f"cc-mode-{mode}", "no claims", grace=30)
            assert run.status == "parked" and run.cancel_requested_at is not None
            engine.run_until_idle()
            run = latest(f"cc-mode-{mode}")
            assert run.status == "cancelled", run.status
            assert calls == Counter({"finally": 1})
        finally:
            engine.dispose(grace=0)
    assert not ClaimEvent.objects.filter(kind="rotate").exists()


# -- an in-flight step, and retry -----------------------------------------------------


@activity()
def cancels_itself(workflow_id: str) -> str:
    """Asks for a cancel with a grace while it runs: its result must not commit."""
    calls["in flight"] += 1
    client.cancel(workflow_id, "overtaken", grace=60)
    return "must not be recorded"


@workflow(name="cc-overtaken")
def cc_overtaken(ctx, data):
    try:
        return (yield ctx.run(cancels_itself, ctx.workflow_id))
    except WorkflowCancelled as exc:
        SEEN.append(exc.reason)
        yield ctx.run(cleanup_step, "after overtaken")
        raise


@pytest.mark.django_db(transaction=True)
def test_a_step_in_flight_when_the_cancel_lands_commits_nothing(weft_env):
    client.start("cc-overtaken", None, workflow_id="cc-ov")
    settle(weft_env)
    run = latest("cc-ov")
    assert run.status == "cancelled", (run.status, run.error)
    assert SEEN == ["overtaken"]
    assert calls == Counter({"in flight": 1, "after overtaken": 1})
    entries = journal(run)
    assert entries[0][0] == "cancel"  # the overtaken step's result was never recorded
    assert [kind for kind, _ in entries] == ["cancel", "activity"]


@pytest.mark.django_db(transaction=True)
def test_retry_of_a_failed_cleanup_runs_the_cleanup_again_without_the_old_deadline(weft_env):
    client.start("cc-cleanup-raises", None, workflow_id="cc-retry")
    weft_env.run_until_idle()
    client.cancel("cc-retry", grace=10)
    settle(weft_env)
    assert latest("cc-retry").status == "failed"
    weft_env.advance(60)  # long past the grace
    client.retry("cc-retry")
    run = latest("cc-retry")
    assert run.cancel_deadline_at is None and run.cancel_requested_at is not None
    weft_env.run_until_idle()
    assert latest("cc-retry").status == "failed"  # the cleanup raised again, honestly
    assert calls == Counter({"broken cleanup": 2})


@pytest.mark.django_db(transaction=True)
def test_of_two_racing_grace_requests_the_second_ends_the_run(weft_env):
    """The second request read the run before the first committed: its batch's
    "no request stored yet" condition fails, it reads again and ends the run."""
    from weft_django.engine.operations.cancel import request_cancel

    client.start("cc-slow-cleanup", None, workflow_id="cc-race")
    weft_env.run_until_idle()
    stale = latest("cc-race")
    client.cancel("cc-race", "first", grace=300)
    run = request_cancel("cc-race", "second", 300_000, run=stale)
    assert run.status == "cancelled"
    assert run.error == {"type": "Cancelled", "message": "second"}


@workflow(name="cc-slow-child")
def cc_slow_child(ctx, data):
    try:
        yield ctx.wait_for_signal("never")
    finally:
        yield ctx.sleep(timedelta(minutes=10))  # a cleanup longer than the grace
        yield ctx.run(cleanup_step, "slow child too late")


@workflow(name="cc-slow-parent")
def cc_slow_parent(ctx, data):
    try:
        yield ctx.start_child("cc-slow-child", None)
    finally:
        yield ctx.run(cleanup_step, "parent")


@pytest.mark.django_db(transaction=True)
def test_the_grace_running_out_ends_a_child_still_cleaning_up(weft_env):
    client.start("cc-slow-parent", None, workflow_id="cc-sp")
    weft_env.run_until_idle()
    client.cancel("cc-sp", grace=20)
    settle(weft_env)
    assert latest("cc-sp").status == "cancelled"  # its own cleanup was quick
    assert latest("cc-sp:0").status == "parked"  # the child is still cleaning up
    weft_env.advance(21)
    weft_env.run_until_idle()
    child = latest("cc-sp:0")
    assert child.status == "cancelled"
    assert child.error["message"] == "parent cc-sp was cancelled (cancel grace ran out)"
    assert calls == Counter({"parent": 1})
