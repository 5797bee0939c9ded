"""Claim and wake counters (SPEC §4.8): closed label sets, JSON, Prometheus text."""

from __future__ import annotations

import re
import threading
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weft_django.ownership.metrics import (
    CLAIM_ATTEMPT_OUTCOMES,
    RUN_STATUS_LABELS,
    WAKE_DECISIONS,
    WAKE_KINDS,
    WAKE_TRANSPORTS,
    ClaimMetrics,
    ClaimMetricsSnapshot,
    label_value_is_closed,
    to_prometheus_text,
)

SAMPLE_LINE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="[a-z_\-]+",?)+\})? (\d+)$')
LABEL = re.compile(r'([a-z_]+)="([^"]*)"')


def test_closed_sets_are_exactly_the_documented_ones() -> None:
    assert CLAIM_ATTEMPT_OUTCOMES == (
        "acquired",
        "takeover",
        "lost_race",
        "deposed",
        "rotated",
        "backoff_skipped",
    )
    assert WAKE_DECISIONS == ("proceed", "discard")
    assert WAKE_TRANSPORTS == ("polling", "notify", "celery", "local")
    assert WAKE_KINDS == (
        "sleep",
        "wait-condition",
        "signal",
        "async-activity",
        "child-completion",
        "drive",
    )


def test_run_status_labels_match_the_model() -> None:
    try:
        from weft_django.models import RUN_STATUSES
    except Exception as exc:  # pragma: no cover - run without Django set up
        pytest.skip(f"models not importable here: {exc}")
    assert tuple(RUN_STATUSES) == RUN_STATUS_LABELS


def test_fresh_snapshot_is_zero_filled() -> None:
    snap = ClaimMetrics().snapshot()
    assert snap.attempts == dict.fromkeys(CLAIM_ATTEMPT_OUTCOMES, 0)
    assert list(snap.attempts) == list(CLAIM_ATTEMPT_OUTCOMES)
    assert snap.active_claims == 0
    assert snap.renewal_failures == 0
    assert snap.wakes == {}


def test_records_count_only_their_own_series() -> None:
    m = ClaimMetrics()
    m.record_claim_attempt("acquired")
    m.record_claim_attempt("acquired")
    m.record_claim_attempt("deposed")
    m.set_active_claims(3)
    m.set_active_claims(2)  # absolute, not a delta
    m.record_renewal_failure()
    m.record_renewal_failure(4)
    m.record_wake("sleep", "proceed", "polling")
    m.record_wake("sleep", "discard", "celery")
    m.record_wake("sleep", "discard", "celery")
    snap = m.snapshot()
    assert snap.attempts == {
        "acquired": 2,
        "takeover": 0,
        "lost_race": 0,
        "deposed": 1,
        "rotated": 0,
        "backoff_skipped": 0,
    }
    assert snap.active_claims == 2
    assert snap.renewal_failures == 5
    assert snap.wakes == {("sleep", "proceed", "polling"): 1, ("sleep", "discard", "celery"): 2}


def test_snapshot_is_a_copy() -> None:
    m = ClaimMetrics()
    snap = m.snapshot()
    m.record_claim_attempt("takeover")
    m.record_wake("signal", "proceed", "notify")
    assert snap.attempts["takeover"] == 0
    assert snap.wakes == {}


def test_reset_zeroes_everything() -> None:
    m = ClaimMetrics()
    m.record_claim_attempt("lost_race")
    m.set_active_claims(9)
    m.record_renewal_failure()
    m.record_wake("signal", "proceed", "local")
    m.reset()
    assert m.snapshot() == ClaimMetricsSnapshot()


@pytest.mark.parametrize("bad", ["order-o-1", "ACQUIRED", "lost-race", "", None, 1, True])
def test_unknown_outcome_is_rejected_with_its_name(bad: object) -> None:
    m = ClaimMetrics()
    with pytest.raises(ValueError) as info:
        m.record_claim_attempt(cast(Any, bad))
    text = str(info.value)
    assert repr(bad) in text
    for outcome in CLAIM_ATTEMPT_OUTCOMES:
        assert outcome in text
    assert m.snapshot() == ClaimMetricsSnapshot()


