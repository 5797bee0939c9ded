"""Per-queue figures (waiting, running, admitted, rate-limited) in
``weft_status`` (text and ``--json``), ``/metrics`` and the admin's queue list:
one reading, the same numbers everywhere, for every declared queue."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

import tests.inspect.workflows  # noqa: F401  (registers the workflows)
from tests.inspect.test_metrics import value, weft_samples
from weft_django import client
from weft_django.engine import Engine
from weft_django.inspection import cluster_status

pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {
    "fig-q": {"concurrency": 1, "per_key_rate": "1/m"},
    "idle-q": {"rate": "5/m"},
}


@pytest.fixture
def queued() -> Iterator[Engine]:
    """fig-q: one ``k1`` run admitted (parked on a signal, holding the slot),
    two more ``k1`` runs waiting (k1 used its 1/m) and one ``k2`` run waiting
    (the queue is full); idle-q: nothing."""
    with override_settings(WEFT={"QUEUES": QUEUES}):
        engine = Engine(background_tasks="manual").boot()
        try:
            client.start(
                "inspect-waiter", 1, workflow_id="fig-1", queue="fig-q", concurrency_key="k1"
            )
            engine.run_until_idle()
            for n in (2, 3):
                client.start(
                    "inspect-waiter", n, workflow_id=f"fig-{n}", queue="fig-q", concurrency_key="k1"
                )
            client.start(
                "inspect-waiter", 4, workflow_id="fig-4", queue="fig-q", concurrency_key="k2"
            )
            engine.run_until_idle()
            engine.heartbeat()
            yield engine
        finally:
            engine.dispose(grace=0)


def test_the_figures_of_each_declared_queue(queued: Engine) -> None:
    figures = cluster_status().queues
    assert list(figures) == ["fig-q", "idle-q"]
    fig = figures["fig-q"]
    assert (fig.waiting, fig.running, fig.admitted, fig.rate_limited) == (3, 1, 1, 2)
    assert (fig.concurrency, fig.admitted_limit, fig.window_s) == (1, None, 60.0)
    idle = figures["idle-q"]
    assert (idle.waiting, idle.running, idle.admitted, idle.rate_limited) == (0, 0, 0, 0)
    assert idle.admitted_limit == 5


def test_weft_status_json_and_text(queued: Engine) -> None:
    out = io.StringIO()
    call_command("weft_status", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["queues"]["fig-q"] == {
        "waiting": 3,
        "running": 1,
        "admitted": 1,
        "window_s": 60.0,
        "admitted_limit": None,
        "concurrency": 1,
        "rate_limited": 2,
    }
    assert data["queues"]["idle-q"]["admitted_limit"] == 5
    text = io.StringIO()
    call_command("weft_status", stdout=text)
    lines = [line.split() for line in text.getvalue().splitlines()]
    assert ["QUEUE", "WAITING", "RUNNING", "ADMITTED", "RATE-LIMITED"] in lines
    assert ["fig-q", "3", "1/1", "1", "in", "60s", "2"] in lines
    assert ["idle-q", "0", "0", "0/5", "in", "60s", "0"] in lines


def test_metrics_gauges_per_queue(queued: Engine) -> None:
    response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    samples = weft_samples(text)
    assert value(samples, "weft_queue_waiting_runs", queue="fig-q") == 3
    assert value(samples, "weft_queue_slots_held", queue="fig-q") == 1
    assert value(samples, "weft_queue_admissions_in_window", queue="fig-q") == 1
    assert value(samples, "weft_queue_rate_limited_runs", queue="fig-q") == 2
    assert value(samples, "weft_queue_waiting_runs", queue="idle-q") == 0
    queues = {ls["queue"] for n, ls, _ in samples if n.startswith("weft_queue_")}
    assert queues == set(QUEUES)  # the declared names, nothing else
    promtool = shutil.which("promtool")
    if promtool is not None:
        result = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
        )
        assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_admin_lists_the_queues_with_their_figures(queued: Engine, django_user_model: Any) -> None:
    browser = Client()
    browser.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    page = browser.get("/admin/weft/queuelock/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "fig-q" in html and "idle-q" in html
    assert "<td>1 in 60s</td>" in html  # fig-q admitted
    assert "<td>2</td>" in html  # fig-q rate-limited
    assert "concurrency 1, per key rate 1/60s" in html
    assert "?queue=fig-q&amp;status=pending" in html
    # The run page of a waiting run says what it waits for.
    from weft_django.models import WorkflowRun

    run = WorkflowRun.objects.get(workflow_id="fig-4")
    detail = browser.get(f"/admin/weft/workflowrun/{run.pk}/change/")
    assert b"waiting for a slot of queue &#x27;fig-q&#x27; (1/1 in use)" in detail.content
