"""The ``ctx.run`` step: one activity attempt, then its outcome committed.

Why this order: user code never runs inside a transaction or under a row
lock. The attempt runs first (on the engine's activity runner), then its
result -- or a retry timer with backoff -- is committed in one fenced batch.
An attempt is not started when this engine already knows its claim is gone:
its result could never be recorded. The attempt runs inside an
``activity_scope``: the function's ``activity_info()`` is built here, where
the run, the position, the attempt number and the epoch are known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weft_django.engine.activity_context import (
    ActivityInfo,
    activity_scope,
    deadline_from_ms,
    idempotency_key,
)
from weft_django.engine.commands import RunActivity
from weft_django.engine.definitions import get_activity
from weft_django.engine.payload import normalize
from weft_django.engine.replay import Leaf
from weft_django.engine.store import RunInbox
from weft_django.engine.turn.commit import TurnState
from weft_django.errors import ActivityError, ActivityErrorKind, PayloadError
from weft_django.models import Timer
from weft_django.ownership.batch import Delete, Insert

OnSuccess = Callable[[Any], bool]
"""Called with an attempt's (normalized) value instead of settling the leaf."""


def run_activity(
    turn: TurnState, leaf: Leaf, command: RunActivity, inbox: RunInbox, now: int
) -> bool:
    return attempt(turn, leaf, command.name, command.args, command.kwargs, inbox, now)


def attempt(
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
    """Run one attempt of activity ``name`` (unless its retry timer is not due)
    and record the outcome: the result, the final error, or the next retry.

    ``secret`` (a hand-out's async token) is cut out of any error text before
    it is stored: the token is only ever stored as its hash.
    """

    def describe(failure: BaseException) -> str:
        text = str(failure)
        return text.replace(secret, "<token>") if secret else text

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
    with activity_scope(_info(turn, leaf, number, definition.timeout_ms)):
        outcome = host.run_activity(definition, args, kwargs)
    if outcome.ok:
        try:
            value = normalize(f"result of activity {name!r}", outcome.value)
        except PayloadError as exc:
            return turn.settle(
                leaf,
                error=ActivityError(
                    name,
                    str(exc),
                    kind="non_retryable",
                    error_type="PayloadError",
                    attempts=number,
                ),
            )
        if on_success is not None:
            return bool(on_success(value))
        return turn.settle(leaf, result=value)
    failure = outcome.error
    assert failure is not None
    non_retryable = isinstance(failure, definition.non_retryable)
    if non_retryable or number > definition.retries:
        kind: ActivityErrorKind = (
            "timeout" if outcome.timed_out else ("non_retryable" if non_retryable else "error")
        )
        return turn.settle(
            leaf,
            error=ActivityError(
                name,
                describe(failure),
                kind=kind,
                error_type=type(failure).__name__,
                attempts=number,
            ),
        )
    fire_at = host.now_ms() + definition.backoff_for(number + 1)
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
            Delete(Timer, {"run_id": turn.run.pk, "position": leaf.id, "kind": "retry"}),
            Insert(retry_timer),
        ],
        run_values={"wake_at": fire_at},
    )
    return True


def _info(turn: TurnState, leaf: Leaf, number: int, timeout_ms: int | None) -> ActivityInfo:
    host = turn.host
    workflow_id = turn.run.workflow_id
    deadline_ms = host.now_ms() + timeout_ms if timeout_ms is not None else None
    return ActivityInfo(
        workflow_id=workflow_id,
        run_id=str(turn.run.pk),
        position=leaf.id,
        attempt=number,
        epoch=host.epoch_for(workflow_id),
        idempotency_key=idempotency_key(workflow_id, leaf.id),
        deadline=deadline_from_ms(deadline_ms),
    )


__all__ = ["OnSuccess", "attempt", "run_activity"]
