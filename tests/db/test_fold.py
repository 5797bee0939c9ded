"""The claim fold (SPEC §4.6): acquire in the same commit as the enabling write.

Invariants protected: folding applies only under ``workflow-lease`` with a
registry and no claim already tracked for the id; the acquire and the
caller's own writes commit together or not at all; the registry tracks the
claim only after that commit; a lost race says whether the *claim* lost
(another engine acquired meanwhile) or the caller's own condition did; and
``raise_claim_unavailable`` names the current holder.
"""

from __future__ import annotations

import pytest

from tests.support import ManualClock, StaticHost
from weft_django.errors import WorkflowClaimUnavailableError
from weft_django.models import ClaimEvent, WorkflowClaim, WorkflowRun
from weft_django.ownership.fold import (
    ClaimFold,
    commit_enabling_write,
    commit_with_claim_fold,
    prepare_claim_fold,
    raise_claim_unavailable,
)
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.ops import Insert, RunCondition, UniqueAbsence, Update

pytestmark = pytest.mark.usefixtures("batch_db")


def _pending_run(workflow_id: str = "wf") -> WorkflowRun:
    return WorkflowRun.objects.create(workflow_id=workflow_id, name="n", status="pending")


def _pickup(run: WorkflowRun) -> tuple[list, list]:
    """A pending pickup's own condition and write."""
    return (
        [RunCondition(run.id, statuses=frozenset({"pending"}))],
        [Update(WorkflowRun, {"pk": run.pk}, {"status": "running"})],
    )


def _holder(workflow_id: str) -> tuple:
    row = WorkflowClaim.objects.get(pk=workflow_id)
    return (row.epoch, row.engine_id)


# -- prepare ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["none", "lease"])
def test_prepare_returns_none_outside_workflow_lease(clock: ManualClock, mode: str) -> None:
    host = StaticHost("engine-a", clock, ownership=mode)
    assert prepare_claim_fold(host, "wf") is None


