"""What a Celery node refuses to start with: an unsupported pool, or claims
turned off (``OWNERSHIP="none"``) while several nodes could drive one run.

The one copy of each rule: ``manage.py check`` (``weft_django.checks``) and
a worker's boot (``identity``) both call these.
"""

from __future__ import annotations

from django.core import checks

SUPPORTED_CELERY_POOLS = ("prefork", "threads", "solo")


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


__all__ = ["SUPPORTED_CELERY_POOLS", "check_celery_ownership", "check_celery_pool"]
