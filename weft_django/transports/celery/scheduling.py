"""Turns as messages: a Celery node's engines run no turn where they find it.

Why: on a node, a turn runs in a pool process, behind the wake guard, under
the claim the node renews. So every turn an engine of the node finds (the
main process's maintenance pass, or a pool process's turn that started a
child) becomes a ``weft.drive`` message to the node's own direct queue,
naming the generation ``(engine_id, epoch)`` read from the claim. A run
this node does not hold is left alone: its holder's polling drives it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from weft_django.engine.scheduling.base import TurnScheduler
from weft_django.kernel.vocab import WakeKind, WakeTransport
from weft_django.transports.celery.messages import DriveMessage, send_drive
from weft_django.transports.celery.wakes import owner_of_run

if TYPE_CHECKING:
    from weft_django.conf import WeftSettings
    from weft_django.engine import Engine
    from weft_django.ownership.registry import RenewScope
    from weft_django.transports.celery.identity import NodeIdentity


class MessageScheduler(TurnScheduler):
    """Base of the node's schedulers: a found turn is a message to this node."""

    #: Wakes reach a node as messages; polling every renew interval is the backstop.
    listens: bool = False
    #: The node renews every claim carrying its engine id, also the pool's.
    renew_scope: RenewScope = "engine"
    #: The node claims now; the turn waits in its queue (``Maintenance.reclaim``).
    claims_ahead_of_turns: bool = True
    #: The ``via`` label of the messages this scheduler sends.
    via: ClassVar[str] = "celery"

    def __init__(self, ident: NodeIdentity) -> None:
        self.identity = ident
        self.node_name = ident.node_name
        self.pool_name = ident.pool
        self._started = False

    def start(self) -> None:
        self._started = True

    def stop(self, grace: float) -> None:
        self._started = False

    @property
    def background(self) -> bool:
        """A started node's turns run elsewhere (its pool), never inline."""
        return self._started

    def dispatch_turn(
        self, run_id: str, wake_kind: WakeKind | None, transport: WakeTransport = "local"
    ) -> None:
        """A message to this node's queue, if this node holds the run's claim."""
        if self.engine.stopping:
            return
        owner = owner_of_run(self.engine.settings.database, run_id)
        if owner is None or owner.engine_id != self.identity.engine_id:
            return
        if not self.admit_redrive(str(run_id), owner.epoch, wake_kind):
            return
        send_drive(
            DriveMessage(
                self.identity.node_name,
                str(run_id),
                wake_kind,
                owner.engine_id,
                owner.epoch,
                via=self.via,
                workflow_id=owner.workflow_id,
            )
        )

    def admit_redrive(self, run_id: str, epoch: int, wake_kind: WakeKind | None) -> bool:
        """Whether this message may go now; every message by default."""
        return True

    def claim_then_drive(
        self,
        run_id: str,
        claim: Callable[[], bool],
        wake_kind: WakeKind | None,
        *,
        drive_here: bool,
    ) -> bool:
        """Claim now (the claim is the node's), then send the turn as a message."""
        if not claim():
            return False
        self.dispatch_turn(str(run_id), wake_kind)
        return True

    def poll_interval_ms(self, settings: WeftSettings) -> int:
        """A node polls every renew interval: a lost message costs at most that."""
        return settings.claim_renew_interval_ms


def build_engine(
    ident: NodeIdentity, scheduler: MessageScheduler, cls: type[Engine] | None = None
) -> Engine:
    """An engine of this node (one engine id in every process) on ``scheduler``,
    serving the node's weft queues (``served``: its record names them)."""
    from weft_django.engine import Engine

    engine = (cls or Engine)(engine_id=ident.engine_id, scheduler=scheduler)
    engine.served_queues = ident.served_queues
    return engine


__all__ = ["MessageScheduler", "build_engine"]
