"""Which tasks are weft's: the ``TASKS`` aliases naming this backend, and a task
found by its module path (what a worker has when it picks up a task's run)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from weft_django.tasks.compat import api_of_task

BACKEND_PREFIX = "weft_django.tasks"
#: Names that did not import as a weft task (never imported twice).
_not_tasks: set[str] = set()


def weft_aliases() -> list[str]:
    """The ``TASKS`` aliases whose backend is this package's."""
    configured = getattr(settings, "TASKS", None)
    if not isinstance(configured, dict):
        return []
    return [
        alias
        for alias, entry in configured.items()
        if isinstance(entry, dict) and str(entry.get("BACKEND", "")).startswith(BACKEND_PREFIX)
    ]


def is_weft_task(obj: Any) -> bool:
    if api_of_task(obj) is None:
        return False
    try:
        return bool(getattr(obj.get_backend(), "is_weft_task_backend", False))
    except Exception:  # an alias no longer configured: not ours
        return False


def load_task(name: str) -> Any:
    """The weft task at module path ``name``, or ``None``."""
    if name in _not_tasks or "." not in name:
        return None
    try:
        obj = import_string(name)
    except (ImportError, AttributeError, ValueError, TypeError):
        obj = None
    if obj is None or not is_weft_task(obj):
        _not_tasks.add(name)
        return None
    return obj
