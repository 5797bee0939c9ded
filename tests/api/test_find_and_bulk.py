"""``GET workflows/`` filters and ``POST bulk/<action>/`` (issue #20 part 3).

What could fail: a filter parameter ignored (the list silently wider), a
bad value answered with 200 or 500 instead of a 400 naming it, a repeated
parameter reduced to its last value, a bulk request that acts on every run
without ``all``, a dry run that writes, a user who may not cancel one run
cancelling many, a bulk route hiding a workflow (one whose id is ``cancel-many``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.api.conftest import url
from weft_django import client
from weft_django.models import RunSearchAttribute, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

ATTRS = {"customer": "str", "amount": "int", "due": "datetime"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def declared(settings: Any) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": ATTRS}


@pytest.fixture
def runs() -> dict[str, str]:
    made: dict[str, str] = {}
    for i in range(4):
        handle = client.start("api-signal", None, workflow_id=f"fb-{i}")
        made[f"fb-{i}"] = handle.run_id
        WorkflowRun.objects.filter(pk=handle.run_id).update(created_at=T0 + timedelta(days=i))
        RunSearchAttribute.objects.create(
            run_id=handle.run_id,
            name="customer",
            type="str",
            str_value="acme" if i < 2 else "globex",
            position=0,
        )
        RunSearchAttribute.objects.create(
            run_id=handle.run_id, name="amount", type="int", int_value=10**i, position=0
        )
    RunSearchAttribute.objects.create(
        run_id=made["fb-0"], name="due", type="datetime", datetime_value=T0, position=0
    )
    client.suspend("fb-1")
    WorkflowRun.objects.filter(pk=made["fb-3"]).update(parent_id=made["fb-0"])
    return made


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["workflow_id"] for row in response.json()["results"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"attr": "customer=acme"}, ["fb-1", "fb-0"]),
        ({"attr": ["customer=globex", "amount>=1000"]}, ["fb-3"]),
        ({"attr": "amount<100"}, ["fb-1", "fb-0"]),
        ({"attr": "due=2026-01-01T00:00:00Z"}, ["fb-0"]),
        ({"status": ["suspended", "pending"]}, ["fb-3", "fb-2", "fb-1", "fb-0"]),
        ({"status": "suspended"}, ["fb-1"]),
        ({"status": "suspended,pending", "attr": "customer=globex"}, ["fb-3", "fb-2"]),
        ({"workflow_id": ["fb-0", "fb-2"]}, ["fb-2", "fb-0"]),
        ({"workflow": "api-signal", "parent": "fb-0"}, ["fb-3"]),
        ({"created_after": "2026-01-02T00:00:00Z"}, ["fb-3", "fb-2"]),
        ({"created_before": "2026-01-02T00:00:00Z"}, ["fb-0"]),
        ({"name": "api-signal", "attr": ""}, ["fb-3", "fb-2", "fb-1", "fb-0"]),
    ],
)
def test_list_filters(api: Any, runs: dict[str, str], params: Any, expected: list[str]) -> None:
    assert ids(api.get(url("workflows/"), params)) == expected


def test_rows_carry_their_search_attributes(api: Any, runs: dict[str, str]) -> None:
    rows = api.get(url("workflows/"), {"workflow_id": "fb-0"}).json()["results"]
    assert rows[0]["search_attributes"] == {
        "amount": 1,
        "customer": "acme",
        "due": "2026-01-01T00:00:00Z",
    }
    detail = api.get(url("workflows/fb-2/")).json()
    assert detail["search_attributes"] == {"amount": 100, "customer": "globex"}


@pytest.mark.parametrize(
    ("params", "field", "named"),
    [
        ({"attr": "amout=5"}, "attr", "amout"),
        ({"attr": "amount=five"}, "attr", "five"),
        ({"attr": "customer>=a"}, "attr", "customer"),
        ({"attr": ["amount=1", "nope=2"]}, "attr", "nope"),
        ({"status": ["pending", "sleeping"]}, "status", "sleeping"),
        ({"created_after": "last week"}, "created_after", "last week"),
        ({"workflow_id": ["a\x00b", "ok"]}, "workflow_id", "a\\x00b"),  # NUL, not last
        (
            {"created_before": ["0001-01-01T00:00:00+01:00", "2026-01-01T00:00:00Z"]},
            "created_before",
            "0001",
        ),
        (
            {"finished_after": "2026-01-02T00:00:00Z", "finished_before": "2026-01-01T00:00:00Z"},
            "finished_before",
            "2026-01-01",
        ),
    ],
)
def test_a_bad_filter_is_a_400_naming_the_value(
    api: Any, params: Any, field: str, named: str
) -> None:
    response = api.get(url("workflows/"), params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert named in " ".join(body["errors"][field])


def test_bulk_dry_run_then_cancel(api: Any, runs: dict[str, str]) -> None:
    body = {"filter": {"attr": ["customer=acme"]}, "dry_run": True}
    dry = api.post(url("bulk/cancel/"), body, format="json")
    assert dry.status_code == 200, dry.content
    assert dry.json() == {
        "action": "cancel",
        "matched": 2,
        "changed": 2,
        "skipped": 0,
        "dry_run": True,
        "cascaded": 0,
        "chunks": 0,
        "filter": "attr=customer=acme",
    }
    assert not WorkflowRun.objects.filter(status="cancelled").exists()
    done = api.post(
        url("bulk/cancel/"),
        {"filter": {"attr": ["customer=acme"]}, "reason": "wrong customer"},
        format="json",
    ).json()
    assert (done["matched"], done["changed"], done["dry_run"], done["cascaded"]) == (2, 2, False, 1)
    cancelled = {
        r.workflow_id: r.error["message"] for r in WorkflowRun.objects.filter(status="cancelled")
    }
    # fb-3 was fb-0's (live) child: cancelled with it.
    assert cancelled == {
        "fb-0": "wrong customer",
        "fb-1": "wrong customer",
        "fb-3": "parent fb-0 was cancelled",
    }
    again = api.post(
        url("bulk/cancel/"), {"filter": {"attr": ["customer=acme"]}}, format="json"
    ).json()
    assert (again["changed"], again["skipped"]) == (0, 2)


def test_bulk_resume_and_retry(api: Any, runs: dict[str, str]) -> None:
    resumed = api.post(
        url("bulk/resume/"), {"filter": {"status": ["suspended"]}}, format="json"
    ).json()
    assert (resumed["action"], resumed["changed"]) == ("resume", 1)
    assert WorkflowRun.objects.get(workflow_id="fb-1").status == "pending"
    WorkflowRun.objects.filter(workflow_id="fb-2").update(status="failed")
    retried = api.post(
        url("bulk/retry/"), {"filter": {"workflow_id": ["fb-2", "fb-3"]}}, format="json"
    ).json()
    assert (retried["changed"], retried["skipped"]) == (1, 1)


def test_an_empty_filter_needs_all(api: Any, runs: dict[str, str]) -> None:
    for body in ({}, {"filter": {}}, {"filter": {"attr": []}}, {"all": False}):
        response = api.post(url("bulk/cancel/"), body, format="json")
        assert response.status_code == 400, response.content
        assert "all" in response.json()["errors"]
    assert not WorkflowRun.objects.filter(status="cancelled").exists()
    everything = api.post(url("bulk/cancel/"), {"all": True}, format="json").json()
    assert everything["changed"] == 4 and everything["filter"] == "(every run)"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"filter": {"attr": ["amount=lots"]}}, "attr"),
        ({"filter": {"status": ["nope"]}}, "status"),
        ({"filter": {"created_after": "soon"}}, "created_after"),
        ({"filter": {"workflow_id": "fb-0"}}, "workflow_id"),  # a list, not a string
        ({"filter": {"colour": ["red"]}}, None),
        ({"dry_run": "yes", "filter": {"status": ["pending"]}}, "dry_run"),
    ],
)
def test_a_bad_bulk_body_is_a_400_changing_nothing(
    api: Any, runs: dict[str, str], body: dict[str, Any], where: str | None
) -> None:
    response = api.post(url("bulk/cancel/"), body, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    if where == "dry_run":
        assert "dry_run" in errors
    elif where is not None:
        assert where in errors["filter"], errors
    assert not WorkflowRun.objects.filter(status="cancelled").exists()


def test_bulk_needs_the_action_permissions(plain_user: Any, runs: dict[str, str]) -> None:
    from rest_framework.test import APIClient

    for who in (None, plain_user):
        caller = APIClient()
        if who is not None:
            caller.force_login(who)
        response = caller.post(url("bulk/cancel/"), {"all": True}, format="json")
        assert response.status_code == 403
    assert not WorkflowRun.objects.filter(status="cancelled").exists()


def test_a_workflow_called_cancel_many_is_still_readable(api: Any) -> None:
    client.start("api-signal", None, workflow_id="cancel-many")
    response = api.get(url("workflows/cancel-many/"))
    assert response.status_code == 200 and response.json()["workflow_id"] == "cancel-many"
    assert api.get(url("workflows/retry-many/")).json()["code"] == "workflow_not_found"
    assert api.get(url("bulk/cancel/")).status_code == 405  # a bulk route takes POST only
    assert api.post(url("workflows/cancel-many/cancel/"), {}, format="json").status_code == 200
