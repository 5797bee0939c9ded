"""Who may see and act in the weft admin: roles × every weft admin page.

Why: the admin's actions (cancel, suspend, resume, retry, force release) are
writes that rotate claims, so they must need the model's *change*
permission, not just admin access; and no role at all, superuser included,
may add, edit or delete protocol rows through a form (SPEC §5: read-only).
Here superuser differs from staff: staff get only what their permissions say.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

import tests.security.workflows  # noqa: F401  (registers the sec- workflows)
from tests.security.conftest import ROLES
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db

WEFT_ADMINS = sorted(
    model._meta.model_name for model in admin.site._registry if model._meta.app_label == "weft"
)


def _browser(make_user: Any, role: str) -> Client:
    browser = Client()
    user = make_user(role)
    if user is not None:
        browser.force_login(user)
    return browser


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("model", WEFT_ADMINS)
def test_admin_pages_by_role(make_user: Any, role: str, model: str) -> None:
    """Changelist and object page: login redirect for non-staff, 403 for staff
    without permissions, 200 for a superuser; add/change/delete never allowed."""
    client.start("sec-signal", {"n": 1}, workflow_id="sec-w")
    browser = _browser(make_user, role)
    model_admin = next(a for m, a in admin.site._registry.items() if m._meta.model_name == model)
    obj = model_admin.model.objects.first()
    changelist = reverse(f"admin:weft_{model}_changelist")
    response = browser.get(changelist)
    if role in ("anonymous", "plain", "inactive_staff"):
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
        return
    if role == "staff":
        assert response.status_code == 403
        return
    assert response.status_code == 200
    for action in model_admin.actions if obj is not None else ():  # offered with rows
        assert f'value="{action}"'.encode() in response.content, action
    assert browser.get(reverse(f"admin:weft_{model}_add")).status_code == 403
    if obj is not None:
        page = browser.get(reverse(f"admin:weft_{model}_change", args=[obj.pk]))
        assert page.status_code == 200
        assert b'name="_save"' not in page.content  # view-only: no save button
        delete = browser.post(reverse(f"admin:weft_{model}_delete", args=[obj.pk]), {"post": "yes"})
        assert delete.status_code == 403
        assert model_admin.model.objects.filter(pk=obj.pk).exists()


def test_view_only_staff_cannot_run_actions(django_user_model: Any) -> None:
    """Staff with only ``view`` on runs: the actions are not offered, and a forged
    action post writes nothing."""
    handle = client.start("sec-signal", {"n": 1}, workflow_id="sec-w")
    staff = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_workflowrun"))
    browser = Client()
    browser.force_login(staff)
    url = reverse("admin:weft_workflowrun_changelist")
    page = browser.get(url)
    assert page.status_code == 200
    for action in ("cancel_runs", "force_cancel_runs", "suspend_runs", "resume_runs", "retry_runs"):
        assert f'value="{action}"'.encode() not in page.content
        browser.post(url, {"action": action, "_selected_action": [handle.run_id], "index": "0"})
        assert WorkflowRun.objects.get(pk=handle.run_id).status == "pending", action
