"""The cancel endpoint's grace and force (issue #17 part 3): the new fields, the 400s."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import url
from tests.api.test_validation import assert_field_error
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def _parked(api: Any, weft_env: Any, workflow_id: str) -> None:
    response = api.post(
        url("workflows/"), {"name": "api-signal", "workflow_id": workflow_id}, format="json"
    )
    assert response.status_code == 201, response.json()
    weft_env.run_until_idle()
    assert WorkflowRun.objects.get(workflow_id=workflow_id).status == "parked"


def test_cancel_with_grace_shows_the_request_then_the_end(api: Any, weft_env: Any) -> None:
    _parked(api, weft_env, "g-1")
    response = api.post(
        url("workflows/g-1/cancel/"), {"reason": "customer", "grace": 30}, format="json"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "parked"  # cleaning up, not ended
    assert body["cancel_reason"] == "customer"
    assert body["cancel_requested_at"] is not None
    assert body["cancel_deadline_at"] == weft_env.clock.now + 30_000
    assert body["owner"] is None  # the claim rotated in the same batch
    weft_env.run_until_idle()
    weft_env.advance(weft_env.engine.settings.claim_renew_interval_ms / 1000)
    weft_env.run_until_idle()
    detail = api.get(url("workflows/g-1/")).json()
    assert detail["status"] == "cancelled"
    assert detail["error"] == {"type": "Cancelled", "message": "customer"}
    history = api.get(url("workflows/g-1/history/")).json()
    entries = history["results"] if isinstance(history, dict) else history
    assert "cancel" in [entry["kind"] for entry in entries]


def test_force_ends_a_run_that_is_cleaning_up(api: Any, weft_env: Any) -> None:
    _parked(api, weft_env, "g-2")
    api.post(url("workflows/g-2/cancel/"), {"grace": 300}, format="json")
    response = api.post(url("workflows/g-2/cancel/"), {"force": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "cancelled"


def test_without_grace_the_detail_has_no_request(api: Any, weft_env: Any) -> None:
    _parked(api, weft_env, "g-3")
    body = api.post(url("workflows/g-3/cancel/"), {}, format="json").json()
    assert body["status"] == "cancelled"
    assert body["cancel_requested_at"] is None and body["cancel_deadline_at"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"grace": -1}, "grace"),
        ({"grace": "soon"}, "grace"),
        ({"grace": True}, "grace"),
        ({"grace": 1e300}, "grace"),
        ({"force": "yes"}, "force"),
        ({"force": 1}, "force"),
        ({"grace": 5, "force": True}, "grace"),
    ],
)
def test_bad_grace_or_force_is_a_400_naming_the_field(
    api: Any, weft_env: Any, body: dict[str, Any], field: str
) -> None:
    _parked(api, weft_env, "g-bad")
    assert_field_error(api.post(url("workflows/g-bad/cancel/"), body, format="json"), field)
    run = WorkflowRun.objects.get(workflow_id="g-bad")
    assert run.status == "parked" and run.cancel_requested_at is None
