"""``activity_info().epoch`` on every path, and ``fenced_update`` inside activities.

Issue #17 part 2. ``epoch`` must be the claim epoch of the engine running
the attempt, and ``idempotency_key`` ``"<workflow_id>:<position>"``, on
every path: a plain activity on a worker thread and an ``async def`` one on
the event loop (both writing through the fence: ``fenced_update`` /
``afenced_update``), the hand-out activity of ``ctx.async_activity``, under
``OWNERSHIP="lease"`` (the global lease's epoch), and a retry after a
takeover (the new owner's epoch: its write fences the old one out). Under
``OWNERSHIP="none"`` there is no epoch (0) and ``fenced_update`` refuses to
pretend. Retries and a takeover without writes: ``test_activity_info.py``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.db.models import F
from django.test import override_settings

from project.demo.models import FencedAccount
from tests.e2e.helpers import claim_epoch, claim_events
from tests.support import ManualClock
from weft_django import (
    ActivityInfo,
    activity,
    activity_info,
    afenced_update,
    client,
    fenced_update,
    workflow,
)
from weft_django.engine import Engine
from weft_django.models import GlobalLease, OwnershipModeMarker

SEEN: list[ActivityInfo] = []
FAIL_FIRST: set[str] = set()


@pytest.fixture(autouse=True)
def _reset():
    SEEN.clear()
    FAIL_FIRST.clear()
    yield
    # afenced_update's aupdate ran on asgiref's one sync thread (the engine's
    # event loop is not inside async_to_sync): close that thread's connection,
    # so it does not outlive the test database.
    asyncio.run(sync_to_async(connections.close_all)())


@activity(name="fence-deposit", retries=2, backoff=timedelta(seconds=1))
def deposit(name: str, amount: int) -> int:
    info = activity_info()
    SEEN.append(info)
    written = fenced_update(
        FencedAccount.objects.filter(name=name),
        balance=F("balance") + amount,
        writer=f"sync:{info.epoch}",
    )
    if name in FAIL_FIRST and info.attempt == 1:
        raise ConnectionError("failed after writing")
    return written


@activity(name="fence-adeposit")
async def adeposit(name: str, amount: int) -> int:
    info = activity_info()
    SEEN.append(info)
    return await afenced_update(
        FencedAccount.objects.filter(name=name),
        balance=F("balance") + amount,
        writer=f"async:{info.epoch}",
    )


@activity(name="fence-hand-out")
def hand_out(token: str, name: str) -> None:
    SEEN.append(activity_info())
    fenced_update(FencedAccount.objects.filter(name=name), writer=f"token:{token[:8]}")


@workflow(name="fence-flow")
def fence_flow(ctx, data):
    name = data["name"]
    first = yield ctx.run(deposit, name, 10)
    second = yield ctx.run(adeposit, name, 5)
    return [first, second]


@workflow(name="fence-async-flow")
def fence_async_flow(ctx, data):
    return (yield ctx.async_activity(hand_out, data["name"]))


def _row(name: str) -> tuple[int, str, str, int]:
    row = FencedAccount.objects.get(name=name)
    return row.balance, row.writer, row.fence_workflow_id, row.fence_epoch


@pytest.mark.django_db(transaction=True)
def test_thread_and_async_def_activities_write_at_the_claim_epoch(clock):
    FencedAccount.objects.create(name="acct-1")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("fence-flow", {"name": "acct-1"}, workflow_id="fence-e2e-1")
        engine.run_until_idle()
        assert handle.result(timeout=5) == [1, 1]
    finally:
        engine.dispose(grace=0)
    (epoch,) = {e for kind, e in claim_events("fence-e2e-1") if kind == "acquire"}
    assert [(i.position, i.attempt, i.epoch) for i in SEEN] == [(0, 1, epoch), (1, 1, epoch)]
    assert [i.idempotency_key for i in SEEN] == ["fence-e2e-1:0", "fence-e2e-1:1"]
    assert _row("acct-1") == (15, f"async:{epoch}", "fence-e2e-1", epoch)


@pytest.mark.django_db(transaction=True)
def test_the_async_activity_hand_out_sees_the_claim_epoch(clock):
    FencedAccount.objects.create(name="acct-2")
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("fence-async-flow", {"name": "acct-2"}, workflow_id="fence-e2e-2")
        engine.run_until_idle()
        assert handle.status() == "parked", handle.error()
        epoch = claim_epoch("fence-e2e-2")
        (info,) = SEEN
        assert (info.epoch, info.idempotency_key) == (epoch, f"fence-e2e-2:{info.position}")
        assert _row("acct-2")[2:] == ("fence-e2e-2", epoch)
    finally:
        engine.dispose(grace=0)


@pytest.mark.django_db(transaction=True)
def test_a_retry_after_a_takeover_writes_at_the_new_epoch_and_fences_the_old(clock):
    """Attempt 1 writes under engine A, then fails; A goes silent; B takes the
    claim over and attempt 2 writes under B's newer epoch. A write at A's epoch
    (its abandoned thread, say) is refused from then on."""
    FencedAccount.objects.create(name="acct-3")
    FAIL_FIRST.add("acct-3")
    first = Engine("fence-engine-a", clock=clock, background_tasks="manual").boot()
    second = Engine("fence-engine-b", clock=clock, background_tasks="manual")
    try:
        handle = client.start("fence-flow", {"name": "acct-3"}, workflow_id="fence-e2e-3")
        first.run_until_idle()
        assert handle.status() == "parked", handle.error()
        settings = first.settings
        clock.advance(settings.claim_ttl_ms + 10 * settings.claim_renew_interval_ms)
        second.boot()
        second.run_until_idle()
        assert handle.result(timeout=5) == [1, 1]
    finally:
        second.dispose(grace=0)
        first.dispose(grace=0)
    a, b, c = SEEN
    assert (a.attempt, b.attempt, c.attempt) == (1, 2, 1)
    assert a.epoch < b.epoch == c.epoch
    assert [k for k, _ in claim_events("fence-e2e-3")] == ["acquire", "takeover", "release"]
    assert a.idempotency_key == b.idempotency_key == "fence-e2e-3:0"
    # both deposit attempts wrote (at-least-once: the token does not dedupe them)
    assert _row("acct-3") == (25, f"async:{b.epoch}", "fence-e2e-3", b.epoch)
    late = fenced_update(FencedAccount.objects.filter(name="acct-3"), info=a, balance=0)
    assert late == 0
    assert _row("acct-3")[0] == 25


@pytest.mark.django_db(transaction=True)
def test_under_ownership_lease_the_epoch_is_the_leases():
    OwnershipModeMarker.objects.all().delete()
    FencedAccount.objects.create(name="acct-4")
    clock = ManualClock()
    timings = {"LEASE_TTL": 3, "LEASE_RENEW_INTERVAL": 1, "LEASE_WAIT_TIMEOUT": 2}
    with override_settings(WEFT={"OWNERSHIP": "lease", **timings}):
        engine = Engine(
            clock=clock,
            background_tasks="manual",
            ownership="lease",
            lease_ttl=3,
            lease_renew_interval=1,
            lease_wait_timeout=2,
        ).boot()
        try:
            lease_epoch = GlobalLease.objects.get().epoch
            handle = client.start("fence-flow", {"name": "acct-4"}, workflow_id="fence-e2e-4")
            engine.run_until_idle()
            assert handle.result(timeout=5) == [1, 1]
        finally:
            engine.dispose(grace=0)
    assert lease_epoch >= 1
    assert [i.epoch for i in SEEN] == [lease_epoch, lease_epoch]
    assert _row("acct-4")[2:] == ("fence-e2e-4", lease_epoch)


@pytest.mark.django_db(transaction=True)
def test_under_ownership_none_there_is_no_token_and_the_write_fails_clearly():
    OwnershipModeMarker.objects.all().delete()
    FencedAccount.objects.create(name="acct-5")
    clock = ManualClock()
    with override_settings(WEFT={"OWNERSHIP": "none"}):
        engine = Engine(clock=clock, background_tasks="manual", ownership="none").boot()
        try:
            handle = client.start("fence-flow", {"name": "acct-5"}, workflow_id="fence-e2e-5")
            engine.run_until_idle()
            for _ in range(3):  # the deposit's retries
                clock.advance(60_000)
                engine.run_until_idle()
            assert handle.status() == "failed"
            assert "claim epoch >= 1, got 0" in str(handle.error())
        finally:
            engine.dispose(grace=0)
    assert [i.epoch for i in SEEN] == [0, 0, 0]
    assert _row("acct-5") == (0, "", "", 0)
