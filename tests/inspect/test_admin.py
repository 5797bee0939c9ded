"""The admin (SPEC §5): every page renders with real data; actions go through
``client``; "force release" is a confirmed rotation; nothing is editable."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from tests.inspect.conftest import Populated
from weft_django import client
from weft_django.models import (
    ClaimEvent,
    EngineRecord,
    GlobalLease,
    JournalEntry,
    OwnershipModeMarker,
    QueueLock,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _weft_models() -> list[Any]:
    return [model for model in admin.site._registry if model._meta.app_label == "weft"]


def _url(model: Any, view: str, *args: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


def _latest(workflow_id: str) -> WorkflowRun:
    run = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-created_at").first()
    assert run is not None, workflow_id
    return run


def _messages(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_the_populated_store_is_what_the_pages_show(populated: Populated) -> None:
    statuses = {
        wid: _latest(wid).status
        for wid in (populated.sleeper, populated.waiter, populated.failing, populated.done)
    }
    assert statuses == {
        populated.sleeper: "parked",
        populated.waiter: "parked",
        populated.failing: "failed",
        populated.done: "completed",
    }
    assert Timer.objects.filter(run=_latest(populated.sleeper)).exists()
    assert JournalEntry.objects.count() >= 5
    assert ClaimEvent.objects.filter(kind="acquire").count() == 4


def test_every_changelist_and_change_page_renders(
    populated: Populated, admin_client: Client
) -> None:
    models = _weft_models()
    assert {m.__name__ for m in models} >= {
        "WorkflowRun",
        "WorkflowClaim",
        "EngineRecord",
        "OwnershipModeMarker",
    }
    assert OwnershipModeMarker.objects.exists()
    # The store runs in workflow-lease mode; a lease row only to render its page.
    GlobalLease.objects.create(epoch=2, holder_id="lease-holder", expires_at=1_700_000_030_000)
    # A schedule row only to render its pages (issue #16).
    client.create_schedule("admin-sched", _latest(populated.done).name, every=3600, paused=True)
    # A buffered signal (the sleeper waits on its timer) and a pending async activity.
    client.signal(populated.sleeper, "go", {"early": True})
    client.start("inspect-async", {"n": 5}, workflow_id="insp-async-1")
    populated.env.run_until_idle()
    pages = 0
    for model in models:
        response = admin_client.get(_url(model, "changelist"))
        assert response.status_code == 200, model
        if model is QueueLock:
            continue  # the queue list (declared queues) has no change page
        objects = list(model.objects.all()[:20])
        assert objects, f"no {model.__name__} rows: the fixture should create some"
        for obj in objects:
            response = admin_client.get(_url(model, "change", quote(obj.pk)))
            assert response.status_code == 200, (model, obj.pk)
            pages += 1
    assert pages >= 10


def test_runs_changelist_columns_filters_and_search(
    populated: Populated, admin_client: Client
) -> None:
    url = _url(WorkflowRun, "changelist")
    body = admin_client.get(url).content.decode()
    for wid in (populated.sleeper, populated.waiter, populated.failing, populated.done):
        assert wid in body
    assert populated.engine_id in body  # owner engine of the parked runs
    for column in ("owner engine", "epoch", "age"):
        assert column in body.lower()

    parked = admin_client.get(url, {"status__exact": "parked"}).content.decode()
    assert populated.sleeper in parked and populated.failing not in parked
    by_name = admin_client.get(url, {"name": "inspect-failing"}).content.decode()
    assert populated.failing in by_name and populated.sleeper not in by_name
    by_key = admin_client.get(url, {"q": populated.idempotency_key}).content.decode()
    assert populated.sleeper in by_key and populated.waiter not in by_key
    by_id = admin_client.get(url, {"q": populated.waiter}).content.decode()
    assert populated.waiter in by_id and populated.sleeper not in by_id


def test_run_change_page_shows_journal_timers_and_claim_timeline(
    populated: Populated, admin_client: Client
) -> None:
    run = _latest(populated.sleeper)
    body = admin_client.get(_url(WorkflowRun, "change", run.pk)).content.decode()
    assert "Claim timeline" in body and "Journal timeline" in body
    assert "weft-claim-timeline" in body and "weft-timeline" in body
    assert "acquire" in body
    assert "inspect_echo" in body or "inspect-echo" in body or "echo" in body
    assert "Timers" in body or "timer" in body.lower()
    assert populated.engine_id in body
    # Read-only: no editable inputs for the run's own fields, no save button.
    assert 'name="status"' not in body
    assert 'name="_save"' not in body

    failed = _latest(populated.failing)
    body = admin_client.get(_url(WorkflowRun, "change", failed.pk)).content.decode()
    assert "boom" in body
    assert "release" in body  # the terminal commit released the claim


def test_holders_engines_and_marker_pages(populated: Populated, admin_client: Client) -> None:
    everything = admin_client.get(_url(WorkflowClaim, "changelist"), {"state": "all"})
    holders = everything.content.decode()
    assert "Holders" in holders or "holders" in holders
    for wid in (populated.sleeper, populated.waiter):
        assert wid in holders
    assert populated.engine_id in holders
    # The fake clock of the test environment is far in the past: its claims are expired.
    assert "expired" in holders and "released" in holders
    for state in ("live", "expired", "released"):
        response = admin_client.get(_url(WorkflowClaim, "changelist"), {"state": state})
        assert response.status_code == 200
    expired = admin_client.get(_url(WorkflowClaim, "changelist"), {"state": "expired"})
    assert populated.sleeper in expired.content.decode()
    released = admin_client.get(_url(WorkflowClaim, "changelist"), {"state": "released"})
    assert populated.sleeper not in released.content.decode()
    assert populated.done in released.content.decode()

    engines = admin_client.get(_url(EngineRecord, "changelist")).content.decode()
    assert populated.engine_id in engines
    assert "acquired 4" in engines  # counters from EngineRecord.metrics
    for alive in ("yes", "no"):
        response = admin_client.get(_url(EngineRecord, "changelist"), {"alive": alive})
        assert response.status_code == 200
    page = admin_client.get(_url(EngineRecord, "change", quote(populated.engine_id)))
    assert "claims active" in page.content.decode()

    marker = admin_client.get(_url(OwnershipModeMarker, "changelist")).content.decode()
    assert "workflow-lease" in marker


def test_nothing_is_addable_editable_or_deletable(
    populated: Populated, admin_client: Client
) -> None:
    run = _latest(populated.waiter)
    claim = WorkflowClaim.objects.get(pk=populated.waiter)
    for model in _weft_models():
        assert admin_client.get(_url(model, "add")).status_code == 403, model
    assert admin_client.post(_url(WorkflowRun, "delete", run.pk)).status_code == 403
    assert admin_client.post(_url(WorkflowClaim, "delete", quote(claim.pk))).status_code == 403
    # A POST to a view-only change page changes nothing.
    admin_client.post(_url(WorkflowRun, "change", run.pk), {"status": "completed"})
    admin_client.post(_url(WorkflowClaim, "change", quote(claim.pk)), {"epoch": 99})
    assert _latest(populated.waiter).status == "parked"
    assert WorkflowClaim.objects.get(pk=populated.waiter).epoch == claim.epoch
    # No "delete selected" action anywhere.
    body = admin_client.get(_url(WorkflowRun, "changelist")).content.decode()
    assert "delete_selected" not in body
    assert "cancel_runs" in body


def _act(admin_client: Client, action: str, runs: list[WorkflowRun], **extra: str) -> Any:
    data = {"action": action, "_selected_action": [str(r.pk) for r in runs], "post": "yes"}
    data.update(extra)
    return admin_client.post(_url(WorkflowRun, "changelist"), data, follow=True)


def test_run_actions_go_through_client(populated: Populated, admin_client: Client) -> None:
    waiter = _latest(populated.waiter)
    epoch_before = WorkflowClaim.objects.get(pk=populated.waiter).epoch
    response = _act(admin_client, "cancel_runs", [waiter])
    assert response.status_code == 200
    assert _latest(populated.waiter).status == "cancelled"
    claim = WorkflowClaim.objects.get(pk=populated.waiter)
    assert claim.epoch == epoch_before + 1 and claim.engine_id is None  # a rotation
    rotate = ClaimEvent.objects.filter(workflow_id=populated.waiter).order_by("-id").first()
    assert rotate is not None and rotate.kind == "rotate" and rotate.engine_id == "admin:admin"

    sleeper = _latest(populated.sleeper)
    _act(admin_client, "suspend_runs", [sleeper])
    assert _latest(populated.sleeper).status == "suspended"
    _act(admin_client, "resume_runs", [sleeper])
    assert _latest(populated.sleeper).status == "pending"

    _act(admin_client, "retry_runs", [_latest(populated.failing)])
    assert _latest(populated.failing).status == "pending"
    populated.env.run_until_idle()
    assert _latest(populated.failing).status == "failed"  # it fails again, honestly
    assert _latest(populated.sleeper).status == "parked"


def test_run_actions_report_per_run_errors(populated: Populated, admin_client: Client) -> None:
    done, waiter = _latest(populated.done), _latest(populated.waiter)
    response = _act(admin_client, "resume_runs", [done, waiter])
    texts = _messages(response) or [m.message for m in response.context["messages"]]
    assert texts == [
        f"Resumed 0 runs; 1 was already finished: {populated.done}; "
        f"1 was parked: {populated.waiter}."
    ]
    assert _latest(populated.done).status == "completed"
    assert _latest(populated.waiter).status == "parked"

    response = _act(admin_client, "suspend_runs", [done, waiter])
    joined = " | ".join(m.message for m in response.context["messages"])
    assert len(response.context["messages"]) == 1  # one summary, not one per run
    assert joined == (
        f"Suspended 1 run ({populated.waiter}); 1 was already finished: {populated.done}."
    )
    assert _latest(populated.waiter).status == "suspended"


def test_force_release_is_a_confirmed_rotation(populated: Populated, admin_client: Client) -> None:
    claim = WorkflowClaim.objects.get(pk=populated.sleeper)
    assert claim.engine_id == populated.engine_id
    # The fake clock is far in the past, so the claim is expired: not on the
    # default (live) page, whose queryset an action is applied to.
    url = _url(WorkflowClaim, "changelist") + "?state=expired"
    selection = {"action": "force_release", "_selected_action": [claim.pk]}

    page = admin_client.post(url, selection)
    assert page.status_code == 200
    body = page.content.decode()
    assert "rotates the epoch" in body
    assert "stop driving the workflow" in body
    assert populated.sleeper in body and populated.engine_id in body
    assert 'name="post" value="yes"' in body
    unchanged = WorkflowClaim.objects.get(pk=populated.sleeper)
    assert (unchanged.epoch, unchanged.engine_id) == (claim.epoch, claim.engine_id)

    response = admin_client.post(url, {**selection, "post": "yes"}, follow=True)
    assert response.status_code == 200
    rotated = WorkflowClaim.objects.get(pk=populated.sleeper)
    assert rotated.epoch == claim.epoch + 1
    assert rotated.engine_id is None and rotated.expires_at is None
    event = ClaimEvent.objects.filter(workflow_id=populated.sleeper).order_by("-id").first()
    assert event is not None
    assert (event.kind, event.epoch) == ("force_release", claim.epoch + 1)
    assert event.previous_engine_id == populated.engine_id
    joined = " | ".join(m.message for m in response.context["messages"])
    assert f"{claim.epoch} → {claim.epoch + 1}" in joined
    # The run itself is untouched; the deposed engine stops driving it.
    assert _latest(populated.sleeper).status == "parked"


def test_staff_without_permissions_cannot_act(populated: Populated, client: Client) -> None:
    from django.contrib.auth.models import User

    staff = User.objects.create_user("viewer", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get(_url(WorkflowRun, "changelist")).status_code == 403
    claim = WorkflowClaim.objects.get(pk=populated.sleeper)
    client.post(
        _url(WorkflowClaim, "changelist") + "?state=all",
        {"action": "force_release", "_selected_action": [claim.pk], "post": "yes"},
    )
    assert WorkflowClaim.objects.get(pk=populated.sleeper).epoch == claim.epoch


def test_run_change_page_shows_activity_progress(
    populated: Populated, admin_client: Client
) -> None:
    from weft_django.engine.activities.heartbeats import heartbeat_sink
    from weft_django.inspection import format_ms
    from weft_django.models import ActivityHeartbeat

    run = _latest(populated.sleeper)
    engine = populated.env.engine
    sink = heartbeat_sink(engine, run_id=run.pk, workflow_id=run.workflow_id, position=0, attempt=3)
    sink({"copied": 41, "note": "<b>not html</b>"})
    beat = ActivityHeartbeat.objects.get(run=run)
    body = admin_client.get(_url(WorkflowRun, "change", run.pk)).content.decode()
    assert "Activity progress" in body
    assert "&quot;copied&quot;: 41" in body  # pretty-printed JSON, escaped
    assert "<b>not html</b>" not in body and "&lt;b&gt;not html&lt;/b&gt;" in body
    assert format_ms(beat.beat_at) in body
    assert re.search(r'class="field-attempt">\s*<p>3</p>', body), "the attempt column"
    assert re.search(r'class="field-engine">\s*<p><a href="[^"]+">' + engine.engine_id, body)
    # A run without heartbeats renders the section empty, without error.
    other = _latest(populated.waiter)
    response = admin_client.get(_url(WorkflowRun, "change", other.pk))
    assert response.status_code == 200 and "copied" not in response.content.decode()
