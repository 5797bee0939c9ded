"""Shared helpers of the end-to-end runtime tests (not a test module)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from weft_django.engine.workflow.definitions import registry
from weft_django.models import (
    AsyncActivity,
    ClaimEvent,
    JournalEntry,
    SignalMessage,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)


def latest(workflow_id: str) -> WorkflowRun:
    """The latest run of ``workflow_id``, fresh from the database."""
    run = WorkflowRun.objects.filter(workflow_id=workflow_id).order_by("-created_at", "-pk").first()
    assert run is not None, f"no run of {workflow_id!r}"
    return run


def claim_events(workflow_id: str) -> list[tuple[str, int]]:
    return list(
        ClaimEvent.objects.filter(workflow_id=workflow_id)
        .order_by("id")
        .values_list("kind", "epoch")
    )


def claim_epoch(workflow_id: str) -> int:
    claim = WorkflowClaim.objects.filter(pk=workflow_id).first()
    return claim.epoch if claim is not None else 0


def journal(run: WorkflowRun | str) -> list[tuple[str, str]]:
    run_id = run.pk if isinstance(run, WorkflowRun) else run
    return list(
        JournalEntry.objects.filter(run_id=run_id)
        .order_by("position")
        .values_list("kind", "target")
    )


def row_counts() -> dict[str, int]:
    """How many rows every runtime table holds (to prove nothing was written)."""
    return {
        model.__name__: model.objects.count()
        for model in (
            WorkflowRun,
            SignalMessage,
            JournalEntry,
            Timer,
            AsyncActivity,
            ClaimEvent,
            WorkflowClaim,
        )
    }


def run_state(workflow_id: str) -> tuple[Any, ...]:
    """The fields of the latest run that any write would change."""
    run = latest(workflow_id)
    return (run.pk, run.status, run.version, run.wake_seq, run.error, run.result)


@contextlib.contextmanager
def swapped_workflow(name: str, fn: Callable[..., Any]) -> Iterator[None]:
    """Simulate a deploy: the registered workflow ``name`` runs ``fn`` instead."""
    with registry.swapped(name, fn):
        yield
