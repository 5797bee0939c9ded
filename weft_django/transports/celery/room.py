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

A pickup a pool process declines is re-offered (``reoffer_pickup``) after
250 ms, then twice the previous delay, while the delay is under half a
renew interval; the run stays pending meanwhile, so an engine with room
(any engine's polling pass) may take it first. Without the re-offer a
declined run waited for the next poll, a renew interval, even on an idle
node whose room freed a moment later.
"""

from __future__ import annotations

from weft_django.kernel.clock import wall_ms
from weft_django.models import WorkflowClaim, WorkflowRun
from weft_django.models.querysets import owes_turn_q
from weft_django.transports.celery.messages import send_pickup

#: The first re-offer of a declined pickup comes this long after the decline.
REOFFER_FIRST_MS = 250


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


def reoffer_delay_ms(attempt: int, renew_interval_ms: int) -> int | None:
    """The delay before re-offer number ``attempt + 1``; ``None`` once the
    polling pass (every renew interval) is as soon."""
    delay = REOFFER_FIRST_MS << min(max(attempt, 0), 30)
    return delay if delay < renew_interval_ms // 2 else None


def reoffer_pickup(
    run_id: str, workflow_id: str, *, attempt: int, due_ms: int | None, renew_interval_ms: int
) -> bool:
    """Send the declined pickup of ``run_id`` again after its delay; whether
    it was sent (``False`` when polling is as soon, or the send failed)."""
    delay = reoffer_delay_ms(attempt, renew_interval_ms)
    if delay is None:
        return False
    return send_pickup(
        run_id,
        eta_ms=wall_ms() + delay,
        workflow_id=workflow_id,
        attempt=attempt + 1,
        due_ms=due_ms,
    )


__all__ = ["REOFFER_FIRST_MS", "node_room", "reoffer_delay_ms", "reoffer_pickup"]