@pytest.mark.parametrize(
    "args",
    [
        ("order-o-1", "proceed", "polling"),
        ("sleep", "maybe", "polling"),
        ("sleep", "proceed", "carrier-pigeon"),
        ("sleep", "proceed", None),
    ],
)
def test_record_wake_rejects_open_values(args: tuple[Any, Any, Any]) -> None:
    m = ClaimMetrics()
    with pytest.raises(ValueError, match="must be one of"):
        m.record_wake(*args)
    assert m.snapshot().wakes == {}


@pytest.mark.parametrize("bad", [-1, 1.0, True, "2", None])
def test_counts_must_be_non_negative_ints(bad: object) -> None:
    m = ClaimMetrics()
    with pytest.raises(ValueError, match="non-negative int"):
        m.set_active_claims(cast(Any, bad))
    with pytest.raises(ValueError, match="non-negative int"):
        m.record_renewal_failure(cast(Any, bad))


def test_prometheus_text_lists_every_outcome_including_zeros() -> None:
    m = ClaimMetrics()
    m.record_claim_attempt("takeover")
    m.set_active_claims(4)
    m.record_renewal_failure(2)
    m.record_wake("child-completion", "discard", "notify")
    text = to_prometheus_text(m.snapshot())
    assert text.endswith("\n")
    lines = text.splitlines()
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert samples == [
        'weft_workflow_claim_attempts_total{outcome="acquired"} 0',
        'weft_workflow_claim_attempts_total{outcome="takeover"} 1',
        'weft_workflow_claim_attempts_total{outcome="lost_race"} 0',
        'weft_workflow_claim_attempts_total{outcome="deposed"} 0',
        'weft_workflow_claim_attempts_total{outcome="rotated"} 0',
        'weft_workflow_claim_attempts_total{outcome="backoff_skipped"} 0',
        "weft_workflow_claims_active 4",
        "weft_workflow_claim_renewal_failures_total 2",
        'weft_wakes_total{kind="child-completion",decision="discard",transport="notify"} 1',
        "weft_activity_abandoned_threads_total 0",
        "weft_workflow_cache_hits_total 0",
        "weft_workflow_cache_misses_total 0",
        "weft_workflow_crash_loops_total 0",
    ]
    for name, kind in [
        ("weft_workflow_claim_attempts_total", "counter"),
        ("weft_workflow_claims_active", "gauge"),
        ("weft_workflow_claim_renewal_failures_total", "counter"),
        ("weft_wakes_total", "counter"),
        ("weft_activity_abandoned_threads_total", "counter"),
        ("weft_workflow_cache_hits_total", "counter"),
        ("weft_workflow_cache_misses_total", "counter"),
        ("weft_workflow_crash_loops_total", "counter"),
    ]:
        assert f"# TYPE {name} {kind}" in lines
        assert any(ln.startswith(f"# HELP {name} ") for ln in lines)


