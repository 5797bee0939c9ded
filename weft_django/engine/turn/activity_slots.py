"""Activity-level limits: ``@activity(queue="stripe")``.

The invariant is the queues' own (``ownership.slots``): at most
``concurrency`` slots of a queue live at once and at most ``rate``
admissions per window, across all engines -- an activity attempt's slot
counts with the runs' slots of the same queue. The attempt's slot is a row
with its command's journal ``position``, taken by a fenced commit under the
queue's lock before the attempt is submitted; it belongs to the claim
generation that ran the attempt, so a crash, a takeover or a stop frees it
with the generation (it is never carried: the attempt died with its
engine). The commit that journals the attempt's outcome -- its result, its
final error or its next retry -- marks it ``released`` in that same batch
(``turn.deferred``). When the queue has no room, the attempt is not started:
a retry timer of the same attempt number asks again shortly, so the run
waits parked, holding nothing.
"""

from __future__ import annotations

from django.db import transaction

from weft_django.engine.turn.commit import TurnState
from weft_django.models import QueueSlot, Timer
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.ops import Delete, Insert, Update, Write
from weft_django.ownership.slots import lock_queue, usage

#: How soon an attempt that found its queue full asks again (engine clock, ms).
SLOT_RETRY_MS = 500


def activity_slot(turn: TurnState, position: int, queue: str) -> bool:
    """Take a slot of ``queue`` for the attempt at ``position``; ``False``: no room."""
    host = turn.host
    spec = host.settings.queues.get(queue)
    if spec is None:
        return True  # a queue no longer declared limits nothing
    db = host.settings.database
    workflow_id = turn.run.workflow_id
    epoch = host.epoch_for(workflow_id)
    mine = QueueSlot.objects.using(db).filter(
        workflow_id=workflow_id, epoch=epoch, position=position, released=False
    )
    if mine.exists():
        return True
    with transaction.atomic(using=db):
        lock_queue(spec.name, db)
        # After the lock: a slot stamped with the time before a long wait for
        # it would leave the others' rate windows early.
        now = host.now_ms()
        total, _, recent = usage(spec, db, now)
        if spec.concurrency is not None and total >= spec.concurrency:
            return False
        if spec.rate is not None and recent >= spec.rate[0]:
            return False
        slot = QueueSlot(
            queue=spec.name,
            workflow_id=workflow_id,
            epoch=epoch,
            run_id=turn.run.pk,
            position=position,
            admitted_at=now,
        )
        return fenced_commit(host, workflow_id, [], [Insert(slot)]).committed


def release_activity_slot(turn: TurnState, position: int) -> Write:
    """The write that frees the attempt's slot, for the batch of its outcome."""
    return Update(
        QueueSlot,
        {
            "workflow_id": turn.run.workflow_id,
            "epoch": turn.host.epoch_for(turn.run.workflow_id),
            "position": position,
            "released": False,
        },
        {"released": True},
    )


def wait_for_activity_slot(turn: TurnState, position: int, number: int, now: int) -> bool:
    """No room: the same attempt again in ``SLOT_RETRY_MS`` (a retry timer); committed."""
    host = turn.host
    fire_at = now + SLOT_RETRY_MS
    timer = Timer(
        run_id=turn.run.pk,
        position=position,
        kind="retry",
        fire_at=fire_at,
        engine_id=host.engine_id,
        epoch=host.epoch_for(turn.run.workflow_id),
        payload={"attempt": number, "error": "waiting for a slot of the activity's queue"},
    )
    turn.commit(
        [
            Delete(Timer, {"run_id": turn.run.pk, "position": position, "kind": "retry"}),
            Insert(timer),
        ],
        run_values={"wake_at": fire_at},
    )
    return True


__all__ = ["SLOT_RETRY_MS", "activity_slot", "release_activity_slot", "wait_for_activity_slot"]
