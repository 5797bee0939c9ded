"""The schedules API (issue #16): one client call per request, the client's
validation (a bad value is a 400 naming it, nothing written)."""

from __future__ import annotations

from typing import Any

import pytest

import tests.api.workflows  # noqa: F401  (registers the api- workflows)
from tests.api.conftest import url
from weft_django.models import Schedule, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

WF = "api-signal"


def test_create_describe_update_pause_trigger_backfill_delete(api: Any) -> None:
    created = api.post(
        url("schedules/"),
        {"schedule_id": "api-s", "workflow": WF, "every": 3600, "input": {"k": 1}},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["every_s"] == 3600 and len(created.json()["next_fire_times"]) == 5
    listing = api.get(url("schedules/")).json()
    assert [s["schedule_id"] for s in listing["results"]] == ["api-s"]
    detail = api.get(url("schedules/api-s/")).json()
    assert detail["driver"]["workflow_id"] == "weft.schedule:api-s"
    patched = api.patch(url("schedules/api-s/"), {"cron": "0 3 * * *"}, format="json")
    assert patched.status_code == 200 and patched.json()["cron"] == "0 3 * * *"
    assert patched.json()["every_s"] is None
    assert api.post(url("schedules/api-s/pause/")).json()["paused"] is True
    assert api.post(url("schedules/api-s/resume/")).json()["paused"] is False
    triggered = api.post(url("schedules/api-s/trigger/"))
    assert triggered.status_code == 201 and triggered.json()["workflow_id"].startswith("api-s@")
    body = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z"}
    filled = api.post(url("schedules/api-s/backfill/"), body, format="json")
    assert filled.status_code == 201 and len(filled.json()["runs"]) == 2  # 03:00 on 1st and 2nd
    again = api.post(url("schedules/api-s/backfill/"), body, format="json")
    assert again.json()["runs"] == filled.json()["runs"]  # one run per tick
    assert api.delete(url("schedules/api-s/")).json() == {"schedule_id": "api-s", "deleted": True}
    assert api.get(url("schedules/api-s/")).json()["code"] == "schedule_not_found"


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"cron": "99 * * * *"}, "99 * * * *"),
        ({"every": 60, "timezone": "Nowhere/Land"}, "Nowhere/Land"),
        ({}, "exactly one of cron or every"),
        ({"every": 60, "cron": "* * * * *"}, "exactly one of cron or every"),
        ({"every": 60, "schedule_id": "bad id"}, "bad id"),
        ({"every": 60, "workflow": "no-such"}, "no-such"),
    ],
)
def test_bad_input_is_a_400_naming_the_value(api: Any, body: dict[str, Any], named: str) -> None:
    response = api.post(
        url("schedules/"), {"schedule_id": "api-bad", "workflow": WF, **body}, format="json"
    )
    assert response.status_code == 400, response.content
    assert named in response.content.decode()
    assert not Schedule.objects.exists() and not WorkflowRun.objects.exists()


def test_duplicate_is_a_409(api: Any) -> None:
    body = {"schedule_id": "api-dup", "workflow": WF, "every": 60}
    assert api.post(url("schedules/"), body, format="json").status_code == 201
    again = api.post(url("schedules/"), body, format="json")
    assert again.status_code == 409 and again.json()["code"] == "schedule_already_exists"
