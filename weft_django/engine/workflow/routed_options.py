"""What ``@activity(celery_queue=...)`` refuses at definition time, naming the value.

``definitions`` runs these checks when the decorator is applied, without importing the
routed runtime (``engine.activities.routed``) or any transport, so a mistake fails at
import, not inside a turn on another machine.

The invariants behind the refusals:

* **A routed attempt needs a ``timeout``**: it is the only way the owning
  engine learns that a message was lost or that the worker running it died
  (the worker's process is not ours to watch). When it passes, the attempt
  fails as timed out and the activity's retry policy sends a new message
  with a new token; the old token can no longer report.
* **No ``heartbeat_timeout``**: heartbeats are written by the engine that
  runs the attempt under its claim fence; a Celery worker holds no claim.
"""

from __future__ import annotations

#: Longest queue name accepted (Celery/AMQP queue names are short strings).
MAX_QUEUE_NAME = 200


def check_routing_options(
    act_name: str,
    celery_queue: object,
    *,
    timeout_ms: int | None,
    heartbeat_timeout_ms: int | None,
) -> None:
    """Refuse a ``celery_queue`` the routed path cannot honour (``TypeError``/``ValueError``)."""
    where = f"activity {act_name!r}"
    if (
        not isinstance(celery_queue, str)
        or not celery_queue.strip()
        or celery_queue != celery_queue.strip()
        or len(celery_queue) > MAX_QUEUE_NAME
    ):
        raise ValueError(
            f"{where}: celery_queue must be a non-empty queue name of at most "
            f"{MAX_QUEUE_NAME} characters without surrounding spaces, got {celery_queue!r}"
        )
    if timeout_ms is None:
        raise ValueError(
            f"{where}: celery_queue={celery_queue!r} needs a timeout= (after it, a lost "
            "message or a dead worker fails the attempt and the retry policy re-sends it)"
        )
    if heartbeat_timeout_ms is not None:
        raise TypeError(
            f"{where}: heartbeat_timeout cannot be combined with celery_queue={celery_queue!r} "
            "(a Celery worker holds no claim to write heartbeats under; use timeout=)"
        )


__all__ = ["MAX_QUEUE_NAME", "check_routing_options"]
