"""``activity_info()`` (issue #14 item 3, first half): what a running activity knows.

Checked: the workflow id, run id, journal position, the 1-based attempt
across a retry, the claim epoch, the idempotency key (the same across
attempts and across a takeover by another engine), and the deadline (only
with a timeout, also on the timeout thread).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from tests.e2e.helpers import claim_events, latest
from weft_django import ActivityInfo, activity, activity_info, client, workflow
from weft_django.engine import Engine

INFOS: list[tuple[ActivityInfo, str]] = []
FAIL_FIRST: set[str] = set()


def record() -> ActivityInfo:
    info = activity_info()
    INFOS.append((info, threading.current_thread().name))
    return info


@activity(name="info-plain")
def plain(tag: str) -> dict:
    info = record()
    return {"tag": tag, "key": info.idempotency_key, "attempt": info.attempt}


@activity(name="info-flaky", retries=2, backoff=timedelta(seconds=1))
def flaky() -> str:
    info = record()
    if info.attempt == 1:
        raise ConnectionError("provider unavailable")
    return info.idempotency_key


@activity(name="info-timed", timeout=timedelta(seconds=5))
def timed() -> str:
    return record().idempotency_key


@workflow(name="info-flow")
def info_flow(ctx, data):
    first = yield ctx.run(plain, "a")
    key = yield ctx.run(flaky)
    stamp = yield ctx.run(timed)
    return {"first": first, "key": key, "timed": stamp}


def test_outside_an_activity_it_is_a_clear_runtime_error():
    with pytest.raises(RuntimeError, match="outside a running activity"):
        activity_info()


def test_the_info_is_frozen():
    info = ActivityInfo("w", "r", 0, 1, 1, "w:0", None)
    with pytest.raises(AttributeError):
        info.attempt = 2  # type: ignore[misc]


@pytest.mark.django_db(transaction=True)
def test_info_position_attempt_epoch_key_and_deadline(clock):
    INFOS.clear()
    engine = Engine(clock=clock, background_tasks="manual").boot()
    began_ms = time.time() * 1000
    try:
        handle = client.start("info-flow", {}, workflow_id="info-1")
        engine.run_until_idle()
        assert handle.status() == "parked", handle.error()  # flaky's retry timer
        clock.advance(1_001)
        engine.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        ended_ms = time.time() * 1000
        engine.dispose(grace=0)
    run = latest("info-1")
    epoch = claim_events("info-1")[0][1]
    infos = [info for info, _ in INFOS]
    assert [i.position for i in infos] == [0, 1, 1, 2]
    assert [i.attempt for i in infos] == [1, 1, 2, 1]
    for info in infos:
        assert info.workflow_id == "info-1"
        assert info.run_id == str(run.pk)
        assert info.epoch == epoch
        assert info.idempotency_key == f"info-1:{info.position}"
    assert infos[1].idempotency_key == infos[2].idempotency_key
    assert [i.deadline for i in infos[:3]] == [None, None, None]
    # the timed attempt ran on its own thread, with the context copied in
    timed_info, thread_name = INFOS[3]
    assert thread_name.startswith("weft-activity-")
    # An attempt's deadline is real time (a fake engine clock does not stop it).
    deadline_ms = timed_info.deadline.timestamp() * 1000
    assert began_ms + 5_000 - 1 <= deadline_ms <= ended_ms + 5_000 + 1
    assert timed_info.deadline.tzinfo is not None
    assert handle.result(timeout=1) == {
        "first": {"tag": "a", "key": "info-1:0", "attempt": 1},
        "key": "info-1:1",
        "timed": "info-1:2",
    }
    with pytest.raises(RuntimeError):  # the scope ended with the attempt
        activity_info()


@workflow(name="info-takeover")
def info_takeover(ctx, data):
    key = yield ctx.run(flaky)
    return key


@pytest.mark.django_db(transaction=True)
def test_the_key_survives_a_takeover_by_another_engine(clock):
    """Attempt 1 fails under engine A, which then goes silent; engine B takes
    the expired claim and runs attempt 2 under a new epoch, with the same key."""
    INFOS.clear()
    first = Engine("info-engine-a", clock=clock, background_tasks="manual").boot()
    second = Engine("info-engine-b", clock=clock, background_tasks="manual")
    try:
        handle = client.start("info-takeover", {}, workflow_id="info-2")
        first.run_until_idle()
        assert handle.status() == "parked", handle.error()
        assert len(INFOS) == 1
        # engine A stops renewing: its claim expires, and the takeover grace passes
        settings = first.settings
        clock.advance(settings.claim_ttl_ms + 10 * settings.claim_renew_interval_ms)
        second.boot()
        second.run_until_idle()
        assert handle.status() == "completed", handle.error()
    finally:
        second.dispose(grace=0)
        first.dispose(grace=0)
    (a, _), (b, _) = INFOS
    assert (a.attempt, b.attempt) == (1, 2)
    assert b.epoch > a.epoch
    assert claim_events("info-2") == [
        ("acquire", a.epoch),
        ("takeover", b.epoch),
        ("release", b.epoch),
    ]
    assert a.idempotency_key == b.idempotency_key == "info-2:0"
    assert handle.result(timeout=1) == "info-2:0"
