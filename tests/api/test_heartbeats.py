"""Activity progress in the API: the run detail carries its heartbeats.

The heartbeat is written by ``heartbeat_sink`` for the engine that owns the
run, as an activity's ``activity_info().heartbeat(details)`` would; the
detail view (and only it: lists stay cheap) shows every activity command's
latest heartbeat by position, and the OpenAPI schema describes the field.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

import tests.api.workflows  # noqa: F401  (registers the workflows)
from tests.api.conftest import url
from weft_django.engine.activities.heartbeats import heartbeat_sink
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_detail_shows_each_activitys_latest_heartbeat(api: Any, weft_env: Any) -> None:
    response = api.post(
        url("workflows/"), {"name": "api-signal", "workflow_id": "beat-api"}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["heartbeats"] == []
    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(workflow_id="beat-api")
    engine = weft_env.engine
    for position, attempt, details in [
        (2, 1, {"stage": "copy", "done": 3}),
        (0, 1, {"done": 1}),
        (0, 2, {"done": 7, "of": 10}),
    ]:
        sink = heartbeat_sink(
            engine, run_id=run.pk, workflow_id="beat-api", position=position, attempt=attempt
        )
        sink(details)

    detail = api.get(url("workflows/beat-api/")).json()
    epoch = detail["epoch"]
    beats = detail["heartbeats"]
    assert [(b["position"], b["attempt"], b["details"]) for b in beats] == [
        (0, 2, {"done": 7, "of": 10}),
        (2, 1, {"stage": "copy", "done": 3}),
    ]
    for beat in beats:
        assert set(beat) == {"position", "attempt", "details", "beat_at", "engine_id", "epoch"}
        assert beat["engine_id"] == engine.engine_id and beat["epoch"] == epoch >= 1
        assert beat["beat_at"] == engine.now_ms()

    listed = api.get(url("workflows/"), {"workflow_id": "beat-api"}).json()["results"]
    assert len(listed) == 1 and "heartbeats" not in listed[0]


def test_the_schema_describes_the_heartbeats() -> None:
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    detail = components["WorkflowDetail"]
    assert "heartbeats" in detail["required"]
    items = detail["properties"]["heartbeats"]["items"]["$ref"].rsplit("/", 1)[-1]
    beat = components[items]
    assert set(beat["properties"]) == {
        "position",
        "attempt",
        "details",
        "beat_at",
        "engine_id",
        "epoch",
    }
    assert beat["properties"]["beat_at"]["type"] == "integer"
    assert beat["properties"]["details"].get("nullable") is True
    assert "WorkflowSummary" in components
    assert "heartbeats" not in components["WorkflowSummary"]["properties"]
