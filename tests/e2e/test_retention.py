"""RETENTION: engines purge terminal runs older than it, and nothing else.

Protects: retention never deletes a recent or a live run, and never rotates
the claim of a workflow id that still has a live run (it would depose the
running owner).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from weft_django import client, workflow
from weft_django.models import ClaimEvent, WorkflowRun
from weft_django.testing import WorkflowTestEnvironment


@workflow(name="retention-echo")
def retention_echo(ctx, data):
    if data.get("wait"):
        yield ctx.wait_for_signal("go")
    return data


@pytest.mark.django_db(transaction=True)
def test_retention_purges_only_old_terminal_runs():
    env = WorkflowTestEnvironment(retention=timedelta(days=7))
    try:
        old = client.start("retention-echo", {"n": 1}, workflow_id="ret-old")
        recent = client.start("retention-echo", {"n": 2}, workflow_id="ret-recent")
        env.run_until_idle()
        assert old.status() == "completed" and recent.status() == "completed"
        WorkflowRun.objects.filter(pk=old.run_id).update(
            finished_at=timezone.now() - timedelta(days=8)
        )
        # An old finished run of an id whose newest run is still live.
        mixed_old = client.start("retention-echo", {"n": 3}, workflow_id="ret-mixed")
        env.run_until_idle()
        WorkflowRun.objects.filter(pk=mixed_old.run_id).update(
            finished_at=timezone.now() - timedelta(days=9)
        )
        live = client.start(
            "retention-echo", {"wait": True}, workflow_id="ret-mixed", on_conflict="start-new"
        )
        env.run_until_idle()
        assert live.status() == "parked"
        rotations_before = ClaimEvent.objects.filter(workflow_id="ret-mixed", kind="rotate").count()

        env.engine.maintenance.retention_due = 0
        env.run_until_idle()

        remaining = set(WorkflowRun.objects.values_list("pk", flat=True))
        assert old.run_id not in {str(pk) for pk in remaining}
        assert mixed_old.run_id not in {str(pk) for pk in remaining}
        assert {recent.run_id, live.run_id} <= {str(pk) for pk in remaining}
        assert ClaimEvent.objects.filter(workflow_id="ret-old", kind="rotate").count() == 1
        assert (
            ClaimEvent.objects.filter(workflow_id="ret-mixed", kind="rotate").count()
            == rotations_before
        )
        client.signal("ret-mixed", "go", None)
        env.run_until_idle()
        assert live.status() == "completed"
    finally:
        env.close()
