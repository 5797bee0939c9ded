"""A read-only picture of the cluster, read from the database (SPEC §4.8, §5).

Why one module: the admin, ``weft_status``, ``weft_reset_mode`` and the
Prometheus collector (``weft_django.metrics_export``) must agree on what
"alive", "expired", "claims held" and "timer lag" mean, or an operator
would see one number on a dashboard and another in a liveness probe. None
of this needs ``prometheus_client``; the collector only turns it into
metric families.

Times: claim and heartbeat timestamps are integer milliseconds of the
*engine* clock, which is the wall clock in production. Everything here
judges them against the wall clock of this process unless ``now_ms`` is
passed (tests with injected clocks pass their own).

Nothing here runs at import time or from ``AppConfig.ready()``: every
function queries when it is called (at scrape, at command or page time).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db.models import Count, Min, Q

from weft_django.conf import WeftSettings, get_settings
from weft_django.models import (
    RUN_STATUSES,
    EngineRecord,
    OwnershipModeMarker,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.codec import decode_holder_row
from weft_django.ownership.metrics import ClaimMetricsSnapshot

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

#: An engine is alive while its last heartbeat is younger than this many
#: ``CLAIM_RENEW_INTERVAL`` s (it heartbeats once per interval) and it has
#: not marked itself stopped.
ALIVE_HEARTBEAT_MULTIPLIER = 3
#: ``weft_reset_mode`` is more cautious: an engine that heartbeated within
#: this many ``CLAIM_TTL`` s may still be running, so the marker stays.
RESET_MODE_TTL_MULTIPLIER = 3

#: Statuses whose due timers an engine should already have fired.
_TIMER_STATUSES = ("running", "parked")

ClaimState = Literal["live", "expired", "released"]


def wall_ms() -> int:
    """This process's wall clock in integer ms (the engines' default clock)."""
    return time.time_ns() // 1_000_000


def alive_window_ms(settings: WeftSettings | None = None) -> int:
    """How recent a heartbeat must be for its engine to count as alive."""
    settings = settings or get_settings()
    return ALIVE_HEARTBEAT_MULTIPLIER * settings.claim_renew_interval_ms


def reset_mode_window_ms(settings: WeftSettings | None = None) -> int:
    """How recent a heartbeat must be for ``weft_reset_mode`` to refuse."""
    settings = settings or get_settings()
    return RESET_MODE_TTL_MULTIPLIER * settings.claim_ttl_ms


def alive_engines_q(now_ms: int, window_ms: int) -> Q:
    """``EngineRecord`` filter: not stopped and heartbeat within ``window_ms``."""
    return Q(stopped_at__isnull=True, heartbeat_at__gte=now_ms - window_ms)


def engine_is_alive(record: EngineRecord, now_ms: int, window_ms: int) -> bool:
    """The Python twin of ``alive_engines_q`` for one loaded row."""
    return record.stopped_at is None and record.heartbeat_at >= now_ms - window_ms


def _grace_ms(settings: WeftSettings) -> int:
    return WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms


def claim_state(
    claim: WorkflowClaim, now_ms: int, settings: WeftSettings | None = None
) -> ClaimState:
    """``released`` (no holder), ``expired`` (another engine may take it over) or ``live``.

    Expired is the takeover judgement of SPEC §4.4 (``expires_at + GRACE ×
    renew < now``), not the bare ``expires_at``: a holder inside its grace
    is still the owner. A corrupt (half-null, undecodable) holder counts as
    expired, because engines take it over at once.
    """
    settings = settings or get_settings()
    if claim.engine_id is None and claim.expires_at is None and claim.claimed_at is None:
        return "released"
    holder = decode_holder_row(claim.engine_id, claim.epoch, claim.expires_at, claim.claimed_at)
    if holder is None or holder.expires_at + _grace_ms(settings) < now_ms:
        return "expired"
    return "live"


def expired_claims_q(now_ms: int, settings: WeftSettings | None = None) -> Q:
    """The database twin of ``claim_state(...) == "expired"`` (for counts and filters).

    A holder whose columns are present but out of the codec's ranges is the
    one case where the two may differ; such rows are corrupt either way.
    """
    settings = settings or get_settings()
    present = Q(engine_id__isnull=False) | Q(expires_at__isnull=False) | Q(claimed_at__isnull=False)
    corrupt = (
        Q(engine_id__isnull=True)
        | Q(engine_id="")
        | Q(expires_at__isnull=True)
        | Q(claimed_at__isnull=True)
        | Q(epoch__lt=1)
    )
    return present & (corrupt | Q(expires_at__lt=now_ms - _grace_ms(settings)))


def format_ms(ms: int | None) -> str:
    """An engine-clock ms timestamp as UTC text with ms precision (``-`` for none)."""
    if ms is None:
        return "-"
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def format_age(seconds: float | None) -> str:
    """A short human duration (``"4.2 s"``, ``"3 min"``, ``"2.5 h"``, ``"3 d"``)."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 60:
        text = f"{s:.1f} s"
    elif s < 3600:
        text = f"{s / 60:.0f} min"
    elif s < 86400:
        text = f"{s / 3600:.1f} h"
    else:
        text = f"{s / 86400:.1f} d"
    return sign + text


