"""The cluster's claim metrics for Prometheus (SPEC §4.8; the ``metrics`` extra).

Why a collector that reads the database: every engine writes its counters
into its ``EngineRecord.metrics`` at each heartbeat, and engines live in
other processes (workers, Celery nodes). A custom collector that sums those
rows at scrape time lets django-prometheus's ``/metrics`` in **any** process
(a web worker, say) serve the cluster's truth, and adds gauges only the
database knows (claims per engine, expired claims, runs by status, the
oldest due timer's lag).

Cardinality is bounded: every label value comes from a closed set
(``weft_django.ownership.metrics.CLOSED_LABEL_SETS``) or is a registered
workflow or activity type name (``"other"`` for any other, at most
``business_metrics.MAX_TYPE_NAMES``). No label changes at a restart (no
engine id) and a workflow id is never a label.

Every series here is a **cluster total** read from the database: each
target that serves it reports the same value, so across targets it is
aggregated with ``max``, never summed (docs/howto/metrics.md). Folded
counters of pruned engine records (``MetricTotals``) are included, so no
counter decreases when old records are pruned.

Registration (``register()``) is idempotent and never touches the database:
``prometheus_client``'s default registry describes collectors at
registration, so ``describe()`` yields empty families; the queries run in
``collect()``, at scrape time. ``WeftConfig.ready()`` calls ``register()``
when ``prometheus_client`` is importable and the project opts in
(``settings_opt_in()``: ``WEFT["PROMETHEUS_COLLECTOR"]``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

try:
    from prometheus_client import REGISTRY
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )
    from prometheus_client.registry import Collector, CollectorRegistry
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "weft_django.contrib.prometheus needs prometheus_client: install the metrics extra "
        '(pip install "weft-django[metrics]")'
    ) from exc

from django.db import DatabaseError

from weft_django.conf import get_settings
from weft_django.inspection import ClusterStatus, cluster_status
from weft_django.inspection.schedules import tick_totals
from weft_django.metrics.business import FAMILIES as BUSINESS_FAMILIES
from weft_django.metrics.business import BusinessSnapshot
from weft_django.ownership.metrics import CLAIM_ATTEMPT_OUTCOMES, RUN_STATUS_LABELS

__all__ = ["WeftClusterCollector", "register", "settings_opt_in", "unregister"]

logger = logging.getLogger("weft_django.metrics")


class WeftClusterCollector(Collector):
    """Sums every ``EngineRecord.metrics`` and adds cluster gauges at each scrape."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    # The families, empty: what ``describe()`` announces and ``collect()`` fills.
    @staticmethod
    def _families() -> dict[str, Any]:
        return {
            "attempts": CounterMetricFamily(
                "weft_workflow_claim_attempts",
                "Per-workflow claim attempts by outcome, summed over every engine.",
                labels=["outcome"],
            ),
            "active": GaugeMetricFamily(
                "weft_workflow_claims_active",
                "Workflow claims held by live engines (their own count at last heartbeat).",
            ),
            "renewal_failures": CounterMetricFamily(
                "weft_workflow_claim_renewal_failures",
                "Workflow claims found taken by another engine while renewing (not an "
                "operator's rotation), summed over every engine.",
            ),
            "wakes": CounterMetricFamily(
                "weft_wakes",
                "Workflow wakes by kind, guard decision and transport, summed over every engine.",
                labels=["kind", "decision", "transport"],
            ),
            "abandoned_threads": CounterMetricFamily(
                "weft_activity_abandoned_threads",
                "Sync activity threads abandoned while still running (they cannot be "
                "stopped), summed over every engine.",
            ),
            "cache_hits": CounterMetricFamily(
                "weft_workflow_cache_hits",
                "Turns that resumed their run's cached replay, summed over every engine.",
            ),
            "cache_misses": CounterMetricFamily(
                "weft_workflow_cache_misses",
                "Turns that found no valid cached replay and replayed the journal (cache "
                "on), summed over every engine.",
            ),
            "crash_loops": CounterMetricFamily(
                "weft_workflow_crash_loops",
                "Runs suspended with CrashLoopError (their turns kept dying with their "
                "engine), summed over every engine.",
            ),
            "engines_alive": GaugeMetricFamily(
                "weft_engines_alive", "Engines alive (heartbeat within 3 renew intervals)."
            ),
            "claims_held_max": GaugeMetricFamily(
                "weft_engine_claims_held_max",
                "The most claim rows any one live engine holds, from the database (balance).",
            ),
            "expired": GaugeMetricFamily(
                "weft_workflow_claims_expired",
                "Claims whose holder expired past the takeover grace (or is corrupt).",
            ),
            "runs": GaugeMetricFamily(
                "weft_workflow_runs", "Workflow runs by status.", labels=["status"]
            ),
            "lag": GaugeMetricFamily(
                "weft_timer_due_lag_seconds",
                "How long the oldest due timer of a running or parked run has been due.",
            ),
            "schedule_ticks": CounterMetricFamily(
                "weft_schedule_ticks",
                "Schedule ticks by outcome (fired, skipped, buffered, missed, triggered, "
                "backfilled, failed), over every schedule.",
                labels=["outcome"],
            ),
            **_queue_families(),
            **{
                key: family(name, kind, help_text, label)
                for key, (name, kind, help_text, label) in _business_families().items()
            },
            "up": GaugeMetricFamily(
                "weft_cluster_scrape_ok", "1 if the cluster state was read from the database."
            ),
        }

    def describe(self) -> Iterator[Any]:
        """Names only, no database access (called at registration)."""
        yield from self._families().values()

    def collect(self) -> Iterator[Any]:
        families = self._families()
        try:
            status = cluster_status(using=self.using)
        except DatabaseError:
            # A scrape must not fail the whole /metrics page because weft's tables
            # are unreachable; say so in a gauge of our own instead.
            logger.warning("weft metrics: could not read the cluster state", exc_info=True)
            families["up"].add_metric([], 0)
            yield families["up"]
            return
        self._fill(families, status)
        try:
            ticks = tick_totals(self.using or get_settings().database)
        except DatabaseError:  # e.g. the schedules migration is not applied yet
            logger.warning("weft metrics: could not read the schedules", exc_info=True)
        else:
            for outcome, n in ticks.items():
                families["schedule_ticks"].add_metric([outcome], n)
        yield from families.values()

    @staticmethod
    def _fill(families: dict[str, Any], status: ClusterStatus) -> None:
        totals = status.totals
        for outcome in CLAIM_ATTEMPT_OUTCOMES:
            families["attempts"].add_metric([outcome], totals.attempts.get(outcome, 0))
        families["active"].add_metric([], totals.active_claims)
        families["renewal_failures"].add_metric([], totals.renewal_failures)
        # ``totals.wakes`` keys were validated against the closed sets by from_json.
        for (kind, decision, transport), n in sorted(totals.wakes.items()):
            families["wakes"].add_metric([kind, decision, transport], n)
        families["abandoned_threads"].add_metric([], totals.abandoned_activity_threads)
        families["cache_hits"].add_metric([], totals.workflow_cache_hits)
        families["cache_misses"].add_metric([], totals.workflow_cache_misses)
        families["crash_loops"].add_metric([], totals.workflow_crash_loops)
        families["engines_alive"].add_metric([], len(status.alive_engines))
        families["claims_held_max"].add_metric(
            [], max(status.live_claims_per_engine.values(), default=0)
        )
        _fill_business(families, totals.business)
        families["expired"].add_metric([], status.expired_claims)
        for run_status in RUN_STATUS_LABELS:
            families["runs"].add_metric([run_status], status.runs_by_status.get(run_status, 0))
        families["lag"].add_metric([], status.due_timer_lag_s)
        for name, figures in status.queues.items():
            families["queue_waiting"].add_metric([name], figures.waiting)
            families["queue_running"].add_metric([name], figures.running)
            families["queue_admitted"].add_metric([name], figures.admitted)
            families["queue_rate_limited"].add_metric([name], figures.rate_limited)
        families["up"].add_metric([], 1)


