"""The global lock order (docs/reference/lock-order.md): claim rows, then the
lease, then run rows; no transaction of weft holds a run row while it waits
for a claim row.

Invariant protected: the general path's joint lock (``lock_claims_and_runs``)
locks a batch's runs only once every claim row of the batch exists and is
locked. A claim row still to create (a new workflow id, a child's first
claim) is inserted between two calls; a run locked in the first call would be
held ahead of that claim -- the deadlock the chaos soak's PostgreSQL log
showed (a batch holding a parent's run and waiting for its claim, another
holding the claim and waiting for the run).

PostgreSQL only: SQLite has one writer at a time, so no lock order to keep.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction

from weft_django import db as store
from weft_django.models import WorkflowClaim, WorkflowRun

pytestmark = pytest.mark.usefixtures("batch_db")


@pytest.fixture(autouse=True)
def _postgresql_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serializes writers: there is no lock order to keep")


def _other_session() -> psycopg.Connection:
    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        dbname=settings["NAME"],
        autocommit=True,
    )


def _free_in_another_session(sql: str, params: list[object]) -> bool:
    """Whether another session can lock the row at once (``NOWAIT``)."""
    with _other_session() as other:
        try:
            with other.transaction():
                other.execute(sql + " FOR UPDATE NOWAIT", params)
        except psycopg.errors.LockNotAvailable:
            return False
    return True


def test_a_missing_claim_row_leaves_the_run_unlocked() -> None:
    run = WorkflowRun.objects.create(workflow_id="parent", name="n", status="running")
    WorkflowClaim.objects.create(workflow_id="parent", epoch=1, engine_id="e", expires_at=9)
    ops = store.ops("default")
    claims: dict[str, object] = {}
    runs: dict[str, object] = {}
    with transaction.atomic():
        done = ops.lock_claims_and_runs(
            "default", ["parent", "parent:0"], [str(run.pk)], claims, runs
        )
        assert done is False
        assert set(claims) == {"parent"}  # the existing claim is locked ...
        assert runs == {}  # ... and no run ahead of the claim still to create
        table = WorkflowRun._meta.db_table
        assert _free_in_another_session(f'SELECT 1 FROM "{table}" WHERE id = %s', [run.pk])
        claim_table = WorkflowClaim._meta.db_table
        held = f'SELECT 1 FROM "{claim_table}" WHERE workflow_id = %s'
        assert not _free_in_another_session(held, ["parent"])


def test_with_every_claim_row_the_runs_are_locked_too() -> None:
    run = WorkflowRun.objects.create(workflow_id="wf", name="n", status="running")
    WorkflowClaim.objects.create(workflow_id="wf", epoch=1, engine_id="e", expires_at=9)
    ops = store.ops("default")
    claims: dict[str, object] = {}
    runs: dict[str, object] = {}
    with transaction.atomic():
        assert ops.lock_claims_and_runs("default", ["wf"], [str(run.pk)], claims, runs)
        assert set(runs) == {str(run.pk)}
        table = WorkflowRun._meta.db_table
        assert not _free_in_another_session(f'SELECT 1 FROM "{table}" WHERE id = %s', [run.pk])
