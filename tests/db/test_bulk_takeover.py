"""Bulk takeover (``engine.bulk_takeover``): a gone engine's claims in one batch.

Invariants protected: every claim of a gone engine whose workflow has a
drivable run is taken in ONE conditional batch, each at stored epoch + 1
with a ``takeover`` event naming the gone holder, and tracked by the
registry only then; a claim row another transaction holds is skipped, not
waited for, and taken by a later pass; a holder that is not gone (a live
engine that renewed, or one merely expired by TTL) is not taken by it, nor
a claim whose run is no longer drivable; the reclaim pass takes them this
way, not one at a time. PostgreSQL only (``SKIP LOCKED``, session presence).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections, transaction

from tests.support import ManualClock, wait_for
from weft_django import client
from weft_django.engine import Engine
from weft_django.engine.maintenance import bulk_takeover as bulk_module
from weft_django.engine.maintenance.bulk_takeover import bulk_takeover_applies, take_over_gone
from weft_django.models import ClaimEvent, EngineRecord, WorkflowClaim, WorkflowRun
from weft_django.ownership import presence

pytestmark = pytest.mark.usefixtures("batch_db")

TTL = 30_000


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED and session presence: the bulk takeover is PostgreSQL's")


@pytest.fixture
def taker(clock: ManualClock) -> Iterator[Engine]:
    engine = Engine("taker", clock=clock, background_tasks="manual").boot()
    yield engine
    engine.dispose(grace=0)


def _gone_engine(engine_id: str, clock: ManualClock) -> None:
    """A record with a presence key whose session has ended (as at a SIGKILL)."""
    p = presence.SessionPresence("default", engine_id)
    now = clock()
    EngineRecord.objects.create(
        engine_id=engine_id, mode="workflow-lease", started_at=now, heartbeat_at=now,
        presence_key=p.open(),
    )  # fmt: skip
    p.close()


def _held(
    prefix: str, n: int, holder: str, clock: ManualClock, status: str = "parked"
) -> list[str]:
    """``n`` workflows with a run in ``status``, their claims held by ``holder``
    at epoch 3, unexpired."""
    now = clock()
    wids = [f"{prefix}-{i}" for i in range(n)]
    for wid in wids:
        WorkflowRun.objects.create(workflow_id=wid, name="signal-wait", status=status)
        WorkflowClaim.objects.create(
            workflow_id=wid, epoch=3, engine_id=holder, expires_at=now + TTL, claimed_at=now
        )
    return wids


def _gone_seen(engine: Engine, engine_id: str) -> frozenset[str]:
    """``engine``'s gone set once it includes ``engine_id`` (a closed session's
    backend drops its lock a moment after the client closed it)."""
    wait_for(f"{engine_id} gone", lambda: engine_id in engine.gone_holders(refresh=True))
    return engine.gone_holders()


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of conditions of every conditional batch the bulk takeover commits."""
    seen: list[int] = []
    real = bulk_module.conditional_batch

    def counting(conditions: Any, writes: Any, **kwargs: Any) -> Any:
        conditions = list(conditions)
        seen.append(len(conditions))
        return real(conditions, writes, **kwargs)

    monkeypatch.setattr(bulk_module, "conditional_batch", counting)
    return seen


def test_a_gone_engines_claims_are_taken_in_one_batch_at_epoch_plus_one(
    clock: ManualClock, taker: Engine, batches: list[int]
) -> None:
    assert bulk_takeover_applies(taker)
    _gone_engine("dead", clock)
    wids = _held("g", 5, "dead", clock)
    gone = _gone_seen(taker, "dead")
    got = take_over_gone(taker, gone, 100)
    assert sorted(w for _, w in got.taken) == wids
    assert batches == [5]  # one batch, one condition per claim
    assert taker.registry is not None
    for wid in wids:
        claim = WorkflowClaim.objects.get(pk=wid)
        assert (claim.epoch, claim.engine_id) == (4, "taker")
        events = list(ClaimEvent.objects.filter(workflow_id=wid))
        assert [(e.kind, e.epoch, e.previous_engine_id) for e in events] == [
            ("takeover", 4, "dead")
        ]
        assert taker.registry.current_epoch(wid) == 4
    runs = WorkflowRun.objects.filter(workflow_id__in=wids).values_list("pk", flat=True)
    run_ids = {str(r) for r in runs}
    assert {r for r, _ in got.taken} == run_ids
    assert taker.metrics.snapshot().attempts["takeover"] == 5
    # Renewed from now on like any held claim.
    clock.advance(1_000)
    outcomes = taker.registry.renew_all()
    assert sorted(o.workflow_id for o in outcomes if o.status == "renewed") == wids


def test_a_claim_row_locked_by_another_transaction_is_skipped_not_waited_for(
    clock: ManualClock, taker: Engine
) -> None:
    _gone_engine("dead", clock)
    locked, free = _held("lk", 2, "dead", clock)
    gone = _gone_seen(taker, "dead")
    holding = threading.Event()
    release = threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                WorkflowClaim.objects.select_for_update().get(pk=locked)
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    other = threading.Thread(target=hold_the_row)
    other.start()
    try:
        assert holding.wait(10)
        got = take_over_gone(taker, gone, 100)  # returns while the row is still locked
        assert [w for _, w in got.taken] == [free]
        assert WorkflowClaim.objects.get(pk=locked).engine_id == "dead"
    finally:
        release.set()
        other.join(10)
    # Unlocked: the next pass takes it.
    again = take_over_gone(taker, gone, 100)
    assert [w for _, w in again.taken] == [locked]
    assert WorkflowClaim.objects.get(pk=locked).engine_id == "taker"


