"""``ctx.start_child(..., detached=True)``: a child that outlives its parent.

Why the child is not linked as a child (no ``parent_id``): every cascade --
a cancel with or without a grace, a timeout, a race abandoning its branch --
and every parent wake follow that link, so a detached child is by
construction never cancelled with its parent, never awaited, and never
wakes it. What ties it to the parent is the journal instead: the child's
insert (under "no live run of that id"), its claim fold and the ``child``
entry that resolves the command to the child's workflow id are ONE fenced
checkpoint of the parent -- the child exists exactly when the parent's
journal says it was started, and a replay or takeover never starts it twice.
"""

from __future__ import annotations

from weft_django.engine import tracing
from weft_django.engine.operations.start import live_insert
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.replay.events import Event
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.child_start import after_child_commit, child_row
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.workflow.commands import StartChild
from weft_django.engine.workflow.definitions import has_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    ChildWorkflowError,
    InvalidArgumentError,
    PayloadError,
    UnknownWorkflowType,
)


def start_detached(
    turn: TurnState, leaf: Leaf, command: StartChild, child_id: str, now: int
) -> bool:
    """Start the child and resolve the command to its id, in one batch."""
    assert turn.replay is not None
    if not has_workflow(command.name):
        error = error_record(UnknownWorkflowType(command.name))
        return turn.settle(leaf, error=ChildWorkflowError(child_id, "failed", error))
    try:
        child_input = normalize(f"input of child {child_id!r}", command.input)
    except PayloadError as exc:
        return turn.settle(leaf, error=ChildWorkflowError(child_id, "failed", error_record(exc)))
    event = Event(turn.replay.next_position, command.kind, leaf.id, command.target, child_id)
    # Detached, yet in the parent's trace (``engine.tracing``): the start span's
    # context is the child's, inserted by the parent's fenced batch.
    with tracing.start_span(command.name, source="detached-child", workflow_id=child_id) as span:
        try:
            start = child_row(turn, command, child_id, child_input, now)
        except InvalidArgumentError as exc:
            return turn.settle(
                leaf, error=ChildWorkflowError(child_id, "failed", error_record(exc))
            )
        new = start.run
        tracing.annotate(span, run_id=str(new.pk), parent_run_id=str(turn.run.pk))
        _absence, insert = live_insert(new)
        result = turn.commit([insert], [event], folds=start.folds, on_lost_race="return")
        tracing.annotate(span, start_created=result.committed)
    if not result.committed:
        return turn.settle(
            leaf,
            error=ChildWorkflowError(
                child_id, "conflict", {"message": f"could not start: {result.failed_condition}"}
            ),
        )
    after_child_commit(turn, start)
    return True


__all__ = ["start_detached"]
