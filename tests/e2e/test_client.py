"""The client surface: Django signals, handles, ownership_status, transactions, and
one workflow under each ownership mode."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import override_settings

from tests.e2e.helpers import claim_events, latest
from tests.support import ManualClock
from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.engine import signals as weft_signals
from weft_django.errors import OwnershipModeMismatchError, WorkflowFailedError, WorkflowNotFound
from weft_django.models import (
    ClaimEvent,
    GlobalLease,
    JournalEntry,
    OwnershipModeMarker,
    WorkflowClaim,
    WorkflowRun,
)

CALLS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset():
    CALLS.clear()


@activity(retries=1, backoff=timedelta(seconds=3))
def greet(name: str) -> str:
    CALLS[name] += 1
    if CALLS[name] == 1 and name.startswith("flaky"):
        raise RuntimeError("first attempt fails")
    return f"hello {name}"


@workflow(name="cl-echo")
def cl_echo(ctx, data):
    return {"echo": data}


@workflow(name="cl-fails")
def cl_fails(ctx, data):
    raise KeyError("missing thing")
    yield  # pragma: no cover - makes this a generator


@workflow(name="cl-simple")
def cl_simple(ctx, data):
    greeting = yield ctx.run(greet, data["name"])
    yield ctx.sleep(timedelta(seconds=10))
    extra = yield ctx.wait_for_signal("extra")
    child = yield ctx.start_child("cl-echo", extra)
    return {"greeting": greeting, "child": child}


@workflow(name="cl-wait")
def cl_wait(ctx, data):
    return (yield ctx.wait_for_signal("go"))


class _Receiver:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, object]] = []

    def started(self, sender, run, **kwargs):
        self.calls.append(("started", run.workflow_id, None))

    def completed(self, sender, run, result, **kwargs):
        self.calls.append(("completed", run.workflow_id, result))

    def failed(self, sender, run, error, **kwargs):
        self.calls.append(("failed", run.workflow_id, error["type"]))


@pytest.fixture
def receiver():
    rec = _Receiver()
    pairs = [
        (weft_signals.workflow_started, rec.started),
        (weft_signals.workflow_completed, rec.completed),
        (weft_signals.workflow_failed, rec.failed),
    ]
    for signal, fn in pairs:
        signal.connect(fn, weak=False)
    try:
        yield rec
    finally:
        for signal, fn in pairs:
            signal.disconnect(fn)


# -- Django signals -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_django_signals_fire(weft_env, receiver):
    client.start("cl-echo", 7, workflow_id="cl-sig-ok")
    client.start("cl-fails", None, workflow_id="cl-sig-bad")
    assert receiver.calls == []  # client.start does not pick up: an engine does
    weft_env.run_until_idle()
    assert sorted(receiver.calls, key=repr) == sorted(
        [
            ("started", "cl-sig-ok", None),
            ("completed", "cl-sig-ok", {"echo": 7}),
            ("started", "cl-sig-bad", None),
            ("failed", "cl-sig-bad", "KeyError"),
        ],
        key=repr,
    )
    # started precedes the end of each run
    for wid, end in (("cl-sig-ok", "completed"), ("cl-sig-bad", "failed")):
        kinds = [kind for kind, w, _ in receiver.calls if w == wid]
        assert kinds == ["started", end]


@pytest.mark.django_db(transaction=True)
def test_django_signals_fire_for_children(weft_env, receiver):
    client.start("cl-simple", {"name": "kid"}, workflow_id="cl-sig-kids")
    weft_env.run_until_idle()
    weft_env.advance(10)
    weft_env.run_until_idle()
    client.signal("cl-sig-kids", "extra", "x")
    weft_env.run_until_idle()
    assert latest("cl-sig-kids").status == "completed"
    assert ("started", "cl-sig-kids:3", None) in receiver.calls
    assert ("completed", "cl-sig-kids:3", {"echo": "x"}) in receiver.calls
    assert receiver.calls[-1][:2] == ("completed", "cl-sig-kids")


# -- handles ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_handle_status_result_and_error(weft_env):
    h = client.start("cl-wait", None, workflow_id="cl-handle")
    assert h.status() == "pending"
    with pytest.raises(TimeoutError, match="pending"):
        h.result(timeout=0)
    weft_env.run_until_idle()
    assert h.status() == "parked"
    assert h.error() is None
    client.signal("cl-handle", "go", [1, 2])
    weft_env.run_until_idle()
    assert h.result(timeout=0) == [1, 2]
    assert client.get_handle("cl-handle") == h

    bad = client.start("cl-fails", None, workflow_id="cl-handle-bad")
    weft_env.run_until_idle()
    with pytest.raises(WorkflowFailedError) as info:
        bad.result(timeout=0)
    assert (info.value.workflow_id, info.value.status) == ("cl-handle-bad", "failed")
    assert info.value.error["type"] == "KeyError"
    assert "missing thing" in info.value.error["message"]


@pytest.mark.django_db(transaction=True)
def test_unknown_workflow_id_is_not_found(weft_env):
    for call in (
        lambda: client.signal("cl-nobody", "go", 1),
        lambda: client.cancel("cl-nobody"),
        lambda: client.suspend("cl-nobody"),
        lambda: client.resume("cl-nobody"),
        lambda: client.retry("cl-nobody"),
        lambda: client.query("cl-nobody", "q"),
        lambda: client.get_handle("cl-nobody"),
        lambda: client.ownership_status("cl-nobody"),
    ):
        with pytest.raises(WorkflowNotFound) as info:
            call()
        assert info.value.workflow_id == "cl-nobody"
    assert not WorkflowRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_client_writes_join_the_callers_transaction(weft_env):
    with pytest.raises(RuntimeError), transaction.atomic():
        client.start("cl-echo", 1, workflow_id="cl-tx")
        raise RuntimeError("the view failed")
    assert not WorkflowRun.objects.filter(workflow_id="cl-tx").exists()

    client.start("cl-wait", None, workflow_id="cl-tx2")
    weft_env.run_until_idle()
    with pytest.raises(RuntimeError), transaction.atomic():
        client.signal("cl-tx2", "go", "rolled back")
        raise RuntimeError("the view failed")
    weft_env.run_until_idle()
    assert latest("cl-tx2").status == "parked"
    client.signal("cl-tx2", "go", "kept")
    weft_env.run_until_idle()
    assert latest("cl-tx2").result == "kept"


# -- ownership_status ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_ownership_status(weft_env):
    client.start("cl-wait", None, workflow_id="cl-own")
    status = client.ownership_status("cl-own")
    assert status == {
        "workflow_id": "cl-own",
        "status": "pending",
        "epoch": 0,
        "holder": None,
        "expired": False,
    }
    weft_env.run_until_idle()
    now = weft_env.clock.now
    ttl = weft_env.engine.settings.claim_ttl_ms
    status = client.ownership_status("cl-own")
    assert status == {
        "workflow_id": "cl-own",
        "status": "parked",
        "epoch": 1,
        "holder": {
            "engine_id": weft_env.engine.engine_id,
            "epoch": 1,
            "expires_at": now + ttl,
            "claimed_at": now,
        },
        "expired": False,
    }
    # Without renewal (no maintenance pass), the claim expires on the engine clock.
    grace = 2 * weft_env.engine.settings.claim_renew_interval_ms
    weft_env.advance((ttl + grace) / 1000)
    assert client.ownership_status("cl-own")["expired"] is False  # not strictly past yet
    weft_env.advance(0.001)
    assert client.ownership_status("cl-own")["expired"] is True
    weft_env.run_until_idle()  # renews its own claim
    assert client.ownership_status("cl-own")["expired"] is False
    client.signal("cl-own", "go", 1)
    weft_env.run_until_idle()
    status = client.ownership_status("cl-own")
    assert (status["status"], status["epoch"], status["holder"], status["expired"]) == (
        "completed",
        1,
        None,
        False,
    )


# -- ownership modes -----------------------------------------------------------------------------


def _drive_simple(engine: Engine, clock: ManualClock, workflow_id: str) -> None:
    h = client.start("cl-simple", {"name": f"flaky-{workflow_id}"}, workflow_id=workflow_id)
    engine.run_until_idle()
    assert h.status() == "parked"
    clock.advance(3_000)  # the activity's retry
    engine.run_until_idle()
    assert CALLS[f"flaky-{workflow_id}"] == 2
    clock.advance(9_999)
    engine.run_until_idle()
    client.signal(workflow_id, "extra", {"mode": engine.ownership})
    engine.run_until_idle()
    assert h.status() == "parked"  # still sleeping: the signal is buffered
    clock.advance(1)
    engine.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=0) == {
        "greeting": f"hello flaky-{workflow_id}",
        "child": {"echo": {"mode": engine.ownership}},
    }
    assert latest(f"{workflow_id}:3").status == "completed"
    assert JournalEntry.objects.filter(run_id=h.run_id).count() == 4


@pytest.mark.django_db(transaction=True)
def test_simple_workflow_under_workflow_lease():
    OwnershipModeMarker.objects.all().delete()
    clock = ManualClock()
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        _drive_simple(engine, clock, "cl-mode-wl")
    finally:
        engine.dispose(grace=0)
    assert OwnershipModeMarker.objects.get().mode == "workflow-lease"
    assert claim_events("cl-mode-wl") == [("acquire", 1), ("release", 1)]


@pytest.mark.django_db(transaction=True)
def test_simple_workflow_under_ownership_none():
    OwnershipModeMarker.objects.all().delete()
    clock = ManualClock()
    with override_settings(WEFT={"OWNERSHIP": "none"}):
        engine = Engine(clock=clock, background_tasks="manual", ownership="none").boot()
        try:
            assert engine.ownership == "none"
            _drive_simple(engine, clock, "cl-mode-none")
            # Cancel in "none" mode writes no claim rows either.
            client.start("cl-wait", None, workflow_id="cl-mode-none-2")
            engine.run_until_idle()
            client.cancel("cl-mode-none-2")
            engine.run_until_idle()
            assert latest("cl-mode-none-2").status == "cancelled"
        finally:
            engine.dispose(grace=0)
    assert not OwnershipModeMarker.objects.exists()  # "none" never stamps the store
    assert not ClaimEvent.objects.exists()
    assert not WorkflowClaim.objects.exclude(engine_id=None).exists()


@pytest.mark.django_db(transaction=True)
def test_simple_workflow_under_ownership_lease():
    OwnershipModeMarker.objects.all().delete()
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
            assert engine.ownership == "lease"
            lease = GlobalLease.objects.get()
            assert lease.holder_id == engine.engine_id
            _drive_simple(engine, clock, "cl-mode-lease")
        finally:
            engine.dispose(grace=0)
    assert OwnershipModeMarker.objects.get().mode == "lease"
    assert not ClaimEvent.objects.filter(workflow_id="cl-mode-lease").exists()


@pytest.mark.django_db(transaction=True)
def test_a_store_stamped_workflow_lease_refuses_other_modes():
    engine = Engine(clock=ManualClock(), background_tasks="manual").boot()
    engine.dispose(grace=0)
    assert OwnershipModeMarker.objects.get().mode == "workflow-lease"
    for mode in ("none", "lease"):
        other = Engine(clock=ManualClock(), background_tasks="manual", ownership=mode)
        with pytest.raises(OwnershipModeMismatchError) as info:
            other.boot()
        assert (info.value.configured_mode, info.value.stored_mode) == (mode, "workflow-lease")
