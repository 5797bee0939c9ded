"""Background mode: an engine's passes on its own threads, woken by wakes.

Invariant: a wake only asks for a pass sooner; what a pass finds is read from
the database, so a lost or duplicated wake costs latency, never a turn, and
the poll loop backs off only while a wake connection is up and never past
work the database says falls due.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from weft_django.engine.scheduling.cadence import PollCadence
from weft_django.engine.wakes import Listening, backends

if TYPE_CHECKING:
    from weft_django.conf import WeftSettings
    from weft_django.engine.maintenance.passes import Maintenance
    from weft_django.engine.scheduling.base import TurnScheduler
    from weft_django.engine.scheduling.loops import SideTasks
    from weft_django.engine.scheduling.presence_watch import PresenceWatch


class BackgroundMode:
    """The ``Engine`` methods of background mode (``BACKGROUND_TASKS="auto"``)."""

    settings: WeftSettings
    scheduler: TurnScheduler
    maintenance: Maintenance
    presence_watch: PresenceWatch | None
    _tasks: SideTasks
    _listening: list[Listening]

    def boot(self) -> Self:
        raise NotImplementedError

    def start(self) -> Self:
        """Run maintenance on background threads (``BACKGROUND_TASKS="auto"``)."""
        self.boot()
        self.scheduler.start()
        self._tasks.start()
        if self.presence_watch is not None:
            self.presence_watch.start()
        if self.scheduler.listens:
            self._listening = backends.listen(
                self.settings.database, self.wake, on_pickup=self.wake_pickup
            )
        return self

    def wake(self) -> None:
        """Run the next maintenance pass now (a wake arrived)."""
        self._tasks.request(full=True)

    def poll_soon(self) -> None:
        """The next full pass within ``POLL_INTERVAL`` (a turn left its run
        parked or running: its timers or re-drive are the pass's to find)."""
        self._tasks.soon()

    def _next_poll_gap_ms(self, cadence: PollCadence) -> int:
        """After a full pass: back off only while a wake connection LISTENs and
        the pass found nothing but pickups, and never past known due work."""
        allowed = any(listening.connected for listening in self._listening)
        found = self.maintenance.found_work
        due = self.maintenance.due_in_ms() if allowed and not found else None
        return cadence.after_pass(found_work=found, allowed=allowed, due_in_ms=due)

    def wake_pickup(self) -> None:
        """Run a pickup pass now: a run became pending, or a worker has room.

        Only the pickup: the rest of the pass (retention, timeouts, reclaim,
        timers, woken and stranded runs) has nothing new to find from it and
        runs on its own every poll interval."""
        self._tasks.request(full=False)

    @property
    def background(self) -> bool:
        """Turns run on background workers (``start()``)."""
        return self.scheduler.background

    @property
    def stopping(self) -> bool:
        """``dispose()`` began (or the lease was lost): turns stop at their next checkpoint."""
        return self._tasks.stopping.is_set()

    @property
    def inflight(self) -> int:
        return self.scheduler.inflight


__all__ = ["BackgroundMode"]
