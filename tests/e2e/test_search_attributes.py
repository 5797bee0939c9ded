"""``ctx.upsert_search_attributes`` (issue #20 part 3), on SQLite and PostgreSQL.

What could fail: a row with no journal entry behind it (written outside the
fenced batch), a replay or a takeover that writes the rows again, a value of
the wrong type stored (and then never matched), an undeclared name accepted,
an upsert visible only when the run next commits, continue-as-new losing the
attributes, changed code that upserts where the journal has something else
replaying silently.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from weft_django import activity, client, workflow
from weft_django.engine.journal import load_events
from weft_django.engine.replay.events import Diverged, Event
from weft_django.engine.replay.machine import Replay
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.models import JournalEntry, RunSearchAttribute, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)

ATTRS = {"customer": "str", "amount": "int", "vip": "bool", "due": "datetime", "score": "float"}
DUE = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def declared(settings: Any) -> None:
    settings.WEFT = {**getattr(settings, "WEFT", {}), "SEARCH_ATTRIBUTES": ATTRS}


@activity(name="sa-step")
def sa_step(n: int) -> int:
    return n + 1


@workflow(name="sa-order")
def sa_order(ctx: Any, data: Any) -> Any:
    ctx.upsert_search_attributes(customer=data["customer"], amount=100, vip=True, due=DUE, score=2)
    yield ctx.run(sa_step, 1)
    yield ctx.wait_for_signal("pay")
    ctx.upsert_search_attributes(amount=250, vip=None)  # vip unset
    ctx.upsert_search_attributes()  # nothing: records nothing
    yield ctx.run(sa_step, 2)
    return "paid"


@workflow(name="sa-bad")
def sa_bad(ctx: Any, data: Any) -> Any:
    if data == "name":
        ctx.upsert_search_attributes(colour="red")
    elif data == "type":
        ctx.upsert_search_attributes(amount="100")
    elif data == "naive":
        ctx.upsert_search_attributes(due=datetime(2026, 1, 1))
    elif data == "caught":
        try:
            ctx.upsert_search_attributes(vip="yes")
        except TypeError as exc:
            ctx.upsert_search_attributes(customer=str(exc)[:200])
    yield ctx.sleep(1)
    return "ok"


@workflow(name="sa-loop")
def sa_loop(ctx: Any, data: Any) -> Any:
    if data["n"] == 0:
        ctx.upsert_search_attributes(customer="looping", amount=0)
    else:
        ctx.upsert_search_attributes(amount=data["n"])
    yield ctx.run(sa_step, data["n"])
    if data["n"] < 2:
        yield ctx.continue_as_new({"n": data["n"] + 1})
    return data["n"]


def _rows(workflow_id: str) -> dict[str, Any]:
    run = WorkflowRun.objects.latest_for(workflow_id)
    return {
        row.name: row.value for row in RunSearchAttribute.objects.filter(run=run).order_by("name")
    }


def _entries(workflow_id: str) -> list[Any]:
    return list(
        JournalEntry.objects.filter(run__workflow_id=workflow_id, kind="search-attributes")
        .order_by("position")
        .values_list("target", "result")
    )


def test_each_type_is_stored_typed_and_filterable(weft_env: Any) -> None:
    client.start("sa-order", {"customer": "acme"}, workflow_id="sa-1")
    client.start("sa-order", {"customer": "globex"}, workflow_id="sa-2")
    weft_env.run_until_idle()
    assert _rows("sa-1") == {
        "amount": 100,
        "customer": "acme",
        "due": DUE,
        "score": 2.0,
        "vip": True,
    }
    for fields in (
        {"customer": "acme"},
        {"amount": 100, "vip": True},
        {"due": DUE},
        {"score": 2.0},
    ):
        found = [s.workflow_id for s in client.list_runs(attributes={**fields, "customer": "acme"})]
        assert found == ["sa-1"], fields
    assert len(client.list_runs(attributes={"vip": True})) == 2
    summary = client.list_runs(workflow_id="sa-1")[0]
    assert summary.attributes["due"] == DUE and isinstance(summary.attributes["score"], float)

    client.signal("sa-1", "pay", None)
    weft_env.run_until_idle()
    assert client.get_handle("sa-1").result(timeout=5) == "paid"
    assert _rows("sa-1") == {"amount": 250, "customer": "acme", "due": DUE, "score": 2.0}
    assert client.list_runs(attributes={"vip": True}, status="completed") == []
    assert [s.workflow_id for s in client.list_runs(attributes={"amount": 250})] == ["sa-1"]
    # Two upserts, two entries; the empty call recorded nothing.
    assert [target for target, _ in _entries("sa-1")] == [
        "amount,customer,due,score,vip",
        "amount,vip",
    ]
    # Every row mirrors the journal entry of its last upsert.
    run = WorkflowRun.objects.get(workflow_id="sa-1")
    recorded = dict(
        JournalEntry.objects.filter(run=run, kind="search-attributes").values_list(
            "position", "target"
        )
    )
    for row in RunSearchAttribute.objects.filter(run=run):
        assert row.name in recorded[row.position].split(",")


def test_a_replay_records_and_writes_nothing_again(weft_env: Any) -> None:
    client.start("sa-order", {"customer": "acme"}, workflow_id="sa-3")
    weft_env.run_until_idle()
    before = list(RunSearchAttribute.objects.values_list("pk", "name", "position", "set_at"))
    run = WorkflowRun.objects.get(workflow_id="sa-3")
    replay = Replay(
        get_workflow("sa-order"),
        workflow_id="sa-3",
        run_id=str(run.pk),
        input=run.input,
        events=load_events(run.pk, "default"),
        clock_ms=lambda: 0,
    )
    replay.advance()
    assert replay.take_new_events() == []
    # A new engine (empty cache) replays the whole history on the next wake.
    weft_env.close()
    from weft_django.testing import WorkflowTestEnvironment

    fresh = WorkflowTestEnvironment(workflow_cache_size=0)
    try:
        client.signal("sa-3", "pay", None)
        fresh.run_until_idle()
    finally:
        fresh.close()
    assert client.get_handle("sa-3").result(timeout=5) == "paid"
    assert len(_entries("sa-3")) == 2
    after = {
        name: (pk, position)
        for pk, name, position, _ in RunSearchAttribute.objects.values_list(
            "pk", "name", "position", "set_at"
        )
    }
    # customer, due, score: untouched rows of the first upsert (same pk, same position).
    for pk, name, position, _set_at in before:
        if name in ("customer", "due", "score"):
            assert after[name] == (pk, position)


@pytest.mark.parametrize(
    ("data", "named"),
    [("name", "'colour'"), ("type", "'amount'"), ("naive", "'due'")],
)
def test_a_bad_upsert_fails_the_run_at_the_call_recording_nothing(
    weft_env: Any, data: str, named: str
) -> None:
    client.start("sa-bad", data, workflow_id=f"sa-bad-{data}")
    weft_env.run_until_idle()
    run = WorkflowRun.objects.get(workflow_id=f"sa-bad-{data}")
    assert run.status == "failed"
    assert run.error["type"] in ("TypeError", "ValueError")
    assert named in run.error["message"] and "upsert_search_attributes" in run.error["message"]
    assert _entries(f"sa-bad-{data}") == []
    assert not RunSearchAttribute.objects.exists()


def test_the_error_is_raised_where_the_body_can_catch_it(weft_env: Any) -> None:
    client.start("sa-bad", "caught", workflow_id="sa-caught")
    weft_env.run_until_idle()
    rows = _rows("sa-caught")
    assert "'vip'" in rows["customer"] and "bool" in rows["customer"]


def test_continue_as_new_carries_the_attributes(weft_env: Any) -> None:
    client.start("sa-loop", {"n": 0}, workflow_id="sa-loop")
    weft_env.run_until_idle()
    runs = list(WorkflowRun.objects.filter(workflow_id="sa-loop").order_by("created_at"))
    assert len(runs) == 3 and runs[-1].status == "completed"
    by_run = {
        str(run.pk): {r.name: r.value for r in RunSearchAttribute.objects.filter(run=run)}
        for run in runs
    }
    assert [by_run[str(run.pk)] for run in runs] == [
        {"customer": "looping", "amount": 0},
        {"customer": "looping", "amount": 1},
        {"customer": "looping", "amount": 2},
    ]
    latest = client.list_runs(attributes={"customer": "looping"}, status="completed", limit=1)
    assert latest[0].run_id == str(runs[-1].pk)


def test_changed_code_that_now_upserts_diverges_like_set_event(db: None) -> None:
    """A run recorded before the call was added: its journal has the
    activity where the new code upserts -- a non-determinism, as for a
    ``set_event`` added to live code (guard it with ``ctx.patched``)."""
    events = [Event(0, "activity", 0, "sa-step", 2)]
    replay = Replay(
        get_workflow("sa-order"),
        workflow_id="sa-old",
        run_id="r",
        input={"customer": "acme"},
        events=events,
        clock_ms=lambda: 0,
    )
    outcome = replay.advance()
    assert isinstance(outcome, Diverged)
    assert "search-attributes" in str(outcome.error)