def test_prepare_returns_none_without_a_registry(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry = None
    assert prepare_claim_fold(host, "wf") is None


def test_prepare_returns_none_when_the_id_is_already_tracked(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("wf")
    assert prepare_claim_fold(host, "wf") is None


def test_prepare_reads_fresh_and_writes_nothing(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    WorkflowClaim.objects.create(workflow_id="wf", epoch=6)
    fold = prepare_claim_fold(host, "wf")
    assert isinstance(fold, ClaimFold)
    assert fold.epoch == 7
    assert fold.conditions[0].epoch == 6
    assert host.registry.tracked() == []
    assert _holder("wf") == (6, None)
    assert not ClaimEvent.objects.exists()


# -- commit -------------------------------------------------------------------------


def test_commit_applies_both_and_tracks_only_after_commit(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = StaticHost("engine-a", clock)
    run = _pending_run()
    fold = prepare_claim_fold(host, "wf")
    conditions, writes = _pickup(run)
    tracked_during_commit = []
    real_record = host.registry.record_folded_acquire

    def record(preparation):
        # Called only after the batch committed: the row is already durable.
        tracked_during_commit.append(_holder("wf"))
        real_record(preparation)

    monkeypatch.setattr(host.registry, "record_folded_acquire", record)
    result = commit_with_claim_fold(host, fold, conditions, writes)
    assert (result.status, result.claim_conflict) == ("committed", False)
    assert result.batch is not None and result.batch.committed
    assert tracked_during_commit == [(1, "engine-a")]
    assert host.registry.current_epoch("wf") == 1
    assert WorkflowRun.objects.get(pk=run.pk).status == "running"
    assert host.metrics.snapshot().attempts["acquired"] == 1
    assert list(ClaimEvent.objects.values_list("kind", "epoch")) == [("acquire", 1)]
    # The folded claim is renewable like any other.
    assert [o.status for o in host.registry.renew_all()] == ["renewed"]


def test_commit_of_several_folds_is_one_batch(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    parent, child = _pending_run("parent"), _pending_run("child")
    folds = [prepare_claim_fold(host, "parent"), prepare_claim_fold(host, "child")]
    conditions, writes = _pickup(parent)
    more_conditions, more_writes = _pickup(child)
    result = commit_with_claim_fold(host, folds, conditions + more_conditions, writes + more_writes)
    assert result.status == "committed"
    assert sorted(host.registry.tracked()) == ["child", "parent"]


def test_commit_without_folds_is_the_callers_batch(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock, ownership="none")
    run = _pending_run()
    conditions, writes = _pickup(run)
    result = commit_with_claim_fold(host, None, conditions, writes)
    assert result.status == "committed"
    assert not WorkflowClaim.objects.exists()


def test_claim_conflict_when_another_engine_acquired_in_between(clock: ManualClock) -> None:
    a = StaticHost("engine-a", clock)
    b = StaticHost("engine-b", clock)
    run = _pending_run()
    fold = prepare_claim_fold(a, "wf")
    assert b.registry.acquire("wf").status == "acquired"
    conditions, writes = _pickup(run)
    result = commit_with_claim_fold(a, fold, conditions, writes)
    assert (result.status, result.claim_conflict) == ("lost-race", True)
    assert result.batch.failed_condition is fold.conditions[0]
    assert a.registry.tracked() == []
    assert WorkflowRun.objects.get(pk=run.pk).status == "pending"  # nothing applied
    assert _holder("wf") == (1, "engine-b")
    assert a.metrics.snapshot().attempts["lost_race"] == 1
    with pytest.raises(WorkflowClaimUnavailableError) as info:
        raise_claim_unavailable(a, "wf")
    assert (info.value.workflow_id, info.value.held_by) == ("wf", "engine-b")


def test_claim_conflict_when_the_epoch_moved_without_a_holder(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    run = _pending_run()
    fold = prepare_claim_fold(a, "wf")
    b.registry.acquire("wf")
    b.registry.release("wf")  # holder absent again, but at epoch 1
    result = commit_with_claim_fold(a, fold, *_pickup(run))
    assert (result.status, result.claim_conflict) == ("lost-race", True)
    assert _holder("wf") == (1, None)


def test_callers_own_run_condition_failing_is_not_a_claim_conflict(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    run = _pending_run()
    fold = prepare_claim_fold(host, "wf")
    WorkflowRun.objects.filter(pk=run.pk).update(status="cancelled")
    conditions, writes = _pickup(run)
    result = commit_with_claim_fold(host, fold, conditions, writes)
    assert (result.status, result.claim_conflict) == ("lost-race", False)
    assert result.batch.failed_condition is conditions[0]
    assert host.registry.tracked() == []
    assert not WorkflowClaim.objects.filter(pk="wf", epoch__gt=0).exists()
    assert host.metrics.snapshot().attempts["lost_race"] == 0


def test_callers_unique_absence_failing_is_not_a_claim_conflict(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")  # a live run
    fold = prepare_claim_fold(host, "wf")
    absence = UniqueAbsence("one-live-run")
    result = commit_with_claim_fold(
        host,
        fold,
        [absence],
        [Insert(WorkflowRun(workflow_id="wf", name="n", status="pending"), absence)],
    )
    assert (result.status, result.claim_conflict) == ("lost-race", False)
    assert result.batch.failed_condition is absence
    assert host.registry.tracked() == []
    assert WorkflowRun.objects.filter(workflow_id="wf").count() == 1
    assert not ClaimEvent.objects.exists()


def test_a_fresh_preparation_after_a_lost_race_succeeds(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    run = _pending_run()
    stale = prepare_claim_fold(a, "wf")
    b.registry.acquire("wf")
    b.registry.release("wf")
    assert commit_with_claim_fold(a, stale, *_pickup(run)).claim_conflict
    fresh = prepare_claim_fold(a, "wf")
    assert fresh.epoch == 2
    assert commit_with_claim_fold(a, fresh, *_pickup(run)).status == "committed"
    assert a.registry.current_epoch("wf") == 2


# -- raise_claim_unavailable ---------------------------------------------------------


def test_raise_claim_unavailable_with_an_undecodable_or_absent_holder(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    WorkflowClaim.objects.create(
        workflow_id="bad", epoch=1, engine_id="", expires_at=1, claimed_at=1
    )
    with pytest.raises(WorkflowClaimUnavailableError) as info:
        raise_claim_unavailable(host, "bad")
    assert info.value.held_by is None
    with pytest.raises(WorkflowClaimUnavailableError) as info:
        raise_claim_unavailable(host, "never-seen")
    assert (info.value.workflow_id, info.value.held_by) == ("never-seen", None)


# -- commit_enabling_write -------------------------------------------------------------


def test_enabling_write_folds_the_acquire_when_the_claim_is_not_held(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    run = _pending_run()
    result = commit_enabling_write(host, "wf", *_pickup(run))
    assert result.committed and not result.claim_conflict
    assert host.registry.current_epoch("wf") == 1
    assert WorkflowRun.objects.get(pk=run.pk).status == "running"


def test_enabling_write_of_a_held_claim_is_fenced(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    run = _pending_run()
    host.registry.acquire("wf")
    assert commit_enabling_write(host, "wf", *_pickup(run)).committed
    assert list(ClaimEvent.objects.values_list("kind", flat=True)) == ["acquire"]


@pytest.mark.parametrize("mode", ["none", "lease"])
def test_enabling_write_outside_workflow_lease_is_one_fenced_commit(
    clock: ManualClock, mode: str
) -> None:
    host = StaticHost("engine-a", clock, ownership=mode)
    if mode == "lease":
        host.lease = GlobalLeaseManager(
            holder_id="engine-a",
            clock=clock,
            ttl_ms=30_000,
            renew_interval_ms=5_000,
            wait_timeout_ms=0,
        )
        host.lease.acquire()
    run = _pending_run()
    assert commit_enabling_write(host, "wf", *_pickup(run)).committed
    assert not commit_enabling_write(host, "wf", *_pickup(run)).committed  # no longer pending
    assert not WorkflowClaim.objects.exists()


def test_enabling_write_takes_over_a_stale_holder_once(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    run = _pending_run()
    b.registry.acquire("wf")  # engine-b crashed holding it
    live = commit_enabling_write(a, "wf", *_pickup(run))
    assert (live.committed, live.claim_conflict) == (False, True)  # not expired yet
    clock.advance(a.settings.claim_ttl_ms + 3 * a.settings.claim_renew_interval_ms)
    result = commit_enabling_write(a, "wf", *_pickup(run))
    assert result.committed
    assert _holder("wf") == (2, "engine-a")
    assert WorkflowRun.objects.get(pk=run.pk).status == "running"
