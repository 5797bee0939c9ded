"""Moved to ``weft_django.inspection`` (the read model); kept for imports."""

from __future__ import annotations

from weft_django.inspection import (
    ALIVE_HEARTBEAT_MULTIPLIER,
    RESET_MODE_TTL_MULTIPLIER,
    ClaimState,
    ClusterStatus,
    EngineStatus,
    alive_engines_q,
    alive_window_ms,
    claim_state,
    cluster_status,
    engine_is_alive,
    expired_claims_q,
    format_age,
    format_ms,
    reset_mode_window_ms,
    sum_engine_metrics,
    wall_ms,
)

__all__ = [
    "ALIVE_HEARTBEAT_MULTIPLIER",
    "RESET_MODE_TTL_MULTIPLIER",
    "ClaimState",
    "ClusterStatus",
    "EngineStatus",
    "alive_engines_q",
    "alive_window_ms",
    "claim_state",
    "cluster_status",
    "engine_is_alive",
    "expired_claims_q",
    "format_age",
    "format_ms",
    "reset_mode_window_ms",
    "sum_engine_metrics",
    "wall_ms",
]
