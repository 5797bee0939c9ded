"""How many more runs a Celery node may claim: its room.

Why: a node claims a run at once and its turn then waits in the node's
queue for a pool process. A node that claims faster than its pool drives (a
burst, a loaded machine) holds runs other engines could drive and queues
their turns behind each other -- the chaos soak saw a two-process node hold
250 runs with its wakes a minute late while standalone engines idled, and
cancelled runs' cleanups miss their grace behind a queue of new pickups.
The room is twice the pool's processes less the turns the node already
owes (its claimed runs that need a turn now, ``querysets.owes_turn_q``).
The node's main process (pickups, takeovers) and its pool processes
(``weft.pickup`` messages from the shared queue) ask the same question.
"""

from __future__ import annotations

from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.querysets import owes_turn_q


def node_room(db: str, engine_id: str, concurrency: int, now_ms: int, most: int) -> int:
    """``min(most, 2 × concurrency − turns owed)``, never negative (one count)."""
    if most <= 0:
        return 0
    pool = max(1, int(concurrency or 1))
    held = WorkflowClaim.objects.using(db).filter(engine_id=engine_id)
    owed = (
        WorkflowRun.objects.using(db)
        .filter(owes_turn_q(now_ms), workflow_id__in=held.values("workflow_id"))
        .count()
    )
    return max(0, min(most, 2 * pool - owed))


__all__ = ["node_room"]
