"""Session-authenticated writes need a CSRF token: API endpoints and admin actions.

Why: a staff member logged in to the admin has a session cookie the browser
sends with any cross-site form post. Without the CSRF check a hostile page
could cancel, suspend, purge or force-release workflows in their name. Each
unsafe method is tried with Django's test ``Client(enforce_csrf_checks=True)``
logged in by session, holding the CSRF cookie as a browser would: without the
header (or with a wrong one) it must be refused with 403 and write nothing;
with the right one it must get through and do its work.

The token endpoints are the one deliberate exception: they authenticate
nobody (the async token is the credential, not the session), so there is no
session to ride on; ``tests/api/test_async.py`` checks they work without CSRF.
Basic-auth writes are not session writes and are not checked here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client
from django.urls import NoReverseMatch, reverse

import tests.security.workflows  # noqa: F401  (registers the sec- workflows)
from tests.security.test_endpoint_matrix import (
    BODIES,
    CATCH_ALL,
    ROUTES,
    STAFF_EXPECTED,
    TOKEN_ROUTES,
    UNSAFE,
)
from weft_django import client
from weft_django.models import (
    AsyncActivity,
    Schedule,
    SignalMessage,
    UpdateRequest,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = pytest.mark.django_db(transaction=True)

WID = "sec-w"
CSRF_FAILED = b"CSRF verification failed"  # Django's 403 page for a refused form post


def _status(workflow_id: str = WID) -> str:
    return WorkflowRun.objects.filter(workflow_id=workflow_id).latest("created_at").status


def _pending(env: Any) -> None:
    client.start("sec-signal", {"n": 1}, workflow_id=WID)


def _suspended(env: Any) -> None:
    _pending(env)
    client.suspend(WID)


def _failed(env: Any) -> None:
    client.start("sec-fail", None, workflow_id=WID)
    env.run_until_idle()
    assert _status() == "failed"


def _scheduled(env: Any) -> None:
    client.create_schedule("sec-sched", "sec-signal", every=3600)


def _terminal(env: Any) -> None:
    _pending(env)
    client.cancel(WID)


#: Per write endpoint: the state it needs to succeed, and how to see it did.
#: A new POST endpoint fails ``test_every_api_write_has_a_csrf_case`` until added.
API_WRITES: dict[str, tuple[Callable[[Any], None], Callable[[], bool]]] = {
    "workflow-list": (_pending, lambda: WorkflowRun.objects.filter(workflow_id="sec-new").exists()),
    "workflow-signal": (_pending, lambda: SignalMessage.objects.filter(name="go").exists()),
    "workflow-signal-with-start": (
        _pending,
        lambda: SignalMessage.objects.filter(name="go").exists(),
    ),
    "workflow-cancel": (_pending, lambda: _status() == "cancelled"),
    "workflow-suspend": (_pending, lambda: _status() == "suspended"),
    "workflow-resume": (_suspended, lambda: _status() == "pending"),
    "workflow-retry": (_failed, lambda: _status() == "pending"),
    "workflow-purge": (_terminal, lambda: not WorkflowRun.objects.exists()),
    "workflow-query": (_pending, lambda: True),  # a read by POST: nothing to see
    "schedule-list": (_pending, lambda: Schedule.objects.filter(pk="sec-sched").exists()),
    # PATCH changes it, DELETE removes it: each leaves a different trace.
    "schedule-detail": (
        _scheduled,
        lambda: Schedule.objects.filter(every_ms=3_600_000).count() == 0,
    ),
    "schedule-pause": (_scheduled, lambda: Schedule.objects.get(pk="sec-sched").paused),
    "schedule-resume": (_scheduled, lambda: Schedule.objects.get(pk="sec-sched").version == 2),
    "schedule-trigger": (
        _scheduled,
        lambda: WorkflowRun.objects.filter(workflow_id__startswith="sec-sched@").count() == 1,
    ),
    "schedule-backfill": (
        _scheduled,
        lambda: WorkflowRun.objects.filter(workflow_id__startswith="sec-sched@").count() == 3,
    ),
    "workflow-update": (_pending, lambda: UpdateRequest.objects.filter(name="stage").exists()),
    "bulk-cancel": (_pending, lambda: _status() == "cancelled"),
    "bulk-resume": (_suspended, lambda: _status() == "pending"),
    "bulk-retry": (_failed, lambda: _status() == "pending"),
    "workflow-fork": (
        _pending,
        lambda: WorkflowRun.objects.filter(workflow_id="sec-fork").exists(),
    ),
    "workflow-reset": (
        _pending,
        lambda: WorkflowRun.objects.filter(workflow_id=WID, status="terminated").exists(),
    ),
}
OK_STATUS = {
    "workflow-list": 201,
    "workflow-signal": 202,
    "workflow-signal-with-start": 202,
    "schedule-list": 201,
    "schedule-trigger": 201,
    "schedule-backfill": 201,
    "workflow-update": 504,  # accepted; no engine answers in these tests
    "workflow-fork": 201,
}
GUARDED = sorted(n for n in ROUTES if n not in TOKEN_ROUTES and n != CATCH_ALL)
API_CASES = [(name, method) for name in GUARDED for method in UNSAFE]


def _snapshot() -> dict[str, list[str]]:
    return {
        model._meta.label: sorted(map(repr, model.objects.order_by("pk").values_list()))
        for model in apps.get_app_config("weft").get_models()
    }


def _browser(user: Any) -> tuple[Client, str]:
    """A CSRF-enforcing client logged in by session, holding the CSRF cookie
    the admin page set (as a browser would); returns it and the token."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    assert browser.get(reverse("admin:index")).status_code == 200
    token = browser.cookies["csrftoken"].value
    assert token
    return browser, token


