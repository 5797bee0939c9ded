"""The cluster's claim counters as the API's ``metrics/`` serves them (SPEC §5).

The body is shaped for JSON clients (counts of engines and claims, the oldest due timer's lag
in ms), where ``inspection.status.ClusterStatus`` is shaped for the probe and the collector.
Both count with the same rules (``models.querysets``: alive engines, held and expired claims;
``inspection.status``: due timers, runs by status), so the two never disagree on a number.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from weft_django.conf import get_settings
from weft_django.inspection.totals import read_cluster_counters
from weft_django.kernel.clock import now_ms as clock_now_ms
from weft_django.models import EngineRecord, WorkflowClaim
from weft_django.models.querysets import (
    alive_engines_q,
    alive_window_ms,
    expired_claims_q,
    held_claims_q,
)
from weft_django.ownership.metrics import ClaimMetricsSnapshot

from .rules import takeover_grace_ms
from .status import due_timers, runs_by_status


def engine_counters(raw: Any) -> dict[str, Any]:
    """One ``EngineRecord.metrics`` value, decoded fail-closed, as JSON."""
    return ClaimMetricsSnapshot.from_json(raw).to_json()


def cluster_counters(now_ms: int | None = None, *, using: str | None = None) -> dict[str, Any]:
    """Every engine's counters summed, with counts of engines, claims, runs and due timers.

    ``active_claims`` sums the gauge of engines that have not stopped (a
    silent engine's last value included): what the field has always said.
    ``now_ms`` defaults to ``clock.now_ms()``, the clock client-side times use.
    """
    settings = get_settings()
    db = using or settings.database
    now = clock_now_ms() if now_ms is None else now_ms
    window = alive_window_ms(settings)
    n = EngineRecord.objects.using(db).aggregate(
        total=Count("pk"),
        alive=Count("pk", filter=alive_engines_q(now, window)),
        stopped=Count("pk", filter=Q(stopped_at__isnull=False)),
    )
    engines, alive, stopped = n["total"], n["alive"], n["stopped"]
    # Folded totals of pruned records plus every record; the active-claims
    # gauge over engines not stopped (a silent engine's last value included).
    total = read_cluster_counters(db, lambda _id, _hb, stopped_at: stopped_at is None)
    body = total.to_json()
    counts = WorkflowClaim.objects.using(db).aggregate(
        total=Count("pk"),
        held=Count("pk", filter=held_claims_q()),
        expired=Count("pk", filter=expired_claims_q(now, takeover_grace_ms(settings))),
    )
    n_due, oldest = due_timers(db, now)
    body.update(
        engines={"total": engines, "alive": alive, "stopped": stopped},
        claims=counts,
        runs_by_status=runs_by_status(db),
        due_timers=n_due,
        oldest_due_timer_lag_ms=None if oldest is None else now - oldest,
    )
    return body


__all__ = ["cluster_counters", "engine_counters"]
