"""What weft tasks report, with a real worker (issue #19 part 1).

- A node that boots under the name of a previous boot finds that boot's
  wakes in its direct queue: each is discarded and counted, and the node
  logs ONE summary line for them (not one per run, and no stale-wake
  warning), whichever of its pool processes meets them.
- A duplicate wake's task result names its workflow and says "duplicate"
  (what Flower shows), instead of a bare success of a run UUID.
PostgreSQL only.
"""

from __future__ import annotations

import re
import uuid

import pytest
from celery.utils.nodenames import worker_direct

from tests.celery.conftest import REDIS_URL, CeleryWorker, wait_for, wakes
from weft_django import client
from weft_django.models import WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes]

SUMMARY = "discarding the wakes a previous boot of this node"
LEFTOVERS = 40


@pytest.mark.django_db(transaction=True)
def test_a_previous_boots_wakes_make_one_line_and_duplicates_say_so(
    postgres, celery_app, workers, tmp_path
):
    worker = CeleryWorker("left", tmp_path, REDIS_URL, pool="prefork", concurrency=2)
    workers.append(worker)
    previous = f"{worker.node}:4242:0ldb00t0"
    queue = worker_direct(worker.node)
    for i in range(LEFTOVERS):  # what a killed previous boot left in the direct queue
        celery_app.send_task(
            "weft.drive",
            args=[str(uuid.uuid4()), "signal", previous, 3],
            kwargs={"via": "celery", "workflow_id": f"old-{i}"},
            queue=queue,
        )
    worker.wait_ready()
    metrics = worker.metrics_when(
        "every leftover wake counted",
        lambda m: wakes(m, kind="signal", decision="discard") >= LEFTOVERS,
    )
    assert wakes(metrics, kind="signal", decision="discard") >= LEFTOVERS, metrics.wakes
    log = worker.log()
    summaries = {line for line in log.splitlines() if SUMMARY in line}
    # One line (the example project's logging prints each weft record twice:
    # its own handler and Celery's -- the same line, once per handler).
    distinct = {re.sub(r"^.*?weft node", "weft node", line) for line in summaries}
    assert len(distinct) == 1, summaries
    assert previous in next(iter(distinct))
    assert 'discarded a stale "signal" wake' not in log
    assert "old-1" not in {line.get("workflow") for line in worker.wake_lines("discarded")}
    assert re.search(r"succeeded in .*'outcome': 'leftover', 'workflow_id': 'old-\d+'", log)

    # A duplicate wake of a parked run: the result names the workflow.
    handle = client.start("celery-waiter", {"id": "rep"}, workflow_id="rep-1")
    wait_for(
        "the run to park", lambda: WorkflowRun.objects.get(pk=handle.run_id).status == "parked"
    )
    claim = WorkflowClaim.objects.get(pk="rep-1")
    celery_app.send_task(
        "weft.drive",
        args=[handle.run_id, "signal", claim.engine_id, claim.epoch],
        kwargs={"via": "celery", "workflow_id": "rep-1"},
        queue=queue,
    )
    pattern = r"succeeded in .*'outcome': 'duplicate', 'workflow_id': 'rep-1'"
    wait_for("the duplicate's result", lambda: re.search(pattern, worker.log()), worker)
    assert 'discarded a stale "signal" wake for workflow "rep-1"' not in worker.log()
    client.cancel("rep-1")