def _queue_families() -> dict[str, Any]:
    """Per-queue gauges; the ``queue`` label is a name ``WEFT["QUEUES"]``
    declares (a closed set), never a run's own value."""
    return {
        "queue_waiting": GaugeMetricFamily(
            "weft_queue_waiting_runs",
            "Runs of the queue waiting for admission (pending).",
            labels=["queue"],
        ),
        "queue_running": GaugeMetricFamily(
            "weft_queue_slots_held",
            "Slots of the queue held now (runs and activity attempts), across engines.",
            labels=["queue"],
        ),
        "queue_admitted": GaugeMetricFamily(
            "weft_queue_admissions_in_window",
            "Admissions to the queue inside its rate window (a minute without a rate).",
            labels=["queue"],
        ),
        "queue_rate_limited": GaugeMetricFamily(
            "weft_queue_rate_limited_runs",
            "Waiting runs of the queue a rate (the queue's or their key's) holds back now.",
            labels=["queue"],
        ),
    }


def _business_families() -> dict[str, tuple[str, str, str, str]]:
    """key -> (name without ``_total``, type, help, type-name label)."""
    return {
        name: (name.removesuffix("_total"), kind, help_text, label)
        for name, (kind, help_text, label) in BUSINESS_FAMILIES.items()
    }