@pytest.fixture
def superuser(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", password="root-pw")


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("staff", password="staff-pw", is_staff=True)


def test_every_api_write_has_a_csrf_case() -> None:
    """Each implemented POST of a guarded endpoint has a prepared success state."""
    writes = {n for (n, m) in STAFF_EXPECTED if m in UNSAFE}
    assert writes == set(API_WRITES), writes ^ set(API_WRITES)


@pytest.mark.parametrize(("name", "method"), API_CASES)
def test_api_write_needs_the_csrf_token(staff: Any, weft_env: Any, name: str, method: str) -> None:
    """No header or a wrong one: 403 ``CSRF Failed`` and nothing written; the
    right one: the request gets through (a write does its work; a method the
    endpoint lacks is then 405, not 403)."""
    prepare, done = API_WRITES.get(name, (_pending, lambda: True))
    prepare(weft_env)
    browser, token = _browser(staff)
    url = ROUTES[name].url()
    call = getattr(browser, method.lower())
    body = BODIES.get(name, {})
    before = _snapshot()
    for header in ({}, {"HTTP_X_CSRFTOKEN": "x" * 32}):
        refused = call(url, body, content_type="application/json", **header)
        assert refused.status_code == 403, refused.content
        assert refused.json()["code"] == "permission_denied"
        assert refused.json()["message"].startswith("CSRF Failed"), refused.json()
        assert _snapshot() == before
    accepted = call(url, body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    if (name, method) in STAFF_EXPECTED:
        assert accepted.status_code == OK_STATUS.get(name, 200), accepted.content
        assert done()
    else:
        assert accepted.status_code == 405, accepted.content
        assert _snapshot() == before


# -- admin ---------------------------------------------------------------------------


def _parked_with_claim(env: Any) -> None:
    client.start("sec-signal", {"n": 1}, workflow_id=WID)
    env.run_until_idle()
    assert _status() == "parked"


def _claim_epoch() -> int:
    return WorkflowClaim.objects.get(pk=WID).epoch


def _awaiting_async(env: Any) -> None:
    client.start("sec-async", {"n": 1}, workflow_id=WID)
    env.run_until_idle()
    assert AsyncActivity.objects.get().status == "pending"


def _async() -> str:
    return AsyncActivity.objects.get().status


#: What an action's own form page asks for, posted with ``post=yes``.
ADMIN_ACTION_FORMS: dict[str, dict[str, str]] = {
    "complete_async_activities": {"result": '{"ok": true}'},
    "fail_async_activities": {"message": "declined"},
}
#: The changelist filter that shows the prepared row (Holders default to live claims,
#: and the test environment's fake clock makes its claims expired).
ADMIN_LIST_FILTERS: dict[str, str] = {"workflowclaim": "?state=all"}

#: Actions that write nothing (a CSRF-forged post can change no state); their own
#: tests check that (tests/e2e/test_replay_check.py: no row changes).
READ_ONLY_ACTIONS = {"replay_against_current_code"}

#: Admin action -> (model, state it needs, selected pk, how to see it worked).
ADMIN_ACTIONS: dict[str, tuple[str, Callable[[Any], None], Callable[[], bool]]] = {
    "cancel_runs": ("workflowrun", _pending, lambda: _status() == "cancelled"),
    "force_cancel_runs": ("workflowrun", _pending, lambda: _status() == "cancelled"),
    "suspend_runs": ("workflowrun", _pending, lambda: _status() == "suspended"),
    "resume_runs": ("workflowrun", _suspended, lambda: _status() == "pending"),
    "retry_runs": ("workflowrun", _failed, lambda: _status() == "pending"),
    "force_release": (
        "workflowclaim",
        _parked_with_claim,
        lambda: WorkflowClaim.objects.get(pk=WID).engine_id is None,
    ),
    "complete_async_activities": (
        "asyncactivity",
        _awaiting_async,
        lambda: _async() == "completed",
    ),
    "fail_async_activities": ("asyncactivity", _awaiting_async, lambda: _async() == "failed"),
    "pause_schedules": ("schedule", _scheduled, lambda: Schedule.objects.get().paused),
    "resume_schedules": ("schedule", _scheduled, lambda: Schedule.objects.get().version == 2),
    "trigger_schedules": (
        "schedule",
        _scheduled,
        lambda: WorkflowRun.objects.filter(workflow_id__startswith="sec-sched@").count() == 1,
    ),
}


def _weft_admins() -> dict[str, Any]:
    return {
        model._meta.model_name: model_admin
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == "weft"
    }


def test_every_admin_action_has_a_csrf_case() -> None:
    """Every action a weft ModelAdmin offers (Django's bulk delete is off) is covered."""
    offered = set()
    for model_admin in _weft_admins().values():
        offered |= {a if isinstance(a, str) else a.__name__ for a in model_admin.actions or ()}
    assert offered == set(ADMIN_ACTIONS) | READ_ONLY_ACTIONS


@pytest.mark.parametrize("action", sorted(ADMIN_ACTIONS))
def test_admin_action_needs_the_csrf_token(superuser: Any, weft_env: Any, action: str) -> None:
    """The action's form post: refused without the token (nothing written), done with it."""
    model, prepare, done = ADMIN_ACTIONS[action]
    prepare(weft_env)
    pks = {"workflowclaim": WID, "schedule": "sec-sched"}
    if model == "asyncactivity":
        pks[model] = AsyncActivity.objects.get().pk
    pk = pks[model] if model in pks else str(WorkflowRun.objects.get().pk)
    browser, token = _browser(superuser)
    url = reverse(f"admin:weft_{model}_changelist") + ADMIN_LIST_FILTERS.get(model, "")
    form = {
        "action": action,
        "_selected_action": [pk],
        "index": "0",
        "post": "yes",
        **ADMIN_ACTION_FORMS.get(action, {}),
    }
    before = _snapshot()
    for extra in ({}, {"csrfmiddlewaretoken": "x" * 32}):
        refused = browser.post(url, {**form, **extra})
        assert refused.status_code == 403 and CSRF_FAILED in refused.content
        assert _snapshot() == before
    accepted = browser.post(url, {**form, "csrfmiddlewaretoken": token})
    assert accepted.status_code == 302, accepted.content[:500]
    assert done(), action


def _admin_urls() -> list[str]:
    """Every URL of every weft ModelAdmin (a sample object for the object views)."""
    urls = []
    for model_name, model_admin in _weft_admins().items():
        obj = model_admin.model.objects.first()
        pk = str(obj.pk) if obj is not None else "missing"
        for view, args in (
            ("changelist", []),
            ("add", []),
            ("change", [pk]),
            ("delete", [pk]),
            ("history", [pk]),
        ):
            try:
                urls.append(reverse(f"admin:weft_{model_name}_{view}", args=args))
            except NoReverseMatch:  # pragma: no cover - every ModelAdmin has these five
                raise
    return urls


@pytest.mark.parametrize("method", UNSAFE)
def test_every_weft_admin_url_refuses_unsafe_methods_without_the_token(
    superuser: Any, weft_env: Any, method: str
) -> None:
    """POST/PUT/PATCH/DELETE on every weft admin page: CSRF refusal without the
    token; with it, whatever the view says (the admin is read-only) but not CSRF."""
    _parked_with_claim(weft_env)
    browser, token = _browser(superuser)
    urls = _admin_urls()
    assert len(urls) == 5 * len(_weft_admins()) >= 30
    before = _snapshot()
    call = getattr(browser, method.lower())
    for url in urls:
        refused = call(url, {}) if method == "POST" else call(url)
        assert refused.status_code == 403 and CSRF_FAILED in refused.content, (url, method)
        accepted = call(url, {}, HTTP_X_CSRFTOKEN=token)
        assert CSRF_FAILED not in accepted.content, (url, method)
    assert _snapshot() == before  # read-only: even accepted posts changed nothing
    assert _status() == "parked" and _claim_epoch() >= 1
