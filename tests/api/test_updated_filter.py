"""``GET workflows/?updated_after=&updated_before=``: the runs changed in a window."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.api.conftest import url
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


def ids(body: dict[str, Any]) -> list[str]:
    return [row["workflow_id"] for row in body["results"]]


def test_updated_after_lists_only_runs_changed_since(api: Any) -> None:
    for n in range(3):
        client.start("api-signal", None, workflow_id=f"upd-{n}")
    mark = WorkflowRun.objects.get(workflow_id="upd-2").updated_at
    client.suspend("upd-0", "changed after the mark")
    changed = WorkflowRun.objects.get(workflow_id="upd-0").updated_at
    assert changed > mark
    body = api.get(url("workflows/"), {"updated_after": mark.isoformat()}).json()
    assert ids(body) == ["upd-0"]
    before = api.get(url("workflows/"), {"updated_before": changed.isoformat()}).json()
    assert sorted(ids(before)) == ["upd-1", "upd-2"]
    window = api.get(
        url("workflows/"),
        {
            "updated_after": (mark - timedelta(days=1)).isoformat(),
            "updated_before": (changed + timedelta(seconds=1)).isoformat(),
        },
    ).json()
    # Newest first, ties by run id: the same order on every request.
    assert ids(window) == ["upd-2", "upd-1", "upd-0"]


@pytest.mark.parametrize("param", ["updated_after", "updated_before"])
def test_a_bad_datetime_is_a_400_naming_the_value(api: Any, param: str) -> None:
    client.start("api-signal", None, workflow_id="upd-bad")
    response = api.get(url("workflows/"), {param: "yesterday-ish"})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid", body
    assert "'yesterday-ish'" in str(body["errors"][param]), body


def test_an_empty_window_is_a_400(api: Any) -> None:
    response = api.get(
        url("workflows/"),
        {"updated_after": "2030-01-02T00:00:00Z", "updated_before": "2030-01-01T00:00:00Z"},
    )
    assert response.status_code == 400, response.content
    assert "updated_before" in response.json()["errors"], response.json()


def test_the_schema_documents_the_filters(api: Any) -> None:
    schema = api.get("/api/weft/schema/", HTTP_ACCEPT="application/json")
    if schema.status_code == 404:
        from drf_spectacular.generators import SchemaGenerator

        doc = SchemaGenerator().get_schema(request=None, public=True)
    else:
        doc = schema.json()
    params = {
        p["name"]: p
        for path, ops in doc["paths"].items()
        if path.endswith("/workflows/")
        for p in ops["get"].get("parameters", [])
    }
    for name in ("updated_after", "updated_before"):
        assert params[name]["schema"] == {"type": "string", "format": "date-time"}, params[name]
