"""``client.start`` and ``client.signal_with_start``: the arguments of a start.

Invariants: every argument is checked before anything is written (a bad
call leaves the database as it was); the write itself is the engine's one
start write (``engine.operations.start``), inside the caller's transaction
when there is one, its wake sent on that commit. ``start`` never claims: it
writes the run as ``pending`` and an engine folds its acquire into the
pickup (ADR 0002: *intentionally external*).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Generator
from datetime import datetime, timedelta
from typing import Any, TypeVar, Unpack, overload

from weft_django.client.aio import asyncify
from weft_django.client.handle import WorkflowHandle
from weft_django.client.start_types import StartOptions, start_target
from weft_django.engine import tracing
from weft_django.engine.operations import signal_with_start as sws
from weft_django.engine.operations import start as starting
from weft_django.engine.operations.conflict import ON_CONFLICT, OnConflict, start_with_policy
from weft_django.errors import InvalidArgumentError
from weft_django.kernel.clock import now_ms
from weft_django.kernel.durations import to_ms
from weft_django.kernel.ids import is_storable_text
from weft_django.ownership.codec import MAX_TIMESTAMP_EXCLUSIVE


def _ms_from_now(value: timedelta | float | int | None, what: str) -> int | None:
    if value is None:
        return None
    try:
        at = now_ms() + to_ms(value, what)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgumentError(what, str(exc)) from None
    if at >= MAX_TIMESTAMP_EXCLUSIVE:  # the store keeps instants below 2**53 ms
        raise InvalidArgumentError(what, f"{what} is too far in the future, got {value!r:.100}")
    return at


I = TypeVar("I")  # noqa: E741 - the input type
R = TypeVar("R")


@overload
def start(
    name: Callable[[Any, I], Awaitable[R]], input: I, **options: Unpack[StartOptions]
) -> WorkflowHandle[R]: ...
@overload
def start(
    name: Callable[[Any, I], Generator[Any, Any, R]], input: I, **options: Unpack[StartOptions]
) -> WorkflowHandle[R]: ...
@overload
def start(
    name: str | Callable[..., Any], input: Any = None, **options: Unpack[StartOptions]
) -> WorkflowHandle[Any]: ...
def start(
    name: Any,
    input: Any = None,
    *,
    workflow_id: str | None = None,
    idempotency_key: str | None = None,
    start_after: timedelta | float | None = None,
    start_at: datetime | None = None,
    execution_timeout: timedelta | float | None = None,
    on_conflict: OnConflict = "error",
    queue: str | None = None,
    priority: int = 0,
    concurrency_key: str | None = None,
    fairness_key: str | None = None,
    fairness_weight: int | None = None,
) -> WorkflowHandle[Any]:
    """Write a ``pending`` run; an engine picks it up. Nothing is claimed here.

    ``name``: the workflow's name, or its ``@workflow`` function -- then the
    handle is typed by its return annotation and ``result()`` rebuilds the
    result as that type (``client.start_types``).

    ``on_conflict`` (a run of ``workflow_id`` exists): ``"error"`` (a live or
    a finished one), ``"start-new"`` (after a finished one), ``"use-existing"``
    (a live one's handle is returned, else a new run), ``"terminate-existing"``
    (a live one ends ``terminated``, its children cancelled, then the new run).

    ``queue`` (default: the workflow's ``@workflow(queue=...)``),
    ``priority`` and ``concurrency_key``: flow control (``engine.queues``);
    ``fairness_key`` (default: the concurrency key) and ``fairness_weight``
    (admissions per round, default 1): a ``fair`` queue's round robin.
    Traced as ``weft.start <name>`` (``engine.tracing``): its context is the
    run's ``trace_context``, written by the insert itself."""
    name, rebuild = start_target(name)
    with tracing.start_span(name, source="client", workflow_id=workflow_id) as span:
        new = _checked(
            name,
            input,
            workflow_id=workflow_id,
            idempotency_key=idempotency_key,
            start_after=start_after,
            start_at=start_at,
            execution_timeout=execution_timeout,
            on_conflict=on_conflict,
            queue=queue,
            priority=priority,
            concurrency_key=concurrency_key,
            fairness_key=fairness_key,
            fairness_weight=fairness_weight,
        )
        run, _created = start_with_policy(new, on_conflict)
        handle: WorkflowHandle[Any] = WorkflowHandle(run.workflow_id, str(run.pk), rebuild)
        tracing.annotate(span, workflow_id=handle.workflow_id, run_id=handle.run_id)
        return handle


astart = asyncify(start)


def _checked(
    name: str,
    input: Any,
    *,
    workflow_id: str | None,
    idempotency_key: str | None,
    start_after: timedelta | float | None,
    start_at: datetime | None,
    execution_timeout: timedelta | float | None,
    on_conflict: OnConflict,
    queue: str | None,
    priority: int,
    concurrency_key: str | None,
    fairness_key: str | None = None,
    fairness_weight: int | None = None,
) -> starting.NewRun:
    """``start``'s arguments, checked in order; nothing is written."""
    new = starting.new_run(
        name,
        input,
        str(uuid.uuid4()) if workflow_id is None else workflow_id,
        queue=queue,
        priority=priority,
        concurrency_key=concurrency_key,
        fairness_key=fairness_key,
        fairness_weight=fairness_weight,
    )
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= 255
        or not is_storable_text(idempotency_key)
    ):
        raise InvalidArgumentError(
            "idempotency_key",
            "idempotency_key must be a string of 1 to 255 characters (no NUL, no lone "
            f"surrogate), got {idempotency_key!r:.300}",
        )
    if on_conflict not in ON_CONFLICT:
        raise InvalidArgumentError(
            "on_conflict",
            f"on_conflict must be one of {', '.join(map(repr, ON_CONFLICT))}, "
            f"got {on_conflict!r:.100}",
        )
    if start_at is not None and start_after is not None:
        raise InvalidArgumentError("start_at", "give start_at or start_after, not both")
    begin_at = _ms_from_now(start_after, "start_after")
    if start_at is not None:
        if not isinstance(start_at, datetime) or start_at.tzinfo is None:
            raise InvalidArgumentError(
                "start_at", f"start_at must be an aware datetime, got {start_at!r:.100}"
            )
        begin_at = int(start_at.timestamp() * 1000)
    deadline = _ms_from_now(execution_timeout, "execution_timeout")
    if deadline is not None and begin_at is not None:
        deadline += max(0, begin_at - now_ms())
    return dataclasses.replace(
        new,
        idempotency_key=idempotency_key,
        start_at=begin_at,
        deadline_at=deadline,
        after_finished=on_conflict == "start-new",
    )


def signal_with_start(
    name: str, input: Any, workflow_id: str, signal: str, payload: Any = None
) -> WorkflowHandle[Any]:
    """Start ``name`` unless a live run has ``workflow_id``; signal it either way,
    atomically (``engine.operations.signal_with_start``)."""
    run, _message, _started = sws.signal_with_start(name, input, workflow_id, signal, payload)
    return WorkflowHandle(workflow_id, str(run.pk))


asignal_with_start = asyncify(signal_with_start)

__all__ = ["asignal_with_start", "astart", "signal_with_start", "start"]
