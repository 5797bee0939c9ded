"""The run list triages: coloured status badges, why a run is where it is, a cancel
mark only where a cancel is pending, short action labels, and a confirmation page
before cancel, force cancel and suspend (nothing written until "yes")."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.inspect.conftest import Populated
from weft_django.models import WorkflowRun

RUN_LIST = "admin:weft_workflowrun_changelist"


def _row(body: str, workflow_id: str) -> str:
    match = re.search(
        rf"<tr>(?:(?!</tr>).)*>{re.escape(workflow_id)}</a>(?:(?!</tr>).)*</tr>", body, re.S
    )
    assert match is not None, f"no row of {workflow_id}"
    return match.group(0)


def test_badges_why_column_and_cancel_mark(populated: Populated, admin_client: Client) -> None:
    # A finished run whose cancel was requested (and answered) shows no mark;
    # a live one whose cancel is pending does.
    now = timezone.now()
    WorkflowRun.objects.filter(workflow_id=populated.done).update(cancel_requested_at=now)
    WorkflowRun.objects.filter(workflow_id=populated.sleeper).update(cancel_requested_at=now)
    body = admin_client.get(reverse(RUN_LIST)).content.decode()
    assert "cancel pending" in _row(body, populated.sleeper)
    assert "cancel pending" not in _row(body, populated.done)
    assert "weft/admin.css" in body
    failed = _row(body, populated.failing)
    assert '<span class="weft-badge failed">failed</span>' in failed
    assert "ActivityError: Activity" in failed  # the error headline
    parked = _row(body, populated.waiter)
    assert '<span class="weft-badge parked">parked</span>' in parked
    assert "waits for signal &#x27;go&#x27;" in parked
    assert "cancel pending" not in parked
    assert "icon-no.svg" not in body  # the old ✗ on every row is gone
    for label in re.findall(r'<option value="[a-z_]+">([^<]+)</option>', body):
        assert len(label) <= 40, label


def test_cancel_asks_first_then_acts(populated: Populated, admin_client: Client) -> None:
    waiter = WorkflowRun.objects.get(workflow_id=populated.waiter)
    data = {"action": "cancel_runs", "_selected_action": [str(waiter.pk)], "index": "0"}
    page = admin_client.post(reverse(RUN_LIST), data)
    assert page.status_code == 200
    text = page.content.decode()
    assert "are you sure?" in text and "Yes, cancel them" in text
    assert populated.waiter in text and 'name="post" value="yes"' in text
    assert WorkflowRun.objects.get(pk=waiter.pk).status == "parked"  # nothing written yet
    admin_client.post(reverse(RUN_LIST), {**data, "post": "yes"}, follow=True)
    assert WorkflowRun.objects.get(pk=waiter.pk).status == "cancelled"


def test_suspend_and_force_cancel_ask_first(populated: Populated, admin_client: Client) -> None:
    sleeper = WorkflowRun.objects.get(workflow_id=populated.sleeper)
    for action, button in (
        ("suspend_runs", "Yes, suspend them"),
        ("force_cancel_runs", "Yes, force cancel them"),
    ):
        data = {"action": action, "_selected_action": [str(sleeper.pk)], "index": "0"}
        page = admin_client.post(reverse(RUN_LIST), data).content.decode()
        assert button in page
        assert WorkflowRun.objects.get(pk=sleeper.pk).status == "parked", action
