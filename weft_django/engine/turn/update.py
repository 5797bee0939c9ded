"""Delivering an accepted update to its handler, in the owner's turn.

Why the delivery, the handler's first run and (for a plain function) its
answer share one batch: the ``update`` journal entry, the consumption of the
``UpdateRequest`` row (under the condition that it is still unconsumed) and
the ``update-done`` answer are written together by the turn's fenced
checkpoint, so an update is applied exactly once even when two turns race or
the owner dies: either none of it is durable (the next owner delivers it) or
all of it is (a replay finds the answer). A generator handler's answer is
recorded by the checkpoint that settles its last command, like any recorded
value. Once a checkpoint with an answer committed, ``announce_answers`` wakes
the callers waiting for it (``engine.update_answers``).
"""

from __future__ import annotations

from weft_django.codecs.stored import readable
from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.events import Event
from weft_django.engine.replay.updates import update_payload
from weft_django.engine.turn.commit import TurnState
from weft_django.models import UpdateRequest
from weft_django.ownership.ops import RowCondition, Update


def deliver_update(turn: TurnState, inbox: RunInbox) -> bool:
    """Deliver the oldest unconsumed update of the run (only read when the
    body registered update handlers: a run without any pays no query)."""
    replay = turn.replay
    assert replay is not None
    if not replay.ctx.update_handlers:
        return False
    del inbox  # updates are read here: the inbox holds no part for them
    request = (
        UpdateRequest.objects.using(turn.db)
        .filter(run_id=turn.run.pk, consumed_at_position__isnull=True)
        .order_by("id")
        .first()
    )
    if request is None:
        return False
    # Arguments that do not decode suspend the run (``turn.failures``): never
    # delivered as ``[]`` and never consumed, so nothing is lost.
    stored_args = readable(
        request.args, turn.run.pk, f"update {request.name!r} ({request.update_id}) (args)"
    )
    args = stored_args if isinstance(stored_args, list) else []
    event = Event(
        replay.next_position,
        "update",
        None,
        request.name,
        update_payload(request.update_id, args),
    )
    replay.apply(event)
    replay.advance()  # runs the handler: a plain function answers in this batch
    turn.commit(
        [Update(UpdateRequest, {"pk": request.pk}, {"consumed_at_position": event.position})],
        conditions=[RowCondition(UpdateRequest, request.pk, {"consumed_at_position": None})],
        already_fed=[event],
    )
    return True


__all__ = ["deliver_update"]
