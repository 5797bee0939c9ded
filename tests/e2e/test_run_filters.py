"""``RunFilter`` and ``client.list_runs`` (issue #20 part 3), on SQLite and PostgreSQL.

What could fail: a typo that widens a filter (an unknown key or attribute
read as "no condition"), a value parsed by the wrong type (``"10" < "9"``),
a naive datetime compared as UTC, a time bound that is not strict, a page
that repeats or skips a run, an empty filter not recognised as "every run".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weft_django import client, workflow
from weft_django.engine.runs.filters import AttributeRange, InvalidRunFilter, RunFilter
from weft_django.errors import WeftError
from weft_django.models import RunSearchAttribute, WorkflowRun

ATTRS = {"customer": "str", "amount": "int", "vip": "bool", "due": "datetime", "score": "float"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@workflow(name="rf-noop")
def rf_noop(ctx: Any, data: Any) -> Any:
    yield ctx.sleep(3600)


@workflow(name="rf-other")
def rf_other(ctx: Any, data: Any) -> Any:
    yield ctx.sleep(3600)


@pytest.fixture
def declared(settings: Any) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": ATTRS}


def _attr(run_id: str, name: str, value: Any) -> None:
    kind = ATTRS[name]
    RunSearchAttribute.objects.create(
        run_id=run_id, name=name, type=kind, position=0, **{f"{kind}_value": value}
    )


@pytest.fixture
def seeded(declared: None, db: None) -> dict[str, str]:
    """Five runs: created one day apart (r0 oldest), with attributes."""
    ids: dict[str, str] = {}
    for i in range(5):
        name = "rf-noop" if i % 2 == 0 else "rf-other"
        handle = client.start(name, None, workflow_id=f"rf-{i}")
        ids[f"r{i}"] = handle.run_id
        WorkflowRun.objects.filter(pk=handle.run_id).update(created_at=T0 + timedelta(days=i))
    WorkflowRun.objects.filter(pk=ids["r1"]).update(
        status="failed", finished_at=T0 + timedelta(days=1, hours=1)
    )
    WorkflowRun.objects.filter(pk=ids["r3"]).update(
        status="completed", finished_at=T0 + timedelta(days=3, hours=1)
    )
    WorkflowRun.objects.filter(pk=ids["r4"]).update(parent_id=ids["r0"])
    _attr(ids["r0"], "customer", "acme")
    _attr(ids["r1"], "customer", "acme")
    _attr(ids["r2"], "customer", "globex")
    for key, amount in (("r0", 5), ("r1", 50), ("r2", 500), ("r3", 9)):
        _attr(ids[key], "amount", amount)
    _attr(ids["r0"], "vip", True)
    _attr(ids["r1"], "vip", False)
    _attr(ids["r2"], "due", T0 + timedelta(days=10))
    _attr(ids["r3"], "score", 0.5)
    return ids


def _ids(summaries: list[Any], seeded: dict[str, str]) -> list[str]:
    back = {v: k for k, v in seeded.items()}
    return [back[s.run_id] for s in summaries]


def test_list_runs_newest_first_with_fields(seeded: dict[str, str]) -> None:
    runs = client.list_runs()
    assert _ids(runs, seeded) == ["r4", "r3", "r2", "r1", "r0"]
    first = runs[-1]
    assert first.workflow_id == "rf-0" and first.name == "rf-noop" and first.status == "pending"
    assert first.attributes == {"amount": 5, "customer": "acme", "vip": True}
    assert runs[0].parent_workflow_id == "rf-0"
    assert _ids(client.list_runs(limit=2), seeded) == ["r4", "r3"]


def test_keyset_pages_neither_repeat_nor_skip(seeded: dict[str, str]) -> None:
    seen: list[str] = []
    after = None
    while True:
        page = client.list_runs(limit=2, after=after)
        if not page:
            break
        seen.extend(_ids(page, seeded))
        after = page[-1].run_id
    assert seen == ["r4", "r3", "r2", "r1", "r0"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"status": "failed"}, ["r1"]),
        ({"status": ("failed", "completed")}, ["r3", "r1"]),
        ({"workflow": "rf-other"}, ["r3", "r1"]),
        ({"workflow_id": ("rf-2", "rf-4")}, ["r4", "r2"]),
        ({"parent": "rf-0"}, ["r4"]),
        ({"created_after": T0 + timedelta(days=1)}, ["r4", "r3", "r2"]),  # strict
        ({"created_before": T0 + timedelta(days=1, seconds=1)}, ["r1", "r0"]),
        ({"finished_after": T0 + timedelta(days=2)}, ["r3"]),
        ({"finished_before": T0 + timedelta(days=2)}, ["r1"]),
        ({"attributes": {"customer": "acme"}}, ["r1", "r0"]),
        ({"attributes": {"customer": "acme", "vip": False}}, ["r1"]),
        ({"attributes": {"amount": 500}}, ["r2"]),
        ({"attributes": {"due": T0 + timedelta(days=10)}}, ["r2"]),
        ({"attributes": {"score": 0.5}}, ["r3"]),
        ({"attribute_ranges": (AttributeRange("amount", ">=", 10),)}, ["r2", "r1"]),
        ({"attribute_ranges": (AttributeRange("amount", "<", 50),)}, ["r3", "r0"]),
        ({"attribute_ranges": (AttributeRange("score", ">", 0),)}, ["r3"]),
        ({"status": "pending", "attributes": {"customer": "acme"}}, ["r0"]),
    ],
)
def test_each_filter(seeded: dict[str, str], fields: dict[str, Any], expected: list[str]) -> None:
    assert _ids(client.list_runs(**fields), seeded) == expected
    assert client.count_runs(RunFilter(**fields)) == len(expected)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"status": ["failed", "completed"]}, ["r3", "r1"]),
        ({"status": "failed,completed"}, ["r3", "r1"]),
        ({"name": "rf-other"}, ["r3", "r1"]),
        ({"attr": ["amount>=10", "amount<=60"]}, ["r1"]),
        ({"attr": "amount>100"}, ["r2"]),
        ({"attr": "vip=true"}, ["r0"]),
        ({"attr": "customer=acme", "created_after": "2026-01-01T12:00:00+00:00"}, ["r1"]),
        ({"attr": "due<2026-02-01T00:00:00Z"}, ["r2"]),
        ({"attr": "score=0.5"}, ["r3"]),
    ],
)
def test_from_params(seeded: dict[str, str], params: dict[str, Any], expected: list[str]) -> None:
    assert _ids(client.list_runs(RunFilter.from_params(params)), seeded) == expected


@pytest.mark.parametrize(
    ("params", "key", "named"),
    [
        ({"stauts": "failed"}, "stauts", "stauts"),
        ({"status": "broken"}, "status", "broken"),
        ({"attr": "amout=5"}, "attr", "amout"),
        ({"attr": "amount=ten"}, "attr", "ten"),
        ({"attr": "amount=1.5"}, "attr", "1.5"),
        ({"attr": "vip=maybe"}, "attr", "maybe"),
        ({"attr": "customer>acme"}, "attr", "customer"),
        ({"attr": "vip>=true"}, "attr", "vip"),
        ({"attr": "due=tomorrow"}, "attr", "tomorrow"),
        ({"attr": "score=nan"}, "attr", "nan"),
        ({"attr": "no operator"}, "attr", "no operator"),
        ({"attr": ["customer=a", "customer=b"]}, "attr", "customer"),
        ({"created_after": "yesterday"}, "created_after", "yesterday"),
        ({"parent": ["a", "b"]}, "parent", "a,b"),
        (
            {"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
            "created_before",
            "2026-01-01",
        ),
    ],
)
def test_from_params_refuses_bad_input(
    declared: None, params: dict[str, Any], key: str, named: str
) -> None:
    with pytest.raises(InvalidRunFilter) as info:
        RunFilter.from_params(params)
    error = info.value
    assert isinstance(error, ValueError) and isinstance(error, WeftError)
    assert error.code == "invalid_run_filter" and error.http_status == 400
    assert error.key == key
    assert named in str(error)


def test_constructor_refuses_bad_values(declared: None) -> None:
    with pytest.raises(InvalidRunFilter, match="amount"):
        RunFilter(attributes={"amount": "5"})
    with pytest.raises(InvalidRunFilter, match="vip"):
        RunFilter(attributes={"vip": 1})
    with pytest.raises(InvalidRunFilter, match="nope"):
        RunFilter(attributes={"nope": 1})
    with pytest.raises(InvalidRunFilter, match="created_after"):
        RunFilter(created_after=datetime(2026, 1, 1))  # naive
    with pytest.raises(InvalidRunFilter, match="customer"):
        RunFilter(attribute_ranges=(AttributeRange("customer", ">", "a"),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="colour"):
        client.list_runs(colour="red")
    with pytest.raises(TypeError, match="not both"):
        client.list_runs(RunFilter(status=("failed",)), status="failed")
    with pytest.raises(ValueError, match="limit"):
        client.list_runs(limit=0)


def test_is_empty_and_describe(declared: None) -> None:
    assert RunFilter().is_empty()
    assert RunFilter.from_params({}).is_empty()
    assert RunFilter.from_params({"attr": []}).is_empty()
    assert not RunFilter(status=("failed",)).is_empty()
    assert not RunFilter(attributes={"vip": True}).is_empty()
    text = RunFilter.from_params({"status": "failed", "attr": ["amount>=3", "vip=1"]}).describe()
    assert text == "status=failed attr=vip=True attr=amount>=3"
    assert RunFilter().describe() == "(every run)"


def test_naive_datetimes_are_read_in_the_current_time_zone(declared: None, settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Paris"
    moment = RunFilter.from_params({"created_after": "2026-06-01T12:00:00"}).created_after
    assert moment == datetime(2026, 6, 1, 10, tzinfo=UTC)  # 12:00 in Paris (summer)
    assert moment is not None and moment.utcoffset() == timedelta(0)  # held in UTC
    # PostgreSQL refuses offsets past 15:59: any offset Python takes is held in UTC.
    far = RunFilter.from_params({"created_before": "0405-11-28T03:15:04+19:18"}).created_before
    assert far is not None and far.tzinfo is UTC


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["status", "attr", "workflow", "parent", "created_after", "bogus"]),
        st.one_of(st.text(max_size=30), st.lists(st.text(max_size=30), max_size=3)),
        max_size=4,
    )
)
def test_from_params_either_builds_or_names_the_problem(params: dict[str, Any]) -> None:
    from django.test import override_settings

    with override_settings(WEFT={"SEARCH_ATTRIBUTES": ATTRS}):
        try:
            built = RunFilter.from_params(params)
        except InvalidRunFilter as error:
            assert error.key in params or error.key == "attr"
            assert error.reason
        else:
            assert "bogus" not in params
            assert RunFilter.from_params(params) == built
