"""The admin in a real browser (SPEC §5, §8 "browser ... tests run once, on
PostgreSQL"): headless Debian chromium renders the runs and holders
changelists of a live server; the holders page is saved as a screenshot.

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

import pytest
from django.conf import settings
from django.test import Client

import tests.inspect.workflows  # noqa: F401  (registers the workflows)
from tests.inspect.cdp import Chromium
from tests.support import REPO_ROOT, ManualClock
from weft_django.clock import wall_ms
from weft_django.engine import Engine, client
from weft_django.models import WorkflowRun

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

            holders = browser.navigate(f"{live_server.url}/admin/weft/workflowclaim/")
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
