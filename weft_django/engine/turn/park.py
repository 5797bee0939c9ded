"""Parking a run: reconcile its timers with what the open commands wait for.

Why a pure plan: which timers a parked run needs follows from its open
commands, the timers it has and the time alone, so ``plan_timers`` takes
those and returns the writes and the run's next ``wake_at``; ``park``
commits the plan under the condition that no wake arrived since the turn
read the run (``wake_seq``). When that condition fails the turn looks at
its inbox again, so a wake never falls between "nothing to do" and "parked".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.child import cancel_abandoned_children
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.workflow.commands import (
    LeafCommand,
    Sleep,
    StartAsyncActivity,
    WaitSignal,
    WaitUntil,
)
from weft_django.models import Timer
from weft_django.ownership.ops import Delete, Insert, RunCondition, Write

TimerKey = tuple[str, int | None]


@dataclass(frozen=True)
class TimerPlan:
    """The timer writes of a park, and when the parked run is next due."""

    writes: list[Write]
    wake_at: int | None


def plan_timers(
    open_leaves: Sequence[Leaf],
    timers: Mapping[TimerKey, Timer],
    now: int,
    *,
    run_id: Any,
    engine_id: str,
    epoch: int,
    deadline_at: int | None = None,
) -> TimerPlan:
    """The timers the open commands need (a sleep's, a wait's timeout, a
    pending retry), inserted when missing; timers no open command needs,
    deleted. ``wake_at``: the earliest timer or the run's deadline."""
    wanted: dict[tuple[str, int], int] = {}
    opened = {leaf.id for leaf in open_leaves}
    for leaf in open_leaves:
        command = leaf.command
        if isinstance(command, Sleep):
            wanted[("sleep", leaf.id)] = now + command.duration_ms
        timeout = _timeout_ms(command)
        if timeout is not None:
            wanted[("timeout", leaf.id)] = now + timeout
        retry = timers.get(("retry", leaf.id))
        if retry is not None:
            wanted[("retry", leaf.id)] = retry.fire_at
    # An open command's started marker (``engine.activities.started``) stays: it
    # never fires, so it is neither inserted here nor a wake time.
    kept = {(kind, pos) for (kind, pos) in timers if kind == "attempt" and pos in opened}
    writes: list[Write] = []
    fire_times: list[int] = []
    for key, fire_at in wanted.items():
        existing = timers.get(key)
        if existing is not None:
            fire_times.append(existing.fire_at)
            continue
        fire_times.append(fire_at)
        writes.append(
            Insert(
                Timer(
                    run_id=run_id,
                    kind=key[0],
                    position=key[1],
                    fire_at=fire_at,
                    engine_id=engine_id,
                    epoch=epoch,
                )
            )
        )
    stale = [
        t.pk
        for key, t in timers.items()
        if key[1] is not None and key not in wanted and key not in kept
    ]
    if stale:
        writes.append(Delete(Timer, {"pk__in": stale}))
    if deadline_at is not None:
        fire_times.append(deadline_at)
    return TimerPlan(writes, min(fire_times) if fire_times else None)


def _timeout_ms(command: LeafCommand) -> int | None:
    """The deadline of a wait (a signal, a condition, an async activity)."""
    if isinstance(command, WaitSignal | WaitUntil | StartAsyncActivity):
        return command.timeout_ms
    return None


def park(turn: TurnState, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
    """Park the run with its timers; ``False`` when a wake arrived meanwhile."""
    host = turn.host
    now = host.now_ms()
    epoch = host.epoch_for(turn.run.workflow_id)
    plan = plan_timers(
        open_leaves,
        inbox.timers,
        now,
        run_id=turn.run.pk,
        engine_id=host.engine_id,
        epoch=epoch,
        deadline_at=turn.run.deadline_at,
    )
    result = turn.commit(
        plan.writes,
        conditions=[RunCondition(turn.run.pk, wake_seq=turn.wake_seq, label="wake-seq")],
        run_values={
            "status": "parked",
            "parked_seq": turn.wake_seq,
            "wake_at": plan.wake_at,
            **turn.failures_cleared(),
        },
        on_lost_race="return",
    )
    if result.committed:
        assert turn.replay is not None
        host.parked_commands[str(turn.run.pk)] = turn.replay.commands_yielded
        cancel_abandoned_children(turn, inbox)
    return result.committed


__all__ = ["TimerKey", "TimerPlan", "park", "plan_timers"]
