"""A turn that raises inside a Celery pool process (issue #14, item 1).

The pool's task body answers with the same runtime function as a standalone
engine (``engine.turn_failures.record_turn_failure``): the run is retried
with backoff ``TURN_MAX_FAILURES`` times (3 here) -- re-driven by the node's
stranded finder only once ``turn_retry_at`` passed -- and then suspended
with the error recorded and the claim released. Resume resets the count.

PostgreSQL only (asserted); ``processes`` marker: a real worker node.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from tests.celery.conftest import CeleryWorker, wait_for
from weft_django import client
from weft_django.engine.turn.failures import retry_delay_ms
from weft_django.models import WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes]

MAX_FAILURES = 3


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_raises_in_a_pool_is_retried_then_suspended(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker("turnfail", tmp_path, env={"WEFT_TURN_MAX_FAILURES": str(MAX_FAILURES)})
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("celery-bad-handler", {"id": "tf"}, workflow_id="celery-turnfail")
    wait_for(
        "the run parked",
        lambda: WorkflowRun.objects.get(pk=handle.run_id).status == "parked",
        worker,
        timeout=30,
    )
    client.signal("celery-turnfail", "boom", 1)

    def suspended() -> WorkflowRun | None:
        run = WorkflowRun.objects.get(pk=handle.run_id)
        return run if run.status == "suspended" else None

    # Backoffs of 1 s and 2 s, found by a stranded finder polling every 1 s.
    run = wait_for("the run suspended after its failed turns", suspended, worker, timeout=30)
    assert run.turn_failures == MAX_FAILURES and run.turn_retry_at is None
    assert run.error["type"] == "ValueError", run.error
    assert "handler refuses 1" in run.error["message"]
    assert f"turn failed {MAX_FAILURES} times" in run.suspended_reason
    assert not WorkflowClaim.objects.filter(
        workflow_id="celery-turnfail", engine_id__isnull=False
    ).exists()
    log = worker.log()
    retries = {
        line for line in log.splitlines() if "retried in" in line and "celery-turnfail" in line
    }
    assert len(retries) >= MAX_FAILURES - 1, log[-4000:]
    assert retry_delay_ms(1) == 1_000

    # Read inside the resume's own transaction: once it commits, the live node
    # may pick the run up at once (it is pending for milliseconds at most).
    with transaction.atomic():
        client.resume("celery-turnfail")
        fresh = WorkflowRun.objects.get(pk=handle.run_id)
    assert (fresh.status, fresh.turn_failures, fresh.turn_retry_at) == ("pending", 0, None)
