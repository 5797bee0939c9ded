"""A freed slot announces a pickup wake for the queue's next waiting run.

Protects: the commit that ends a queued run (its end, or a stop such as a
cancel) announces ``start`` for the oldest highest-priority pending run of
that queue -- the wake that sends a listening engine to admit it at once --
and a run without a queue announces none.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from weft_django import client, workflow
from weft_django.engine import Engine
from weft_django.engine.queues import freed
from weft_django.models import WorkflowRun

QUEUES = {"sf-q": {"concurrency": 1}}


@workflow(name="sf-wait")
def sf_wait(ctx, data):
    return (yield ctx.wait_for_signal("go"))


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def announced(monkeypatch):
    seen: list = []
    monkeypatch.setattr(freed, "announce", seen.append)
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield seen


def test_an_end_and_a_cancel_wake_the_next_waiting_run(clock, announced):
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        client.start("sf-wait", None, workflow_id="sf-0", queue="sf-q")
        client.start("sf-wait", None, workflow_id="sf-1", queue="sf-q")
        client.start("sf-wait", None, workflow_id="sf-2", queue="sf-q", priority=5)
        client.start("sf-wait", None, workflow_id="sf-free")  # no queue
        engine.run_until_idle()
        assert WorkflowRun.objects.get(workflow_id="sf-2").status == "parked"
        client.signal("sf-free", "go", 1)
        engine.run_until_idle()
        assert announced == []  # a run without a queue frees no slot
        client.signal("sf-2", "go", 1)
        engine.run_until_idle()
        assert [(w.event, w.workflow_id) for w in announced] == [("start", "sf-0")]
        client.cancel("sf-0")
        assert [(w.event, w.workflow_id) for w in announced][1:] == [("start", "sf-1")]
    finally:
        engine.dispose(grace=0)
