"""The backend's ``task_class``: a Django ``Task`` with weft's retry policy.

``@task(retries=3, backoff=timedelta(seconds=2), timeout=timedelta(seconds=30),
non_retryable=(ValueError,))`` -- Django 6.1 and the backport pass ``task()``
keyword arguments to the backend's ``task_class``; on Django 6.0 (which does
not) the backend's ``OPTIONS`` give the defaults (``RETRIES``, ``BACKOFF``,
``TIMEOUT``, ``MAX_BACKOFF``, ``JITTER``). ``None`` means "the backend's
default". They become the task activity's policy (``@activity`` has the same
words and meanings): ``retries=3`` is up to 4 attempts, each retry waits on a
durable timer, a ``timeout`` abandons the attempt and counts as a failed one.

The options are checked when the task is created (at import of its module,
or by ``using()``), and a bad one is Django's ``InvalidTask`` naming it. An
unknown keyword is the dataclass's ``TypeError`` naming it, as Django's own
``Task`` raises.

One class per API (``django.tasks`` and the backport each have their own
``Task``): ``task_class_for(api)``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from weft_django.tasks.compat import Api

#: The policy fields a weft task adds to Django's ``Task``.
POLICY_FIELDS = ("retries", "backoff", "timeout", "non_retryable", "max_backoff", "jitter")


def _check_duration(api: Api, name: str, value: Any, *, allow_zero: bool = True) -> None:
    if value is None:
        return
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise api.InvalidTask(f"{name} must be a timedelta or seconds, got {value!r:.100}")
    if (
        math.isnan(seconds)
        or math.isinf(seconds)
        or seconds < 0
        or (not allow_zero and not seconds)
    ):
        raise api.InvalidTask(f"{name} must be a finite, non-negative duration, got {value!r:.100}")


def check_policy(api: Api, task: Any) -> None:
    """``InvalidTask`` naming the first bad policy option of ``task``."""
    retries = task.retries
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
    ):
        raise api.InvalidTask(f"retries must be a non-negative integer, got {retries!r:.100}")
    _check_duration(api, "backoff", task.backoff)
    _check_duration(api, "timeout", task.timeout, allow_zero=False)
    _check_duration(api, "max_backoff", task.max_backoff)
    non_retryable = task.non_retryable
    if not isinstance(non_retryable, tuple) or not all(
        isinstance(kind, type) and issubclass(kind, BaseException) for kind in non_retryable
    ):
        raise api.InvalidTask(
            f"non_retryable must be a tuple of exception classes, got {non_retryable!r:.200}"
        )
    jitter = task.jitter
    if jitter is not None and (
        isinstance(jitter, bool)
        or not isinstance(jitter, int | float)
        or math.isnan(jitter)
        or not 0 <= jitter <= 1
    ):
        raise api.InvalidTask(f"jitter must be a fraction between 0 and 1, got {jitter!r:.100}")


@functools.cache
def task_class_for(api: Api) -> type:
    """The weft ``Task`` subclass of ``api``'s ``Task``."""
    base: Any = api.Task

    @dataclass(frozen=True, slots=True, kw_only=True)
    class WeftTask(base):  # type: ignore[misc,valid-type]
        """A Django task run by weft: one durable run per enqueue, its function one activity."""

        retries: int | None = None
        backoff: timedelta | float | None = None
        timeout: timedelta | float | None = None
        non_retryable: tuple[type[BaseException], ...] = ()
        max_backoff: timedelta | float | None = None
        jitter: float | None = None

        def __post_init__(self) -> None:
            if isinstance(self.non_retryable, list):
                object.__setattr__(self, "non_retryable", tuple(self.non_retryable))
            check_policy(api, self)
            base.__post_init__(self)

    WeftTask.__module__ = __name__
    WeftTask.__qualname__ = WeftTask.__name__ = (
        "WeftTask" if api.module == "django.tasks" else "WeftBackportTask"
    )
    return WeftTask


def policy_of(task: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The activity policy of ``task``: its own options, else the backend's ``OPTIONS``."""

    def pick(field: str, option: str, default: Any) -> Any:
        value = getattr(task, field, None)
        if value is None or (field == "non_retryable" and not value):
            value = options.get(option, default)
        return value

    return {
        "retries": pick("retries", "RETRIES", 0),
        "backoff": pick("backoff", "BACKOFF", timedelta(seconds=1)),
        "timeout": pick("timeout", "TIMEOUT", None),
        "non_retryable": tuple(pick("non_retryable", "NON_RETRYABLE", ())),
        "max_backoff": pick("max_backoff", "MAX_BACKOFF", None),
        "jitter": pick("jitter", "JITTER", 0.0),
    }
