"""Which step carries out an open command: a table keyed on the command class.

Why a table that raises: every leaf command class has exactly one step, and
a command with no step is a programming error, not "nothing to do" -- it
raises ``RuntimeError`` instead of leaving the run parked forever. A step
returns whether it made progress (committed something, or settled the leaf).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.activity import run_activity
from weft_django.engine.turn.async_activity import async_activity
from weft_django.engine.turn.child import start_child
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.turn.signal_workflow import signal_workflow
from weft_django.engine.turn.waits import sleep, wait_signal, wait_until
from weft_django.engine.workflow.commands import (
    RunActivity,
    SignalWorkflow,
    Sleep,
    StartAsyncActivity,
    StartChild,
    WaitSignal,
    WaitUntil,
)

Step = Callable[[TurnState, Leaf, Any, RunInbox, int], bool]
"""``step(turn, leaf, command, inbox, now) -> progressed``; ``command`` is
``leaf.command``, of the class the step is registered for."""

STEPS: dict[type, Step] = {
    RunActivity: run_activity,
    Sleep: sleep,
    WaitSignal: wait_signal,
    WaitUntil: wait_until,
    StartAsyncActivity: async_activity,
    StartChild: start_child,
    SignalWorkflow: signal_workflow,
}
"""One step per class of ``commands.LEAF_COMMANDS`` (a unit test holds them equal)."""


def step_for(command: object) -> Step:
    """The step for ``command``'s class (or the nearest base class that has one)."""
    for cls in type(command).__mro__:
        step = STEPS.get(cls)
        if step is not None:
            return step
    raise RuntimeError(f"unrecognized command {type(command).__qualname__}: {command!r}")


def act(turn: TurnState, leaf: Leaf, inbox: RunInbox, now: int) -> bool:
    """Carry out ``leaf``'s command as far as it goes now."""
    return step_for(leaf.command)(turn, leaf, leaf.command, inbox, now)


__all__ = ["STEPS", "Step", "act", "step_for"]
