"""The run page, bounded and readable (issue #19): a 3,000-step run's page
under 1 MB with its journal shown once and paged, what a parked run waits
for, and a failed run's traceback with real line breaks."""

from __future__ import annotations

import re
import time

from django.test import Client
from django.urls import reverse

from tests.inspect.conftest import Populated
from weft_django.admin.timeline import JOURNAL_PAGE_SIZE
from weft_django.models import JournalEntry, WorkflowRun

STEPS = 3_000


def _latest(workflow_id: str) -> WorkflowRun:
    run = WorkflowRun.objects.latest_for(workflow_id)
    assert run is not None
    return run


def _page(admin_client: Client, run: WorkflowRun, query: str = "") -> str:
    url = reverse("admin:weft_workflowrun_change", args=[run.pk]) + query
    response = admin_client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def _grow_to(run: WorkflowRun, steps: int) -> None:
    """Append activity results the way the engine journals them (copied from the
    run's own first entry: kind, target, engine, epoch), up to ``steps``."""
    first = JournalEntry.objects.filter(run=run).order_by("position").first()
    assert first is not None and first.kind == "activity"
    have = JournalEntry.objects.filter(run=run).count()
    JournalEntry.objects.bulk_create(
        JournalEntry(
            run=run,
            position=position,
            kind=first.kind,
            command=position,
            target=first.target,
            result={"step": position, "note": "x" * 40},
            engine_id=first.engine_id,
            epoch=first.epoch,
            at_ms=first.at_ms + position,
        )
        for position in range(have, steps)
    )


def test_a_3000_step_run_page_is_under_1_mb_with_the_journal_once(
    populated: Populated, admin_client: Client
) -> None:
    run = _latest(populated.done)
    _grow_to(run, STEPS)
    assert JournalEntry.objects.filter(run=run).count() == STEPS
    started = time.monotonic()
    body = _page(admin_client, run)
    elapsed = time.monotonic() - started
    assert len(body.encode()) < 1_000_000, len(body.encode())
    # Once: the paged timeline, no journal inline beside it.
    assert "journal-group" not in body and "journalentry_set" not in body
    positions = [int(p) for p in re.findall(r"#(\d+) <strong>activity</strong>", body)]
    assert positions == list(range(JOURNAL_PAGE_SIZE))
    assert f"of {STEPS} journal entries" in body
    last_page = -(-STEPS // JOURNAL_PAGE_SIZE)
    assert f"?journal_page={last_page}" in body and "?journal_page=2" in body
    assert elapsed < 10  # a generous bound on a shared machine; the size is the contract

    tail = _page(admin_client, run, f"?journal_page={last_page}")
    positions = [int(p) for p in re.findall(r"#(\d+) <strong>activity</strong>", tail)]
    assert positions == list(range((last_page - 1) * JOURNAL_PAGE_SIZE, STEPS))
    # A page past the end or junk shows a real page, not an error.
    assert "#2999 <strong>" in _page(admin_client, run, "?journal_page=999999")
    assert "#0 <strong>" in _page(admin_client, run, "?journal_page=abc")


def test_a_parked_run_page_says_what_it_waits_for(
    populated: Populated, admin_client: Client
) -> None:
    body = _page(admin_client, _latest(populated.waiter))
    assert "Waits for" in body  # the field's label
    assert "<code>signal</code> signal &#x27;go&#x27;" in body
    sleeper = _page(admin_client, _latest(populated.sleeper))
    assert re.search(
        r"<code>timer</code> the sleep to end in [0-9.]+ h \(\d\d:\d\d:\d\d\)", sleeper
    )


def test_a_failed_run_shows_a_readable_traceback(
    populated: Populated, admin_client: Client
) -> None:
    run = _latest(populated.failing)
    traceback = run.error["traceback"]
    assert "\n" in traceback
    body = _page(admin_client, run)
    match = re.search(r"<pre[^>]*>(Traceback \(most recent call last\):.*?)</pre>", body, re.S)
    assert match is not None, "no traceback <pre> on the page"
    shown = match.group(1)
    assert "\n  File " in shown  # real line breaks
    assert "\\n" not in shown  # not a JSON string's escapes
    assert "<strong>ActivityError: Activity" in body


def test_the_api_serves_the_traceback_as_a_string_with_real_newlines(
    populated: Populated, admin_client: Client
) -> None:
    response = admin_client.get(f"/api/weft/workflows/{populated.failing}/")
    assert response.status_code == 200
    error = response.json()["error"]
    assert isinstance(error["traceback"], str)
    assert error["traceback"].startswith("Traceback (most recent call last):\n")
    assert response.json()["waits"] == []
