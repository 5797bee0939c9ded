"""The OpenAPI document states what the API enforces and shows realistic examples:
``wait``'s bounds, the event stream's media type with an SSE example, a start
request a person would send."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from weft_django.api.views.published import MAX_EVENT_WAIT_S


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def _op(schema: dict[str, Any], suffix: str, method: str) -> dict[str, Any]:
    [path] = [p for p in schema["paths"] if p.endswith(suffix)]
    return dict(schema["paths"][path][method])


def test_wait_states_its_maximum(schema: dict[str, Any]) -> None:
    op = _op(schema, "/events/{key}/", "get")
    [wait] = [p for p in op["parameters"] if p["name"] == "wait"]
    assert wait["schema"]["minimum"] == 0
    assert wait["schema"]["maximum"] == MAX_EVENT_WAIT_S


def test_the_stream_is_text_event_stream_with_an_sse_example(schema: dict[str, Any]) -> None:
    ok = _op(schema, "/streams/{key}/", "get")["responses"]["200"]["content"]
    stream = ok["text/event-stream"]
    [example] = stream["examples"].values()
    assert example["value"].startswith("id: 0\ndata: {")
    assert "event: end" in example["value"]


def test_the_start_example_is_realistic(schema: dict[str, Any]) -> None:
    body = _op(schema, "/api/weft/workflows/", "post")["requestBody"]["content"]
    examples = body["application/json"]["examples"]
    values = [e["value"] for e in examples.values()]
    assert values[0]["workflow_id"] == "order-1042"
    assert all(v.get("start_after", 0) < 86_400 for v in values)
