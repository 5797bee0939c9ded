"""Fixtures of the security tests: one client per role, the canary workflows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

import tests.security.workflows as sec_workflows

#: Every role the permission matrix is run for.
ROLES = ("anonymous", "plain", "inactive_staff", "staff", "superuser")


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _reset_tokens() -> Iterator[None]:
    sec_workflows.TOKENS.clear()
    sec_workflows.FLAKY_CALLS.clear()
    yield
    sec_workflows.TOKENS.clear()
    sec_workflows.FLAKY_CALLS.clear()


@pytest.fixture
def make_user(django_user_model: Any) -> Callable[[str], Any]:
    """Create the user behind a role (``None`` for ``anonymous``)."""

    def make(role: str) -> Any:
        if role == "anonymous":
            return None
        if role == "superuser":
            return django_user_model.objects.create_superuser("root", password="root-pw")
        return django_user_model.objects.create_user(
            role,
            password=f"{role}-pw",
            is_staff=role in ("staff", "inactive_staff"),
            is_active=role != "inactive_staff",
        )

    return make


@pytest.fixture
def client_for(make_user: Callable[[str], Any]) -> Callable[[str], APIClient]:
    """An API client logged in by session as ``role`` (no login for ``anonymous``)."""

    def make(role: str) -> APIClient:
        api = APIClient()
        user = make_user(role)
        if user is not None:
            api.force_login(user)
        return api

    return make
