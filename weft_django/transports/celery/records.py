"""The node's totals in ``EngineRecord.metrics``: several processes add, none overwrites.

Why: a node is one engine id but many processes. Pool processes add their
counters (wakes, claim attempts) into the record under its row lock after
each task, and the main process adds its own at each heartbeat, so the
record holds the node's totals; an overwrite would lose a sibling's counts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db import transaction

from weft_django.models import EngineRecord
from weft_django.ownership.metrics import CLAIM_ATTEMPT_OUTCOMES, ClaimMetricsSnapshot


def counters(snapshot: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
    """The additive part of a snapshot (``active_claims`` is a gauge, not a count)."""
    return replace(snapshot, active_claims=0)


def subtract(new: ClaimMetricsSnapshot, old: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
    """The counts ``new`` has over ``old`` (no gauge)."""
    return ClaimMetricsSnapshot(
        attempts={
            o: new.attempts.get(o, 0) - old.attempts.get(o, 0) for o in CLAIM_ATTEMPT_OUTCOMES
        },
        active_claims=0,
        renewal_failures=new.renewal_failures - old.renewal_failures,
        wakes={
            k: n - old.wakes.get(k, 0) for k, n in new.wakes.items() if n != old.wakes.get(k, 0)
        },
    )


def is_zero(delta: ClaimMetricsSnapshot) -> bool:
    return not any(delta.attempts.values()) and not delta.renewal_failures and not delta.wakes


def add_to_engine_record(
    using: str,
    engine_id: str,
    delta: ClaimMetricsSnapshot,
    *,
    active_claims: int | None = None,
    heartbeat_at: int | None = None,
) -> None:
    """Add ``delta`` to the record's counters under its row lock (several writers)."""
    with transaction.atomic(using=using):
        stored_json = (
            EngineRecord.objects.using(using)
            .select_for_update()
            .filter(pk=engine_id)
            .values_list("metrics", flat=True)
            .first()
        )
        stored = ClaimMetricsSnapshot.from_json(stored_json or {})
        merged = stored + counters(delta)
        if active_claims is not None:
            merged = replace(merged, active_claims=active_claims)
        values: dict[str, Any] = {"metrics": merged.to_json()}
        if heartbeat_at is not None:
            values["heartbeat_at"] = heartbeat_at
        EngineRecord.objects.using(using).filter(pk=engine_id).update(**values)


__all__ = ["add_to_engine_record", "counters", "is_zero", "subtract"]
