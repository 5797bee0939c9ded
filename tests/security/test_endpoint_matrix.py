"""Every API endpoint × every role × every HTTP method gets the answer it must.

Why enumerated and not listed: the routes are discovered from the project's
URLconf (and cross-checked against the drf-spectacular schema), so an
endpoint added tomorrow shows up here as a new case and fails until someone
declares who may call it (``STAFF_EXPECTED`` / ``TOKEN_ROUTES``). The
existing ``tests/api/test_permissions.py`` checks anonymous and non-staff
on the implemented methods of the guarded endpoints; this extends that to
staff, superusers, inactive staff, the unimplemented methods (a refused
caller must not learn which methods exist), the token endpoints and the
catch-all, and it checks that a refused call writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.apps import apps
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

import tests.security.workflows  # noqa: F401  (registers the sec- workflows)
from tests.security.conftest import ROLES
from weft_django import client

pytestmark = pytest.mark.django_db

METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
#: What a staff user gets from each implemented (route, method), against one
#: pending run of ``sec-signal`` (id ``WID``) and the bodies in ``BODIES``.
#: resume/retry/purge answer 409 (the run is pending): the view ran, its
#: status rule refused -- the permission check let staff through.
STAFF_EXPECTED: dict[tuple[str, str], int] = {
    ("workflow-list", "GET"): 200,
    ("workflow-list", "POST"): 201,
    ("workflow-detail", "GET"): 200,
    ("workflow-history", "GET"): 200,
    ("workflow-signal", "POST"): 202,
    ("workflow-signal-with-start", "POST"): 202,
    ("workflow-cancel", "POST"): 200,
    ("workflow-suspend", "POST"): 200,
    ("workflow-resume", "POST"): 409,
    ("workflow-retry", "POST"): 409,
    ("workflow-purge", "POST"): 409,
    ("workflow-query", "POST"): 200,
    ("workflow-fork", "POST"): 201,  # at position 0: a new run of another id
    ("workflow-reset", "POST"): 200,  # the pending run ends terminated, a new one starts
    # Accepted (its request row written), then no answer within ``timeout: 0``:
    # no engine runs in these tests.
    ("workflow-update", "POST"): 504,
    ("workflow-ownership", "GET"): 200,
    ("workflow-claim-events", "GET"): 200,
    ("workflow-events", "GET"): 200,
    ("workflow-event", "GET"): 404,  # not set (yet): code event_not_set
    ("workflow-stream", "GET"): 200,  # text/event-stream (the test does not read it)
    ("claim-list", "GET"): 200,
    ("engine-list", "GET"): 200,
    ("metrics", "GET"): 200,
    # Schedules: no schedule exists in the matrix's state, so the detail routes
    # answer 404 schedule_not_found (the view ran: the permission check let staff
    # through); tests/security/test_csrf.py prepares one and sees them succeed.
    ("schedule-list", "GET"): 200,
    ("schedule-list", "POST"): 201,
    ("schedule-detail", "GET"): 404,
    ("schedule-detail", "PATCH"): 404,
    ("schedule-detail", "DELETE"): 404,
    ("schedule-pause", "POST"): 404,
    ("schedule-resume", "POST"): 404,
    ("schedule-trigger", "POST"): 404,
    ("schedule-backfill", "POST"): 404,
    # Bulk by filter (the body names WID): the counts, 200 -- resume and retry
    # skip the pending run, cancel ends it.
    ("bulk-cancel", "POST"): 200,
    ("bulk-resume", "POST"): 200,
    ("bulk-retry", "POST"): 200,
}
#: The token alone authorises these (SPEC §5): same answer for every role.
TOKEN_ROUTES = {
    "async-activity-complete": "POST",
    "async-activity-fail": "POST",
    "async-complete": "POST",
    "async-fail": "POST",
}
#: The JSON 404 for anything else under the prefix (a plain view, not in the schema).
CATCH_ALL = "not-found"

WID = "sec-w"
UNKNOWN_TOKEN = "f" * 64
BODIES: dict[str, dict[str, Any]] = {
    "workflow-list": {"name": "sec-signal", "workflow_id": "sec-new", "input": {"k": 1}},
    "workflow-signal": {"name": "go", "payload": {"p": 1}},
    "workflow-signal-with-start": {"name": "sec-signal", "signal": "go", "payload": {"p": 1}},
    "workflow-query": {"name": "progress"},
    "workflow-fork": {"at_position": 0, "workflow_id_for_fork": "sec-fork"},
    "workflow-reset": {"at_position": 0, "reason": "matrix"},
    "workflow-update": {"name": "stage", "timeout": 0},
    "async-activity-complete": {"result": {"r": 1}},
    "async-activity-fail": {"error": {"message": "declined"}},
    # The token in the body (the header form is tested in tests/api/test_async.py).
    "async-complete": {"result": {"r": 1}, "token": UNKNOWN_TOKEN},
    "async-fail": {"error": {"message": "declined"}, "token": UNKNOWN_TOKEN},
    "schedule-list": {"schedule_id": "sec-sched", "workflow": "sec-signal", "every": 3600},
    "schedule-detail": {"every": 7200},
    "schedule-backfill": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T02:00:00Z"},
    "bulk-cancel": {"filter": {"workflow_id": [WID]}},
    "bulk-resume": {"filter": {"workflow_id": [WID]}},
    "bulk-retry": {"filter": {"workflow_id": [WID]}},
}
SID = "sec-sched"
SAMPLE_KWARGS = {
    "workflow_id": WID,
    "token": UNKNOWN_TOKEN,
    "schedule_id": SID,
    "key": "progress",
}


class Route:
    """One route of the mounted weft API: its name, path template and view class."""

    def __init__(self, prefix: str, pattern: URLPattern) -> None:
        self.name = str(pattern.name)
        self.raw = prefix + str(pattern.pattern)
        self.view_class = getattr(pattern.callback, "view_class", None)

    @property
    def template(self) -> str:
        """``/api/weft/workflows/{workflow_id}/`` (the OpenAPI spelling)."""
        return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", self.raw)

    def url(self) -> str:
        if self.name == CATCH_ALL:
            return "/" + self.raw.split("^", 1)[0] + "no-such-endpoint/"
        return self.template.format(**SAMPLE_KWARGS)

    def implemented(self) -> set[str]:
        """The methods whose handler the view defines (HEAD follows GET in Django)."""
        if self.view_class is None:
            return set()
        found = {
            m
            for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
            if hasattr(self.view_class, m.lower())
        }
        return found


def _walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        else:
            yield prefix, entry


def weft_routes() -> list[Route]:
    """Every route the project's URLconf mounts from ``weft_django.api``."""
    routes = []
    for prefix, pattern in _walk(get_resolver().url_patterns, ""):
        module = getattr(pattern.callback, "__module__", "")
        if module.startswith("weft_django.api"):
            routes.append(Route(prefix, pattern))
    return routes


