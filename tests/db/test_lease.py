"""``lease`` mode (SPEC §4.10): one store-wide single-writer lease.

Invariants protected: a cold store grants epoch 1; a standby never takes a
live lease -- it waits up to ``LEASE_WAIT_TIMEOUT`` and then fails with the
time it actually waited and who holds the lease -- but takes an expired one
(after the same grace as claims) at epoch + 1, and a garbage holder at
once; a release keeps the epoch; a holder whose renewal is fenced out is
deposed exactly once (``WeftLeaseLostWarning`` and ``on_lost``) and writes
nothing more.
"""

from __future__ import annotations

import pytest

from tests.support import ManualClock
from weft_django.errors import EngineLeaseAcquisitionTimeoutError
from weft_django.models import GlobalLease
from weft_django.ownership.lease import GlobalLeaseManager
from weft_django.warnings import WeftLeaseLostWarning

pytestmark = pytest.mark.usefixtures("batch_db")

TTL = 30_000
RENEW = 5_000
WAIT = 60_000
GRACE = 2 * RENEW


def _manager(holder_id: str, clock: ManualClock, **kwargs) -> GlobalLeaseManager:
    options = {
        "ttl_ms": TTL,
        "renew_interval_ms": RENEW,
        "wait_timeout_ms": WAIT,
        "poll_interval_ms": 1_000,
        **kwargs,
    }
    return GlobalLeaseManager(holder_id=holder_id, clock=clock, **options)


def _lease() -> tuple:
    row = GlobalLease.objects.get()
    return (row.epoch, row.holder_id, row.expires_at)


def test_cold_acquire_takes_epoch_one(clock: ManualClock) -> None:
    manager = _manager("engine-a", clock)
    assert manager.acquire() == 1
    assert manager.epoch == 1
    assert not manager.deposed
    assert _lease() == (1, "engine-a", clock.now + TTL)


def test_renew_extends_and_keeps_the_epoch(clock: ManualClock) -> None:
    manager = _manager("engine-a", clock)
    manager.acquire()
    clock.advance(RENEW)
    assert manager.renew_once()
    assert _lease() == (1, "engine-a", clock.now + TTL)


def test_standby_times_out_with_the_time_waited_and_the_holder(clock: ManualClock) -> None:
    holder = _manager("engine-a", clock)
    holder.acquire()
    sleeps: list[float] = []

    def sleep_while_the_holder_renews(seconds: float) -> None:
        sleeps.append(seconds)
        clock.advance(int(seconds * 1000))
        assert holder.renew_once()

    standby = _manager("engine-b", clock, sleep=sleep_while_the_holder_renews)
    started = clock.now
    with pytest.raises(EngineLeaseAcquisitionTimeoutError) as info:
        standby.acquire()
    assert info.value.held_by == "engine-a"
    assert info.value.waited_ms == clock.now - started
    assert info.value.waited_ms >= WAIT
    assert info.value.waited_ms < WAIT + 1_000
    assert set(sleeps) == {1.0}
    assert standby.epoch is None
    assert _lease()[:2] == (1, "engine-a")


def test_standby_takes_over_once_the_holder_expires(clock: ManualClock) -> None:
    holder = _manager("engine-a", clock)
    holder.acquire()
    dead_expiry = _lease()[2]

    def sleep(seconds: float) -> None:
        clock.advance(int(seconds * 1000))

    standby = _manager("engine-b", clock, sleep=sleep)
    assert standby.acquire() == 2
    epoch, holder_id, expires_at = _lease()
    assert (epoch, holder_id) == (2, "engine-b")
    took_over_at = expires_at - TTL
    # Never before the old holder's expiry plus grace; at the first poll after it.
    assert took_over_at > dead_expiry + GRACE
    assert took_over_at <= dead_expiry + GRACE + 1_000


def test_takeover_respects_grace_at_the_boundary(clock: ManualClock) -> None:
    _manager("engine-a", clock).acquire()
    expiry = _lease()[2]
    standby = _manager("engine-b", clock)
    clock.now = expiry + GRACE
    assert not standby.try_acquire()
    clock.now = expiry + GRACE + 1
    assert standby.try_acquire()
    assert standby.epoch == 2


@pytest.mark.parametrize(
    ("epoch", "holder_id", "expires_at", "minted"),
    [
        (3, "", 10**12, 4),  # empty holder id
        (3, "engine-a", -5, 4),  # negative expiry
        (3, "engine-a", None, 4),  # half-null
        (3, "engine-a", 2**60, 4),  # beyond a safe integer: garbage, not "forever"
        (-2, "engine-a", 10**12, 1),  # negative epoch
    ],
)
def test_a_garbage_holder_is_stolen_at_once(
    clock: ManualClock, epoch, holder_id, expires_at, minted
) -> None:
    GlobalLease.objects.create(epoch=epoch, holder_id=holder_id, expires_at=expires_at)
    manager = _manager("engine-b", clock, sleep=lambda s: pytest.fail("must not wait"))
    assert manager.acquire() == minted
    assert _lease() == (minted, "engine-b", clock.now + TTL)


def test_release_keeps_the_epoch_and_frees_the_lease(clock: ManualClock) -> None:
    a, b = _manager("engine-a", clock), _manager("engine-b", clock)
    a.acquire()
    assert a.release()
    assert a.epoch is None
    assert _lease() == (1, None, None)
    assert b.try_acquire()
    assert b.epoch == 2


def test_a_deposed_holder_warns_and_halts_once(clock: ManualClock) -> None:
    lost: list[str] = []
    a = _manager("engine-a", clock, on_lost=lost.append)
    b = _manager("engine-b", clock)
    a.acquire()
    clock.advance(TTL + GRACE + 1)
    assert b.try_acquire()
    with pytest.warns(WeftLeaseLostWarning) as record:
        assert not a.renew_once()
    assert len(record) == 1
    assert (record[0].message.holder_id, record[0].message.reason) == ("engine-a", "deposed")
    assert a.deposed
    assert lost == ["deposed"]
    # Later renewals and releases do nothing and do not report again.
    assert not a.renew_once()
    assert not a.release()
    a.handle_deposition("deposed")
    assert lost == ["deposed"]
    assert _lease()[:2] == (2, "engine-b")


def test_renew_without_the_lease_does_nothing(clock: ManualClock) -> None:
    manager = _manager("engine-a", clock)
    assert not manager.renew_once()
    assert not manager.release()
    assert not GlobalLease.objects.exists()


def test_reacquire_after_deposition_clears_the_flag(clock: ManualClock) -> None:
    a, b = _manager("engine-a", clock), _manager("engine-b", clock)
    a.acquire()
    clock.advance(TTL + GRACE + 1)
    b.try_acquire()
    with pytest.warns(WeftLeaseLostWarning):
        a.renew_once()
    b.release()
    assert a.try_acquire()
    assert (a.epoch, a.deposed) == (3, False)
