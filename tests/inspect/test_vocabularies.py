"""The state vocabularies and the read rules have one definition each.

``RunStatus`` and friends are ``TextChoices`` (``weft_django.models.choices``,
re-exported by ``models``); the groups derive from them; the managers'
querysets are the one home of "latest run", "live", "drivable", "due".
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import get_args

import pytest
from django.utils import timezone

from weft_django import models
from weft_django.kernel import vocab
from weft_django.models import (
    AsyncActivity,
    AsyncStatus,
    ClaimEvent,
    ClaimEventKind,
    RunStatus,
    Timer,
    TimerKind,
    WorkflowRun,
)


def test_the_literals_and_the_choices_name_the_same_values() -> None:
    assert get_args(models.RunStatusValue) == tuple(RunStatus.values) == models.RUN_STATUSES
    assert get_args(models.ClaimEventKindValue) == tuple(ClaimEventKind.values)
    assert tuple(TimerKind.values) == vocab.TIMER_KINDS
    assert set(AsyncStatus.values) == {"pending", "completed", "failed"}
    # Labels are the stored values (the admin and the API show the value).
    for choices in (RunStatus, ClaimEventKind, TimerKind, AsyncStatus):
        assert [label for _, label in choices.choices] == list(choices.values)


def test_the_status_groups_partition_the_statuses() -> None:
    live, terminal = set(models.LIVE_STATUSES), set(models.TERMINAL_STATUSES)
    assert live | terminal == set(models.RUN_STATUSES) and not live & terminal
    assert models.DRIVABLE_STATUSES == {"running", "parked"} < live


def test_fields_carry_their_choices() -> None:
    assert WorkflowRun._meta.get_field("status").choices == RunStatus.choices
    assert ClaimEvent._meta.get_field("kind").choices == ClaimEventKind.choices
    assert Timer._meta.get_field("kind").choices == TimerKind.choices
    assert AsyncActivity._meta.get_field("status").choices == AsyncStatus.choices


def _run(workflow_id: str, status: str, created: dt.datetime) -> WorkflowRun:
    run = WorkflowRun.objects.create(
        id=uuid.uuid4(), workflow_id=workflow_id, name="n", status=status
    )
    WorkflowRun.objects.filter(pk=run.pk).update(created_at=created)
    return run


@pytest.mark.django_db
def test_latest_for_breaks_a_created_at_tie_by_pk() -> None:
    at = timezone.now()
    older = _run("w", "completed", at - dt.timedelta(seconds=1))
    tied = [_run("w", "failed", at), _run("w", "cancelled", at)]
    latest = WorkflowRun.objects.latest_for("w")
    assert latest is not None and latest.pk == max(run.pk for run in tied)
    assert latest.pk != older.pk
    assert WorkflowRun.objects.latest_for("nobody") is None


@pytest.mark.django_db
def test_the_status_groups_as_querysets() -> None:
    at = timezone.now()
    for status in RunStatus.values:
        _run(f"w-{status}", status, at)
    runs = WorkflowRun.objects
    assert {r.status for r in runs.live()} == set(models.LIVE_STATUSES)
    assert {r.status for r in runs.drivable()} == set(models.DRIVABLE_STATUSES)
    assert {r.status for r in runs.terminal()} == set(models.TERMINAL_STATUSES)
