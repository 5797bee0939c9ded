"""System checks of ``TASKS`` entries that name ``WeftTaskBackend``.

weft.E060  a TASKS queue is neither a queue of WEFT["QUEUES"] nor "default"
weft.E061  TASKS names WeftTaskBackend, but neither django.tasks (Django >= 6.0)
           nor the django-tasks backport is installed

They read settings only (never the database), like every weft check.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from weft_django.tasks.lookup import weft_aliases


def check_tasks_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    aliases = weft_aliases()
    if not aliases:
        return []
    from weft_django.tasks import compat

    errors: list[checks.CheckMessage] = []
    if not compat.apis():
        errors.append(
            checks.Error(
                f"TASKS[{aliases[0]!r}] names WeftTaskBackend, but Django's Tasks framework "
                "is not installed",
                hint="Use Django >= 6.0, or on Django 5.2: pip install 'weft-django[tasks]' "
                "(the django-tasks backport).",
                id="weft.E061",
            )
        )
    try:
        from weft_django.conf import get_settings

        declared = set(get_settings().queues or {})
    except ImproperlyConfigured:  # the weft checks name the bad WEFT keys
        return errors
    for alias in aliases:
        queues = settings.TASKS[alias].get("QUEUES", ["default"])
        for queue in queues if isinstance(queues, list | tuple | set) else []:
            if queue != "default" and queue not in declared:
                errors.append(
                    checks.Error(
                        f"TASKS[{alias!r}]['QUEUES'] names {queue!r}, which is not a queue of "
                        f"WEFT['QUEUES'] ({', '.join(sorted(declared)) or 'none declared'})",
                        hint=f'Declare it: WEFT["QUEUES"] = {{{queue!r}: {{...}}}}, or drop it '
                        "from TASKS (tasks of the 'default' queue need no weft queue).",
                        id="weft.E060",
                    )
                )
    return errors


def register() -> None:
    checks.register(check_tasks_settings, "weft")
