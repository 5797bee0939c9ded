"""Pure claim transitions (SPEC §4.4) and the batch conditions they emit.

Invariant protected: every transition builder turns one snapshot and one
``now`` into exactly the compare-and-swap weft specifies -- the right
precondition (absent holder, the stale holder, my holder, the epoch only),
an epoch minted from the *stored* epoch (never a holder's self-reported one,
never rewound by a corrupt row), and the expiry judgment strict at its
boundary. No I/O: nothing here touches the database.
"""

from __future__ import annotations

import pytest

from weft_django.models import ClaimEvent, GlobalLease, WorkflowClaim, WorkflowRun
from weft_django.ownership import (
    TAKEOVER_MAX_ATTEMPTS,
    WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER,
    WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER,
)
from weft_django.ownership.codec import MAX_EPOCH_EXCLUSIVE, HolderRecord
from weft_django.ownership.ops import (
    ABSENT_HOLDER,
    ClaimCondition,
    Insert,
    LeaseCondition,
    PutClaim,
    RunCondition,
)
from weft_django.ownership.transitions import (
    ClaimSnapshot,
    EpochExhaustedError,
    build_acquire,
    build_release,
    build_renew,
    build_rotation,
    build_takeover,
    fence_condition,
    is_claim_expired,
    next_epoch,
)

NOW = 1_000_000
TTL = 30_000
RENEW = 5_000


def _single_put(transition) -> PutClaim:
    puts = [w for w in transition.writes if isinstance(w, PutClaim)]
    assert len(puts) == 1
    return puts[0]


def _single_event(transition) -> ClaimEvent:
    events = [
        w.instance
        for w in transition.writes
        if isinstance(w, Insert) and isinstance(w.instance, ClaimEvent)
    ]
    assert len(events) == 1
    return events[0]


def test_exported_constants_match_weft() -> None:
    assert WORKFLOW_CLAIM_TTL_SAFETY_MULTIPLIER == 3
    assert WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER == 2
    assert TAKEOVER_MAX_ATTEMPTS == 5


# -- next_epoch -----------------------------------------------------------------


@pytest.mark.parametrize(("stored", "expected"), [(0, 1), (1, 2), (41, 42), (-5, 1), (-1, 1)])
def test_next_epoch_counts_from_the_stored_epoch_and_treats_corrupt_as_zero(
    stored: int, expected: int
) -> None:
    assert next_epoch(stored) == expected


def test_next_epoch_refuses_to_leave_the_safe_range() -> None:
    # The largest valid epoch is MAX_EPOCH_EXCLUSIVE - 1; minting past it raises.
    assert next_epoch(MAX_EPOCH_EXCLUSIVE - 2) == MAX_EPOCH_EXCLUSIVE - 1
    with pytest.raises(EpochExhaustedError):
        next_epoch(MAX_EPOCH_EXCLUSIVE - 1)
    with pytest.raises(EpochExhaustedError):
        build_acquire(
            ClaimSnapshot("wf", MAX_EPOCH_EXCLUSIVE - 1), engine_id="e", now=NOW, ttl_ms=TTL
        )


# -- snapshot -----------------------------------------------------------------


def test_snapshot_of_a_missing_row_is_never_claimed_and_absent() -> None:
    snap = ClaimSnapshot("wf")
    assert snap.epoch == 0
    assert snap.holder_absent
    assert snap.holder is None
    assert not snap.holder_undecodable
    assert snap.holder_columns == ABSENT_HOLDER


def test_snapshot_decodes_a_well_formed_holder_with_the_row_epoch() -> None:
    snap = ClaimSnapshot("wf", 7, "engine-a", NOW + TTL, NOW)
    assert snap.holder == HolderRecord("engine-a", 7, NOW + TTL, NOW)
    assert not snap.holder_absent
    assert not snap.holder_undecodable


@pytest.mark.parametrize(
    "columns",
    [
        ("", NOW, NOW),  # empty engine id
        ("engine-a", -5, NOW),  # negative expires_at
        ("engine-a", NOW, -1),  # negative claimed_at
        ("engine-a", None, None),  # half-null
        (None, NOW, NOW),  # half-null the other way
        ("engine-a", NOW, None),
    ],
)
def test_snapshot_with_a_corrupt_holder_is_undecodable_not_absent(columns) -> None:
    snap = ClaimSnapshot("wf", 3, *columns)
    assert snap.holder is None
    assert not snap.holder_absent
    assert snap.holder_undecodable


@pytest.mark.parametrize("epoch", [0, -1, MAX_EPOCH_EXCLUSIVE])
def test_snapshot_with_an_invalid_row_epoch_is_undecodable(epoch: int) -> None:
    snap = ClaimSnapshot("wf", epoch, "engine-a", NOW + TTL, NOW)
    assert snap.holder is None
    assert snap.holder_undecodable


# -- acquire ------------------------------------------------------------------