ROUTES = {route.name: route for route in weft_routes()}
CASES = [(name, method, role) for name in ROUTES for method in METHODS for role in ROLES]


def _snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every weft model (what a refused call must leave untouched)."""
    return {
        model._meta.label: sorted(map(repr, model.objects.order_by("pk").values_list()))
        for model in apps.get_app_config("weft").get_models()
    }


def _call(api: APIClient, method: str, url: str, body: dict[str, Any] | None) -> Any:
    call: Callable[..., Any] = getattr(api, method.lower())
    if method in UNSAFE:
        return call(url, body or {}, format="json")
    return call(url)


def expected(name: str, method: str, role: str) -> tuple[int, str | None]:
    """``(status, code)`` the matrix requires; fails for an undeclared endpoint."""
    route = ROUTES[name]
    if name == CATCH_ALL:
        return 404, "not_found"
    if name in TOKEN_ROUTES:
        assert route.implemented() == {TOKEN_ROUTES[name]}, route.implemented()
        if method == "POST":
            return 404, "async_activity_token"  # unknown token, whoever calls
        if method == "OPTIONS":
            return 200, None
        return 405, "method_not_allowed"  # no GET: a token cannot be used to read
    implemented = {m for (n, m) in STAFF_EXPECTED if n == name}
    assert implemented, (
        f"endpoint {route.template} ({name}) has no permission expectation: add it to "
        "STAFF_EXPECTED or TOKEN_ROUTES in tests/security/test_endpoint_matrix.py"
    )
    assert route.implemented() == implemented, (name, route.implemented(), implemented)
    if role in ("anonymous", "inactive_staff"):
        return 403, "not_authenticated"
    if role == "plain":
        return 403, "permission_denied"
    if method == "OPTIONS":
        return 200, None
    if method == "HEAD":
        method = "GET"
    if (name, method) in STAFF_EXPECTED:
        return STAFF_EXPECTED[(name, method)], None
    return 405, "method_not_allowed"


def test_routes_were_discovered() -> None:
    """Guards the discovery itself: an empty walk would make the matrix vacuous."""
    assert set(STAFF_EXPECTED) and {n for n, _ in STAFF_EXPECTED} <= set(ROUTES)
    assert set(TOKEN_ROUTES) <= set(ROUTES) and CATCH_ALL in ROUTES
    assert len(CASES) == len(ROUTES) * len(METHODS) * len(ROLES)


def test_every_routed_operation_is_in_the_schema_and_declared() -> None:
    """URLconf, OpenAPI schema and the expectations name the same operations."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    in_schema = {
        (path, method.upper())
        for path, item in schema["paths"].items()
        if path.startswith("/api/weft/")
        for method in item
        if method.upper() in METHODS
    }
    routed = {
        (route.template, method)
        for route in ROUTES.values()
        if route.name != CATCH_ALL
        for method in route.implemented()
    }
    assert routed == in_schema
    declared = {(ROUTES[n].template, m) for n, m in STAFF_EXPECTED} | {
        (ROUTES[n].template, m) for n, m in TOKEN_ROUTES.items()
    }
    assert routed == declared, routed ^ declared


