"""The Prometheus export (SPEC §4.8): the collector sums every engine's
``EngineRecord.metrics`` and adds cluster gauges, served by django-prometheus's
``/metrics``; every label value is from a closed set or a live engine id."""

from __future__ import annotations

import importlib
import re
import sys

import pytest
from django.test import Client
from prometheus_client import CollectorRegistry, generate_latest

import tests.inspect.workflows  # noqa: F401  (registers the workflows)
from tests.support import ManualClock, type_label_is_bounded
from weft_django import client
from weft_django.contrib import prometheus
from weft_django.engine import Engine
from weft_django.inspection import cluster_status
from weft_django.kernel.clock import wall_ms
from weft_django.kernel.schedule_spec import TICK_OUTCOMES
from weft_django.models import ClaimEvent, EngineRecord
from weft_django.ownership.metrics import label_value_is_closed

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def weft_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """``(name, labels, value)`` of every ``weft_*`` sample in an exposition."""
    found = []
    for line in text.splitlines():
        if not line.startswith("weft_"):
            continue
        match = SAMPLE.match(line)
        assert match is not None, line
        labels = {m["key"]: m["value"] for m in LABEL.finditer(match["labels"] or "")}
        found.append((match["name"], labels, float(match["value"])))
    return found


def value(samples: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    hits = [v for n, ls, v in samples if n == name and ls == labels]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


@pytest.fixture
def two_engines(transactional_db: None):
    """A acquires; past expiry + grace, B takes over. Both on a clock at wall time
    so the collector (which judges against the wall clock) sees them alive."""
    clock = ManualClock(start=wall_ms())
    a = Engine(engine_id="engine-a", clock=clock, background_tasks="manual").boot()
    b = Engine(engine_id="engine-b", clock=clock, background_tasks="manual").boot()
    try:
        client.start("inspect-waiter", {"n": 1}, workflow_id="metrics-wf-1")
        a.run_until_idle()
        a.heartbeat()
        settings = a.settings
        clock.advance(settings.claim_ttl_ms + 2 * settings.claim_renew_interval_ms + 1)
        b.run_maintenance()
        b.heartbeat()
        a.run_maintenance()  # A's renewal finds the claim lost (deposed)
        a.heartbeat()
        yield a, b
    finally:
        b.dispose(grace=0)
        a.dispose(grace=0)


def test_metrics_endpoint_shows_the_cluster(two_engines) -> None:
    kinds = list(
        ClaimEvent.objects.filter(workflow_id="metrics-wf-1").values_list("kind", "engine_id")
    )
    assert kinds == [("acquire", "engine-a"), ("takeover", "engine-b")]

    response = Client().get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    samples = weft_samples(text)
    assert value(samples, "weft_workflow_claim_attempts_total", outcome="acquired") >= 1
    assert value(samples, "weft_workflow_claim_attempts_total", outcome="takeover") >= 1
    assert value(samples, "weft_workflow_claim_attempts_total", outcome="deposed") >= 1
    assert value(samples, "weft_workflow_claim_renewal_failures_total") >= 1
    assert value(samples, "weft_workflow_claims_active") == 1  # B holds it; A lost it
    assert value(samples, "weft_engine_claims_held_max") == 1  # B holds one
    assert value(samples, "weft_workflow_runs", status="parked") == 1
    assert value(samples, "weft_engines_alive") == 2
    wakes = [ls for n, ls, _ in samples if n == "weft_wakes_total"]
    assert wakes and all(set(ls) == {"kind", "decision", "transport"} for ls in wakes)
    assert value(samples, "weft_cluster_scrape_ok") == 1
    for name in (
        "weft_workflow_claim_renewal_failures_total",
        "weft_workflow_claims_expired",
        "weft_timer_due_lag_seconds",
        "weft_schedule_ticks_total",
    ):
        assert any(n == name for n, _, _ in samples), name

    live = {e.engine_id for e in cluster_status().alive_engines}
    assert live == {"engine-a", "engine-b"}
    for name, labels, _ in samples:
        for key, label in labels.items():
            if name == "weft_schedule_ticks_total":  # its own closed outcome set
                assert key == "outcome" and label in TICK_OUTCOMES, (name, key, label)
                continue
            assert label_value_is_closed(key, label) or type_label_is_bounded(key, label), (
                name,
                key,
                label,
            )
    assert "metrics-wf-1" not in text  # a workflow id is never a label


def test_stopped_engines_count_in_counters_not_in_gauges(two_engines) -> None:
    a, _b = two_engines
    a.dispose(grace=0)
    samples = weft_samples(Client().get("/metrics").content.decode())
    assert value(samples, "weft_workflow_claim_attempts_total", outcome="acquired") >= 1
    assert value(samples, "weft_engines_alive") == 1
    assert not [ls for n, ls, _ in samples if "engine_id" in ls]


@pytest.mark.django_db
def test_garbage_metrics_rows_are_ignored() -> None:
    now = wall_ms()
    EngineRecord.objects.create(
        engine_id="junk",
        mode="workflow-lease",
        started_at=now,
        heartbeat_at=now,
        metrics={"attempts": {"acquired": "lots", "weird": 5}, "wakes": [{"kind": "x"}]},
    )
    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        text = generate_latest(registry).decode()
    finally:
        prometheus.unregister(registry)
    samples = weft_samples(text)
    assert value(samples, "weft_workflow_claim_attempts_total", outcome="acquired") == 0
    assert "weird" not in text


@pytest.mark.django_db
def test_abandoned_activity_threads_are_summed_over_live_and_stopped_engines() -> None:
    EngineRecord.objects.all().delete()
    now = wall_ms()
    for engine_id, abandoned, stopped in (("ab-1", 2, None), ("ab-2", 3, now)):
        EngineRecord.objects.create(
            engine_id=engine_id,
            mode="workflow-lease",
            started_at=now,
            heartbeat_at=now,
            stopped_at=stopped,
            metrics={"version": 1, "abandoned_activity_threads": abandoned},
        )
    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        text = generate_latest(registry).decode()
    finally:
        prometheus.unregister(registry)
    assert "# TYPE weft_activity_abandoned_threads_total counter" in text
    assert value(weft_samples(text), "weft_activity_abandoned_threads_total") == 5


@pytest.mark.django_db
def test_workflow_cache_counters_are_summed_over_live_and_stopped_engines() -> None:
    EngineRecord.objects.all().delete()
    now = wall_ms()
    for engine_id, hits, misses, stopped in (("wc-1", 7, 2, None), ("wc-2", 1, 4, now)):
        EngineRecord.objects.create(
            engine_id=engine_id,
            mode="workflow-lease",
            started_at=now,
            heartbeat_at=now,
            stopped_at=stopped,
            metrics={"version": 1, "workflow_cache_hits": hits, "workflow_cache_misses": misses},
        )
    assert cluster_status().totals.workflow_cache_hit_rate == pytest.approx(8 / 14)
    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        text = generate_latest(registry).decode()
    finally:
        prometheus.unregister(registry)
    assert "# TYPE weft_workflow_cache_hits_total counter" in text
    assert "# TYPE weft_workflow_cache_misses_total counter" in text
    samples = weft_samples(text)
    assert value(samples, "weft_workflow_cache_hits_total") == 8
    assert value(samples, "weft_workflow_cache_misses_total") == 6


def test_registration_is_idempotent_and_never_queries() -> None:
    # No django_db mark: any query here would raise (pytest-django blocks it).
    registry = CollectorRegistry()
    first = prometheus.register(registry)
    assert prometheus.register(registry) is first
    prometheus.unregister(registry)
    # And the app registered it with the default registry exactly once.
    from prometheus_client import REGISTRY

    ours = [
        c for c in REGISTRY._collector_to_names if isinstance(c, prometheus.WeftClusterCollector)
    ]
    assert len(ours) == 1


def test_a_clear_import_error_without_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    moved = ("weft_django.contrib.prometheus",)
    originals = {name: sys.modules[name] for name in moved if name in sys.modules}
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    for name in originals:
        monkeypatch.delitem(sys.modules, name)
    try:
        for name in moved:
            with pytest.raises(ImportError, match=r"weft-django\[metrics\]"):
                importlib.import_module(name)
        # ready() tolerates it: no collector, no error.
        from weft_django.apps import WeftConfig

        WeftConfig._register_metrics_collector()
    finally:
        sys.modules.update(originals)