def test_acquire_of_a_never_seen_id_takes_epoch_one() -> None:
    t = build_acquire(ClaimSnapshot("wf"), engine_id="engine-a", now=NOW, ttl_ms=TTL)
    assert t.epoch == 1
    assert t.holder == HolderRecord("engine-a", 1, NOW + TTL, NOW)
    assert t.conditions == (ClaimCondition("wf", 0, ABSENT_HOLDER, "exact", "claim"),)
    put = _single_put(t)
    assert put == PutClaim("wf", 1, ("engine-a", NOW + TTL, NOW))
    event = _single_event(t)
    assert (event.workflow_id, event.kind, event.epoch, event.engine_id, event.at_ms) == (
        "wf",
        "acquire",
        1,
        "engine-a",
        NOW,
    )


def test_acquire_continues_the_stored_epoch_and_requires_it_unchanged() -> None:
    t = build_acquire(ClaimSnapshot("wf", 9), engine_id="engine-b", now=NOW, ttl_ms=TTL, label="x")
    assert t.epoch == 10
    (cond,) = t.conditions
    assert cond.epoch == 9
    assert cond.holder == ABSENT_HOLDER
    assert cond.match == "exact"
    assert cond.label == "x"
    assert _single_put(t).epoch == 10


# -- takeover -----------------------------------------------------------------


def test_takeover_conditions_on_the_exact_stale_holder_and_the_stored_epoch() -> None:
    stale = ClaimSnapshot("wf", 4, "engine-a", NOW - 20_000, NOW - 50_000)
    t = build_takeover(stale, engine_id="engine-b", now=NOW, ttl_ms=TTL)
    (cond,) = t.conditions
    assert cond == ClaimCondition(
        "wf", 4, ("engine-a", NOW - 20_000, NOW - 50_000), "exact", "claim"
    )
    assert t.epoch == 5
    assert t.holder == HolderRecord("engine-b", 5, NOW + TTL, NOW)
    event = _single_event(t)
    assert event.kind == "takeover"
    assert event.previous_engine_id == "engine-a"
    assert event.previous_expires_at == NOW - 20_000


def test_takeover_mints_from_the_stored_epoch_even_when_it_is_corrupt() -> None:
    # The row's epoch column is the only input to minting: a negative stored
    # epoch (corrupt) restarts the sequence at 1 instead of raising, and the
    # CAS still compares the corrupt value actually read.
    stale = ClaimSnapshot("wf", -3, "engine-a", NOW, NOW)
    t = build_takeover(stale, engine_id="engine-b", now=NOW, ttl_ms=TTL)
    assert t.epoch == 1
    assert t.conditions[0].epoch == -3


def test_takeover_of_an_undecodable_holder_compares_its_raw_columns() -> None:
    garbage = ClaimSnapshot("wf", 2, "", -5, None)
    t = build_takeover(garbage, engine_id="engine-b", now=NOW, ttl_ms=TTL)
    assert t.conditions[0].holder == ("", -5, None)
    assert t.epoch == 3


# -- renew --------------------------------------------------------------------


def test_renew_keeps_engine_epoch_and_claimed_at_and_refreshes_expiry() -> None:
    current = HolderRecord("engine-a", 3, NOW, NOW - 10_000)
    renewed = build_renew(current, workflow_id="wf", now=NOW + 4_000, ttl_ms=TTL)
    assert renewed == HolderRecord("engine-a", 3, NOW + 4_000 + TTL, NOW - 10_000)


# -- release ------------------------------------------------------------------


def test_release_deletes_the_holder_and_keeps_the_epoch() -> None:
    mine = HolderRecord("engine-a", 6, NOW + TTL, NOW)
    t = build_release("wf", mine, now=NOW + 1)
    assert t.epoch == 6
    assert t.holder is None
    assert t.conditions == (
        ClaimCondition("wf", 6, ("engine-a", NOW + TTL, NOW), "exact", "claim"),
    )
    assert _single_put(t) == PutClaim("wf", 6, ABSENT_HOLDER)
    event = _single_event(t)
    assert (event.kind, event.epoch, event.engine_id) == ("release", 6, "engine-a")


def test_folded_release_matches_the_owner_only() -> None:
    mine = HolderRecord("engine-a", 6, NOW + TTL, NOW)
    t = build_release("wf", mine, now=NOW, exact=False, reason="completed")
    (cond,) = t.conditions
    assert cond.match == "owner"
    assert cond.epoch == 6
    assert cond.holder[0] == "engine-a"
    assert _single_event(t).reason == "completed"


# -- rotation -----------------------------------------------------------------


def test_rotation_bumps_the_epoch_deletes_the_holder_and_ignores_who_held_it() -> None:
    snap = ClaimSnapshot("wf", 8, "engine-a", NOW + TTL, NOW)
    t = build_rotation(snap, actor="admin", now=NOW, reason="cancel")
    (cond,) = t.conditions
    assert cond.epoch == 8
    assert cond.match == "any"
    assert t.epoch == 9
    assert t.holder is None
    assert _single_put(t) == PutClaim("wf", 9, ABSENT_HOLDER)
    event = _single_event(t)
    assert (event.kind, event.engine_id, event.reason, event.previous_engine_id) == (
        "rotate",
        "admin",
        "cancel",
        "engine-a",
    )


