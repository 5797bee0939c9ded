"""System checks of routed activities (``@activity(celery_queue=...)``).

weft.E034  a routed activity, but Celery is not installed
weft.E035  a routed activity, but no Celery app routes from this process
           (``weft_django.celery.install(app)`` / ``install_routing(app)``
           was not called)

Why a check and not only an attempt failure: without a dispatcher every
attempt of the activity fails (and is retried until its policy gives up);
the owner of the project should learn it when the process starts, with
the activity and its queue named. Never touches the database.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core import checks

from weft_django.engine.activities.routed_dispatch import dispatchers
from weft_django.engine.workflow.definitions import registry


def check_routed_activities(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    with registry.lock:
        routed = sorted(
            (d.name, d.celery_queue)
            for d in registry.activities.values()
            if d.celery_queue is not None
        )
    if not routed:
        return []
    named = ", ".join(f"{name!r} (celery_queue={queue!r})" for name, queue in routed)
    if importlib.util.find_spec("celery") is None:
        return [
            checks.Error(
                f"routed activities need Celery, which is not installed: {named}",
                hint='pip install "weft-django[celery]", or remove celery_queue=',
                id="weft.E034",
            )
        ]
    if dispatchers.current() is None:
        return [
            checks.Error(
                f"routed activities cannot be sent from this process: {named}",
                hint=(
                    "call weft_django.celery.install(app) (or install_routing(app)) in the "
                    "project's celery.py and import it when Django starts"
                ),
                id="weft.E035",
            )
        ]
    return []


__all__ = ["check_routed_activities"]
