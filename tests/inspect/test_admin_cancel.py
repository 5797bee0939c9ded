"""The admin's cancel and force cancel actions, and the cancel-requested state shown."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.inspect.conftest import Populated
from tests.inspect.test_admin import _act, _latest, _url
from weft_django import client
from weft_django.models import WorkflowRun


def test_cancel_requested_is_shown_and_filtered(populated: Populated, admin_client: Client) -> None:
    client.cancel(populated.waiter, "cleanup please", grace=60)
    page = admin_client.get(_url(WorkflowRun, "changelist"), {"cancel_requested": "yes"})
    assert page.status_code == 200
    body = page.content.decode()
    assert populated.waiter in body
    assert populated.sleeper not in body
    assert "cancel requested" in body
    detail = admin_client.get(_url(WorkflowRun, "change", _latest(populated.waiter).pk))
    text = detail.content.decode()
    assert "cleanup please" in text
    assert "cancel grace ends" in text.lower()  # the admin capitalises labels
    others = admin_client.get(_url(WorkflowRun, "changelist"), {"cancel_requested": "no"})
    assert populated.waiter not in others.content.decode()


def test_force_cancel_ends_a_run_cleaning_up(populated: Populated, admin_client: Client) -> None:
    client.cancel(populated.waiter, grace=60)
    assert _latest(populated.waiter).status == "parked"
    response: Any = _act(admin_client, "force_cancel_runs", [_latest(populated.waiter)])
    assert response.status_code == 200
    run = _latest(populated.waiter)
    assert run.status == "cancelled"
    assert f"Force cancelled 1 run ({populated.waiter})." in " | ".join(
        m.message for m in response.context["messages"]
    )


def test_the_cancel_action_is_immediate_without_a_grace(
    populated: Populated, admin_client: Client
) -> None:
    _act(admin_client, "cancel_runs", [_latest(populated.sleeper)])
    run = _latest(populated.sleeper)
    assert run.status == "cancelled" and run.cancel_requested_at is None