def test_prometheus_text_never_leaks_a_foreign_label() -> None:
    snap = ClaimMetricsSnapshot(
        attempts=cast(Any, {"acquired": 1, "order-o-1": 5}),
        wakes=cast(Any, {("order-o-1", "proceed", "polling"): 3, ("sleep", "proceed", "local"): 1}),
    )
    text = to_prometheus_text(snap)
    assert "order-o-1" not in text
    assert 'kind="sleep",decision="proceed",transport="local"} 1' in text
    assert "order-o-1" not in str(snap.to_json())


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(CLAIM_ATTEMPT_OUTCOMES), max_size=30),
    st.lists(
        st.tuples(
            st.sampled_from(WAKE_KINDS),
            st.sampled_from(WAKE_DECISIONS),
            st.sampled_from(WAKE_TRANSPORTS),
        ),
        max_size=30,
    ),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=50),
)
def test_every_label_in_the_text_is_closed(
    outcomes: list[Any], wakes: list[Any], active: int, failures: int
) -> None:
    m = ClaimMetrics()
    for o in outcomes:
        m.record_claim_attempt(o)
    for w in wakes:
        m.record_wake(*w)
    m.set_active_claims(active)
    m.record_renewal_failure(failures)
    snap = m.snapshot()
    text = to_prometheus_text(snap)
    wake_total = 0
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE_LINE.match(line)
        assert match, line
        for name, value in LABEL.findall(line):
            assert label_value_is_closed(name, value), (name, value)
        if match.group(1) == "weft_wakes_total":
            wake_total += int(match.group(3))
    assert wake_total == len(wakes)
    assert sum(snap.attempts.values()) == len(outcomes)
    # JSON round trip of the same snapshot, via both entry points.
    assert ClaimMetricsSnapshot.from_json(snap.to_json()) == snap
    assert ClaimMetrics.from_json(m.to_json()).snapshot() == snap


def test_label_value_is_closed() -> None:
    assert label_value_is_closed("outcome", "acquired")
    assert not label_value_is_closed("outcome", "order-o-1")
    assert label_value_is_closed("kind", "drive")
    assert label_value_is_closed("decision", "discard")
    assert label_value_is_closed("transport", "celery")
    assert label_value_is_closed("status", "timed_out")
    assert not label_value_is_closed("status", "timed-out")
    assert not label_value_is_closed("engine_id", "engine-a")
    assert not label_value_is_closed("workflow_id", "order-o-1")
    assert not label_value_is_closed("outcome", None)


def test_json_round_trip_and_sum() -> None:
    a = ClaimMetrics()
    a.record_claim_attempt("acquired")
    a.set_active_claims(2)
    a.record_wake("sleep", "proceed", "polling")
    b = ClaimMetrics()
    b.record_claim_attempt("acquired")
    b.record_claim_attempt("backoff_skipped")
    b.set_active_claims(5)
    b.record_renewal_failure()
    b.record_wake("sleep", "proceed", "polling")
    b.record_wake("signal", "discard", "celery")
    doc = b.to_json()
    assert doc["version"] == 1
    assert ClaimMetricsSnapshot.from_json(doc) == b.snapshot()
    total = ClaimMetricsSnapshot.from_json(a.to_json()) + ClaimMetricsSnapshot.from_json(doc)
    assert total.attempts["acquired"] == 2
    assert total.attempts["backoff_skipped"] == 1
    assert total.active_claims == 7
    assert total.renewal_failures == 1
    assert total.wakes == {("sleep", "proceed", "polling"): 2, ("signal", "discard", "celery"): 1}
    assert sum([a.snapshot(), b.snapshot()]) == total  # type: ignore[arg-type]


