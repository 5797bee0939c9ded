"""Metrics that add up (issue #19 part 4): real workflows counted by type name,
old EngineRecords folded into MetricTotals with no series decreasing, scrape
cost independent of the record count, and the documented cross-target rule
(``max``, not ``sum``). Every exposition is read back with prometheus_client's
own parser, the stand-in for ``promtool check metrics``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import tests.inspect.metric_workflows as mw
from tests.support import ChildGroup, ManualClock, child_env, python, wait_for
from weft_django import client
from weft_django.conf import get_settings
from weft_django.contrib import prometheus
from weft_django.engine import Engine
from weft_django.inspection.totals import prune_engine_records
from weft_django.kernel.clock import wall_ms
from weft_django.models import TERMINAL_STATUSES, EngineRecord, MetricTotals, WorkflowRun
from weft_django.ownership.metrics import ClaimMetricsSnapshot, to_prometheus_text

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]
COUNTER_SUFFIXES = ("_total", "_bucket", "_sum", "_count")


def parse(text: str) -> Series:
    """Every weft sample, through prometheus_client's parser (it raises on bad text)."""
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("weft_"):
                key = (sample.name, frozenset(sample.labels.items()))
                assert key not in found, f"duplicate series {key}"
                found[key] = sample.value
    return found


def scrape() -> Series:
    """One scrape of a fresh collector (what /metrics of one process serves)."""
    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        return parse(generate_latest(registry).decode())
    finally:
        prometheus.unregister(registry)


