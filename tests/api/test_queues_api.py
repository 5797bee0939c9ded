"""The API's flow-control fields: queue, priority and concurrency_key on start,
the waiting reason on a run's detail (issue #16)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.api.conftest import url
from weft_django.engine import Engine
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {"api-q": {"concurrency": 1}}


@override_settings(WEFT={"QUEUES": QUEUES})
def test_start_in_a_queue_and_the_waiting_reason(api: Any) -> None:
    body = {"name": "api-signal", "input": {"n": 1}, "queue": "api-q", "priority": 3}
    first = api.post(url("workflows/"), {**body, "workflow_id": "qa-1"}, format="json")
    assert first.status_code == 201, first.json()
    assert first.json()["queue"] == "api-q" and first.json()["priority"] == 3
    engine = Engine(background_tasks="manual").boot()
    try:
        engine.run_until_idle()
        second = api.post(
            url("workflows/"),
            {**body, "workflow_id": "qa-2", "concurrency_key": "tenant-1"},
            format="json",
        )
        assert second.status_code == 201, second.json()
        engine.run_until_idle()
        detail = api.get(url("workflows/qa-2/")).json()
        assert detail["status"] == "pending"
        assert detail["concurrency_key"] == "tenant-1"
        assert detail["waiting_reason"] == "waiting for a slot of queue 'api-q' (1/1 in use)"
        assert detail["waits"] == [
            {
                "kind": "queue_slot",
                "text": "waiting for a slot of queue 'api-q' (1/1 in use)",
                "queue": "api-q",
            }
        ]
        # qa-1 holds the slot and is parked on its signal: that is what it waits for now.
        assert api.get(url("workflows/qa-1/")).json()["waiting_reason"] == "signal 'go'"
    finally:
        engine.dispose(grace=0)


@override_settings(WEFT={"QUEUES": QUEUES})
def test_an_unknown_queue_is_a_400_naming_it_and_writes_nothing(api: Any) -> None:
    response = api.post(url("workflows/"), {"name": "api-signal", "queue": "nope"}, format="json")
    assert response.status_code == 400
    assert "'nope'" in json.dumps(response.json())
    bad_priority = api.post(
        url("workflows/"), {"name": "api-signal", "queue": "api-q", "priority": "x"}, format="json"
    )
    assert bad_priority.status_code == 400
    assert WorkflowRun.objects.count() == 0


def test_schema_describes_the_queue_fields() -> None:
    schema = json.loads(Client().get("/api/schema/", {"format": "json"}).content)
    components = schema["components"]["schemas"]
    start = components["StartWorkflow"]["properties"]
    assert {"queue", "priority", "concurrency_key"} <= set(start)
    detail = components["WorkflowDetail"]["properties"]
    assert {"queue", "priority", "concurrency_key", "waiting_reason"} <= set(detail)


@override_settings(WEFT={"QUEUES": QUEUES})
def test_admin_shows_the_queue_and_the_waiting_reason(django_user_model: Any) -> None:
    from weft_django import client as weft_client

    admin_user = django_user_model.objects.create_superuser("root", password="root-pw")
    browser = Client()
    browser.force_login(admin_user)
    engine = Engine(background_tasks="manual").boot()
    try:
        weft_client.start("api-signal", {"n": 1}, workflow_id="qa-adm-1", queue="api-q")
        engine.run_until_idle()
        weft_client.start("api-signal", {"n": 1}, workflow_id="qa-adm-2", queue="api-q")
        engine.run_until_idle()
        listing = browser.get("/admin/weft/workflowrun/", {"queue": "api-q"})
        assert listing.status_code == 200
        assert b"qa-adm-1" in listing.content and b"qa-adm-2" in listing.content
        run = WorkflowRun.objects.get(workflow_id="qa-adm-2")
        page = browser.get(f"/admin/weft/workflowrun/{run.pk}/change/")
        assert page.status_code == 200
        assert b"waiting for a slot of queue &#x27;api-q&#x27; (1/1 in use)" in page.content
    finally:
        engine.dispose(grace=0)
