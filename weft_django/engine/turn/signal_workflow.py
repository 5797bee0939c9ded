"""The ``ctx.signal_workflow`` step: a signal from one workflow to another.

Why the signal's insert rides in the settling batch: the ``SignalMessage``
row for the target, the target's ``wake_seq`` bump and the journal entry
that settles the command are one fenced checkpoint of the sender. A replay
or a takeover finds the command settled in the journal and never reaches
this step again, so a signal is sent exactly once; a deposed sender's batch
is refused whole, so it sends nothing. The target is woken like by
``client.signal`` (a ``signal`` wake after the commit).
"""

from __future__ import annotations

from django.db.models import F

from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.wakes import announce_event
from weft_django.engine.workflow.commands import SignalWorkflow
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import InvalidTransitionError, PayloadError, WorkflowNotFound
from weft_django.models import LIVE_STATUSES, TERMINAL_STATUSES, SignalMessage, WorkflowRun
from weft_django.ownership.ops import Insert, RunCondition, Update


def signal_workflow(
    turn: TurnState, leaf: Leaf, command: SignalWorkflow, inbox: RunInbox, now: int
) -> bool:
    """Send the signal and settle the command (``None``), or settle it with
    why it could not be sent (no such workflow, already ended, bad payload)."""
    del inbox, now
    target = WorkflowRun.objects.using(turn.db).latest_for(command.workflow_id)
    if target is None:
        return turn.settle(leaf, error=WorkflowNotFound(command.workflow_id))
    if target.status in TERMINAL_STATUSES:
        return turn.settle(
            leaf, error=InvalidTransitionError(command.workflow_id, target.status, "signal")
        )
    try:
        payload = normalize(f"payload of signal {command.name!r}", command.payload)
    except PayloadError as exc:
        return turn.settle(leaf, error=exc)
    turn.settle(
        leaf,
        result=None,
        writes=[
            Insert(SignalMessage(run_id=target.pk, name=command.name, payload=payload)),
            Update(WorkflowRun, {"pk": target.pk}, {"wake_seq": F("wake_seq") + 1}),
        ],
        # The target still live when the batch commits (else the turn goes
        # round and settles the command with the error above).
        conditions=[RunCondition(target.pk, statuses=frozenset(LIVE_STATUSES))],
        hold=False,  # committed now: the wake below must follow a durable signal
    )
    announce_event("signal", target.pk, turn.db, workflow_id=target.workflow_id)
    return True


__all__ = ["signal_workflow"]
