"""Business metrics by type name (issue #19 part 4): bounded labels, fail-closed
reading, histogram arithmetic, and ``WEFT["ENGINE_RECORD_RETENTION"]`` (weft.E036)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

import tests.inspect.metric_workflows  # noqa: F401  (registers the workflows)
from weft_django.checks import check_weft_settings
from weft_django.conf import build_settings, get_settings
from weft_django.engine.runs.metrics import activity_label, workflow_label
from weft_django.metrics.business import (
    DURATION_BUCKETS,
    MAX_TYPE_NAMES,
    OTHER,
    BusinessMetrics,
    BusinessSnapshot,
    Histogram,
)
from weft_django.ownership.metrics import ClaimMetrics, ClaimMetricsSnapshot, to_prometheus_text


def test_histogram_buckets_are_cumulative_in_the_exposition() -> None:
    h = Histogram().observed(0.001).observed(0.3).observed(10**6)
    pairs = dict(h.cumulative())
    assert pairs["0.005"] == 1 and pairs["0.5"] == 2 and pairs["86400.0"] == 2
    assert pairs["+Inf"] == 3 == h.count
    assert h.total == pytest.approx(0.301 + 10**6)
    assert len(pairs) == len(DURATION_BUCKETS) + 1


def test_a_thirty_day_workflow_lands_in_a_bucket_not_only_inf() -> None:
    assert max(DURATION_BUCKETS) >= 2_592_000
    pairs = dict(Histogram().observed(30 * 86_400).cumulative())
    assert pairs["604800.0"] == 0 and pairs["2592000.0"] == 1


def test_snapshots_add_subtract_and_round_trip_through_json() -> None:
    m = ClaimMetrics()
    m.business.record_workflow_finished("metrics-quick", "completed", 1.5)
    m.business.record_workflow_finished("metrics-quick", "failed", 0.2)
    m.business.record_activity_attempt("metrics-echo", "timed_out", 3.0)
    first = m.snapshot()
    m.business.record_activity_attempt("metrics-echo", "completed", 0.01)
    second = m.snapshot()
    delta = second - first
    assert delta.business.activity_attempts == {("metrics-echo", "completed"): 1}
    assert not delta.is_zero() and (first - first).is_zero()
    assert ClaimMetricsSnapshot.from_json(second.to_json()) == second
    assert (first + delta).business == second.business
    assert ClaimMetrics.from_json(second.to_json()).snapshot().business == second.business


@pytest.mark.parametrize(
    ("call", "bad"),
    [
        (lambda b: b.record_workflow_finished("", "completed", 1), "''"),
        (lambda b: b.record_workflow_finished("w", "suspended", 1), "'suspended'"),
        (lambda b: b.record_workflow_finished("w", "completed", float("nan")), "nan"),
        (lambda b: b.record_activity_attempt("a", "retried", 1), "'retried'"),
        (lambda b: b.record_activity_attempt("a", "completed", "1"), "'1'"),
        (lambda b: b.record_activity_attempt("x" * 201, "completed", 1), "xxxx"),
    ],
)
def test_bad_labels_and_durations_raise_naming_the_value(call, bad: str) -> None:
    recorder = BusinessMetrics()
    with pytest.raises(ValueError, match=bad):
        call(recorder)
    assert recorder.snapshot().is_zero()  # nothing recorded


def test_reading_stored_json_is_fail_closed_and_bounded() -> None:
    garbage = {
        "workflows_finished": [
            {"workflow": "w", "status": "completed", "count": 2},
            {"workflow": "w", "status": "bogus", "count": 5},
            {"workflow": "\n", "status": "completed", "count": 5},
            {"workflow": "w", "status": "failed", "count": -1},
            {"workflow": "w", "status": "failed", "count": True},
            "nonsense",
        ],
        "workflow_durations": {"w": {"buckets": [1], "sum": 1.0}, "v": "x"},
        "activity_attempts": {"not": "a list"},
    }
    snap = BusinessSnapshot.from_json(garbage)
    assert snap.workflows_finished == {("w", "completed"): 2}
    assert snap.workflow_durations == {} and snap.activity_attempts == {}
    assert BusinessSnapshot.from_json("nope").is_zero()

    many = {
        "workflows_finished": [
            {"workflow": f"w{i}", "status": "completed", "count": 1}
            for i in range(MAX_TYPE_NAMES + 10)
        ]
    }
    capped = BusinessSnapshot.from_json(many)
    assert len({name for name, _ in capped.workflows_finished}) == MAX_TYPE_NAMES + 1
    assert capped.workflows_finished[(OTHER, "completed")] == 10


def test_only_registered_type_names_become_labels() -> None:
    assert workflow_label("metrics-quick") == "metrics-quick"
    assert workflow_label("order-17-from-user-input") == OTHER
    assert activity_label("metrics-echo") == "metrics-echo"
    assert activity_label("metrics-quick") == OTHER  # a workflow name, not an activity


def test_label_values_are_escaped_and_the_text_parses() -> None:
    m = ClaimMetrics()
    m.business.record_workflow_finished('we"ird\\name', "completed", 1)
    families = {f.name: f for f in text_string_to_metric_families(to_prometheus_text(m.snapshot()))}
    samples = families["weft_workflows_finished"].samples
    assert [s.labels["workflow"] for s in samples] == ['we"ird\\name']


def test_engine_record_retention_defaults_to_seven_days_and_takes_a_timedelta() -> None:
    assert get_settings().engine_record_retention_ms == 7 * 86_400_000
    settings, problems = build_settings({"ENGINE_RECORD_RETENTION": timedelta(hours=2)})
    assert not problems and settings.engine_record_retention_ms == 7_200_000


@pytest.mark.parametrize("bad", [0, -5, "7d", True, float("inf")])
def test_a_bad_engine_record_retention_is_weft_e036_naming_the_value(bad: object) -> None:
    _settings, problems = build_settings({"ENGINE_RECORD_RETENTION": bad})
    assert [p.id for p in problems] == ["weft.E036"]
    assert repr(bad) in problems[0].message and "ENGINE_RECORD_RETENTION" in problems[0].message
    with override_settings(WEFT={"ENGINE_RECORD_RETENTION": bad}):
        assert "weft.E036" in [e.id for e in check_weft_settings(None)]
    with pytest.raises(ImproperlyConfigured, match="ENGINE_RECORD_RETENTION"):
        get_settings().with_overrides(engine_record_retention=bad)