def sum_engine_metrics(
    rows: Iterable[tuple[Any, bool]],
) -> ClaimMetricsSnapshot:
    """Sum ``(EngineRecord.metrics, alive)`` pairs into the cluster's totals.

    Counters add up over live *and* past engines (a counter never goes down
    because an engine stopped). The active-claims gauge adds up over live
    engines only: a dead engine's last value is a stale gauge, and its claims
    show up as expired instead.
    """
    total = ClaimMetricsSnapshot()
    for raw, alive in rows:
        snap = ClaimMetricsSnapshot.from_json(raw)
        if not alive:
            snap = ClaimMetricsSnapshot(
                attempts=snap.attempts,
                active_claims=0,
                renewal_failures=snap.renewal_failures,
                wakes=snap.wakes,
            )
        total = total + snap
    return total


@dataclass(frozen=True)
class EngineStatus:
    """One engine boot as the status command and the admin show it."""

    engine_id: str
    node_name: str
    host: str
    pid: int | None
    mode: str
    transport: str
    alive: bool
    started_at: int
    heartbeat_at: int
    stopped_at: int | None
    heartbeat_age_s: float
    claims_held: int
    counters: ClaimMetricsSnapshot

    def to_json(self) -> dict[str, Any]:
        return {
            "engine_id": self.engine_id,
            "node_name": self.node_name,
            "host": self.host,
            "pid": self.pid,
            "mode": self.mode,
            "transport": self.transport,
            "alive": self.alive,
            "started_at": self.started_at,
            "heartbeat_at": self.heartbeat_at,
            "stopped_at": self.stopped_at,
            "heartbeat_age_s": round(self.heartbeat_age_s, 3),
            "claims_held": self.claims_held,
            "counters": self.counters.to_json(),
        }


@dataclass(frozen=True)
class ClusterStatus:
    """Everything ``weft_status`` prints and the collector exports, read at one moment."""

    now_ms: int
    ownership: str
    marker: dict[str, Any] | None
    engines: list[EngineStatus]
    engines_total: int
    claims_per_engine: dict[str, int]
    expired_claims: int
    runs_by_status: dict[str, int]
    due_timers: int
    due_timer_lag_s: float
    totals: ClaimMetricsSnapshot = field(default_factory=ClaimMetricsSnapshot)

    @property
    def alive_engines(self) -> list[EngineStatus]:
        return [engine for engine in self.engines if engine.alive]

    @property
    def live_claims_per_engine(self) -> dict[str, int]:
        """Claims per engine, restricted to live engines (the collector's label set)."""
        alive = {engine.engine_id for engine in self.alive_engines}
        return {k: v for k, v in self.claims_per_engine.items() if k in alive}

    def problems(self, max_lag_s: float) -> list[str]:
        """Why a liveness probe should fail (empty when healthy)."""
        found: list[str] = []
        if not self.alive_engines:
            found.append("no engine is alive")
        if self.due_timer_lag_s > max_lag_s:
            found.append(f"due timers lag {self.due_timer_lag_s:.1f} s (more than {max_lag_s:g} s)")
        return found

    def to_json(self, max_lag_s: float | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "now_ms": self.now_ms,
            "ownership": self.ownership,
            "marker": self.marker,
            "engines_alive": len(self.alive_engines),
            "engines_total": self.engines_total,
            "engines": [engine.to_json() for engine in self.engines],
            "claims_per_engine": dict(self.claims_per_engine),
            "claims_held": sum(self.claims_per_engine.values()),
            "expired_claims": self.expired_claims,
            "runs_by_status": dict(self.runs_by_status),
            "due_timers": self.due_timers,
            "due_timer_lag_s": round(self.due_timer_lag_s, 3),
            "metrics": self.totals.to_json(),
        }
        if max_lag_s is not None:
            problems = self.problems(max_lag_s)
            data["check"] = {"ok": not problems, "max_lag_s": max_lag_s, "problems": problems}
        return data


