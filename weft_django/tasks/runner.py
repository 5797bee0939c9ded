"""The task's activity: one attempt of a Django task on a weft engine.

Before the function runs, the attempt writes its record -- the engine id, the
policy's attempt number, the start time -- with the attempt's heartbeat
write: ONE fenced batch under the claim, refused (``ActivityCancelled``)
when this engine no longer owns the run. So the records are exactly the
attempts that began under a live claim, in order, whichever engine ran
them; a takeover's attempt finds its predecessors and counts on from them
(``TaskContext.attempt`` is true across takeovers). An exception the
function raises is added to its attempt's record by the same kind of write
before it propagates to the activity policy (retry or fail).

``task_started`` and ``task_finished`` are sent here, in the worker process,
for the task's own runs (not when a workflow runs the task as one of its
activities).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine.activities.info import ActivityInfo, activity_info
from weft_django.engine.workflow.definitions import get_activity
from weft_django.models import ActivityHeartbeat, WorkflowClaim, WorkflowRun
from weft_django.tasks.compat import Api, api_of_task, exception_path, exception_traceback
from weft_django.tasks.lookup import load_task
from weft_django.tasks.results import ATTEMPTS_KEY, build_result

#: A stored traceback keeps its last this many characters (payloads are bounded).
TRACEBACK_CHARS = 8_000


class Attempt:
    """One attempt's state: its task, run, records and (own runs) its ``TaskResult``."""

    def __init__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.name = name
        self.info: ActivityInfo = activity_info()
        task = load_task(name)
        if task is None:
            raise LookupError(f"{name!r} is not a Django task of a WeftTaskBackend")
        self.task = task
        api = api_of_task(task)
        assert api is not None
        self.api: Api = api
        self.args, self.kwargs = args, kwargs
        self.records: list[dict[str, Any]] = []
        self.result: Any = None
        self.own_run = False

    # -- durable halves (a thread where the ORM may run) ---------------------------

    def begin(self) -> None:
        info, db = self.info, get_settings().database
        row = (
            ActivityHeartbeat.objects.using(db)
            .filter(run_id=info.run_id, position=info.position)  # type: ignore[misc]
            .values_list("details", flat=True)
            .first()
        )
        if isinstance(row, dict) and isinstance(row.get(ATTEMPTS_KEY), list):
            self.records = list(row[ATTEMPTS_KEY])
        worker = (
            WorkflowClaim.objects.using(db)
            .filter(pk=info.workflow_id)
            .values_list("engine_id", flat=True)
            .first()
        )
        self.records.append(
            {
                "worker_id": worker or "",
                "attempt": info.attempt,
                "started_at": timezone.now().isoformat(),
                "error": None,
            }
        )
        self._write()
        run = WorkflowRun.objects.using(db).filter(pk=info.run_id).first()
        if run is None:
            raise LookupError(f"run {info.run_id} of task {self.name!r} is gone")
        self.own_run = run.name == self.name
        self.result = build_result(
            self.api, self.task, run, self.task.backend, records=self.records
        )
        if not self.own_run:  # a workflow's activity: the call's own arguments
            object.__setattr__(self.result, "args", self.api.normalize_json(list(self.args)))
            object.__setattr__(self.result, "kwargs", self.api.normalize_json(self.kwargs))
        if self.own_run:
            self.api.task_started.send(
                sender=type(self.task.get_backend()), task_result=self.result
            )

    def abandoned(self) -> bool:
        """The engine gave this attempt up (its timeout, a cancel, a lost claim): its
        outcome is dropped, so it records nothing and signals nothing."""
        control = self.info.control
        return control is not None and control.cancelled

    def still_owned(self) -> bool:
        """The claim is still at this attempt's epoch: a cancel, suspend, timeout or
        takeover since the attempt began rotated it, and the outcome will be refused
        (one read, before ``task_finished`` is sent)."""
        info, settings = self.info, get_settings()
        if settings.ownership != "workflow-lease":  # no per-workflow claim to look at
            return True
        return (
            WorkflowClaim.objects.using(settings.database)
            .filter(pk=info.workflow_id, epoch=info.epoch)
            .exists()
        )

    def failed(self, exc: BaseException) -> None:
        if self.abandoned():
            return
        self.records[-1]["error"] = {
            "exception_class_path": exception_path(exc),
            "traceback": exception_traceback(exc)[-TRACEBACK_CHARS:],
        }
        self._write()
        if not self.own_run:
            return
        definition = get_activity(self.name)
        final = isinstance(exc, definition.non_retryable) or self.info.attempt > definition.retries
        if final and self.still_owned():
            errors = [*self.result.errors, self.api.TaskError(**self.records[-1]["error"])]
            self._finish("FAILED", errors=errors)

    def succeeded(self, value: Any) -> None:
        if self.own_run and not self.abandoned() and self.still_owned():
            object.__setattr__(self.result, "_return_value", value)
            self._finish("SUCCESSFUL")

    def _finish(self, status: str, **changes: Any) -> None:
        object.__setattr__(self.result, "status", self.api.TaskResultStatus[status])
        object.__setattr__(self.result, "finished_at", timezone.now())
        for key, value in changes.items():
            object.__setattr__(self.result, key, value)
        self.api.task_finished.send(sender=type(self.task.get_backend()), task_result=self.result)

    def _write(self) -> None:
        control = self.info.control
        if control is not None and control.sink is not None:
            control.sink({ATTEMPTS_KEY: self.records})  # fenced; ActivityCancelled if deposed

    # -- the call ---------------------------------------------------------------------

    def call_args(self) -> tuple[Any, ...]:
        if self.task.takes_context:
            return (self.api.TaskContext(task_result=self.result), *self.args)
        return self.args


def run_attempt(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    attempt = Attempt(name, args, kwargs)
    attempt.begin()
    try:
        value = attempt.api.normalize_json(attempt.task.call(*attempt.call_args(), **kwargs))
    except Exception as exc:
        attempt.failed(exc)
        raise
    attempt.succeeded(value)
    return value


async def arun_attempt(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    attempt = Attempt(name, args, kwargs)
    await sync_to_async(attempt.begin, thread_sensitive=False)()
    try:
        value = attempt.api.normalize_json(await attempt.task.acall(*attempt.call_args(), **kwargs))
    except Exception as exc:
        await sync_to_async(attempt.failed, thread_sensitive=False)(exc)
        raise
    await sync_to_async(attempt.succeeded, thread_sensitive=False)(value)
    return value


def make_runner(name: str, *, is_async: bool) -> Any:
    """The activity function of the task ``name``: sync, or ``async def`` for an async task."""
    if is_async:

        async def run_async_task(*args: Any, **kwargs: Any) -> Any:
            return await arun_attempt(name, args, kwargs)

        run_async_task.__qualname__ = run_async_task.__name__ = f"task:{name}"
        return run_async_task

    def run_task(*args: Any, **kwargs: Any) -> Any:
        return run_attempt(name, args, kwargs)

    run_task.__qualname__ = run_task.__name__ = f"task:{name}"
    return run_task
