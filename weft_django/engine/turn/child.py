"""The ``ctx.start_child`` step, and cancelling children a race abandoned.

Why the child's start is folded into the parent's batch: the child run's
insert (under "no live run of that id") and the child's claim acquisition go
out in the parent's fenced checkpoint, so a child exists exactly when the
parent's journal says it was started, and it is owned by this engine from
its first turn.
"""

from __future__ import annotations

import logging

from weft_django.engine import operations, tracing
from weft_django.engine.journal import RunInbox, load_inbox
from weft_django.engine.operations.start import live_insert
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.child_start import after_child_commit, child_row
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.turn.detached import start_detached
from weft_django.engine.workflow.commands import StartChild
from weft_django.engine.workflow.definitions import has_workflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import (
    ChildWorkflowError,
    InvalidArgumentError,
    PayloadError,
    UnknownWorkflowType,
)
from weft_django.models import LIVE_STATUSES, TERMINAL_STATUSES

logger = logging.getLogger("weft_django.engine")

FAILED_CHILD_STATUSES: frozenset[str] = TERMINAL_STATUSES - {"completed"}
"""A child that ended in one of these raises ``ChildWorkflowError`` in the parent."""


def start_child(
    turn: TurnState, leaf: Leaf, command: StartChild, inbox: RunInbox, now: int
) -> bool:
    """Start the child (first time), or settle with its end once it ended."""
    child_id = command.workflow_id or f"{turn.run.workflow_id}:{leaf.id}"
    if command.detached:  # resolved in the batch that starts it (``turn.detached``)
        return start_detached(turn, leaf, command, child_id, now)
    child = inbox.children.get(leaf.id)
    if child is None:
        return _start(turn, leaf, command, child_id, now)
    if child.status == "completed":
        return turn.settle(leaf, result=child.result)
    if child.status in FAILED_CHILD_STATUSES:
        return turn.settle(
            leaf, error=ChildWorkflowError(child.workflow_id, child.status, child.error)
        )
    return False


def _start(turn: TurnState, leaf: Leaf, command: StartChild, child_id: str, now: int) -> bool:
    if not has_workflow(command.name):
        return turn.settle(
            leaf,
            error=ChildWorkflowError(
                child_id, "failed", error_record(UnknownWorkflowType(command.name))
            ),
        )
    try:
        child_input = normalize(f"input of child {child_id!r}", command.input)
    except PayloadError as exc:
        return turn.settle(leaf, error=ChildWorkflowError(child_id, "failed", error_record(exc)))
    # The child continues the parent's trace: its start span (under this turn's)
    # is the child's stored context, inserted by the parent's fenced batch.
    with tracing.start_span(command.name, source="child", workflow_id=child_id) as span:
        try:
            start = child_row(
                turn,
                command,
                child_id,
                child_input,
                now,
                parent_id=turn.run.pk,
                parent_position=leaf.id,
            )
        except InvalidArgumentError as exc:
            return turn.settle(
                leaf, error=ChildWorkflowError(child_id, "failed", error_record(exc))
            )
        new = start.run
        tracing.annotate(span, run_id=str(new.pk), parent_run_id=str(turn.run.pk))
        _absence, insert = live_insert(new)
        result = turn.commit([insert], folds=start.folds, on_lost_race="return")
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


def cancel_abandoned_children(turn: TurnState, inbox: RunInbox | None = None) -> None:
    """Cancel the live children of commands a ``ctx.race`` or a failed
    ``ctx.all`` abandoned (``TurnState.abandoned``).

    Best effort, after the commit that parked or ended the parent: a child
    that cannot be cancelled now runs to its end, and nobody waits for it.
    The inbox is read only when an abandoned command started a child.
    """
    leaves = [leaf for leaf in turn.abandoned if isinstance(leaf.command, StartChild)]
    turn.abandoned.clear()
    if not leaves:
        return
    children = (inbox if inbox is not None else load_inbox(turn.run, turn.db)).children
    for leaf in leaves:
        child = children.get(leaf.id)
        # A child under its own cancel request (a parent cancelled with a
        # grace asked it in the same batch) is left to clean up within it.
        if (
            child is not None
            and child.status in LIVE_STATUSES
            and child.cancel_requested_at is None
        ):
            try:
                operations.cancel(
                    child.workflow_id, "cancelled with its branch", actor=turn.host.engine_id
                )
            except Exception:
                logger.warning(
                    "could not cancel abandoned child %s", child.workflow_id, exc_info=True
                )


__all__ = ["FAILED_CHILD_STATUSES", "cancel_abandoned_children", "start_child"]
