"""``WeftTaskBackend``: Django's Tasks framework on weft engines.

``TASKS = {"default": {"BACKEND": "weft_django.tasks.WeftTaskBackend",
"QUEUES": ["default"], "OPTIONS": {"RETRIES": 0}}}`` -- one class for
``django.tasks`` (Django >= 6.0) and the ``django_tasks`` backport: each API's
``task_backends`` builds its own instance, and the instance knows which API
built it (``compat``), so its ``task_class``, its ``TaskResult``s and its
exceptions are that API's. A task of either API runs on the same engines.

An enqueue is ONE ``client.start`` of the task's workflow (named by the
task's module path, ``registration``), inside the caller's transaction when
there is one: the run exists only if the caller commits, and an engine
picks it up then. ``TaskResult.id`` is the run's workflow id.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.utils import timezone

from weft_django import client
from weft_django.conf import get_settings
from weft_django.kernel.ids import is_workflow_id
from weft_django.models import WorkflowRun
from weft_django.tasks import compat
from weft_django.tasks.compat import Api, api_of_task
from weft_django.tasks.lookup import load_task
from weft_django.tasks.registration import ensure_registered
from weft_django.tasks.results import build_result
from weft_django.tasks.task import task_class_for

_BASES = tuple(found.BaseTaskBackend for found in compat.apis()) or (object,)


def _api_of_caller() -> Api:
    """The API whose ``task_backends`` is building this backend (else the default)."""
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            break
        module = str(frame.f_globals.get("__name__", ""))
        for name in (compat.BACKPORT, compat.CORE):
            if module == name or module.startswith(f"{name}."):
                found = compat.api(name)
                if found is not None:
                    return found
        frame = frame.f_back  # type: ignore[assignment]
    return compat.default_api()


class WeftTaskBackend(*_BASES):  # type: ignore[misc]
    """A durable, fenced backend: each task is a weft run of its own kind."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    #: What ``lookup.is_weft_task`` asks (no import of this module there).
    is_weft_task_backend = True

    def __init__(self, alias: str, params: dict[str, Any], *, api: Api | None = None) -> None:
        self.api = api or _api_of_caller()
        self.alias = alias
        self.queues = set(params.get("QUEUES", [self.api.default_queue_name]))
        self.options = params.get("OPTIONS", {}) or {}

    @property  # type: ignore[override]
    def task_class(self) -> type:
        return task_class_for(self.api)

    # -- validation ------------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        api = api_of_task(task) or self.api
        try:
            base: Any = api.BaseTaskBackend
            base.validate_task(self, task)
        except api.InvalidTask as exc:  # Django's message, with the values it judged
            raise api.InvalidTask(
                f"{exc} (task {getattr(task.func, '__qualname__', task.func)!r}: "
                f"priority={task.priority!r}, queue_name={task.queue_name!r}, "
                f"run_after={task.run_after!r})"
            ) from None
        self.weft_queue(task, api)

    def weft_queue(self, task: Any, api: Api | None = None) -> str | None:
        """The weft queue a task's ``queue_name`` maps onto (``None``: no queue)."""
        api = api or self.api
        declared = get_settings().queues or {}
        if task.queue_name in declared:
            return str(task.queue_name)
        if task.queue_name == api.default_queue_name:
            return None
        raise api.InvalidTask(
            f"Queue {task.queue_name!r} of task {task.module_path!r} is not a queue of "
            f"WEFT['QUEUES'] ({', '.join(sorted(declared)) or 'none declared'}) nor 'default'."
        )

    # -- enqueue -----------------------------------------------------------------------

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        api = api_of_task(task) or self.api
        self.validate_task(task)
        queue = self.weft_queue(task, api)
        try:
            stored_args = api.normalize_json(list(args))
            stored_kwargs = api.normalize_json(dict(kwargs))
        except (TypeError, ValueError) as exc:
            raise type(exc)(
                f"arguments of task {task.module_path!r} must be JSON values: {exc}"
            ) from exc
        name = ensure_registered(task)
        enqueued_at = timezone.now()
        handle = client.start(
            name,
            {"args": stored_args, "kwargs": stored_kwargs},
            start_at=self._start_at(task.run_after),
            queue=queue,
            priority=task.priority,
        )
        result = api.TaskResult(
            task=task,
            id=handle.workflow_id,
            status=api.TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=stored_args,
            kwargs=stored_kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        api.task_enqueued.send(sender=type(self), task_result=result)
        return result

    @staticmethod
    def _start_at(run_after: datetime | None) -> datetime | None:
        if run_after is None:
            return None
        if timezone.is_naive(run_after):  # only without USE_TZ (validate_task refuses it with)
            return timezone.make_aware(run_after, timezone.get_default_timezone())
        return run_after

    # -- results -------------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        if not isinstance(result_id, str) or not is_workflow_id(result_id):
            raise self.api.TaskResultDoesNotExist(f"no task result {result_id!r:.100}")
        db = get_settings().database
        run = WorkflowRun.objects.using(db).latest_for(result_id)
        if run is None:
            raise self.api.TaskResultDoesNotExist(f"no task result {result_id!r}")
        task = load_task(run.name)
        if task is None:
            raise self.api.TaskResultDoesNotExist(
                f"{result_id!r} is a run of workflow {run.name!r}, not of a task"
            )
        api = api_of_task(task) or self.api
        return build_result(api, task, run, self.alias)

    def check(self, **kwargs: Any) -> Iterable[Any]:
        return []  # weft.E060 (weft_django.tasks.checks) covers every weft alias once
