"""Every start is the one start write (``engine.operations.start``).

Protects: a run started by ``client.start``, ``signal_with_start``, a
schedule's tick, ``trigger_schedule`` and ``backfill_schedule`` holds what
its workflow declares -- its ``@workflow(queue=...)`` -- so flow control
applies whichever door started it; and a start that names its own queue
keeps it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from weft_django import client, workflow
from weft_django.models import WorkflowRun
from weft_django.testing import WorkflowTestEnvironment

QUEUES = {"sp-declared": {"concurrency": 50}, "sp-named": {"concurrency": 50}}


@workflow(name="sp-queued", queue="sp-declared")
def sp_queued(ctx, data):
    got = yield ctx.wait_for_signal("go")
    return got


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def env():
    with override_settings(WEFT={"QUEUES": QUEUES}):
        environment = WorkflowTestEnvironment()
        environment.clock.set_ms(1_800_000_000_000)
        try:
            yield environment
        finally:
            environment.close()


def _queues(prefix: str) -> set[str | None]:
    runs = WorkflowRun.objects.filter(workflow_id__startswith=prefix)
    return set(runs.values_list("queue", flat=True))


def test_client_start_and_signal_with_start_join_the_declared_queue(env) -> None:
    assert client.start("sp-queued", None, workflow_id="sp-client").status() == "pending"
    client.signal_with_start("sp-queued", None, "sp-sws", "go", 1)
    client.start("sp-queued", None, workflow_id="sp-named", queue="sp-named")
    assert _queues("sp-client") == {"sp-declared"}
    assert _queues("sp-sws") == {"sp-declared"}  # it started with no queue before
    assert _queues("sp-named") == {"sp-named"}


def test_schedule_starts_join_the_declared_queue(env) -> None:
    client.create_schedule("sp", "sp-queued", every=1, overlap="allow")
    env.run_until_idle()  # the driver's first step
    env.advance(1.0)
    env.run_until_idle()  # a tick fires
    client.trigger_schedule("sp")
    base = 1_800_000_000_000
    start = datetime.fromtimestamp((base + 5000) / 1000, UTC)
    end = datetime.fromtimestamp((base + 6000) / 1000, UTC)
    assert len(client.backfill_schedule("sp", start, end)) == 2
    runs = WorkflowRun.objects.filter(workflow_id__startswith="sp@")
    assert runs.filter(workflow_id__contains="-t").count() == 1  # the trigger's
    assert runs.filter(idempotency_key__isnull=False).count() >= 3  # ticks and backfills
    # Before the one start write, a schedule's runs had no queue at all.
    assert set(runs.values_list("queue", flat=True)) == {"sp-declared"}
