"""Bad input: 400 with field errors, 404 for unknown ids, 409 for invalid transitions.

And hostile JSON: nothing a client sends makes a 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.api.conftest import url
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db


def post_raw(api: Any, path: str, raw: str | bytes, content_type: str = "application/json") -> Any:
    return api.generic("POST", url(path), raw, content_type=content_type)


def assert_field_error(response: Any, *fields: str) -> dict[str, Any]:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid", body
    assert isinstance(body["message"], str) and body["message"]
    for field in fields:
        assert field in body["errors"], body
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": 5}, "name"),
        ({"name": ["api-signal"]}, "name"),
        ({"name": "no-such-workflow"}, "name"),
        ({"name": "api-signal", "workflow_id": "has space"}, "workflow_id"),
        ({"name": "api-signal", "workflow_id": "x" * 201}, "workflow_id"),
        ({"name": "api-signal", "workflow_id": 12}, "workflow_id"),
        ({"name": "api-signal", "idempotency_key": ""}, "idempotency_key"),
        ({"name": "api-signal", "idempotency_key": "k" * 256}, "idempotency_key"),
        ({"name": "api-signal", "start_after": "soon"}, "start_after"),
        ({"name": "api-signal", "start_after": -1}, "start_after"),
        ({"name": "api-signal", "start_after": True}, "start_after"),
        ({"name": "api-signal", "start_after": 1e300}, "start_after"),
        ({"name": "api-signal", "start_at": "tomorrow"}, "start_at"),
        ({"name": "api-signal", "start_at": "2030-01-01T00:00:00Z", "start_after": 5}, "start_at"),
        ({"name": "api-signal", "execution_timeout": 0}, "execution_timeout"),
        ({"name": "api-signal", "on_conflict": "replace"}, "on_conflict"),
        ({"name": "api-signal", "input": {"a": "nul\u0000"}}, "input"),
        ({"name": "sig\u0000nal"}, "name"),
    ],
)
def test_start_rejects_bad_bodies(api: Any, body: dict[str, Any], field: str) -> None:
    assert_field_error(api.post(url("workflows/"), body, format="json"), field)
    assert not WorkflowRun.objects.exists()


def test_unknown_workflow_type_names_the_field(api: Any) -> None:
    body = assert_field_error(api.post(url("workflows/"), {"name": "nope"}, format="json"), "name")
    assert "nope" in body["errors"]["name"][0]


def test_oversized_payloads_are_field_errors(api: Any) -> None:
    big = "x" * 3000
    with override_settings(WEFT={"MAX_PAYLOAD_BYTES": 2000}):
        body = assert_field_error(
            api.post(url("workflows/"), {"name": "api-signal", "input": big}, format="json"),
            "input",
        )
        assert "MAX_PAYLOAD_BYTES" in body["errors"]["input"][0]
        assert_field_error(
            api.post(url("workflows/w/signal/"), {"name": "go", "payload": big}, format="json"),
            "payload",
        )
        assert_field_error(
            api.post(url("workflows/w/query/"), {"name": "q", "args": [big]}, format="json"),
            "args",
        )
        token = "0" * 64
        assert_field_error(
            api.post(url(f"async-activities/{token}/complete/"), {"result": big}, format="json"),
            "result",
        )
        assert_field_error(
            api.post(
                url(f"async-activities/{token}/fail/"), {"error": {"message": big}}, format="json"
            ),
            "error",
        )
        # Far beyond what the API reads at all: refused before parsing.
        huge = api.post(
            url("workflows/"), {"name": "api-signal", "input": "y" * 200_000}, format="json"
        )
        assert huge.status_code == 413 and huge.json()["code"] == "request_too_large"
    assert not WorkflowRun.objects.exists()


#: Where each endpoint carries a client's JSON value (``%s``).
PAYLOAD_BODIES = {
    "workflows/": '{"name": "api-signal", "input": %s}',
    "workflows/w/signal/": '{"name": "go", "payload": %s}',
    "workflows/w/query/": '{"name": "progress", "args": [%s]}',
    "workflows/w/cancel/": '{"reason": %s}',
    f"async-activities/{'0' * 64}/complete/": '{"result": %s}',
    f"async-activities/{'0' * 64}/fail/": '{"error": {"message": "m", "details": %s}}',
}

HOSTILE_VALUES = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    '"\\u0000"',
    '"a\\u0000b"',
    '"\\ud800"',
    '{"\\udfff": 1}',
    '{"\\u0000": 1}',
    "[" * 10_000 + "]" * 10_000,
    '{"a":' * 10_000 + "1" + "}" * 10_000,
    "[" * 150 + "]" * 150,
    "9" * 5000,
]


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=lambda v: v[:20])
@pytest.mark.parametrize("path", list(PAYLOAD_BODIES))
def test_hostile_json_values_are_a_400(api: Any, path: str, value: str) -> None:
    response = post_raw(api, path, PAYLOAD_BODIES[path] % value)
    assert response.status_code == 400, (path, value[:40], response.content[:300])
    body = response.json()
    assert body["code"] in ("invalid", "parse_error"), body
    assert not WorkflowRun.objects.exists()


@pytest.mark.parametrize(
    "raw",
    [
        "[]",
        "[1, 2]",
        '"a string"',
        "42",
        "null",
        "true",
        "{",
        "{'single': 'quotes'}",
        '{"a": 1} trailing',
        "[" * 10_000 + "]" * 10_000,
        "\ufeff{}",
        b"\xff\xfe\x00garbage",
    ],
    ids=lambda v: repr(v[:20]),
)
@pytest.mark.parametrize("path", list(PAYLOAD_BODIES))
def test_non_object_and_malformed_bodies_are_a_400(api: Any, path: str, raw: str) -> None:
    response = post_raw(api, path, raw)
    assert response.status_code == 400, (path, raw[:40], response.content[:300])
    assert response.json()["code"] in ("invalid", "parse_error"), response.json()


def test_hostile_start_fields(api: Any) -> None:
    for raw in (
        '{"name": "\\ud800"}',
        '{"name": "api-signal", "workflow_id": "\\udfff"}',
        '{"name": "api-signal", "idempotency_key": "\\ud800"}',
        '{"name": "api-signal", "start_after": 1e400}',
        '{"name": "api-signal", "start_after": NaN}',
        '{"name": "api-signal", "start_at": "9999-12-31T23:59:59-14:00"}',
        '{"name": "api-signal", "start_at": "0001-01-01T00:00:00+14:00"}',
        '{"name": "api-signal", "execution_timeout": ' + "9" * 400 + "}",
        '{"name": "api-signal", "on_conflict": "\\ud800"}',
    ):
        response = post_raw(api, "workflows/", raw)
        assert response.status_code == 400, (raw, response.content)
    assert not WorkflowRun.objects.exists()


def test_an_empty_body_is_an_empty_object(api: Any) -> None:
    assert_field_error(post_raw(api, "workflows/", ""), "name")
    # cancel takes an optional reason: the empty body is valid, the workflow is unknown
    assert post_raw(api, "workflows/w/cancel/", "").status_code == 404


def test_wrong_content_type_is_415(api: Any) -> None:
    response = post_raw(api, "workflows/", "name=api-signal", "application/x-www-form-urlencoded")
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"


def test_wrong_method_is_405(api: Any) -> None:
    response = api.delete(url("workflows/"))
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("workflows/", {"status": "sleeping"}, "status"),
        ("workflows/", {"page": "0"}, "page"),
        ("workflows/", {"page": "abc"}, "page"),
        ("workflows/", {"page_size": "100000"}, "page_size"),
        ("workflows/", {"name": "a\x00b"}, "name"),
        ("workflows/w/", {"run_id": "not-a-uuid"}, "run_id"),
        ("workflows/w/history/", {"run_id": "123"}, "run_id"),
        ("claims/", {"expired": "perhaps"}, "expired"),
        ("engines/", {"page_size": "-1"}, "page_size"),
    ],
)
def test_bad_query_parameters_are_400(
    api: Any, path: str, params: dict[str, str], field: str
) -> None:
    assert_field_error(api.get(url(path), params), field)


def test_page_past_the_end_is_404(api: Any) -> None:
    response = api.get(url("workflows/"), {"page": "2"})
    assert response.status_code == 404 and response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "workflows/nope/"),
        ("get", "workflows/nope/history/"),
        ("post", "workflows/nope/cancel/"),
        ("post", "workflows/nope/suspend/"),
        ("post", "workflows/nope/resume/"),
        ("post", "workflows/nope/retry/"),
        ("post", "workflows/nope/purge/"),
        ("get", "workflows/nope/ownership/"),
        ("get", "workflows/nope/claim-events/"),
        ("get", "workflows/a:b@c.d/"),
    ],
)
def test_unknown_workflow_is_404(api: Any, method: str, path: str) -> None:
    response = getattr(api, method)(url(path), {}, format="json")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "workflow_not_found" and body["workflow_id"] in path


def test_unknown_workflow_signal_and_query_are_404(api: Any) -> None:
    signal = api.post(url("workflows/nope/signal/"), {"name": "go"}, format="json")
    assert signal.status_code == 404 and signal.json()["code"] == "workflow_not_found"
    query = api.post(url("workflows/nope/query/"), {"name": "progress"}, format="json")
    assert query.status_code == 404 and query.json()["code"] == "workflow_not_found"


def test_unknown_run_id_is_404(api: Any) -> None:
    api.post(url("workflows/"), {"name": "api-signal", "workflow_id": "w"}, format="json")
    other = "00000000-0000-0000-0000-000000000000"
    response = api.get(url("workflows/w/"), {"run_id": other})
    assert response.status_code == 404 and response.json()["code"] == "run_not_found"


def test_ids_outside_the_grammar_do_not_route(api: Any) -> None:
    for path in ("workflows/has%20space/", "workflows/" + "x" * 201 + "/"):
        response = api.get(url(path))
        assert response.status_code == 404 and response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("workflows/w/signal/", {}, "name"),
        ("workflows/w/signal/", {"name": ""}, "name"),
        ("workflows/w/signal/", {"name": 7}, "name"),
        ("workflows/w/signal/", {"name": "n" * 201}, "name"),
        ("workflows/w/query/", {}, "name"),
        ("workflows/w/query/", {"name": "progress", "args": {"a": 1}}, "args"),
        ("workflows/w/query/", {"name": "progress", "args": "x"}, "args"),
        ("workflows/w/cancel/", {"reason": 5}, "reason"),
        ("workflows/w/cancel/", {"reason": "r" * 201}, "reason"),
        ("workflows/w/suspend/", {"reason": ["x"]}, "reason"),
    ],
)
def test_action_bodies_are_validated(api: Any, path: str, body: dict[str, Any], field: str) -> None:
    assert_field_error(api.post(url(path), body, format="json"), field)


@pytest.mark.django_db(transaction=True)
def test_query_errors(api: Any, weft_env: Any) -> None:
    api.post(url("workflows/"), {"name": "api-signal", "workflow_id": "q"}, format="json")
    weft_env.run_until_idle()
    unknown = api.post(url("workflows/q/query/"), {"name": "nope"}, format="json")
    body = assert_field_error(unknown, "name")
    assert "progress" in body["errors"]["name"][0]  # names the registered handlers
    explode = api.post(url("workflows/q/query/"), {"name": "explode"}, format="json")
    assert explode.status_code == 400 and explode.json()["code"] == "query_failed"
    assert "ZeroDivisionError" in explode.json()["message"]
    wrong_args = api.post(url("workflows/q/query/"), {"name": "add", "args": [1]}, format="json")
    assert wrong_args.status_code == 400 and wrong_args.json()["code"] == "query_failed"


def test_workflow_already_running_is_409(api: Any) -> None:
    body = {"name": "api-signal", "workflow_id": "dup"}
    assert api.post(url("workflows/"), body, format="json").status_code == 201
    again = api.post(url("workflows/"), body, format="json")
    assert again.status_code == 409
    assert again.json()["code"] == "workflow_already_running"
    assert again.json()["workflow_id"] == "dup"


def test_invalid_transitions_on_a_pending_run_are_409(api: Any) -> None:
    api.post(url("workflows/"), {"name": "api-signal", "workflow_id": "t"}, format="json")
    for action in ("resume", "retry", "purge"):
        response = api.post(url(f"workflows/t/{action}/"))
        assert response.status_code == 409, action
        body = response.json()
        assert body == {
            "code": "invalid_transition",
            "message": body["message"],
            "workflow_id": "t",
            "status": "pending",
            "action": action,
        }


@pytest.mark.parametrize(
    "path",
    ["workflows/has%20space/", "workflows/%C2%84/retry/", "nothing-here/", "workflows/w/nope/"],
)
def test_unrouted_paths_answer_json_404(api: Any, path: str) -> None:
    for method in ("get", "post", "delete"):
        response = getattr(api, method)(url(path))
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert response.json()["code"] == "not_found"


def test_missing_trailing_slash_is_named(api: Any) -> None:
    response = api.post(url("workflows"), {"name": "api-signal"}, format="json")
    assert response.status_code == 404
    assert "'/api/weft/workflows/'" in response.json()["message"]
    assert not WorkflowRun.objects.exists()


def test_empty_query_values_mean_not_given(api: Any) -> None:
    api.post(url("workflows/"), {"name": "api-signal", "workflow_id": "e"}, format="json")
    response = api.get(url("workflows/"), {"name": "", "status": "", "page": "", "page_size": ""})
    assert response.status_code == 200 and response.json()["count"] == 1
    assert api.get(url("claims/"), {"engine": "", "expired": ""}).status_code == 200


def test_a_newline_in_the_path_is_still_a_json_404(api: Any) -> None:
    response = api.post(url("workflows/a%0Ab/suspend/"), {}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_claims_expired_must_be_a_boolean(api: Any) -> None:
    for value in ("null", "maybe", "2"):
        assert_field_error(api.get(url("claims/"), {"expired": value}), "expired")
    for value in ("true", "false", "1", "0"):
        assert api.get(url("claims/"), {"expired": value}).status_code == 200


def test_a_three_megabyte_body_is_a_413(api: Any) -> None:
    """Over Django's own ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB), not only the
    API's cap: still "too large" (413), never a 400."""
    body = b'{"name": "api-signal", "input": "' + b"y" * 3_000_000 + b'"}'
    for path in ("workflows/", "workflows/w-1/cancel/"):
        response = api.generic("POST", url(path), body, content_type="application/json")
        assert response.status_code == 413, (path, response.content[:200])
        assert response.json()["code"] == "request_too_large"
    assert not WorkflowRun.objects.exists()
