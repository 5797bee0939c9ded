"""Routed activities (``@activity(celery_queue=...)``): the engine's half.

A routed attempt is an ordinary attempt of the owning engine's executor
whose body, instead of the activity, *sends* the activity to a queue and
waits for its answer. So everything the executor and the turn already
guarantee holds unchanged: the attempt's ``timeout`` is enforced by the
executor's watchdog, a timed-out or failed attempt is retried under the
activity's policy (``finish_outcome``: backoff, ``retries``,
``non_retryable``), and a result arrives in the journal only through the
turn's fenced settle.

The invariants this module adds:

* **The token row is written under the fence.** ``start_routed`` commits
  the attempt's ``RoutedAttempt`` row (and expires any older pending row of
  the same command) in the turn's fenced batch *before* the message is
  sent: a deposed engine cannot send an attempt the new owner cannot see.
* **A stale answer is discarded.** ``report_routed`` (called by the worker
  that ran the task) commits an answer only if the token is still
  ``pending``, the run is live, and the workflow's claim is still at the
  epoch that sent the attempt (``ClaimCondition`` on that epoch): after a
  cancel, a suspend, a timeout (each rotates the claim), a takeover or a
  newer attempt, the answer is refused and nothing is written.
* **A lost message is re-sent after the activity's ``timeout``**: the
  waiting attempt times out (the executor's watchdog, measured from when
  the message was sent), the retry policy starts attempt n+1 with a new
  token -- a new message -- and expires the old token, so the old message,
  if it is ever delivered, is skipped by the worker (``routed_message_live``)
  or its answer refused.
* **The runtime imports no transport** (lint-imports "engine-no-interfaces"):
  a transport installs a ``RoutedDispatcher`` here (``dispatchers.install``);
  without one, an attempt fails (and is retried) naming the queue, and the
  system check ``weft.E034`` says so at start-up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.activities.info import ActivityInfo, activity_info
from weft_django.engine.activities.routed_dispatch import (
    RoutedDispatcher,
    RoutedMessage,
    dispatchers,
)
from weft_django.engine.journal import hash_token
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.workflow.activity_definition import ActivityDefinition
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import PayloadError
from weft_django.kernel.clock import wall_ms
from weft_django.models import RoutedAttempt, RoutedStatus, WorkflowRun
from weft_django.models.choices import LIVE_STATUSES as LIVE_RUN_STATUSES
from weft_django.ownership.batch import conditional_batch
from weft_django.ownership.ops import ClaimCondition, Insert, RowCondition, RunCondition, Update

logger = logging.getLogger("weft_django.engine")

#: How often a waiting routed attempt re-reads its token row: from the first
#: value, growing by half each time, up to the last (ms).
POLL_FIRST_MS = 20
POLL_MAX_MS = 500


class RoutingUnavailable(RuntimeError):
    """No transport can send this routed attempt (``weft.E034``); retried by policy."""


class RoutedActivityFailure(Exception):
    """The remote attempt raised; the dynamic subclass carries the remote type's name."""


class RoutedNonRetryable(RoutedActivityFailure):
    """The remote exception is one of the activity's ``non_retryable`` types."""


def remote_failure(error: dict[str, Any]) -> RoutedActivityFailure:
    """An exception named like the remote one (``error["type"]``), so the
    journaled ``ActivityError.error_type`` reads as if it had run here."""
    name = str(error.get("type") or "RoutedActivityFailure")[:100]
    base: type[RoutedActivityFailure] = (
        RoutedNonRetryable if error.get("non_retryable") else RoutedActivityFailure
    )
    cls = type(name, (base,), {"__module__": "weft_django.engine.activities.routed.remote"})
    return cls(str(error.get("message", "failed")))


def routed_definition(
    definition: ActivityDefinition, body: Callable[[], Any]
) -> ActivityDefinition:
    """The executor-side definition of one routed attempt: ``body`` (a
    coroutine function) instead of the function, and a remote non-retryable
    failure counting as non-retryable."""
    return dataclasses.replace(
        definition,
        fn=body,
        is_async=True,
        non_retryable=(*definition.non_retryable, RoutedNonRetryable),
    )


def prepare_routed(
    *,
    definition: ActivityDefinition,
    run: WorkflowRun,
    leaf: Leaf,
    number: int,
    epoch: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    idempotency: str,
) -> tuple[list[Any], RoutedMessage, Callable[[], Any]]:
    """The fenced writes, the message and the waiting body of one routed attempt.

    The caller (``engine.turn.routed``) commits the writes in the turn's
    fenced batch, then submits the body to the executor. Raises
    ``PayloadError`` when the arguments are not JSON payloads.
    """
    assert definition.celery_queue is not None
    payload = normalize(f"arguments of routed activity {definition.name!r}", [list(args), kwargs])
    token = secrets.token_urlsafe(32)
    token_hash = hash_token(token)
    row = RoutedAttempt(
        token_hash=token_hash,
        run_id=run.pk,
        position=leaf.id,
        attempt=number,
        epoch=epoch,
        activity=definition.name,
        queue=definition.celery_queue,
    )
    writes = [
        Update(
            RoutedAttempt,
            {"run_id": run.pk, "position": leaf.id, "status": RoutedStatus.PENDING},
            {"status": RoutedStatus.EXPIRED},
        ),
        Insert(row),
    ]
    message = RoutedMessage(
        token=token,
        activity=definition.name,
        queue=definition.celery_queue,
        args=payload[0],
        kwargs=payload[1],
        workflow_id=run.workflow_id,
        run_id=str(run.pk),
        position=leaf.id,
        attempt=number,
        epoch=epoch,
        idempotency_key=idempotency,
        deadline_ms=None,
    )
    db = get_settings().database

    async def body() -> Any:
        return await _send_and_wait(message, token_hash, db)

    return writes, message, body


