"""Checks of ``settings.WEFT`` and of the database and Celery pool it runs on.

The settings rules live in ``conf`` and the database capability rule in
``weft_django.db`` (the engine's start-up gate applies the same rule); these
functions only turn their findings into check messages, so ``manage.py
check`` and a starting engine refuse the same things.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from weft_django import db as store
from weft_django.conf import evaluate_settings
from weft_django.engine.schedules.sync import declared_workflow_problems

SUPPORTED_CELERY_POOLS = ("prefork", "threads", "solo")


def check_weft_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    weft, problems = evaluate_settings()
    messages: list[checks.CheckMessage] = [
        checks.Error(p.message, hint=p.hint, id=p.id) for p in problems
    ]
    messages.extend(check_database(weft.database, weft.ownership))
    messages.extend(declared_workflow_problems(weft))
    if weft.transport == "celery":
        messages.extend(check_celery_ownership(weft.ownership))
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
