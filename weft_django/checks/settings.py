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


def check_weft_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    weft, problems = evaluate_settings()
    messages: list[checks.CheckMessage] = [
        checks.Error(p.message, hint=p.hint, id=p.id) for p in problems
    ]
    messages.extend(check_database(weft.database, weft.ownership))
    messages.extend(declared_workflow_problems(weft))
    if weft.transport == "celery":  # the Celery transport is installed: it is importable
        from weft_django.transports.celery.node_checks import check_celery_ownership

        messages.extend(check_celery_ownership(weft.ownership))
    return messages


def check_database(alias: str, ownership: str) -> list[checks.CheckMessage]:
    """Database capability checks for the alias weft uses (no connection opened)."""
    return store.capability_problems(alias, ownership)