def get(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def counters(series: Series) -> Series:
    return {k: v for k, v in series.items() if k[0].endswith(COUNTER_SUFFIXES)}


@pytest.fixture
def engine(transactional_db: None) -> Iterator[tuple[Engine, ManualClock]]:
    mw.FLAKY_CALLS.clear()
    clock = ManualClock(start=wall_ms())
    eng = Engine(engine_id="metrics-e1", clock=clock, background_tasks="manual").boot()
    try:
        yield eng, clock
    finally:
        eng.dispose(grace=0)


def drive(eng: Engine, clock: ManualClock, rounds: int = 6) -> None:
    """Run every ready turn, and let retry timers fall due."""
    for _ in range(rounds):
        eng.run_until_idle()
        clock.advance(2_000)
        eng.run_maintenance()
    eng.run_until_idle()


def run_the_mix(eng: Engine, clock: ManualClock) -> None:
    for i in range(2):
        client.start("metrics-quick", i, workflow_id=f"mq-{i}")
    client.start("metrics-retrying", "k1", workflow_id="mr-1")
    client.start("metrics-failing", 1, workflow_id="mf-1")
    client.start("metrics-waiter", 1, workflow_id="mw-cancel")
    client.start("metrics-waiter", 2, workflow_id="mw-done")
    drive(eng, clock)
    client.cancel("mw-cancel")  # an operator's stop, in this (non-engine) code path
    client.signal("mw-done", "go", "ok")
    drive(eng, clock)
    eng.heartbeat()


def test_run_and_attempt_metrics_add_up_to_the_database(engine: Any) -> None:
    eng, clock = engine
    run_the_mix(eng, clock)
    series = scrape()

    # Every terminal run is counted once, under its type name and status.
    ended = 0
    for name in ("metrics-quick", "metrics-retrying", "metrics-failing", "metrics-waiter"):
        per_name = 0
        for status in sorted(TERMINAL_STATUSES):
            truth = WorkflowRun.objects.filter(name=name, status=status).count()
            got = get(series, "weft_workflows_finished_total", workflow=name, status=status)
            assert got == truth, (name, status, got, truth)
            per_name += truth
        assert per_name >= 1, name
        assert get(series, "weft_workflow_duration_seconds_count", workflow=name) == per_name
        assert get(series, "weft_workflow_duration_seconds_bucket", workflow=name, le="+Inf") == (
            per_name
        )
        assert get(series, "weft_workflow_duration_seconds_sum", workflow=name) >= 0
        ended += per_name
    assert ended == 6
    assert (
        get(series, "weft_workflows_finished_total", workflow="metrics-waiter", status="cancelled")
        == 1
    )

    # Attempts: echo ran 4 times, flaky failed twice then completed, broken failed once.
    expected = {
        ("metrics-echo", "completed"): 4,
        ("metrics-flaky", "failed"): 2,
        ("metrics-flaky", "completed"): 1,
        ("metrics-broken", "failed"): 1,
    }
    seen = {
        (dict(k[1])["activity"], dict(k[1])["outcome"]): v
        for k, v in series.items()
        if k[0] == "weft_activity_attempts_total"
    }
    assert seen == expected
    for activity in ("metrics-echo", "metrics-flaky", "metrics-broken"):
        attempts = sum(n for (a, _), n in expected.items() if a == activity)
        assert get(series, "weft_activity_duration_seconds_count", activity=activity) == attempts

    # Bounded, restart-stable labels: no engine id, no workflow id.
    text = generate_latest_text()
    assert "engine_id" not in text and "metrics-e1" not in text
    assert "mq-0" not in text and "mw-cancel" not in text


def generate_latest_text() -> str:
    registry = CollectorRegistry()
    prometheus.register(registry)
    try:
        return generate_latest(registry).decode()
    finally:
        prometheus.unregister(registry)


def test_an_operators_cancel_is_durable_at_once_and_counted_once(engine: Any) -> None:
    eng, clock = engine
    client.start("metrics-waiter", 1, workflow_id="mw-c1")
    drive(eng, clock, rounds=1)
    client.cancel("mw-c1")
    # No heartbeat yet: the stop itself added the end to the durable totals.
    folded = ClaimMetricsSnapshot.from_json(MetricTotals.objects.get(pk=1).metrics)
    assert folded.business.workflows_finished == {("metrics-waiter", "cancelled"): 1}
    eng.heartbeat()
    series = scrape()
    assert (
        get(series, "weft_workflows_finished_total", workflow="metrics-waiter", status="cancelled")
        == 1
    )
    # The engine's own recorder did not count it a second time.
    assert ("metrics-waiter", "cancelled") not in eng.metrics.snapshot().business.workflows_finished


def test_one_engines_text_parses_and_carries_the_business_families(engine: Any) -> None:
    eng, clock = engine
    run_the_mix(eng, clock)
    series = parse(to_prometheus_text(eng.metrics.snapshot()))
    assert (
        get(series, "weft_workflows_finished_total", workflow="metrics-quick", status="completed")
        == 2
    )
    assert (
        get(series, "weft_activity_attempts_total", activity="metrics-flaky", outcome="failed") == 2
    )
    assert get(series, "weft_activity_duration_seconds_count", activity="metrics-echo") == 4


def test_pruning_old_records_decreases_no_series(engine: Any) -> None:
    eng, clock = engine
    run_the_mix(eng, clock)
    eng.dispose(grace=0)
    before = scrape()
    assert get(before, "weft_workflow_claim_attempts_total", outcome="acquired") >= 5

    clock.advance(get_settings().engine_record_retention_ms + 1)
    # A new boot folds the long-silent record of the first engine.
    later = Engine(engine_id="metrics-e2", clock=clock, background_tasks="manual").boot()
    try:
        assert not EngineRecord.objects.filter(pk="metrics-e1").exists()
        assert EngineRecord.objects.filter(pk="metrics-e2").exists()
        totals = MetricTotals.objects.get(pk=1)
        assert totals.records_folded == 1
        after = scrape()
    finally:
        later.dispose(grace=0)
    moved = {k: (v, after.get(k, 0.0)) for k, v in counters(before).items()}
    assert moved and all(b <= a for b, a in moved.values()), [
        (k, ba) for k, ba in moved.items() if ba[0] > ba[1]
    ]
    assert counters(before) == {k: after[k] for k in counters(before)}  # nothing lost either


def _record(engine_id: str, heartbeat_at: int, acquired: int, **extra: Any) -> EngineRecord:
    metrics = {"version": 1, "attempts": {"acquired": acquired}, **extra}
    return EngineRecord.objects.create(
        engine_id=engine_id,
        mode="workflow-lease",
        started_at=heartbeat_at,
        heartbeat_at=heartbeat_at,
        stopped_at=heartbeat_at,
        metrics=metrics,
    )


@pytest.mark.django_db
def test_prune_folds_only_records_past_the_retention_in_batches() -> None:
    EngineRecord.objects.all().delete()
    now = wall_ms()
    day = 86_400_000
    for i in range(5):
        _record(f"old-{i}", now - 8 * day - i, acquired=i + 1)
    _record("young", now - day, acquired=100)
    before = get(scrape(), "weft_workflow_claim_attempts_total", outcome="acquired")
    assert before == 115

    folded = prune_engine_records("default", now_ms=now, retention_ms=7 * day, batch=2)

    assert folded == 5
    assert list(EngineRecord.objects.values_list("engine_id", flat=True)) == ["young"]
    totals = MetricTotals.objects.get(pk=1)
    assert totals.records_folded == 5
    assert ClaimMetricsSnapshot.from_json(totals.metrics).attempts["acquired"] == 15
    assert get(scrape(), "weft_workflow_claim_attempts_total", outcome="acquired") == 115
    # Idempotent: nothing left to fold.
    assert prune_engine_records("default", now_ms=now, retention_ms=7 * day) == 0
    with pytest.raises(ValueError, match="retention_ms must be positive, got 0"):
        prune_engine_records("default", now_ms=now, retention_ms=0)


@pytest.mark.django_db
def test_scrape_queries_do_not_grow_with_engine_records() -> None:
    EngineRecord.objects.all().delete()
    now = wall_ms()

    def queries() -> int:
        with CaptureQueriesContext(connections["default"]) as ctx:
            scrape()
        return len(ctx.captured_queries)

    for i in range(3):
        _record(f"few-{i}", now, acquired=1)
    few = queries()
    EngineRecord.objects.bulk_create(
        EngineRecord(
            engine_id=f"many-{i}",
            mode="workflow-lease",
            started_at=now,
            heartbeat_at=now,
            metrics={"version": 1, "attempts": {"acquired": 1}},
        )
        for i in range(400)
    )
    many = queries()
    assert many == few, (few, many)
    assert get(scrape(), "weft_workflow_claim_attempts_total", outcome="acquired") == 403


@pytest.mark.django_db
def test_two_targets_aggregated_by_max_give_the_true_count() -> None:
    """Two web processes each serve the cluster series; the documented rule
    (``max`` across targets, docs/howto/metrics.md) gives the truth, a sum doubles it."""
    EngineRecord.objects.all().delete()
    now = wall_ms()
    finished = {
        "workflows_finished": [{"workflow": "metrics-quick", "status": "completed", "count": 7}]
    }
    _record("t-1", now, acquired=2561, business=finished)
    _record("t-2", now, acquired=1)
    targets = [scrape(), scrape()]  # two processes' collectors, one scrape each
    keys = set(targets[0]) | set(targets[1])
    by_max = {k: max(t.get(k, 0.0) for t in targets) for k in keys}
    by_sum = {k: sum(t.get(k, 0.0) for t in targets) for k in keys}
    assert get(by_max, "weft_workflow_claim_attempts_total", outcome="acquired") == 2562
    assert get(by_sum, "weft_workflow_claim_attempts_total", outcome="acquired") == 5124
    assert (
        get(by_max, "weft_workflows_finished_total", workflow="metrics-quick", status="completed")
        == 7
    )


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_scrapes_in_another_process_never_see_a_prune_half_done(tmp_path: Any) -> None:
    """A real scraper process reads the cluster counter over and over while this
    process folds 300 records in small batches: every scrape sees the same total
    (the totals row is read FOR SHARE before the records are summed)."""
    if connections["default"].vendor != "postgresql":
        pytest.skip("READ COMMITTED interleaving of two sessions is a PostgreSQL process test")
    # Migration 0014 creates the totals row that a scrape locks FOR SHARE, but an
    # earlier transactional test's flush deletes it: without it the first batch
    # (which creates it) has nothing to serialise against, and a scrape may read
    # no totals and then the records after the batch (seen once: [294, 301]).
    MetricTotals.objects.get_or_create(pk=1)
    EngineRecord.objects.all().delete()
    now = wall_ms()
    day = 86_400_000
    EngineRecord.objects.bulk_create(
        EngineRecord(
            engine_id=f"old-{i}",
            mode="workflow-lease",
            started_at=now - 9 * day,
            heartbeat_at=now - 9 * day,
            stopped_at=now - 9 * day,
            metrics={"version": 1, "attempts": {"acquired": 1}},
        )
        for i in range(300)
    )
    _record("young", now, acquired=1)
    stop = tmp_path / "stop"
    child = ChildGroup(
        [python(), "-m", "tests.procs.metrics_scraper", str(stop)],
        tmp_path / "scraper.log",
        env=child_env(),
        capture_stdout=True,
    )
    try:
        wait_for("the scraper is ready", lambda: "READY" in child.lines, child)
        wait_for("a first scrape", lambda: len(child.lines) >= 2, child)
        folded = 0
        while folded < 300:
            seen = len(child.lines)
            folded += prune_engine_records(
                "default", now_ms=now, retention_ms=7 * day, batch=7, max_batches=1
            )
            # Let at least one scrape land between batches.
            wait_for("a scrape between batches", lambda n=seen: len(child.lines) > n, child)
        stop.touch()
        wait_for("the scraper to finish", lambda: "DONE" in child.lines, child)
    finally:
        stop.touch()
        child.stop()
    values = [int(line) for line in child.lines if line.isdigit()]
    assert folded == 300 and len(values) >= 43
    assert set(values) == {301}, sorted(set(values))
    assert EngineRecord.objects.count() == 1
