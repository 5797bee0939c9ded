"""The admin in a real browser (SPEC §5, §8 "browser ... tests run once, on
PostgreSQL"): headless Debian chromium renders the runs and holders
changelists of a live server; the holders page is saved as a screenshot, and
so are the schedules changelist and a run waiting for its queue (issue #16).

Chromium is a test requirement, not an optional extra: ``scripts/setup``
installs it, and this test fails (never skips) when it is missing.

Login: a staff session made with Django's test ``Client.force_login``; its
cookie is handed to chromium over the DevTools protocol (``tests.inspect.cdp``,
pipe transport, standard library only). No test-only route in product code.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

import tests.inspect.workflows  # noqa: F401  (registers the workflows)
from tests.inspect.cdp import Chromium
from tests.support import REPO_ROOT, ManualClock
from weft_django import client
from weft_django.engine import Engine
from weft_django.inspection import format_ms
from weft_django.kernel.clock import wall_ms
from weft_django.models import Schedule, WorkflowRun

ARTIFACT = REPO_ROOT / "artifacts" / "holders.png"
DOCS_IMAGE = REPO_ROOT / "docs" / "img" / "holders.png"


def chromium_executable() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("chromium is not installed: run scripts/setup (it installs Debian's chromium)")


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_admin_pages_render_in_chromium(live_server, django_user_model) -> None:
    executable = chromium_executable()
    started = time.monotonic()

    # Two workers on the wall clock (live holders) and one whose clock lags
    # five minutes behind (its claim is expired): the holders page shows all states.
    now = ManualClock(start=wall_ms())
    behind = ManualClock(start=wall_ms() - 300_000)
    worker_a = Engine(engine_id="worker-a:4101", clock=now, background_tasks="manual").boot()
    worker_b = Engine(engine_id="worker-b:4102", clock=now, background_tasks="manual").boot()
    stale = Engine(engine_id="worker-old:3999", clock=behind, background_tasks="manual").boot()
    engines = [worker_a, worker_b, stale]
    try:
        client.start("inspect-waiter", {"order": 1001}, workflow_id="order-1001")
        client.start("inspect-sleeper", {"order": 1002}, workflow_id="order-1002")
        worker_a.run_until_idle()
        client.start("inspect-waiter", {"order": 1003}, workflow_id="order-1003")
        worker_b.run_until_idle()
        client.start("inspect-quick", {"order": 1004}, workflow_id="order-1004")
        worker_b.run_until_idle()
        client.start("inspect-waiter", {"order": 1005}, workflow_id="order-1005")
        stale.run_until_idle()
        for engine in engines:
            engine.heartbeat()

        admin_user = django_user_model.objects.create_superuser("ops", "ops@example.com", "x")
        session = Client()
        session.force_login(admin_user)
        cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

        browser = Chromium(executable, width=1280, height=720)
        try:
            browser.set_cookie(settings.SESSION_COOKIE_NAME, cookie, live_server.url)

            runs = browser.navigate(f"{live_server.url}/admin/weft/workflowrun/")
            assert "Select workflow run to" in runs, runs[:2000]
            for workflow_id in ("order-1001", "order-1002", "order-1003", "order-1004"):
                assert workflow_id in runs
            assert "worker-a:4101" in runs  # the owner engine column

            holders = browser.navigate(f"{live_server.url}/admin/weft/workflowclaim/?state=all")
            assert "Holders" in holders or "holder" in holders
            for engine_id in ("worker-a:4101", "worker-b:4102", "worker-old:3999"):
                assert engine_id in holders
            for state in ("live", "expired", "released"):
                assert f">{state}</strong>" in holders, state
            assert "Force release selected holders" in holders

            browser.screenshot(ARTIFACT)

            run = WorkflowRun.objects.get(workflow_id="order-1002")
            page = browser.navigate(f"{live_server.url}/admin/weft/workflowrun/{run.pk}/change/")
            assert "Claim timeline" in page and "Journal timeline" in page
            assert "inspect_echo" in page and "worker-a:4101" in page
            browser.screenshot(ARTIFACT.with_name("run.png"))
        finally:
            browser.close()
    finally:
        for engine in engines:
            engine.dispose(grace=0)

    assert ARTIFACT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The committed copy for the README is refreshed only on request, so an
    # ordinary test run leaves the working tree clean.
    if not DOCS_IMAGE.exists() or os.environ.get("WEFT_UPDATE_SCREENSHOTS") == "1":
        DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ARTIFACT, DOCS_IMAGE)
    print(f"browser check took {time.monotonic() - started:.1f} s; screenshot {ARTIFACT}")


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_progress_page_follows_a_stream_with_event_source(live_server, django_user_model) -> None:
    """The demo's progress page (docs/howto/progress.md) in chromium: its
    ``EventSource`` follows the SSE endpoint and the bar moves as the run
    writes to its stream; ``event: end`` closes it when the stream closes."""
    executable = chromium_executable()
    engine = Engine(engine_id="progress-engine", background_tasks="manual").boot()
    try:
        steps = 3
        client.start("demo-progress", {"steps": steps, "signal_steps": True}, workflow_id="bar-1")
        engine.run_until_idle()
        staff = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
        session = Client()
        session.force_login(staff)
        cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
        browser = Chromium(executable, width=800, height=400)
        try:
            browser.set_cookie(settings.SESSION_COOKIE_NAME, cookie, live_server.url)
            page = browser.navigate(f"{live_server.url}/demo/progress/bar-1/")
            assert 'id="bar"' in page, page[:2000]

            def shown(expression: str, expected: object) -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if browser.evaluate(expression) == expected:
                        return
                    time.sleep(0.05)
                pytest.fail(f"{expression} never became {expected!r}: {browser.stderr_tail()}")

            shown("document.getElementById('state').textContent", "following")
            for step in range(1, steps + 1):
                client.signal("bar-1", "next", None)
                engine.run_until_idle()
                shown("document.getElementById('bar').value", 100 * step // steps)
            shown("document.getElementById('label').textContent", "step 3 of 3 (100%)")
            shown("document.getElementById('state').textContent", "done")
            browser.screenshot(ARTIFACT.with_name("progress.png"))
        finally:
            browser.close()
    finally:
        engine.dispose(grace=0)


SCHEDULES_ARTIFACT = REPO_ROOT / "artifacts" / "schedules.png"
SCHEDULES_DOCS_IMAGE = REPO_ROOT / "docs" / "img" / "admin-schedules.png"
QUEUED_ARTIFACT = REPO_ROOT / "artifacts" / "queued-run.png"
QUEUED_DOCS_IMAGE = REPO_ROOT / "docs" / "img" / "admin-queued-run.png"


def publish_screenshot(artifact: Path, docs_image: Path) -> None:
    """Copy an artifact to docs/img only when missing or on request
    (WEFT_UPDATE_SCREENSHOTS=1), so an ordinary run leaves the tree clean."""
    assert artifact.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if not docs_image.exists() or os.environ.get("WEFT_UPDATE_SCREENSHOTS") == "1":
        docs_image.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(artifact, docs_image)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_schedules_and_queues_admin_in_chromium(live_server, django_user_model) -> None:
    """Issue #16's admin screens in chromium: the schedules changelist (next
    fire, last tick, counts, paused, the pause/resume/trigger actions) after
    real ticks on a manual clock, and a run waiting for a slot of a queue of
    concurrency 1 (queue column and filter, the waiting reason)."""
    executable = chromium_executable()
    started = time.monotonic()
    queues = {"exports": {"concurrency": 1}}
    weft = {**getattr(settings, "WEFT", {}), "QUEUES": queues}
    # A manual clock ten minutes behind the wall clock (whole seconds): two
    # 5-minute steps bring it to now, so the dates on the page look real and
    # the claims are live. Those ten minutes hold exactly one */10 cron tick.
    start = (wall_ms() // 1000) * 1000 - 600_000
    clock = ManualClock(start=start)
    with override_settings(WEFT=weft):
        engine = Engine(engine_id="worker-a:4101", clock=clock, background_tasks="manual").boot()
        try:
            client.create_schedule(
                "digest-paris",
                "inspect-quick",
                {"digest": "daily"},
                cron="*/10 * * * *",
                timezone="Europe/Paris",
            )
            client.create_schedule(
                "sync-inventory", "inspect-quick", {"sync": True}, every=300, overlap="allow"
            )
            client.create_schedule("purge-exports", "inspect-quick", None, every=3600)
            client.pause_schedule("purge-exports")
            engine.run_until_idle()
            for _ in range(2):  # two ticks of sync-inventory, one of digest-paris
                clock.advance(300_000)
                engine.run_until_idle()
            listed = {s["schedule_id"]: s for s in client.list_schedules()}
            assert listed["sync-inventory"]["ticks"]["fired"] == 2, listed
            assert listed["digest-paris"]["ticks"]["fired"] == 1, listed
            assert listed["purge-exports"]["paused"], listed

            # The queue: one run holds the only slot (parked on a signal), two wait.
            for n in (1, 2, 3):
                client.start(
                    "inspect-waiter", {"export": n}, workflow_id=f"export-{n}", queue="exports"
                )
            engine.run_until_idle()
            statuses = dict(
                WorkflowRun.objects.filter(workflow_id__startswith="export-").values_list(
                    "workflow_id", "status"
                )
            )
            assert statuses == {
                "export-1": "parked",
                "export-2": "pending",
                "export-3": "pending",
            }, statuses
            engine.heartbeat()

            admin_user = django_user_model.objects.create_superuser("ops", "ops@example.com", "x")
            session = Client()
            session.force_login(admin_user)
            cookie = session.cookies[settings.SESSION_COOKIE_NAME].value

            # 1600 px wide with the admin's nav sidebar collapsed: the schedules
            # changelist has 12 columns, which overflow 1280 px.
            browser = Chromium(executable, width=1600, height=720, timeout=120)
            try:
                browser.set_cookie(settings.SESSION_COOKIE_NAME, cookie, live_server.url)

                browser.navigate(f"{live_server.url}/admin/")
                browser.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
                browser.navigate(f"{live_server.url}/admin/weft/schedule/")
                rows = {
                    row.split("\t")[1].strip(): row
                    for row in browser.evaluate(
                        "Array.from(document.querySelectorAll('#result_list tbody tr'))"
                        ".map(r => r.innerText)"
                    )
                }
                assert set(rows) == set(listed), rows
                for schedule_id in ("digest-paris", "sync-inventory"):
                    assert listed[schedule_id]["next_fire_at"] in rows[schedule_id], rows
                    last_tick = format_ms(Schedule.objects.get(pk=schedule_id).last_tick_ms)
                    assert last_tick in rows[schedule_id], rows
                assert "*/10 * * * *" in rows["digest-paris"]
                assert "Europe/Paris" in rows["digest-paris"]
                assert "every 300 s" in rows["sync-inventory"]
                assert "\tpaused\t" in rows["purge-exports"], rows["purge-exports"]
                actions = browser.evaluate(
                    "Array.from(document.querySelectorAll('select[name=action] option'))"
                    ".map(o => o.textContent)"
                )
                for action in (
                    "Pause selected schedules",
                    "Resume selected schedules",
                    "Trigger selected schedules (one run now each)",
                ):
                    assert action in actions, actions
                browser.screenshot(SCHEDULES_ARTIFACT)

                browser.navigate(f"{live_server.url}/admin/weft/schedule/sync-inventory/change/")
                detail = browser.evaluate("document.body.innerText")
                assert "Last runs" in detail or "last runs" in detail.lower(), detail[:2000]
                assert detail.count("sync-inventory@") == 2, detail[:4000]
                browser.screenshot(SCHEDULES_ARTIFACT.with_name("schedule.png"))

                browser.navigate(f"{live_server.url}/admin/weft/workflowrun/?queue=exports")
                runs = browser.evaluate(
                    "Array.from(document.querySelectorAll('#result_list tbody tr'))"
                    ".map(r => r.innerText)"
                )
                assert len(runs) == 3, runs
                for n in (1, 2, 3):
                    assert any(f"export-{n}" in r and "\texports\t" in r for r in runs), runs
                browser.screenshot(QUEUED_ARTIFACT.with_name("queue-runs.png"))

                waiting = WorkflowRun.objects.get(workflow_id="export-2")
                browser.navigate(f"{live_server.url}/admin/weft/workflowrun/{waiting.pk}/change/")
                page = browser.evaluate("document.body.innerText")
                assert "waiting for a slot of queue 'exports' (1/1 in use)" in page, page[:3000]
                assert "exports" in page and "pending" in page
                browser.screenshot(QUEUED_ARTIFACT)
            finally:
                browser.close()
        finally:
            engine.dispose(grace=0)

    publish_screenshot(SCHEDULES_ARTIFACT, SCHEDULES_DOCS_IMAGE)
    publish_screenshot(QUEUED_ARTIFACT, QUEUED_DOCS_IMAGE)
    print(
        f"schedules/queues browser check took {time.monotonic() - started:.1f} s; "
        f"screenshots {SCHEDULES_ARTIFACT}, {QUEUED_ARTIFACT}"
    )


OPS_SHOTS = {
    "run-waits": REPO_ROOT / "docs" / "img" / "admin-run-waits.png",
    "failed-run": REPO_ROOT / "docs" / "img" / "admin-failed-run.png",
    "signals": REPO_ROOT / "docs" / "img" / "admin-signals.png",
    "async-activities": REPO_ROOT / "docs" / "img" / "admin-async-activities.png",
}


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_operations_pages_in_chromium(live_server, django_user_model) -> None:
    """Issue #19's admin screens in chromium: a parked run's page says what it
    waits for (an async activity), a failed run's traceback is readable lines in
    a ``<pre>``, the buffered-signals page and the async-activities page with
    their staff actions."""
    executable = chromium_executable()
    engine = Engine(engine_id="worker-a:4101", background_tasks="manual").boot()
    try:
        client.start("inspect-async", {"invoice": 7}, workflow_id="invoice-7")
        client.start("inspect-sleeper", {"order": 2001}, workflow_id="order-2001")
        client.start("inspect-failing", {"order": 2002}, workflow_id="order-2002")
        engine.run_until_idle()
        client.signal("order-2001", "go", {"early": True})  # buffered: the run sleeps first
        engine.run_until_idle()
        engine.heartbeat()
        statuses = dict(
            WorkflowRun.objects.filter(
                workflow_id__in=["invoice-7", "order-2001", "order-2002"]
            ).values_list("workflow_id", "status")
        )
        assert statuses == {
            "invoice-7": "parked",
            "order-2001": "parked",
            "order-2002": "failed",
        }, statuses

        admin_user = django_user_model.objects.create_superuser("ops", "ops@example.com", "x")
        session = Client()
        session.force_login(admin_user)
        cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
        browser = Chromium(executable, width=1280, height=900, timeout=120)
        try:
            browser.set_cookie(settings.SESSION_COOKIE_NAME, cookie, live_server.url)
            text = "document.body.innerText"

            parked = WorkflowRun.objects.get(workflow_id="invoice-7")
            browser.navigate(f"{live_server.url}/admin/weft/workflowrun/{parked.pk}/change/")
            page = browser.evaluate(text)
            assert "async activity 'tests.inspect.workflows.inspect_hand_out'" in page, page[:3000]
            assert "to be completed" in page, page[:3000]
            browser.screenshot(ARTIFACT.with_name("run-waits.png"))

            failed = WorkflowRun.objects.get(workflow_id="order-2002")
            browser.navigate(f"{live_server.url}/admin/weft/workflowrun/{failed.pk}/change/")
            traceback = browser.evaluate(
                "Array.from(document.querySelectorAll('pre')).map(p => p.innerText).join('\\n')"
            )
            assert "boom" in traceback and "\\n" not in traceback, traceback[:2000]
            assert traceback.count("\n") >= 2, traceback[:2000]  # real lines, not one string
            browser.screenshot(ARTIFACT.with_name("failed-run.png"))

            browser.navigate(f"{live_server.url}/admin/weft/signalmessage/")
            page = browser.evaluate(text)
            assert "order-2001" in page and "go" in page, page[:3000]
            browser.screenshot(ARTIFACT.with_name("signals.png"))

            browser.navigate(f"{live_server.url}/admin/weft/asyncactivity/")
            page = browser.evaluate(text)
            assert "invoice-7" in page and "inspect_hand_out" in page, page[:3000]
            actions = browser.evaluate(
                "Array.from(document.querySelectorAll('select[name=action] option'))"
                ".map(o => o.value)"
            )
            assert {"complete_async_activities", "fail_async_activities"} <= set(actions), actions
            browser.screenshot(ARTIFACT.with_name("async-activities.png"))
        finally:
            browser.close()
    finally:
        engine.dispose(grace=0)

    for name, docs_image in OPS_SHOTS.items():
        publish_screenshot(ARTIFACT.with_name(f"{name}.png"), docs_image)
