"""``ClaimRegistry`` against a real database (SPEC §4.4, §4.9).

Invariants protected:
- a lost race is a result (``lost-race``, ``not-expired``, ``no-claim``,
  ``backoff-skipped``, ``not-held``), never an exception; only a database
  error raises, and it leaves the in-memory claims as they were;
- expiry carries the grace of 2 renew intervals and is strict at its
  boundary; takeover mints the stored epoch + 1 and never rewinds it;
- a renewal that finds its exact holder changed reports ``lost``, warns,
  starts the cooldown and counts a renewal failure and a ``deposed`` attempt;
- a release waits for an in-flight renewal and then deletes only the holder;
- the epoch of an id is never reset (release, rotation, deleted runs);
- renewing any number of claims costs the same, constant number of queries.
"""

from __future__ import annotations

import threading
import warnings

import pytest
from django.db import DatabaseError, connection, connections
from django.test.utils import CaptureQueriesContext

from tests.support import ManualClock, StaticHost
from weft_django import db as store
from weft_django.models import ClaimEvent, WorkflowClaim, WorkflowRun
from weft_django.ownership import registry as registry_module
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import RunCondition, Update
from weft_django.ownership.registry import ClaimRegistry, takeover_with_retries
from weft_django.ownership.transitions import build_rotation
from weft_django.warnings import WeftWorkflowClaimLostWarning

pytestmark = pytest.mark.usefixtures("batch_db")

TTL = 30_000
RENEW = 5_000
GRACE = 2 * RENEW


def _registry(engine_id: str, clock: ManualClock, **kwargs) -> ClaimRegistry:
    return ClaimRegistry(
        engine_id=engine_id,
        clock=clock,
        claim_ttl_ms=TTL,
        claim_renew_interval_ms=RENEW,
        **kwargs,
    )


def _row(workflow_id: str) -> WorkflowClaim:
    return WorkflowClaim.objects.get(pk=workflow_id)


def _holder_columns(workflow_id: str) -> tuple:
    row = _row(workflow_id)
    return (row.engine_id, row.expires_at, row.claimed_at)


def _events(workflow_id: str) -> list[tuple[str, int, str]]:
    return list(
        ClaimEvent.objects.filter(workflow_id=workflow_id)
        .order_by("id")
        .values_list("kind", "epoch", "engine_id")
    )


def _attempts(reg: ClaimRegistry) -> dict[str, int]:
    return dict(reg.metrics.snapshot().attempts)


def _expire(clock: ManualClock, holder_expires_at: int) -> None:
    """Move the clock to the first instant the holder counts as expired."""
    clock.now = holder_expires_at + GRACE + 1


# -- acquire --------------------------------------------------------------------


