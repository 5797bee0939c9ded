"""Django's Tasks framework on weft engines (``docs/howto/django-tasks.md``).

``TASKS = {"default": {"BACKEND": "weft_django.tasks.WeftTaskBackend"}}``.
The names below load lazily, so importing this package (``AppConfig.ready``
installs its resolver) imports neither ``django.tasks`` nor the backport.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "WeftTaskBackend": ("weft_django.tasks.backend", "WeftTaskBackend"),
    "WorkerLost": ("weft_django.tasks.results", "WorkerLost"),
    "task_class_for": ("weft_django.tasks.task", "task_class_for"),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'weft_django.tasks' has no attribute {name!r}") from None
    value = getattr(import_module(module_name), attr)
    globals()[name] = value
    return value


def install() -> None:
    """``AppConfig.ready``: the late-registration resolver and the system checks."""
    from weft_django.tasks import checks, registration

    registration.install()
    checks.register()


__all__ = ["WeftTaskBackend", "WorkerLost", "install", "task_class_for"]
