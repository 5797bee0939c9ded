"""The conditional batch and fenced writes (SPEC §4.2).

Invariants protected:
- check conditions, then write, atomically: a batch whose condition fails --
  checked before any write, or discovered by a write's unique constraint
  after earlier writes -- applies nothing and names the very condition object
  that failed; claim rows are ensured before they are locked; a lost
  ``UniqueAbsence`` inside a caller's ``transaction.atomic`` leaves that
  transaction usable; transient lock errors are retried only when the batch
  owns its transaction;
- a fenced write commits only under the configured mode's fence (this
  engine's claim epoch, the global lease epoch, or the run's version); when
  the *fence* fails the engine was deposed (``EngineDeposedError``, a warning,
  the claim forgotten), when any other condition fails it is an ordinary
  ``BatchResult(committed=False)``.
"""

from __future__ import annotations

import warnings

import pytest
from django.db import IntegrityError, OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.support import ManualClock, StaticHost
from weft_django import db as store
from weft_django.errors import EngineDeposedError
from weft_django.models import (
    ClaimEvent,
    GlobalLease,
    OwnershipModeMarker,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership import batch as batch_module
from weft_django.ownership.batch import conditional_batch, is_retryable
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.fold import prepare_claim_fold
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.ownership.ops import (
    ABSENT_HOLDER,
    BulkInsert,
    Call,
    ClaimCondition,
    Delete,
    Insert,
    LeaseCondition,
    PutClaim,
    RunCondition,
    UniqueAbsence,
    Update,
)
from weft_django.ownership.transitions import ClaimSnapshot, build_rotation
from weft_django.warnings import WeftLeaseLostWarning, WeftWorkflowClaimLostWarning

pytestmark = pytest.mark.usefixtures("batch_db")


def _claim(workflow_id: str, epoch: int = 0, holder=ABSENT_HOLDER) -> WorkflowClaim:
    engine_id, expires_at, claimed_at = holder
    return WorkflowClaim.objects.create(
        workflow_id=workflow_id,
        epoch=epoch,
        engine_id=engine_id,
        expires_at=expires_at,
        claimed_at=claimed_at,
    )


def _columns(workflow_id: str) -> tuple:
    row = WorkflowClaim.objects.get(pk=workflow_id)
    return (row.epoch, row.engine_id, row.expires_at, row.claimed_at)


def test_no_conditions_applies_every_write() -> None:
    run = WorkflowRun.objects.create(workflow_id="wf", name="n")
    result = conditional_batch(
        [],
        [
            Update(WorkflowRun, {"pk": run.pk}, {"status": "running"}),
            Insert(ClaimEvent(workflow_id="wf", epoch=1, kind="acquire", at_ms=1)),
        ],
    )
    assert (result.committed, result.failed_condition, result.attempts) == (True, None, 1)
    assert WorkflowRun.objects.get(pk=run.pk).status == "running"
    assert ClaimEvent.objects.count() == 1


def test_claim_rows_are_ensured_so_a_never_seen_id_can_be_conditioned() -> None:
    cond = ClaimCondition("new", 0, ABSENT_HOLDER)
    result = conditional_batch([cond], [PutClaim("new", 1, ("e", 10, 5))])
    assert result.committed
    assert _columns("new") == (1, "e", 10, 5)


def test_failing_condition_applies_nothing_and_is_named_by_identity() -> None:
    _claim("a", 1, ("engine-a", 100, 50))
    run = WorkflowRun.objects.create(workflow_id="a", name="n", status="running")
    holds = ClaimCondition("a", 1, ("engine-a", 100, 50))
    fails = RunCondition(run.id, statuses=frozenset({"parked"}), label="run")
    also_fails = ClaimCondition("a", 9, ABSENT_HOLDER, "any")
    result = conditional_batch(
        [holds, fails, also_fails],
        [
            PutClaim("a", 2, ABSENT_HOLDER),
            Update(WorkflowRun, {"pk": run.pk}, {"status": "completed"}),
            Insert(ClaimEvent(workflow_id="a", epoch=2, kind="rotate", at_ms=1)),
        ],
    )
    assert not result.committed
    assert result.failed_condition is fails  # the first failing one, by identity
    assert _columns("a") == (1, "engine-a", 100, 50)
    assert WorkflowRun.objects.get(pk=run.pk).status == "running"
    assert ClaimEvent.objects.count() == 0


def test_a_conflict_discovered_after_earlier_writes_rolls_them_back() -> None:
    _claim("a", 3, ("engine-a", 100, 50))
    WorkflowRun.objects.create(workflow_id="dup", name="n", status="running")
    absence = UniqueAbsence("one-live-run")
    result = conditional_batch(
        [ClaimCondition("a", 3, ("engine-a", 100, 50)), absence],
        [
            PutClaim("a", 4, ("engine-b", 1, 1)),
            Insert(ClaimEvent(workflow_id="a", epoch=4, kind="takeover", at_ms=1)),
            Insert(WorkflowRun(workflow_id="dup", name="n", status="pending"), absence),
            Update(WorkflowClaim, {"pk": "a"}, {"epoch": 99}),
        ],
    )
    assert not result.committed
    assert result.failed_condition is absence
    assert _columns("a") == (3, "engine-a", 100, 50)
    assert ClaimEvent.objects.count() == 0
    assert WorkflowRun.objects.filter(workflow_id="dup").count() == 1


def test_unique_absence_lost_inside_an_outer_atomic_leaves_it_usable() -> None:
    WorkflowRun.objects.create(workflow_id="wf", name="n", idempotency_key="k1")
    absence = UniqueAbsence("idempotency-key")
    with transaction.atomic():
        WorkflowRun.objects.create(workflow_id="before", name="n")
        result = conditional_batch(
            [absence],
            [Insert(WorkflowRun(workflow_id="x", name="n", idempotency_key="k1"), absence)],
        )
        assert not result.committed
        assert result.failed_condition is absence
        # The outer transaction is still usable after the lost race.
        WorkflowRun.objects.create(workflow_id="after", name="n")
        assert WorkflowRun.objects.filter(workflow_id__in=["before", "after"]).count() == 2
    assert set(WorkflowRun.objects.values_list("workflow_id", flat=True)) == {
        "wf",
        "before",
        "after",
    }


def test_nested_batch_commits_with_the_outer_transaction_only() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        result = conditional_batch([], [PutClaim("wf", 1, ("e", 1, 1))])
        assert result.committed
        raise RuntimeError("outer rolls back")
    assert not WorkflowClaim.objects.filter(pk="wf").exists()


def test_marker_absence_is_enforced_by_its_primary_key() -> None:
    absence = UniqueAbsence("marker")
    first = conditional_batch(
        [absence], [Insert(OwnershipModeMarker(mode="lease", established_at=1), absence)]
    )
    second = conditional_batch(
        [absence], [Insert(OwnershipModeMarker(mode="workflow-lease", established_at=2), absence)]
    )
    assert first.committed
    assert (second.committed, second.failed_condition) == (False, absence)
    assert OwnershipModeMarker.objects.get().mode == "lease"


def test_insert_without_absence_propagates_integrity_error_and_applies_nothing() -> None:
    WorkflowRun.objects.create(workflow_id="wf", name="n", idempotency_key="k")
    with pytest.raises(IntegrityError):
        conditional_batch(
            [],
            [
                PutClaim("wf", 1, ("e", 1, 1)),
                Insert(WorkflowRun(workflow_id="other", name="n", idempotency_key="k")),
            ],
        )
    assert not WorkflowClaim.objects.filter(pk="wf", epoch=1).exists()


# -- claim condition semantics against stored rows ---------------------------------


@pytest.mark.parametrize(
    ("match", "holder", "expected"),
    [
        ("exact", ("engine-a", 100, 50), True),
        ("exact", ("engine-a", 101, 50), False),
        ("exact", ABSENT_HOLDER, False),
        ("owner", ("engine-a", None, None), True),
        ("owner", ("engine-b", None, None), False),
        ("any", ABSENT_HOLDER, True),
    ],
)
def test_claim_condition_modes_against_a_held_row(match, holder, expected: bool) -> None:
    _claim("wf", 2, ("engine-a", 100, 50))
    cond = ClaimCondition("wf", 2, holder, match)
    result = conditional_batch([cond], [Update(WorkflowClaim, {"pk": "wf"}, {"epoch": 3})])
    assert result.committed is expected
    assert _columns("wf")[0] == (3 if expected else 2)
    if not expected:
        assert result.failed_condition is cond


@pytest.mark.parametrize("match", ["exact", "owner", "any"])
def test_every_claim_condition_mode_compares_the_epoch(match: str) -> None:
    _claim("wf", 2, ("engine-a", 100, 50))
    cond = ClaimCondition("wf", 1, ("engine-a", 100, 50), match)
    assert not conditional_batch([cond], [PutClaim("wf", 5, ABSENT_HOLDER)]).committed
    assert _columns("wf") == (2, "engine-a", 100, 50)


def test_owner_condition_fails_on_a_half_null_holder() -> None:
    _claim("wf", 2, ("engine-a", None, 50))
    cond = ClaimCondition("wf", 2, ("engine-a", None, None), "owner")
    assert not conditional_batch([cond], []).committed


def test_exact_absent_condition_fails_on_a_half_null_holder() -> None:
    _claim("wf", 2, ("engine-a", None, None))
    assert not conditional_batch([ClaimCondition("wf", 2, ABSENT_HOLDER)], []).committed


def test_two_workflows_in_one_batch_are_both_checked() -> None:
    _claim("parent", 1, ("engine-a", 100, 50))
    _claim("child", 0)
    parent_fence = ClaimCondition("parent", 1, ("engine-a", None, None), "owner")
    child_absent = ClaimCondition("child", 0, ABSENT_HOLDER)
    ok = conditional_batch(
        [child_absent, parent_fence], [PutClaim("child", 1, ("engine-a", 100, 50))]
    )
    assert ok.committed
    stale_child = ClaimCondition("child", 0, ABSENT_HOLDER)
    lost = conditional_batch([parent_fence, stale_child], [PutClaim("parent", 9, ABSENT_HOLDER)])
    assert lost.failed_condition is stale_child
    assert _columns("parent") == (1, "engine-a", 100, 50)


# -- run and lease conditions -------------------------------------------------------


def test_run_condition_on_a_missing_run_fails() -> None:
    cond = RunCondition("00000000-0000-0000-0000-000000000000")
    result = conditional_batch([cond], [PutClaim("wf", 1, ("e", 1, 1))])
    assert result.failed_condition is cond
    assert not WorkflowClaim.objects.filter(epoch=1).exists()


def test_run_condition_version_fence() -> None:
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", version=4)
    bump = Update(WorkflowRun, {"pk": run.pk}, {"version": 5})
    assert conditional_batch([RunCondition(run.id, version=4)], [bump]).committed
    stale = RunCondition(run.id, version=4)
    assert conditional_batch([stale], [bump]).failed_condition is stale


def test_lease_condition_ensures_the_singleton() -> None:
    assert not GlobalLease.objects.exists()
    cond = LeaseCondition(0, None)
    write = Update(GlobalLease, {"pk": "lease"}, {"epoch": 1, "holder_id": "a", "expires_at": 9})
    assert conditional_batch([cond], [write]).committed
    lease = GlobalLease.objects.get()
    assert (lease.epoch, lease.holder_id) == (1, "a")
    again = conditional_batch([cond], [write])
    assert again.failed_condition is cond


def test_other_writes() -> None:
    run = WorkflowRun.objects.create(workflow_id="wf", name="n")
    seen = []
    result = conditional_batch(
        [],
        [
            BulkInsert(
                [ClaimEvent(workflow_id="wf", epoch=i, kind="acquire", at_ms=i) for i in (1, 2)]
            ),
            BulkInsert([]),
            Delete(WorkflowRun, {"pk": run.pk}),
            Call(lambda using: seen.append((using, connection.in_atomic_block))),
        ],
    )
    assert result.committed
    assert ClaimEvent.objects.count() == 2
    assert not WorkflowRun.objects.exists()
    assert seen == [("default", True)]


def test_unknown_condition_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unknown condition"):
        conditional_batch([object()], [])


# -- retries ------------------------------------------------------------------------


def test_a_locked_database_is_retried_when_the_batch_owns_its_transaction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = batch_module._lock_and_check
    calls = []

    def flaky(*args):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("database is locked")
        return real(*args)

    monkeypatch.setattr(batch_module, "_lock_and_check", flaky)
    # The general path (PostgreSQL would run this shape as one checked statement).
    monkeypatch.setattr(batch_module, "try_checked_statement", lambda *args: None)
    monkeypatch.setattr(batch_module.time, "sleep", lambda s: None)
    result = conditional_batch([], [PutClaim("wf", 1, ("e", 1, 1))])
    assert (result.committed, result.attempts) == (True, 2)
    assert _columns("wf") == (1, "e", 1, 1)


def test_a_deadlocked_checked_statement_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one-statement form of a batch retries like the general path."""
    from weft_django.db.postgresql import writes as write_statements

    if not store.ops("default").supports_coalesced_writes:
        pytest.skip("SQLite runs every batch on the general path (tested above)")
    real = write_statements.execute_checked
    calls = []

    def deadlocked(*args):
        calls.append(1)
        if len(calls) == 1:
            error = OperationalError("deadlock detected")
            error.__cause__ = type("Cause", (Exception,), {"sqlstate": "40P01"})()
            raise error
        return real(*args)

    monkeypatch.setattr(write_statements, "execute_checked", deadlocked)
    monkeypatch.setattr(batch_module.time, "sleep", lambda s: None)
    WorkflowClaim.objects.create(
        workflow_id="wf", epoch=1, engine_id="e", expires_at=1, claimed_at=1
    )
    result = conditional_batch(
        [ClaimCondition("wf", 1, ("e", None, None), "owner")],
        [PutClaim("wf", 2, ("f", 2, 2)), PutClaim("other", 1, ("f", 2, 2))],
    )
    assert (result.committed, result.attempts) == (True, 2)
    assert _columns("wf") == (2, "f", 2, 2)


def test_no_retry_inside_an_outer_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    def locked(*args):
        raise OperationalError("database is locked")

    monkeypatch.setattr(batch_module, "_lock_and_check", locked)
    with pytest.raises(OperationalError), transaction.atomic():
        conditional_batch([], [])


def test_a_non_retryable_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def broken(*args):
        calls.append(1)
        raise OperationalError("disk I/O error")

    monkeypatch.setattr(batch_module, "_lock_and_check", broken)
    with pytest.raises(OperationalError):
        conditional_batch([], [])
    assert calls == [1]


def test_is_retryable_recognises_deadlocks_and_busy_databases() -> None:
    class Cause(Exception):
        def __init__(self, sqlstate: str) -> None:
            self.sqlstate = sqlstate

    for sqlstate in ("40P01", "40001", "55P03"):
        exc = OperationalError("x")
        exc.__cause__ = Cause(sqlstate)
        assert is_retryable(exc)
    other = OperationalError("x")
    other.__cause__ = Cause("23505")
    assert not is_retryable(other)
    assert is_retryable(OperationalError("database is locked"))
    assert is_retryable(OperationalError("database table is locked"))
    assert not is_retryable(OperationalError("no such table"))


# -- fenced writes -------------------------------------------------------------------


def _running(workflow_id: str = "wf", version: int = 0) -> WorkflowRun:
    return WorkflowRun.objects.create(
        workflow_id=workflow_id, name="n", status="running", version=version
    )


def _journal_write(run: WorkflowRun) -> Update:
    return Update(WorkflowRun, {"pk": run.pk}, {"wake_at": 123})


def _rotate(workflow_id: str, clock: ManualClock) -> None:
    row = WorkflowClaim.objects.get(pk=workflow_id)
    snap = ClaimSnapshot(workflow_id, row.epoch, row.engine_id, row.expires_at, row.claimed_at)
    rotation = build_rotation(snap, actor="admin", now=clock.now, reason="cancel")
    assert conditional_batch(rotation.conditions, rotation.writes).committed


def test_fenced_commit_succeeds_for_the_holder_even_after_renewals(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    run = _running()
    host.registry.acquire("wf")
    assert fenced_commit(host, "wf", [], [_journal_write(run)]).committed
    clock.advance(4_000)
    host.registry.renew_all()  # expires_at moved: the fence compares owner and epoch
    result = fenced_commit(
        host, "wf", [RunCondition(run.id, statuses=frozenset({"running"}))], [_journal_write(run)]
    )
    assert result.committed
    assert WorkflowRun.objects.get(pk=run.pk).wake_at == 123


def test_fenced_commit_after_a_rotation_stops_that_workflow_only(clock: ManualClock) -> None:
    """An operator's rotation fails the fence like a takeover, but it is counted
    ``rotated`` -- no ``deposed``, no claim-lost warning (issue #19 part 2)."""
    host = StaticHost("engine-a", clock)
    run, other = _running("wf"), _running("other")
    host.registry.acquire("wf")
    host.registry.acquire("other")
    _rotate("wf", clock)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeftWorkflowClaimLostWarning)
        with pytest.raises(EngineDeposedError) as info:
            fenced_commit(host, "wf", [], [_journal_write(run)])
    assert info.value.workflow_id == "wf"
    assert WorkflowRun.objects.get(pk=run.pk).wake_at is None
    assert host.registry.tracked() == ["other"]
    assert host.metrics.snapshot().attempts["deposed"] == 0
    assert host.metrics.snapshot().attempts["rotated"] == 1
    assert fenced_commit(host, "other", [], [_journal_write(other)]).committed


def test_fenced_commit_after_a_takeover_is_deposed(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    run = _running()
    a.registry.acquire("wf")
    clock.advance(a.settings.claim_ttl_ms + 2 * a.settings.claim_renew_interval_ms + 1)
    b.registry.takeover("wf")
    with pytest.warns(WeftWorkflowClaimLostWarning), pytest.raises(EngineDeposedError):
        fenced_commit(a, "wf", [], [_journal_write(run)])
    assert fenced_commit(b, "wf", [], [_journal_write(run)]).committed


def test_fenced_commit_without_a_tracked_claim_raises_before_any_query(
    clock: ManualClock,
) -> None:
    host = StaticHost("engine-a", clock)
    run = _running()
    with (
        CaptureQueriesContext(connection) as queries,
        pytest.warns(WeftWorkflowClaimLostWarning),
        pytest.raises(EngineDeposedError) as info,
    ):
        fenced_commit(host, "wf", [], [_journal_write(run)])
    assert info.value.workflow_id == "wf"
    assert len(queries) == 0


def test_a_failed_non_fence_condition_is_returned_not_raised(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    run = _running()
    host.registry.acquire("wf")
    parked_only = RunCondition(run.id, statuses=frozenset({"parked"}))
    result = fenced_commit(host, "wf", [parked_only], [_journal_write(run)])
    assert (result.committed, result.failed_condition) == (False, parked_only)
    assert host.registry.tracked() == ["wf"]
    assert WorkflowRun.objects.get(pk=run.pk).wake_at is None


def test_a_fold_commits_with_the_fenced_write_and_is_tracked_after(clock: ManualClock) -> None:
    """A child's start: the parent's fenced write carries the child's acquire."""
    host = StaticHost("engine-a", clock)
    parent = _running("parent")
    host.registry.acquire("parent")
    fold = prepare_claim_fold(host, "child")
    child = Insert(WorkflowRun(workflow_id="child", name="n", status="running", parent=parent))
    result = fenced_commit(host, "parent", [], [_journal_write(parent), child], folds=[fold])
    assert result.committed
    assert sorted(host.registry.tracked()) == ["child", "parent"]
    row = WorkflowClaim.objects.get(pk="child")
    assert (row.epoch, row.engine_id) == (1, "engine-a")


def test_a_lost_fold_is_an_ordinary_lost_race(clock: ManualClock) -> None:
    a, b = StaticHost("engine-a", clock), StaticHost("engine-b", clock)
    parent = _running("parent")
    a.registry.acquire("parent")
    fold = prepare_claim_fold(a, "child")
    b.registry.acquire("child")
    result = fenced_commit(a, "parent", [], [_journal_write(parent)], folds=[fold])
    assert (result.committed, result.failed_condition) == (False, fold.conditions[0])
    assert a.registry.tracked() == ["parent"]
    assert WorkflowRun.objects.get(pk=parent.pk).wake_at is None


def _lease_host(engine_id: str, clock: ManualClock, lost: list) -> StaticHost:
    settings = StaticHost("x", clock, ownership="none").settings
    lease = GlobalLeaseManager(
        holder_id=engine_id,
        clock=clock,
        ttl_ms=settings.lease_ttl_ms,
        renew_interval_ms=settings.lease_renew_interval_ms,
        wait_timeout_ms=settings.lease_wait_timeout_ms,
        on_lost=lost.append,
    )
    return StaticHost(engine_id, clock, ownership="lease", lease=lease)


def test_lease_mode_fence(clock: ManualClock) -> None:
    lost: list[str] = []
    a = _lease_host("engine-a", clock, lost)
    b = _lease_host("engine-b", clock, [])
    run = _running()
    assert a.lease.acquire() == 1
    assert fenced_commit(a, "wf", [], [_journal_write(run)]).committed
    clock.advance(a.lease.ttl_ms + 2 * a.lease.renew_interval_ms + 1)
    assert b.lease.try_acquire()
    with pytest.warns(WeftLeaseLostWarning), pytest.raises(EngineDeposedError) as info:
        fenced_commit(a, "wf", [], [Update(WorkflowRun, {"pk": run.pk}, {"wake_at": 999})])
    assert info.value.workflow_id is None
    assert a.lease.deposed
    assert lost == ["deposed"]
    assert WorkflowRun.objects.get(pk=run.pk).wake_at == 123
    # A deposed lease holder refuses every later write before touching the database.
    with CaptureQueriesContext(connection) as queries, pytest.raises(EngineDeposedError):
        fenced_commit(a, "wf", [], [_journal_write(run)])
    assert len(queries) == 0
    assert fenced_commit(b, "wf", [], [_journal_write(run)]).committed


def test_lease_fence_uses_the_lease_holder_id(clock: ManualClock) -> None:
    host = _lease_host("engine-a", clock, [])
    host.lease.holder_id = "engine-a/lease"
    run = _running()
    host.lease.acquire()
    assert fenced_commit(host, "wf", [], [_journal_write(run)]).committed


def test_lease_mode_without_the_lease_is_deposed(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock, ownership="lease")
    with pytest.raises(EngineDeposedError):
        fenced_commit(host, "wf", [], [])
    host = _lease_host("engine-a", clock, [])  # never acquired
    with pytest.raises(EngineDeposedError):
        fenced_commit(host, "wf", [], [])


def test_none_mode_fences_on_the_run_version(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock, ownership="none")
    run = _running(version=3)
    bump = Update(WorkflowRun, {"pk": run.pk}, {"version": 4, "wake_at": 1})
    assert fenced_commit(host, "wf", [], [bump], run_id=run.id, run_version=3).committed
    stale = Update(WorkflowRun, {"pk": run.pk}, {"version": 4, "wake_at": 2})
    with pytest.raises(EngineDeposedError) as info:
        fenced_commit(host, "wf", [], [stale], run_id=run.id, run_version=3)
    assert info.value.workflow_id == "wf"
    assert WorkflowRun.objects.get(pk=run.pk).wake_at == 1
    assert not WorkflowClaim.objects.exists()


def test_none_mode_without_a_version_is_a_plain_batch(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock, ownership="none")
    run = _running()
    assert fenced_commit(host, "wf", [], [_journal_write(run)]).committed
    assert not WorkflowClaim.objects.exists()
