"""A stored payload that does not decode suspends its run at once, on every
path the engine reads one: an update's arguments, a child's result, a
schedule's input, a signal's payload. Never a failed run, never a retry
loop, never a guess: the run is ``suspended`` with a ``PayloadUnreadable``
naming the run and the position, and the tampered value stays as it was.

A heartbeat's details are the one payload the engine never reads (progress
is for people): a tampered beat leaves the run alone, it completes, and the
readers (admin, API) show it as unreadable rather than failing.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from weft_django import activity, activity_info, client, workflow
from weft_django.errors import WorkflowTimeoutError
from weft_django.models import (
    ActivityHeartbeat,
    JournalEntry,
    Schedule,
    SignalMessage,
    UpdateRequest,
    WorkflowRun,
)

MARKER = "UNREADABLE-MARKER-c41e"
KEY = Fernet.generate_key().decode()


@pytest.fixture
def encrypted(settings: Any) -> None:
    settings.WEFT = {
        **getattr(settings, "WEFT", {}),
        "PAYLOAD_CODECS": ["weft_django.codecs.Encrypt"],
        "ENCRYPTION_KEYS": [KEY],
    }


def tamper(model: Any, pk: Any, column: str) -> str:
    """Flip one character of the stored ciphertext of ``model.column`` at ``pk``
    (bypassing the field); the tampered envelope as stored."""
    table = connection.ops.quote_name(model._meta.db_table)
    col = connection.ops.quote_name(column)
    pk = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {col} FROM {table} WHERE {model._meta.pk.column} = %s", [pk])
        (stored,) = cursor.fetchone()
        envelope = json.loads(stored) if isinstance(stored, str) else stored
        text = envelope["text"]
        envelope["text"] = text[:40] + ("A" if text[40] != "A" else "B") + text[41:]
        tampered = json.dumps(envelope)
        cursor.execute(
            f"UPDATE {table} SET {col} = %s WHERE {model._meta.pk.column} = %s", [tampered, pk]
        )
    return tampered


def stored(model: Any, pk: Any, column: str) -> Any:
    table = connection.ops.quote_name(model._meta.db_table)
    pk = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {connection.ops.quote_name(column)} FROM {table} "
            f"WHERE {model._meta.pk.column} = %s",
            [pk],
        )
        (value,) = cursor.fetchone()
    return json.loads(value) if isinstance(value, str) else value


def assert_suspended_naming(run_id: Any, position: str) -> WorkflowRun:
    run = WorkflowRun.objects.get(pk=run_id)
    assert run.status == "suspended", (run.status, run.error)
    assert run.error["type"] == "PayloadUnreadable", run.error
    assert str(run_id) in run.error["message"], run.error
    assert position in run.error["message"], run.error
    assert MARKER not in json.dumps(run.error)
    assert run.turn_failures <= 1 and run.turn_retry_at is None  # no retry loop
    return run


def fresh_replays(weft_env: Any) -> None:
    if weft_env.engine.workflow_cache is not None:
        weft_env.engine.workflow_cache.clear()


# -- update arguments -----------------------------------------------------------------


@workflow(name="ur-cart")
def ur_cart(ctx: Any, data: Any) -> Any:
    items: list[Any] = []

    def add(item: Any) -> int:
        items.append(item)
        return len(items)

    ctx.on_update("add", add)
    yield ctx.wait_for_signal("close")
    return items


@pytest.mark.django_db(transaction=True)
def test_tampered_update_arguments_suspend_the_run(weft_env, encrypted):
    h = client.start("ur-cart", None, workflow_id="ur-update")
    weft_env.run_until_idle()
    with pytest.raises(WorkflowTimeoutError):  # timeout=0: only submitted
        client.update("ur-update", "add", {"item": MARKER}, timeout=0)
    request = UpdateRequest.objects.get(run_id=h.run_id)
    tampered = tamper(UpdateRequest, request.pk, "args")
    weft_env.run_until_idle()
    assert_suspended_naming(h.run_id, f"update 'add' ({request.update_id}) (args)")
    assert UpdateRequest.objects.get(pk=request.pk).consumed_at_position is None  # kept
    assert stored(UpdateRequest, request.pk, "args") == json.loads(tampered)


# -- a child's result -----------------------------------------------------------------


@workflow(name="ur-child")
def ur_child(ctx: Any, data: Any) -> Any:
    yield ctx.wait_for_signal("finish")
    return {"child": data}


@workflow(name="ur-parent")
def ur_parent(ctx: Any, data: Any) -> Any:
    result = yield ctx.start_child("ur-child", data, workflow_id="ur-kid")
    return {"parent": result}


@pytest.mark.django_db(transaction=True)
def test_a_tampered_child_result_suspends_the_parent(weft_env, encrypted):
    h = client.start("ur-parent", MARKER, workflow_id="ur-parent-1")
    weft_env.run_until_idle()
    child = WorkflowRun.objects.get(workflow_id="ur-kid")
    assert child.status == "parked"
    # The child's end as stored, with its result tampered with; a signal wakes
    # the parent, whose turn reads the ended child.
    WorkflowRun.objects.filter(pk=child.pk).update(status="completed", result={"c": MARKER})
    tampered = tamper(WorkflowRun, child.pk, "result")
    client.signal("ur-parent-1", "poke", None)
    weft_env.run_until_idle()
    assert_suspended_naming(h.run_id, "child 'ur-kid' (result)")
    assert stored(WorkflowRun, child.pk, "result") == json.loads(tampered)
    assert (
        not JournalEntry.objects.filter(run_id=h.run_id, kind="child").exclude(result=None).exists()
    )


# -- a schedule's input ---------------------------------------------------------------


@activity(name="ur-tick")
def ur_tick(data: Any) -> Any:
    return data


@workflow(name="ur-ticked")
def ur_ticked(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(ur_tick, data))


@pytest.mark.django_db(transaction=True)
def test_a_tampered_schedule_input_suspends_the_driver(weft_env, encrypted):
    client.create_schedule("ur-sched", "ur-ticked", {"m": MARKER}, every=timedelta(seconds=60))
    weft_env.run_until_idle()
    tamper(Schedule, "ur-sched", "input")
    weft_env.advance(timedelta(seconds=61))
    weft_env.run_until_idle()
    driver = WorkflowRun.objects.filter(name="weft.schedule").latest("created_at")
    assert_suspended_naming(driver.pk, "schedule 'ur-sched' (input)")
    assert not WorkflowRun.objects.filter(name="ur-ticked", status="failed").exists()


# -- a signal's payload ---------------------------------------------------------------


@workflow(name="ur-waiter")
def ur_waiter(ctx: Any, data: Any) -> Any:
    return (yield ctx.wait_for_signal("go"))


@pytest.mark.django_db(transaction=True)
def test_a_tampered_signal_payload_suspends_the_run(weft_env, encrypted):
    h = client.start("ur-waiter", None, workflow_id="ur-signal")
    weft_env.run_until_idle()
    # Buffered first, tampered, then the run is woken to read it.
    client.signal("ur-signal", "go", {"m": MARKER})
    message = SignalMessage.objects.get(run_id=h.run_id)
    tampered = tamper(SignalMessage, message.pk, "payload")
    fresh_replays(weft_env)
    weft_env.run_until_idle()
    assert_suspended_naming(h.run_id, f"signal 'go' #{message.pk}")
    kept = SignalMessage.objects.get(pk=message.pk)
    assert kept.consumed_at_position is None
    assert stored(SignalMessage, message.pk, "payload") == json.loads(tampered)


# -- heartbeat details (never read by the engine) ------------------------------------

BEATS: list[str] = []


@activity(name="ur-beating", retries=0)
def ur_beating(data: Any) -> Any:
    info = activity_info()
    info.heartbeat({"progress": MARKER})
    BEATS.append(info.run_id)
    return "done"


@workflow(name="ur-beat")
def ur_beat(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(ur_beating, 1)
    yield ctx.wait_for_signal("again")
    return first


@pytest.mark.django_db(transaction=True)
def test_tampered_heartbeat_details_are_never_fed_to_the_run(weft_env, encrypted):
    h = client.start("ur-beat", None, workflow_id="ur-heartbeat")
    weft_env.run_until_idle()
    beat = ActivityHeartbeat.objects.get(run_id=h.run_id)
    tamper(ActivityHeartbeat, beat.pk, "details")
    assert type(ActivityHeartbeat.objects.get(pk=beat.pk).details).__name__ == ("UnreadablePayload")
    fresh_replays(weft_env)
    client.signal("ur-heartbeat", "again", None)
    weft_env.run_until_idle()
    assert h.status() == "completed", h.error()
    assert h.result(timeout=1) == "done"
