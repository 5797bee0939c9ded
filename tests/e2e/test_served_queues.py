"""Engines that serve chosen queues (``weft_worker --queues`` / ``--exclude-queues``).

Protects: an engine admits runs only of the queues it serves and names them
in its record; a queue whose waiting runs no live engine serves is reported
by ``weft_status`` (``cluster_status``) and the deploy check ``weft.W036``;
``--queues`` / ``--exclude-queues`` naming an undeclared queue is refused
by name before any engine exists.
"""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from weft_django import client, workflow
from weft_django.checks.queues import check_unserved_queues
from weft_django.engine import Engine
from weft_django.engine.queues.serving import parse_served
from weft_django.inspection.queues import unserved_queues
from weft_django.inspection.status import cluster_status
from weft_django.models import EngineRecord, WorkflowRun

QUEUES = {"sq-a": {}, "sq-b": {}, "sq-c": {}}


@workflow(name="sq-echo")
def sq_echo(ctx, data):
    return data
    yield


pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _queues():
    with override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def _statuses(queue: str) -> list[str]:
    return sorted(WorkflowRun.objects.filter(queue=queue).values_list("status", flat=True))


def test_an_engine_admits_only_its_queues_and_the_rest_is_reported(clock):
    only_a = Engine(clock=clock, background_tasks="manual", engine_id="sq-only-a")
    only_a.served_queues = parse_served(QUEUES, "sq-a")
    only_a.boot()
    try:
        for queue in ("sq-a", "sq-b", "sq-b"):
            client.start("sq-echo", queue, queue=queue)
        only_a.run_until_idle()
        assert _statuses("sq-a") == ["completed"]
        assert _statuses("sq-b") == ["pending", "pending"]
        assert EngineRecord.objects.get(pk="sq-only-a").queues == ["sq-a"]
        assert unserved_queues(clock()) == {"sq-b": 2}
        status = cluster_status(clock())
        assert status.to_json()["unserved_queues"] == {"sq-b": 2}
        assert any("'sq-b' has 2 waiting" in p for p in status.problems(60.0))
        warnings = check_unserved_queues()
        assert [w.id for w in warnings] == ["weft.W036"] and "'sq-b'" in warnings[0].msg
        every = Engine(clock=clock, background_tasks="manual", engine_id="sq-every").boot()
        try:
            assert unserved_queues(clock()) == {}
            every.run_until_idle()
            assert _statuses("sq-b") == ["completed", "completed"]
        finally:
            every.dispose(grace=0)
    finally:
        only_a.dispose(grace=0)


def test_exclude_queues():
    assert parse_served(QUEUES, None, "sq-b") == {"sq-a", "sq-c"}
    assert parse_served(QUEUES, "sq-a,sq-b", "sq-b") == {"sq-a"}
    assert parse_served(QUEUES) is None


@pytest.mark.parametrize("flag", ["--queues", "--exclude-queues"])
def test_an_undeclared_queue_is_refused_by_name(flag):
    with pytest.raises(CommandError, match="'sq-nope'"):
        call_command("weft_worker", flag, "sq-a,sq-nope")
    assert not EngineRecord.objects.exists()