def test_from_json_ignores_bad_parts_but_keeps_good_ones() -> None:
    doc = {
        "version": 99,
        "attempts": {"acquired": 3, "takeover": True, "deposed": -1, "lost_race": 2.0, "x": 9},
        "active_claims": "7",
        "renewal_failures": 4,
        "wakes": [
            {"kind": "sleep", "decision": "proceed", "transport": "polling", "count": 2},
            {"kind": "sleep", "decision": "proceed", "transport": "polling", "count": 1},
            {"kind": "order-o-1", "decision": "proceed", "transport": "polling", "count": 5},
            {"kind": "signal", "decision": "proceed", "transport": "polling", "count": "5"},
            {"kind": "signal", "decision": "proceed", "transport": "polling"},
            "junk",
            None,
        ],
        "unknown": {"a": 1},
    }
    snap = ClaimMetricsSnapshot.from_json(doc)
    assert snap.attempts == {
        "acquired": 3,
        "takeover": 0,
        "lost_race": 0,
        "deposed": 0,
        "rotated": 0,
        "backoff_skipped": 0,
    }
    assert snap.active_claims == 0
    assert snap.renewal_failures == 4
    assert snap.wakes == {("sleep", "proceed", "polling"): 3}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5)
    ),
    max_leaves=10,
)
metrics_shaped = st.fixed_dictionaries(
    {},
    optional={
        "attempts": st.dictionaries(
            st.sampled_from([*CLAIM_ATTEMPT_OUTCOMES, "x"]), json_values, max_size=6
        )
        | json_values,
        "active_claims": json_values,
        "renewal_failures": json_values,
        "abandoned_activity_threads": json_values,
        "workflow_cache_hits": json_values,
        "workflow_cache_misses": json_values,
        "wakes": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "kind": st.sampled_from(WAKE_KINDS) | json_values,
                    "decision": st.sampled_from(WAKE_DECISIONS) | json_values,
                    "transport": st.sampled_from(WAKE_TRANSPORTS) | json_values,
                    "count": st.integers(min_value=-2, max_value=9) | json_values,
                },
            )
            | json_values,
            max_size=5,
        )
        | json_values,
    },
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(json_values | metrics_shaped)
def test_from_json_of_garbage_never_raises(data: object) -> None:
    snap = ClaimMetricsSnapshot.from_json(data)
    assert list(snap.attempts) == list(CLAIM_ATTEMPT_OUTCOMES)
    counts = [
        snap.active_claims,
        snap.renewal_failures,
        snap.abandoned_activity_threads,
        snap.workflow_cache_hits,
        snap.workflow_cache_misses,
    ]
    for n in [*snap.attempts.values(), *counts]:
        assert type(n) is int and n >= 0
    for (kind, decision, transport), n in snap.wakes.items():
        assert kind in WAKE_KINDS and decision in WAKE_DECISIONS and transport in WAKE_TRANSPORTS
        assert type(n) is int and n >= 0
    to_prometheus_text(snap)  # and it renders
    assert ClaimMetricsSnapshot.from_json(snap.to_json()) == snap


def test_thread_safety_smoke() -> None:
    m = ClaimMetrics()
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        for _ in range(1000):
            m.record_claim_attempt("acquired")
            m.record_wake("sleep", "proceed", "local")
            m.record_renewal_failure()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = m.snapshot()
    assert snap.attempts["acquired"] == 8000
    assert snap.wakes[("sleep", "proceed", "local")] == 8000
    assert snap.renewal_failures == 8000


# -- deltas ----------------------------------------------------------------------


def test_a_snapshot_minus_an_earlier_one_is_what_was_recorded_since() -> None:
    metrics = ClaimMetrics()
    metrics.record_claim_attempt("acquired")
    metrics.record_wake("sleep", "proceed", "polling")
    metrics.set_active_claims(3)
    earlier = metrics.snapshot()
    assert (earlier - earlier).is_zero()
    metrics.record_claim_attempt("acquired")
    metrics.record_claim_attempt("deposed")
    metrics.record_renewal_failure()
    metrics.record_wake("signal", "discard", "celery")
    metrics.set_active_claims(7)
    delta = metrics.snapshot() - earlier
    assert not delta.is_zero()
    assert delta.attempts["acquired"] == 1 and delta.attempts["deposed"] == 1
    assert delta.attempts["takeover"] == 0
    assert delta.renewal_failures == 1
    assert delta.wakes == {("signal", "discard", "celery"): 1}  # unchanged keys left out
    assert delta.active_claims == 0  # a gauge has no delta
    now = metrics.snapshot()
    rebuilt = earlier + delta
    assert (rebuilt.attempts, rebuilt.renewal_failures) == (now.attempts, now.renewal_failures)
    assert rebuilt.wakes == now.wakes