async def _send_and_wait(message: RoutedMessage, token_hash: str, db: str) -> Any:
    """Awaited on the executor's event loop: send, then wait for the token row's answer.

    A coroutine, not a thread: when the attempt times out or is abandoned
    (cancel, lost claim, lost race) the executor cancels it at its next
    ``await``, so a waiting routed attempt never leaves a thread behind.
    The send runs on a worker thread (a broker client blocks); the reads use
    Django's async ORM.
    """
    info: ActivityInfo = activity_info()
    deadline = info.deadline
    deadline_ms = int(deadline.timestamp() * 1000) if deadline is not None else None
    message = dataclasses.replace(message, deadline_ms=deadline_ms, trace_context=tracing.carrier())
    dispatcher = dispatchers.current()
    if dispatcher is None:
        raise RoutingUnavailable(
            f"activity {message.activity!r} is routed to celery_queue={message.queue!r} but "
            "this process has no routing transport (weft.E035: call "
            "weft_django.celery.install(app) in the project's celery.py)"
        )
    await asyncio.to_thread(dispatcher.send, message)
    delay = POLL_FIRST_MS
    rows = RoutedAttempt.objects.using(db).filter(pk=token_hash)
    while True:
        row = await rows.values("status", "result", "error").afirst()
        status = None if row is None else row["status"]
        if row is not None and status == RoutedStatus.COMPLETED:
            return row["result"]
        if row is not None and status == RoutedStatus.FAILED:
            error = row["error"]
            raise remote_failure(error if isinstance(error, dict) else {"message": str(error)})
        if row is None or status == RoutedStatus.EXPIRED:
            raise RoutedActivityFailure(
                f"the token of routed activity {message.activity!r} expired"
            )
        await asyncio.sleep(delay / 1000)
        delay = min(POLL_MAX_MS, int(delay * 1.5) + 1)


def routed_message_live(message: RoutedMessage) -> bool:
    """Whether a worker should run ``message`` at all (a read; the answer is fenced anyway).

    False once its token is no longer pending (a newer attempt, an
    abandoned one), its run is no longer live, or its deadline passed.
    """
    if message.deadline_ms is not None and wall_ms() >= message.deadline_ms:
        return False
    db = get_settings().database
    row = (
        RoutedAttempt.objects.using(db)
        .filter(pk=hash_token(message.token), status=RoutedStatus.PENDING)
        .values_list("run__status", flat=True)
        .first()
    )
    return row is not None and row in LIVE_RUN_STATUSES


def report_routed(
    token: str,
    *,
    result: Any = None,
    error: dict[str, Any] | None = None,
    worker: str = "",
) -> bool:
    """Record a routed attempt's answer; returns whether it was accepted.

    A client-side write (the worker holds no claim), fenced by the token:
    accepted only while the token is pending, the run live and the claim
    still at the epoch that sent the attempt. A refused answer writes
    nothing (it is logged): a stale result never reaches the journal.
    """
    db = get_settings().database
    token_hash = hash_token(token) if isinstance(token, str) and token else ""
    row = (
        RoutedAttempt.objects.using(db).filter(pk=token_hash).select_related("run").first()
        if token_hash
        else None
    )
    if row is None:
        logger.warning("routed answer discarded: unknown token")
        return False
    values: dict[str, Any] = {
        "status": RoutedStatus.FAILED if error is not None else RoutedStatus.COMPLETED,
        "result": None if error is not None else result,
        "error": error,
        "worker": worker[:200],
        "completed_at": timezone.now(),
    }
    outcome = conditional_batch(
        [
            ClaimCondition(row.run.workflow_id, row.epoch, match="any", label="routed-epoch"),
            RowCondition(
                RoutedAttempt, token_hash, {"status": RoutedStatus.PENDING}, "routed-token"
            ),
            RunCondition(row.run_id, statuses=frozenset(LIVE_RUN_STATUSES), label="routed-run"),
        ],
        [Update(RoutedAttempt, {"pk": token_hash}, values)],
        using=db,
    )
    if not outcome.committed:
        label = getattr(outcome.failed_condition, "label", "?")
        logger.info(
            "routed answer of %r (run %s, position %d, attempt %d) discarded: %s no longer holds",
            row.activity,
            row.run_id,
            row.position,
            row.attempt,
            label,
        )
        return False
    return True


def encode_failure(exc: BaseException, definition: ActivityDefinition | None) -> dict[str, Any]:
    """The JSON a worker reports for a failed attempt (the activity's own
    ``non_retryable`` decides, since only the worker has the exception)."""
    non_retryable = definition is not None and isinstance(exc, definition.non_retryable)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "non_retryable": bool(non_retryable),
    }


def answer_payload(activity: str, value: Any) -> tuple[Any, dict[str, Any] | None]:
    """The value as a JSON payload, or the failure that it is not one (non-retryable)."""
    try:
        return normalize(f"result of activity {activity!r}", value), None
    except PayloadError as exc:
        return None, {"type": type(exc).__name__, "message": str(exc)[:2000], "non_retryable": True}


__all__ = [
    "POLL_FIRST_MS",
    "POLL_MAX_MS",
    "RoutedActivityFailure",
    "RoutedDispatcher",
    "RoutedMessage",
    "RoutedNonRetryable",
    "RoutingUnavailable",
    "answer_payload",
    "dispatchers",
    "encode_failure",
    "prepare_routed",
    "remote_failure",
    "report_routed",
    "routed_definition",
    "routed_message_live",
]
