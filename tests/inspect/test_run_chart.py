"""The run page shows a picture: an SVG timeline at the top (one bar per step, a
failed activity's attempts, open timers dashed), a duration for a finished run, no
empty fields, a child's step linking to the child run, and the journal pager at the
top and the bottom with the newest page one click away."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.inspect.conftest import Populated
from tests.inspect.workflows import inspect_echo
from weft_django import activity, client, workflow
from weft_django.admin.timeline import JOURNAL_PAGE_SIZE
from weft_django.models import WorkflowRun
from weft_django.testing import WorkflowTestEnvironment


@workflow(name="chart-parent")
def chart_parent(ctx: Any, data: Any) -> Any:
    yield ctx.run(inspect_echo, data)
    child = yield ctx.start_child("inspect-quick", data)
    return child


@activity(name="chart-step")
def chart_step(n: int) -> int:
    return n


@workflow(name="chart-long")
def chart_long(ctx: Any, count: int) -> Any:
    for n in range(count):
        yield ctx.run(chart_step, n)
    return count


def _page(admin_client: Client, workflow_id: str) -> str:
    run = WorkflowRun.objects.filter(workflow_id=workflow_id).latest("created_at")
    response = admin_client.get(reverse("admin:weft_workflowrun_change", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_finished_runs_page_has_a_timeline_and_a_duration(
    populated: Populated, admin_client: Client
) -> None:
    body = _page(admin_client, populated.failing)
    svg = re.search(r"<svg class=\"weft-run-chart\".*?</svg>", body, re.S)
    assert svg is not None
    assert body.index("weft-run-chart") < body.index("Workflow id")  # at the top
    assert len(re.findall(r"<rect ", svg.group(0))) == 2  # one bar per step
    assert 'fill="#c62828"' in svg.group(0)  # the failed activity, red
    assert "Duration:" in body
    for empty in ("Parent:", "Cancel reason:", "Concurrency key:", "Suspended reason:"):
        assert empty not in body, empty
    sleeper = _page(admin_client, populated.sleeper)
    assert 'stroke-dasharray="4 2"' in sleeper  # the open sleep timer


@pytest.mark.django_db(transaction=True)
def test_a_child_step_links_to_the_child_run(admin_client: Client) -> None:
    env = WorkflowTestEnvironment()
    try:
        client.start("chart-parent", {"n": 1}, workflow_id="chart-p1")
        env.run_until_idle()
        assert client.get_handle("chart-p1").status() == "completed"
        child = WorkflowRun.objects.get(parent__workflow_id="chart-p1")
        body = _page(admin_client, "chart-p1")
    finally:
        env.close()
    child_url = reverse("admin:weft_workflowrun_change", args=[child.pk])
    assert f'<a href="{child_url}">' in body


@pytest.mark.django_db(transaction=True)
def test_the_journal_pager_is_at_the_top_and_the_bottom(admin_client: Client) -> None:
    count = JOURNAL_PAGE_SIZE + 5
    env = WorkflowTestEnvironment()
    try:
        client.start("chart-long", count, workflow_id="chart-long-1")
        env.run_until_idle()
        body = _page(admin_client, "chart-long-1")
    finally:
        env.close()
    pagers = re.findall(r'<p class="help weft-journal-pages">', body)
    assert len(pagers) == 2
    assert body.count(">newest</a>") == 2
    assert "more in the journal below" in body  # the chart is bounded


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_runs_page_shows_the_reason_it_was_cancelled(admin_client: Client) -> None:
    env = WorkflowTestEnvironment()
    try:
        client.start("inspect-waiter", {"n": 9}, workflow_id="chart-cancel-1")
        env.run_until_idle()
        client.cancel("chart-cancel-1", "customer withdrew")
        env.run_until_idle()
        body = _page(admin_client, "chart-cancel-1")
    finally:
        env.close()
    assert WorkflowRun.objects.get(workflow_id="chart-cancel-1").status == "cancelled"
    match = re.search(r"Cancel reason:</label>\s*<div class=\"readonly\">([^<]*)</div>", body)
    assert match is not None and match.group(1) == "customer withdrew"
