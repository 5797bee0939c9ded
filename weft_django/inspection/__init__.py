"""The read model: a picture of the cluster, read from the database (SPEC §4.8, §5).

Why one package: the admin, the API, ``weft_status``, ``weft_reset_mode`` and
the Prometheus collector (``weft_django.contrib.prometheus``) must agree on
what "alive", "expired", "claims held", "due" and "timer lag" mean, or an
operator would see one number on a dashboard and another in a liveness
probe. The filters live on the models' querysets (``weft_django.models.querysets``);
this package applies them: ``rules`` (one loaded row), ``status`` (the
cluster snapshot), ``counters`` (the API's metrics body), ``format`` (text).

Times: claim and heartbeat timestamps are integer milliseconds of the
*engine* clock, which is the wall clock in production. The cluster snapshot
judges them against this process's wall clock, the API's counters against
``clock.now_ms()`` (the clock client-side times use), unless ``now_ms`` is
passed (tests with injected clocks pass their own). Nothing runs at import time or from
``AppConfig.ready()``: every function queries when it is called.
"""

from __future__ import annotations

from .counters import cluster_counters, engine_counters
from .format import format_age, format_instant, format_ms, iso, local_clock, relative
from .rules import (
    ALIVE_HEARTBEAT_MULTIPLIER,
    CLAIM_STATES,
    RESET_MODE_TTL_MULTIPLIER,
    ClaimState,
    alive_engines_q,
    alive_window_ms,
    claim_state,
    engine_is_alive,
    expired_claims_q,
    reset_mode_window_ms,
    takeover_grace_ms,
)
from .status import ClusterStatus, EngineStatus, cluster_status, sum_engine_metrics

__all__ = [
    "ALIVE_HEARTBEAT_MULTIPLIER",
    "CLAIM_STATES",
    "RESET_MODE_TTL_MULTIPLIER",
    "ClaimState",
    "ClusterStatus",
    "EngineStatus",
    "alive_engines_q",
    "alive_window_ms",
    "claim_state",
    "cluster_counters",
    "cluster_status",
    "engine_counters",
    "engine_is_alive",
    "expired_claims_q",
    "format_age",
    "format_instant",
    "format_ms",
    "iso",
    "local_clock",
    "relative",
    "reset_mode_window_ms",
    "sum_engine_metrics",
    "takeover_grace_ms",
]
