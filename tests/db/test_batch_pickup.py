"""Batch pickup (``engine.pickup``): many pending runs claimed in one batch.

Invariants protected: a picked run is ``running`` only with its claim held
by the picking engine, committed together (one ``acquire`` event each); a
pending run another transaction has locked is skipped, not waited for, and
stays pending; a run whose claim a stale holder still carries is not folded
but taken over by the one-at-a-time pickup (its own workflow only); a batch
claims no more runs than the scheduler has room for. PostgreSQL only
(``SKIP LOCKED``); on SQLite the one-at-a-time path is the only one.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.support import ManualClock
from weft_django.engine import Engine
from weft_django.engine.maintenance.pickup import batch_applies, pick_up_batch
from weft_django.models import ClaimEvent, WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.usefixtures("batch_db")


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SKIP LOCKED: the batch pickup is PostgreSQL's")


def _pending(n: int, prefix: str = "bp") -> list[WorkflowRun]:
    return [
        WorkflowRun.objects.create(
            workflow_id=f"{prefix}-{i}", name="three-steps", status="pending"
        )
        for i in range(n)
    ]


def test_a_batch_claims_every_pending_run_with_its_claim(clock: ManualClock) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    try:
        assert batch_applies(engine)
        runs = _pending(3)
        got = pick_up_batch(engine, 10)
        assert sorted(r.workflow_id for r in got.picked) == [r.workflow_id for r in runs]
        assert not got.single
        for run in runs:
            run.refresh_from_db()
            assert run.status == "running"
            claim = WorkflowClaim.objects.get(pk=run.workflow_id)
            assert (claim.engine_id, claim.epoch) == ("engine-a", 1)
            assert engine.registry is not None
            assert engine.registry.current_epoch(run.workflow_id) == 1
            kinds = list(
                ClaimEvent.objects.filter(workflow_id=run.workflow_id).values_list(
                    "kind", flat=True
                )
            )
            assert kinds == ["acquire"]
    finally:
        engine.dispose(grace=0)


def test_a_locked_pending_run_is_skipped_not_waited_for(clock: ManualClock) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    locked, free = _pending(2, "lk")
    holding = threading.Event()
    release = threading.Event()

    def hold_the_row() -> None:
        try:
            with transaction.atomic():
                WorkflowRun.objects.select_for_update().get(pk=locked.pk)
                holding.set()
                release.wait(30)
        finally:
            connections.close_all()

    other = threading.Thread(target=hold_the_row)
    other.start()
    try:
        assert holding.wait(10)
        got = pick_up_batch(engine, 10)  # returns while the row is still locked
        assert [r.workflow_id for r in got.picked] == [free.workflow_id]
        assert WorkflowRun.objects.get(pk=locked.pk).status == "pending"
        assert not WorkflowClaim.objects.filter(pk=locked.workflow_id, engine_id__isnull=False)
    finally:
        release.set()
        other.join(10)
        engine.dispose(grace=0)


def test_a_stale_holder_goes_to_the_one_at_a_time_pickup(clock: ManualClock) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    try:
        stale, fresh = _pending(2, "st")
        # An earlier run of ``stale``'s workflow id left its claim behind, expired.
        WorkflowClaim.objects.create(
            workflow_id=stale.workflow_id, epoch=4, engine_id="gone", expires_at=0, claimed_at=0
        )
        clock.advance(60_000)
        got = pick_up_batch(engine, 10)
        assert [r.workflow_id for r in got.picked] == [fresh.workflow_id]
        assert [r.workflow_id for r in got.single] == [stale.workflow_id]
        assert WorkflowRun.objects.get(pk=stale.pk).status == "pending"
        # The maintenance pass hands it to ``pick_up``, which takes the holder over.
        assert engine.maintenance.pick_up(stale)
        claim = WorkflowClaim.objects.get(pk=stale.workflow_id)
        assert (claim.engine_id, claim.epoch) == ("engine-a", 5)
    finally:
        engine.dispose(grace=0)


def test_claims_are_tracked_only_once_the_batch_is_durable(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renewal pass on another connection right when a claim is tracked must
    find it committed. Tracked inside the batch's still-open transaction, the
    pass cannot see the acquire, reads the claim as lost and the engine forgets
    a claim it durably holds (then takes it over from itself once it expired,
    running the in-flight activity again: the chaos soak, issue #21)."""
    engine = Engine("engine-a", clock=clock).boot()
    registry = engine.registry
    assert registry is not None
    track = registry.record_folded_acquire
    outcomes: list[str] = []

    def renew_elsewhere() -> None:
        try:
            outcomes.extend(o.status for o in registry.renew_all())
        finally:
            connections.close_all()

    def track_then_renew(fold: object) -> None:
        track(fold)  # type: ignore[arg-type]
        renewal = threading.Thread(target=renew_elsewhere)
        renewal.start()
        renewal.join(30)

    monkeypatch.setattr(registry, "record_folded_acquire", track_then_renew)
    try:
        runs = _pending(2, "tr")
        got = pick_up_batch(engine, 10)
        assert len(got.picked) == 2
        assert outcomes and "lost" not in outcomes, outcomes
        for run in runs:
            assert registry.current_epoch(run.workflow_id) == 1
    finally:
        engine.dispose(grace=0)