def test_cold_acquire_takes_epoch_one_and_tracks_it(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    result = reg.acquire("wf")
    assert (result.status, result.epoch) == ("acquired", 1)
    row = _row("wf")
    assert (row.epoch, row.engine_id, row.expires_at, row.claimed_at) == (
        1,
        "engine-a",
        clock.now + TTL,
        clock.now,
    )
    assert reg.tracked() == ["wf"]
    assert reg.current_epoch("wf") == 1
    assert _events("wf") == [("acquire", 1, "engine-a")]
    assert _attempts(reg)["acquired"] == 1
    assert reg.metrics.snapshot().active_claims == 1


def test_acquire_of_a_held_id_is_a_lost_race_naming_the_holder(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    result = b.acquire("wf")
    assert (result.status, result.held_by, result.epoch) == ("lost-race", "engine-a", None)
    assert b.tracked() == []
    assert b.current_epoch("wf") is None
    assert _attempts(b)["lost_race"] == 1
    assert _row("wf").engine_id == "engine-a"


def test_acquire_of_an_undecodable_holder_is_a_lost_race_held_by_none(clock: ManualClock) -> None:
    WorkflowClaim.objects.create(
        workflow_id="wf", epoch=2, engine_id="", expires_at=1, claimed_at=1
    )
    result = _registry("engine-a", clock).acquire("wf")
    assert (result.status, result.held_by) == ("lost-race", None)


def test_acquire_that_loses_the_cas_re_reads_the_winner(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    stale = a.read("wf")  # absent, epoch 0
    b.acquire("wf")
    real_read = a.read
    calls = iter([stale])
    monkeypatch.setattr(a, "read", lambda wid: next(calls, None) or real_read(wid))
    result = a.acquire("wf")
    assert (result.status, result.held_by) == ("lost-race", "engine-b")
    assert a.tracked() == []
    assert _row("wf").engine_id == "engine-b"
    assert _row("wf").epoch == 1


# -- takeover -------------------------------------------------------------------


def test_takeover_of_a_never_claimed_or_released_id_is_no_claim(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    assert b.takeover("never").status == "no-claim"
    a.acquire("wf")
    a.release("wf")
    assert b.takeover("wf").status == "no-claim"
    assert _row("wf").epoch == 1


def test_takeover_respects_grace_at_the_exact_boundary(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    expires_at = _row("wf").expires_at
    clock.now = expires_at + GRACE  # equal: still live
    result = b.takeover("wf")
    assert (result.status, result.held_by, result.expires_at) == (
        "not-expired",
        "engine-a",
        expires_at,
    )
    assert _row("wf").engine_id == "engine-a"
    clock.now = expires_at + GRACE + 1  # one ms later: expired
    result = b.takeover("wf")
    assert (result.status, result.epoch) == ("acquired", 2)
    row = _row("wf")
    assert (row.epoch, row.engine_id, row.claimed_at, row.expires_at) == (
        2,
        "engine-b",
        clock.now,
        clock.now + TTL,
    )
    assert b.current_epoch("wf") == 2
    assert _attempts(b)["takeover"] == 1
    event = ClaimEvent.objects.filter(workflow_id="wf", kind="takeover").get()
    assert (event.epoch, event.engine_id, event.previous_engine_id) == (2, "engine-b", "engine-a")
    assert event.previous_expires_at == expires_at
    # Safety from records alone: the new claim began after the old one + grace.
    assert row.claimed_at > event.previous_expires_at + GRACE


def test_takeover_after_renewal_uses_the_renewed_expiry(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    first_expiry = _row("wf").expires_at
    clock.advance(RENEW)
    assert [o.status for o in a.renew_all()] == ["renewed"]
    clock.now = first_expiry + GRACE + 1
    assert b.takeover("wf").status == "not-expired"


@pytest.mark.parametrize(
    ("epoch", "engine_id", "expires_at", "claimed_at", "minted"),
    [
        (4, "", 10, 10, 5),  # empty engine id
        (4, "engine-a", -5, 10, 5),  # negative expiry
        (4, "engine-a", None, None, 5),  # half-null
        (4, None, 99_999_999, 10, 5),  # half-null, engine missing
        (0, "engine-a", 99_999_999, 10, 1),  # holder at "never claimed" epoch
        (-7, "engine-a", 99_999_999, 10, 1),  # negative epoch
    ],
)
def test_takeover_of_an_undecodable_holder_is_immediate(
    clock: ManualClock, epoch, engine_id, expires_at, claimed_at, minted
) -> None:
    WorkflowClaim.objects.create(
        workflow_id="wf",
        epoch=epoch,
        engine_id=engine_id,
        expires_at=expires_at,
        claimed_at=claimed_at,
    )
    b = _registry("engine-b", clock)
    assert b.read("wf").holder is None
    result = b.takeover("wf")  # no clock movement: garbage is not live
    assert (result.status, result.epoch) == ("acquired", minted)
    row = _row("wf")
    assert (row.epoch, row.engine_id, row.expires_at, row.claimed_at) == (
        minted,
        "engine-b",
        clock.now + TTL,
        clock.now,
    )


def test_takeover_that_loses_the_cas_re_reads_the_winner(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = (_registry(e, clock) for e in ("engine-a", "engine-b", "engine-c"))
    a.acquire("wf")
    _expire(clock, _row("wf").expires_at)
    stale = b.read("wf")
    assert c.takeover("wf").status == "acquired"
    real_read = b.read
    calls = iter([stale])
    monkeypatch.setattr(b, "read", lambda wid: next(calls, None) or real_read(wid))
    result = b.takeover("wf")
    assert (result.status, result.held_by) == ("lost-race", "engine-c")
    assert b.tracked() == []
    assert _row("wf").epoch == 2
    assert _attempts(b)["lost_race"] == 1


def test_takeover_with_retries_stops_after_five_lost_races(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c = (_registry(e, clock) for e in ("engine-a", "engine-b", "engine-c"))
    a.acquire("wf")
    _expire(clock, _row("wf").expires_at)
    stale = b.read("wf")
    c.takeover("wf")
    monkeypatch.setattr(b, "read", lambda wid: stale)  # always the stale view
    batches = []
    real_batch = registry_module.conditional_batch

    def counting_batch(*args, **kwargs):
        batches.append(1)
        return real_batch(*args, **kwargs)

    monkeypatch.setattr(registry_module, "conditional_batch", counting_batch)
    result = takeover_with_retries(b, "wf")
    assert result.status == "lost-race"
    assert len(batches) == 5
    assert _attempts(b)["lost_race"] == 5
    assert _row("wf").engine_id == "engine-c"


def test_takeover_with_retries_returns_the_first_decisive_result(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    assert takeover_with_retries(b, "wf").status == "not-expired"
    _expire(clock, _row("wf").expires_at)
    assert takeover_with_retries(b, "wf").status == "acquired"


# -- renew ----------------------------------------------------------------------


def test_renew_refreshes_expiry_only_and_writes_no_event(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    claimed_at = clock.now
    clock.advance(4_000)
    outcomes = reg.renew_all()
    assert [(o.workflow_id, o.status) for o in outcomes] == [("wf", "renewed")]
    row = _row("wf")
    assert (row.epoch, row.engine_id, row.claimed_at, row.expires_at) == (
        1,
        "engine-a",
        claimed_at,
        clock.now + TTL,
    )
    assert reg.holder("wf").expires_at == clock.now + TTL
    assert _events("wf") == [("acquire", 1, "engine-a")]
    # A second renewal conditions on the columns the first one wrote.
    clock.advance(4_000)
    assert [o.status for o in reg.renew_all()] == ["renewed"]
    assert _row("wf").expires_at == clock.now + TTL


def test_renew_with_nothing_held_does_nothing(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    with CaptureQueriesContext(connection) as queries:
        assert reg.renew_all() == []
    assert len(queries) == 0


def test_renew_after_a_takeover_reports_lost_warns_and_starts_cooldown(
    clock: ManualClock,
) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    a.acquire("kept")
    _expire(clock, _row("wf").expires_at)
    b.takeover("wf")
    with pytest.warns(WeftWorkflowClaimLostWarning) as record:
        outcomes = a.renew_all()
    assert sorted((o.workflow_id, o.status) for o in outcomes) == [
        ("kept", "renewed"),
        ("wf", "lost"),
    ]
    assert [w.message.workflow_id for w in record] == ["wf"]
    assert a.tracked() == ["kept"]
    assert a.current_epoch("wf") is None
    assert a.cooldown.is_active("wf", clock.now)
    snap = a.metrics.snapshot()
    assert snap.attempts["deposed"] == 1
    assert snap.renewal_failures == 1
    assert snap.active_claims == 1
    # The row is b's, untouched by a's failed renewal.
    assert (_row("wf").engine_id, _row("wf").epoch) == ("engine-b", 2)
    # The loss is reported once: the next pass no longer renews it.
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        assert [o.workflow_id for o in a.renew_all()] == ["kept"]
    assert later == []


def test_renew_of_a_hand_modified_row_is_lost(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    WorkflowClaim.objects.filter(pk="wf").update(expires_at=_row("wf").expires_at + 1)
    with pytest.warns(WeftWorkflowClaimLostWarning):
        assert [o.status for o in reg.renew_all()] == ["lost"]
    assert reg.tracked() == []
    assert reg.metrics.snapshot().renewal_failures == 1


def test_database_error_during_renewal_propagates_and_keeps_the_claims(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    before = reg.holder("wf")

    def broken(*args, **kwargs):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(store.ops(reg.using), "renew_exact_holders", broken)
    clock.advance(1_000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(DatabaseError, match="connection lost"):
            reg.renew_all()
    assert caught == []
    assert reg.tracked() == ["wf"]
    assert reg.holder("wf") is before
    assert not reg.cooldown.is_active("wf", clock.now)
    snap = reg.metrics.snapshot()
    assert snap.renewal_failures == 0
    assert snap.attempts["deposed"] == 0
    monkeypatch.undo()
    assert [o.status for o in reg.renew_all()] == ["renewed"]


# -- cooldown through the registry ------------------------------------------------


def _lose(a: ClaimRegistry, b: ClaimRegistry, clock: ManualClock, workflow_id: str) -> None:
    """Make ``a`` lose ``workflow_id`` to ``b`` and notice it at renewal."""
    _expire(clock, _row(workflow_id).expires_at)
    assert b.takeover(workflow_id).status == "acquired"
    with pytest.warns(WeftWorkflowClaimLostWarning):
        assert [o.status for o in a.renew_all() if o.workflow_id == workflow_id] == ["lost"]


def test_cooldown_skips_takeover_until_exactly_one_renew_interval(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    _lose(a, b, clock, "wf")
    deposed_at = clock.now
    # b dies; its claim is long expired, but a is cooling down.
    b.forget("wf")
    clock.now = deposed_at + RENEW - 1
    WorkflowClaim.objects.filter(pk="wf").update(expires_at=0)
    with CaptureQueriesContext(connection) as queries:
        skipped = a.takeover("wf")
    assert skipped.status == "backoff-skipped"
    assert len(queries) == 0  # nothing read
    assert _attempts(a)["backoff_skipped"] == 1
    clock.now = deposed_at + RENEW  # now == until: no longer active
    result = a.takeover("wf")
    assert (result.status, result.epoch) == ("acquired", 3)


def test_second_deposition_restarts_the_cooldown(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    a.cooldown.record_deposition("wf", clock.now)
    first = clock.now
    clock.advance(3_000)
    a.cooldown.record_deposition("wf", clock.now)
    clock.now = first + RENEW
    assert a.takeover("wf").status == "backoff-skipped"
    clock.now = first + 3_000 + RENEW
    assert a.takeover("wf").status == "not-expired"  # window over, claim live
    assert b.takeover("wf").status == "not-expired"


def test_cooldown_is_cleared_by_a_successful_acquire(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    _lose(a, b, clock, "wf")
    assert a.cooldown.is_active("wf", clock.now)
    b.release("wf")
    assert a.acquire("wf").status == "acquired"  # acquire is not gated by the cooldown
    assert not a.cooldown.is_active("wf", clock.now)


def test_cooldown_is_cleared_by_a_successful_takeover(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    b.acquire("wf")
    _expire(clock, _row("wf").expires_at)
    real_batch = registry_module.conditional_batch

    def deposed_meanwhile(*args, **kwargs):
        # A concurrent renewal pass records a deposition while the CAS runs.
        a.cooldown.record_deposition("wf", clock.now)
        return real_batch(*args, **kwargs)

    monkeypatch.setattr(registry_module, "conditional_batch", deposed_meanwhile)
    assert a.takeover("wf").status == "acquired"
    assert not a.cooldown.is_active("wf", clock.now)


# -- release --------------------------------------------------------------------


def test_release_deletes_the_holder_keeps_the_epoch_and_untracks(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    clock.advance(10)
    assert reg.release("wf").status == "released"
    row = _row("wf")
    assert (row.epoch, row.engine_id, row.expires_at, row.claimed_at) == (1, None, None, None)
    assert reg.tracked() == []
    assert reg.metrics.snapshot().active_claims == 0
    event = ClaimEvent.objects.filter(workflow_id="wf", kind="release").get()
    assert (event.epoch, event.engine_id, event.at_ms) == (1, "engine-a", clock.now)


def test_release_with_the_wrong_expected_epoch_is_not_held(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    assert reg.release("wf", expected_epoch=2).status == "not-held"
    assert reg.tracked() == ["wf"]
    assert _row("wf").engine_id == "engine-a"
    assert reg.release("wf", expected_epoch=1).status == "released"
    assert reg.release("wf").status == "not-held"
    assert reg.release("never").status == "not-held"


def test_release_after_being_taken_over_is_a_lost_race(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    a.acquire("wf")
    _expire(clock, _row("wf").expires_at)
    b.takeover("wf")
    assert a.release("wf").status == "lost-race"
    assert a.tracked() == []
    assert (_row("wf").engine_id, _row("wf").epoch) == ("engine-b", 2)


def test_release_waits_for_an_in_flight_renewal(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    results = []

    def release_in_thread() -> None:
        try:
            results.append(reg.release("wf"))
        finally:
            connections.close_all()

    worker = threading.Thread(target=release_in_thread)
    with reg.renewal.renewal_pass():  # a renewal pass is in flight
        worker.start()
        # Observe the release blocked on the pass itself, not a slow thread.
        assert reg.renewal.wait_for_waiters(1, timeout=10), "release must wait for the pass"
        assert reg.is_releasing("wf")
        assert results == []
        assert _row("wf").engine_id == "engine-a"
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert [r.status for r in results] == ["released"]
    assert _row("wf").engine_id is None
    assert reg.tracked() == []


def test_release_racing_a_renewal_uses_the_renewed_holder(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewal pass started first; the release must CAS on what it wrote."""
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    clock.advance(2_000)
    vendor = store.ops(reg.using)
    real_renew = vendor.renew_exact_holders
    results = []

    def release_in_thread() -> None:
        try:
            results.append(reg.release("wf"))
        finally:
            connections.close_all()

    worker = threading.Thread(target=release_in_thread)

    def renew_while_release_starts(*args, **kwargs):
        worker.start()
        assert reg.renewal.wait_for_waiters(1, timeout=10)  # the release waits for this pass
        return real_renew(*args, **kwargs)

    monkeypatch.setattr(vendor, "renew_exact_holders", renew_while_release_starts)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcomes = reg.renew_all()
    worker.join(timeout=10)
    assert [o.status for o in outcomes] == ["renewed"]
    assert caught == []
    assert [r.status for r in results] == ["released"]
    assert _holder_columns("wf") == (None, None, None)
    assert reg.tracked() == []


def test_prepared_release_folds_into_a_terminal_commit(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")
    reg.acquire("wf")
    transition = reg.prepare_release("wf", reason="completed")
    assert transition is not None
    # A renewal during the prepared release is benign, not a loss.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [(o.workflow_id, o.status) for o in reg.renew_all()] == [("wf", "not-held")]
    assert caught == []
    assert reg.tracked() == ["wf"]
    result = conditional_batch(
        [RunCondition(run.id, statuses=frozenset({"running"})), *transition.conditions],
        [Update(WorkflowRun, {"pk": run.id}, {"status": "completed"}), *transition.writes],
    )
    assert result.committed
    reg.finish_release("wf", committed=True)
    assert reg.tracked() == []
    assert _holder_columns("wf") == (None, None, None)
    assert _row("wf").epoch == 1
    assert WorkflowRun.objects.get(pk=run.pk).status == "completed"
    event = ClaimEvent.objects.filter(workflow_id="wf", kind="release").get()
    assert event.reason == "completed"


def test_prepared_release_survives_a_renewal_that_moved_expiry(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    clock.advance(1_000)
    reg.renew_all()
    transition = reg.prepare_release("wf")
    # Someone (a sibling renewal) moved expires_at again: the owner match still holds.
    WorkflowClaim.objects.filter(pk="wf").update(expires_at=clock.now + TTL + 7)
    assert conditional_batch(transition.conditions, transition.writes).committed
    reg.finish_release("wf", committed=True)
    assert _row("wf").engine_id is None


def test_failed_prepared_release_keeps_tracking(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="cancelled")
    reg.acquire("wf")
    transition = reg.prepare_release("wf")
    result = conditional_batch(
        [RunCondition(run.id, statuses=frozenset({"running"})), *transition.conditions],
        transition.writes,
    )
    assert not result.committed
    reg.finish_release("wf", committed=False)
    assert reg.tracked() == ["wf"]
    assert _row("wf").engine_id == "engine-a"
    assert [o.status for o in reg.renew_all()] == ["renewed"]


def test_prepare_release_of_an_untracked_id_is_none(clock: ManualClock) -> None:
    assert _registry("engine-a", clock).prepare_release("wf") is None


def test_release_all_is_best_effort(clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = _registry("engine-a", clock)
    for wid in ("wf-1", "wf-2", "wf-3"):
        reg.acquire(wid)
    real_batch = registry_module.conditional_batch

    def failing_for_wf_2(conditions, writes, **kwargs):
        if any(getattr(c, "workflow_id", None) == "wf-2" for c in conditions):
            raise DatabaseError("boom")
        return real_batch(conditions, writes, **kwargs)

    monkeypatch.setattr(registry_module, "conditional_batch", failing_for_wf_2)
    results = reg.release_all()
    assert sorted((r.workflow_id, r.status) for r in results) == [
        ("wf-1", "released"),
        ("wf-3", "released"),
    ]
    assert reg.tracked() == []
    assert _row("wf-1").engine_id is None
    assert _row("wf-2").engine_id == "engine-a"  # left to expire
    assert _row("wf-3").engine_id is None


def test_forget_drops_local_tracking_only(clock: ManualClock) -> None:
    reg = _registry("engine-a", clock)
    reg.acquire("wf")
    reg.forget("wf")
    assert reg.tracked() == []
    assert _row("wf").engine_id == "engine-a"


# -- the epoch is never reset -----------------------------------------------------


def test_epoch_continues_after_release_rotation_and_deleted_runs(clock: ManualClock) -> None:
    a, b = _registry("engine-a", clock), _registry("engine-b", clock)
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")
    assert a.acquire("wf").epoch == 1
    a.release("wf")
    assert _row("wf").epoch == 1
    assert a.acquire("wf").epoch == 2
    # An external terminal rotation (e.g. a cancel by another process).
    rotation = build_rotation(a.read("wf"), actor="admin", now=clock.now, reason="cancel")
    assert conditional_batch(rotation.conditions, rotation.writes).committed
    assert (_row("wf").epoch, _holder_columns("wf")) == (3, (None, None, None))
    # Deleting every run of the id (purge) leaves the claim row alone.
    WorkflowRun.objects.filter(pk=run.pk).delete()
    assert WorkflowClaim.objects.filter(pk="wf").exists()
    assert b.acquire("wf").epoch == 4
    b.release("wf")
    assert a.acquire("wf").epoch == 5
    assert [kind for kind, _, _ in _events("wf")] == [
        "acquire",
        "release",
        "acquire",
        "rotate",
        "acquire",
        "release",
        "acquire",
    ]
    assert [epoch for _, epoch, _ in _events("wf")] == [1, 1, 2, 3, 4, 4, 5]


def test_rotation_loses_against_a_concurrent_epoch_change(clock: ManualClock) -> None:
    a = _registry("engine-a", clock)
    a.acquire("wf")
    stale = a.read("wf")
    a.release("wf")
    a.acquire("wf")
    rotation = build_rotation(stale, actor="admin", now=clock.now, reason="cancel")
    result = conditional_batch(rotation.conditions, rotation.writes)
    assert not result.committed
    assert result.failed_condition is rotation.conditions[0]
    assert (_row("wf").epoch, _row("wf").engine_id) == (2, "engine-a")


# -- renew scope "engine" (a Celery node) ------------------------------------------


def test_engine_scope_reports_a_claim_taken_by_another_engine_as_lost(
    clock: ManualClock,
) -> None:
    node = _registry("node-1", clock, renew_scope="engine")
    other = _registry("engine-b", clock)
    node.acquire("wf")
    node.acquire("kept")
    _expire(clock, _row("wf").expires_at)
    other.takeover("wf")
    with pytest.warns(WeftWorkflowClaimLostWarning) as record:
        outcomes = node.renew_all()
    assert sorted((o.workflow_id, o.status) for o in outcomes) == [
        ("kept", "renewed"),
        ("wf", "lost"),
    ]
    assert [w.message.workflow_id for w in record] == ["wf"]
    assert node.tracked() == ["kept"]
    assert node.cooldown.is_active("wf", clock.now)
    assert node.metrics.snapshot().renewal_failures == 1
    assert node.metrics.snapshot().attempts["deposed"] == 1
    assert _row("wf").engine_id == "engine-b"
    assert _row("kept").expires_at == clock.now + TTL


def test_engine_scope_adopts_rows_acquired_by_a_sibling_process(clock: ManualClock) -> None:
    parent = _registry("node-1", clock, renew_scope="engine")
    child = _registry("node-1", clock, renew_scope="engine")  # a pool child
    child.acquire("wf-1")
    child.acquire("wf-2")
    clock.advance(2_000)
    outcomes = parent.renew_all()
    assert sorted((o.workflow_id, o.status) for o in outcomes) == [
        ("wf-1", "renewed"),
        ("wf-2", "renewed"),
    ]
    assert sorted(parent.tracked()) == ["wf-1", "wf-2"]
    assert parent.current_epoch("wf-1") == 1
    assert parent.holder("wf-1").expires_at == clock.now + TTL
    assert parent.metrics.snapshot().active_claims == 2
    # The adopted claim can be released by the parent even though the child
    # renewed it since (owner match, not exact columns).
    clock.advance(1_000)
    child.renew_all()
    assert parent.release("wf-1").status == "released"
    assert _row("wf-1").engine_id is None


def test_engine_scope_release_during_a_renewal_is_not_held(clock: ManualClock) -> None:
    node = _registry("node-1", clock, renew_scope="engine")
    node.acquire("wf")
    assert node.prepare_release("wf") is not None  # a release under way
    assert node.is_releasing("wf")
    assert [(o.workflow_id, o.status) for o in node.renew_all()] == [("wf", "not-held")]
    assert node.tracked() == ["wf"]
    node.finish_release("wf", committed=False)
    assert not node.is_releasing("wf")


def test_engine_scope_a_sibling_release_or_reacquire_is_not_a_loss(clock: ManualClock) -> None:
    """A Celery pool process of the same engine released (its run completed) or
    released and re-acquired a claim the node renewed last pass: not lost."""
    node = _registry("node-1", clock, renew_scope="engine")
    child = _registry("node-1", clock, renew_scope="engine")
    for wid in ("done", "again", "kept"):
        child.acquire(wid)
    node.renew_all()
    assert sorted(node.tracked()) == ["again", "done", "kept"]
    child.release("done")
    child.release("again")
    child.acquire("again")  # epoch 2, the same engine
    clock.advance(1_000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeftWorkflowClaimLostWarning)
        outcomes = node.renew_all()
    assert sorted((o.workflow_id, o.status) for o in outcomes) == [
        ("again", "renewed"),
        ("done", "not-held"),
        ("kept", "renewed"),
    ]
    assert node.current_epoch("again") == 2
    assert "done" not in node.tracked()
    assert node.metrics.snapshot().renewal_failures == 0
    assert node.metrics.snapshot().attempts["deposed"] == 0


def test_engine_scope_adopt_checks_engine_and_epoch(clock: ManualClock) -> None:
    child = _registry("node-1", clock, renew_scope="engine")
    facade = _registry("node-1", clock, renew_scope="engine")
    other = _registry("engine-b", clock)
    child.acquire("wf")
    other.acquire("theirs")
    assert facade.adopt("wf", 2) is None  # not the epoch the message names
    assert facade.adopt("theirs", 1) is None  # another engine's
    assert facade.adopt("nothing", 1) is None
    assert facade.tracked() == []
    holder = facade.adopt("wf", 1)
    assert holder is not None and (holder.engine_id, holder.epoch) == ("node-1", 1)
    assert facade.current_epoch("wf") == 1


# -- query counts -------------------------------------------------------------------


def _renew_query_count(count: int, scope: str, clock: ManualClock) -> int:
    WorkflowClaim.objects.all().delete()
    reg = _registry(f"engine-{scope}-{count}", clock, renew_scope=scope)
    for i in range(count):
        assert reg.acquire(f"wf-{i}").status == "acquired"
    clock.advance(1_000)
    with CaptureQueriesContext(connection) as queries:
        outcomes = reg.renew_all()
    assert len(outcomes) == count
    assert {o.status for o in outcomes} == {"renewed"}
    assert WorkflowClaim.objects.filter(expires_at=clock.now + TTL).count() == count
    return len(queries)


@pytest.mark.parametrize("scope", ["held", "engine"])
def test_renewing_200_claims_costs_the_same_queries_as_2(clock: ManualClock, scope: str) -> None:
    small = _renew_query_count(2, scope, clock)
    large = _renew_query_count(200, scope, clock)
    assert small == large
    assert large <= 3


# -- with a host -----------------------------------------------------------------------


def test_static_host_registry_uses_the_settings_timings(clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    assert host.registry is not None
    assert host.registry.claim_ttl_ms == host.settings.claim_ttl_ms
    assert host.registry.acquire("wf").status == "acquired"
    assert host.metrics.snapshot().attempts["acquired"] == 1


# -- round trips of a claim transition (issue #7) ---------------------------------------


def _statements(fn: object) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        fn()  # type: ignore[operator]
    return [q["sql"] for q in captured.captured_queries]


def test_on_postgresql_a_claim_transition_is_one_statement_and_no_transaction(
    clock: ManualClock, vendor: str
) -> None:
    """Acquire = the fresh read + ONE statement; release = one statement; no
    BEGIN/COMMIT around them (the CTE is atomic on its own). SQLite keeps the
    locking transaction of the general executor."""
    registry = ClaimRegistry(
        engine_id="engine-a", clock=clock, claim_ttl_ms=TTL, claim_renew_interval_ms=RENEW
    )
    acquired = _statements(lambda: registry.acquire("wf"))
    released = _statements(lambda: registry.release("wf"))
    assert list(ClaimEvent.objects.values_list("kind", "epoch")) == [("acquire", 1), ("release", 1)]
    if vendor == "postgresql":
        assert len(acquired) == 2 and acquired[0].startswith("SELECT")
        assert acquired[1].startswith("WITH") and len(released) == 1
        assert not any(q.upper().startswith(("BEGIN", "SAVEPOINT")) for q in acquired + released)
    else:
        assert any("FOR UPDATE" in q or "INSERT" in q for q in acquired)


def test_a_stale_read_fails_the_single_statement_and_writes_no_event(clock: ManualClock) -> None:
    """The statement's WHERE is the CAS: a read taken before another engine's
    acquire commits nothing, and the loser sees who holds the claim."""
    a = ClaimRegistry(
        engine_id="engine-a", clock=clock, claim_ttl_ms=TTL, claim_renew_interval_ms=RENEW
    )
    b = ClaimRegistry(
        engine_id="engine-b", clock=clock, claim_ttl_ms=TTL, claim_renew_interval_ms=RENEW
    )
    stale = b.prepare_acquire("wf")  # epoch 0, no holder: read before a's acquire
    assert a.acquire("wf").status == "acquired"
    result = conditional_batch(stale.transition.conditions, stale.transition.writes)
    assert not result.committed and result.failed_condition is stale.transition.conditions[0]
    assert list(ClaimEvent.objects.values_list("kind", "engine_id")) == [("acquire", "engine-a")]
    assert WorkflowClaim.objects.get(pk="wf").engine_id == "engine-a"
    assert a.release("wf").status == "released"
    assert b.acquire("wf").epoch == 2
    fresh = a.prepare_acquire("other")  # a read nobody raced: commits
    assert conditional_batch(fresh.transition.conditions, fresh.transition.writes).committed