def family(name: str, kind: str, help_text: str, label: str) -> Any:
    if kind == "histogram":
        return HistogramMetricFamily(name, help_text, labels=[label])
    second = "status" if label == "workflow" else "outcome"
    return CounterMetricFamily(name, help_text, labels=[label, second])


def _fill_business(families: dict[str, Any], business: BusinessSnapshot) -> None:
    """Type names were bounded by ``BusinessSnapshot.from_json`` (registered, capped)."""
    hists = {
        "weft_workflow_duration_seconds": business.workflow_durations,
        "weft_activity_duration_seconds": business.activity_durations,
    }
    for key, by_name in hists.items():
        for type_name, hist in sorted(by_name.items()):
            families[key].add_metric(
                [type_name], buckets=list(hist.cumulative()), sum_value=hist.total
            )
    counts = {
        "weft_workflows_finished_total": business.workflows_finished,
        "weft_activity_attempts_total": business.activity_attempts,
    }
    for key, by_pair in counts.items():
        for (type_name, value), n in sorted(by_pair.items()):
            families[key].add_metric([type_name, value], n)


_lock = threading.Lock()
_registered: dict[int, WeftClusterCollector] = {}


def register(registry: CollectorRegistry | None = None) -> WeftClusterCollector:
    """Register the collector once per registry (idempotent; no database access)."""
    target = REGISTRY if registry is None else registry
    with _lock:
        existing = _registered.get(id(target))
        if existing is not None:
            return existing
        collector = WeftClusterCollector()
        target.register(collector)
        _registered[id(target)] = collector
        return collector


def unregister(registry: CollectorRegistry | None = None) -> None:
    """Undo ``register()`` (tests)."""
    target = REGISTRY if registry is None else registry
    with _lock:
        collector = _registered.pop(id(target), None)
        if collector is not None:
            target.unregister(collector)


def settings_opt_in() -> bool:
    """Whether ``ready()`` should register.

    ``WEFT["PROMETHEUS_COLLECTOR"]`` when set, else whether
    ``django_prometheus`` (what serves ``/metrics``) is installed.
    """
    from django.apps import apps

    explicit = get_settings().prometheus_collector
    if explicit is not None:
        return explicit
    return apps.is_installed("django_prometheus")