def test_a_batch_takes_no_more_than_its_limit(clock: ManualClock) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    try:
        _pending(5, "lim")
        got = pick_up_batch(engine, 2)
        assert len(got.picked) == 2 and got.seen == 2
        assert WorkflowRun.objects.filter(status="pending").count() == 3
        # The oldest first.
        assert [r.workflow_id for r in got.picked] == ["lim-0", "lim-1"]
    finally:
        engine.dispose(grace=0)


def test_a_picked_run_is_handed_on_as_stored_and_fresh_only_if_never_started(
    clock: ManualClock,
) -> None:
    """``engine.handoff``: the first turn starts from the pickup's snapshot, so
    it must equal the stored row; ``fresh`` (no journal, no timers read) only
    for a run no pickup ever started."""
    engine = Engine("engine-a", clock=clock).boot()
    try:
        new = _pending(1, "ho-new")[0]
        again = _pending(1, "ho-again")[0]
        WorkflowRun.objects.filter(pk=again.pk).update(started_at=timezone.now())
        got = pick_up_batch(engine, 10)
        handoffs = {h.run.workflow_id: h for h in got.handoffs()}
        assert {wid: h.fresh for wid, h in handoffs.items()} == {
            new.workflow_id: True,
            again.workflow_id: False,
        }
        for handoff in handoffs.values():
            stored = WorkflowRun.objects.get(pk=handoff.run.pk)
            fields = ("status", "version", "wake_seq", "turn_started_at", "turn_pid")
            assert [getattr(handoff.run, f) for f in fields] == [getattr(stored, f) for f in fields]
            assert handoff.run.started_at == stored.started_at
    finally:
        engine.dispose()


def test_a_fresh_handoff_drives_the_run_to_its_end_without_reading_it(
    clock: ManualClock,
) -> None:
    engine = Engine("engine-a", clock=clock).boot()
    try:
        run = _pending(1, "ho-drive")[0]
        WorkflowRun.objects.filter(pk=run.pk).update(input={"id": "x"})
        run.refresh_from_db()
        got = pick_up_batch(engine, 10)
        (handoff,) = got.handoffs()
        assert handoff.fresh
        with CaptureQueriesContext(connection) as queries:
            engine.scheduler.dispatch_handoff(handoff)
            engine.scheduler.drain()
        run.refresh_from_db()
        assert run.status == "completed"
        assert run.result == ["reserved:x", {"order": "x", "charged": 1}, "shipped:x"]
        reads = [
            q["sql"]
            for q in queries.captured_queries
            if q["sql"].startswith("SELECT")
            and ('FROM "weft_journalentry"' in q["sql"] or 'FROM "weft_timer"' in q["sql"])
        ]
        assert reads == []
    finally:
        engine.dispose()


def test_a_handoff_for_a_run_in_flight_is_dropped(clock: ManualClock) -> None:
    """Only the dispatch that puts the run in flight carries a snapshot: a
    second one (whose snapshot may be older than that turn's commits) is not
    queued at all."""
    engine = Engine("engine-a", clock=clock).boot()
    try:
        _pending(1, "ho-twice")
        (handoff,) = pick_up_batch(engine, 10).handoffs()
        engine.dispatch(handoff.run.pk, None)
        engine.scheduler.dispatch_handoff(handoff)
        assert engine.scheduler.drain() == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("queues", [{}, {"mail": {"concurrency": 1}}], ids=["no-queues", "queues"])
def test_the_prebuilt_read_selects_what_pending_due_selects(
    clock: ManualClock, queues: dict[str, object]
) -> None:
    """The batch pickup's prebuilt statement is the twin of ``pending_due``:
    same runs (due, not delayed, not of a declared queue, pending only), same
    order (oldest first), same limit."""
    from django.test import override_settings

    from weft_django import db as store
    from weft_django.engine.maintenance.pickup import pending_due

    now = clock.now
    rows = [
        ("due-old", "pending", None, None),
        ("delayed", "pending", now + 60_000, None),
        ("due-start", "pending", now - 1, None),
        ("queued", "pending", None, "mail"),
        ("other-queue", "pending", None, "other"),
        ("running", "running", None, None),
        ("due-new", "pending", None, None),
    ]
    for workflow_id, status, start_at, queue in rows:
        WorkflowRun.objects.create(
            workflow_id=workflow_id, name="n", status=status, start_at=start_at, queue=queue
        )
    with override_settings(WEFT={"QUEUES": queues} if queues else {}):
        engine = Engine("engine-a", clock=clock)
        try:
            for limit in (2, 10):
                ops, queues = store.ops("default"), list(engine.settings.queues or ())
                with transaction.atomic():
                    orm = list(pending_due(engine)[:limit])
                    claims = ops.lock_pending_claims_skip_locked(
                        "default", engine.now_ms(), queues, limit
                    )
                    raw = ops.pending_runs_skip_locked("default", engine.now_ms(), queues, limit)
                    only = ops.pending_runs_skip_locked(
                        "default", engine.now_ms(), queues, limit, workflow_ids=list(claims)
                    )
                assert [r.pk for r in raw] == [r.pk for r in orm]
                # Step 1 locks the claims of exactly those runs; step 2 their runs.
                assert set(claims) == {r.workflow_id for r in orm}
                assert [r.pk for r in only] == [r.pk for r in orm]
                assert all(r.input is None and r.status == "pending" for r in raw)
        finally:
            engine.dispose(grace=0)
    expected = {"due-old", "due-start", "other-queue", "due-new"} | (
        set() if queues else {"queued"}
    )
    assert {r.workflow_id for r in raw} == expected
