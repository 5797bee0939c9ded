"""A ``TaskResult`` read from storage: the run row, its journal and the attempt records.

What each field is made of (all durable, so any process reads the same):

- ``status``: the run's status -- ``pending`` is READY; ``running``,
  ``parked`` (a retry's backoff timer) and ``suspended`` are RUNNING;
  ``completed`` is SUCCESSFUL; ``failed``, ``cancelled`` and ``timed_out``
  are FAILED (Django has no CANCELLED state).
- ``enqueued_at``: the run's ``created_at``; ``started_at``: the first
  attempt's start (else the run's pickup); ``last_attempted_at``: the last
  attempt's start; ``finished_at``: the run's.
- ``worker_ids``: one engine id per attempt, from the attempt records the
  task's activity writes (fenced) before it calls the function
  (``runner``): a retry is an attempt, and so is the attempt a takeover
  starts after a worker died mid-task -- ``attempts`` counts both.
- ``errors``: one ``TaskError`` per failed attempt: the exception the
  function raised (class path and traceback), ``TimeoutError`` for an
  attempt abandoned at its ``timeout``, ``WorkerLost`` for an attempt whose
  worker stopped (killed, or deposed) before it finished; a cancel is
  ``WorkflowCancelled`` naming its reason.
- ``return_value``: the run's result, which the activity already
  JSON-normalised as Django does (``normalize_json``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from weft_django.conf import get_settings
from weft_django.models import ActivityHeartbeat, WorkflowRun
from weft_django.tasks.compat import Api

#: The key of the attempt records in the task activity's heartbeat details.
ATTEMPTS_KEY = "task_attempts"

STATUS_OF_RUN = {
    "pending": "READY",
    "running": "RUNNING",
    "parked": "RUNNING",
    "suspended": "RUNNING",
    "completed": "SUCCESSFUL",
    "failed": "FAILED",
    "cancelled": "FAILED",
    "timed_out": "FAILED",
}


class WorkerLost(Exception):
    """An attempt's worker stopped (killed or deposed) before the attempt finished;
    another engine took the task over and started the next attempt."""


def attempt_records(run_id: Any, db: str | None = None) -> list[dict[str, Any]]:
    """The task's attempt records (oldest first), from its activity's heartbeat row."""
    db = db or get_settings().database
    for details in (
        ActivityHeartbeat.objects.using(db)
        .filter(run_id=run_id)
        .order_by("position")
        .values_list("details", flat=True)
    ):
        if isinstance(details, dict) and isinstance(details.get(ATTEMPTS_KEY), list):
            return list(details[ATTEMPTS_KEY])
    return []


def _when(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def _error(api: Api, path: str, text: str) -> Any:
    return api.TaskError(exception_class_path=path, traceback=text)


def errors_of(api: Api, run: WorkflowRun, records: list[dict[str, Any]]) -> list[Any]:
    """One ``TaskError`` per failed attempt, then one for a cancel."""
    errors: list[Any] = []
    last = len(records) - 1
    for index, record in enumerate(records):
        error = record.get("error")
        if isinstance(error, dict):
            errors.append(
                _error(api, str(error.get("exception_class_path")), str(error.get("traceback")))
            )
            continue
        if index < last:
            # Followed by another attempt without having failed by itself: the
            # worker stopped and another engine took the task over (an attempt
            # its engine's death cut short is counted, so the number moves on
            # then too), or the policy counted a timeout on the same worker.
            following = records[index + 1]
            taken_over = following.get("worker_id") != record.get("worker_id")
            if not taken_over and following.get("attempt") != record.get("attempt"):
                errors.append(_error(api, "builtins.TimeoutError", "the attempt timed out"))
            else:
                engine = record.get("worker_id")
                errors.append(
                    _error(
                        api,
                        f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
                        f"worker {engine} stopped before the attempt finished; "
                        "the task was taken over",
                    )
                )
        elif run.status in ("failed", "timed_out"):
            run_error = run.error if isinstance(run.error, dict) else {}
            found = run_error.get("fields")
            fields: dict[str, Any] = found if isinstance(found, dict) else {}
            kind = str(fields.get("kind") or run_error.get("kind") or "")
            message = str(fields.get("message") or run_error.get("message") or run.error)
            if kind == "timeout" or run.status == "timed_out":
                errors.append(_error(api, "builtins.TimeoutError", message))
            else:
                errors.append(_error(api, "weft_django.errors.ActivityError", message))
    if run.status == "cancelled":
        stored = run.error if isinstance(run.error, dict) else {}
        reason = run.cancel_reason or str(stored.get("message") or "cancelled")
        errors.append(
            _error(
                api,
                "weft_django.errors.WorkflowCancelled",
                f"WorkflowCancelled: the task's run was cancelled: {reason}",
            )
        )
    elif run.status == "failed" and not records:
        message = str(
            (run.error or {}).get("message") if isinstance(run.error, dict) else run.error
        )
        errors.append(_error(api, "weft_django.errors.ActivityError", message))
    return errors


def build_result(
    api: Api,
    task: Any,
    run: WorkflowRun,
    alias: str,
    *,
    records: list[dict[str, Any]] | None = None,
) -> Any:
    """The ``TaskResult`` of ``task`` for ``run`` (the latest run of its workflow id)."""
    if records is None:
        records = attempt_records(run.pk)
    stored = run.input if isinstance(run.input, dict) else {}
    status = api.TaskResultStatus[STATUS_OF_RUN.get(run.status, "RUNNING")]
    if status == api.TaskResultStatus.READY and records:
        status = api.TaskResultStatus.RUNNING  # a resumed or retried run, waiting for pickup
    first = _when(records[0].get("started_at")) if records else None
    last = _when(records[-1].get("started_at")) if records else None
    result = api.TaskResult(
        task=task,
        id=run.workflow_id,
        status=status,
        enqueued_at=run.created_at,
        started_at=first or run.started_at,
        finished_at=run.finished_at,
        last_attempted_at=last or run.started_at,
        args=list(stored.get("args") or []),
        kwargs=dict(stored.get("kwargs") or {}),
        backend=alias,
        errors=errors_of(api, run, records),
        worker_ids=[str(record.get("worker_id")) for record in records],
    )
    if run.status == "completed":
        object.__setattr__(result, "_return_value", run.result)
    return result
