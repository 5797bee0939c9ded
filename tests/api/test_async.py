"""``async-activities/<token>/complete|fail/``: the token alone authorises."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api import workflows as wf
from tests.api.conftest import url

pytestmark = pytest.mark.django_db(transaction=True)


def _token_for(api: Any, weft_env: Any, workflow_id: str) -> str:
    response = api.post(
        url("workflows/"),
        {"name": "api-async", "workflow_id": workflow_id, "input": workflow_id},
        format="json",
    )
    assert response.status_code == 201, response.json()
    weft_env.run_until_idle()
    assert len(wf.TOKENS) == 1, wf.TOKENS
    return wf.TOKENS[-1]


def test_detail_shows_the_pending_token_hash_prefix_never_the_token(
    api: Any, weft_env: Any
) -> None:
    token = _token_for(api, weft_env, "as-0")
    body = api.get(url("workflows/as-0/")).json()
    pending = body["pending_async_token"]
    assert pending["target"] == "api.hand_out"
    assert pending["token_hash_prefix"] == hashlib.sha256(token.encode()).hexdigest()[:12]
    assert isinstance(pending["position"], int)
    assert body["pending_async_activities"] == [pending]
    assert token not in api.get(url("workflows/as-0/")).content.decode()


def test_complete_with_the_token_alone(api: Any, weft_env: Any) -> None:
    token = _token_for(api, weft_env, "as-1")
    anonymous = APIClient()  # no session, no credentials: the token is the credential
    response = anonymous.post(
        url(f"async-activities/{token}/complete/"), {"result": {"paid": True}}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"status": "completed"}
    weft_env.run_until_idle()
    done = api.get(url("workflows/as-1/")).json()
    assert done["status"] == "completed"
    assert done["result"] == {"result": {"paid": True}}
    assert done["pending_async_token"] is None

    used = anonymous.post(url(f"async-activities/{token}/complete/"), {}, format="json")
    assert used.status_code == 409
    assert used.json()["code"] == "async_activity_token" and used.json()["kind"] == "used"


def test_fail_with_the_token_alone(api: Any, weft_env: Any) -> None:
    token = _token_for(api, weft_env, "as-2")
    response = APIClient().post(
        url(f"async-activities/{token}/fail/"),
        {"error": {"message": "declined", "type": "CardDeclined", "details": {"code": 51}}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"status": "failed"}
    weft_env.run_until_idle()
    done = api.get(url("workflows/as-2/")).json()
    assert done["status"] == "completed"
    assert done["result"] == {"failed": "declined", "type": "CardDeclined"}

    used = APIClient().post(
        url(f"async-activities/{token}/fail/"), {"error": {"message": "x"}}, format="json"
    )
    assert used.status_code == 409 and used.json()["kind"] == "used"


def test_a_logged_in_session_without_csrf_token_can_still_complete(
    staff_user: Any, weft_env: Any, api: Any
) -> None:
    # No authentication runs on these endpoints, so no CSRF check can refuse the call.
    token = _token_for(api, weft_env, "as-3")
    strict = APIClient(enforce_csrf_checks=True)
    strict.force_login(staff_user)
    response = strict.post(url(f"async-activities/{token}/complete/"), {}, format="json")
    assert response.status_code == 200, response.json()


@pytest.mark.parametrize("action", ["complete", "fail"])
def test_unknown_token_is_404(anon: Any, action: str) -> None:
    body = {"error": {"message": "x"}} if action == "fail" else {"result": 1}
    response = anon.post(url(f"async-activities/{'0' * 64}/{action}/"), body, format="json")
    assert response.status_code == 404
    assert response.json()["code"] == "async_activity_token"
    assert response.json()["kind"] == "unknown"


def test_fail_body_is_validated(anon: Any) -> None:
    token = "0" * 64
    for body, field in (
        ({}, "error"),
        ({"error": "declined"}, "error"),
        ({"error": {"type": "X"}}, "error"),
        ({"error": {"message": 3}}, "error"),
    ):
        response = anon.post(url(f"async-activities/{token}/fail/"), body, format="json")
        assert response.status_code == 400, (body, response.json())
        assert response.json()["code"] == "invalid"
        assert field in response.json()["errors"], response.json()


def test_fail_body_optional_parts_may_be_null_or_blank(anon: Any) -> None:
    token = "0" * 64
    for error in (
        {"message": ""},
        {"message": "m", "type": None, "details": None},
        {"message": "m", "type": "", "details": [1, {"a": None}]},
    ):
        path = url(f"async-activities/{token}/fail/")
        response = anon.post(path, {"error": error}, format="json")
        assert response.status_code == 404, (error, response.json())  # valid body, unknown token


# -- the token out of the path: a header (preferred) or the body -------------------------


def _runs_and_tokens() -> tuple[int, list[tuple[Any, ...]]]:
    from weft_django.models import AsyncActivity, JournalEntry

    return JournalEntry.objects.count(), sorted(AsyncActivity.objects.values_list("status", "pk"))


def test_complete_with_the_token_in_the_header(api: Any, weft_env: Any) -> None:
    token = _token_for(api, weft_env, "as-h1")
    response = APIClient().post(
        url("async-activities/complete/"),
        {"result": {"paid": True}},
        format="json",
        headers={"Weft-Async-Token": token},
    )
    assert response.status_code == 200, response.json()
    assert response.json() == {"status": "completed"}
    weft_env.run_until_idle()
    assert api.get(url("workflows/as-h1/")).json()["result"] == {"result": {"paid": True}}


def test_fail_with_the_token_in_the_body(api: Any, weft_env: Any) -> None:
    token = _token_for(api, weft_env, "as-b1")
    response = APIClient().post(
        url("async-activities/fail/"),
        {"token": token, "error": {"message": "declined", "type": "CardDeclined"}},
        format="json",
    )
    assert response.status_code == 200, response.json()
    weft_env.run_until_idle()
    assert api.get(url("workflows/as-b1/")).json()["result"] == {
        "failed": "declined",
        "type": "CardDeclined",
    }


def test_the_same_token_in_every_place_is_one_token(api: Any, weft_env: Any) -> None:
    token = _token_for(api, weft_env, "as-s1")
    response = APIClient().post(
        url(f"async-activities/{token}/complete/"),
        {"token": token, "result": 1},
        format="json",
        headers={"Weft-Async-Token": token},
    )
    assert response.status_code == 200, response.json()


@pytest.mark.parametrize(
    ("path", "header", "body"),
    [
        ("async-activities/{t}/complete/", "{o}", None),
        ("async-activities/{t}/complete/", None, "{o}"),
        ("async-activities/complete/", "{t}", "{o}"),
        ("async-activities/{t}/complete/", "{t}", "{o}"),
    ],
    ids=["path-header", "path-body", "header-body", "all-three"],
)
def test_two_different_tokens_are_a_conflict_and_nothing_is_settled(
    api: Any, weft_env: Any, path: str, header: str | None, body: str | None
) -> None:
    token = _token_for(api, weft_env, "as-c1")
    other = "o" * 43
    fill = {"t": token, "o": other}
    before = _runs_and_tokens()
    payload: dict[str, Any] = {"result": 1}
    if body is not None:
        payload["token"] = body.format(**fill)
    headers = {} if header is None else {"Weft-Async-Token": header.format(**fill)}
    response = APIClient().post(url(path.format(**fill)), payload, format="json", headers=headers)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "async_token_conflict"
    assert token not in response.content.decode()  # the answer does not echo tokens
    assert _runs_and_tokens() == before
    # The token is still good.
    ok = APIClient().post(
        url("async-activities/complete/"), {}, format="json", headers={"Weft-Async-Token": token}
    )
    assert ok.status_code == 200, ok.json()


@pytest.mark.parametrize("action", ["complete", "fail"])
def test_no_token_anywhere_is_missing(anon: Any, action: str) -> None:
    body = {"error": {"message": "x"}} if action == "fail" else {"result": 1}
    response = anon.post(url(f"async-activities/{action}/"), body, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "async_token_missing"
    assert "Weft-Async-Token" in response.json()["message"]


@pytest.mark.parametrize(
    "bad", ["", "has space", "x" * 513, "\u00e9t\u00e9", "a/b", "tok;en"], ids=repr
)
def test_a_malformed_header_or_body_token_is_a_400_naming_where(anon: Any, bad: str) -> None:
    response = anon.post(url("async-activities/complete/"), {"token": bad}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid"
    assert "token" in response.json()["errors"]
    try:
        headers = {"Weft-Async-Token": bad}
        response = anon.post(url("async-activities/complete/"), {}, format="json", headers=headers)
    except UnicodeEncodeError:  # a header value must be latin-1; no client can send it
        return
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid"
    assert "Weft-Async-Token" in response.json()["errors"]


def test_an_unknown_token_in_the_header_is_404(anon: Any) -> None:
    response = anon.post(
        url("async-activities/complete/"), {}, format="json", headers={"Weft-Async-Token": "0" * 64}
    )
    assert response.status_code == 404
    assert response.json()["kind"] == "unknown"


def test_the_schema_documents_header_and_body_tokens() -> None:
    import json

    from django.test import Client

    schema = json.loads(Client().get("/api/schema/", {"format": "json"}).content)
    for path in (
        "/api/weft/async-activities/complete/",
        "/api/weft/async-activities/fail/",
        "/api/weft/async-activities/{token}/complete/",
    ):
        operation = schema["paths"][path]["post"]
        header = [p for p in operation["parameters"] if p["in"] == "header"]
        assert [p["name"] for p in header] == ["Weft-Async-Token"], path
        assert header[0].get("required", False) is False
        assert "access logs" in header[0]["description"]
        assert "async_token_conflict" in operation["responses"]["400"]["description"]
    for name in ("CompleteAsync", "FailAsync"):
        token = schema["components"]["schemas"][name]["properties"]["token"]
        assert token["maxLength"] == 512 and "header" in token["description"]


def test_log_redaction_leaves_the_header_routes_readable() -> None:
    from weft_django.api.logging import redact_token_path

    token = "k" * 43
    assert token not in redact_token_path(f"/api/weft/async-activities/{token}/complete/")
    assert token not in redact_token_path(f"/api/weft/async-activities/{token}")
    for path in ("/api/weft/async-activities/complete", "/api/weft/async-activities/fail/"):
        assert redact_token_path(path) == path
