"""``client.signal_with_start`` (issue #18 part 4), on SQLite and PostgreSQL.

What could fail: a second run for the id, a lost signal (the one delivered
with the start, or one that lost the race to start), a write for bad input,
a start that is not atomic with its signal (or with the caller's
transaction). The race test runs real threads on PostgreSQL, where the two
callers can both read "no live run" before either commits; on SQLite the
write lock serializes them and the outcome must be the same.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections, transaction

from tests.e2e.helpers import latest, row_counts
from weft_django import client, workflow
from weft_django.errors import PayloadError, UnknownWorkflowType, WorkflowAlreadyRunning
from weft_django.models import SignalMessage, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="sws-collect")
def sws_collect(ctx: Any, data: Any) -> Any:
    items = []
    for _ in range(data["count"]):
        items.append((yield ctx.wait_for_signal("add")))
    return {"input": data, "items": items}


@workflow(name="sws-other")
def sws_other(ctx: Any, data: Any) -> Any:
    yield ctx.wait_for_signal("never")


def _messages(workflow_id: str) -> list[Any]:
    return list(
        SignalMessage.objects.filter(run__workflow_id=workflow_id)
        .order_by("pk")
        .values_list("payload", flat=True)
    )


def test_starts_then_signals_the_same_run(weft_env: Any) -> None:
    first = client.signal_with_start("sws-collect", {"count": 2}, "sws-1", "add", 1)
    assert isinstance(first, client.WorkflowHandle)
    run = latest("sws-1")
    assert (run.status, run.input, str(run.pk)) == ("pending", {"count": 2}, first.run_id)
    second = client.signal_with_start("sws-collect", {"count": 99}, "sws-1", "add", 2)
    assert second == first  # the live run: signalled, its input untouched
    assert WorkflowRun.objects.filter(workflow_id="sws-1").count() == 1
    assert _messages("sws-1") == [1, 2]
    weft_env.run_until_idle()
    assert first.result(timeout=1) == {"input": {"count": 2}, "items": [1, 2]}


def test_a_finished_run_is_followed_by_a_new_one(weft_env: Any) -> None:
    old = client.signal_with_start("sws-collect", {"count": 1}, "sws-2", "add", "a")
    weft_env.run_until_idle()
    assert old.result(timeout=1)["items"] == ["a"]
    new = client.signal_with_start("sws-collect", {"count": 1}, "sws-2", "add", "b")
    assert new.run_id != old.run_id
    weft_env.run_until_idle()
    assert new.result(timeout=1) == {"input": {"count": 1}, "items": ["b"]}


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("sws-nope", None, "sws-3", "add", 1), UnknownWorkflowType, "sws-nope"),
        (("sws-collect", None, "bad id!", "add", 1), ValueError, "bad id!"),
        (("sws-collect", None, "sws-3", "", 1), ValueError, "signal name"),
        (("sws-collect", None, "sws-3", "add", {1, 2}), PayloadError, "payload of signal"),
        (("sws-collect", object(), "sws-3", "add", 1), PayloadError, "workflow input"),
    ],
)
def test_bad_input_is_refused_with_nothing_written(args: Any, error: Any, match: str) -> None:
    before = row_counts()
    with pytest.raises(error, match=match):
        client.signal_with_start(*args)
    assert row_counts() == before


def test_a_live_run_of_another_workflow_is_not_signalled() -> None:
    client.start("sws-other", None, workflow_id="sws-4")
    before = row_counts()
    with pytest.raises(WorkflowAlreadyRunning, match="sws-4"):
        client.signal_with_start("sws-collect", {"count": 1}, "sws-4", "add", 1)
    assert row_counts() == before


def test_it_is_atomic_with_the_callers_transaction() -> None:
    before = row_counts()
    with pytest.raises(RuntimeError), transaction.atomic():
        client.signal_with_start("sws-collect", {"count": 1}, "sws-5", "add", 1)
        raise RuntimeError("the caller rolls back")
    assert row_counts() == before


def test_asignal_with_start(weft_env: Any) -> None:
    async def both() -> tuple[Any, Any]:
        a = await client.asignal_with_start("sws-collect", {"count": 2}, "sws-6", "add", "x")
        b = await client.asignal_with_start("sws-collect", {"count": 2}, "sws-6", "add", "y")
        await sync_to_async(connections.close_all)()
        return a, b

    a, b = asyncio.run(both())
    assert a == b
    weft_env.run_until_idle()
    assert a.result(timeout=1)["items"] == ["x", "y"]


ROUNDS = 10


def test_two_racing_callers_make_one_run_with_both_signals(monkeypatch: Any) -> None:
    """Real threads, each with its own connection. Each round forces the worst
    interleaving: both callers read "no live run" and build a start before
    either commits (a barrier in ``_start_signalled``), so one start batch
    must be refused and that caller must signal the winner's run instead."""
    from weft_django.engine.operations import signal_with_start as module

    real = module._start_signalled
    starts: list[str] = []
    gates: dict[str, threading.Barrier] = {}

    def raced(*args: Any) -> Any:
        prepared = real(*args)
        workflow_id = args[0].workflow_id  # the checked start (``operations.start.NewRun``)
        starts.append(workflow_id)
        gates[workflow_id].wait(timeout=10)  # both built a start: now both commit
        return prepared

    monkeypatch.setattr(module, "_start_signalled", raced)
    errors: list[BaseException] = []
    for n in range(ROUNDS):
        workflow_id = f"sws-race-{n}"
        gates[workflow_id] = threading.Barrier(2)
        handles: list[Any] = []

        def caller(payload: str, wid: str = workflow_id, out: list[Any] = handles) -> None:
            try:
                out.append(
                    client.signal_with_start("sws-collect", {"count": 2}, wid, "add", payload)
                )
            except BaseException as exc:  # reported below, with the round
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=caller, args=(p,)) for p in ("left", "right")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert not errors, (n, errors)
        assert starts.count(workflow_id) == 2, (n, starts)  # both tried to start
        assert len(handles) == 2 and handles[0] == handles[1], (n, handles)
        runs = WorkflowRun.objects.filter(workflow_id=workflow_id)
        assert runs.count() == 1, (n, list(runs.values_list("pk", "status")))
        assert sorted(_messages(workflow_id)) == ["left", "right"], n
