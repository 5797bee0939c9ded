"""``TurnHost``: the little a turn and the maintenance pass need from an engine.

Why a Protocol: ``Turn`` and ``Maintenance`` are driven by ``Engine`` but
must not import it (that was an import cycle). They depend on this
protocol, which extends the claim protocol's ``OwnershipHost``; ``Engine``
satisfies it, and a test may pass a small double.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from weft_django.ownership.host import OwnershipHost

if TYPE_CHECKING:
    import threading

    from django.db.models import QuerySet

    from weft_django.engine.activities.executor import ActivityExecutor
    from weft_django.engine.handoff import Handoff
    from weft_django.engine.replay.cache import WorkflowCache
    from weft_django.kernel.vocab import WakeKind, WakeTransport
    from weft_django.models import WorkflowRun


class FoundWorkPlacement(Protocol):
    """What the maintenance pass asks of the engine's ``TurnScheduler``.

    Declared here (and not by importing ``engine.scheduler``) because the
    scheduler is bound to a ``TurnHost``: the lower protocol must not name
    the module that depends on it.
    """

    @property
    def background(self) -> bool: ...

    def dispatch_timers(
        self, owned: QuerySet[WorkflowRun], now_ms: int
    ) -> Iterable[str] | None: ...

    def find_stranded(self, owned: QuerySet[WorkflowRun], now_ms: int) -> Iterable[Any] | None: ...

    def pickup_capacity(self, most: int) -> int: ...

    def reclaim_capacity(self, most: int) -> int: ...

    @property
    def claims_ahead_of_turns(self) -> bool: ...

    def pickup_backlog(self, left: bool) -> None: ...

    def is_inflight(self, run_id: str) -> bool: ...


class TurnHost(OwnershipHost, Protocol):
    """An engine as a turn and the maintenance pass see it."""

    @property
    def stopping(self) -> bool:
        """``dispose()`` began (or the lease was lost): stop at the next checkpoint."""
        ...

    @property
    def halted(self) -> bool: ...

    @property
    def booted(self) -> bool: ...

    @property
    def scheduler(self) -> FoundWorkPlacement: ...

    @property
    def parked_commands(self) -> dict[str, int]:
        """run id -> leaf commands its body had yielded when this engine last parked it."""
        ...

    def epoch_for(self, workflow_id: str) -> int: ...

    def gone_holders(self, refresh: bool = False) -> frozenset[str]:
        """Engines whose database session ended (``ownership.presence``)."""
        ...

    def dispatch(
        self, run_id: Any, wake_kind: WakeKind | None, transport: WakeTransport = "local"
    ) -> None: ...

    def dispatch_handoff(self, handoff: Handoff) -> None:
        """Drive the run this engine's pickup just committed (``engine.handoff``)."""
        ...

    def dispatch_pickup(self, run: Any) -> bool: ...

    def wake_pickup(self) -> None:
        """Run a pickup pass now (a run became pending, or a worker has room)."""

    def poll_soon(self) -> None:
        """A turn left its run parked or running: the next full pass comes
        within ``POLL_INTERVAL`` (a backed-off poll loop stops backing off)."""

    def dispatch_reclaim(self, run_id: Any, workflow_id: str) -> bool: ...

    def adopt_inflight(self, run_id: Any) -> None: ...

    @property
    def activity_executor(self) -> ActivityExecutor:
        """Where this engine's activity attempts run (``ACTIVITY_CONCURRENCY`` at once)."""
        ...

    @property
    def workflow_cache(self) -> WorkflowCache | None:
        """Parked runs' live replays (``WORKFLOW_CACHE_SIZE``); ``None``: no cache."""
        ...

    @property
    def turn_attention(self) -> dict[str, threading.Event]:
        """run id -> the event its in-flight turn waits on: set it to make the
        turn look at the run again (a wake arrived while it ran)."""
        ...

    def heartbeat(self) -> None: ...

    def drive(
        self,
        run_id: Any,
        wake_kind: WakeKind | None = None,
        *,
        expected_epoch: int | None = None,
        transport: WakeTransport = "local",
        handoff: Handoff | None = None,
    ) -> str | None: ...


__all__ = ["FoundWorkPlacement", "TurnHost"]
