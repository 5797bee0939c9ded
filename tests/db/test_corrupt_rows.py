"""Corrupt stored claim rows never crash a reader and never count as live.

Invariant protected (SPEC §4.1 "fail-closed"): a ``WorkflowClaim`` row
written by hand or by a bug -- negative or out-of-range epoch, half-null
holder, empty engine id, negative timestamps -- reads back as *no decodable
holder*: ``registry.read().holder`` is ``None``, an acquire reports a lost
race held by nobody, a takeover steals it at once at a fresh epoch, the wake
guard discards with ``holder-undecodable``, a fold cannot acquire over it,
and a Celery node's engine-wide renewal neither adopts nor revives it.
"""

from __future__ import annotations

import pytest

from tests.support import ManualClock, StaticHost
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.codec import MAX_EPOCH_EXCLUSIVE
from weft_django.ownership.fold import commit_with_claim_fold, prepare_claim_fold
from weft_django.ownership.guard import confirm_wake_ownership, wake_ownership_check
from weft_django.ownership.ops import RunCondition, Update
from weft_django.ownership.registry import ClaimRegistry
from weft_django.ownership.transitions import EpochExhaustedError, build_rotation
from weft_django.warnings import WeftWorkflowWakeDiscardedWarning

pytestmark = pytest.mark.usefixtures("batch_db")

FAR = 10**12  # an expiry far in the future: only corruption makes these stealable

CORRUPT_ROWS = {
    "negative-epoch": (-4, "engine-a", FAR, 1_000),
    "zero-epoch-with-holder": (0, "engine-a", FAR, 1_000),
    "epoch-out-of-range": (MAX_EPOCH_EXCLUSIVE, "engine-a", FAR, 1_000),
    "empty-engine-id": (3, "", FAR, 1_000),
    "negative-expires-at": (3, "engine-a", -5, 1_000),
    "negative-claimed-at": (3, "engine-a", FAR, -1),
    "expires-beyond-safe-integer": (3, "engine-a", 2**60, 1_000),
    "half-null-no-expiry": (3, "engine-a", None, 1_000),
    "half-null-no-claimed": (3, "engine-a", FAR, None),
    "half-null-engine-only": (3, "engine-a", None, None),
    "half-null-no-engine": (3, None, FAR, 1_000),
}
# Rows whose stored epoch can still be incremented safely (a takeover can mint).
MINTABLE = {k: v for k, v in CORRUPT_ROWS.items() if k != "epoch-out-of-range"}


def _write(columns: tuple, workflow_id: str = "wf") -> None:
    epoch, engine_id, expires_at, claimed_at = columns
    WorkflowClaim.objects.create(
        workflow_id=workflow_id,
        epoch=epoch,
        engine_id=engine_id,
        expires_at=expires_at,
        claimed_at=claimed_at,
    )


def _columns(workflow_id: str = "wf") -> tuple:
    row = WorkflowClaim.objects.get(pk=workflow_id)
    return (row.epoch, row.engine_id, row.expires_at, row.claimed_at)


@pytest.fixture(params=sorted(CORRUPT_ROWS))
def corrupt(request) -> tuple:
    columns = CORRUPT_ROWS[request.param]
    _write(columns)
    return columns


@pytest.fixture(params=sorted(MINTABLE))
def corrupt_mintable(request) -> tuple:
    columns = MINTABLE[request.param]
    _write(columns)
    return columns


def test_read_decodes_no_holder(corrupt: tuple, clock: ManualClock) -> None:
    snapshot = StaticHost("engine-b", clock).registry.read("wf")
    assert snapshot.holder is None
    assert snapshot.holder_undecodable
    assert not snapshot.holder_absent
    assert snapshot.epoch == corrupt[0]


def test_acquire_is_a_lost_race_held_by_nobody(corrupt: tuple, clock: ManualClock) -> None:
    registry = StaticHost("engine-b", clock).registry
    result = registry.acquire("wf")
    assert (result.status, result.held_by) == ("lost-race", None)
    assert registry.tracked() == []
    assert _columns() == corrupt


