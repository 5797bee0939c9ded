"""The ``WEFT`` settings dict (SPEC §3): parsing, validation and reloading.

Invariant protected: every part of weft-django reads one validated view of
the settings -- durations as integer ms from seconds or ``timedelta`` (never
``bool``), the claim and lease timing rules with their stable ids and exact
messages, an unknown ``OWNERSHIP`` naming the allowed values -- and that view
follows ``override_settings`` instead of going stale.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from weft_django.conf import (
    CHECK_IDS,
    DEFAULTS,
    WeftSettings,
    build_settings,
    duration_ms,
    get_settings,
    settings_problems,
)


def _problems(**user) -> list[tuple[str, str]]:
    return [(p.id, p.message) for p in build_settings(user)[1]]


def _ids(**user) -> list[str]:
    return [pid for pid, _ in _problems(**user)]


# -- durations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected_ms"),
    [
        (5, 5_000),
        (0.2, 200),
        (2.5, 2_500),
        (timedelta(seconds=30), 30_000),
        (timedelta(milliseconds=1500), 1_500),
        (timedelta(minutes=1), 60_000),
    ],
)
def test_durations_accept_seconds_and_timedelta_as_integer_ms(value, expected_ms: int) -> None:
    ms = duration_ms("CLAIM_TTL", value)
    assert ms == expected_ms
    assert type(ms) is int


@pytest.mark.parametrize("value", [True, False])
def test_durations_refuse_bool(value: bool) -> None:
    with pytest.raises(ValueError, match=r"CLAIM_TTL.*a timedelta or a number of seconds"):
        duration_ms("CLAIM_TTL", value)


@pytest.mark.parametrize("value", ["5", None, [5], b"5"])
def test_durations_refuse_other_types(value) -> None:
    with pytest.raises(ValueError, match="CLAIM_TTL"):
        duration_ms("CLAIM_TTL", value)


@pytest.mark.parametrize("value", [0, -1, 0.0001, timedelta(0), timedelta(seconds=-3)])
def test_durations_must_be_positive(value) -> None:
    with pytest.raises(ValueError, match="positive"):
        duration_ms("LEASE_TTL", value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_durations_must_be_finite(value: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        duration_ms("POLL_INTERVAL", value)


def test_defaults_are_the_documented_values() -> None:
    settings, problems = build_settings({})
    assert problems == []
    assert settings.ownership == "workflow-lease"
    assert (settings.claim_ttl_ms, settings.claim_renew_interval_ms) == (30_000, 5_000)
    assert (settings.lease_ttl_ms, settings.lease_renew_interval_ms) == (30_000, 5_000)
    assert settings.lease_wait_timeout_ms == 60_000
    assert settings.poll_interval_ms == 200
    assert settings.celery_eta_horizon_ms == 60_000
    assert settings.worker_concurrency == 4
    assert settings.max_payload_bytes == 256 * 1024
    assert settings.background_tasks == "auto"
    assert settings.transport == "polling"
    assert settings.retention_ms is None
    assert settings.database == "default"


def test_a_bool_duration_is_reported_as_e002_and_not_used() -> None:
    settings, problems = build_settings({"CLAIM_TTL": True})
    assert [p.id for p in problems] == ["weft.E002"]
    assert "CLAIM_TTL" in problems[0].message
    assert settings.claim_ttl_ms == 30_000


def test_timedelta_and_float_settings_are_converted() -> None:
    settings, problems = build_settings(
        {"CLAIM_TTL": timedelta(seconds=9), "CLAIM_RENEW_INTERVAL": 1.5, "RETENTION": 3600}
    )
    assert problems == []
    assert settings.claim_ttl_ms == 9_000
    assert settings.claim_renew_interval_ms == 1_500
    assert settings.retention_ms == 3_600_000


# -- timing rules -----------------------------------------------------------------


def test_claim_ttl_below_three_renewals_has_the_exact_message() -> None:
    assert _problems(CLAIM_TTL=10, CLAIM_RENEW_INTERVAL=5) == [
        (
            "weft.E004",
            "CLAIM_TTL (10.0 s) must be at least 3 × CLAIM_RENEW_INTERVAL (5.0 s) = 15.0 s",
        )
    ]


def test_claim_ttl_exactly_three_renewals_is_accepted() -> None:
    assert _problems(CLAIM_TTL=15, CLAIM_RENEW_INTERVAL=5) == []
    assert _problems(CLAIM_TTL=3, CLAIM_RENEW_INTERVAL=1) == []


def test_claim_renew_not_below_ttl_is_e003() -> None:
    problems = _problems(CLAIM_TTL=5, CLAIM_RENEW_INTERVAL=5)
    assert [pid for pid, _ in problems] == ["weft.E003"]
    message = problems[0][1]
    assert "CLAIM_RENEW_INTERVAL (5.0 s)" in message
    assert "CLAIM_TTL (5.0 s)" in message
    assert "strictly less" in message
    assert _ids(CLAIM_TTL=5, CLAIM_RENEW_INTERVAL=6) == ["weft.E003"]


def test_lease_pair_has_its_own_ids_and_message() -> None:
    assert _ids(LEASE_TTL=5, LEASE_RENEW_INTERVAL=5) == ["weft.E005"]
    assert _problems(LEASE_TTL=10, LEASE_RENEW_INTERVAL=5) == [
        (
            "weft.E006",
            "LEASE_TTL (10.0 s) must be at least 3 × LEASE_RENEW_INTERVAL (5.0 s) = 15.0 s",
        )
    ]


def test_claim_and_lease_rules_are_independent() -> None:
    assert _ids(CLAIM_TTL=10, LEASE_TTL=10) == ["weft.E004", "weft.E006"]


# -- ownership and other keys --------------------------------------------------------


def test_unknown_ownership_names_the_three_allowed_values() -> None:
    problems = _problems(OWNERSHIP="workflow_lease")
    assert [pid for pid, _ in problems] == ["weft.E001"]
    message = problems[0][1]
    assert "'workflow_lease'" in message
    for allowed in ('"none"', '"lease"', '"workflow-lease"'):
        assert allowed in message


@pytest.mark.parametrize("mode", ["none", "lease", "workflow-lease"])
def test_each_known_ownership_mode_is_accepted(mode: str) -> None:
    settings, problems = build_settings({"OWNERSHIP": mode})
    assert problems == []
    assert settings.ownership == mode


def test_unknown_key_is_e007_naming_it() -> None:
    problems = build_settings({"CLAIM_TTLL": 30})[1]
    assert [p.id for p in problems] == ["weft.E007"]
    assert "CLAIM_TTLL" in problems[0].message
    assert problems[0].hint is not None and "CLAIM_TTL" in problems[0].hint


@pytest.mark.parametrize(
    ("key", "value", "check_id"),
    [
        ("BACKGROUND_TASKS", "sometimes", "weft.E008"),
        ("TRANSPORT", "carrier-pigeon", "weft.E008"),
        ("WORKER_CONCURRENCY", 0, "weft.E018"),
        ("WORKER_CONCURRENCY", True, "weft.E018"),
        ("WORKER_CONCURRENCY", 2.0, "weft.E018"),
        ("MAX_PAYLOAD_BYTES", -1, "weft.E018"),
        ("API_PERMISSION_CLASSES", "rest_framework.permissions.AllowAny", "weft.E019"),
        ("DATABASE", "", "weft.E020"),
        ("DATABASE", 3, "weft.E020"),
        ("WAKE_BACKENDS", "weft_django.transports.notify.NotifyBackend", "weft.E021"),
        ("WAKE_BACKENDS", [3], "weft.E021"),
        ("WAKE_BACKENDS", None, "weft.E021"),
        ("PROMETHEUS_COLLECTOR", "yes", "weft.E022"),
        ("PROMETHEUS_COLLECTOR", 1, "weft.E022"),
        ("TURN_MAX_FAILURES", 0, "weft.E023"),
        ("TURN_MAX_FAILURES", -3, "weft.E023"),
        ("TURN_MAX_FAILURES", True, "weft.E023"),
        ("TURN_MAX_FAILURES", 2.5, "weft.E023"),
        ("TURN_MAX_FAILURES", "5", "weft.E023"),
        ("ACTIVITY_CONCURRENCY", 0, "weft.E024"),
        ("ACTIVITY_CONCURRENCY", -1, "weft.E024"),
        ("ACTIVITY_CONCURRENCY", True, "weft.E024"),
        ("ACTIVITY_CONCURRENCY", 4.0, "weft.E024"),
        ("ACTIVITY_CONCURRENCY", "16", "weft.E024"),
        ("WORKFLOW_CACHE_SIZE", -1, "weft.E025"),
        ("WORKFLOW_CACHE_SIZE", False, "weft.E025"),
        ("WORKFLOW_CACHE_SIZE", 10.5, "weft.E025"),
        ("WORKFLOW_CACHE_SIZE", None, "weft.E025"),
        ("WORKFLOW_CACHE_SIZE", "1000", "weft.E025"),
        ("SESSION_PRESENCE", 1, "weft.E026"),
        ("SESSION_PRESENCE", "yes", "weft.E026"),
        ("SESSION_PRESENCE", None, "weft.E026"),
    ],
)
def test_each_kind_of_bad_value_has_its_own_id_naming_the_key(
    key: str, value, check_id: str
) -> None:
    problems = build_settings({key: value})[1]
    assert [p.id for p in problems] == [check_id]
    assert key in problems[0].message


def test_problems_come_in_key_order_then_the_cross_key_rules() -> None:
    assert _ids(RETENTION="forever", CLAIM_TTL=10, OWNERSHIP="shared", NOPE=1) == [
        "weft.E007",  # an unknown key first
        "weft.E001",  # OWNERSHIP
        "weft.E002",  # RETENTION
        "weft.E004",  # CLAIM_TTL against CLAIM_RENEW_INTERVAL
    ]


def test_check_ids_are_one_per_problem() -> None:
    assert len(set(CHECK_IDS.values())) == len(CHECK_IDS)


def test_a_transport_that_disagrees_with_install_is_e017(monkeypatch: pytest.MonkeyPatch) -> None:
    from weft_django import conf

    monkeypatch.setattr(conf, "_process_transport", "celery")
    problems = build_settings({"TRANSPORT": "polling"})[1]
    assert [p.id for p in problems] == ["weft.E017"]
    assert "install(app)" in problems[0].message


def test_wake_backends_default_and_value() -> None:
    assert build_settings({})[0].wake_backends == ("weft_django.transports.notify.NotifyBackend",)
    assert build_settings({"WAKE_BACKENDS": ["a.B", "c.D"]})[0].wake_backends == ("a.B", "c.D")
    assert build_settings({"WAKE_BACKENDS": []})[0].wake_backends == ()


def test_prometheus_collector_is_read_from_weft_only() -> None:
    assert build_settings({})[0].prometheus_collector is None
    assert build_settings({"PROMETHEUS_COLLECTOR": True})[0].prometheus_collector is True
    assert build_settings({"PROMETHEUS_COLLECTOR": False})[0].prometheus_collector is False
    # The removed top-level WEFT_PROMETHEUS_COLLECTOR is not read.
    with override_settings(WEFT_PROMETHEUS_COLLECTOR=False, WEFT={}):
        assert get_settings().prometheus_collector is None


def test_the_dataclass_defaults_are_the_defaults_table() -> None:
    assert WeftSettings() == build_settings({})[0]


def test_bad_retention_is_e002() -> None:
    problems = build_settings({"RETENTION": "forever"})[1]
    assert [p.id for p in problems] == ["weft.E002"]
    assert "RETENTION" in problems[0].message


# -- get_settings and reloading ----------------------------------------------------


def test_override_settings_reloads_get_settings() -> None:
    before = get_settings()
    with override_settings(WEFT={"CLAIM_TTL": 12, "CLAIM_RENEW_INTERVAL": 2, "OWNERSHIP": "lease"}):
        inside = get_settings()
        assert inside.claim_ttl_ms == 12_000
        assert inside.claim_renew_interval_ms == 2_000
        assert inside.ownership == "lease"
        assert get_settings() is inside  # cached while unchanged
    after = get_settings()
    assert after == before
    assert after.ownership == before.ownership


def test_get_settings_raises_improperly_configured_naming_the_key() -> None:
    with (
        override_settings(WEFT={"CLAIM_TTL": 10, "CLAIM_RENEW_INTERVAL": 5}),
        pytest.raises(ImproperlyConfigured, match=r"CLAIM_TTL \(10\.0 s\)"),
    ):
        get_settings()
    with (
        override_settings(WEFT={"OWNERSHIP": "shared"}),
        pytest.raises(ImproperlyConfigured, match="OWNERSHIP"),
    ):
        get_settings()


def test_weft_that_is_not_a_dict_is_refused() -> None:
    with override_settings(WEFT=["OWNERSHIP"]):
        with pytest.raises(ImproperlyConfigured, match="must be a dict"):
            get_settings()
        assert [p.id for p in settings_problems()] == ["weft.E016"]


def test_settings_problems_lists_every_problem() -> None:
    with override_settings(WEFT={"OWNERSHIP": "x", "CLAIM_TTL": False, "NOPE": 1}):
        assert sorted(p.id for p in settings_problems()) == ["weft.E001", "weft.E002", "weft.E007"]


def test_engine_overrides_use_lower_case_keys_and_are_validated() -> None:
    base = build_settings({})[0]
    tuned = base.with_overrides(claim_ttl=3, claim_renew_interval=1, ownership="none")
    assert isinstance(tuned, WeftSettings)
    assert (tuned.claim_ttl_ms, tuned.claim_renew_interval_ms, tuned.ownership) == (
        3_000,
        1_000,
        "none",
    )
    assert base.claim_ttl_ms == 30_000  # the original is untouched
    with pytest.raises(ImproperlyConfigured, match="Unknown weft override 'claim_ttll'"):
        base.with_overrides(claim_ttll=3)
    with pytest.raises(ImproperlyConfigured, match="CLAIM_TTL"):
        base.with_overrides(claim_ttl=10, claim_renew_interval=5)


def test_every_default_key_is_a_known_setting() -> None:
    assert build_settings(dict(DEFAULTS))[1] == []


def test_turn_max_failures_defaults_to_five_and_accepts_one() -> None:
    assert build_settings({})[0].turn_max_failures == 5
    settings, problems = build_settings({"TURN_MAX_FAILURES": 1})
    assert (settings.turn_max_failures, problems) == (1, [])
    [problem] = build_settings({"TURN_MAX_FAILURES": 0})[1]
    assert "got 0" in problem.message


def test_activity_concurrency_defaults_to_sixteen_and_accepts_one() -> None:
    assert build_settings({})[0].activity_concurrency == 16
    settings, problems = build_settings({"ACTIVITY_CONCURRENCY": 1})
    assert (settings.activity_concurrency, problems) == (1, [])
    [problem] = build_settings({"ACTIVITY_CONCURRENCY": 0})[1]
    assert "got 0" in problem.message
    # Independent of WORKER_CONCURRENCY.
    both = build_settings({"ACTIVITY_CONCURRENCY": 3, "WORKER_CONCURRENCY": 7})[0]
    assert (both.activity_concurrency, both.worker_concurrency) == (3, 7)


def test_workflow_cache_size_defaults_to_a_thousand_and_zero_turns_it_off() -> None:
    assert build_settings({})[0].workflow_cache_size == 1000
    settings, problems = build_settings({"WORKFLOW_CACHE_SIZE": 0})
    assert (settings.workflow_cache_size, problems) == (0, [])
    [problem] = build_settings({"WORKFLOW_CACHE_SIZE": -5})[1]
    assert "got -5" in problem.message


def test_the_new_settings_work_as_engine_overrides() -> None:
    base = build_settings({})[0]
    changed = base.with_overrides(activity_concurrency=2, workflow_cache_size=0)
    assert (changed.activity_concurrency, changed.workflow_cache_size) == (2, 0)
    with pytest.raises(ImproperlyConfigured, match="ACTIVITY_CONCURRENCY"):
        base.with_overrides(activity_concurrency=0)
    with pytest.raises(ImproperlyConfigured, match="WORKFLOW_CACHE_SIZE"):
        base.with_overrides(workflow_cache_size=-1)


def test_session_presence_is_on_by_default_and_a_bool_turns_it_off() -> None:
    assert build_settings({})[0].session_presence is True
    settings, problems = build_settings({"SESSION_PRESENCE": False})
    assert problems == [] and settings.session_presence is False
    bad = build_settings({"SESSION_PRESENCE": "off"})[1]
    assert "'off'" in bad[0].message  # the value, named