def test_holders_that_are_not_gone_and_runs_not_drivable_are_not_taken(
    clock: ManualClock, taker: Engine
) -> None:
    _gone_engine("dead", clock)
    alive = presence.SessionPresence("default", "alive")
    EngineRecord.objects.create(
        engine_id="alive", mode="workflow-lease", started_at=clock(), heartbeat_at=clock(),
        presence_key=alive.open(),
    )  # fmt: skip
    try:
        (mine,) = _held("d", 1, "dead", clock)
        (renewed,) = _held("a", 1, "alive", clock)
        (done,) = _held("c", 1, "dead", clock, status="completed")
        # Expired by TTL but not gone: the one-at-a-time reclaim's, not the bulk's.
        (expired,) = _held("x", 1, "quiet", clock)
        WorkflowClaim.objects.filter(pk=expired).update(expires_at=0)
        gone = _gone_seen(taker, "dead")
        assert gone == frozenset({"dead"})
        got = take_over_gone(taker, gone, 100)
        assert [w for _, w in got.taken] == [mine]
        for wid, holder in ((renewed, "alive"), (done, "dead"), (expired, "quiet")):
            claim = WorkflowClaim.objects.get(pk=wid)
            assert (claim.engine_id, claim.epoch) == (holder, 3)
            assert not ClaimEvent.objects.filter(workflow_id=wid).exists()
        assert taker.registry is not None
        assert sorted(taker.registry.tracked()) == [mine]
    finally:
        alive.close()


def test_a_batch_takes_no_more_than_its_limit_in_workflow_id_order(
    clock: ManualClock, taker: Engine
) -> None:
    _gone_engine("dead", clock)
    wids = _held("lim", 5, "dead", clock)
    gone = _gone_seen(taker, "dead")
    got = take_over_gone(taker, gone, 2)
    assert [w for _, w in got.taken] == wids[:2]
    assert WorkflowClaim.objects.filter(engine_id="dead").count() == 3


def test_the_reclaim_pass_takes_a_gone_engines_claims_in_one_batch(
    clock: ManualClock, batches: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = Engine("dead-r", clock=clock, background_tasks="manual").boot()
    handles = [
        client.start("signal-wait", {"id": f"r{i}"}, workflow_id=f"bulk-reclaim-{i}")
        for i in range(4)
    ]
    dead.run_until_idle()
    assert all(WorkflowRun.objects.get(pk=h.run_id).status == "parked" for h in handles)
    taker = Engine("taker-r", clock=clock, background_tasks="manual").boot()
    one_at_a_time: list[str] = []
    monkeypatch.setattr(
        taker, "dispatch_reclaim", lambda run_id, wid: one_at_a_time.append(wid) or False
    )
    try:
        assert dead.presence is not None
        dead.presence.close()  # no release, no stop: as at a SIGKILL
        clock.advance(1)  # far below CLAIM_TTL
        wait_for("the dead engine gone", lambda: taker.gone_holders(refresh=True))
        taker.run_until_idle()
        assert batches == [4]
        assert one_at_a_time == []
        for i, handle in enumerate(handles):
            claim = WorkflowClaim.objects.get(pk=f"bulk-reclaim-{i}")
            assert (claim.engine_id, claim.epoch) == ("taker-r", 2)
            # Its turn ran under the new claim: still waiting for its signal.
            assert WorkflowRun.objects.get(pk=handle.run_id).status == "parked"
        client.signal("bulk-reclaim-0", "go", {"ok": True})
        taker.run_until_idle()
        assert WorkflowRun.objects.get(pk=handles[0].run_id).status == "completed"
    finally:
        taker.dispose(grace=0)


def test_a_batchs_claim_writes_are_one_update_fenced_on_the_epoch_read(
    clock: ManualClock, taker: Engine
) -> None:
    from django.test.utils import CaptureQueriesContext

    _gone_engine("dead-one", clock)
    wids = _held("u", 6, "dead-one", clock)
    gone = _gone_seen(taker, "dead-one")
    table = WorkflowClaim._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        got = take_over_gone(taker, gone, 100)
    assert sorted(w for _, w in got.taken) == wids
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert len(updates) == 1 and table in updates[0], updates
    assert {c.epoch for c in WorkflowClaim.objects.filter(pk__in=wids)} == {4}


def test_a_claim_write_at_another_epoch_fails_the_whole_batch(
    clock: ManualClock, taker: Engine
) -> None:
    """The statement's own fence: a put whose epoch read is not the row's
    matches nothing, and the batch writes no claim at all."""
    from weft_django.ownership.batch import conditional_batch
    from weft_django.ownership.ops import ClaimCondition, PutClaim

    wids = _held("f", 3, "dead-two", clock)
    puts = tuple(
        (PutClaim(wid, 4, ("taker", clock() + TTL, clock())), 2 if wid == wids[1] else 3)
        for wid in wids
    )
    label = ClaimCondition(wids[1], 3, label="claim")
    result = conditional_batch([], [bulk_module.TakeoverClaims(puts, label)])
    assert not result.committed and result.failed_condition == label
    assert {c.epoch for c in WorkflowClaim.objects.filter(pk__in=wids)} == {3}
