"""``keep_connections_for_weft_tasks``: weft tasks keep their database session.

Why: Celery's Django fix-up closes every connection before and after
*every* task (unless ``CELERY_DB_REUSE_MAX`` is set), so each weft turn in
a pool process would open a new PostgreSQL session -- milliseconds on every
timer or signal wake. For a weft task the close is replaced by
``refresh_connections`` (drop a connection that broke, keep a healthy one);
every other task is closed around exactly as before, a per-task decision
``CELERY_DB_REUSE_MAX`` cannot make.

This patches a private attribute of Celery's Django fix-up
(``app._fixups[i]._worker_fixup.close_database``, Celery 5.x):
``tests/unit/test_celery_connections.py`` pins the Celery version it was
checked against, so an upgrade re-checks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery import Celery

#: The Celery releases whose Django fix-up this patch was checked against.
CHECKED_CELERY = ("5.7",)


def keep_connections_for_weft_tasks(app: Celery) -> bool:
    """Let ``weft.*`` tasks keep their database connection from task to task.

    Patched on the worker's fix-up instance before the pool forks, so every
    pool process inherits it. Idempotent. Returns whether a Django fix-up
    was found.
    """
    from celery._state import get_current_task

    from weft_django.engine.db_connections import refresh_connections

    found = False
    for fixup in getattr(app, "_fixups", None) or ():
        worker_fixup = getattr(fixup, "_worker_fixup", None)
        if worker_fixup is None or not hasattr(worker_fixup, "close_database"):
            continue
        found = True
        if getattr(worker_fixup, "_weft_keeps_connections", False):
            continue
        close_for_other_tasks = worker_fixup.close_database

        def close_database(_close: Any = close_for_other_tasks, **kwargs: Any) -> Any:
            task = get_current_task()
            if task is not None and str(getattr(task, "name", "")).startswith("weft."):
                refresh_connections()
                return None
            return _close(**kwargs)

        worker_fixup.close_database = close_database
        worker_fixup._weft_keeps_connections = True
    return found


__all__ = ["CHECKED_CELERY", "keep_connections_for_weft_tasks"]
