"""The published schema says what the API does: statuses, auth, error bodies, prose.

Why real requests and not only a walk of the schema: "403 is documented"
proves nothing unless the API answers 403 there. Each check below makes
the request that provokes a status (no credentials, a wrong method, an
unacceptable ``Accept``, a form body, an over-large body, a session
without its CSRF token) and asserts the status is the one the schema
lists for that operation, with a body of the documented error component.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.api.conftest import url
from tests.api.test_schema import EXPECTED
from weft_django.api.parsers import max_body_bytes

pytestmark = pytest.mark.django_db

#: Markup a Markdown renderer shows literally, and references to our own docs.
RST_OR_INTERNAL = re.compile(
    r"``|:(?:class|func|meth|attr|mod|ref|data|exc|obj|py:\w+):`|^\.\. \w+::|SPEC|§",
    re.MULTILINE,
)
TOKEN_OPERATIONS = {
    ("/api/weft/async-activities/{token}/complete/", "post"),
    ("/api/weft/async-activities/{token}/fail/", "post"),
    ("/api/weft/async-activities/complete/", "post"),
    ("/api/weft/async-activities/fail/", "post"),
}
ERROR_COMPONENTS = {"#/components/schemas/Error", "#/components/schemas/ValidationError"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def _texts(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every ``description`` and ``summary`` in the document, with its JSON path."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "summary") and isinstance(value, str):
                yield f"{where}/{key}", value
            yield from _texts(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _texts(value, f"{where}[{i}]")


def _responses(schema: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return dict(schema["paths"][path][method]["responses"])


def test_descriptions_are_plain_markdown_without_internal_references(
    schema: dict[str, Any],
) -> None:
    texts = list(_texts(schema))
    assert len(texts) > 100  # the walk reaches operations, components and fields
    bad = [(where, text[:80]) for where, text in texts if RST_OR_INTERNAL.search(text)]
    assert bad == []


def test_the_walk_would_catch_markup() -> None:
    for text in ("the ``code``", "see :class:`Run`", "SPEC §5", ".. note::"):
        assert RST_OR_INTERNAL.search(text), text
    assert not RST_OR_INTERNAL.search("the `code` field; `X-CSRFToken` header")


def test_every_operation_documents_the_statuses_drf_answers(schema: dict[str, Any]) -> None:
    for path, method in sorted(EXPECTED):
        operation = schema["paths"][path][method]
        codes = set(operation["responses"])
        where = f"{method.upper()} {path}"
        assert {"405", "406"} <= codes, where
        # Session authentication comes first in the project: DRF answers 403, never 401.
        assert "401" not in codes, where
        if (path, method) not in TOKEN_OPERATIONS:
            assert "403" in codes, where
        else:
            assert "403" not in codes, where
        if method == "post":  # session auth's CSRF check parses any POST body
            assert {"400", "413", "415"} <= codes, where
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= codes, where
        if any(p["in"] == "path" for p in operation.get("parameters", [])):
            assert "404" in codes, where
        if any(p["in"] == "query" for p in operation.get("parameters", [])):
            assert "400" in codes, where


def test_every_error_response_has_a_typed_error_body(schema: dict[str, Any]) -> None:
    for path, method in sorted(EXPECTED):
        for code, response in _responses(schema, path, method).items():
            if int(code) < 400:
                continue
            ref = response["content"]["application/json"]["schema"]["$ref"]
            assert ref in ERROR_COMPONENTS, (method, path, code)
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["code", "message"]
    untyped = {
        name
        for name, field in error["properties"].items()
        if "type" not in field and name not in ("error", "pk")  # any JSON value by design
    }
    assert untyped == set()
    assert error["properties"]["epoch"]["type"] == "integer"
    assert error["properties"]["registered"] == {"type": "array", "items": {"type": "string"}}
    errors = schema["components"]["schemas"]["ValidationError"]["properties"]["errors"]
    assert errors["type"] == "object" and "additionalProperties" in errors


def test_cookie_auth_says_unsafe_methods_need_the_csrf_header(schema: dict[str, Any]) -> None:
    cookie = schema["components"]["securitySchemes"]["cookieAuth"]
    assert cookie["in"] == "cookie"
    assert "X-CSRFToken" in cookie["description"]


def _assert_documented(
    schema: dict[str, Any], response: Any, path: str, method: str, status: int
) -> None:
    assert response.status_code == status, response.content
    documented = _responses(schema, path, method)
    assert str(status) in documented, (method, path, status)
    ref = documented[str(status)]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    body = response.json()
    assert set(component["required"]) <= set(body)
    assert set(body) <= set(component["properties"])


def test_statuses_the_api_returns_are_the_documented_ones(
    schema: dict[str, Any], api: APIClient, anon: APIClient, staff_user: Any
) -> None:
    listing = "/api/weft/workflows/"
    _assert_documented(schema, anon.get(url("workflows/")), listing, "get", 403)
    _assert_documented(schema, api.delete(url("workflows/")), listing, "get", 405)
    _assert_documented(
        schema, api.get(url("workflows/"), HTTP_ACCEPT="text/html"), listing, "get", 406
    )
    form = api.post(url("workflows/"), {"name": "api-signal"}, format="multipart")
    _assert_documented(schema, form, listing, "post", 415)
    over = "y" * (max_body_bytes() + 1)
    huge = api.post(url("workflows/"), {"name": "api-signal", "input": over}, format="json")
    _assert_documented(schema, huge, listing, "post", 413)
    assert huge.json()["code"] == "request_too_large"
    # A session without its CSRF token, on an unsafe method: 403, as the scheme says.
    strict = APIClient(enforce_csrf_checks=True)
    strict.force_login(staff_user)
    no_csrf = strict.post(url("workflows/"), {"name": "api-signal"}, format="json")
    _assert_documented(schema, no_csrf, listing, "post", 403)
    assert "CSRF" in no_csrf.json()["message"]


def test_a_post_without_a_body_still_parses_one_under_session_auth(
    schema: dict[str, Any], staff_user: Any
) -> None:
    # DRF's CSRF check of a cookie session reads the form data of a POST,
    # which parses whatever body came: documented on every POST, then.
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(staff_user)
    client.cookies["csrftoken"] = "a" * 32  # a well-formed secret: the check reads the form
    resume = "/api/weft/workflows/{workflow_id}/resume/"
    assert "requestBody" not in schema["paths"][resume]["post"]
    form = client.post(
        url("workflows/a/resume/"), "x=1", content_type="application/x-www-form-urlencoded"
    )
    _assert_documented(schema, form, resume, "post", 415)
    over = json.dumps({"x": "y" * max_body_bytes()})
    huge = client.post(url("workflows/a/resume/"), over, content_type="application/json")
    _assert_documented(schema, huge, resume, "post", 413)
    broken = client.post(url("workflows/a/resume/"), "{", content_type="application/json")
    _assert_documented(schema, broken, resume, "post", 400)
    assert broken.json()["code"] == "parse_error"


def test_a_challenging_first_authenticator_makes_it_401_in_schema_and_answer() -> None:
    from django.test import RequestFactory
    from django.urls import path
    from drf_spectacular.generators import SchemaGenerator
    from rest_framework.authentication import BasicAuthentication, SessionAuthentication

    from weft_django.api.views import MetricsView

    class BasicFirst(MetricsView):
        authentication_classes = [BasicAuthentication, SessionAuthentication]

    generated = SchemaGenerator(patterns=[path("m/", BasicFirst.as_view())]).get_schema(
        request=None, public=True
    )
    codes = set(generated["paths"]["/m/"]["get"]["responses"])
    assert {"401", "403"} <= codes
    answer = BasicFirst.as_view()(RequestFactory().get("/m/"))
    assert answer.status_code == 401 and answer["WWW-Authenticate"].startswith("Basic")
