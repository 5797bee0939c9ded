"""Issue #19, admin: the signals and async-activity pages, staff complete/fail
through ``client``, one summary message per bulk action, LogEntry history,
exact-id search and the Holders' default of live claims."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import reverse

from tests.inspect.conftest import Populated
from tests.inspect.workflows import ASYNC_TOKENS
from weft_django import client
from weft_django.engine.journal import hash_token
from weft_django.errors import AsyncActivityTokenError
from weft_django.kernel.clock import wall_ms
from weft_django.models import AsyncActivity, SignalMessage, WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

ASYNC_LIST = "admin:weft_asyncactivity_changelist"
RUN_LIST = "admin:weft_workflowrun_changelist"


def _latest(workflow_id: str) -> WorkflowRun:
    run = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-created_at").first()
    assert run is not None, workflow_id
    return run


def _messages(response: Any) -> list[str]:
    return [m.message for m in response.context["messages"]]


def _log_entries(model: Any, action: str) -> LogEntry:
    return LogEntry.objects.filter(
        content_type=ContentType.objects.get_for_model(model),
        change_message__contains=f"“{action}”",
        action_flag=CHANGE,
    )


def _async_run(populated: Populated, workflow_id: str) -> AsyncActivity:
    ASYNC_TOKENS.clear()
    client.start("inspect-async", {"n": 5}, workflow_id=workflow_id)
    populated.env.run_until_idle()
    assert _latest(workflow_id).status == "parked"
    assert len(ASYNC_TOKENS) == 1
    return AsyncActivity.objects.get(run__workflow_id=workflow_id)


# --------------------------------------------------------------------------- signals


def test_signals_page_shows_buffered_and_consumed_signals(
    populated: Populated, admin_client: Client
) -> None:
    # The sleeper waits on its timer, so its "go" stays buffered; the waiter consumes its own.
    client.signal(populated.sleeper, "go", {"early": "<b>x</b>"})
    client.signal(populated.waiter, "go", {"n": 1})
    populated.env.run_until_idle()
    assert _latest(populated.waiter).status == "completed"
    url = reverse("admin:weft_signalmessage_changelist")
    body = admin_client.get(url).content.decode()
    assert populated.sleeper in body and populated.waiter in body
    assert "buffered" in body and "consumed at step" in body
    assert "<b>x</b>" not in body  # payloads are escaped
    run_link = reverse("admin:weft_workflowrun_change", args=[_latest(populated.sleeper).pk])
    assert f'href="{run_link}"' in body

    buffered = admin_client.get(url, {"state": "buffered"}).content.decode()
    assert populated.sleeper in buffered and populated.waiter not in buffered
    consumed = admin_client.get(url, {"state": "consumed"}).content.decode()
    assert populated.waiter in consumed and populated.sleeper not in consumed
    message = SignalMessage.objects.get(run__workflow_id=populated.sleeper)
    page = admin_client.get(reverse("admin:weft_signalmessage_change", args=[message.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content


# --------------------------------------------------------------------------- async activities


def test_async_page_never_shows_the_token(populated: Populated, admin_client: Client) -> None:
    row = _async_run(populated, "insp-async-1")
    token = ASYNC_TOKENS[0]
    assert row.token_hash == hash_token(token)
    body = admin_client.get(reverse(ASYNC_LIST)).content.decode()
    assert "insp-async-1" in body and "inspect_hand_out" in body and "pending" in body
    assert row.token_hash[:12] in body
    assert token not in body
    page = admin_client.get(reverse("admin:weft_asyncactivity_change", args=[row.pk]))
    assert page.status_code == 200 and token not in page.content.decode()
    assert b'name="_save"' not in page.content
    pending = admin_client.get(reverse(ASYNC_LIST), {"status__exact": "pending"})
    assert "insp-async-1" in pending.content.decode()
    completed = admin_client.get(reverse(ASYNC_LIST), {"status__exact": "completed"})
    assert "insp-async-1" not in completed.content.decode()


def test_complete_goes_through_the_client_and_the_workflow_resumes(
    populated: Populated, admin_client: Client
) -> None:
    row = _async_run(populated, "insp-async-1")
    url = reverse(ASYNC_LIST)
    selection = {"action": "complete_async_activities", "_selected_action": [row.pk]}

    form = admin_client.post(url, selection)
    assert form.status_code == 200
    body = form.content.decode()
    assert "insp-async-1" in body and 'name="result"' in body and "1 of 1 selected" in body
    assert ASYNC_TOKENS[0] not in body
    assert AsyncActivity.objects.get(pk=row.pk).status == "pending"  # the form wrote nothing

    bad = admin_client.post(url, {**selection, "post": "yes", "result": "{paid: yes}"})
    assert bad.status_code == 200
    assert "result &#x27;{paid: yes}&#x27; is not JSON" in bad.content.decode()
    assert AsyncActivity.objects.get(pk=row.pk).status == "pending"

    done = admin_client.post(
        url, {**selection, "post": "yes", "result": '{"paid": true}'}, follow=True
    )
    assert _messages(done) == [f"Completed 1 async activity (insp-async-1 {row.pk[:12]}…)."]
    settled = AsyncActivity.objects.get(pk=row.pk)
    assert (settled.status, settled.result) == ("completed", {"paid": True})
    populated.env.run_until_idle()
    run = _latest("insp-async-1")
    assert (run.status, run.result) == ("completed", {"got": {"paid": True}})
    entries = _log_entries(AsyncActivity, "complete_async_activities")
    assert [e.object_id for e in entries] == [row.pk]

    # Single use, as through the API: the outside system's late call is refused,
    # and so is a second admin completion -- in the one summary.
    with pytest.raises(AsyncActivityTokenError):
        client.complete_async_activity(ASYNC_TOKENS[0], {"paid": False})
    again = admin_client.post(url, {**selection, "post": "yes", "result": "1"}, follow=True)
    assert _messages(again) == [
        f"Completed 0 async activities; 1 was already settled: insp-async-1 {row.pk[:12]}…."
    ]
    assert AsyncActivity.objects.get(pk=row.pk).result == {"paid": True}


def test_fail_records_an_activity_error(populated: Populated, admin_client: Client) -> None:
    row = _async_run(populated, "insp-async-2")
    url = reverse(ASYNC_LIST)
    selection = {"action": "fail_async_activities", "_selected_action": [row.pk], "post": "yes"}

    for data, error in (
        ({"message": ""}, "This field is required."),
        ({"message": "m", "type": "not a class"}, "type &#x27;not a class&#x27; must look like"),
        ({"message": "m", "details": "[1,"}, "details &#x27;[1,&#x27; is not JSON"),
    ):
        response = admin_client.post(url, {**selection, **data})
        assert error in response.content.decode(), data
        assert AsyncActivity.objects.get(pk=row.pk).status == "pending", data

    response = admin_client.post(
        url,
        {**selection, "message": "card declined", "type": "Declined", "details": '{"code": 51}'},
        follow=True,
    )
    assert _messages(response) == [f"Failed 1 async activity (insp-async-2 {row.pk[:12]}…)."]
    settled = AsyncActivity.objects.get(pk=row.pk)
    assert settled.status == "failed"
    assert settled.error == {
        "message": "card declined",
        "type": "Declined",
        "details": {"code": 51},
    }
    populated.env.run_until_idle()
    run = _latest("insp-async-2")
    assert run.status == "failed" and "card declined" in str(run.error)
    assert _log_entries(AsyncActivity, "fail_async_activities").count() == 1


def test_settling_needs_the_change_permission(populated: Populated) -> None:
    row = _async_run(populated, "insp-async-3")
    url = reverse(ASYNC_LIST)
    staff = User.objects.create_user("viewer", password="x", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_asyncactivity"))
    browser = Client()
    browser.force_login(staff)
    page = browser.get(url)
    assert page.status_code == 200 and b"insp-async-3" in page.content
    assert b"complete_async_activities" not in page.content
    forged = {"action": "complete_async_activities", "_selected_action": [row.pk], "post": "yes"}
    browser.post(url, {**forged, "result": "1"})
    assert AsyncActivity.objects.get(pk=row.pk).status == "pending"

    staff.user_permissions.add(Permission.objects.get(codename="change_asyncactivity"))
    staff = User.objects.get(pk=staff.pk)  # drop the permission cache
    browser.force_login(staff)
    assert b"complete_async_activities" in browser.get(url).content
    browser.post(url, {**forged, "result": "1"})
    assert AsyncActivity.objects.get(pk=row.pk).status == "completed"


# --------------------------------------------------------------------------- bulk actions


def test_a_bulk_cancel_says_so_once_and_logs_each_run(
    populated: Populated, admin_client: Client
) -> None:
    handles = [client.start("inspect-quick", {"n": i}, workflow_id=f"bulk-{i}") for i in range(55)]
    finished = [_latest(populated.done), _latest(populated.failing)]
    selected = [h.run_id for h in handles] + [str(r.pk) for r in finished]
    response = admin_client.post(
        reverse(RUN_LIST),
        {"action": "cancel_runs", "_selected_action": selected, "post": "yes"},
        follow=True,
    )
    messages = _messages(response)
    assert len(messages) == 1, messages
    finished_ids = sorted([populated.done, populated.failing])
    assert messages[0].startswith("Cancelled 55 runs; 2 were already finished: ")
    assert sorted(messages[0].rstrip(".").split(": ")[1].split(", ")) == finished_ids
    statuses = set(
        WorkflowRun.objects.filter(workflow_id__startswith="bulk-").values_list("status", flat=True)
    )
    assert statuses == {"cancelled"}

    entries = _log_entries(WorkflowRun, "cancel_runs")
    assert sorted(e.object_id for e in entries) == sorted(h.run_id for h in handles)
    entry = entries.first()
    assert entry is not None and entry.user.username == "admin"
    assert entry.get_change_message() == "Cancelled by the admin action “cancel_runs”."
    history = admin_client.get(reverse("admin:weft_workflowrun_history", args=[handles[0].run_id]))
    assert "Cancelled by the admin action" in history.content.decode()


def test_a_bulk_summary_names_only_the_first_ids() -> None:
    from weft_django.admin.reporting import SHOWN_IDS, ActionReport

    report = ActionReport("suspended", "run")
    for i in range(1674):
        report.ok(object(), f"sw-{i}")
    for i in range(SHOWN_IDS + 3):
        report.refuse("already finished", f"done-{i}")
    shown = ", ".join(f"done-{i}" for i in range(SHOWN_IDS))
    assert report.summary() == (
        f"Suspended 1,674 runs; {SHOWN_IDS + 3} were already finished: {shown} and 3 more."
    )


# --------------------------------------------------------------------------- search


def test_run_search_is_exact_with_a_prefix_option(
    populated: Populated, admin_client: Client
) -> None:
    for wid in ("sw-18", "sw-189", "sw-18a", "xsw-18"):
        client.start("inspect-quick", {"n": 1}, workflow_id=wid)
    url = reverse(RUN_LIST)

    def listed(query: str) -> set[str]:
        rows = admin_client.get(url, {"q": query}).context["cl"].result_list
        return {run.workflow_id for run in rows}

    assert listed("sw-18") == {"sw-18"}
    assert listed("SW-18") == set()  # ids are case-sensitive
    assert listed("sw-18*") == {"sw-18", "sw-189", "sw-18a"}
    assert listed("sw-189 sw-18a") == {"sw-189", "sw-18a"}
    assert listed(populated.idempotency_key) == {populated.sleeper}
    body = admin_client.get(url).content.decode()
    assert "end a term with * to match by prefix" in body  # the search help text

    # "Select all" after an exact search acts on the exact match only.
    one = _latest("sw-18")
    response = admin_client.post(
        f"{url}?q=sw-18",
        {
            "action": "cancel_runs",
            "select_across": "1",
            "index": "0",
            "_selected_action": [one.pk],
            "post": "yes",
        },
        follow=True,
    )
    assert _messages(response) == ["Cancelled 1 run (sw-18)."]
    assert {wid: _latest(wid).status for wid in ("sw-18", "sw-189", "sw-18a", "xsw-18")} == {
        "sw-18": "cancelled",
        "sw-189": "pending",
        "sw-18a": "pending",
        "xsw-18": "pending",
    }


def test_holder_search_is_exact(populated: Populated, admin_client: Client) -> None:
    url = reverse("admin:weft_workflowclaim_changelist")

    def listed(query: str) -> set[str]:
        rows = admin_client.get(url, {"q": query, "state": "all"}).context["cl"].result_list
        return {claim.workflow_id for claim in rows}

    assert listed(populated.sleeper) == {populated.sleeper}
    assert listed("insp-") == set()
    assert listed("insp-*") == {
        populated.sleeper,
        populated.waiter,
        populated.failing,
        populated.done,
    }
    assert listed(populated.engine_id) == {populated.sleeper, populated.waiter}


# --------------------------------------------------------------------------- holders


def test_holders_default_to_live_claims(populated: Populated, admin_client: Client) -> None:
    # A claim live on this process's wall clock (the fixture's fake clock is far in
    # the past, so its claims are expired or released).
    now = wall_ms()
    WorkflowClaim.objects.create(
        workflow_id="live-1", epoch=1, engine_id="eng-live", claimed_at=now, expires_at=now + 60_000
    )
    url = reverse("admin:weft_workflowclaim_changelist")

    def listed(**params: str) -> set[str]:
        response = admin_client.get(url, params)
        assert response.status_code == 200
        return {claim.workflow_id for claim in response.context["cl"].result_list}

    assert listed() == {"live-1"}
    assert listed(state="live") == {"live-1"}
    assert listed(state="all") >= {"live-1", populated.sleeper, populated.done}
    assert populated.done in listed(state="released") and "live-1" not in listed(state="released")
    body = admin_client.get(url).content.decode()
    assert "?state=all" in body and "?state=released" in body  # the other choices remain
    assert "live-1" not in listed(state="expired")
    # An unknown state is refused the admin's way (back to the list with ?e=1), not
    # read as "all".
    bogus = admin_client.get(url, {"state": "bogus"})
    assert bogus.status_code == 302 and bogus["Location"].endswith("?e=1")
