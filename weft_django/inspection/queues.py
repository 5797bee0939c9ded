"""Queues no live engine serves: waiting runs that nothing will admit.

Why: an engine may serve only some queues (``weft_worker --queues``); a
queue left out by every live engine keeps its pending runs waiting forever,
silently. ``weft_status`` and the deploy check (``weft.W036``) read it here,
from the live engines' records (``EngineRecord.queues``: ``None`` serves
every queue) and one grouped count of pending runs per queue.
"""

from __future__ import annotations

from django.db.models import Count

from weft_django.conf import get_settings
from weft_django.models import EngineRecord, WorkflowRun
from weft_django.models.querysets import alive_engines_q, alive_window_ms


def unserved_queues(now_ms: int, using: str | None = None) -> dict[str, int]:
    """Declared queue → pending runs, for each queue with pending runs that
    no live engine serves (empty when every such queue is served)."""
    settings = get_settings()
    db = using or settings.database
    if not settings.queues:
        return {}
    alive = EngineRecord.objects.using(db).filter(
        alive_engines_q(now_ms, alive_window_ms(settings))
    )
    served: set[str] = set()
    for queues in alive.values_list("queues", flat=True):
        if queues is None:
            return {}  # an engine serving every queue
        served.update(queues)
    waiting = (
        WorkflowRun.objects.using(db)
        .filter(status="pending", queue__in=list(settings.queues))
        .exclude(queue__in=list(served))
        .values("queue")
        .annotate(n=Count("workflow_id"))
        .order_by()
    )
    return {str(row["queue"]): row["n"] for row in waiting}


__all__ = ["unserved_queues"]
