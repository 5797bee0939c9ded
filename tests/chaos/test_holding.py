"""What ``kill_holding`` waits for (``Cluster.holding``): a live queue slot of the
engine's claim generation, a schedule driver's claim, or (PostgreSQL) an
atomic step's transaction left open by the engine's backend. The chaos
workload may not hold the first two yet, so the reads are pinned here on
rows written by hand: a slot of an older generation or a released one is
not held; a driver whose claim another engine holds is not this engine's."""

from __future__ import annotations

import os
import uuid

import pytest
from django.db import connection

from devtools.chaos.harness import ChaosConfig, Cluster
from weft_django.kernel.schedule_spec import DRIVER_WORKFLOW
from weft_django.models import QueueSlot, WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cluster(tmp_path):
    made = Cluster(ChaosConfig(engines=2, celery=0, logs=tmp_path))
    slot = made.slots["chaos-e1"]
    slot.engine_ids.append("e1")
    yield made
    made.proxy.close()


def claim(workflow_id: str, engine_id: str, epoch: int) -> None:
    WorkflowClaim.objects.create(
        workflow_id=workflow_id, epoch=epoch, engine_id=engine_id, expires_at=1, claimed_at=1
    )


def run(workflow_id: str, name: str) -> WorkflowRun:
    return WorkflowRun.objects.create(workflow_id=workflow_id, name=name, status="running")


def test_a_queue_slot_counts_only_at_the_engines_epoch_and_unreleased(cluster):
    slot = cluster.slots["chaos-e1"]
    claim("q1", "e1", 3)
    queued = run("q1", "chaos-queued")
    for epoch, released in ((2, False), (3, True)):
        QueueSlot.objects.create(
            queue="chaos-q",
            workflow_id="q1",
            epoch=epoch,
            run_id=queued.pk,
            admitted_at=0,
            released=released,
        )
    assert cluster.holding(slot, ("queue slot",)) == ""
    QueueSlot.objects.create(
        queue="chaos-q", workflow_id="q1", epoch=3, run_id=queued.pk, admitted_at=0
    )
    assert cluster.holding(slot, ("queue slot",)) == "queue slot of chaos-q"


def test_a_schedule_is_held_through_its_drivers_claim(cluster):
    slot = cluster.slots["chaos-e1"]
    claim("weft-schedule-a", "e2", 1)
    run("weft-schedule-a", DRIVER_WORKFLOW)
    assert cluster.holding(slot, ("schedule",)) == ""
    claim("weft-schedule-b", "e1", 1)
    run("weft-schedule-b", DRIVER_WORKFLOW)
    assert cluster.holding(slot, ("queue slot", "schedule")) == "schedule weft-schedule-b"


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="PostgreSQL only: pg_stat_activity (SQLite has no backends to see)",
)
def test_an_open_atomic_transaction_of_the_engines_backend(cluster):
    import psycopg

    from project.demo.models import StockMove

    slot = cluster.slots["chaos-e1"]
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        dbname=settings["NAME"],
        application_name="chaos-e1",
    ) as engine_side:
        assert cluster.holding(slot, ("atomic transaction",)) == ""
        engine_side.execute(
            f'INSERT INTO "{StockMove._meta.db_table}" (sku, workflow_id, kind, delta, at) '
            "VALUES ('chaos', %s, 'chaos-atomic', 1, now())",
            [f"held-{uuid.uuid4().hex[:6]}"],
        )
        # Not committed: the backend is idle in transaction after the step's insert.
        assert cluster.holding(slot, ("atomic transaction",)) == "atomic transaction"
        engine_side.rollback()
        assert cluster.holding(slot, ("atomic transaction",)) == ""
