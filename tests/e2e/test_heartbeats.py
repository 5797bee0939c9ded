"""``heartbeat_sink`` (issue #14 item 3): durable heartbeats, fenced, version-neutral.

A real engine drives a workflow to a signal wait and keeps its claim; the
sink of an activity attempt at position 0 then writes as that engine would.
Checked: the row (details, attempt, beat time, engine, epoch) and its upsert
per ``(run, position)``; the run's ``version`` and ``wake_seq`` untouched,
so the turn that follows still commits; after a cancel, a suspend, a force
release or a forgotten claim the write is refused with the reason the
activity sees; a purge deletes the rows with the run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.helpers import claim_epoch, latest
from tests.support import ManualClock
from weft_django import ActivityCancelled, client, workflow
from weft_django.engine import Engine
from weft_django.engine.activities.heartbeats import (
    CLAIM_LOST,
    close_heartbeat_thread,
    heartbeat_sink,
)
from weft_django.models import ActivityHeartbeat, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


@workflow(name="beat-wait")
def beat_wait(ctx, data):
    return (yield ctx.wait_for_signal("go"))


@pytest.fixture
def engine(clock: ManualClock) -> Iterator[Engine]:
    engine = Engine("beat-engine", clock=clock, background_tasks="manual").boot()
    try:
        yield engine
    finally:
        engine.dispose(grace=0)


def parked(engine: Engine, workflow_id: str) -> WorkflowRun:
    client.start("beat-wait", {}, workflow_id=workflow_id)
    engine.run_until_idle()
    run = latest(workflow_id)
    assert run.status == "parked", run.error
    return run


def test_a_heartbeat_is_stored_and_replaced_without_touching_the_run(
    engine: Engine, clock: ManualClock
) -> None:
    run = parked(engine, "beat-1")
    before = (run.version, run.wake_seq, run.parked_seq, run.status)
    first = heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-1", position=0, attempt=1)
    first({"rows": 10})
    row = ActivityHeartbeat.objects.get(run=run, position=0)
    assert (row.attempt, row.details, row.beat_at) == (1, {"rows": 10}, clock.now)
    assert (row.engine_id, row.epoch) == ("beat-engine", claim_epoch("beat-1"))

    clock.advance(1_500)
    second = heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-1", position=0, attempt=2)
    second({"rows": 20})
    second(None)
    [row] = ActivityHeartbeat.objects.filter(run=run)  # one row per (run, position)
    assert (row.attempt, row.details, row.beat_at) == (2, None, clock.now)
    heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-1", position=1, attempt=1)([1])
    assert list(ActivityHeartbeat.objects.filter(run=run).values_list("position", "details")) == [
        (0, None),
        (1, [1]),
    ]

    run.refresh_from_db()
    assert (run.version, run.wake_seq, run.parked_seq, run.status) == before
    # The turn's own write of the run is not disturbed by the heartbeats.
    client.signal("beat-1", "go", {"ok": True})
    engine.run_until_idle()
    assert latest("beat-1").status == "completed"
    assert latest("beat-1").result == {"ok": True}


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        (lambda wid: client.cancel(wid, "stop it"), "run is cancelled"),
        (lambda wid: client.suspend(wid, "hold on"), "run is suspended"),
    ],
    ids=["cancel", "suspend"],
)
def test_a_stopped_run_refuses_the_heartbeat(engine: Engine, stop, reason: str) -> None:
    run = parked(engine, "beat-stop")
    sink = heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-stop", position=0, attempt=1)
    sink({"step": 1})
    stop("beat-stop")
    with pytest.raises(ActivityCancelled) as caught:
        sink({"step": 2})
    assert caught.value.reason == reason
    assert caught.value.workflow_id == "beat-stop"
    assert reason in str(caught.value)
    assert ActivityHeartbeat.objects.get(run=run).details == {"step": 1}, "nothing written"


def test_a_force_released_claim_refuses_the_heartbeat(engine: Engine) -> None:
    run = parked(engine, "beat-released")
    sink = heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-released", position=0, attempt=1)
    sink({"step": 1})
    client.force_release("beat-released")
    assert latest("beat-released").status == "parked"  # the run is still drivable
    with pytest.raises(ActivityCancelled) as caught:
        sink({"step": 2})
    assert caught.value.reason == CLAIM_LOST
    assert ActivityHeartbeat.objects.get(run=run).details == {"step": 1}


def test_a_claim_the_engine_no_longer_tracks_refuses_the_heartbeat(engine: Engine) -> None:
    run = parked(engine, "beat-forgotten")
    assert engine.registry is not None
    engine.registry.forget("beat-forgotten")
    sink = heartbeat_sink(
        engine, run_id=run.pk, workflow_id="beat-forgotten", position=0, attempt=1
    )
    with pytest.raises(ActivityCancelled, match=CLAIM_LOST):
        sink({"step": 1})
    assert not ActivityHeartbeat.objects.exists()


def test_another_engines_heartbeat_is_refused(engine: Engine, clock: ManualClock) -> None:
    run = parked(engine, "beat-other")
    other = Engine("beat-intruder", clock=clock, background_tasks="manual").boot()
    try:
        sink = heartbeat_sink(other, run_id=run.pk, workflow_id="beat-other", position=0, attempt=1)
        with pytest.raises(ActivityCancelled, match=CLAIM_LOST):
            sink({"step": 1})
    finally:
        other.dispose(grace=0)
    assert not ActivityHeartbeat.objects.exists()


def test_purge_deletes_the_heartbeats_with_the_run(engine: Engine) -> None:
    run = parked(engine, "beat-purged")
    heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-purged", position=0, attempt=1)({})
    client.cancel("beat-purged", "done with it")
    assert ActivityHeartbeat.objects.filter(run=run).exists()
    assert client.purge("beat-purged") == 1
    assert not ActivityHeartbeat.objects.exists()


def test_an_async_activitys_heartbeat_is_written_off_the_event_loop(engine: Engine) -> None:
    """On an event loop Django refuses ORM calls; the sink writes on its own
    thread and still raises the refusal at the call."""
    run = parked(engine, "beat-async")
    sink = heartbeat_sink(engine, run_id=run.pk, workflow_id="beat-async", position=0, attempt=1)

    async def beat(details: Any) -> None:
        sink(details)

    try:
        asyncio.run(beat({"step": 1}))
        assert ActivityHeartbeat.objects.get(run=run).details == {"step": 1}
        client.cancel("beat-async", "stop it")
        with pytest.raises(ActivityCancelled, match="run is cancelled"):
            asyncio.run(beat({"step": 2}))
        assert ActivityHeartbeat.objects.get(run=run).details == {"step": 1}
    finally:
        close_heartbeat_thread()
    assert not [t for t in threading.enumerate() if t.name.startswith("weft-heartbeat")]
