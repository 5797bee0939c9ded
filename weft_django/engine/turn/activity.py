"""The ``ctx.run`` step: start an attempt on the executor, commit its outcome.

Why two halves: every open activity of a turn runs at once (``ctx.all``,
``ctx.map``, a race), so the step only *starts* an attempt on the engine's
``ActivityExecutor`` (``start_attempt``) and the turn commits each outcome
as it lands (``finish_attempt``): the result, the final error, or a retry
timer with backoff, each in its own fenced batch. User code never runs
inside a transaction or under a row lock -- except an *atomic* activity's
(``@activity(atomic=True)``, ``engine.atomic``): it runs here, on the turn
thread, inside the transaction that then commits its result through the
same fenced checkpoint, so its own writes and its journal entry commit
together or not at all. Every attempt that runs here (plain or atomic) is
first recorded as started (``engine.activities.started``): a marker found by
the next owner is an attempt its engine's death ended, settled as a failed
attempt (``AttemptInterrupted``) that obeys ``retries``. An attempt is not started when
this engine already knows its claim is gone: its result could never be
recorded. The attempt's ``activity_info()`` is built here, where the run,
the position, the attempt number and the epoch are known, with the
``AttemptControl`` that its heartbeats and the turn share.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from weft_django.engine import tracing
from weft_django.engine.activities import attempt_log
from weft_django.engine.activities.atomic import run_atomic
from weft_django.engine.activities.attempt_context import attempt_info
from weft_django.engine.activities.attempt_context import attempt_span as span_of
from weft_django.engine.activities.attempts import attempt_row, marker_started_ms, started_since
from weft_django.engine.activities.executor import ActivityOutcome
from weft_django.engine.activities.heartbeats import heartbeat_sink
from weft_django.engine.activities.info import ActivityInfo, AttemptControl
from weft_django.engine.activities.pending import OnSuccess, PendingAttempt
from weft_django.engine.activities.started import (
    MARKER_KIND,
    AttemptInterrupted,
    interrupted_policy,
    marked_attempt,
    record_started,
)
from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.replay.tracebacks import activity_cause, safe_str
from weft_django.engine.runs.metrics import attempt_outcome, record_attempt
from weft_django.engine.turn.activity_slots import (
    activity_slot,
    release_activity_slot,
    wait_for_activity_slot,
)
from weft_django.engine.turn.commit import TurnAborted, TurnState
from weft_django.engine.turn.routed import expire_routed, start_routed
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.engine.workflow.commands import RunActivity
from weft_django.engine.workflow.definitions import get_activity
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import ActivityError, ActivityErrorKind, PayloadError
from weft_django.kernel.clock import wall_ms
from weft_django.models import Timer
from weft_django.ownership.ops import Delete, Insert


def run_activity(
    turn: TurnState, leaf: Leaf, command: RunActivity, inbox: RunInbox, now: int
) -> bool:
    return start_attempt(turn, leaf, command.name, command.args, command.kwargs, inbox, now)


def start_attempt(
    turn: TurnState,
    leaf: Leaf,
    name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    inbox: RunInbox,
    now: int,
    *,
    on_success: OnSuccess | None = None,
    secret: str | None = None,
) -> bool:
    """Start one attempt of activity ``name`` unless one is running or its
    retry timer is not due. Returns whether something was committed (only an
    unknown activity's error is: starting commits nothing -- and an atomic
    activity, which runs and commits here).

    ``secret`` (a hand-out's async token) is cut out of any error text before
    it is stored: the token is only ever stored as its hash.
    """
    if leaf.id in turn.attempts:
        return False
    marker = inbox.timers.get((MARKER_KIND, leaf.id))
    started = marked_attempt(marker)
    if started is not None:  # its engine stopped while it ran: that attempt failed
        return _interrupted(turn, leaf, name, started, marker)
    timer = inbox.timers.get(("retry", leaf.id))
    if timer is not None and timer.fire_at > now:
        return False
    number = int((timer.payload or {}).get("attempt", 1)) if timer is not None else 1
    try:
        definition = get_activity(name)
    except LookupError as exc:
        return turn.settle(leaf, error=ActivityError(name, str(exc), kind="non_retryable"))
    turn.still_owner()
    host = turn.host
    if definition.atomic:
        began = _mark_started(turn, leaf, number, inbox)
        return _run_atomic(turn, leaf, definition, number, args, kwargs, on_success, secret, began)
    if definition.queue is not None and not activity_slot(turn, leaf.id, definition.queue):
        # No slot of its queue now: ask again in a moment (a retry timer, same attempt).
        return wait_for_activity_slot(turn, leaf.id, number, now)
    if definition.celery_queue is not None:  # engine.turn.routed
        return start_routed(
            turn,
            leaf,
            definition,
            number,
            args,
            kwargs,
            lambda control: _info(turn, leaf, number, control),
            on_success,
            secret,
            span_for=lambda: attempt_span(turn, leaf, definition, number),
        )
    began = _mark_started(turn, leaf, number, inbox)
    control = AttemptControl(
        wall_ms,  # the executor's clock: an attempt's timeouts are real time
        heartbeat_timeout_ms=definition.heartbeat_timeout_ms,
        sink=heartbeat_sink(
            host,
            run_id=turn.run.pk,
            workflow_id=turn.run.workflow_id,
            position=leaf.id,
            attempt=number,
        ),
    )
    span = attempt_span(turn, leaf, definition, number)
    with tracing.current(span):  # the attempt runs in a copy of this context
        handle = host.activity_executor.submit(
            definition, args, kwargs, _info(turn, leaf, number, control)
        )
    tracing.end_with_future(span, handle.future)
    handle.future.add_done_callback(lambda _: turn.attention.set())
    turn.attempts[leaf.id] = PendingAttempt(
        leaf, definition, number, handle, on_success, secret, started_ms=began
    )
    return False


def _mark_started(turn: TurnState, leaf: Leaf, number: int, inbox: RunInbox) -> int | None:
    """Record attempt ``number`` at ``leaf`` as started, before its code runs
    (``engine.activities.started``); the turn's known timers include it.
    Returns the instant it recorded."""
    run = turn.run
    marker = record_started(
        turn.host, run_id=run.pk, workflow_id=run.workflow_id, position=leaf.id, attempt=number
    )
    if marker is None:
        raise TurnAborted(run.workflow_id)
    inbox.timers[(MARKER_KIND, leaf.id)] = marker
    return marker_started_ms(marker)


def _interrupted(turn: TurnState, leaf: Leaf, name: str, number: int, marker: Any) -> bool:
    """Settle attempt ``number``, found started (``marker``) and never settled, as failed."""
    try:
        definition = get_activity(name)
    except LookupError as exc:
        return turn.settle(leaf, error=ActivityError(name, str(exc), kind="non_retryable"))
    record_attempt(turn.host.metrics, name, "failed", 0.0)
    outcome = ActivityOutcome(ok=False, error=AttemptInterrupted(marker.engine_id))
    policy = interrupted_policy(definition, turn.host.settings.max_recovery_attempts)
    began = marker_started_ms(marker)
    return finish_outcome(turn, leaf, policy, number, outcome, started_ms=began)


def _run_atomic(
    turn: TurnState,
    leaf: Leaf,
    definition: ActivityDefinition,
    number: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    on_success: OnSuccess | None,
    secret: str | None,
    started_ms: int | None,
) -> bool:
    """An atomic attempt, run here on the turn thread (``engine.atomic``): its
    result commits inside its transaction (with its history row); a failure
    is recorded after the rollback, exactly as a plain attempt's."""
    name = definition.name

    def prepare(value: Any) -> Any:
        return normalize(f"result of activity {name!r}", value)

    def commit(value: Any) -> bool:
        row = attempt_row(turn.host, turn.run, leaf.id, number, name, started_ms)
        if on_success is not None:
            turn.deferred.append(row)
            return bool(on_success(value))
        return turn.settle(leaf, result=value, hold=False, writes=[row])

    # No heartbeat sink: a heartbeat batch would lock the claim and run rows
    # inside the body's transaction, before its own rows (the lock order).
    info = _info(turn, leaf, number, AttemptControl(wall_ms))
    began = time.monotonic()
    span = attempt_span(turn, leaf, definition, number)
    try:
        with tracing.current(span):
            ended = run_atomic(
                definition,
                tuple(args),
                dict(kwargs),
                info,
                db=turn.db,
                clock_ms=wall_ms,
                prepare=prepare,
                commit=commit,
            )
    except BaseException as exc:
        tracing.end_attempt(span, ok=False, error=exc)
        raise
    failure = ended.failure
    if failure is not None:
        tracing.end_attempt(span, ok=failure.ok, error=failure.error, timed_out=failure.timed_out)
    else:
        tracing.end_attempt(span, ok=ended.unrecordable is None, error=ended.unrecordable)
    outcome = (
        attempt_outcome(failure.ok, failure.timed_out)
        if failure is not None
        else ("completed" if ended.unrecordable is None else "failed")
    )
    record_attempt(turn.host.metrics, name, outcome, time.monotonic() - began)
    if ended.committed is not None:
        return ended.committed
    if ended.unrecordable is not None:
        bad = ended.unrecordable
        text = safe_str(bad).replace(secret, "<token>") if secret else safe_str(bad)
        row = attempt_row(turn.host, turn.run, leaf.id, number, name, started_ms, bad, text)
        return _settle_unrecordable(turn, leaf, name, bad, number, row)
    assert ended.failure is not None
    return finish_outcome(
        turn, leaf, definition, number, ended.failure, secret=secret, started_ms=started_ms
    )


def _settle_unrecordable(
    turn: TurnState, leaf: Leaf, name: str, exc: BaseException, number: int, row: Insert
) -> bool:
    error = ActivityError(
        name, str(exc), kind="non_retryable", error_type=type(exc).__name__, attempts=number
    )
    return turn.settle(leaf, error=error, writes=[row])


def finish_attempt(turn: TurnState, pending: PendingAttempt, outcome: ActivityOutcome) -> bool:
    """Commit a finished attempt: its result, its final error, or its next retry."""
    record_attempt(
        turn.host.metrics,
        pending.definition.name,
        attempt_outcome(outcome.ok, outcome.timed_out),
        time.monotonic() - pending.submitted,
    )
    return finish_outcome(
        turn,
        pending.leaf,
        pending.definition,
        pending.number,
        outcome,
        on_success=pending.on_success,
        secret=pending.secret,
        started_ms=(
            started_since(turn.host.now_ms(), pending.submitted)
            if pending.started_ms is None
            else pending.started_ms
        ),
    )


def finish_outcome(
    turn: TurnState,
    leaf: Leaf,
    definition: ActivityDefinition,
    number: int,
    outcome: ActivityOutcome,
    *,
    on_success: OnSuccess | None = None,
    secret: str | None = None,
    started_ms: int | None = None,
) -> bool:
    """Commit an attempt's outcome -- its result, its final error, or its next
    retry -- and, in that same batch, its history row (``started_ms``: when it began)."""
    name = definition.name
    if definition.queue is not None:  # the attempt's slot frees in the commit of its outcome
        turn.deferred.append(release_activity_slot(turn, leaf.id))

    def describe(failure: BaseException) -> str:
        text = safe_str(failure)
        return text.replace(secret, "<token>") if secret else text

    # Its history row, committed with its outcome (``engine.activities.attempts``).
    ended = functools.partial(attempt_row, turn.host, turn.run, leaf.id, number, name, started_ms)

    if outcome.ok:
        try:
            value = normalize(f"result of activity {name!r}", outcome.value)
        except PayloadError as exc:
            return _settle_unrecordable(turn, leaf, name, exc, number, ended(exc, describe(exc)))
        row = ended()
        if on_success is not None:  # its commit is the hand-out's: the row rides on it
            turn.deferred.append(row)
            return bool(on_success(value))
        return turn.settle(leaf, result=value, writes=[row])
    failure = outcome.error
    assert failure is not None
    non_retryable = isinstance(failure, definition.non_retryable)
    # A routed token answers no more.
    expired = [*expire_routed(turn.run.pk, leaf.id, definition), ended(failure, describe(failure))]
    host = turn.host
    log = functools.partial(
        attempt_log.attempt_failed,
        workflow_id=turn.run.workflow_id,
        run_id=str(turn.run.pk),
        activity=name,
        attempt=number,
        max_attempts=definition.retries + 1,
        error=failure,
        message=describe(failure),
        with_traceback=not secret,
    )
    if non_retryable or number > definition.retries:
        kind: ActivityErrorKind = (
            "timeout" if outcome.timed_out else ("non_retryable" if non_retryable else "error")
        )
        log(
            retry_at_ms=None,
            now_ms=host.now_ms(),
            reason="non-retryable" if non_retryable else "retries exhausted",
        )
        error = ActivityError(
            name,
            describe(failure),
            kind=kind,
            error_type=type(failure).__name__,
            attempts=number,
        )
        cause = activity_cause(failure)  # the activity's own frames travel with the error
        if secret:
            cause.text = cause.text.replace(secret, "<token>")
        error.__cause__ = cause
        return turn.settle(leaf, error=error, writes=expired)
    fire_at = host.now_ms() + definition.backoff_for(number + 1)
    log(retry_at_ms=fire_at, now_ms=host.now_ms())
    retry_timer = Timer(
        run_id=turn.run.pk,
        position=leaf.id,
        kind="retry",
        fire_at=fire_at,
        engine_id=host.engine_id,
        epoch=host.epoch_for(turn.run.workflow_id),
        payload={
            "attempt": number + 1,
            "error": f"{type(failure).__name__}: {describe(failure)}"[:500],
        },
    )
    turn.commit(
        [
            # The retry timer it replaces and the attempt's started marker.
            Delete(Timer, {"run_id": turn.run.pk, "position": leaf.id}),
            Insert(retry_timer),
            *expired,
        ],
        run_values={"wake_at": fire_at},
    )
    return True


def attempt_span(turn: TurnState, leaf: Leaf, definition: ActivityDefinition, number: int) -> Any:
    """The attempt's ``weft.activity <name>`` span (``None``: tracing is off)."""
    return span_of(turn.host, turn.run, leaf.id, definition, number)


def _info(turn: TurnState, leaf: Leaf, number: int, control: AttemptControl) -> ActivityInfo:
    return attempt_info(turn.host, turn.run, leaf.id, number, control)


__all__ = [
    "OnSuccess",
    "PendingAttempt",
    "attempt_span",
    "finish_attempt",
    "finish_outcome",
    "run_activity",
    "start_attempt",
]
