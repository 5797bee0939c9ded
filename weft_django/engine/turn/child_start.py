"""The row of a child's start (attached or detached), and what follows its commit.

Invariant: a child obeys its flow control like any start. A child whose
start names a queue (``ctx.start_child(queue=...)``, else its workflow's
``@workflow(queue=...)``) is written ``pending`` with its queue, priority
and concurrency key -- still in the parent's fenced checkpoint, under "no
live run of that id" -- and no claim is folded for it: the queue's
admission (``engine.maintenance.admission``) takes it into a slot like any
queued run, so no path starts a queued run past its queue's limits. A child
without a queue is the parent's to own from its first turn: ``running``,
its claim acquired in the same checkpoint. The flow control is checked by
the start write's ``run_fields`` before anything is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from weft_django.engine import signals as weft_signals
from weft_django.engine.operations.start import NewRun, row, run_fields
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.commands import StartChild
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.models import WorkflowRun
from weft_django.ownership.fold import ClaimFold, prepare_claim_fold


@dataclass
class ChildStart:
    """A child's unsaved row and the claim fold that owns it (none when queued)."""

    run: WorkflowRun
    folds: list[ClaimFold]

    @property
    def queued(self) -> bool:
        return self.run.queue is not None


def child_row(
    turn: TurnState,
    command: StartChild,
    child_id: str,
    child_input: Any,
    now: int,
    **links: Any,
) -> ChildStart:
    """The child's row (``links``: ``parent_id`` / ``parent_position``).

    Raises ``InvalidArgumentError`` (an unknown queue, a bad priority or key)
    before anything is written; call inside the child's start span."""
    definition = get_workflow(command.name)
    queue = command.queue if command.queue is not None else definition.queue
    flow = run_fields(queue, command.priority, command.concurrency_key)
    new = NewRun(command.name, child_input, child_id, flow)
    if flow.get("queue") is not None:
        return ChildStart(row(new, **links), [])
    fold = prepare_claim_fold(turn.host, child_id)
    running = row(
        new,
        status="running",
        started_at=timezone.now(),
        turn_started_at=now,
        turn_pid=os.getpid(),
        **links,
    )
    return ChildStart(running, [fold] if fold else [])


def after_child_commit(turn: TurnState, start: ChildStart) -> None:
    """After the checkpoint that inserted it: a queued child is announced to
    the admitters (a ``start`` wake); an owned one is driven here."""
    if start.queued:
        announce(Wake("start", str(start.run.pk), turn.db, start.run.workflow_id))
        return
    weft_signals.workflow_started.send(sender=WorkflowRun, run=start.run)
    turn.host.dispatch(start.run.pk, None)


__all__ = ["ChildStart", "after_child_commit", "child_row"]
