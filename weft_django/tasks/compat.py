"""One view of Django's Tasks API, whichever module provides it.

Why: Django >= 6.0 ships ``django.tasks``; Django 5.2 gets the same API from
the ``django-tasks`` backport (``django_tasks``), and libraries such as
Wagtail enqueue through the backport even on Django 6.x. Both modules read
the one ``TASKS`` setting, so ONE backend class serves both: each backend
instance knows which API built it (``Api``), and a task, a result or an
error is always made of the classes of the API its task belongs to.

Nothing here imports either module at import time of ``weft_django``: the
``Api`` objects are built on first use.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from traceback import format_exception
from typing import Any

#: The two modules, newest first: the default API of a backend built directly.
CORE = "django.tasks"
BACKPORT = "django_tasks"


@dataclass(frozen=True)
class Api:
    """The classes and functions of one Tasks API module."""

    module: str
    Task: type
    TaskResult: type
    TaskResultStatus: Any
    TaskContext: type
    TaskError: type
    BaseTaskBackend: type
    InvalidTask: type[Exception]
    TaskResultDoesNotExist: type[Exception]
    TaskResultMismatch: type[Exception]
    task_enqueued: Any
    task_started: Any
    task_finished: Any
    task_backends: Any
    default_queue_name: str

    def normalize_json(self, value: Any) -> Any:
        return _normalize_json(self.module)(value)


def _normalize_json(module: str) -> Any:
    if module == CORE:
        from django.utils.json import normalize_json  # type: ignore[attr-defined]
    else:
        from django_tasks.utils import normalize_json  # type: ignore[no-redef]
    return normalize_json


@functools.cache
def api(module: str) -> Api | None:
    """The API of ``module`` (``CORE`` or ``BACKPORT``); ``None`` when it is not installed."""
    try:
        package = importlib.import_module(module)
        base = importlib.import_module(f"{module}.base")
        backends_base = importlib.import_module(f"{module}.backends.base")
        exceptions = importlib.import_module(f"{module}.exceptions")
        signals = importlib.import_module(f"{module}.signals")
    except ImportError:
        return None
    invalid = getattr(exceptions, "InvalidTask", None) or exceptions.InvalidTaskError
    return Api(
        module=module,
        Task=base.Task,
        TaskResult=base.TaskResult,
        TaskResultStatus=base.TaskResultStatus,
        TaskContext=base.TaskContext,
        TaskError=base.TaskError,
        BaseTaskBackend=backends_base.BaseTaskBackend,
        InvalidTask=invalid,
        TaskResultDoesNotExist=exceptions.TaskResultDoesNotExist,
        TaskResultMismatch=exceptions.TaskResultMismatch,
        task_enqueued=signals.task_enqueued,
        task_started=signals.task_started,
        task_finished=signals.task_finished,
        task_backends=package.task_backends,
        default_queue_name=base.DEFAULT_TASK_QUEUE_NAME,
    )


def apis() -> list[Api]:
    """The installed APIs, ``django.tasks`` first."""
    return [found for found in (api(CORE), api(BACKPORT)) if found is not None]


def default_api() -> Api:
    found = apis()
    if not found:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "weft_django.tasks needs Django's Tasks framework: Django >= 6.0 (django.tasks) "
            "or, on Django 5.2, the django-tasks backport (pip install 'weft-django[tasks]')"
        )
    return found[0]


def api_of_task(task: object) -> Api | None:
    """The API whose ``Task`` class ``task`` is an instance of (``None``: not a task)."""
    for candidate in apis():
        if isinstance(task, candidate.Task):
            return candidate
    return None


def exception_path(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


def exception_traceback(exc: BaseException) -> str:
    return "".join(format_exception(exc))
