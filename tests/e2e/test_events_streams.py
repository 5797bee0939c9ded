"""Events and progress streams (issue #18 parts 1 and 2), on SQLite and PostgreSQL.

What could fail: a value written twice by a replay (a second journal entry
or a second row), a row with no journal entry behind it, a stream read out
of order or with a gap, a wait that misses a value set while it read, a wait
that never ends on a finished run, bad input that records something.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from weft_django import activity, client, workflow
from weft_django.engine.replay.machine import Replay
from weft_django.errors import (
    PayloadError,
    WorkflowFinishedError,
    WorkflowNotFound,
    WorkflowTimeoutError,
)
from weft_django.models import JournalEntry, StreamEntry, WorkflowEvent, WorkflowRun
from weft_django.transports.notify.aio import aclose_done_hubs

pytestmark = pytest.mark.django_db(transaction=True)


@activity(name="ev-step")
def ev_step(n: int) -> int:
    return n * 10


@workflow(name="ev-progress")
def ev_progress(ctx: Any, data: Any) -> Any:
    ctx.set_event("status", "started")
    for i in range(data["steps"]):
        ctx.write_stream("progress", {"step": i})
        yield ctx.run(ev_step, i)
    ctx.set_event("status", "done")
    ctx.set_event("url", "https://pay.example/1")
    ctx.close_stream("progress")
    ctx.close_stream("progress")  # twice: records nothing
    return "ok"


@workflow(name="ev-wait")
def ev_wait(ctx: Any, data: Any) -> Any:
    ctx.write_stream("log", "a")
    value = yield ctx.wait_for_signal("go")
    ctx.set_event("answer", value)
    ctx.write_stream("log", "b")
    yield ctx.wait_for_signal("end")
    return value


@workflow(name="ev-bad")
def ev_bad(ctx: Any, data: Any) -> Any:
    if data == "key":
        ctx.set_event("", 1)
    elif data == "value":
        ctx.set_event("k", {1, 2})
    elif data == "closed":
        ctx.close_stream("s")
        ctx.write_stream("s", 1)
    yield ctx.sleep(0)


def _kinds(workflow_id: str) -> list[tuple[str, str]]:
    return list(
        JournalEntry.objects.filter(run__workflow_id=workflow_id)
        .order_by("position")
        .values_list("kind", "target")
    )


def test_events_and_streams_are_recorded_once(weft_env: Any) -> None:
    handle = client.start("ev-progress", {"steps": 3}, workflow_id="ev-1")
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == "ok"
    assert client.get_events("ev-1") == {"status": "done", "url": "https://pay.example/1"}
    assert client.get_event("ev-1", "status") == "done"
    assert list(client.read_stream("ev-1", "progress")) == [{"step": i} for i in range(3)]
    assert list(client.read_stream("ev-1", "progress", offset=2)) == [{"step": 2}]
    kinds = [k for k in _kinds("ev-1") if k[0] in ("set-event", "stream-write", "stream-close")]
    assert kinds.count(("stream-close", "progress")) == 1
    assert kinds.count(("stream-write", "progress")) == 3
    assert kinds.count(("set-event", "status")) == 2
    offsets = list(StreamEntry.objects.order_by("offset").values_list("offset", "closed"))
    assert offsets == [(0, False), (1, False), (2, False), (3, True)]
    # Every row mirrors a journal entry at its position.
    positions = set(JournalEntry.objects.values_list("position", flat=True))
    assert set(StreamEntry.objects.values_list("position", flat=True)) <= positions
    assert set(WorkflowEvent.objects.values_list("position", flat=True)) <= positions


def test_a_replay_records_nothing_again(weft_env: Any) -> None:
    client.start("ev-progress", {"steps": 2}, workflow_id="ev-2")
    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(workflow_id="ev-2")
    from weft_django.engine.journal import load_events
    from weft_django.engine.workflow.definitions import get_workflow

    replay = Replay(
        get_workflow("ev-progress"),
        workflow_id="ev-2",
        run_id=str(run.pk),
        input=run.input,
        events=load_events(run.pk, "default"),
        clock_ms=lambda: 0,
    )
    replay.advance()
    assert replay.take_new_events() == []
    assert replay.ctx._streams.offsets == {"progress": 3}


def test_get_event_waits_for_a_set_in_another_thread(weft_env: Any) -> None:
    client.start("ev-wait", None, workflow_id="ev-3")
    weft_env.run_until_idle()
    got: list[Any] = []

    def waiter() -> None:
        try:
            got.append(client.get_event("ev-3", "answer", timeout=30))
        finally:
            connections.close_all()

    thread = threading.Thread(target=waiter)
    thread.start()
    client.signal("ev-3", "go", {"x": 1})
    weft_env.run_until_idle()
    thread.join(timeout=60)
    assert got == [{"x": 1}]


def test_read_stream_follows_until_the_run_ends(weft_env: Any) -> None:
    client.start("ev-wait", None, workflow_id="ev-4")
    weft_env.run_until_idle()
    seen: list[Any] = []

    def reader() -> None:
        try:
            seen.extend(client.read_stream("ev-4", "log"))
        finally:
            connections.close_all()

    thread = threading.Thread(target=reader)
    thread.start()
    client.signal("ev-4", "go", 1)
    weft_env.run_until_idle()
    client.signal("ev-4", "end", 1)
    weft_env.run_until_idle()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert seen == ["a", "b"]


def test_timeouts_and_finished_runs(weft_env: Any) -> None:
    client.start("ev-wait", None, workflow_id="ev-5")
    weft_env.run_until_idle()
    with pytest.raises(WorkflowTimeoutError, match="answer"):
        client.get_event("ev-5", "answer", timeout=0.05)
    client.cancel("ev-5")
    weft_env.run_until_idle()
    with pytest.raises(WorkflowFinishedError, match="finished") as info:
        client.get_event("ev-5", "answer", timeout=5)
    assert info.value.code == "workflow_finished"
    assert list(client.read_stream("ev-5", "log")) == ["a"]  # ended with the run


def test_bad_input(weft_env: Any) -> None:
    with pytest.raises(WorkflowNotFound):
        client.get_event("ev-none", "k")
    with pytest.raises(WorkflowNotFound):
        client.get_events("ev-none")
    with pytest.raises(WorkflowNotFound):
        client.read_stream("ev-none", "k")
    client.start("ev-wait", None, workflow_id="ev-6")
    with pytest.raises(PayloadError):
        client.get_event("ev-6", "x" * 101)
    with pytest.raises(ValueError, match="offset"):
        client.read_stream("ev-6", "log", offset=-1)
    for case in ("key", "value", "closed"):
        handle = client.start("ev-bad", case, workflow_id=f"ev-bad-{case}")
        weft_env.run_until_idle()
        assert handle.status() == "failed"
        assert handle.error()["type"] == "PayloadError"
    assert not WorkflowEvent.objects.filter(run__workflow_id__startswith="ev-bad").exists()
    assert not StreamEntry.objects.filter(run__workflow_id="ev-bad-key").exists()


def test_async_twins(weft_env: Any) -> None:
    client.start("ev-progress", {"steps": 2}, workflow_id="ev-7")
    weft_env.run_until_idle()

    async def read() -> tuple[Any, Any, list[Any]]:
        value = await client.aget_event("ev-7", "url", timeout=5)
        events = await client.aget_events("ev-7")
        items = [item async for item in client.aread_stream("ev-7", "progress")]
        await aclose_done_hubs()
        return value, events, items

    try:
        value, events, items = asyncio.run(read())
    finally:  # the twins' sync thread keeps a connection: close it (test db drop)
        asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())
    assert value == "https://pay.example/1"
    assert events["status"] == "done"
    assert items == [{"step": 0}, {"step": 1}]
