"""Where a committed wake goes on Celery: ``CeleryWakeBackend``.

Why: a ``client`` write (in any process: web, shell, a node) must reach the
one node allowed to drive the run -- the holder of its claim -- or, for a
``pending`` run, any node. The backend runs after the write committed
(``engine.wakes.announce``), so the message never names a run the database
does not show yet. Routing is a hint, never authority: a message that goes
nowhere costs one renew interval (polling), a stale one is discarded by the
wake guard on the node.

The models are imported inside the functions: ``install(app)`` imports this
module while the project's settings are still being imported.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from weft_django.conf import get_settings
from weft_django.engine.wakes import Wake, WakeBackend
from weft_django.kernel.clock import wall_ms
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.transports.celery.messages import DriveMessage, send_drive, send_pickup


@dataclass(frozen=True)
class Owner:
    """A run's workflow and the holder row of its claim (as read, unchecked)."""

    workflow_id: str
    engine_id: str | None
    epoch: int
    expires_at: int | None


def owner_of_run(using: str, run_id: Any) -> Owner | None:
    """The run's workflow id and its claim's holder (one query)."""
    from weft_django.models import WorkflowRun

    row = (
        WorkflowRun.objects.using(using)
        .filter(pk=run_id)
        .with_claim()
        .values_list("workflow_id", "claim_engine_id", "claim_epoch", "claim_expires_at")
        .first()
    )
    if row is None:
        return None
    return Owner(row[0], row[1], int(row[2] or 0), row[3])


def declared_queue_of(wake: Wake, declared: Collection[str]) -> str | None:
    """The woken run's queue if ``WEFT["QUEUES"]`` declares it (its pickup goes to
    that queue's Celery queue); ``None`` otherwise. Read from the wake when its
    announcer gave it (``client.start``), else from the row -- never without
    declared queues."""
    if not declared:
        return None
    name = wake.queue
    if name is None:
        from weft_django.models import WorkflowRun

        rows = WorkflowRun.objects.using(wake.using).filter(pk=wake.run_id)
        name = rows.values_list("queue", flat=True).first()
    return name if name and name in declared else None


def route_wake(wake: Wake) -> None:
    """Send the message a committed wake calls for (or nothing: polling covers it)."""
    if wake.event in ("finished", "released"):
        # A waiter's business, or a holderless run the reclaim scan takes over.
        return
    from weft_django.models import EngineRecord

    settings = get_settings()
    now = wall_ms()
    if wake.is_pickup:
        eta = wake.start_at if wake.start_at is not None and wake.start_at > now else None
        if eta is not None and eta - now > settings.celery_eta_horizon_ms:
            return  # a far delayed start: the nodes' polling picks it up when due
        send_pickup(
            wake.run_id,
            eta_ms=eta,
            workflow_id=wake.workflow_id,
            weft_queue=declared_queue_of(wake, settings.queues),
        )
        return
    owner = owner_of_run(wake.using, wake.run_id)
    if owner is None or not owner.engine_id or owner.expires_at is None:
        return  # no holder: pickup or the reclaim scan will drive it
    grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms
    if owner.expires_at + grace < now:
        return  # an expired holder: another node's reclaim scan takes it over
    node = (
        EngineRecord.objects.using(wake.using)
        .filter(pk=owner.engine_id, stopped_at__isnull=True)
        .exclude(node_name="")
        .values_list("node_name", flat=True)
        .first()
    )
    if not node:
        return  # a standalone engine: NOTIFY or polling wakes it
    send_drive(
        DriveMessage(
            node,
            wake.run_id,
            wake.event,
            owner.engine_id,
            owner.epoch,
            workflow_id=owner.workflow_id,
        )
    )


class CeleryWakeBackend(WakeBackend):
    """Delivers committed wakes as ``weft.drive`` / ``weft.pickup`` messages.

    It neither listens nor waits (``supports_listen``/``supports_wait_done``
    stay false): a node's wakes arrive as messages, and a caller waiting for
    a result uses another backend or polls.
    """

    name: ClassVar[str] = "celery"

    def deliver(self, wake: Wake) -> None:
        route_wake(wake)


__all__ = ["CeleryWakeBackend", "Owner", "owner_of_run", "route_wake"]
