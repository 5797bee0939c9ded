"""System checks (SPEC §3): stable ids, and no database access.

Invariant protected: every misconfiguration the spec names is reported by
``manage.py check`` under its stable id, one per kind of problem (weft.E001-E008
and E016-E026 for the settings, E010-E015 for the database and transport), with
a message naming the key and value -- and running the checks never opens a
database query.
"""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core import checks
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from weft_django.checks import check_database, check_weft_settings
from weft_django.transports.celery.node_checks import check_celery_pool

pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")

SQLITE_OK = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": "x.sqlite3",
    "OPTIONS": {"transaction_mode": "IMMEDIATE"},
}
POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "weft", "OPTIONS": {}}


def _ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [m.id for m in messages]


def _with_default(entry: dict) -> dict:
    return {**django_settings.DATABASES, "weftdb": entry}


def test_the_project_configuration_passes() -> None:
    assert check_weft_settings() == []


@pytest.mark.django_db
def test_checks_never_query_the_database() -> None:
    with (
        override_settings(WEFT={"OWNERSHIP": "bogus", "CLAIM_TTL": 1}),
        CaptureQueriesContext(connection) as queries,
    ):
        assert check_weft_settings()
        checks.run_checks(tags=["weft"])
    assert len(queries) == 0


def test_weft_checks_are_registered() -> None:
    with override_settings(WEFT={"OWNERSHIP": "bogus"}):
        found = checks.run_checks(tags=["weft"])
    assert "weft.E001" in _ids(found)


@pytest.mark.parametrize(
    ("weft", "expected_id", "needle"),
    [
        ({"OWNERSHIP": "leases"}, "weft.E001", '"none", "lease" or "workflow-lease"'),
        ({"CLAIM_TTL": True}, "weft.E002", "CLAIM_TTL"),
        ({"POLL_INTERVAL": -1}, "weft.E002", "POLL_INTERVAL"),
        ({"CLAIM_TTL": 5, "CLAIM_RENEW_INTERVAL": 5}, "weft.E003", "CLAIM_RENEW_INTERVAL (5.0 s)"),
        (
            {"CLAIM_TTL": 10, "CLAIM_RENEW_INTERVAL": 5},
            "weft.E004",
            "CLAIM_TTL (10.0 s) must be at least 3 × CLAIM_RENEW_INTERVAL (5.0 s) = 15.0 s",
        ),
        ({"LEASE_TTL": 4, "LEASE_RENEW_INTERVAL": 5}, "weft.E005", "LEASE_RENEW_INTERVAL"),
        (
            {"LEASE_TTL": 10, "LEASE_RENEW_INTERVAL": 5},
            "weft.E006",
            "LEASE_TTL (10.0 s) must be at least 3 × LEASE_RENEW_INTERVAL (5.0 s) = 15.0 s",
        ),
        ({"CLAIMTTL": 30}, "weft.E007", "CLAIMTTL"),
        ({"WORKER_CONCURRENCY": 0}, "weft.E018", "WORKER_CONCURRENCY"),
        ({"BACKGROUND_TASKS": "never"}, "weft.E008", "BACKGROUND_TASKS"),
        ({"WAKE_BACKENDS": "x.Y"}, "weft.E021", "WAKE_BACKENDS"),
        ({"ACTIVITY_CONCURRENCY": 0}, "weft.E024", "ACTIVITY_CONCURRENCY"),
        ({"WORKFLOW_CACHE_SIZE": -1}, "weft.E025", "WORKFLOW_CACHE_SIZE"),
        ({"SESSION_PRESENCE": "yes"}, "weft.E026", "must be True or False, got 'yes'"),
    ],
)
def test_settings_errors_have_stable_ids(weft: dict, expected_id: str, needle: str) -> None:
    with override_settings(WEFT=weft):
        messages = check_weft_settings()
    assert _ids(messages) == [expected_id]
    assert needle in messages[0].msg
    assert isinstance(messages[0], checks.Error)


def test_a_weft_setting_that_is_not_a_dict_is_e016() -> None:
    with override_settings(WEFT="workflow-lease"):
        assert "weft.E016" in _ids(check_weft_settings())


