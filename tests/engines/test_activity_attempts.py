"""Every ended activity attempt is recorded, with the commit of its outcome.

A flaky activity (fails twice, then succeeds) and one that fails for good
(``retries=2``): the run's ``ActivityAttempt`` rows say, per attempt, when it
started and ended (engine clock), ok or failed, the error's headline and the
engine and epoch it ran under. They are written by the batches that commit
the attempts' outcomes -- no commit of their own (``test_commit_count`` bounds
that) -- and the run page draws one bar per attempt, a failed one red with its
headline as its tooltip; the API's detail and ``weft show --json`` list them
(the headline hidden without ``weft.view_payload``). Purge deletes them with
the run; a fork does not copy them (its copied steps ran in the source run).
"""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from tests.cli.helpers import weft
from weft_django import activity, activity_info, client, workflow
from weft_django.engine import Engine
from weft_django.models import ActivityAttempt, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


class Flaky(Exception):
    pass


@activity(name="att-flaky", retries=3, backoff=timedelta(seconds=1))
def flaky(order: str) -> str:
    number = activity_info().attempt
    if number < 3:
        raise Flaky(f"order {order}: supplier busy (attempt {number})")
    return f"booked:{order}"


@activity(name="att-doomed", retries=2, backoff=timedelta(seconds=1))
def doomed(order: str) -> None:
    raise Flaky(f"order {order}: supplier gone")


@activity(name="att-echo")
def echo(value: Any) -> Any:
    return value


@workflow(name="att-booking")
def booking(ctx: Any, order: str) -> Any:
    first = yield ctx.run(echo, order)
    booked = yield ctx.run(flaky, first)
    return booked


@workflow(name="att-failing")
def failing(ctx: Any, order: str) -> Any:
    yield ctx.run(doomed, order)


def _drive(engine: Engine, clock: Any, workflow_id: str) -> WorkflowRun:
    engine.run_until_idle()
    for _ in range(4):
        clock.advance(60_000)
        engine.run_until_idle()
    return WorkflowRun.objects.get(workflow_id=workflow_id)


def _rows(run: WorkflowRun) -> list[tuple[int, str, int, str]]:
    return [
        (a.position, a.activity, a.attempt, a.outcome)
        for a in ActivityAttempt.objects.filter(run_id=run.pk).order_by("started_at", "id")
    ]


def test_each_attempt_is_recorded_with_its_times_outcome_and_engine(clock: Any) -> None:
    engine = Engine(engine_id="att-engine", clock=clock, background_tasks="manual").boot()
    try:
        client.start("att-booking", "o-1", workflow_id="att-1")
        run = _drive(engine, clock, "att-1")
    finally:
        engine.dispose(grace=0)
    assert run.status == "completed", run.error
    assert _rows(run) == [
        (0, "att-echo", 1, "ok"),
        (1, "att-flaky", 1, "failed"),
        (1, "att-flaky", 2, "failed"),
        (1, "att-flaky", 3, "ok"),
    ]
    tried = list(ActivityAttempt.objects.filter(run_id=run.pk).order_by("started_at", "id"))
    assert tried[1].error == "Flaky: order o-1: supplier busy (attempt 1)"
    assert tried[2].error == "Flaky: order o-1: supplier busy (attempt 2)"
    assert tried[0].error is None and tried[3].error is None
    assert all(a.engine_id == "att-engine" and a.epoch >= 1 for a in tried)
    # Times on the engine clock: each attempt starts once the previous one ended
    # (the retries after their 1 s and 2 s backoff, advanced by the test).
    for before, after in itertools.pairwise(tried):
        assert before.started_at <= before.ended_at <= after.started_at
    assert tried[2].started_at > tried[1].ended_at


