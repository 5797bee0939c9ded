"""The worker log of a real ``weft_worker`` process, for a run that fails.

A child engine on PostgreSQL (``tests.engines.harness.Worker``) runs a
workflow whose activity raises from a helper two calls deep, with
``retries=2``. Its log file (stdout and stderr of the process, the project's
``LOGGING``) has exactly three WARNING lines for the attempts -- "attempt N of
3", retried in how long or not retried and why -- and exactly one for the
failed run; each attempt's WARNING carries the activity's traceback. The
run's error, read through the API's detail and ``weft show --json``, names
the helper's file, function and raise line; and the run's attempt history
records the three failed attempts under that engine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from tests.cli.helpers import weft
from tests.e2e import failing_helpers
from tests.e2e.failing_workflows import IMPORTS
from tests.engines.harness import HANG_TIMEOUT_S, Worker, wait_for
from weft_django import client
from weft_django.models import ActivityAttempt, WorkflowRun

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

RUN_FAILED = re.compile(
    r"WARNING weft_django\.engine workflow proc-refund-1 \(run [^)]+\) failed: "
)
RAISE = f'File "tests/e2e/failing_helpers.py", line {failing_helpers.RAISE_LINE}, in authorise'


def test_the_worker_log_has_one_warning_per_attempt_and_one_for_the_run(tmp_path: Path) -> None:
    assert connection.vendor == "postgresql"
    worker = Worker("log-worker", tmp_path, imports=IMPORTS)
    try:
        worker.wait_booted()
        handle = client.start("proc-refund", {"card": "4000"}, workflow_id="proc-refund-1")
        wait_for(
            "the run to fail",
            lambda: WorkflowRun.objects.filter(
                workflow_id="proc-refund-1", status="failed"
            ).first(),
            worker,
            timeout=HANG_TIMEOUT_S * 2,
        )
        # The run's WARNING is logged right after its terminal commit: wait for the line.
        wait_for(
            "the run's WARNING in the log",
            lambda: RUN_FAILED.search(worker.log()),
            worker,
        )
        log = worker.log()
    finally:
        worker.kill()

    warnings = [line for line in log.splitlines() if " WARNING " in line]
    attempts = [
        line for line in warnings if "activity proc-charge of workflow proc-refund-1" in line
    ]
    ended = [line for line in warnings if RUN_FAILED.search(line)]
    assert len(attempts) == 3, warnings
    assert len(ended) == 1, warnings
    assert len([line for line in warnings if "proc-refund-1" in line]) == 4, warnings
    for n, line in enumerate(attempts, start=1):
        assert f"failed, attempt {n} of 3: PaymentDeclined: card 4000 declined" in line, line
    assert re.search(r"; retried in 0\.2 s \(at \S+\)", attempts[0]), attempts[0]
    assert re.search(r"; retried in 0\.4 s \(at \S+\)", attempts[1]), attempts[1]
    assert "; not retried (retries exhausted)" in attempts[2], attempts[2]
    assert "retried" not in attempts[2].split("(retries exhausted)")[1], attempts[2]
    assert f"(run {handle.run_id}) failed: ActivityError:" in ended[0], ended[0]
    assert 'Activity "proc-charge" failed after 3 attempts' in ended[0], ended[0]
    # Each attempt's WARNING carries the activity's own traceback (the helper's raise).
    assert log.count(f"line {failing_helpers.RAISE_LINE}, in authorise") >= 3, log[-4000:]

    # The run's error names the helper's file, function and raise line: in the
    # API's detail and in ``weft show --json``.
    admin = get_user_model().objects.create_superuser("ops", "ops@example.com", "x")
    web = Client()
    web.force_login(admin)
    detail = web.get("/api/weft/workflows/proc-refund-1/").json()
    assert RAISE in detail["error"]["traceback"], detail["error"]
    assert detail["error"]["type"] == "ActivityError"
    shown = weft("show", "proc-refund-1", "--json").data
    assert RAISE in shown["error"]["traceback"]
    # And the attempt history: three failed attempts, run by that engine.
    assert [(a["attempt"], a["outcome"], a["engine_id"]) for a in shown["attempts"]] == [
        (n, "failed", "log-worker") for n in (1, 2, 3)
    ]
    assert ActivityAttempt.objects.filter(run_id=handle.run_id, outcome="failed").count() == 3
