"""Routed activities over Celery: the task that runs them, the dispatcher that sends them.

``install_routing(app)`` (also done by ``install(app)``) registers the task
``weft.run_routed_activity`` on ``app`` and installs a
``CeleryRoutedDispatcher`` as this process's ``engine.routing`` dispatcher.
It starts nothing and marks no transport: a standalone ``weft_worker``
engine may call it to send routed attempts, and any Celery worker of
``app`` -- a weft node or not -- runs the task when it consumes the queue.

The task is deliberately thin, because the guarantees are elsewhere:

* it skips a message whose token is no longer pending, whose run is over,
  or whose attempt already timed out on its owner (``routed_message_live``);
  ``expires`` also lets the broker drop a message past that deadline;
* it answers through ``report_routed``, which accepts the answer only for
  the claim epoch that sent the attempt: a stale answer writes nothing;
* it never retries by itself (``max_retries=0``, messages acknowledged on
  receipt): a lost message or a killed worker is noticed by the owner when
  the attempt's ``timeout`` passes, and the activity's retry policy sends a
  new attempt with a new token.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import weakref
from typing import TYPE_CHECKING, Any

from weft_django.engine.activities.routed_dispatch import RoutedMessage, dispatchers
from weft_django.kernel.clock import wall_ms

if TYPE_CHECKING:
    from celery import Celery

logger = logging.getLogger("weft_django.transports.celery")

ROUTED_TASK = "weft.run_routed_activity"

_lock = threading.Lock()
_registered: weakref.WeakSet[Celery] = weakref.WeakSet()


class CeleryRoutedDispatcher:
    """Sends each routed attempt as a ``weft.run_routed_activity`` message to its queue."""

    def __init__(self, app: Celery) -> None:
        self.name = "celery"
        self.app = app

    def send(self, message: RoutedMessage) -> None:
        """Send (a broker error propagates: the attempt fails and is retried by policy)."""
        self.app.send_task(
            ROUTED_TASK,
            args=[message.as_json()],
            queue=message.queue,
            expires=message.expires_s,
        )


def install_routing(app: Celery) -> Celery:
    """Register ``weft.run_routed_activity`` on ``app`` and send routed attempts through it."""
    with _lock:
        if app not in _registered:
            _register_task(app)
            _registered.add(app)
    dispatchers.install(CeleryRoutedDispatcher(app))
    return app


def uninstall_routing() -> None:
    """Stop sending routed attempts from this process (tests; the app keeps its task)."""
    current = dispatchers.current()
    if isinstance(current, CeleryRoutedDispatcher):
        dispatchers.uninstall(current)


def _register_task(app: Celery) -> None:
    @app.task(name=ROUTED_TASK, bind=True, ignore_result=True, shared=False, max_retries=0)
    def weft_run_routed_activity(self: Any, *args: Any, **kwargs: Any) -> str:
        """Run one routed activity attempt and answer through its token."""
        from weft_django.transports.celery.message_checks import (
            MalformedMessage,
            discard,
            parse_routed,
        )

        try:
            message = parse_routed(args, kwargs)
        except MalformedMessage as error:
            return discard(ROUTED_TASK, error)["outcome"]
        worker = str(getattr(self.request, "hostname", "") or socket.gethostname())
        return run_routed(message, worker=worker)


def run_routed(message: RoutedMessage, *, worker: str = "") -> str:
    """Run ``message``'s activity here and report its answer; returns what happened.

    ``"stale"``: skipped (token no longer pending, run over, deadline
    passed); ``"accepted"`` / ``"discarded"``: the answer was / was not
    recorded (the fence refused it).
    """
    # Imported here: install_routing runs while the settings may still load.
    from weft_django.engine import tracing
    from weft_django.engine.activities.info import (
        ActivityInfo,
        AttemptControl,
        activity_scope,
        deadline_from_ms,
    )
    from weft_django.engine.activities.routed import (
        answer_payload,
        encode_failure,
        report_routed,
        routed_message_live,
    )
    from weft_django.engine.workflow.definitions import get_activity

    if not routed_message_live(message):
        logger.info(
            "routed attempt %d of %r (run %s) skipped: no longer wanted",
            message.attempt,
            message.activity,
            message.run_id,
        )
        return "stale"
    try:
        definition = get_activity(message.activity)
    except LookupError as exc:  # this worker does not import it: retried by policy
        error = {"type": "LookupError", "message": str(exc), "non_retryable": False}
        return _outcome(report_routed(message.token, error=error, worker=worker))
    info = ActivityInfo(
        workflow_id=message.workflow_id,
        run_id=message.run_id,
        position=message.position,
        attempt=message.attempt,
        epoch=message.epoch,
        idempotency_key=message.idempotency_key,
        deadline=deadline_from_ms(message.deadline_ms),
        control=AttemptControl(wall_ms),
    )
    try:
        with (
            tracing.routed_span(
                activity=message.activity,
                carrier=message.trace_context,
                position=message.position,
                attempt=message.attempt,
                workflow_id=message.workflow_id,
                run_id=message.run_id,
                epoch=message.epoch,
                worker=worker,
            ),
            activity_scope(info),
        ):
            if definition.is_async:
                value = asyncio.run(definition.fn(*message.args, **message.kwargs))
            else:
                value = definition.fn(*message.args, **message.kwargs)
    except Exception as exc:
        failure = encode_failure(exc, definition)
        return _outcome(report_routed(message.token, error=failure, worker=worker))
    payload, invalid = answer_payload(definition.name, value)
    if invalid is not None:
        return _outcome(report_routed(message.token, error=invalid, worker=worker))
    return _outcome(report_routed(message.token, result=payload, worker=worker))


def _outcome(accepted: bool) -> str:
    return "accepted" if accepted else "discarded"


__all__ = [
    "ROUTED_TASK",
    "CeleryRoutedDispatcher",
    "install_routing",
    "run_routed",
    "uninstall_routing",
]
