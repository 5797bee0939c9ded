"""The weft Celery messages: task names, what is installed, and sending.

``install(app)`` (any process) and the node runtime (worker processes) both send through
here, so this module imports neither's heavy half. Every message carries ``expires``: a
lost, duplicated or stale message changes nothing (polling re-sends what is missing, the
wake guard discards what is stale), so sending never raises.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from weft_django.conf import get_settings
from weft_django.kernel.clock import wall_ms
from weft_django.transports.celery.served import celery_queue

if TYPE_CHECKING:
    from celery import Celery
    from kombu import Queue

logger = logging.getLogger("weft_django.transports.celery")

DRIVE_TASK = "weft.drive"
PICKUP_TASK = "weft.pickup"
DEFAULT_QUEUE = "weft"
#: Every message expires this long after it is due (at least).
MIN_EXPIRY_MS = 60_000


@dataclass(frozen=True)
class Installed:
    """The app ``install(app)`` made this process send through, its shared queue,
    and the queues whose consumers are weft engines (``opt_in``)."""

    app: Celery
    queue: str
    engine_queues: tuple[str, ...] = ()

    def engine_queue_names(self) -> tuple[str, ...]:
        return self.engine_queues or (self.queue,)


class _Installation:
    """This process's one installation (set by ``install``, cleared by ``uninstall``)."""

    current: Installed | None = None


installation = _Installation()


def installed() -> Installed | None:
    return installation.current


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def expiry_ms() -> int:
    """How long after it is due a message is still worth delivering."""
    return max(MIN_EXPIRY_MS, 3 * get_settings().claim_renew_interval_ms)


def send(
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    queue: str | Queue,
    *,
    now_ms: int,
    expires_ms: int,
    eta_ms: int | None = None,
) -> bool:
    """Send one weft task; a failure is logged and reported, never raised."""
    current = installation.current
    if current is None:
        return False
    try:
        current.app.send_task(
            name,
            args=args,
            kwargs=kwargs,
            queue=queue,
            eta=_utc(eta_ms) if eta_ms is not None and eta_ms > now_ms else None,
            expires=_utc(expires_ms),
        )
    except Exception:  # a lost message costs one renew interval: polling re-sends it
        if _outage.failed():
            logger.warning(
                "could not send %s for %s; polling will pick it up (further failures are "
                "counted, not logged, until a send works again)",
                name,
                args[:1],
                exc_info=True,
            )
        else:
            logger.debug("could not send %s for %s", name, args[:1])
        return False
    lost = _outage.sent()
    if lost:
        logger.warning("sending weft tasks works again; %d message(s) were not sent", lost)
    return True


class _SendOutage:
    """One warning per broker outage, not one traceback per message.

    A broker that is down (restarted, unreachable) fails every send of every
    thread; each failure is harmless (polling re-sends), but a traceback per
    message buries the log. The first failure of a streak is logged with its
    traceback, the rest counted; the first success reports the count.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures = 0

    def failed(self) -> bool:
        """Count a failure; True for the first of a streak (log it)."""
        with self._lock:
            self._failures += 1
            return self._failures == 1

    def sent(self) -> int:
        """A send worked: how many failed in the streak it ends (0: none)."""
        with self._lock:
            lost, self._failures = self._failures, 0
            return lost


_outage = _SendOutage()


@dataclass(frozen=True)
class DriveMessage:
    """``weft.drive``: one turn of ``run_id`` on node ``node_name``, behind the
    wake guard for ``wake_kind`` at the generation ``(engine_id, epoch)``.

    ``via`` is how the wake was found (a metric label: ``celery`` or
    ``polling``); ``eta_ms`` delays delivery; ``attempt`` counts busy
    re-sends; ``due_ms`` is when the wake was due (for the latency log);
    ``workflow_id`` names the run's workflow in the message's keyword
    arguments (what Flower shows; empty when the sender did not read it).
    """

    node_name: str
    run_id: str
    wake_kind: str | None
    engine_id: str
    epoch: int
    via: str = "celery"
    eta_ms: int | None = None
    attempt: int = 0
    due_ms: int | None = None
    workflow_id: str = ""


def send_drive(message: DriveMessage) -> bool:
    """Send ``message`` to its node's direct queue (``worker_direct``)."""
    from celery.utils.nodenames import worker_direct

    now = wall_ms()
    eta = message.eta_ms
    due = eta if eta is not None and eta > now else now
    options: dict[str, Any] = {
        "via": message.via,
        "due_ms": message.due_ms if message.due_ms is not None else due,
        "attempt": message.attempt,
    }
    if message.workflow_id:
        options["workflow_id"] = str(message.workflow_id)
    return send(
        DRIVE_TASK,
        [str(message.run_id), message.wake_kind, message.engine_id, int(message.epoch)],
        options,
        worker_direct(message.node_name),
        now_ms=now,
        expires_ms=due + expiry_ms(),
        eta_ms=eta,
    )


def send_pickup(
    run_id: str,
    *,
    eta_ms: int | None = None,
    workflow_id: str | None = None,
    attempt: int = 0,
    due_ms: int | None = None,
    weft_queue: str | None = None,
) -> bool:
    """``weft.pickup`` on the shared queue: any node may claim the pending run.

    ``attempt`` counts re-offers of a pickup a node had no room for;
    ``due_ms`` keeps the first offer's due time across them (the latency
    logged is the run's, not the re-offer's). ``weft_queue``: the run's
    declared queue, whose own Celery queue (``served``: ``weft.q.<name>``)
    only the nodes serving it consume.
    """
    current = installation.current
    if current is None:
        return False
    now = wall_ms()
    due = eta_ms if eta_ms is not None and eta_ms > now else now
    options: dict[str, Any] = {"due_ms": due if due_ms is None else due_ms}
    if workflow_id:
        options["workflow_id"] = str(workflow_id)
    if attempt:
        options["attempt"] = int(attempt)
    return send(
        PICKUP_TASK,
        [str(run_id)],
        options,
        current.queue if weft_queue is None else celery_queue(current.queue, weft_queue),
        now_ms=now,
        expires_ms=due + expiry_ms(),
        eta_ms=eta_ms,
    )


__all__ = [
    "DEFAULT_QUEUE",
    "DRIVE_TASK",
    "MIN_EXPIRY_MS",
    "PICKUP_TASK",
    "DriveMessage",
    "Installed",
    "expiry_ms",
    "installed",
    "send",
    "send_drive",
    "send_pickup",
]
