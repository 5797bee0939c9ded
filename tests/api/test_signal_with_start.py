"""``POST workflows/<id>/signal-with-start/``: 201 started, 202 signalled, clear 4xx."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import url
from tests.e2e.helpers import row_counts
from weft_django import client
from weft_django.models import SignalMessage, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "workflows/{}/signal-with-start/"


def _post(api: Any, workflow_id: str, body: dict[str, Any]) -> Any:
    return api.post(url(PATH.format(workflow_id)), body, format="json")


def test_starts_then_signals(api: Any, weft_env: Any) -> None:
    body = {"name": "api-signal", "input": {"n": 2}, "signal": "go", "payload": {"ok": 1}}
    first = _post(api, "sws-api-1", body)
    assert first.status_code == 201, first.json()
    created = first.json()
    assert created["started"] is True and created["signal"] == "go"
    run = WorkflowRun.objects.get(workflow_id="sws-api-1")
    assert created["run_id"] == str(run.pk) and run.input == {"n": 2}
    assert SignalMessage.objects.get(pk=created["signal_id"]).payload == {"ok": 1}

    second = _post(api, "sws-api-1", {**body, "payload": {"ok": 2}})
    assert second.status_code == 202, second.json()
    assert second.json()["started"] is False and second.json()["run_id"] == str(run.pk)
    assert WorkflowRun.objects.filter(workflow_id="sws-api-1").count() == 1
    assert SignalMessage.objects.filter(run=run).count() == 2
    weft_env.run_until_idle()
    assert client.get_handle("sws-api-1").status() == "completed"


@pytest.mark.parametrize(
    ("workflow_id", "body", "status", "code"),
    [
        ("sws-api-2", {"name": "no-such-workflow", "signal": "go"}, 400, "unknown_workflow_type"),
        ("sws-api-2", {"name": "api-signal"}, 400, "invalid"),
        ("sws-api-2", {"name": "api-signal", "signal": ""}, 400, "invalid"),
        ("sws-api-2", {"name": 7, "signal": "go"}, 400, "invalid"),
        ("bad%20id", {"name": "api-signal", "signal": "go"}, 404, None),
    ],
)
def test_bad_input_writes_nothing(
    api: Any, workflow_id: str, body: dict[str, Any], status: int, code: str | None
) -> None:
    before = row_counts()
    response = _post(api, workflow_id, body)
    assert response.status_code == status, response.content
    if code is not None:
        assert response.json()["code"] == code, response.json()
    assert row_counts() == before


def test_a_live_run_of_another_workflow_is_a_409(api: Any) -> None:
    client.start("api-async", "k", workflow_id="sws-api-3")
    before = row_counts()
    response = _post(api, "sws-api-3", {"name": "api-signal", "signal": "go"})
    assert response.status_code == 409, response.json()
    assert response.json()["code"] == "workflow_already_running"
    assert row_counts() == before


def test_anonymous_is_refused(anon: Any) -> None:
    response = _post(anon, "sws-api-4", {"name": "api-signal", "signal": "go"})
    assert response.status_code in (401, 403)
    assert not WorkflowRun.objects.filter(workflow_id="sws-api-4").exists()