def test_rotation_of_a_never_claimed_id_and_force_release_kind() -> None:
    t = build_rotation(ClaimSnapshot("wf"), actor="op", now=NOW, reason="x", kind="force_release")
    assert t.epoch == 1
    assert t.conditions[0].epoch == 0
    assert _single_event(t).kind == "force_release"


# -- expiry -------------------------------------------------------------------


def test_expiry_is_strict_at_expires_at_plus_two_renew_intervals() -> None:
    expires_at = NOW
    boundary = expires_at + 2 * RENEW
    assert not is_claim_expired(expires_at=expires_at, now=expires_at, renew_interval_ms=RENEW)
    assert not is_claim_expired(expires_at=expires_at, now=boundary - 1, renew_interval_ms=RENEW)
    assert not is_claim_expired(expires_at=expires_at, now=boundary, renew_interval_ms=RENEW)
    assert is_claim_expired(expires_at=expires_at, now=boundary + 1, renew_interval_ms=RENEW)


# -- fence --------------------------------------------------------------------


def test_fence_condition_is_owner_at_epoch() -> None:
    cond = fence_condition("wf", 4, "engine-a")
    assert cond == ClaimCondition("wf", 4, ("engine-a", None, None), "owner", "fence")


# -- condition semantics (pure) ------------------------------------------------


def _row(epoch: int, engine_id, expires_at, claimed_at) -> WorkflowClaim:
    return WorkflowClaim(
        workflow_id="wf",
        epoch=epoch,
        engine_id=engine_id,
        expires_at=expires_at,
        claimed_at=claimed_at,
    )


def test_claim_condition_exact_compares_epoch_and_all_three_columns() -> None:
    cond = ClaimCondition("wf", 2, ("engine-a", 100, 50), "exact")
    assert cond.holds_for(_row(2, "engine-a", 100, 50))
    assert not cond.holds_for(_row(2, "engine-a", 101, 50))  # renewed since
    assert not cond.holds_for(_row(2, "engine-a", 100, 49))
    assert not cond.holds_for(_row(2, "engine-b", 100, 50))
    assert not cond.holds_for(_row(3, "engine-a", 100, 50))
    absent = ClaimCondition("wf", 2, ABSENT_HOLDER, "exact")
    assert absent.holds_for(_row(2, None, None, None))
    assert not absent.holds_for(_row(2, "engine-a", None, None))  # half-null is not absent
    assert not absent.holds_for(_row(1, None, None, None))


def test_claim_condition_owner_ignores_expiry_but_requires_a_full_holder() -> None:
    cond = ClaimCondition("wf", 2, ("engine-a", None, None), "owner")
    assert cond.holds_for(_row(2, "engine-a", 100, 50))
    assert cond.holds_for(_row(2, "engine-a", 999, 50))
    assert not cond.holds_for(_row(2, "engine-b", 100, 50))
    assert not cond.holds_for(_row(3, "engine-a", 100, 50))
    assert not cond.holds_for(_row(2, "engine-a", None, 50))
    assert not cond.holds_for(_row(2, "engine-a", 100, None))
    assert not cond.holds_for(_row(2, None, None, None))


def test_claim_condition_any_compares_the_epoch_only() -> None:
    cond = ClaimCondition("wf", 5, ABSENT_HOLDER, "any")
    assert cond.holds_for(_row(5, "engine-x", 1, 1))
    assert cond.holds_for(_row(5, None, None, None))
    assert cond.holds_for(_row(5, "", -5, None))
    assert not cond.holds_for(_row(4, None, None, None))


def test_run_condition_status_and_version() -> None:
    run = WorkflowRun(workflow_id="wf", name="n", status="running", version=3)
    assert RunCondition(run.id).holds_for(run)
    assert RunCondition(run.id, statuses=frozenset({"running"})).holds_for(run)
    assert not RunCondition(run.id, statuses=frozenset({"parked"})).holds_for(run)
    assert RunCondition(run.id, version=3).holds_for(run)
    assert not RunCondition(run.id, version=2).holds_for(run)
    assert not RunCondition(run.id, statuses=frozenset({"running"}), version=2).holds_for(run)
    assert not RunCondition(run.id).holds_for(None)


def test_lease_condition_treats_a_missing_row_as_epoch_zero_unheld() -> None:
    assert LeaseCondition(0, None).holds_for(None)
    assert not LeaseCondition(1, "a").holds_for(None)
    row = GlobalLease(epoch=3, holder_id="a", expires_at=10)
    assert LeaseCondition(3, "a").holds_for(row)
    assert not LeaseCondition(3, "b").holds_for(row)
    assert not LeaseCondition(2, "a").holds_for(row)
