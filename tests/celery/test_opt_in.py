"""Celery nodes opt in (issue #19 part 1), with real workers on a real broker.

A worker started for other work (``-Q emails``) is not a weft engine: it
never consumes the weft queue, never gets an engine id, and never adopts a
claim -- not even while a weft node dies and its claims are taken over.
A node that names the weft queue (``-Q weft,emails``) is an engine, and so
is a plain worker without ``-Q`` (every queue of the app, as before).
PostgreSQL only.
"""

from __future__ import annotations

import re

import pytest

from tests.celery.conftest import HANG_TIMEOUT_S, REDIS_URL, CeleryWorker, wait_for
from weft_django import client
from weft_django.models import ClaimEvent, EngineRecord, WorkflowClaim, WorkflowRun

pytestmark = [pytest.mark.processes]


def _consumed_queues(worker: CeleryWorker) -> set[str]:
    """The queue names of the worker's ``[queues]`` banner (``.> name  exchange=...``)."""
    return set(re.findall(r"^\s*\.> (\S+)\s+exchange=", worker.log(), flags=re.M))


def _parked(run_ids: list[str]) -> bool:
    return WorkflowRun.objects.filter(pk__in=run_ids, status="parked").count() == len(run_ids)


@pytest.mark.django_db(transaction=True)
def test_a_node_for_other_work_never_consumes_weft_nor_adopts_a_claim(
    postgres, celery_app, workers, tmp_path
):
    first = CeleryWorker("opt-a", tmp_path, REDIS_URL, concurrency=1)
    second = CeleryWorker("opt-b", tmp_path, REDIS_URL, concurrency=1, extra=("-Q", "weft,mail"))
    emails = CeleryWorker("emails", tmp_path, REDIS_URL, pool="solo", extra=("-Q", "emails"))
    workers.extend([first, second, emails])
    wait_for(f"{emails.node} to be ready", lambda: f"{emails.node} ready." in emails.log(), emails)
    first.wait_ready()
    second.wait_ready()

    handles = [
        client.start("celery-waiter", {"id": f"opt{i}"}, workflow_id=f"opt-{i}") for i in range(8)
    ]
    run_ids = [h.run_id for h in handles]
    wait_for("every run to park on go", lambda: _parked(run_ids), first, second)
    held_by_first = set(
        WorkflowClaim.objects.filter(engine_id=first.engine_id).values_list(
            "workflow_id", flat=True
        )
    )
    if not held_by_first:  # node b picked every one up: give node a its own
        extra = [client.start("celery-waiter", {"id": f"opt-x{i}"}) for i in range(4)]
        run_ids += [h.run_id for h in extra]
        handles += extra
        wait_for("the extra runs to park", lambda: _parked(run_ids), first, second)
        held_by_first = set(
            WorkflowClaim.objects.filter(engine_id=first.engine_id).values_list(
                "workflow_id", flat=True
            )
        )

    first.kill()  # a weft node dies: its claims go to the other weft node only
    if held_by_first:
        wait_for(
            "node b to take node a's claims over",
            lambda: (
                set(
                    WorkflowClaim.objects.filter(
                        pk__in=held_by_first, engine_id=second.engine_id
                    ).values_list("workflow_id", flat=True)
                )
                == held_by_first
            ),
            second,
            timeout=HANG_TIMEOUT_S * 2,
        )
    later = [client.start("celery-waiter", {"id": f"opt-l{i}"}) for i in range(4)]  # pickups
    for handle in handles + later:
        client.signal(handle.workflow_id, "go", 1)
        client.signal(handle.workflow_id, "finish", 2)
    for handle in handles + later:
        assert handle.result(timeout=60)["finish"] == 2

    # The emails node: no engine, no claim, no weft queue, no weft task.
    assert not EngineRecord.objects.filter(node_name=emails.node).exists()
    assert not ClaimEvent.objects.filter(engine_id__startswith=f"{emails.node}:").exists()
    assert not WorkflowClaim.objects.filter(engine_id__startswith=f"{emails.node}:").exists()
    log = emails.log()
    assert "is not a weft engine" in log, log[-2000:]
    assert "weft" not in _consumed_queues(emails), _consumed_queues(emails)
    assert "emails" in _consumed_queues(emails)
    assert not re.search(r"Task weft\.\w+\[", log), log[-2000:]  # none received
    assert re.search(r"Task weft\.\w+\[", second.log())  # (the pattern does match)
    # The node that named the weft queue is an engine and did the work.
    assert "weft" in _consumed_queues(second)
    assert "is a weft engine" in second.log()
    takeovers = ClaimEvent.objects.filter(kind="takeover")
    assert {e.engine_id for e in takeovers} <= {second.engine_id}
    print(
        f"\nopt-in: node a held {len(held_by_first)} claims when killed, node b took "
        f"{takeovers.count()} over; the -Q emails node adopted none"
    )
