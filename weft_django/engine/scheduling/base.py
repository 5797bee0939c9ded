"""Turn schedulers: where a turn the engine found runs (the runtime's second seam).

Why this module exists: the maintenance pass finds work (a due timer, a
woken run, a pending run to pick up, a stale claim to take over); *where*
that turn then runs is not the runtime's business. A standalone engine runs
it on its own thread pool (``LocalScheduler``, the default); a Celery node
sends it as a message to its own queue, where a pool process drives it
(``weft_django.transports.celery``'s scheduler). The engine calls only this
interface and never branches on a transport's name.

Every turn still goes through the wake guard and the fenced commit: a
scheduler decides *where*, never *whether*.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from weft_django.kernel.vocab import WakeKind, WakeTransport

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from weft_django.conf import WeftSettings
    from weft_django.engine.handoff import Handoff
    from weft_django.engine.host import TurnHost
    from weft_django.models import WorkflowRun
    from weft_django.ownership.registry import RenewScope


class TurnScheduler:
    """Where found turns run (base class; ``LocalScheduler`` is the default).

    The engine calls ``bind(engine)`` once from its constructor, ``start()``
    from ``Engine.start()`` and ``stop(grace)`` from ``Engine.dispose()``.
    """

    #: The engine LISTENs through the installed wake backends (a Celery node
    #: does not: its wakes arrive as messages; ``weft_worker --no-listen``).
    listens: bool = True
    #: ``EngineRecord`` fields describing where turns run.
    node_name: str = ""
    pool_name: str = ""
    #: Which claims the engine's renewal covers ("engine": every claim carrying
    #: its id, also those a pool process took under the same id).
    renew_scope: RenewScope = "held"
    #: A claim is taken at once and its turn waits in a queue (a Celery node):
    #: the reclaim scan takes runs that need a turn only into
    #: ``reclaim_capacity`` (``Maintenance._within_room``).
    claims_ahead_of_turns: bool = False

    def bind(self, engine: TurnHost) -> None:
        self.engine = engine

    def start(self) -> None:
        """Begin running turns in the background (``Engine.start()``)."""

    def stop(self, grace: float) -> None:
        """Stop taking turns; wait up to ``grace`` s for in-flight ones."""

    def dispatch_turn(
        self, run_id: str, wake_kind: WakeKind | None, transport: WakeTransport = "local"
    ) -> None:
        """Run one turn of ``run_id`` soon (behind the wake guard for ``wake_kind``)."""
        raise NotImplementedError

    def dispatch_handoff(self, handoff: Handoff) -> None:
        """The first turn of a run this engine's pickup just committed
        (``engine.handoff``). A scheduler that drives it in this process may
        hand the snapshot to the turn; by default the turn reads the run."""
        self.dispatch_turn(str(handoff.run.pk), None)

    def claim_then_drive(
        self,
        run_id: str,
        claim: Callable[[], bool],
        wake_kind: WakeKind | None,
        *,
        drive_here: bool,
    ) -> bool:
        """``claim`` the run for this engine, then drive it; returns whether it
        was claimed (or handed on)."""
        raise NotImplementedError

    def pickup_capacity(self, most: int) -> int:
        """How many pending runs a batch pickup may claim now (at most ``most``):
        a claimed run waiting for a turn is one no other engine can take."""
        return most

    def reclaim_capacity(self, most: int) -> int:
        """How many runs that need a turn now the reclaim scan may take over
        (or acquire released) this pass, at most ``most``. A scheduler that
        claims on its own turn threads needs no bound (the claim is taken
        when a thread is free to drive); one that claims at once and drives
        later bounds it by its room (``CeleryNodeScheduler``)."""
        return most

    def pickup_backlog(self, left: bool) -> None:
        """The last pickup may have left pending runs (``left``): a scheduler
        that knows when it has room again asks for the next pickup then
        (``engine.wake_pickup``); the poll interval is the backstop."""

    def drain(self) -> int:
        """Drive every queued turn now (inline mode); returns how many."""
        return 0

    def adopt_inflight(self, run_id: Any) -> None:
        """The current turn drives ``run_id`` inline from now on."""

    @property
    def inflight(self) -> int:
        return 0

    def is_inflight(self, run_id: str) -> bool:
        """A turn (or the claim before one) of ``run_id`` is under way here;
        ``False`` when the scheduler does not know."""
        return False

    @property
    def background(self) -> bool:
        """Turns run on background workers (not inline in ``run_until_idle``)."""
        return False

    # -- maintenance hooks: ``None`` means "the engine's polling default" -------
    def dispatch_timers(self, owned: QuerySet[WorkflowRun], now_ms: int) -> Iterable[str] | None:
        """Hand this engine's timers over (e.g. as ``eta`` messages) and return
        the runs dispatched for a turn now; ``None``: the engine dispatches due
        timers itself."""
        return None

    def find_stranded(self, owned: QuerySet[WorkflowRun], now_ms: int) -> Iterable[Any] | None:
        """The ``running`` runs whose turn must be re-driven; ``None``: every
        ``running`` run this engine owns that is not in flight."""
        return None

    def poll_interval_ms(self, settings: WeftSettings) -> int:
        """How long the poll loop waits between passes when nothing wakes it."""
        return settings.poll_interval_ms


__all__ = ["TurnScheduler"]
