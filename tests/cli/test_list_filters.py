"""``weft list`` with every filter flag, read by ``RunFilter.from_params`` (issue
#20): the same runs the API and the bulk commands would mean, and each bad
value refused with a message naming it."""

from __future__ import annotations

from typing import Any

import pytest

import tests.cli.workflows  # noqa: F401  (registers the workflows)
from tests.cli.helpers import weft
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

ATTRS = {"customer": "str", "amount": "int"}


@pytest.fixture
def orders(settings: Any, weft_env: Any) -> Any:
    """Three cli-order runs (acme 50, acme 150, globex 300), a parent with a child."""
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": ATTRS}
    for wid, customer, amount in (("o1", "acme", 50), ("o2", "acme", 150), ("o3", "globex", 300)):
        client.start("cli-order", {"customer": customer, "amount": amount}, workflow_id=wid)
    client.start("cli-parent", 1, workflow_id="p1")
    weft_env.run_until_idle()
    client.signal("o3", "go", 1)
    weft_env.run_until_idle()
    return weft_env


def ids(*args: str) -> list[str]:
    ran = weft("list", *args, "--json")
    assert ran.exit_code == 0, ran
    return sorted(row["workflow_id"] for row in ran.data["runs"])


def test_each_filter_flag(orders: Any) -> None:
    assert ids() == ["o1", "o2", "o3", "p1", "p1-child"]
    assert ids("--attr", "customer=acme") == ["o1", "o2"]
    assert ids("--attr", "customer=acme", "--attr", "amount>=100") == ["o2"]
    assert ids("--attr", "amount<100") == ["o1"]
    assert ids("--status", "completed") == ["o3"]
    assert ids("--status", "completed", "--status", "parked", "--workflow", "cli-order") == [
        "o1",
        "o2",
        "o3",
    ]
    assert ids("--workflow", "cli-parent", "--workflow", "cli-waiter") == ["p1", "p1-child"]
    assert ids("--id", "o1", "--id", "p1") == ["o1", "p1"]
    assert ids("--parent", "p1") == ["p1-child"]
    assert ids("--created-after", "2000-01-01T00:00:00Z", "--created-before", "2999-01-01") == [
        "o1",
        "o2",
        "o3",
        "p1",
        "p1-child",
    ]
    assert ids("--created-after", "2999-01-01T00:00:00+00:00") == []
    finished = WorkflowRun.objects.get(workflow_id="o3").finished_at
    assert finished is not None
    assert ids("--finished-after", "2000-01-01T00:00:00Z") == ["o3"]
    assert ids("--finished-before", finished.isoformat()) == []


def test_rows_carry_parent_and_attributes(orders: Any) -> None:
    rows = {r["workflow_id"]: r for r in weft("list", "--json").data["runs"]}
    assert rows["o2"]["attributes"] == {"amount": 150, "customer": "acme"}
    assert rows["p1-child"]["parent_workflow_id"] == "p1"
    assert rows["p1"]["parent_workflow_id"] is None and rows["p1"]["attributes"] == {}
    text = weft("list", "--workflow", "cli-order").out.splitlines()
    assert text[0].split()[-1] == "ATTRIBUTES"
    assert any(
        line.split()[0] == "o2" and line.endswith("amount=150 customer=acme") for line in text
    )


def test_paging_with_after(orders: Any) -> None:
    first = weft("list", "--limit", "2", "--json").data
    assert first["count"] == 2 and first["truncated"] is True
    second = weft("list", "--limit", "2", "--after", first["runs"][-1]["run_id"], "--json").data
    third = weft("list", "--limit", "2", "--after", second["runs"][-1]["run_id"], "--json").data
    assert third["count"] == 1 and third["truncated"] is False
    seen = [r["run_id"] for page in (first, second, third) for r in page["runs"]]
    newest_first = WorkflowRun.objects.order_by("-created_at", "-pk").values_list("pk", flat=True)
    assert seen == [str(pk) for pk in newest_first]


BAD_FILTERS = [
    (("--status", "exploded"), "status", "exploded"),
    (("--created-after", "yesterday"), "created_after", "yesterday"),
    (("--attr", "colour=red"), "attr", "colour=red"),
    (("--attr", "amount=lots"), "attr", "amount=lots"),
    (("--attr", "customer>=a"), "attr", "customer>=a"),
    (("--attr", "no-equals-sign"), "attr", "no-equals-sign"),
]


@pytest.mark.parametrize(("args", "key", "value"), BAD_FILTERS)
@pytest.mark.parametrize("json_flag", [False, True])
def test_bad_filter_values_are_named(
    orders: Any, args: Any, key: str, value: str, json_flag: bool
) -> None:
    ran = weft("list", *args, *(("--json",) if json_flag else ()))
    assert ran.exit_code == 2, ran
    assert value in ran.message and ran.message.startswith(f"Invalid run filter {key}=")
    if json_flag:
        error = ran.data["error"]
        assert (error["code"], error["key"], error["value"]) == ("invalid_run_filter", key, value)
    else:
        assert ran.out == ""


def test_bad_limit_and_after(orders: Any) -> None:
    ran = weft("list", "--limit", "10001", "--json")
    assert ran.exit_code == 2 and "10001" in ran.data["error"]["message"]
    ran = weft("list", "--after", "not-a-run", "--json")
    assert ran.exit_code == 2 and ran.data["error"]["key"] == "after"


def test_show_has_the_attributes(orders: Any) -> None:
    body = weft("show", "o2", "--json").data
    assert body["attributes"] == {"amount": 150, "customer": "acme"}
    assert "  attributes: amount=150 customer=acme" in weft("show", "o2").out.splitlines()
    assert weft("show", "p1-child", "--json").data["parent_workflow_id"] == "p1"
