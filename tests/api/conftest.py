"""Fixtures of the API tests: users, authenticated clients, the test workflows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

import tests.api.workflows as api_workflows

BASE = "/api/weft/"


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    # Basic auth hashes the password on every request: keep that cheap.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _reset_workflow_state() -> Iterator[None]:
    api_workflows.TOKENS.clear()
    api_workflows.FLAKY["fail"] = True
    yield
    api_workflows.TOKENS.clear()


@pytest.fixture
def staff_user(django_user_model: Any) -> Any:
    """A staff user who may see decoded payloads (``weft.view_payload``)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("staff", password="staff-pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_payload"))
    return user


@pytest.fixture
def plain_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("plain", password="plain-pw")


@pytest.fixture
def api(staff_user: Any) -> APIClient:
    """A client logged in (session) as a staff user."""
    client = APIClient()
    client.force_login(staff_user)
    return client


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


@pytest.fixture
def plain(plain_user: Any) -> APIClient:
    client = APIClient()
    client.force_login(plain_user)
    return client


def url(path: str) -> str:
    return BASE + path
