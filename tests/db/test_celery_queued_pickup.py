"""A Celery node's ``weft.pickup`` of a run of a declared queue admits it through
the queue, never picks it up directly.

Invariant protected: a queue's limits bind every start, whatever the
transport. ``client.start`` sends ``weft.pickup`` for every new run; picked
up directly, a queued run skipped the admission (its lock, count, rate and
priority) and was only re-admitted at its first turn's gate, which checks the
concurrency but not the rate (a re-admission is no new start): the chaos soak
(issue #21) saw 4 new starts of a ``3/2s`` queue within 1.9 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.db.celery_pool import as_pool_process
from weft_django.kernel.clock import now_ms
from weft_django.models import QueueSlot, WorkflowClaim, WorkflowRun
from weft_django.transports.celery.tasks import run_pickup

pytestmark = pytest.mark.usefixtures("batch_db")

QUEUES = {"rated": {"rate": "1/m"}}


@pytest.fixture
def node() -> Iterator[None]:
    """This process as a Celery node's pool process (its identity, a fresh engine)."""
    with as_pool_process("node-q", "celery@queued"), override_settings(WEFT={"QUEUES": QUEUES}):
        yield


def test_a_pickup_of_a_run_whose_queue_is_at_its_rate_leaves_it_pending(node: None) -> None:
    # The rate window already holds its one admission.
    QueueSlot.objects.create(
        queue="rated", workflow_id="earlier", epoch=1, run_id=WorkflowRun().pk, admitted_at=now_ms()
    )
    run = WorkflowRun.objects.create(
        workflow_id="rated-1", name="three-steps", status="pending", queue="rated"
    )
    outcome = run_pickup(str(run.pk), workflow_id=run.workflow_id)
    assert outcome == "queued"
    run.refresh_from_db()
    assert run.status == "pending", "picked up past its queue's rate"
    assert not WorkflowClaim.objects.filter(pk="rated-1", engine_id__isnull=False).exists()
    assert not QueueSlot.objects.filter(workflow_id="rated-1").exists()


def test_a_pickup_of_a_run_whose_queue_has_room_admits_it_with_a_slot(node: None) -> None:
    run = WorkflowRun.objects.create(
        workflow_id="rated-2", name="three-steps", status="pending", queue="rated"
    )
    assert run_pickup(str(run.pk), workflow_id=run.workflow_id) == "queued"
    run.refresh_from_db()
    assert run.status == "running"
    slot = QueueSlot.objects.get(workflow_id="rated-2")
    assert slot.counts_for_rate, "admitted as a new start, counted by the rate"
    claim = WorkflowClaim.objects.get(pk="rated-2")
    assert (claim.engine_id, claim.epoch) == ("node-q", slot.epoch)


def test_a_pickup_of_a_run_of_a_queue_the_node_does_not_serve_leaves_it_pending() -> None:
    with (
        as_pool_process("node-q2", "celery@other", served_queues=frozenset({"other"})),
        override_settings(WEFT={"QUEUES": {**QUEUES, "other": {}}}),
    ):
        run = WorkflowRun.objects.create(
            workflow_id="rated-3", name="three-steps", status="pending", queue="rated"
        )
        assert run_pickup(str(run.pk), workflow_id=run.workflow_id) == "not-served"
        run.refresh_from_db()
        assert run.status == "pending"
        assert not QueueSlot.objects.filter(workflow_id="rated-3").exists()
