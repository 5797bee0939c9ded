"""A failed activity keeps its own traceback, and every failure is logged.

An activity raising from a helper two calls deep, with ``retries=2``: the
run's error (the API's detail, ``weft show --json``, the admin page) names
the helper's file, function and raise line, before the workflow-side frames;
the ``ActivityError`` the workflow catches has that traceback as its
``__cause__``; the worker log has one WARNING per attempt (attempt N of 3,
retried or not) and one for the run. An exception that cannot be pickled
and whose ``str`` raises, and a recursion thousands of frames deep, are
stored (bounded, with a marker), never a failure of the turn.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tests.cli.helpers import weft
from tests.e2e import failing_helpers
from tests.e2e.helpers import latest
from weft_django import ActivityError, activity, client, workflow
from weft_django.engine import Engine
from weft_django.models import JournalEntry

HELPER_FILE = "tests/e2e/failing_helpers.py"
RAISE = f'File "{HELPER_FILE}", line {failing_helpers.RAISE_LINE}, in authorise'


@activity(name="tb-charge", retries=2, backoff=timedelta(seconds=1))
def charge_card(card: str) -> None:
    failing_helpers.charge(card)


@activity(name="tb-unpicklable")
def unpicklable() -> None:
    raise failing_helpers.Unpicklable()


@activity(name="tb-recursion")
def deep() -> None:
    failing_helpers.recurse(0)


@workflow(name="tb-refund")
def refund(ctx, data):
    yield ctx.run(charge_card, data["card"])


@workflow(name="tb-catching")
def catching(ctx, data):
    try:
        yield ctx.run(charge_card, data["card"])
    except ActivityError as exc:
        cause = exc.__cause__
        return {"cause_type": type(cause).__name__, "cause": str(cause)}


@workflow(name="tb-bad")
def bad(ctx, which):
    yield ctx.run(unpicklable if which == "unpicklable" else deep)


def _drive(engine: Engine, clock: Any, handle: Any, attempts: int) -> None:
    engine.run_until_idle()
    for _ in range(attempts):
        clock.advance(60_000)
        engine.run_until_idle()
    assert handle.status() in ("failed", "completed"), handle.status()


@pytest.mark.django_db(transaction=True)
def test_the_run_error_names_the_helpers_raise_line_everywhere(
    clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    caplog.set_level(logging.INFO, logger="weft_django.engine")
    try:
        handle = client.start("tb-refund", {"card": "4242"}, workflow_id="refund-001")
        _drive(engine, clock, handle, 3)
    finally:
        engine.dispose()
    assert handle.status() == "failed"
    run = latest("refund-001")
    trace = run.error["traceback"]
    # The activity's frames first (helper file, function, raise line), then the workflow's.
    assert RAISE in trace
    assert "in charge\n" in trace
    assert "PaymentDeclined: card 4242 declined by the issuer" in trace
    assert trace.index(RAISE) < trace.index("The above exception was the direct cause")
    assert "yield ctx.run(charge_card" in trace.split("direct cause")[1]
    # The journal entry of the failed activity keeps the activity's own traceback.
    entry = JournalEntry.objects.get(run_id=run.pk, kind="activity")
    assert RAISE in entry.error["traceback"]
    assert entry.error["fields"]["attempts"] == 3

    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    attempts = [r for r in warnings if r.weft["event"] == "activity_attempt_failed"]
    ended = [r for r in warnings if r.weft["event"] == "workflow_failed"]
    assert [r.weft["attempt"] for r in attempts] == [1, 2, 3]
    assert [r.weft["retried"] for r in attempts] == [True, True, False]
    assert "attempt 1 of 3: PaymentDeclined: card 4242" in attempts[0].getMessage()
    assert "retried in 1 s" in attempts[0].getMessage()
    assert "not retried (retries exhausted)" in attempts[2].getMessage()
    assert attempts[0].weft["workflow_id"] == "refund-001"
    assert attempts[0].weft["run_id"] == str(run.pk)
    assert attempts[0].exc_info is not None  # the activity's traceback in the log
    assert len(ended) == 1
    assert 'Activity "tb-charge" failed after 3 attempts' in ended[0].getMessage()

    # weft show --json: the same traceback, whole.
    shown = weft("show", "refund-001", "--json").data
    assert RAISE in shown["error"]["traceback"]
    # weft result: the headline and the traceback on many lines.
    result = weft("result", "refund-001")
    assert RAISE in result.out + result.err + result.message
    lines = (result.out + result.err + result.message).splitlines()
    assert len(lines) > 10

    # The API's detail and the admin page.
    user = get_user_model().objects.create_user(
        "ops", password="pw", is_staff=True, is_superuser=True
    )
    web = Client()
    web.force_login(user)
    detail = web.get("/api/weft/workflows/refund-001/").json()
    assert RAISE in detail["error"]["traceback"]
    page = web.get(reverse("admin:weft_workflowrun_change", args=[run.pk])).content.decode()
    assert RAISE.replace('"', "&quot;") in page


@pytest.mark.django_db(transaction=True)
def test_the_workflow_catches_the_error_with_its_activity_traceback(clock: Any) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("tb-catching", {"card": "1111"}, workflow_id="catching-1")
        _drive(engine, clock, handle, 3)
    finally:
        engine.dispose()
    assert handle.status() == "completed", handle.error()
    result = handle.result()
    assert result["cause_type"] == "ActivityTraceback"
    assert RAISE in result["cause"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("which", ["unpicklable", "recursion"])
def test_bad_exceptions_are_stored_bounded_never_lost(clock: Any, which: str) -> None:
    engine = Engine(clock=clock, background_tasks="manual").boot()
    try:
        handle = client.start("tb-bad", which, workflow_id=f"bad-{which}")
        _drive(engine, clock, handle, 0)
    finally:
        engine.dispose()
    assert handle.status() == "failed"
    error = latest(f"bad-{which}").error
    trace = error["traceback"]
    assert len(trace) <= 17_000
    if which == "unpicklable":
        assert "Unpicklable" in error["message"]
        assert "str() failed" in error["message"]
    else:
        assert "RecursionError" in error["message"]
        assert "in recurse" in trace
        assert "characters left out" in trace
