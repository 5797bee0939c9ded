"""Screenshots of the admin a person triages with (headless Chromium): the run list,
a failed run, a parked run and a long run -- saved under ``artifacts/`` and, when
missing or on ``WEFT_UPDATE_SCREENSHOTS=1``, copied to ``docs/img/`` for the admin
how-to. Also checked in the browser: ids and names do not wrap at 1,400 px.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

import tests.e2e.test_activity_tracebacks
import tests.inspect.test_run_chart
import tests.inspect.workflows  # noqa: F401
from tests.inspect.cdp import Chromium
from tests.inspect.test_browser import chromium_executable
from tests.support import REPO_ROOT
from weft_django import activity, client, workflow
from weft_django.engine import Engine
from weft_django.models import WorkflowRun

ARTIFACTS = REPO_ROOT / "artifacts"
DOCS_IMG = REPO_ROOT / "docs" / "img"
SHOTS = (
    "admin-run-list.png",
    "admin-failed-run-timeline.png",
    "admin-parked-run.png",
    "admin-long-run.png",
)


@activity(name="shot-reserve")
def reserve(order: int) -> dict[str, Any]:
    return {"order": order, "reserved": True}


@activity(name="shot-import-chunk")
def import_chunk(n: int) -> int:
    time.sleep(0.01 * (1 + n % 4))  # a little real work, so the timeline has a shape
    return n


@workflow(name="shot-import")
def bulk_import(ctx: Any, chunks: int) -> Any:
    done = 0
    for n in range(chunks):
        done += yield ctx.run(import_chunk, n)
    return done


@workflow(name="shot-approval")
def approval(ctx: Any, data: Any) -> Any:
    yield ctx.run(reserve, data["order"])
    decision = yield ctx.wait_for_signal("approved", timeout=timedelta(hours=2))
    return decision


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_triage_screenshots(live_server: Any, django_user_model: Any) -> None:
    executable = chromium_executable()
    # The wall clock: the journal's times are real, so the timelines have a shape.
    engine = Engine(engine_id="worker-a:4101", background_tasks="manual").boot()
    try:
        for n in range(1001, 1007):
            client.start("inspect-quick", {"order": n}, workflow_id=f"order-{n}")
        client.start("shot-approval", {"order": 2001}, workflow_id="approval-2001")
        client.start("tb-refund", {"card": "4242"}, workflow_id="refund-001")
        client.start("shot-import", 120, workflow_id="import-batch-77")
        client.start("chart-parent", {"order": 3001}, workflow_id="parent-3001")
        engine.run_until_idle()
        deadline = time.monotonic() + 30
        while WorkflowRun.objects.get(workflow_id="refund-001").status != "failed":
            assert time.monotonic() < deadline, "tb-refund did not fail in 30 s"
            time.sleep(0.2)  # its retries' backoff (1 s, 2 s), on the wall clock
            engine.run_until_idle()
        client.start("shot-approval", {"order": 2002}, workflow_id="approval-2002")
        engine.run_until_idle()
        engine.heartbeat()
        runs = {r.workflow_id: r for r in WorkflowRun.objects.all()}
        assert runs["refund-001"].status == "failed"
        assert runs["approval-2001"].status == "parked"
        assert runs["import-batch-77"].status == "completed"

        admin = django_user_model.objects.create_superuser("ops", "ops@example.com", "x")
        session = Client()
        session.force_login(admin)
        cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
        browser = Chromium(executable, width=1400, height=1000)
        try:
            browser.set_cookie(settings.SESSION_COOKIE_NAME, cookie, live_server.url)
            base = f"{live_server.url}/admin/weft/workflowrun/"
            browser.navigate(base)
            # The admin's own "hide the navigation sidebar" choice, as a person may set it.
            browser.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
            listing = browser.navigate(base)
            assert "weft-badge failed" in listing and "waits for signal" in listing
            nowrap = browser.evaluate(
                "Array.from(document.querySelectorAll('#result_list td.field-workflow_id, "
                "#result_list th.field-workflow_id, #result_list td.field-name'))"
                ".every(e => getComputedStyle(e).whiteSpace === 'nowrap')"
            )
            assert nowrap is True
            browser.screenshot(ARTIFACTS / SHOTS[0], full_page=False)
            pages = {
                SHOTS[1]: runs["refund-001"],
                SHOTS[2]: runs["approval-2001"],
                SHOTS[3]: runs["import-batch-77"],
            }
            for name, run in pages.items():
                page = browser.navigate(f"{base}{run.pk}/change/")
                assert "weft-run-chart" in page, name
                browser.screenshot(ARTIFACTS / name, full_page=False)
        finally:
            browser.close()
    finally:
        engine.dispose(grace=0)
    for name in SHOTS:
        shot = ARTIFACTS / name
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        target = DOCS_IMG / name
        if not target.exists() or os.environ.get("WEFT_UPDATE_SCREENSHOTS") == "1":
            shutil.copyfile(shot, target)
