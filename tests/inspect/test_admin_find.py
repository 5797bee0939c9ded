"""The admin's run filters and bulk actions (issue #20 part 3).

What could fail: an attribute or range filter that is ignored (the list, and
so "select all, cancel", wider than shown), a bad filter that lists every
run instead of none, the run page hiding the attributes, a bulk action over
"select all" that runs one batch per run or leaves no history.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.inspect.test_admin import _messages, _url
from weft_django import client, workflow
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

ATTRS = {"customer": "str", "amount": "int", "vip": "bool"}


@pytest.fixture(autouse=True)
def declared(settings: Any) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": ATTRS}


@workflow(name="af-order")
def af_order(ctx: Any, data: Any) -> Any:
    ctx.upsert_search_attributes(**data)
    yield ctx.wait_for_signal("go")


@pytest.fixture
def orders(weft_env: Any) -> Any:
    for i in range(6):
        client.start(
            "af-order",
            {"customer": "acme" if i < 4 else "globex", "amount": i * 50, "vip": i == 0},
            workflow_id=f"af-{i}",
        )
    weft_env.run_until_idle()
    return weft_env


def listed(admin_client: Client, params: dict[str, str]) -> set[str]:
    page = admin_client.get(_url(WorkflowRun, "changelist"), params)
    assert page.status_code == 200
    return {run.workflow_id for run in page.context["cl"].result_list}


def test_attribute_list_filters(orders: Any, admin_client: Client) -> None:
    page = admin_client.get(_url(WorkflowRun, "changelist")).content.decode()
    assert "attribute customer" in page and "attribute vip" in page
    assert "attribute amount" not in page  # numbers: by range, in the search box
    assert listed(admin_client, {"attr_customer": "globex"}) == {"af-4", "af-5"}
    assert listed(admin_client, {"attr_vip": "true"}) == {"af-0"}
    assert listed(admin_client, {"attr_vip": "false", "attr_customer": "acme"}) == {
        "af-1",
        "af-2",
        "af-3",
    }


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("attr:amount>=150", {"af-3", "af-4", "af-5"}),
        ("attr:amount>=150 attr:customer=acme", {"af-3"}),
        ("attr:customer=globex af-5", {"af-5"}),
        ("status:parked,failed workflow:af-order attr:amount<50", {"af-0"}),
        ("af-1 af-2", {"af-1", "af-2"}),
        ("created_after:2000-01-01 created_before:2100-01-01 attr:vip=true", {"af-0"}),
        ("finished_after:2000-01-01", set()),
    ],
)
def test_search_box_takes_run_filters(
    orders: Any, admin_client: Client, q: str, expected: set[str]
) -> None:
    assert listed(admin_client, {"q": q}) == expected


def test_a_bad_search_filter_lists_nothing_and_says_why(orders: Any, admin_client: Client) -> None:
    page = admin_client.get(_url(WorkflowRun, "changelist"), {"q": "attr:amout=5"})
    assert list(page.context["cl"].result_list) == []
    assert any("amout" in m for m in _messages(page))


def test_created_and_finished_date_filters(orders: Any, admin_client: Client) -> None:
    WorkflowRun.objects.filter(workflow_id="af-5").update(
        created_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    # The links of the "created at" filter ("Past 7 days"): aware midnights.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    recent = {
        "created_at__gte": str(today - timedelta(days=7)),
        "created_at__lt": str(today + timedelta(days=1)),
    }
    assert listed(admin_client, recent) == {f"af-{i}" for i in range(5)}


def test_the_run_page_shows_the_attributes(orders: Any, admin_client: Client) -> None:
    run = WorkflowRun.objects.get(workflow_id="af-0")
    text = admin_client.get(_url(WorkflowRun, "change", run.pk)).content.decode()
    assert "Search attributes" in text
    for shown in ("customer", "acme", "amount", "vip", "True"):
        assert shown in text


def test_select_all_cancel_is_one_bulk_operation(
    orders: Any, admin_client: Client, weft_env: Any
) -> None:
    for i in range(6, 60):
        client.start("af-order", {"customer": "bulk"}, workflow_id=f"af-{i}")
    weft_env.run_until_idle()
    data = {
        "action": "cancel_runs",
        "post": "yes",
        "select_across": "1",
        "index": "0",
        "_selected_action": [str(WorkflowRun.objects.get(workflow_id="af-6").pk)],
    }
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.post(
            _url(WorkflowRun, "changelist") + "?attr_customer=bulk", data, follow=True
        )
    assert response.status_code == 200
    assert _messages(response) == ["Cancelled 54 runs."]
    assert WorkflowRun.objects.filter(status="cancelled").count() == 54
    assert WorkflowRun.objects.filter(status="parked").count() == 6
    assert LogEntry.objects.filter(change_message__contains="cancel_runs").count() == 54
    assert len(captured) < 100, len(captured)  # not several statements per run
    again = admin_client.post(
        _url(WorkflowRun, "changelist") + "?attr_customer=bulk", data, follow=True
    )
    assert _messages(again)[0].startswith("Cancelled 0 runs; 54 were already finished: ")
