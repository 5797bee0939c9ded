"""The cluster at one moment: what ``weft_status`` prints and ``/metrics`` exports.

Why a snapshot object: the probe (``weft_status --check``), the Prometheus
collector and the API's ``metrics/`` must count the same engines, claims,
runs and due timers; they all read them here, through the querysets' rules,
in a handful of aggregate queries whatever the cluster's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from django.db.models import Count, Min, Model

from weft_django.conf import get_settings
from weft_django.db.counting import BoundedCount, bounded_counts, common_value_estimates
from weft_django.db.distinct import distinct_values
from weft_django.inspection.totals import read_cluster_counters
from weft_django.kernel.clock import wall_ms
from weft_django.models import (
    RUN_STATUSES,
    EngineRecord,
    OwnershipModeMarker,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.models.querysets import alive_engines_q, alive_window_ms
from weft_django.ownership.metrics import ClaimMetricsSnapshot

from .queue_figures import QueueFigures, queue_figures
from .queues import unserved_queues
from .rules import engine_is_alive, takeover_grace_ms

#: Claims of one engine counted exactly before the estimate takes over.
CLAIMS_COUNT_CAP = 1_000
#: Engine ids holding claims read at most (each boot is a new id; old ones hold none).
ENGINE_IDS_LIMIT = 1_000


def sum_engine_metrics(rows: Iterable[tuple[Any, bool]]) -> ClaimMetricsSnapshot:
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
            snap = replace(snap, active_claims=0)  # every counter kept, the gauge dropped
        total = total + snap
    return total


def runs_by_status(using: str) -> dict[str, int]:
    """Run counts for every status (0 for a status with no run), in ``RUN_STATUSES`` order:
    exact up to ``COUNT_CAP`` runs of a status, estimated above (``runs_by_status_counted``)."""
    return {status: c.value for status, c in runs_by_status_counted(using).items()}


def runs_by_status_counted(using: str) -> dict[str, BoundedCount]:
    """``runs_by_status`` with each count's exactness (``db.counting``): a GROUP BY
    over every run read the whole history at each scrape."""
    runs = WorkflowRun.objects.using(using)
    return bounded_counts(
        {status: runs.filter(status=status) for status in RUN_STATUSES},
        index_order="wake_at",
        estimates=_LazyEstimates(WorkflowRun, "status", using),
    )


class _LazyEstimates(Mapping[str, int]):
    """``common_value_estimates``, read on the first lookup only: a history
    under every cap never asks for them."""

    def __init__(self, model: type[Model], column: str, using: str) -> None:
        self._args = (model, column, using)
        self._read: dict[str, int] | None = None

    def _values(self) -> dict[str, int]:
        if self._read is None:
            self._read = common_value_estimates(*self._args)
        return self._read

    def __getitem__(self, key: str) -> int:
        return self._values()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())


def claims_per_engine_counted(using: str) -> dict[str, BoundedCount]:
    """Held claims by engine id, each exact up to ``CLAIMS_COUNT_CAP``: the engine
    ids read in index order (``db.distinct``), then one capped count each."""
    engine_ids = [
        e
        for e in distinct_values(WorkflowClaim, "engine_id", using, limit=ENGINE_IDS_LIMIT)
        if e  # NULL and "" name no holder (``held_claims_q``)
    ]
    held = WorkflowClaim.objects.using(using).held()
    counted = bounded_counts(
        {e: held.filter(engine_id=e) for e in engine_ids},
        cap=CLAIMS_COUNT_CAP,
        index_order="workflow_id",
        estimates=_LazyEstimates(WorkflowClaim, "engine_id", using),
    )
    return {e: c for e, c in counted.items() if c.value}


def due_timers(using: str, now_ms: int) -> tuple[int, int | None]:
    """``(count, oldest fire_at)`` of the due timers (``Timer.objects.due``)."""
    agg = Timer.objects.using(using).due(now_ms).aggregate(oldest=Min("fire_at"), n=Count("pk"))
    return int(agg["n"] or 0), agg["oldest"]


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
    #: The queues it admits runs of (``EngineRecord.queues``); ``None``: every one.
    queues: list[str] | None = None

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
            "queues": None if self.queues is None else list(self.queues),
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
    #: The counts above their cap, given as estimates (``db.counting``), by key path.
    estimated: tuple[str, ...] = ()
    #: Queue → pending runs, of the queues no live engine serves (``inspection.queues``).
    unserved_queues: dict[str, int] = field(default_factory=dict)
    #: Declared queue → its waiting / running / admitted / rate-limited figures.
    queues: dict[str, QueueFigures] = field(default_factory=dict)

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
        for queue, waiting in sorted(self.unserved_queues.items()):
            found.append(f"queue {queue!r} has {waiting} waiting run(s) no live engine serves")
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
            "estimated_counts": list(self.estimated),
            "unserved_queues": dict(self.unserved_queues),
            "queues": {name: figures.to_json() for name, figures in self.queues.items()},
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
    totals still cover every row. ``now_ms`` defaults to this process's wall
    clock (a probe or a scrape runs outside any engine).
    """
    settings = get_settings()
    db = using or settings.database
    now = wall_ms() if now_ms is None else now_ms
    window = alive_window_ms(settings)
    alive_q = alive_engines_q(now, window)

    claims_counted = claims_per_engine_counted(db)
    claims_per_engine = {engine_id: c.value for engine_id, c in claims_counted.items()}
    runs_counted = runs_by_status_counted(db)
    estimated = tuple(
        [f"claims_per_engine.{e}" for e, c in claims_counted.items() if not c.exact]
        + [f"runs_by_status.{s}" for s, c in runs_counted.items() if not c.exact]
    )

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
            queues=r.queues,
        )
        for r in shown
    ]
    alive_ids = set(records.filter(alive_q).values_list("engine_id", flat=True))
    # Folded totals of pruned records plus every record, read consistently.
    totals = read_cluster_counters(db, lambda engine_id, _hb, _stopped: engine_id in alive_ids)

    queues = queue_figures(now, db)
    estimated += tuple(e for figures in queues.values() for e in figures.estimated)

    n_due, oldest = due_timers(db, now)
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
        .expired(now, takeover_grace_ms(settings))
        .count(),
        runs_by_status={status: c.value for status, c in runs_counted.items()},
        estimated=estimated,
        due_timers=n_due,
        due_timer_lag_s=float(lag_s),
        totals=totals,
        unserved_queues=unserved_queues(now, db),
        queues=queues,
    )


__all__ = [
    "ClusterStatus",
    "EngineStatus",
    "cluster_status",
    "due_timers",
    "runs_by_status",
    "sum_engine_metrics",
]
