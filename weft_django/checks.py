"""System checks with stable ids (SPEC §3). They never touch the database.

weft.E001  unknown OWNERSHIP            weft.E002  bad duration
weft.E003  CLAIM renew >= TTL           weft.E004  CLAIM TTL < 3 × renew
weft.E005  LEASE renew >= TTL           weft.E006  LEASE TTL < 3 × renew
weft.E007  unknown WEFT key             weft.E008  bad value of another key
weft.E010  SQLite without IMMEDIATE/EXCLUSIVE transactions
weft.E011  a database other than PostgreSQL or SQLite in a fencing mode
weft.E012  PostgreSQL isolation stricter than READ COMMITTED
weft.E013  OWNERSHIP="none" with Celery  weft.E014  unsupported Celery pool
weft.E015  WEFT['DATABASE'] names no configured database
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.core import checks

from weft_django.conf import build_settings, settings_problems

SUPPORTED_CELERY_POOLS = ("prefork", "threads", "solo")


@checks.register("weft")
def check_weft_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    messages: list[checks.CheckMessage] = [
        checks.Error(p.message, hint=p.hint, id=p.id) for p in settings_problems()
    ]
    weft, _ = build_settings(
        {k: v for k, v in (getattr(django_settings, "WEFT", {}) or {}).items()}
        if isinstance(getattr(django_settings, "WEFT", {}), dict)
        else {}
    )
    messages.extend(check_database(weft.database, weft.ownership))
    if weft.ownership == "none" and weft.transport == "celery":
        messages.append(
            checks.Error(
                'WEFT["OWNERSHIP"] is "none" but the Celery transport is installed: '
                "several worker nodes would drive the same workflows unfenced",
                hint='Use "workflow-lease" (the default) with Celery.',
                id="weft.E013",
            )
        )
    return messages


def check_database(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """Database capability checks for the alias weft uses (no connection opened)."""
    databases = getattr(django_settings, "DATABASES", {})
    if alias not in databases:
        return [
            checks.Error(
                f"WEFT['DATABASE'] is {alias!r}, which is not in settings.DATABASES "
                f"({', '.join(databases) or 'none configured'})",
                id="weft.E015",
            )
        ]
    entry = databases[alias]
    engine = str(entry.get("ENGINE", ""))
    options = entry.get("OPTIONS", {}) or {}
    messages: list[checks.CheckMessage] = []
    if engine.endswith("sqlite3"):
        mode = str(options.get("transaction_mode", "")).upper()
        if mode not in {"IMMEDIATE", "EXCLUSIVE"}:
            messages.append(
                checks.Error(
                    f"SQLite database {alias!r} has transaction_mode "
                    f"{options.get('transaction_mode')!r}; weft-django needs IMMEDIATE or "
                    "EXCLUSIVE so that concurrent writers serialise instead of failing",
                    hint='Add "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30, '
                    '"init_command": "PRAGMA journal_mode=WAL;"}',
                    id="weft.E010",
                )
            )
    elif "postgresql" in engine or "postgis" in engine:
        isolation = options.get("isolation_level")
        if isolation is not None and _isolation_name(isolation) not in {
            "READ COMMITTED",
            "READ UNCOMMITTED",
        }:
            messages.append(
                checks.Error(
                    f"PostgreSQL database {alias!r} uses isolation level "
                    f"{_isolation_name(isolation)}; weft-django's conditional batch needs "
                    "READ COMMITTED (a stricter level turns lost races into errors)",
                    id="weft.E012",
                )
            )
    elif ownership != "none":
        messages.append(
            checks.Error(
                f"Database {alias!r} uses {engine!r}; OWNERSHIP={ownership!r} is supported on "
                "PostgreSQL and SQLite only",
                id="weft.E011",
            )
        )
    return messages


def _isolation_name(value: object) -> str:
    name = getattr(value, "name", None)
    text = str(name if name is not None else value)
    return text.replace("_", " ").upper()


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
