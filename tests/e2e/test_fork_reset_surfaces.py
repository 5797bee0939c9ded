"""Fork and reset through the API, the CLI and the admin: the same client calls,
audited with the operator as actor; a refusal writes nothing."""

from __future__ import annotations

import getpass
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from rest_framework.test import APIClient

from tests.cli.helpers import weft
from tests.e2e.helpers import claim_events, latest, row_counts
from tests.e2e.test_fork_reset import fr_four, fr_wait  # noqa: F401  (registers them)
from weft_django import client
from weft_django.models import ClaimEvent, WorkflowRun


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        "ops", password="x", is_staff=True, is_superuser=True
    )


@pytest.mark.django_db(transaction=True)
def test_api_fork_and_reset(weft_env, staff):
    api = APIClient()
    api.force_login(staff)
    client.start("fr-wait", None, workflow_id="fr-api")
    weft_env.run_until_idle()

    answer = api.post(
        "/api/weft/workflows/fr-api/fork/",
        {"at_position": 1, "workflow_id_for_fork": "fr-api-copy"},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    assert answer.json()["workflow_id"] == "fr-api-copy"

    before = row_counts()
    bad = api.post("/api/weft/workflows/fr-api/reset/", {"at_position": 7}, format="json")
    assert bad.status_code == 400 and "at_position 7" in bad.json()["message"]
    assert row_counts() == before

    answer = api.post(
        "/api/weft/workflows/fr-api/reset/", {"at_position": 1, "reason": "fix"}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "pending"
    rotate = ClaimEvent.objects.filter(workflow_id="fr-api", kind="rotate").get()
    assert rotate.engine_id == "api:ops"
    ended = WorkflowRun.objects.filter(workflow_id="fr-api", status="terminated").get()
    assert ended.error["message"] == "fix"


@pytest.mark.django_db(transaction=True)
def test_cli_fork_and_reset(weft_env):
    client.start("fr-four", None, workflow_id="fr-cli")
    weft_env.run_until_idle()
    ran = weft("fork", "fr-cli", "--at", "2", "--id", "fr-cli-2", "--json")
    assert ran.exit_code == 0, ran
    assert ran.data["workflow_id"] == "fr-cli-2" and ran.data["action"] == "fork"
    ran = weft("reset", "fr-cli", "--at", "9")
    assert ran.exit_code == 2, ran
    assert "at_position 9" in ran.message
    ran = weft("reset", "fr-cli", "--at", "3", "--reason", "replay step 3")
    assert ran.exit_code == 0, ran
    assert "continues from position 3" in ran.out
    weft_env.run_until_idle()
    assert latest("fr-cli").status == "completed"
    assert latest("fr-cli-2").status == "completed"


@pytest.mark.django_db(transaction=True)
def test_admin_reset_from_a_journal_entry_is_audited(weft_env, staff):
    h = client.start("fr-wait", None, workflow_id="fr-adm")
    weft_env.run_until_idle()
    browser = Client()
    browser.force_login(staff)
    page = browser.get(f"/admin/weft/workflowrun/{h.run_id}/change/")
    assert page.status_code == 200
    assert b"../repair/1/" in page.content
    form = browser.get(f"/admin/weft/workflowrun/{h.run_id}/repair/1/")
    assert form.status_code == 200 and b"position <strong>1</strong>" in form.content
    done = browser.post(
        f"/admin/weft/workflowrun/{h.run_id}/repair/1/", {"action": "reset", "reason": "bad"}
    )
    assert done.status_code == 302
    new = latest("fr-adm")
    assert new.pk != h.run_id and done["Location"].endswith(f"/{new.pk}/change/")
    assert WorkflowRun.objects.get(pk=h.run_id).status == "terminated"
    assert [e for e in claim_events("fr-adm") if e[0] == "rotate"]
    messages = set(LogEntry.objects.values_list("object_id", "change_message"))
    assert any(oid == h.run_id and "Reset at position 1 by admin:ops" in m for oid, m in messages)
    assert any(oid == str(new.pk) for oid, _ in messages)


def _history(run_id: Any) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=str(run_id))
        .order_by("id")
        .values_list("change_message", flat=True)
    )


@pytest.mark.django_db(transaction=True)
def test_api_and_cli_write_the_admins_audit_record(weft_env, staff):
    """The History line the admin writes on both runs, from the API (its user) and
    the CLI (``--user``); the actor is the one a reset's rotation records."""
    api = APIClient()
    api.force_login(staff)
    source = client.start("fr-wait", None, workflow_id="fr-aud")
    weft_env.run_until_idle()
    answer = api.post(
        "/api/weft/workflows/fr-aud/fork/",
        {"at_position": 1, "workflow_id_for_fork": "fr-aud-api"},
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    forked = answer.json()["run_id"]
    assert _history(source.run_id) == [f"Forked at position 1 by api:ops: new run {forked}."]
    assert _history(forked) == [f"Forked from run {source.run_id} at position 1 by api:ops."]
    assert LogEntry.objects.filter(object_id=forked).get().user_id == staff.pk

    ran = weft("reset", "fr-aud", "--at", "1", "--reason", "fix", "--user", "ops", "--json")
    assert ran.exit_code == 0, ran
    new = latest("fr-aud")
    by = f"cli:ops (OS user {getpass.getuser()})"
    assert _history(source.run_id)[-1] == f"Reset at position 1 by {by}: new run {new.pk}."
    assert _history(new.pk) == [f"Reset from run {source.run_id} at position 1 by {by}."]
    rotate = ClaimEvent.objects.filter(workflow_id="fr-aud", kind="rotate").get()
    assert rotate.engine_id == "cli:ops"

    # An unknown operator is refused before anything is written.
    before = (row_counts(), LogEntry.objects.count())
    ran = weft("fork", "fr-aud", "--at", "1", "--user", "nobody")
    assert ran.exit_code == 2 and "'nobody'" in ran.message
    assert (row_counts(), LogEntry.objects.count()) == before
