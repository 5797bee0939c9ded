"""A turn's state and its one fenced checkpoint (SPEC §4.2).

Why one method: every durable write of a turn -- the values the body
recorded, the event that settles a command, the run's state, its timers --
goes out as ONE conditional batch under the claim fence
(``ownership.fence.fenced_commit``), conditioned on the run still being
drivable. A turn never writes workflow state any other way; when the fence
fails the engine was deposed (``EngineDeposedError``) and the result in hand
is dropped.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from django.db.models import F

from weft_django.engine.host import TurnHost
from weft_django.engine.journal import RunInbox, journal_write
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.replay.events import Event, Failed, Finished
from weft_django.engine.replay.machine import Leaf, Replay
from weft_django.engine.turn.publish import rows_for
from weft_django.engine.turn.update_answers import announce_answers
from weft_django.errors import EngineDeposedError
from weft_django.models import DRIVABLE_STATUSES, Timer, WorkflowRun
from weft_django.ownership.batch import BatchResult
from weft_django.ownership.fence import fenced_commit
from weft_django.ownership.fold import ClaimFold
from weft_django.ownership.ops import (
    BulkInsert,
    Condition,
    Delete,
    Insert,
    RunCondition,
    Update,
    Write,
)
from weft_django.warnings import warn_claim_lost

if TYPE_CHECKING:
    from weft_django.engine.activities.pending import PendingAttempt

# The statuses a turn may write under (``models.DRIVABLE_STATUSES``): any
# other means the run was stopped (cancelled, suspended, purged) under the turn.

OnLostRace = Literal["raise", "return"]


class TurnAborted(Exception):
    """The run changed under the turn (cancelled, suspended, purged)."""


@dataclass(frozen=True)
class HeldResult:
    """The last result of a run that ends right after it: recorded by the
    terminal commit instead of a commit of its own (one batch less)."""

    event: Event
    writes: list[Write]
    conditions: list[Condition]


class TurnState:
    """One run as a turn holds it, and the checkpoint that writes it."""

    def __init__(self, host: TurnHost, run: WorkflowRun, *, fresh: bool = False) -> None:
        """``fresh``: the run was never picked up before this turn's pickup
        (``engine.handoff``): it has no journal entries and no timers, so
        neither is read."""
        self.host = host
        self.run = run
        self.db = host.settings.database
        self.version = run.version
        # Read with the run, before any inbox read: it stays a valid lower bound
        # for the park condition; a stale one only makes the park fail and the
        # turn look again, so it is not re-read each step.
        self.wake_seq = run.wake_seq
        self.replay: Replay | None = None
        self.held_result: HeldResult | None = None
        # The inbox of the current step (``None``: not read since the last
        # commit that wrote timers).
        self.inbox: RunInbox | None = RunInbox(run.pk, self.db, timers={}) if fresh else None
        self.fresh = fresh
        # Activity attempts running on the engine's executor, by position: all
        # open activities of a turn run at once (``turn.activity``).
        self.attempts: dict[int, PendingAttempt] = {}
        # Set when an attempt finishes or the run is poked (a wake for a run
        # whose turn is in flight): the waiting turn looks again.
        self.attention = threading.Event()
        # Leaves a race or a failed all abandoned, whose children are still to
        # cancel (``turn.child.cancel_abandoned_children``).
        self.abandoned: list[Leaf] = []
        # Writes that ride on the turn's next commit (the void of an abandoned
        # command's async token): fenced like everything else, no batch of their own.
        self.deferred: list[Write] = []
        # The turn's span until its starting position is noted (``engine.tracing``).
        self.trace_span: Any = None

    @property
    def known_timers(self) -> dict[tuple[str, int | None], Timer] | None:
        """The timers the last step read, while no commit since wrote any.

        Only this run's turns write its timers, and this turn holds the claim
        (every commit is fenced), so what it read stays what is stored until
        it writes timers itself -- then the next step reads them again. A
        three-step workflow thus reads its timers once, not once per step.
        """
        return self.inbox.__dict__.get("timers") if self.inbox is not None else None

    def failures_cleared(self) -> dict[str, Any]:
        """The run values that reset the failed-turn counter (``engine.turn_failures``).

        Written by the commit that ends a turn normally (park, end), and only
        when something is there to reset: a run that never failed a turn
        writes no extra column.
        """
        if self.run.turn_failures == 0 and self.run.turn_retry_at is None:
            return {}
        return {"turn_failures": 0, "turn_retry_at": None}

    def still_owner(self) -> None:
        """Before a step runs: stop if this engine already knows the claim is lost.

        Renewal may find the claim gone while the turn is between steps (the
        engine was paused or cut off). The step's result could never be
        recorded -- the fence would refuse it -- so running it would only be a
        duplicate execution under the next owner. A cheap in-memory check.
        """
        host = self.host
        registry = host.registry
        if host.ownership != "workflow-lease" or registry is None:
            return
        wid = self.run.workflow_id
        if registry.current_epoch(wid) is None:
            if registry.losses.get(wid) is None:  # else renewal reported it already
                host.metrics.record_claim_attempt("deposed")
                warn_claim_lost(wid, engine_id=host.engine_id, during="before-activity")
            raise EngineDeposedError(wid)

    def read_run_state(self) -> tuple[str, int]:
        """The run's stored ``(status, wake_seq)``; ``TurnAborted`` when it is gone
        (purged under the turn)."""
        row = (
            WorkflowRun.objects.using(self.db)
            .filter(pk=self.run.pk)
            .values_list("status", "wake_seq")
            .first()
        )
        if row is None:
            raise TurnAborted(self.run.workflow_id)
        return str(row[0]), int(row[1])

    def drop_attempts(self, reason: str, positions: Sequence[int] | None = None) -> None:
        """Abandon running attempts (all, or those at ``positions``): their
        results are discarded, ``heartbeat()`` raises ``ActivityCancelled``."""
        for position in list(self.attempts) if positions is None else positions:
            pending = self.attempts.pop(position, None)
            if pending is not None:
                pending.handle.abandon(reason)

    def commit(
        self,
        writes: Sequence[Write],
        events: Sequence[Event] = (),
        *,
        conditions: Sequence[Condition] = (),
        run_values: dict[str, Any] | None = None,
        folds: Sequence[ClaimFold] = (),
        on_lost_race: OnLostRace = "raise",
        already_fed: Sequence[Event] = (),
    ) -> BatchResult:
        """Commit ``writes`` with the journal entries and the run's new state.

        Recorded: the values the body produced since the last commit, then
        ``already_fed`` (events the replay took in before this commit: a
        result it looked past), then ``events`` (fed to the replay once
        committed). A failed run-status condition raises ``TurnAborted``; any
        other failed condition too, unless ``on_lost_race="return"`` (the
        caller handles the lost race from the returned result).
        """
        host = self.host
        now = host.now_ms()
        epoch = host.epoch_for(self.run.workflow_id)
        fresh = self.replay.take_new_events() if self.replay is not None else []
        recorded = [*fresh, *already_fed, *events]
        batch: list[Write] = [
            journal_write(self.run.pk, e, engine_id=host.engine_id, epoch=epoch, at_ms=now)
            for e in recorded
        ]
        batch.extend(rows_for(self.run, recorded, now))
        batch.extend(writes)
        deferred, self.deferred = self.deferred, []
        batch.extend(deferred)
        values: dict[str, Any] = {
            "version": F("version") + 1,
            "status": "running",
            "turn_started_at": now,
            "turn_pid": os.getpid(),
        }
        if recorded and self.run.recoveries is not None:
            values["recoveries"] = None  # progress: the crash-loop count starts over
        values.update(run_values or {})
        batch.append(Update(WorkflowRun, {"pk": self.run.pk}, values))
        status_guard = RunCondition(self.run.pk, statuses=DRIVABLE_STATUSES, label="run-status")
        result = fenced_commit(
            host,
            self.run.workflow_id,
            [status_guard, *conditions],
            batch,
            run_id=self.run.pk,
            run_version=self.version,
            folds=folds,
        )
        if result.committed:
            self.version += 1
            self.run.recoveries = values.get("recoveries", self.run.recoveries)
            announce_answers(self.run.pk, self.run.workflow_id, self.db, recorded)
            known = self.known_timers
            if any(_writes_timers(w) and not _forgotten(known, w) for w in batch):
                self.inbox = None  # its timers are no longer what is stored
            if self.replay is not None:
                for event in events:
                    self.replay.apply(event)
            return result
        # Not written: what this commit took along must ride on the next one
        # (a park that lost its wake-seq race goes round and commits again).
        if self.replay is not None:
            self.replay.new_events[:0] = fresh
        self.deferred[:0] = deferred
        if result.failed_condition is status_guard:
            raise TurnAborted(self.run.workflow_id)
        if on_lost_race == "raise":
            raise TurnAborted(f"{self.run.workflow_id}: {result.failed_condition}")
        return result

    def settle(
        self,
        leaf: Leaf,
        *,
        result: Any = None,
        error: BaseException | None = None,
        writes: Sequence[Write] = (),
        conditions: Sequence[Condition] = (),
        hold: bool = True,
    ) -> bool:
        """Record ``leaf``'s outcome (with ``writes``, under ``conditions``).

        If the run ends right after it (the replay looks past the result: the
        body is deterministic and database-free, no command runs), the result
        is held for the terminal commit instead of committed now -- unless
        ``hold=False``: an atomic activity's result must commit inside its own
        transaction (``engine.atomic``).
        """
        replay = self.replay
        assert replay is not None
        record = error_record(error) if error is not None else None
        event = Event(
            replay.next_position, leaf.command.kind, leaf.id, leaf.command.target, result, record
        )
        # Only this run's turns write its timers, so when this step read them and
        # none sits at the leaf, there is nothing to delete (one statement less).
        no_timer = self.inbox is not None and self.inbox.has_timer_at(leaf.id) is False
        timers = [] if no_timer else [Delete(Timer, {"run_id": self.run.pk, "position": leaf.id})]
        batch: list[Write] = [*timers, *writes]
        replay.apply(event)
        if isinstance(replay.advance(), Finished | Failed) and hold:
            self.held_result = HeldResult(event, batch, list(conditions))
            return True
        self.commit(batch, conditions=conditions, already_fed=[event])
        return True


def _forgotten(known: dict[tuple[str, int | None], Timer] | None, write: Write) -> bool:
    """Whether ``write`` deleted the timers of one position, now dropped from
    the ``known`` timers too (they stay what is stored: no re-read)."""
    if known is None or not isinstance(write, Delete) or write.model is not Timer:
        return False
    if set(write.filters) != {"run_id", "position"}:
        return False
    for key in [k for k in known if k[1] == write.filters["position"]]:
        del known[key]
    return True


def _writes_timers(write: Write) -> bool:
    """Whether a write of a turn's batch may change the run's timers."""
    if isinstance(write, Insert):
        return isinstance(write.instance, Timer)
    if isinstance(write, BulkInsert):  # published rows (streams, search attributes)
        return any(isinstance(row, Timer) for row in write.instances)
    if isinstance(write, Delete | Update):
        return write.model is Timer
    return True  # any other kind of write: assume it may


__all__ = ["HeldResult", "OnLostRace", "TurnAborted", "TurnState"]
