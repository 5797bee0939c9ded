"""System checks with stable ids (SPEC §3). They never touch the database (the
one exception, ``replay_checks``, runs only under ``check --deploy``).

weft.E001  unknown OWNERSHIP            weft.E002  bad duration
weft.E003  CLAIM renew >= TTL           weft.E004  CLAIM TTL < 3 × renew
weft.E005  LEASE renew >= TTL           weft.E006  LEASE TTL < 3 × renew
weft.E007  unknown WEFT key             weft.E008  BACKGROUND_TASKS/TRANSPORT not a choice
weft.E010  SQLite without IMMEDIATE/EXCLUSIVE transactions
weft.E011  a database other than PostgreSQL or SQLite in a fencing mode
weft.E012  PostgreSQL isolation stricter than READ COMMITTED
weft.E013  OWNERSHIP="none" with Celery  weft.E014  unsupported Celery pool
weft.E015  WEFT['DATABASE'] names no configured database
weft.E048  a fencing mode on a backend whose features say supports_transactions=False
weft.E016  settings.WEFT is not a dict   weft.E017  TRANSPORT disagrees with install(app)
weft.E018  not a positive integer        weft.E019  API_PERMISSION_CLASSES not dotted paths
weft.E020  DATABASE not an alias         weft.E021  WAKE_BACKENDS not dotted paths
weft.E022  PROMETHEUS_COLLECTOR not a bool
weft.E023  TURN_MAX_FAILURES not an integer >= 1
weft.E024  ACTIVITY_CONCURRENCY not an integer >= 1
weft.E025  WORKFLOW_CACHE_SIZE not an integer >= 0
weft.E027  SCHEDULES (or an entry) has the wrong shape, or an id is invalid
weft.E028  a SCHEDULES entry has a bad value (cron, timezone, every, overlap, ...)
weft.E029  a SCHEDULES entry names a workflow no @workflow registers
weft.E030  a malformed WEFT['QUEUES'] entry  weft.E031  a definition names an undeclared queue
weft.E032  QUEUES without OWNERSHIP="workflow-lease"
weft.E036  ENGINE_RECORD_RETENTION not a duration  weft.E040  TRACING not a bool
weft.E045  SEARCH_ATTRIBUTES not a dict (or over 100 names)
weft.E046  a bad search attribute name   weft.E047  an unknown search attribute type
weft.W001  WEFT_PROMETHEUS_COLLECTOR (top level) is deprecated
weft.E034/E035  routed activities without Celery / without a routing app (``routing_checks``)
weft.W050  (``check --deploy`` only) a live run would break under this code (``replay_checks``)
weft.W051  (``check --deploy`` only) the replay check could not read the database

The settings rules live in ``conf`` and the database capability rule in
``weft_django.db`` (the engine's start-up gate applies the same rule); this
module only turns their findings into check messages.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks

from weft_django import db as store
from weft_django import (
    queue_checks,  # noqa: F401  (registers weft.E031, weft.E032)
    replay_checks,  # noqa: F401  (registers weft.W050, W051: deploy only)
)
from weft_django.conf import LEGACY_PROMETHEUS_SETTING, evaluate_settings
from weft_django.engine.schedules.sync import declared_workflow_problems
from weft_django.routing_checks import check_routed_activities

checks.register("weft")(check_routed_activities)

SUPPORTED_CELERY_POOLS = ("prefork", "threads", "solo")


@checks.register("weft")
def check_weft_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    weft, problems = evaluate_settings()
    messages: list[checks.CheckMessage] = [
        checks.Error(p.message, hint=p.hint, id=p.id) for p in problems
    ]
    messages.extend(check_database(weft.database, weft.ownership))
    messages.extend(declared_workflow_problems(weft))
    if weft.transport == "celery":
        messages.extend(check_celery_ownership(weft.ownership))
    if getattr(django_settings, LEGACY_PROMETHEUS_SETTING, None) is not None:
        messages.append(
            checks.Warning(
                f"settings.{LEGACY_PROMETHEUS_SETTING} is deprecated",
                hint='Set WEFT["PROMETHEUS_COLLECTOR"] instead (it wins when both are set).',
                id="weft.W001",
            )
        )
    return messages


def check_database(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """Database capability checks for the alias weft uses (no connection opened)."""
    return store.capability_problems(alias, ownership)


def check_celery_ownership(ownership: str) -> list[checks.CheckMessage]:
    """``OWNERSHIP="none"`` with Celery (``weft.E013``): the one copy of the rule,
    for ``manage.py check`` and for a worker refusing to start."""
    if ownership != "none":
        return []
    return [
        checks.Error(
            'WEFT["OWNERSHIP"] is "none" but the Celery transport is installed: '
            "several worker nodes would drive the same workflows unfenced",
            hint='Use "workflow-lease" (the default) with Celery.',
            id="weft.E013",
        )
    ]


def check_celery_pool(pool: str) -> list[checks.CheckMessage]:
    """Called by the Celery integration with the worker's pool name."""
    if pool not in SUPPORTED_CELERY_POOLS:
        return [
            checks.Error(
                f"Celery pool {pool!r} is not supported by weft-django; use one of "
                + ", ".join(SUPPORTED_CELERY_POOLS),
                id="weft.E014",
            )
        ]
    return []