@pytest.mark.parametrize("mode", [None, "", "DEFERRED", "deferred"])
def test_sqlite_without_immediate_transactions_is_e010(mode) -> None:
    options = {} if mode is None else {"transaction_mode": mode}
    entry = {**SQLITE_OK, "OPTIONS": options}
    with override_settings(DATABASES=_with_default(entry)):
        messages = check_database("weftdb", "workflow-lease")
    assert _ids(messages) == ["weft.E010"]
    assert "'weftdb'" in messages[0].msg
    assert "IMMEDIATE or EXCLUSIVE" in messages[0].msg
    assert "transaction_mode" in messages[0].hint


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE", "immediate"])
def test_sqlite_with_immediate_or_exclusive_passes(mode: str) -> None:
    entry = {**SQLITE_OK, "OPTIONS": {"transaction_mode": mode}}
    with override_settings(DATABASES=_with_default(entry)):
        assert check_database("weftdb", "workflow-lease") == []


def test_sqlite_rule_applies_to_none_mode_too() -> None:
    entry = {**SQLITE_OK, "OPTIONS": {}}
    with override_settings(DATABASES=_with_default(entry)):
        assert _ids(check_database("weftdb", "none")) == ["weft.E010"]


@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_another_database_in_a_fencing_mode_is_e011(mode: str) -> None:
    entry = {"ENGINE": "django.db.backends.mysql", "NAME": "weft"}
    with override_settings(DATABASES=_with_default(entry)):
        messages = check_database("weftdb", mode)
    assert _ids(messages) == ["weft.E011"]
    assert "django.db.backends.mysql" in messages[0].msg
    assert repr(mode) in messages[0].msg


def test_another_database_without_fencing_passes() -> None:
    entry = {"ENGINE": "django.db.backends.oracle", "NAME": "weft"}
    with override_settings(DATABASES=_with_default(entry)):
        assert check_database("weftdb", "none") == []


def test_postgres_stricter_than_read_committed_is_e012() -> None:
    from psycopg import IsolationLevel

    for level, expected in (
        (IsolationLevel.SERIALIZABLE, ["weft.E012"]),
        (IsolationLevel.REPEATABLE_READ, ["weft.E012"]),
        (IsolationLevel.READ_COMMITTED, []),
        (None, []),
    ):
        options = {} if level is None else {"isolation_level": level}
        entry = {**POSTGRES, "OPTIONS": options}
        with override_settings(DATABASES=_with_default(entry)):
            messages = check_database("weftdb", "workflow-lease")
        assert _ids(messages) == expected, level
        if expected:
            assert level.name.replace("_", " ") in messages[0].msg


def test_a_weft_database_alias_that_does_not_exist_is_e015() -> None:
    with override_settings(WEFT={"DATABASE": "missing"}):
        messages = check_weft_settings()
    assert _ids(messages) == ["weft.E015"]
    assert "'missing'" in messages[0].msg
    assert "default" in messages[0].msg


def test_check_weft_settings_checks_the_configured_alias() -> None:
    entry = {**SQLITE_OK, "OPTIONS": {}}
    with override_settings(DATABASES=_with_default(entry), WEFT={"DATABASE": "weftdb"}):
        assert _ids(check_weft_settings()) == ["weft.E010"]


def test_none_with_celery_is_e013() -> None:
    with override_settings(WEFT={"OWNERSHIP": "none", "TRANSPORT": "celery"}):
        assert _ids(check_weft_settings()) == ["weft.E013"]
    with override_settings(WEFT={"OWNERSHIP": "workflow-lease", "TRANSPORT": "celery"}):
        assert check_weft_settings() == []


@pytest.mark.parametrize("pool", ["prefork", "threads", "solo"])
def test_supported_celery_pools_pass(pool: str) -> None:
    assert check_celery_pool(pool) == []


@pytest.mark.parametrize("pool", ["gevent", "eventlet", "custom"])
def test_other_celery_pools_are_e014(pool: str) -> None:
    messages = check_celery_pool(pool)
    assert _ids(messages) == ["weft.E014"]
    assert repr(pool) in messages[0].msg