def test_schema_says_which_operations_need_no_login() -> None:
    """Only the token endpoints advertise ``security: []``-free access in the schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    open_ops = {
        operation["operationId"]
        for path, item in schema["paths"].items()
        if path.startswith("/api/weft/")
        for operation in item.values()
        if isinstance(operation, dict) and not operation.get("security")
    }
    assert open_ops == {
        "weft_async_activities_complete",
        "weft_async_activities_fail",
        "weft_async_activities_complete_by_token",
        "weft_async_activities_fail_by_token",
    }


@pytest.mark.parametrize(("name", "method", "role"), CASES)
def test_endpoint_answers_each_role_and_method(
    client_for: Callable[[str], APIClient], name: str, method: str, role: str
) -> None:
    """Status and error code per (endpoint, method, role); refused calls write nothing."""
    status, code = expected(name, method, role)
    client.start("sec-signal", {"n": 1}, workflow_id=WID)
    api = client_for(role)
    before = _snapshot()
    response = _call(api, method, ROUTES[name].url(), BODIES.get(name))
    assert response.status_code == status, (response.status_code, response.content[:300])
    if method == "HEAD":
        assert response.content == b""
    elif code is not None:
        assert response.json()["code"] == code, response.json()
    if status in (401, 403, 404, 405):
        assert _snapshot() == before, "a refused call wrote to the database"
        text = response.content.decode()
        assert "sec-signal" not in text and '"n"' not in text  # nothing of the run leaks
    if name in TOKEN_ROUTES and method == "POST":
        assert set(response.json()) == {"code", "message", "kind"}
        assert UNKNOWN_TOKEN not in response.content.decode()  # the token is not echoed
