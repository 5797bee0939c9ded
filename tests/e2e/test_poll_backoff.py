"""A LISTENing engine's idle passes back off, and work still reaches it at once.

Each started engine here has its backed-off gap capped at an hour
(``IDLE_POLL_CAP_MS`` patched, renew interval long): a pass that came only
because the gap ran out would never come within the test, so a finished
run shows the wake, the turn's ``poll_soon`` or the due-work bound brought
it. ``due_in_ms`` is checked against rows on a fake clock. The backing off
needs LISTEN: PostgreSQL only; the ``--no-listen`` engine keeps polling.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from tests.support import ManualClock, wait_for
from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.engine.scheduling import cadence as poll_cadence
from weft_django.engine.scheduling.local import LocalScheduler
from weft_django.models import WorkflowRun

HOUR_S = 3600


@workflow(name="backoff-nap")
def backoff_nap(ctx: Any, data: dict[str, Any]) -> Any:
    yield ctx.sleep(float(data["sleep"]))
    return "rested"


def _pg() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("backing off needs LISTEN/NOTIFY (PostgreSQL)")


class CountedPasses:
    """The engine's full pass, counted (wrapped before ``start``)."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        self._pass = engine._tasks.poll
        engine._tasks.poll = self

    def __call__(self) -> object:
        self.count += 1
        return self._pass()


@pytest.fixture
def idle_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    _pg()
    monkeypatch.setattr(poll_cadence, "IDLE_POLL_CAP_MS", HOUR_S * 1000)
    engine = Engine(poll_interval=0.05, claim_renew_interval=HOUR_S, claim_ttl=3 * HOUR_S)
    passes = CountedPasses(engine)
    cadence = engine._tasks.cadence
    assert cadence is not None
    engine.start()
    try:
        # Backing off on its own (LISTEN up, nothing found) ...
        wait_for("the idle engine to back off", lambda: cadence.gap_ms >= 400)
        # ... then straight to the hour: after the next pass, none by itself.
        for _ in range(40):
            cadence.after_pass(found_work=False, allowed=True, due_in_ms=None)
        seen = passes.count
        wait_for("the pass that takes the hour's gap", lambda: passes.count > seen)
        assert cadence.gap_ms == HOUR_S * 1000
        yield engine
    finally:
        engine.dispose(grace=5)


@pytest.mark.django_db(transaction=True)
def test_a_start_and_a_signal_reach_a_backed_off_engine(idle_engine: Engine) -> None:
    handle = client.start("signal-wait", {}, workflow_id="backoff-signal")
    wait_for("the run to park", lambda: handle.status() == "parked")
    client.signal("backoff-signal", "go", 7)
    assert handle.result(timeout=30) == 7


@pytest.mark.django_db(transaction=True)
def test_a_durable_sleep_fires_on_a_backed_off_engine(idle_engine: Engine) -> None:
    handle = client.start("backoff-nap", {"sleep": 0.3}, workflow_id="backoff-sleep")
    assert handle.result(timeout=30) == "rested"


@pytest.mark.django_db(transaction=True)
def test_an_engine_that_does_not_listen_never_backs_off() -> None:
    engine = Engine(scheduler=LocalScheduler(listens=False), poll_interval=0.05)
    assert engine._tasks.cadence is None


@pytest.mark.django_db(transaction=True)
def test_due_in_is_the_earliest_known_due_work() -> None:
    clock = ManualClock(start=1_000_000)
    engine = Engine(clock=clock)
    assert engine.maintenance.due_in_ms() is None
    WorkflowRun.objects.create(
        workflow_id="due-parked", name="signal-wait", status="parked", wake_at=1_009_000
    )
    WorkflowRun.objects.create(
        workflow_id="due-delayed", name="signal-wait", status="pending", start_at=1_004_000
    )
    # Terminal runs and a running run's stale wake_at are no due work.
    WorkflowRun.objects.create(
        workflow_id="due-done", name="signal-wait", status="completed", deadline_at=1_000_001
    )
    WorkflowRun.objects.create(
        workflow_id="due-running", name="signal-wait", status="running", wake_at=1_000_002
    )
    assert engine.maintenance.due_in_ms() == 4_000
    clock.advance(5_000)
    assert engine.maintenance.due_in_ms() == 0
