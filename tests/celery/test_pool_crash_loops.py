"""A workflow body that kills the Celery pool process running it is contained.

On a standalone engine the body kills the engine, the claim is taken over,
and each new owner's first turn counts the death (``engine.turn.failures.
note_recovery``): at ``MAX_RECOVERY_ATTEMPTS`` the run is ``suspended`` with
``CrashLoopError``. On a Celery node only the pool process dies: the node
lives on, keeps the claim and re-drives the run (its turn mark's process is
gone), so no takeover ever counts the death -- without the turn mark's
answer (``transports.celery.turn_marks.take_turn``) the body killed pool
processes forever. Now the turn after a dead pool process's turn counts it,
and the run ends ``suspended`` with ``CrashLoopError`` after the bound,
while the node stays up and drives other runs.

PostgreSQL only (asserted); ``processes`` marker: a real worker node.
"""

from __future__ import annotations

import pytest

from tests.celery.conftest import CeleryWorker, wait_for
from tests.engines.poison_workflows import IMPORTS
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.processes]

MAX_RECOVERY_ATTEMPTS = 3


@pytest.mark.django_db(transaction=True)
def test_a_body_that_kills_its_pool_process_ends_in_a_crash_loop(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker(
        "poolpoison",
        tmp_path,
        env={"WEFT_MAX_RECOVERY_ATTEMPTS": str(MAX_RECOVERY_ATTEMPTS)},
        imports=(*IMPORTS, "tests.celery.workflows"),
    )
    workers.append(worker)
    worker.wait_ready()
    handle = client.start("poison-body", {}, workflow_id="celery-poison-body")

    def suspended() -> WorkflowRun | None:
        run = WorkflowRun.objects.get(pk=handle.run_id)
        return run if run.status == "suspended" else None

    run = wait_for("the poison run suspended", suspended, worker, timeout=60)
    assert run.error["type"] == "CrashLoopError", run.error
    assert run.recoveries["count"] == MAX_RECOVERY_ATTEMPTS, run.recoveries
    assert all(" pid " in lost for lost in run.recoveries["engines"]), run.recoveries
    # The node logs a pool process's exit when it reaps it, maybe after the
    # re-driven turn already suspended the run: wait for the last one.
    exits = "exited with 'exitcode 1'"
    wait_for(
        "every pool exit logged",
        lambda: worker.log().count(exits) >= MAX_RECOVERY_ATTEMPTS,
        worker,
        timeout=30,
    )
    log = worker.log()
    assert log.count(exits) == MAX_RECOVERY_ATTEMPTS, log[-4000:]
    # The node is still up and drives other runs.
    assert worker.alive()
    other = client.start("celery-leaf", {"id": "after"}, workflow_id="celery-after-poison")
    assert other.result(timeout=30) == "after:leaf"
