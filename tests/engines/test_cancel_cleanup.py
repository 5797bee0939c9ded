"""Cancellation with cleanup survives a SIGKILL during the cleanup (issue #17 part 3).

A real ``weft_worker`` runs a saga, is cancelled with a grace, starts
compensating and is SIGKILLed in the middle of a compensation; a second worker
takes the run over, replays the journal (the ``cancel`` event throws
``WorkflowCancelled`` at the same wait, the compensation already recorded is
not run again) and finishes the cleanup; the run ends ``cancelled``. Counted
from ``SideEffect`` rows the engines wrote.

PostgreSQL only (``processes`` marker, deselected on the SQLite leg).
"""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from project.demo.models import SideEffect
from tests.engines import cancel_workflows as cw
from tests.engines.harness import HANG_TIMEOUT_S, Worker, events_of, journal, wait_for
from weft_django import client
from weft_django.models import WorkflowRun

pytestmark = [pytest.mark.processes]

PAUSE_S = 4.0  # the compensation the engine is killed in (well past a poll)


def _count(kind: str, key: str) -> int:
    return SideEffect.objects.filter(kind=kind, key=key).count()


@pytest.mark.django_db(transaction=True)
def test_an_engine_killed_during_cleanup_is_taken_over_and_each_compensation_runs_once(
    tmp_path,
):
    assert connection.vendor == "postgresql"
    key = "cc-kill"
    workflow_id = "cc-kill-1"
    workers: list[Worker] = []
    try:
        first = Worker("cc-w1", tmp_path, imports=cw.IMPORTS)
        workers.append(first)
        first.wait_booted()
        handle = client.start(
            "procs-cancel-saga", {"id": key, "pause": PAUSE_S}, workflow_id=workflow_id
        )
        wait_for(
            "the saga to park waiting to ship",
            lambda: WorkflowRun.objects.filter(pk=handle.run_id, status="parked").exists(),
            first,
        )
        requested = client.cancel(workflow_id, "customer cancelled", grace=120)
        assert requested.status == "parked" and requested.cancel_requested_at is not None

        # The first engine takes the released run back and starts compensating:
        # the refund is recorded, then the slow compensation starts.
        def refund_recorded_and_pausing() -> bool:
            recorded = [e for e in journal(handle.run_id) if e.kind == "activity"]
            return len(recorded) >= 3 and _count(cw.PAUSE, key) >= 1

        wait_for("the cleanup to be in its slow compensation", refund_recorded_and_pausing, first)
        first.kill()
        assert first.proc.returncode == -signal.SIGKILL

        second = Worker("cc-w2", tmp_path, imports=cw.IMPORTS)
        workers.append(second)
        wait_for(
            "the second engine to finish the cleanup",
            lambda: WorkflowRun.objects.filter(pk=handle.run_id, status="cancelled").first(),
            second,
            timeout=HANG_TIMEOUT_S + 2 * PAUSE_S,
        )
        run = WorkflowRun.objects.get(pk=handle.run_id)
        assert run.error == {"type": "Cancelled", "message": "customer cancelled"}

        # Every step and every compensation with an effect ran exactly once; the
        # compensation in flight at the kill (it writes nothing but its row) ran
        # again under the new owner: an activity is at-least-once.
        assert _count(cw.RESERVE, key) == 1
        assert _count(cw.CHARGE, key) == 1
        assert _count(cw.REFUND, key) == 1
        assert _count(cw.RELEASE, key) == 1
        assert _count(cw.PAUSE, key) == 2

        entries = journal(handle.run_id)
        kinds = [e.kind for e in entries]
        assert kinds.count("cancel") == 1
        targets = [e.target.rsplit(".", 1)[-1] for e in entries if e.kind == "activity"]
        assert targets == [
            "cc_reserve_stock",
            "cc_charge",
            "cc_refund",
            "cc_pause",
            "cc_release_stock",
        ]
        # Reserve and charge under w1's first epoch; the refund under w1 after the
        # cancel's rotation; the rest under w2 after its takeover.
        engines = [e.engine_id for e in entries if e.kind == "activity"]
        assert engines == ["cc-w1", "cc-w1", "cc-w1", "cc-w2", "cc-w2"], engines
        cancel_entry = next(e for e in entries if e.kind == "cancel")
        assert cancel_entry.engine_id == "cc-w1"
        granted = [(e.kind, e.engine_id) for e in events_of(workflow_id)]
        assert ("rotate", "client") in granted, granted
        assert granted[-2][1] == "cc-w2" and granted[-1] == ("release", "cc-w2"), granted
    finally:
        for worker in workers:
            worker.kill()
