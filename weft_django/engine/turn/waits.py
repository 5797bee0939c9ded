"""Steps that wait: a signal, a ``wait_until`` condition, a sleep, and signal
delivery to ``ctx.on_signal`` handlers.

Why consuming is conditional: a buffered signal is consumed by the same batch
that records it (``consumed_at_position`` set under the condition that it is
still unset), so a signal is delivered exactly once even when two turns race.
"""

from __future__ import annotations

from weft_django.engine.journal import RunInbox
from weft_django.engine.replay.events import Event
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.workflow.commands import Sleep, WaitSignal, WaitUntil
from weft_django.errors import WorkflowTimeoutError
from weft_django.models import SignalMessage
from weft_django.ownership.ops import Condition, RowCondition, Update, Write


def wait_signal(
    turn: TurnState, leaf: Leaf, command: WaitSignal, inbox: RunInbox, now: int
) -> bool:
    """Settle with the first buffered signal of that name, or time out."""
    assert turn.replay is not None
    for message in inbox.signals:
        if message.name == command.name:
            return turn.settle(
                leaf,
                result=message.payload,
                writes=[consume(message, turn.replay.next_position)],
                conditions=[unconsumed(message)],
            )
    return time_out_if_due(turn, leaf, inbox, now, f"signal {command.name!r}")


def wait_until(turn: TurnState, leaf: Leaf, command: WaitUntil, inbox: RunInbox, now: int) -> bool:
    """Settle once the predicate holds (its exception settles it too), or time out."""
    assert turn.replay is not None
    try:
        satisfied = turn.replay.evaluate(command)
    except Exception as exc:
        return turn.settle(leaf, error=exc)
    if satisfied:
        return turn.settle(leaf, result=True)
    return time_out_if_due(turn, leaf, inbox, now, "wait_until condition")


def sleep(turn: TurnState, leaf: Leaf, command: Sleep, inbox: RunInbox, now: int) -> bool:
    """Settle once the sleep's timer is due (a zero sleep at once)."""
    timer = inbox.timers.get(("sleep", leaf.id))
    if (timer is not None and timer.fire_at <= now) or command.duration_ms == 0:
        return turn.settle(leaf, result=None)
    return False


def time_out_if_due(turn: TurnState, leaf: Leaf, inbox: RunInbox, now: int, what: str) -> bool:
    timer = inbox.timers.get(("timeout", leaf.id))
    if timer is None or timer.fire_at > now:
        return False
    return turn.settle(leaf, error=WorkflowTimeoutError(turn.run.workflow_id, what))


def deliver_to_handler(turn: TurnState, open_leaves: list[Leaf], inbox: RunInbox) -> bool:
    """Deliver one buffered signal to its ``ctx.on_signal`` handler.

    A signal the body is also waiting for (``wait_for_signal`` of that name)
    goes to the wait, not the handler.
    """
    replay = turn.replay
    assert replay is not None
    handlers = replay.ctx.signal_handlers
    if not handlers:
        return False
    waited = {leaf.command.name for leaf in open_leaves if isinstance(leaf.command, WaitSignal)}
    for message in inbox.signals:
        if message.name in handlers and message.name not in waited:
            event = Event(
                replay.next_position, "signal-handler", None, message.name, message.payload
            )
            turn.commit(
                [consume(message, event.position)], [event], conditions=[unconsumed(message)]
            )
            return True
    return False


def consume(message: SignalMessage, position: int) -> Write:
    return Update(SignalMessage, {"pk": message.pk}, {"consumed_at_position": position})


def unconsumed(message: SignalMessage) -> Condition:
    return RowCondition(SignalMessage, message.pk, {"consumed_at_position": None})


__all__ = ["consume", "deliver_to_handler", "sleep", "time_out_if_due", "wait_signal", "wait_until"]
