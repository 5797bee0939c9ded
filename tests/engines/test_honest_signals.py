"""Honest ownership signals with real engine processes (issue #19 part 2).

50 cancels and 5 suspends of parked runs held by two healthy ``weft_worker``
engines rotate 55 claims away from them. Each engine counts those losses
``outcome="rotated"``, logs what happened at INFO ("cancelled by an
operator"), and never counts them as ``deposed`` or as renewal failures,
nor warns that "another engine now holds it" -- so an alert on those
metrics stays silent on ordinary admin use. (A real deposition -- a
takeover after SIGSTOP past the TTL -- still counts as ``deposed`` and a
renewal failure: ``test_fast_takeover.test_sigstop_keeps_the_ttl_path_and_
the_late_commit_is_refused`` asserts it.) PostgreSQL only.
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.engines.harness import HANG_TIMEOUT_S, Worker, kill_all, wait_for
from tests.engines.workflows import IMPORTS
from weft_django import client
from weft_django.models import EngineRecord, WorkflowClaim, WorkflowRun
from weft_django.ownership.metrics import ClaimMetricsSnapshot

pytestmark = [pytest.mark.processes]

CANCELS, SUSPENDS = 50, 5


def _metrics(engine_id: str) -> ClaimMetricsSnapshot:
    return ClaimMetricsSnapshot.from_json(EngineRecord.objects.get(pk=engine_id).metrics)


@pytest.mark.django_db(transaction=True)
def test_cancels_and_suspends_are_rotations_not_depositions(tmp_path):
    assert connection.vendor == "postgresql"
    workers: list[Worker] = []
    try:
        env = {"WEFT_LOG_LEVEL": "INFO"}
        a = Worker("honest-a", tmp_path, env=env, imports=IMPORTS)
        b = Worker("honest-b", tmp_path, env=env, imports=IMPORTS)
        workers += [a, b]
        a.wait_booted()
        b.wait_booted()
        ids = [f"honest-{i}" for i in range(CANCELS + SUSPENDS)]
        for wid in ids:
            client.start("procs-bad-handler", workflow_id=wid)  # parks on "never"

        def all_parked_and_held() -> bool:
            parked = WorkflowRun.objects.filter(workflow_id__in=ids, status="parked").count()
            held = WorkflowClaim.objects.filter(
                pk__in=ids, engine_id__in=[a.engine_id, b.engine_id]
            ).count()
            return parked == held == len(ids)

        wait_for("every run parked with its claim held", all_parked_and_held, a, b)
        for wid in ids[:CANCELS]:
            client.cancel(wid, reason="ops cleanup")
        for wid in ids[CANCELS:]:
            client.suspend(wid, reason="maintenance")

        def rotated() -> int:
            return sum(_metrics(w.engine_id).attempts["rotated"] for w in (a, b))

        wait_for(
            "both engines to count every rotation",
            lambda: rotated() >= len(ids),
            a,
            b,
            timeout=HANG_TIMEOUT_S * 2,
        )
        for worker in (a, b):
            snap = _metrics(worker.engine_id)
            assert snap.attempts["deposed"] == 0, (worker.engine_id, snap.attempts)
            assert snap.renewal_failures == 0, (worker.engine_id, snap)
            log = worker.log()
            assert "another engine" not in log, log[-3000:]
            assert "WeftWorkflowClaimLostWarning" not in log
        logs = a.log() + b.log()
        assert "was cancelled by an operator" in logs
        assert "was suspended by an operator" in logs
        assert "ops cleanup" not in logs  # the free-text reason is not logged
        assert rotated() == len(ids)
        print(
            f"\n[honest] {CANCELS} cancels + {SUSPENDS} suspends: rotated "
            f"{rotated()}, deposed 0, renewal failures 0"
        )
    finally:
        kill_all(workers)
