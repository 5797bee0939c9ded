"""``EngineRecord`` rows: an engine's boot, heartbeat and stop.

The record is what every inspection surface (admin, ``weft_status``, ``/metrics``) reads to
tell a live engine from a dead one; its writes are not workflow state, so they are not
fenced, but each has one shape, written only here. Several processes may write one record
(a Celery node and its pool processes share an engine id): they *add* their counters under
the row lock (``add_counters``) instead of overwriting them.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from typing import Any

from django.db import transaction

from weft_django.models import EngineRecord
from weft_django.ownership.metrics import ClaimMetricsSnapshot


def create_record(
    using: str,
    engine_id: str,
    *,
    node_name: str,
    pool: str,
    mode: str,
    transport: str,
    now_ms: int,
    presence_key: int | None = None,
    queues: list[str] | None = None,
) -> None:
    """The row of one boot (``started_at`` = ``heartbeat_at`` = ``now_ms``);
    ``presence_key``: the session lock this engine already holds, if any."""
    EngineRecord.objects.using(using).create(
        engine_id=engine_id,
        node_name=node_name,
        host=socket.gethostname()[:200],
        pid=os.getpid(),
        mode=mode,
        pool=pool,
        transport=transport,
        started_at=now_ms,
        heartbeat_at=now_ms,
        presence_key=presence_key,
        queues=queues,
    )


def write_heartbeat(
    using: str, engine_id: str, *, now_ms: int, metrics: ClaimMetricsSnapshot
) -> None:
    """Overwrite the heartbeat time and the metrics snapshot."""
    EngineRecord.objects.using(using).filter(pk=engine_id).update(
        heartbeat_at=now_ms, metrics=metrics.to_json()
    )


def mark_stopped(using: str, engine_id: str, *, now_ms: int) -> None:
    EngineRecord.objects.using(using).filter(pk=engine_id).update(stopped_at=now_ms)


def add_counters(
    using: str,
    engine_id: str,
    delta: ClaimMetricsSnapshot,
    *,
    active_claims: int | None = None,
    heartbeat_at: int | None = None,
) -> None:
    """Add ``delta``'s counters to the record's under its row lock (several writers);
    ``active_claims`` and ``heartbeat_at``, when given, replace the stored ones."""
    with transaction.atomic(using=using):
        stored_json = (
            EngineRecord.objects.using(using)
            .select_for_update()
            .filter(pk=engine_id)
            .values_list("metrics", flat=True)
            .first()
        )
        stored = ClaimMetricsSnapshot.from_json(stored_json or {})
        merged = stored + replace(delta, active_claims=0)
        if active_claims is not None:
            merged = replace(merged, active_claims=active_claims)
        values: dict[str, Any] = {"metrics": merged.to_json()}
        if heartbeat_at is not None:
            values["heartbeat_at"] = heartbeat_at
        EngineRecord.objects.using(using).filter(pk=engine_id).update(**values)


__all__ = ["add_counters", "create_record", "mark_stopped", "write_heartbeat"]
