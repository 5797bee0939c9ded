"""Hostile ``WEFT`` settings and databases: a check error naming the key, never a crash.

Invariants protected: ``build_settings`` (what ``manage.py check``, the
engine and every ``get_settings()`` run) turns any value of any key into
either valid settings or a problem whose message names ``WEFT[key]`` --
never an exception of its own, which would crash ``manage.py check``
instead of reporting; ``get_settings()`` raises ``ImproperlyConfigured``
naming the key; and a fencing mode is refused on a database whose backend
says ``features.supports_transactions`` is ``False`` (SPEC §4.3), both by
the system check (without a connection) and by the engine's start-up gate
(reading the live connection's features), naming the alias and ENGINE.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import override_settings

from tests.support import ManualClock, StaticHost
from weft_django import db as store
from weft_django.checks import check_database
from weft_django.conf import DEFAULTS, MAX_SETTING_DURATION_MS, build_settings, get_settings
from weft_django.models import OwnershipModeMarker
from weft_django.ownership.gates import run_gates


class _Weird:
    def __repr__(self) -> str:
        return "<Weird>"


#: Values no setting accepts (each key's own valid values are removed below).
HOSTILE: list[Any] = [
    True,
    -1,
    10**40,
    float("nan"),
    float("inf"),
    "",
    "x" * 5000,
    "\x00",
    [None],
    {"a": object()},
    _Weird(),
    b"bytes",
    ("a", 1),
    timedelta(days=10**8),
]

#: Per key, the hostile values that are in fact valid for it.
VALID_FOR: dict[str, tuple[Any, ...]] = {
    "PROMETHEUS_COLLECTOR": (True,),
    "SESSION_PRESENCE": (True,),
    "TRACING": (True,),
    # Large integers are valid counts (a bound would be arbitrary).
    "WORKER_CONCURRENCY": (10**40,),
    "MAX_PAYLOAD_BYTES": (10**40,),
    "TURN_MAX_FAILURES": (10**40,),
    "MAX_RECOVERY_ATTEMPTS": (10**40,),
    "ACTIVITY_CONCURRENCY": (10**40,),
    "WORKFLOW_CACHE_SIZE": (10**40,),
    "REPLAY_CHECK_SAMPLE": (10**40,),
    # Any non-empty string is an alias; the database check (weft.E015) refuses unknown ones.
    "DATABASE": ("x" * 5000, "\x00"),
}

CASES = [
    pytest.param(key, value, id=f"{key}-{index}")
    for key in DEFAULTS
    for index, value in enumerate(HOSTILE)
    if not any(type(value) is type(ok) and value == ok for ok in VALID_FOR.get(key, ()))
]


@pytest.mark.parametrize(("key", "value"), CASES)
def test_a_hostile_setting_is_a_problem_naming_its_key(key: str, value: Any) -> None:
    settings, problems = build_settings({key: value})  # never raises
    assert problems, f"WEFT[{key!r}] = {value!r} was accepted"
    assert any(key in p.message for p in problems), [p.message for p in problems]
    assert all(p.id.startswith("weft.E") for p in problems)
    assert isinstance(settings.database, str)  # usable defaults were built meanwhile


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("CLAIM_TTL", 10**40),
        ("API_PERMISSION_CLASSES", None),
        ("API_PERMISSION_CLASSES", 3),
        ("API_PERMISSION_CLASSES", {"rest_framework.permissions.IsAdminUser": 1}),
        ("RETENTION", timedelta(days=10**8)),
    ],
)
def test_get_settings_refuses_with_improperly_configured(key: str, value: Any) -> None:
    with override_settings(WEFT={key: value}), pytest.raises(ImproperlyConfigured) as info:
        get_settings()
    assert f"WEFT[{key!r}]" in str(info.value)


def test_a_duration_at_the_bound_is_accepted_and_one_past_is_not() -> None:
    seconds = MAX_SETTING_DURATION_MS // 1000
    _, problems = build_settings({"RETENTION": seconds})
    assert problems == []
    _, problems = build_settings({"RETENTION": seconds + 1})
    assert [p.id for p in problems] == ["weft.E002"]
    assert "at most" in problems[0].message


# -- the capability gate reads features.supports_transactions (SPEC §4.3) ----------------

NO_TRANSACTIONS = {
    "ENGINE": "tests.security.notx_backend",
    "NAME": ":memory:",
    "OPTIONS": {"transaction_mode": "IMMEDIATE"},
}


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_the_check_refuses_a_backend_declaring_no_transactions(mode: str) -> None:
    databases = {**django_settings.DATABASES, "notx": NO_TRANSACTIONS}
    with override_settings(DATABASES=databases):
        messages = check_database("notx", mode)
        assert store.declared_supports_transactions(NO_TRANSACTIONS) is False
    assert [m.id for m in messages] == ["weft.E048"]
    assert "'notx'" in messages[0].msg
    assert "tests.security.notx_backend" in messages[0].msg
    assert "supports_transactions=False" in messages[0].msg
    assert repr(mode) in messages[0].msg


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_no_transactions_is_fine_without_fencing() -> None:
    databases = {**django_settings.DATABASES, "notx": NO_TRANSACTIONS}
    with override_settings(DATABASES=databases):
        assert check_database("notx", "none") == []


def test_declared_support_is_read_from_the_backend_class() -> None:
    assert store.declared_supports_transactions({"ENGINE": "django.db.backends.dummy"}) is False
    assert store.declared_supports_transactions({"ENGINE": "no.such.backend"}) is None
    assert store.declared_supports_transactions({"ENGINE": connection.settings_dict["ENGINE"]})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["workflow-lease", "lease"])
def test_the_gate_reads_the_live_connection_features(
    clock: ManualClock, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The backend class declares transactions (the check passes); the live
    # connection's features say otherwise: the gate believes the connection.
    alias = connection.alias
    assert store.capability_problems(alias, mode) == []
    monkeypatch.setattr(connection.features, "supports_transactions", False)
    host = StaticHost("engine-a", clock, ownership=mode)
    with pytest.raises(ImproperlyConfigured) as info:
        run_gates(host)
    message = str(info.value)
    assert repr(mode) in message
    assert repr(alias) in message
    assert connection.settings_dict["ENGINE"] in message
    assert "supports_transactions=False" in message
    assert not OwnershipModeMarker.objects.exists()  # refused before the marker


@pytest.mark.django_db(transaction=True)
def test_the_gate_passes_a_transactional_database(clock: ManualClock) -> None:
    assert run_gates(StaticHost("engine-a", clock)) is not None
