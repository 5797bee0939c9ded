"""Hostile requests to every weft admin page and action: never a 500, nothing written.

Invariant protected: a superuser's browser (or anyone who steals its session)
can send anything to the weft admin -- object ids that are not keys (NUL,
5,000 characters, SQL, path traversal), selected-row lists of garbage, unknown
actions, action forms with broken JSON, oversized values, NUL bytes and
wrong types, changelist searches, filters, orderings and pages of garbage --
and every answer is a page or a redirect (< 500), while every weft row stays
as it was. The legitimate flows are covered by tests/security/test_admin_permissions.py
and the admin tests; these only feed the same pages what no form would send.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

import tests.security.workflows as sec_workflows  # registers the sec- workflows
from weft_django import client

pytestmark = pytest.mark.django_db(transaction=True)

WEFT_ADMINS = {
    model._meta.model_name: model_admin
    for model, model_admin in admin.site._registry.items()
    if model._meta.app_label == "weft"
}

HOSTILE_TEXT = [
    "",
    "\x00",
    "a\x00b",
    "x" * 5000,
    "'; DROP TABLE weft_django_workflowrun; --",
    "../../etc/passwd",
    "%00%ff",
    "\u202e\ufeff",
    "-1",
    "1e309",
    "[]",
    "{}",
]

#: The actions that show a form, the fields it reads, and values each broken in its
#: own way (the other fields are given valid values, so only the hostile one fails).
FORM_ACTIONS: dict[str, dict[str, list[str]]] = {
    "complete_async_activities": {
        "result": ["{bad json", "NaN", '"\\u0000"', "[" * 5000, '"' + "x" * 600_000 + '"', "\x00"],
    },
    "fail_async_activities": {
        "message": ["", "\x00", "m" * 5000],
        "type": ["1Bad", "a b", "\x00", "T" * 500],
        "details": ["{", "Infinity", '{"a": "\\ud800"}', "[" * 5000],
    },
}
VALID_FORM = {"result": "1", "message": "declined", "type": "Declined", "details": ""}


def _snapshot() -> dict[str, list[str]]:
    return {
        model._meta.label: sorted(map(repr, model.objects.order_by("pk").values_list()))
        for model in apps.get_app_config("weft").get_models()
    }


@pytest.fixture
def browser(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_superuser("root", password="root-pw")
    browser = Client(raise_request_exception=False)
    browser.force_login(user)
    return browser


@pytest.fixture
def seeded(weft_env: Any) -> None:
    """A parked run with a pending async activity, a waiting run, a claim, a schedule."""
    client.start("sec-async", None, workflow_id="hostile-async")
    client.start("sec-signal", {"n": 1}, workflow_id="hostile-sig")
    weft_env.run_until_idle()
    assert sec_workflows.TOKENS
    client.create_schedule("hostile-sched", "sec-signal", every=3600, input={"n": 1})


def _ok(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what}: {response.status_code}"


@pytest.mark.parametrize("model", sorted(WEFT_ADMINS))
def test_object_pages_with_hostile_ids(browser: Client, seeded: None, model: str) -> None:
    before = _snapshot()
    for raw in HOSTILE_TEXT:
        if not raw:
            continue
        pk = quote(raw)
        for view in ("change", "delete", "history"):
            url = reverse(f"admin:weft_{model}_{view}", args=[pk])
            _ok(browser.get(url), f"GET {view} {raw[:20]!r}")
            _ok(browser.post(url, {"post": "yes", "_save": "1"}), f"POST {view} {raw[:20]!r}")
    add = reverse(f"admin:weft_{model}_add")
    _ok(browser.post(add, {"workflow_id": "\x00", "epoch": "x" * 5000}), "POST add")
    assert _snapshot() == before


@pytest.mark.parametrize("model", sorted(WEFT_ADMINS))
def test_changelists_with_hostile_query_strings(browser: Client, seeded: None, model: str) -> None:
    url = reverse(f"admin:weft_{model}_changelist")
    before = _snapshot()
    for raw in ("", "\x00", "x" * 5000, "'; DROP TABLE weft_django_workflowrun; --", "-1", "[]"):
        for params in (
            {"q": raw},
            {"q": f"attr:{raw}"},
            {"q": f"parent:{raw} status:{raw}"},
            {"o": raw},
            {"p": raw},
            {"status__exact": raw},
            {"target__exact": raw},
            {raw or "empty": raw},
        ):
            _ok(browser.get(url, params), f"GET {model} {params!r:.60}")
    assert _snapshot() == before


@pytest.mark.parametrize("model", sorted(WEFT_ADMINS))
def test_actions_with_hostile_selections_and_forms(
    browser: Client, seeded: None, model: str
) -> None:
    model_admin = WEFT_ADMINS[model]
    url = reverse(f"admin:weft_{model}_changelist")
    real = [str(pk) for pk in model_admin.model.objects.values_list("pk", flat=True)[:2]]
    actions = [*model_admin.actions, "delete_selected", "no_such_action", "\x00", "x" * 5000]
    before = _snapshot()
    for action in actions:
        for selected in (["\x00"], ["x" * 5000], ["1 OR 1=1", "-1"], [""], []):
            data = {"action": action, "_selected_action": selected, "index": "0"}
            _ok(browser.post(url, data), f"{action!r:.30} on {selected!r:.30}")
        for field, values in FORM_ACTIONS.get(action, {}).items():
            for value in values:
                data = {
                    **VALID_FORM,
                    "action": action,
                    "_selected_action": real,
                    "post": "yes",
                    field: value,
                }
                response = browser.post(url, data)
                _ok(response, f"{action!r:.30} {field}={value!r:.30}")
                assert response.status_code == 200, (field, value)  # the form, with its error
                assert b"errorlist" in response.content, (field, value)
        _ok(browser.post(url, {"action": action, "select_across": "\x00", "index": "x"}), action)
    # Nothing was written: no hostile selection matched a row, and every hostile
    # form was refused before the client was called.
    after = _snapshot()
    assert after == before, {k for k in after if after[k] != before[k]}
