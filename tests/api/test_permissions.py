"""Staff only by default (``API_PERMISSION_CLASSES``); the token endpoints excepted."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.api.conftest import url

pytestmark = pytest.mark.django_db

# (method, path) of every endpoint guarded by API_PERMISSION_CLASSES.
GUARDED = [
    ("get", "workflows/"),
    ("post", "workflows/"),
    ("get", "workflows/w-1/"),
    ("get", "workflows/w-1/history/"),
    ("post", "workflows/w-1/signal/"),
    ("post", "workflows/w-1/cancel/"),
    ("post", "workflows/w-1/suspend/"),
    ("post", "workflows/w-1/resume/"),
    ("post", "workflows/w-1/retry/"),
    ("post", "workflows/w-1/purge/"),
    ("post", "workflows/w-1/query/"),
    ("post", "workflows/w-1/update/"),
    ("get", "workflows/w-1/ownership/"),
    ("get", "workflows/w-1/claim-events/"),
    ("get", "claims/"),
    ("get", "engines/"),
    ("get", "metrics/"),
]


@pytest.mark.parametrize(("method", "path"), GUARDED)
def test_anonymous_is_refused(anon: APIClient, method: str, path: str) -> None:
    response = getattr(anon, method)(url(path), {}, format="json")
    assert response.status_code in (401, 403)
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.parametrize(("method", "path"), GUARDED)
def test_non_staff_is_refused(plain: APIClient, method: str, path: str) -> None:
    response = getattr(plain, method)(url(path), {}, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"


def test_basic_auth_wrong_password_is_401(staff_user: Any) -> None:
    client = APIClient()
    bad = base64.b64encode(b"staff:wrong").decode()
    response = client.get(url("workflows/"), HTTP_AUTHORIZATION=f"Basic {bad}")
    assert response.status_code in (401, 403)
    assert response.json()["code"] == "authentication_failed"
    good = base64.b64encode(b"staff:staff-pw").decode()
    assert client.get(url("workflows/"), HTTP_AUTHORIZATION=f"Basic {good}").status_code == 200


def test_staff_is_allowed(api: APIClient) -> None:
    assert api.get(url("workflows/")).status_code == 200


def test_permission_classes_come_from_the_weft_setting(plain: APIClient, anon: APIClient) -> None:
    with override_settings(
        WEFT={"API_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]}
    ):
        assert plain.get(url("workflows/")).status_code == 200
        assert anon.get(url("workflows/")).status_code in (401, 403)
    with override_settings(WEFT={"API_PERMISSION_CLASSES": []}):
        assert anon.get(url("metrics/")).status_code == 200
    assert plain.get(url("workflows/")).status_code == 403


def test_token_endpoints_need_no_login(anon: APIClient) -> None:
    # Reaches the token check (404 unknown), not the permission check.
    response = anon.post(url(f"async-activities/{'a' * 64}/complete/"), {}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "async_activity_token"
