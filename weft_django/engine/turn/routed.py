"""Starting a routed attempt (``@activity(celery_queue=...)``) from a turn.

Why its own step: the token row of the attempt must be committed in the
turn's fenced batch *before* its message leaves (``engine.routing``), so
only the current owner can send an attempt and a newer attempt expires the
older token in the same commit. After that the attempt is an ordinary
executor attempt (its body sends and waits), so its timeout, its retries
and its abandonment (cancel, lost claim, lost race) are the executor's and
``finish_outcome``'s, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weft_django.engine import tracing
from weft_django.engine.activities.info import ActivityInfo, AttemptControl, idempotency_key
from weft_django.engine.activities.pending import OnSuccess, PendingAttempt
from weft_django.engine.activities.routed import prepare_routed, routed_definition
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.errors import ActivityError, PayloadError
from weft_django.kernel.clock import wall_ms
from weft_django.models import RoutedAttempt, RoutedStatus
from weft_django.ownership.ops import Update, Write


def start_routed(
    turn: TurnState,
    leaf: Leaf,
    definition: ActivityDefinition,
    number: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    info_for: Callable[[AttemptControl], ActivityInfo],
    on_success: OnSuccess | None,
    secret: str | None,
    *,
    span_for: Callable[[], Any] = lambda: None,
) -> bool:
    """Commit the attempt's token row (fenced), then submit its sending body.

    ``info_for(control)`` builds the attempt's ``ActivityInfo``;
    ``span_for()`` its span (``engine.tracing``), current while the body
    sends, so the message carries it. Returns True: the token row was committed.
    """
    host = turn.host
    workflow_id = turn.run.workflow_id
    try:
        writes, _message, body = prepare_routed(
            definition=definition,
            run=turn.run,
            leaf=leaf,
            number=number,
            epoch=host.epoch_for(workflow_id),
            args=args,
            kwargs=kwargs,
            idempotency=idempotency_key(workflow_id, leaf.id),
        )
    except PayloadError as exc:
        return turn.settle(
            leaf,
            error=ActivityError(
                definition.name,
                str(exc),
                kind="non_retryable",
                error_type=type(exc).__name__,
                attempts=number,
            ),
        )
    turn.commit(writes)
    proxy = routed_definition(definition, body)
    control = AttemptControl(wall_ms)
    span = span_for()
    with tracing.current(span):  # the sending body runs in a copy of this context
        handle = host.activity_executor.submit(proxy, (), {}, info_for(control))
    tracing.end_with_future(span, handle.future)
    handle.future.add_done_callback(lambda _: turn.attention.set())
    turn.attempts[leaf.id] = PendingAttempt(leaf, proxy, number, handle, on_success, secret)
    return True


def expire_routed(run_pk: Any, position: int, definition: ActivityDefinition) -> list[Write]:
    """Writes (committed with a failed attempt's retry timer or final error)
    that expire the command's pending routed token: an answer that arrives
    after its attempt timed out or failed on the owner is refused, not
    stored. Nothing for an activity that is not routed."""
    if definition.celery_queue is None:
        return []
    return [
        Update(
            RoutedAttempt,
            {"run_id": run_pk, "position": position, "status": RoutedStatus.PENDING},
            {"status": RoutedStatus.EXPIRED},
        )
    ]


__all__ = ["expire_routed", "start_routed"]
