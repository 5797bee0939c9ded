"""``EngineRecord`` rows: an engine's boot, heartbeat and stop.

Why here: the record is what every inspection surface (admin, ``weft_status``,
``/metrics``) reads to tell a live engine from a dead one; its writes are not
workflow state, so they are not fenced, but they have one shape each.
"""

from __future__ import annotations

import os
import socket

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
) -> None:
    """The row of one boot (``started_at`` = ``heartbeat_at`` = ``now_ms``)."""
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


__all__ = ["create_record", "mark_stopped", "write_heartbeat"]