def test_takeover_treats_it_as_not_live(corrupt_mintable: tuple, clock: ManualClock) -> None:
    registry = StaticHost("engine-b", clock).registry
    result = registry.takeover("wf")
    expected_epoch = max(corrupt_mintable[0], 0) + 1
    assert (result.status, result.epoch) == ("acquired", expected_epoch)
    assert _columns() == (expected_epoch, "engine-b", clock.now + registry.claim_ttl_ms, clock.now)
    assert registry.read("wf").holder is not None
    assert [o.status for o in registry.renew_all()] == ["renewed"]


def test_guard_says_holder_undecodable(corrupt: tuple) -> None:
    with pytest.warns(WeftWorkflowWakeDiscardedWarning) as record:
        result = wake_ownership_check(
            workflow_id="wf",
            wake_kind="sleep",
            expected_engine_id="engine-a",
            expected_epoch=corrupt[0],
        )
    assert (result.status, result.reason) == ("discarded", "holder-undecodable")
    assert record[0].message.workflow_id == "wf"


def test_a_corrupt_row_never_confirms_a_wake(corrupt_mintable: tuple, clock: ManualClock) -> None:
    host = StaticHost("engine-a", clock)
    host.registry.acquire("other")  # the engine is alive and holds something else
    with pytest.warns(WeftWorkflowWakeDiscardedWarning):
        assert confirm_wake_ownership(host, "wf", "sleep", corrupt_mintable[0]) == "discard"


def test_a_fold_cannot_acquire_over_a_corrupt_holder(
    corrupt_mintable: tuple, clock: ManualClock
) -> None:
    corrupt = corrupt_mintable
    host = StaticHost("engine-b", clock)
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="pending")
    fold = prepare_claim_fold(host, "wf")
    result = commit_with_claim_fold(
        host,
        fold,
        [RunCondition(run.id, statuses=frozenset({"pending"}))],
        [Update(WorkflowRun, {"pk": run.pk}, {"status": "running"})],
    )
    assert (result.status, result.claim_conflict) == ("lost-race", True)
    assert host.registry.tracked() == []
    assert _columns() == corrupt
    assert WorkflowRun.objects.get(pk=run.pk).status == "pending"


def test_an_exhausted_epoch_is_refused_explicitly_never_rewound(clock: ManualClock) -> None:
    """No safe next epoch exists: minting raises instead of restarting the sequence."""
    _write(CORRUPT_ROWS["epoch-out-of-range"])
    host = StaticHost("engine-b", clock)
    assert host.registry.acquire("wf").status == "lost-race"  # holder present: no mint
    with pytest.raises(EpochExhaustedError):
        prepare_claim_fold(host, "wf")
    with pytest.raises(EpochExhaustedError):
        host.registry.takeover("wf")
    assert _columns() == CORRUPT_ROWS["epoch-out-of-range"]


def test_engine_scope_renewal_neither_adopts_nor_revives_corrupt_rows(
    clock: ManualClock,
) -> None:
    # Every corrupt shape, each carrying this node's engine id where it has one.
    for name, (epoch, engine_id, expires_at, claimed_at) in CORRUPT_ROWS.items():
        _write((epoch, "node-1" if engine_id else engine_id, expires_at, claimed_at), name)
    before = {name: _columns(name) for name in CORRUPT_ROWS}
    node = ClaimRegistry(
        engine_id="node-1",
        clock=clock,
        claim_ttl_ms=30_000,
        claim_renew_interval_ms=5_000,
        renew_scope="engine",
    )
    node.acquire("healthy")
    outcomes = node.renew_all()
    assert [(o.workflow_id, o.status) for o in outcomes] == [("healthy", "renewed")]
    assert node.tracked() == ["healthy"]
    assert {name: _columns(name) for name in CORRUPT_ROWS} == before


def test_rotation_of_a_corrupt_row_restarts_a_valid_epoch(
    corrupt_mintable: tuple, clock: ManualClock
) -> None:
    host = StaticHost("engine-b", clock)
    rotation = build_rotation(host.registry.read("wf"), actor="admin", now=clock.now, reason="x")
    assert conditional_batch(rotation.conditions, rotation.writes).committed
    epoch = max(corrupt_mintable[0], 0) + 1
    assert _columns() == (epoch, None, None, None)
    assert host.registry.acquire("wf").epoch == epoch + 1