def test_is_zero_ignores_the_active_claims_gauge() -> None:
    assert ClaimMetricsSnapshot(active_claims=5).is_zero()
    assert not ClaimMetricsSnapshot(renewal_failures=1).is_zero()
    assert not ClaimMetricsSnapshot(abandoned_activity_threads=1).is_zero()
    assert not ClaimMetricsSnapshot(workflow_cache_hits=1).is_zero()
    assert not ClaimMetricsSnapshot(workflow_cache_misses=1).is_zero()


def test_abandoned_activity_threads_count_sum_subtract_and_round_trip() -> None:
    metrics = ClaimMetrics()
    metrics.record_abandoned_activity_thread()
    earlier = metrics.snapshot()
    metrics.record_abandoned_activity_thread(2)
    now = metrics.snapshot()
    assert now.abandoned_activity_threads == 3
    assert (now - earlier).abandoned_activity_threads == 2
    assert (now + earlier).abandoned_activity_threads == 4
    doc = metrics.to_json()
    assert doc["abandoned_activity_threads"] == 3
    assert ClaimMetricsSnapshot.from_json(doc) == now
    assert ClaimMetrics.from_json(doc).snapshot().abandoned_activity_threads == 3
    # A record written before the counter existed reads as 0; garbage is ignored.
    assert ClaimMetricsSnapshot.from_json({"renewal_failures": 1}).abandoned_activity_threads == 0
    for bad in (-1, True, 1.5, "3"):
        snap = ClaimMetricsSnapshot.from_json({"abandoned_activity_threads": bad})
        assert snap.abandoned_activity_threads == 0
    assert "weft_activity_abandoned_threads_total 3" in to_prometheus_text(now)
    with pytest.raises(ValueError, match="abandoned activity threads"):
        metrics.record_abandoned_activity_thread(-1)
    metrics.reset()
    assert metrics.snapshot().abandoned_activity_threads == 0


def test_workflow_cache_counters_count_sum_subtract_and_round_trip() -> None:
    metrics = ClaimMetrics()
    assert metrics.snapshot().workflow_cache_hit_rate is None  # no look yet
    metrics.record_workflow_cache_lookup(hit=False)
    earlier = metrics.snapshot()
    for hit in (True, True, True, False):
        metrics.record_workflow_cache_lookup(hit=hit)
    now = metrics.snapshot()
    assert (now.workflow_cache_hits, now.workflow_cache_misses) == (3, 2)
    assert now.workflow_cache_hit_rate == pytest.approx(0.6)
    delta = now - earlier
    assert (delta.workflow_cache_hits, delta.workflow_cache_misses) == (3, 1)
    total = now + earlier
    assert (total.workflow_cache_hits, total.workflow_cache_misses) == (3, 3)
    doc = metrics.to_json()
    assert (doc["workflow_cache_hits"], doc["workflow_cache_misses"]) == (3, 2)
    assert ClaimMetricsSnapshot.from_json(doc) == now
    assert ClaimMetrics.from_json(doc).snapshot() == now
    # A record written before the counters existed reads as 0; garbage is ignored.
    old = ClaimMetricsSnapshot.from_json({"renewal_failures": 1})
    assert (old.workflow_cache_hits, old.workflow_cache_misses) == (0, 0)
    for bad in (-1, True, 1.5, "3"):
        snap = ClaimMetricsSnapshot.from_json(
            {"workflow_cache_hits": bad, "workflow_cache_misses": bad}
        )
        assert (snap.workflow_cache_hits, snap.workflow_cache_misses) == (0, 0)
    text = to_prometheus_text(now)
    assert "weft_workflow_cache_hits_total 3" in text
    assert "weft_workflow_cache_misses_total 2" in text
    for bad_hit in (1, None, "yes"):
        with pytest.raises(ValueError, match="workflow cache hit must be a bool"):
            metrics.record_workflow_cache_lookup(hit=bad_hit)  # type: ignore[arg-type]
    metrics.reset()
    assert metrics.snapshot().is_zero()
