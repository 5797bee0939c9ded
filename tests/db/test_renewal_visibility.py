"""A renewal never reports lost a claim whose acquire it cannot see yet.

Invariant protected: a batch pickup (or a queue admission) folds its acquires
into its own transaction and the registry tracks them once the batch
statement ran, before that transaction commits. A renewal pass on another
connection in that window reads the claim row at the epoch before (or no row
at all, for a new workflow id). Reporting that as a loss deposed the engine
from a workflow it had just taken: its activity was abandoned and, after the
claim's expiry, ran again on another engine (an unexplained duplicate of the
chaos soak, seed 21). The claim must stay tracked (``pending``) and be renewed
by the next pass once the transaction committed.

PostgreSQL only: SQLite serializes writers, so no renewal statement runs
while a pickup's transaction is open.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from tests.support import ManualClock, StaticHost
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.fold import commit_with_claim_fold
from weft_django.ownership.results import RenewOutcome
from weft_django.ownership.transitions import ClaimSnapshot

pytestmark = pytest.mark.usefixtures("batch_db")


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes writers: no renewal runs inside a pickup's transaction")


def _renew_on_another_connection(host: StaticHost) -> list[RenewOutcome]:
    """``renew_all`` from a thread: its own connection, as the engine's renewal."""
    out: list[RenewOutcome] = []

    def renew() -> None:
        try:
            assert host.registry is not None
            out.extend(host.registry.renew_all())
        finally:
            connections.close_all()

    thread = threading.Thread(target=renew)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return out


def _fold_inside_open_transaction(host: StaticHost, workflow_id: str) -> WorkflowRun:
    """What ``pick_up_batch`` does: the fold committed by a nested batch."""
    run = WorkflowRun.objects.create(workflow_id=workflow_id, name="n", status="pending")
    assert host.registry is not None
    fold = host.registry.prepare_acquire(workflow_id, ClaimSnapshot(workflow_id))
    result = commit_with_claim_fold(host, [fold], [], [], savepoint=False)
    assert result.status == "committed"
    return run


@pytest.mark.parametrize("row_exists", [False, True], ids=["new-id", "existing-row"])
def test_an_uncommitted_acquire_is_pending_not_lost(clock: ManualClock, row_exists: bool) -> None:
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    if row_exists:
        WorkflowClaim.objects.create(workflow_id="wf", epoch=0)
    with transaction.atomic():
        _fold_inside_open_transaction(host, "wf")
        assert host.registry.current_epoch("wf") == 1  # tracked before the commit
        outcomes = _renew_on_another_connection(host)
        assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "pending")]
        assert host.registry.current_epoch("wf") == 1
        assert host.metrics.snapshot().renewal_failures == 0
    # Committed: the next pass renews it.
    clock.advance(500)
    outcomes = _renew_on_another_connection(host)
    assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "renewed")]
    row = WorkflowClaim.objects.get(pk="wf")
    assert (row.epoch, row.engine_id, row.expires_at) == (
        1,
        "engine-a",
        clock() + host.settings.claim_ttl_ms,
    )


def test_an_acquire_unseen_past_its_expiry_is_lost(clock: ManualClock) -> None:
    """Kept only while unexpired: committed after its expiry, the claim may be
    taken over at once, so the pass does not keep it."""
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    with transaction.atomic():
        _fold_inside_open_transaction(host, "wf")
        clock.advance(host.settings.claim_ttl_ms)
        outcomes = _renew_on_another_connection(host)
        assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "lost")]
        assert host.registry.current_epoch("wf") is None
        assert host.metrics.snapshot().renewal_failures == 1


def test_a_claim_another_engine_holds_is_still_lost(clock: ManualClock) -> None:
    """The row at a newer epoch than tracked is a real loss, as before."""
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    assert host.registry.acquire("wf").status == "acquired"
    WorkflowClaim.objects.filter(pk="wf").update(epoch=2, engine_id="engine-b")
    outcomes = _renew_on_another_connection(host)
    assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "lost")]
    assert host.registry.current_epoch("wf") is None


def test_an_acquire_committed_right_after_the_pass_statement_is_pending(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass's UPDATE ran on the snapshot before the commit; by its check
    the row carries this very generation: kept, renewed by the next pass."""
    from weft_django import db as store

    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    assert host.registry.acquire("wf").status == "acquired"
    ops = store.ops("default")
    real = ops.renew_exact_holders
    calls: list[int] = []

    def missed_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return set() if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(ops, "renew_exact_holders", missed_once)
    outcomes = _renew_on_another_connection(host)
    assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "pending")]
    clock.advance(500)
    outcomes = _renew_on_another_connection(host)
    assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "renewed")]
    assert host.metrics.snapshot().renewal_failures == 0
