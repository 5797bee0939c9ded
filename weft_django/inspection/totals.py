"""Folding old ``EngineRecord`` rows into ``MetricTotals``.

Why: one record accumulates per engine boot, and every scrape sums them all,
so scrapes slowed as boots piled up; deleting old records outright would
make every cluster counter drop, which a scraper reads as a counter reset.
The invariant protected here: **the cluster's counters (the ``MetricTotals``
row plus every remaining record) never decrease across a prune**. A record
is deleted only in the transaction that adds its counters to the totals
row, and a reader (``read_cluster_counters``) takes the totals row FOR SHARE
before it sums the records, so it sees either the state before a prune or
the state after, never the records gone but their counters not yet folded
(or both).

Only records whose last heartbeat is older than the retention are folded:
an engine that silent is dead (the retention is days; a claim TTL is
seconds), so no heartbeat or ``add_counters`` can race the fold of its row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from django.db import transaction

from weft_django.db.portable import read_totals_for_share
from weft_django.models import EngineRecord, MetricTotals
from weft_django.ownership.metrics import ClaimMetricsSnapshot

__all__ = [
    "PRUNE_BATCH",
    "TOTALS_PK",
    "add_to_totals",
    "prune_engine_records",
    "read_cluster_counters",
]

TOTALS_PK = 1
#: Records folded per transaction: bounds the row locks and the JSON summed at once.
PRUNE_BATCH = 500


def _lock_totals_for_read(using: str) -> ClaimMetricsSnapshot:
    """The folded totals, with the row held FOR SHARE on PostgreSQL until commit."""
    raw = read_totals_for_share(using, TOTALS_PK)
    if raw is None:
        return ClaimMetricsSnapshot()
    return ClaimMetricsSnapshot.from_json(raw)


def read_cluster_counters(
    using: str, is_alive: Callable[[str, int, int | None], bool]
) -> ClaimMetricsSnapshot:
    """The folded totals plus every record's counters, read consistently.

    ``is_alive(engine_id, heartbeat_at, stopped_at)`` decides whose
    active-claims gauge counts (a dead engine's last value is stale). Two
    queries whatever the number of records: the totals row and one pass over
    the records.
    """
    with transaction.atomic(using=using):
        total = _lock_totals_for_read(using)
        total = replace(total, active_claims=0)
        rows = EngineRecord.objects.using(using).values_list(
            "engine_id", "heartbeat_at", "stopped_at", "metrics"
        )
        for engine_id, heartbeat_at, stopped_at, raw in rows.iterator():
            snap = ClaimMetricsSnapshot.from_json(raw)
            if not is_alive(engine_id, heartbeat_at, stopped_at):
                snap = replace(snap, active_claims=0)
            total = total + snap
    return total


def prune_engine_records(
    using: str,
    *,
    now_ms: int,
    retention_ms: int,
    batch: int = PRUNE_BATCH,
    max_batches: int | None = None,
) -> int:
    """Fold and delete every record silent for longer than ``retention_ms``
    (at most ``max_batches`` batches of ``batch``, when given).

    Returns how many records were folded. Each batch is one transaction: the
    totals row locked FOR UPDATE, the batch's counters added to it, the batch
    deleted. Active-claims gauges are not folded (a dead engine holds none).
    """
    if retention_ms <= 0:
        raise ValueError(f"retention_ms must be positive, got {retention_ms!r}")
    cutoff = now_ms - retention_ms
    folded = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        with transaction.atomic(using=using):
            totals, _ = (
                MetricTotals.objects.using(using).select_for_update().get_or_create(pk=TOTALS_PK)
            )
            rows = list(
                EngineRecord.objects.using(using)
                .select_for_update()
                .filter(heartbeat_at__lt=cutoff)
                .order_by("heartbeat_at", "engine_id")
                .values_list("engine_id", "metrics")[:batch]
            )
            if not rows:
                return folded
            total = replace(ClaimMetricsSnapshot.from_json(totals.metrics), active_claims=0)
            for _engine_id, raw in rows:
                total = total + replace(ClaimMetricsSnapshot.from_json(raw), active_claims=0)
            ids = [engine_id for engine_id, _ in rows]
            EngineRecord.objects.using(using).filter(pk__in=ids).delete()
            totals.metrics = total.to_json()
            totals.records_folded += len(ids)
            totals.updated_at = now_ms
            totals.save(using=using)
            folded += len(ids)
        if len(rows) < batch:
            return folded
    return folded


def add_to_totals(using: str, delta: ClaimMetricsSnapshot, *, now_ms: int) -> None:
    """Add counters recorded outside any engine (an operator's stop in a web
    process) to the totals row, under its row lock. The gauge is not added."""
    if delta.is_zero():
        return
    with transaction.atomic(using=using):
        totals, _ = (
            MetricTotals.objects.using(using).select_for_update().get_or_create(pk=TOTALS_PK)
        )
        total = replace(ClaimMetricsSnapshot.from_json(totals.metrics), active_claims=0)
        totals.metrics = (total + replace(delta, active_claims=0)).to_json()
        totals.updated_at = now_ms
        totals.save(using=using)
