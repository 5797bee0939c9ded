"""Waiting for a turn's running attempts, and committing each as it lands.

Why the turn waits here and does not park: an attempt's result is in this
process's memory only, and the claim fence makes sure only this engine can
record it. While attempts run, the turn stays responsive to everything else
the open commands wait for -- a timer of a race, a signal, a cancel -- by
waking on whichever comes first: an attempt finishing (its future's
callback), a poke (a wake for this run arrived while its turn is in flight,
``TurnHost.turn_attention``), the next due timer, or the poll interval
(wakes delivered elsewhere, e.g. to another Celery pool process). The
timers the open commands need are armed durably *before* waiting, so a
crash while activities run loses no sleep or timeout. A run that stopped
being drivable (cancelled, suspended, timed out) or a claim this engine lost
abandons every attempt: their results are discarded and their heartbeats
raise ``ActivityCancelled``.
"""

from __future__ import annotations

from weft_django.engine.activities.executor import AttemptAbandoned
from weft_django.engine.journal import RunInbox, load_inbox
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.activity import finish_attempt
from weft_django.engine.turn.commit import TurnAborted, TurnState
from weft_django.engine.turn.park import plan_timers
from weft_django.errors import EngineDeposedError
from weft_django.models import DRIVABLE_STATUSES

POLL_CAP_MS = 1000
"""The longest a waiting turn goes without looking at its run row."""


def commit_finished(turn: TurnState) -> bool:
    """Commit the first finished attempt in command order; whether one was."""
    for position in sorted(turn.attempts):
        pending = turn.attempts[position]
        if pending.handle.future.done():
            del turn.attempts[position]
            outcome = pending.handle.future.result()
            if isinstance(outcome.error, AttemptAbandoned):
                # Not the activity's outcome (the executor shut down under it):
                # nothing to record; the next owner runs the attempt again.
                raise TurnAborted(f"{turn.run.workflow_id}: {outcome.error}")
            return finish_attempt(turn, pending, outcome)
    return False


def await_attempts(
    turn: TurnState, open_leaves: list[Leaf], inbox: RunInbox, *, timers: bool = True
) -> None:
    """Block until an attempt finished, the run changed, or a timer is due.

    ``timers=False`` (an engine stopping: no command may start): the open
    commands' timers are neither armed nor waited for -- only the running
    attempts are.
    """
    host = turn.host
    if timers and _arm_timers(turn, open_leaves, inbox):
        inbox = load_inbox(turn.run, turn.db)
    poll_ms = min(POLL_CAP_MS, max(10, host.settings.poll_interval_ms))
    due = _next_due(turn, open_leaves, inbox) if timers else None
    while True:
        now = host.now_ms()
        if due is not None and due <= now:
            return
        wait_ms = poll_ms if due is None else min(poll_ms, due - now)
        turn.attention.wait(wait_ms / 1000)
        turn.attention.clear()
        if any(p.handle.future.done() for p in turn.attempts.values()):
            return
        status, wake_seq = turn.read_run_state()
        if status not in DRIVABLE_STATUSES:
            turn.drop_attempts(f"the run is {status}")
            raise TurnAborted(f"{turn.run.workflow_id}: {status} while its activities ran")
        try:
            turn.still_owner()
        except EngineDeposedError:
            turn.drop_attempts("this engine lost the claim")
            raise
        if wake_seq != turn.wake_seq:
            # Read before the inbox the turn reads next: a valid park bound.
            turn.wake_seq = wake_seq
            return


def _arm_timers(turn: TurnState, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
    """Commit the timers the open commands need (a race's sleep, a wait's
    timeout) before waiting: the run stays ``running``. Whether it wrote."""
    host = turn.host
    plan = plan_timers(
        open_leaves,
        inbox.timers,
        host.now_ms(),
        run_id=turn.run.pk,
        engine_id=host.engine_id,
        epoch=host.epoch_for(turn.run.workflow_id),
        deadline_at=turn.run.deadline_at,
    )
    if not plan.writes:
        return False
    turn.commit(plan.writes, run_values={"wake_at": plan.wake_at})
    return True


def _next_due(turn: TurnState, open_leaves: list[Leaf], inbox: RunInbox) -> int | None:
    """The earliest timer that lets an open command without a running attempt
    progress (a sleep, a timeout, a retry to start): each one due settles or
    starts something, so returning for it can never spin."""
    waiting = {leaf.id for leaf in open_leaves if leaf.id not in turn.attempts}
    times = [t.fire_at for (_, pos), t in inbox.timers.items() if pos in waiting]
    return min(times) if times else None


__all__ = ["POLL_CAP_MS", "await_attempts", "commit_finished"]
