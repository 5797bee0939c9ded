"""``client.start(..., on_conflict=...)``: ``"use-existing"`` and ``"terminate-existing"``.

Protects: ``use-existing`` returns a live run's handle and writes nothing,
starts a new run after a finished one, and two concurrent callers on a free
id get the same one run; ``terminate-existing`` ends the live run
``terminated`` with its children cancelled, then starts, and two concurrent
callers leave exactly one live run; an unknown policy is refused by name
with nothing written.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.errors import InvalidArgumentError
from weft_django.models import LIVE_STATUSES, WorkflowRun

pytestmark = [pytest.mark.django_db(transaction=True)]


@workflow(name="oc-wait")
def oc_wait(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return [data, got]


@workflow(name="oc-parent")
def oc_parent(ctx, data):
    return (yield ctx.start_child("oc-wait", data, "oc-kid"))


def _runs(wid: str) -> list[WorkflowRun]:
    return list(WorkflowRun.objects.filter(workflow_id=wid).order_by("created_at"))


def _together(call, n: int = 2) -> list:
    """``call()`` from ``n`` threads released together (each its own connection)."""
    barrier = threading.Barrier(n)
    out: list = [None] * n

    def one(i: int) -> None:
        try:
            barrier.wait()
            out[i] = call()
        except Exception as exc:  # reported by the assertion below
            out[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return out


def test_use_existing_returns_the_live_run_then_starts_after_it_ended(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        first = client.start("oc-wait", 1, workflow_id="ue")
        again = client.start("oc-wait", 2, workflow_id="ue", on_conflict="use-existing")
        assert again.run_id == first.run_id and len(_runs("ue")) == 1
        engine.run_until_idle()
        client.signal("ue", "go", "x")
        engine.run_until_idle()
        assert first.result(timeout=0) == [1, "x"]
        fresh = client.start("oc-wait", 3, workflow_id="ue", on_conflict="use-existing")
        assert fresh.run_id != first.run_id
        assert [r.status for r in _runs("ue")] == ["completed", "pending"]
    finally:
        engine.dispose(grace=0)


def test_terminate_existing_ends_the_live_run_and_its_children(clock):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        old = client.start("oc-parent", 1, workflow_id="te")
        engine.run_until_idle()
        assert _runs("oc-kid")[0].status == "parked"
        new = client.start("oc-parent", 2, workflow_id="te", on_conflict="terminate-existing")
        assert new.run_id != old.run_id
        runs = _runs("te")
        assert [r.status for r in runs] == ["terminated", "pending"]
        assert runs[0].error["type"] == "Terminated"
        assert _runs("oc-kid")[0].status == "cancelled"
    finally:
        engine.dispose(grace=0)


def test_two_callers_use_existing_get_one_run():
    got = _together(
        lambda: client.start("oc-wait", None, workflow_id="ue2", on_conflict="use-existing")
    )
    assert all(not isinstance(g, Exception) for g in got), got
    assert got[0].run_id == got[1].run_id
    assert len(_runs("ue2")) == 1


def test_two_callers_terminate_existing_leave_one_live_run():
    old = client.start("oc-wait", 0, workflow_id="te2")
    got = _together(
        lambda: client.start("oc-wait", None, workflow_id="te2", on_conflict="terminate-existing")
    )
    assert all(not isinstance(g, Exception) for g in got), got
    runs = _runs("te2")
    live = [r for r in runs if r.status in LIVE_STATUSES]
    assert len(live) == 1 and str(live[0].pk) in {g.run_id for g in got}
    assert {r.status for r in runs if r.status not in LIVE_STATUSES} == {"terminated"}
    assert next(r for r in runs if str(r.pk) == old.run_id).status == "terminated"


def test_an_unknown_policy_is_refused_by_name():
    with pytest.raises(InvalidArgumentError, match="replace-existing"):
        client.start("oc-wait", None, workflow_id="bad", on_conflict="replace-existing")
    assert _runs("bad") == []