def test_the_timeline_draws_one_bar_per_attempt_failed_ones_red_with_the_error(
    clock: Any, admin_client: Client
) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        client.start("att-failing", "o-2", workflow_id="att-2")
        run = _drive(engine, clock, "att-2")
    finally:
        engine.dispose(grace=0)
    assert run.status == "failed"
    assert _rows(run) == [(0, "att-doomed", n, "failed") for n in (1, 2, 3)]
    page = admin_client.get(reverse("admin:weft_workflowrun_change", args=[run.pk]))
    svg = re.search(r'<svg class="weft-run-chart".*?</svg>', page.content.decode(), re.S)
    assert svg is not None
    bars = re.findall(
        r'<g class="weft-step"><title>([^<]*)</title>.*?<rect [^>]*fill="([^"]+)"',
        svg.group(0),
        re.S,
    )
    assert len(bars) == 3, bars
    for n, (title, colour) in enumerate(bars, start=1):
        assert colour == "#c62828"
        assert f"att-doomed · attempt {n}: failed after" in title
        assert "Flaky: order o-2: supplier gone" in title
    assert "Duration:" in page.content.decode()


def test_the_api_detail_and_weft_show_list_the_attempts(clock: Any) -> None:
    engine = Engine(engine_id="att-engine-2", clock=clock, background_tasks="manual").boot()
    try:
        client.start("att-failing", "o-3", workflow_id="att-3")
        run = _drive(engine, clock, "att-3")
    finally:
        engine.dispose(grace=0)
    assert run.status == "failed"
    User = get_user_model()
    reader = User.objects.create_user("reader", password="pw", is_staff=True)
    clerk = User.objects.create_user("clerk", password="pw", is_staff=True)
    reader.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_workflowrun", "view_payload"])
    )
    clerk.user_permissions.add(*Permission.objects.filter(codename="view_workflowrun"))
    web = Client()
    web.force_login(reader)
    detail = web.get("/api/weft/workflows/att-3/").json()
    assert detail["attempts_total"] == 3
    assert [(a["attempt"], a["outcome"]) for a in detail["attempts"]] == [
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
    ]
    first = detail["attempts"][0]
    assert first["error"] == "Flaky: order o-3: supplier gone"
    assert first["engine_id"] == "att-engine-2" and first["activity"] == "att-doomed"
    assert first["started_at"] <= first["ended_at"]
    listed = web.get("/api/weft/workflows/").json()["results"]
    assert "attempts" not in listed[0]
    # Without weft.view_payload: the headline is hidden (it quotes the data).
    web.force_login(clerk)
    hidden = web.get("/api/weft/workflows/att-3/").json()["attempts"][0]["error"]
    assert hidden["hidden"] is True and "o-3" not in str(hidden)

    shown = weft("show", "att-3", "--json").data
    assert shown["attempts_total"] == 3
    assert [a["outcome"] for a in shown["attempts"]] == ["failed"] * 3
    assert shown["attempts"][2]["error"] == "Flaky: order o-3: supplier gone"
    bounded = weft("show", "att-3", "--json", "--journal", "1").data
    assert [a["attempt"] for a in bounded["attempts"]] == [3]  # the last one
    text = weft("show", "att-3").out
    assert "activity attempts (3):" in text
    assert "att-doomed attempt 2  failed after" in text


def test_the_schema_describes_the_attempts() -> None:
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    detail = components["WorkflowDetail"]
    assert {"attempts", "attempts_total"} <= set(detail["required"])
    ref = detail["properties"]["attempts"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert set(components[ref]["properties"]) == {
        "position",
        "attempt",
        "activity",
        "started_at",
        "ended_at",
        "outcome",
        "error",
        "engine_id",
        "epoch",
    }
    assert "attempts" not in components["WorkflowSummary"]["properties"]


def test_purge_deletes_the_attempts_and_a_fork_copies_none(clock: Any) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        client.start("att-booking", "o-4", workflow_id="att-4")
        run = _drive(engine, clock, "att-4")
        assert run.status == "completed"
        assert ActivityAttempt.objects.filter(run_id=run.pk).count() == 4
        forked = client.fork("att-4", at_position=1, workflow_id_for_fork="att-4-fork")
        copy = _drive(engine, clock, "att-4-fork")
        assert copy.status == "completed", copy.error
        # Only what the fork ran itself: the flaky step (again), not the copied echo.
        assert [r[1] for r in _rows(copy)] == ["att-flaky"] * 3, forked
    finally:
        engine.dispose(grace=0)
    client.purge("att-4")
    assert not ActivityAttempt.objects.filter(run_id=run.pk).exists()
    assert ActivityAttempt.objects.filter(run_id=copy.pk).count() == 3
