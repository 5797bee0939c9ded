"""External transitions: cancel, suspend, timeout, purge (each rotates the epoch),
resume, retry, idempotent start, start-new, delayed start."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.helpers import claim_epoch, claim_events, journal, latest
from weft_django import activity, client, workflow
from weft_django.errors import (
    IdempotencyConflictError,
    InvalidTransitionError,
    WorkflowAlreadyRunning,
    WorkflowFailedError,
)
from weft_django.models import (
    ClaimEvent,
    JournalEntry,
    SignalMessage,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)

CALLS: Counter[str] = Counter()
FAIL_ONCE: set[str] = set()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()
    FAIL_ONCE.clear()


@activity()
def tick(label: str) -> str:
    CALLS[label] += 1
    if label in FAIL_ONCE:
        FAIL_ONCE.discard(label)
        raise RuntimeError(f"{label} failed")
    return label


@workflow(name="tr-wait")
def tr_wait(ctx, data):
    first = yield ctx.run(tick, "first")
    yield ctx.sleep(timedelta(minutes=1))
    got = yield ctx.wait_for_signal("go")
    return [first, got]


@workflow(name="tr-parent")
def tr_parent(ctx, data):
    return (yield ctx.start_child("tr-wait", None))


@workflow(name="tr-steps")
def tr_steps(ctx, data):
    a = yield ctx.run(tick, "step-1")
    b = yield ctx.run(tick, "step-2")
    c = yield ctx.run(tick, "step-3")
    return [a, b, c]


@workflow(name="tr-quick")
def tr_quick(ctx, data):
    return {"echo": data}


@workflow(name="tr-other")
def tr_other(ctx, data):
    return "other"


ACQ_REL_TWICE = [("acquire", 1), ("release", 1), ("acquire", 2), ("release", 2)]


def _rotations(workflow_id: str) -> list[tuple[str, int]]:
    return [e for e in claim_events(workflow_id) if e[0] == "rotate"]


# -- cancel ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_rotates_the_epoch_and_runs_no_workflow_code(weft_env):
    h = client.start("tr-wait", None, workflow_id="tr-cancel")
    weft_env.run_until_idle()
    assert claim_events("tr-cancel") == [("acquire", 1)]
    journal_before = JournalEntry.objects.filter(run_id=h.run_id).count()

    run = client.cancel("tr-cancel", reason="customer asked")
    assert run.status == "cancelled"
    assert claim_events("tr-cancel") == [("acquire", 1), ("rotate", 2)]
    claim = WorkflowClaim.objects.get(pk="tr-cancel")
    assert (claim.epoch, claim.engine_id) == (2, None)
    assert (claim.expires_at, claim.claimed_at) == (None, None)
    assert not Timer.objects.filter(run_id=h.run_id).exists()
    assert h.error()["message"] == "customer asked"

    weft_env.advance(timedelta(minutes=5))
    weft_env.run_until_idle()
    assert h.status() == "cancelled"
    assert JournalEntry.objects.filter(run_id=h.run_id).count() == journal_before
    assert CALLS["first"] == 1
    with pytest.raises(WorkflowFailedError) as info:
        h.result(timeout=1)
    assert info.value.status == "cancelled"
    with pytest.raises(InvalidTransitionError):
        client.cancel("tr-cancel")


@pytest.mark.django_db(transaction=True)
def test_cancel_cascades_to_a_live_child(weft_env):
    h = client.start("tr-parent", None, workflow_id="tr-par")
    weft_env.run_until_idle()
    assert latest("tr-par:0").status == "parked"
    assert claim_events("tr-par:0") == [("acquire", 1)]
    client.cancel("tr-par")
    assert h.status() == "cancelled"
    child = latest("tr-par:0")
    assert child.status == "cancelled"
    assert "tr-par" in child.error["message"]
    assert _rotations("tr-par") == [("rotate", 2)]
    assert _rotations("tr-par:0") == [("rotate", 2)]
    weft_env.advance(timedelta(minutes=5))
    weft_env.run_until_idle()
    assert latest("tr-par:0").status == "cancelled"


# -- suspend / resume ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_suspend_rotates_and_resume_reacquires_at_the_next_epoch(weft_env):
    h = client.start("tr-wait", None, workflow_id="tr-susp")
    weft_env.run_until_idle()
    client.suspend("tr-susp", reason="investigating")
    run = latest("tr-susp")
    assert run.status == "suspended"
    assert run.suspended_reason == "investigating"
    assert claim_events("tr-susp") == [("acquire", 1), ("rotate", 2)]

    # Suspended: a signal is buffered, time passes, nothing runs.
    client.signal("tr-susp", "go", "while suspended")
    weft_env.advance(timedelta(minutes=5))
    weft_env.run_until_idle()
    assert h.status() == "suspended"

    resumed = client.resume("tr-susp")
    assert resumed.status == "pending"
    weft_env.run_until_idle()
    assert claim_events("tr-susp") == [("acquire", 1), ("rotate", 2), ("acquire", 3)]
    # The sleep timer was dropped at suspend; the resumed run sleeps again, then
    # takes the buffered signal.
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == ["first", "while suspended"]
    assert CALLS["first"] == 1
    assert claim_events("tr-susp")[-1] == ("release", 3)


@pytest.mark.django_db(transaction=True)
def test_resume_of_a_pending_or_parked_run_is_refused(weft_env):
    client.start("tr-wait", None, workflow_id="tr-res")
    with pytest.raises(InvalidTransitionError) as info:
        client.resume("tr-res")
    assert (info.value.workflow_id, info.value.status, info.value.action) == (
        "tr-res",
        "pending",
        "resume",
    )
    weft_env.run_until_idle()
    with pytest.raises(InvalidTransitionError) as info:
        client.resume("tr-res")
    assert info.value.status == "parked"


# -- timeout -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_execution_timeout_on_the_fake_clock(weft_env):
    h = client.start("tr-wait", None, workflow_id="tr-to", execution_timeout=timedelta(minutes=10))
    weft_env.run_until_idle()
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    assert h.status() == "parked"  # waiting for "go"
    weft_env.advance(timedelta(minutes=8, seconds=59))
    weft_env.run_until_idle()
    assert h.status() == "parked"
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert h.status() == "timed_out"
    assert h.error()["type"] == "WorkflowTimeoutError"
    assert claim_events("tr-to") == [("acquire", 1), ("rotate", 2)]
    assert not Timer.objects.filter(run_id=h.run_id).exists()
    with pytest.raises(WorkflowFailedError) as info:
        h.result(timeout=1)
    assert info.value.status == "timed_out"


@pytest.mark.django_db(transaction=True)
def test_execution_timeout_of_a_suspended_run(weft_env):
    h = client.start("tr-wait", None, workflow_id="tr-to2", execution_timeout=60)
    weft_env.run_until_idle()
    client.suspend("tr-to2")
    weft_env.advance(timedelta(seconds=61))
    weft_env.run_until_idle()
    assert h.status() == "timed_out"
    assert claim_events("tr-to2") == [("acquire", 1), ("rotate", 2), ("rotate", 3)]


# -- purge -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_purge_deletes_terminal_runs_rotates_and_keeps_the_claim(weft_env):
    h = client.start("tr-quick", 1, workflow_id="tr-purge")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"echo": 1}
    client.start("tr-quick", 2, workflow_id="tr-purge", on_conflict="start-new")
    weft_env.run_until_idle()
    assert claim_events("tr-purge") == ACQ_REL_TWICE

    assert client.purge("tr-purge") == 2
    assert not WorkflowRun.objects.filter(workflow_id="tr-purge").exists()
    assert not JournalEntry.objects.exists()
    assert claim_events("tr-purge")[-1] == ("rotate", 3)
    assert claim_epoch("tr-purge") == 3  # the claim row stays: the epoch is never reset

    # A new run of the purged id continues the sequence.
    client.start("tr-quick", 3, workflow_id="tr-purge")
    weft_env.run_until_idle()
    assert claim_events("tr-purge")[-2:] == [("acquire", 4), ("release", 4)]


@pytest.mark.django_db(transaction=True)
def test_purge_of_a_live_run_is_refused(weft_env):
    client.start("tr-wait", None, workflow_id="tr-purge-live")
    weft_env.run_until_idle()
    events = ClaimEvent.objects.count()
    with pytest.raises(InvalidTransitionError) as info:
        client.purge("tr-purge-live")
    assert (info.value.status, info.value.action) == ("parked", "purge")
    assert ClaimEvent.objects.count() == events
    assert latest("tr-purge-live").status == "parked"


@pytest.mark.django_db(transaction=True)
def test_purge_older_than(weft_env):
    client.start("tr-quick", 1, workflow_id="tr-old")
    weft_env.run_until_idle()
    client.start("tr-wait", None, workflow_id="tr-live")
    weft_env.run_until_idle()
    assert client.purge(older_than=timedelta(days=1)) == 0
    WorkflowRun.objects.filter(workflow_id="tr-old").update(
        finished_at=datetime.now(tz=UTC) - timedelta(days=2)
    )
    assert client.purge(older_than=timedelta(days=1)) == 1
    assert not WorkflowRun.objects.filter(workflow_id="tr-old").exists()
    assert latest("tr-live").status == "parked"


# -- retry -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_retry_keeps_recorded_steps_and_reruns_the_failed_one(weft_env):
    FAIL_ONCE.add("step-2")
    h = client.start("tr-steps", None, workflow_id="tr-retry")
    weft_env.run_until_idle()
    assert h.status() == "failed"
    assert h.error()["type"] == "ActivityError"
    assert (CALLS["step-1"], CALLS["step-2"], CALLS["step-3"]) == (1, 1, 0)
    assert claim_events("tr-retry") == [("acquire", 1), ("release", 1)]

    retried = client.retry("tr-retry")
    assert retried.status == "pending"
    assert str(retried.pk) == h.run_id  # the same run: its journal is kept
    assert retried.error is None
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == ["step-1", "step-2", "step-3"]
    assert (CALLS["step-1"], CALLS["step-2"], CALLS["step-3"]) == (1, 2, 1)
    assert claim_events("tr-retry") == ACQ_REL_TWICE
    assert [t for _, t in journal(h.run_id)] == [
        "tests.e2e.test_transitions.tick",
    ] * 3


@pytest.mark.django_db(transaction=True)
def test_retry_of_a_timed_out_run(weft_env):
    h = client.start("tr-wait", None, workflow_id="tr-retry-to", execution_timeout=30)
    weft_env.run_until_idle()
    weft_env.advance(31)
    weft_env.run_until_idle()
    assert h.status() == "timed_out"
    client.retry("tr-retry-to")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    client.signal("tr-retry-to", "go", "again")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == ["first", "again"]
    assert CALLS["first"] == 1


# -- start -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_idempotent_start_returns_the_same_run(weft_env):
    h1 = client.start("tr-quick", {"n": 1}, workflow_id="tr-idem", idempotency_key="key-1")
    h2 = client.start("tr-quick", {"n": 2}, workflow_id="tr-idem", idempotency_key="key-1")
    assert h1 == h2
    weft_env.run_until_idle()
    assert h1.result(timeout=1) == {"echo": {"n": 1}}
    # Even after completion, and even with another (or no) explicit workflow id.
    h3 = client.start("tr-quick", {"n": 3}, idempotency_key="key-1")
    assert (h3.workflow_id, h3.run_id) == ("tr-idem", h1.run_id)
    assert WorkflowRun.objects.count() == 1
    with pytest.raises(IdempotencyConflictError) as info:
        client.start("tr-other", None, idempotency_key="key-1")
    assert (info.value.idempotency_key, info.value.existing_name, info.value.requested_name) == (
        "key-1",
        "tr-quick",
        "tr-other",
    )
    assert WorkflowRun.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_start_new_after_a_terminal_run_continues_the_epoch(weft_env):
    h1 = client.start("tr-quick", 1, workflow_id="tr-again")
    weft_env.run_until_idle()
    assert h1.status() == "completed"
    with pytest.raises(InvalidTransitionError):
        client.start("tr-quick", 2, workflow_id="tr-again")
    h2 = client.start("tr-quick", 2, workflow_id="tr-again", on_conflict="start-new")
    assert h2.run_id != h1.run_id
    weft_env.run_until_idle()
    assert h2.result(timeout=1) == {"echo": 2}
    assert h1.result(timeout=1) == {"echo": 1}  # the old run stays readable by run id
    assert claim_events("tr-again") == ACQ_REL_TWICE
    assert client.get_handle("tr-again").run_id == h2.run_id


@pytest.mark.django_db(transaction=True)
def test_start_new_while_live_is_refused(weft_env):
    client.start("tr-wait", None, workflow_id="tr-live2")
    with pytest.raises(WorkflowAlreadyRunning):
        client.start("tr-wait", None, workflow_id="tr-live2", on_conflict="start-new")
    assert WorkflowRun.objects.filter(workflow_id="tr-live2").count() == 1


@pytest.mark.django_db(transaction=True)
def test_start_after_delays_pickup_until_the_clock_passes_it(weft_env):
    h = client.start("tr-quick", "late", workflow_id="tr-after", start_after=timedelta(minutes=5))
    weft_env.run_until_idle()
    assert h.status() == "pending"
    weft_env.advance(timedelta(minutes=4, seconds=59))
    weft_env.run_until_idle()
    assert h.status() == "pending"
    assert claim_events("tr-after") == []
    weft_env.advance(timedelta(seconds=1))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"echo": "late"}


@pytest.mark.django_db(transaction=True)
def test_start_at_delays_pickup_until_the_clock_passes_it(weft_env):
    at = datetime.fromtimestamp((weft_env.clock.now + 3_600_000) / 1000, tz=UTC)
    h = client.start("tr-quick", "at", workflow_id="tr-at", start_at=at)
    weft_env.advance(timedelta(minutes=59))
    weft_env.run_until_idle()
    assert h.status() == "pending"
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    assert h.result(timeout=1) == {"echo": "at"}


@pytest.mark.django_db(transaction=True)
def test_cancel_of_a_delayed_start(weft_env):
    h = client.start("tr-quick", "x", workflow_id="tr-after-cancel", start_after=60)
    client.cancel("tr-after-cancel")
    weft_env.advance(120)
    weft_env.run_until_idle()
    assert h.status() == "cancelled"
    assert SignalMessage.objects.count() == 0
    assert claim_events("tr-after-cancel") == [("rotate", 1)]


# -- transitions that land while a turn is running --------------------------------------------


@activity()
def stop_myself(workflow_id: str, how: str) -> str:
    CALLS[f"stop:{how}"] += 1
    getattr(client, how)(workflow_id)
    return "finished anyway"


@workflow(name="tr-self-stop")
def tr_self_stop(ctx, data):
    result = yield ctx.run(stop_myself, ctx.workflow_id, data)
    yield ctx.run(tick, f"after-{data}")
    return result


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("how", "status"), [("cancel", "cancelled"), ("suspend", "suspended")])
def test_a_rotation_during_a_turn_fences_out_the_running_owner(weft_env, how, status):
    wid = f"tr-self-{how}"
    h = client.start("tr-self-stop", how, workflow_id=wid)
    weft_env.run_until_idle()
    assert h.status() == status
    assert CALLS[f"stop:{how}"] == 1
    # The in-flight result was discarded: nothing was journaled, nothing ran after it.
    assert JournalEntry.objects.filter(run_id=h.run_id).count() == 0
    assert CALLS[f"after-{how}"] == 0
    assert claim_events(wid) == [("acquire", 1), ("rotate", 2)]
    claim = WorkflowClaim.objects.get(pk=wid)
    assert (claim.epoch, claim.engine_id) == (2, None)
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    assert h.status() == status


@pytest.mark.django_db(transaction=True)
def test_a_child_that_ends_while_its_parent_is_suspended(weft_env):
    h = client.start("tr-parent", None, workflow_id="tr-par-susp")
    weft_env.run_until_idle()
    client.suspend("tr-par-susp")
    weft_env.advance(timedelta(minutes=1))
    weft_env.run_until_idle()
    client.signal("tr-par-susp:0", "go", "child done")
    weft_env.run_until_idle()
    assert latest("tr-par-susp:0").status == "completed"
    assert h.status() == "suspended"
    client.resume("tr-par-susp")
    weft_env.run_until_idle()
    assert h.result(timeout=1) == ["first", "child done"]


@pytest.mark.django_db(transaction=True)
def test_execution_timeout_cascades_to_children(weft_env):
    h = client.start("tr-parent", None, workflow_id="tr-par-to", execution_timeout=300)
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=300))
    weft_env.run_until_idle()
    assert h.status() == "timed_out"
    assert latest("tr-par-to:0").status == "cancelled"
    assert _rotations("tr-par-to:0") == [("rotate", 2)]


@workflow(name="two-ticks")
def two_ticks(ctx, data):
    first = yield ctx.run(tick, "first")
    second = yield ctx.run(tick, "second")
    return [first, second]


@pytest.mark.django_db(transaction=True)
def test_an_engine_that_knows_its_claim_is_lost_runs_no_further_step(weft_env, monkeypatch):
    """Renewal found the claim taken over between two steps: the next step is not
    run (its result could never be recorded), and nothing more is written."""
    from weft_django.engine.turn import Turn

    registry = weft_env.engine.registry
    real_commit = Turn.commit

    def commit_then_lose(self, *args, **kwargs):
        result = real_commit(self, *args, **kwargs)
        # After the first step's commit: another engine took the claim over and
        # this engine's renewal noticed (it forgets the claim).
        WorkflowClaim.objects.filter(pk="lost-between-steps").update(
            epoch=2, engine_id="engine-b", expires_at=10**13, claimed_at=10**12
        )
        registry.forget("lost-between-steps")
        return result

    monkeypatch.setattr(Turn, "commit", commit_then_lose)
    client.start("two-ticks", None, workflow_id="lost-between-steps")
    with pytest.warns(Warning, match="lost-between-steps"):
        weft_env.run_until_idle()
    assert (CALLS["first"], CALLS["second"]) == (1, 0)  # "second" never ran
    run = latest("lost-between-steps")
    assert run.status == "running"
    assert [kind for kind, _ in journal(run)] == ["activity"]  # the first step only


@pytest.mark.django_db(transaction=True)
def test_a_stale_reclaim_of_a_finished_workflow_does_not_keep_its_claim(weft_env):
    """The reclaim scan read a run as running with a stale claim; by the time it
    acts, another engine finished the run and released the claim. The acquire
    that follows must not leave a claim held for a workflow with no live run."""
    client.start("two-ticks", None, workflow_id="finished-meanwhile")
    weft_env.run_until_idle()
    assert latest("finished-meanwhile").status == "completed"
    released_at = claim_epoch("finished-meanwhile")
    assert not weft_env.engine.maintenance.reclaim_one("finished-meanwhile")
    claim = WorkflowClaim.objects.get(pk="finished-meanwhile")
    assert claim.engine_id is None  # not held
    assert weft_env.engine.registry.tracked() == []
    assert claim_events("finished-meanwhile")[-2:] == [
        ("acquire", released_at + 1),
        ("release", released_at + 1),
    ]