def cluster_status(
    now_ms: int | None = None,
    *,
    using: str | None = None,
    recent_engines: int = 20,
) -> ClusterStatus:
    """Read the cluster's state: a handful of aggregate queries, whatever its size.

    ``engines`` lists every alive engine plus the ``recent_engines`` most
    recently started others (one row per boot accumulates); the metric
    totals still cover every row.
    """
    settings = get_settings()
    db = using or settings.database
    now = wall_ms() if now_ms is None else now_ms
    window = alive_window_ms(settings)
    alive_q = alive_engines_q(now, window)

    claims_per_engine = {
        engine_id: n
        for engine_id, n in WorkflowClaim.objects.using(db)
        .filter(engine_id__isnull=False)
        .exclude(engine_id="")
        .values_list("engine_id")
        .annotate(n=Count("pk"))
        .order_by("engine_id")
    }

    records = EngineRecord.objects.using(db)
    shown = list(records.filter(alive_q).order_by("-started_at")) + list(
        records.exclude(alive_q).order_by("-started_at")[:recent_engines]
    )
    engines = [
        EngineStatus(
            engine_id=r.engine_id,
            node_name=r.node_name,
            host=r.host,
            pid=r.pid,
            mode=r.mode,
            transport=r.transport,
            alive=engine_is_alive(r, now, window),
            started_at=r.started_at,
            heartbeat_at=r.heartbeat_at,
            stopped_at=r.stopped_at,
            heartbeat_age_s=(now - r.heartbeat_at) / 1000,
            claims_held=claims_per_engine.get(r.engine_id, 0),
            counters=ClaimMetricsSnapshot.from_json(r.metrics),
        )
        for r in shown
    ]
    alive_ids = set(records.filter(alive_q).values_list("engine_id", flat=True))
    totals = sum_engine_metrics(
        (metrics, engine_id in alive_ids)
        for engine_id, metrics in records.values_list("engine_id", "metrics").iterator()
    )

    runs_by_status: dict[str, int] = dict.fromkeys(RUN_STATUSES, 0)
    for status, n in (
        WorkflowRun.objects.using(db).values_list("status").annotate(n=Count("pk")).order_by()
    ):
        if status in runs_by_status:
            runs_by_status[status] = n

    due = Timer.objects.using(db).filter(fire_at__lte=now, run__status__in=_TIMER_STATUSES)
    agg = due.aggregate(oldest=Min("fire_at"), n=Count("pk"))
    oldest = agg["oldest"]
    lag_s = max(0, now - oldest) / 1000 if oldest is not None else 0.0

    marker_row = OwnershipModeMarker.objects.using(db).first()
    marker = (
        {"mode": marker_row.mode, "established_at": marker_row.established_at}
        if marker_row is not None
        else None
    )

    return ClusterStatus(
        now_ms=now,
        ownership=settings.ownership,
        marker=marker,
        engines=engines,
        engines_total=records.count(),
        claims_per_engine=claims_per_engine,
        expired_claims=WorkflowClaim.objects.using(db)
        .filter(expired_claims_q(now, settings))
        .count(),
        runs_by_status=runs_by_status,
        due_timers=int(agg["n"] or 0),
        due_timer_lag_s=float(lag_s),
        totals=totals,
    )
