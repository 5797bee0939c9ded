"""A freed slot wakes a waiting engine at once, not at its next poll.

Invariant: whenever a commit ends a queued run's hold on its slot (its end,
a stop, a suspension), the oldest highest-priority ``pending`` run of that
queue is announced as a pickup wake (``start``) on that commit: over NOTIFY
it is routed to one listening engine (which runs a pickup pass, admission
included), over Celery it becomes a pickup message. Only a hint: the wake
writes nothing, admission still locks and counts, and a lost wake costs one
poll interval. Runs without a queue never reach this module.
"""

from __future__ import annotations

from weft_django.conf import get_settings
from weft_django.engine.wakes import Wake, announce
from weft_django.models import WorkflowRun


def announce_slot_freed(queue: str | None, db: str) -> None:
    """Wake an engine for the next waiting run of ``queue`` (if any)."""
    if queue is None or queue not in get_settings().queues:
        return
    waiting = (
        WorkflowRun.objects.using(db)
        .filter(status="pending", queue=queue)
        .order_by("-priority", "created_at")
        .values_list("pk", "workflow_id")
        .first()
    )
    if waiting is not None:
        announce(Wake("start", str(waiting[0]), db, waiting[1]))


__all__ = ["announce_slot_freed"]
