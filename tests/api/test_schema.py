"""The OpenAPI schema (drf-spectacular) is valid and describes every endpoint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

W = "/api/weft/workflows/{workflow_id}/"
S = "/api/weft/schedules/{schedule_id}/"
EXPECTED = {
    ("/api/weft/workflows/", "get"),
    ("/api/weft/workflows/", "post"),
    ("/api/weft/bulk/cancel/", "post"),
    ("/api/weft/bulk/resume/", "post"),
    ("/api/weft/bulk/retry/", "post"),
    (W, "get"),
    (W + "history/", "get"),
    (W + "signal/", "post"),
    (W + "signal-with-start/", "post"),
    (W + "cancel/", "post"),
    (W + "suspend/", "post"),
    (W + "resume/", "post"),
    (W + "retry/", "post"),
    (W + "fork/", "post"),
    (W + "reset/", "post"),
    (W + "purge/", "post"),
    (W + "fork/", "post"),
    (W + "reset/", "post"),
    (W + "query/", "post"),
    (W + "update/", "post"),
    (W + "ownership/", "get"),
    (W + "claim-events/", "get"),
    (W + "events/", "get"),
    (W + "events/{key}/", "get"),
    (W + "streams/{key}/", "get"),
    ("/api/weft/claims/", "get"),
    ("/api/weft/engines/", "get"),
    ("/api/weft/metrics/", "get"),
    ("/api/weft/async-activities/{token}/complete/", "post"),
    ("/api/weft/async-activities/{token}/fail/", "post"),
    ("/api/weft/async-activities/complete/", "post"),
    ("/api/weft/async-activities/fail/", "post"),
    ("/api/weft/schedules/", "get"),
    ("/api/weft/schedules/", "post"),
    (S, "get"),
    (S, "patch"),
    (S, "delete"),
    (S + "pause/", "post"),
    (S + "resume/", "post"),
    (S + "trigger/", "post"),
    (S + "backfill/", "post"),
}


@pytest.fixture
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def test_schema_is_valid_openapi(schema: dict[str, Any]) -> None:
    validate_schema(schema)  # raises on an invalid document


def test_schema_lists_every_endpoint(schema: dict[str, Any]) -> None:
    found = {
        (path, method)
        for path, item in schema["paths"].items()
        if path.startswith("/api/weft/")
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert found == EXPECTED


def test_workflow_id_parameter_has_the_id_grammar(schema: dict[str, Any]) -> None:
    params = schema["paths"][W]["get"]["parameters"]
    wid = next(p for p in params if p["name"] == "workflow_id")
    assert wid["in"] == "path"
    assert wid["schema"]["pattern"] == "^[A-Za-z0-9._:@-]{1,200}$"


def test_bodies_and_errors_are_described(schema: dict[str, Any]) -> None:
    start = schema["paths"]["/api/weft/workflows/"]["post"]
    body = start["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    fields = schema["components"]["schemas"][body.rsplit("/", 1)[1]]["properties"]
    assert set(fields) == {
        "name",
        "input",
        "workflow_id",
        "idempotency_key",
        "start_after",
        "start_at",
        "execution_timeout",
        "on_conflict",
        "queue",
        "priority",
        "concurrency_key",
        "fairness_key",
        "fairness_weight",
    }
    enum = fields["on_conflict"]["allOf"][0]["$ref"].rsplit("/", 1)[1]
    assert schema["components"]["schemas"][enum]["enum"] == [
        "error",
        "start-new",
        "use-existing",
        "terminate-existing",
    ]
    assert {"200", "201", "400", "403", "409"} <= set(start["responses"])
    detail = schema["components"]["schemas"]["WorkflowDetail"]
    assert "hash" in detail["properties"]["pending_async_token"]["description"]
    listing = schema["paths"]["/api/weft/workflows/"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {
        "status",
        "name",
        "workflow_id",
        "page",
        "page_size",
    }


def test_token_endpoints_need_no_credentials(schema: dict[str, Any]) -> None:
    for action in ("{token}/complete", "{token}/fail", "complete", "fail"):
        operation = schema["paths"][f"/api/weft/async-activities/{action}/"]["post"]
        assert operation.get("security") in (None, [], [{}])
    assert "security" not in schema  # so an operation without "security" needs none
    assert schema["paths"]["/api/weft/metrics/"]["get"]["security"] != [{}]


def test_browsable_docs_are_served() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_including_the_urls_without_the_api_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib
    import importlib.util
    import sys

    from django.core.exceptions import ImproperlyConfigured

    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "drf_spectacular" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delitem(sys.modules, "weft_django.api.urls")
    with pytest.raises(ImproperlyConfigured, match=r'pip install "weft-django\[api\]"'):
        importlib.import_module("weft_django.api.urls")
