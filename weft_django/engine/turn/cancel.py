"""Delivering a cancel with a grace into the body, and how such a run ends.

Why a journal event: "cancel requested" is a fact from outside, like a
signal. Recording it (a ``cancel`` event at the position where it reached
the body, committed in the turn's fenced checkpoint) makes the cleanup path
replayable: a takeover or a cache miss during cleanup replays the body, the
event throws ``WorkflowCancelled`` at the same wait, and the cleanup
commands already recorded settle in order. It is delivered once, at the
frontier (the body blocked, every recorded event applied), before the turn
starts anything new.
"""

from __future__ import annotations

from typing import Any

from weft_django.engine.turn.commit import TurnState


def deliver_cancel(turn: TurnState) -> bool:
    """Record the run's cancel request into its journal (once); ``True`` when
    it did (the turn goes round: the next ``advance`` throws it in)."""
    replay = turn.replay
    run = turn.run
    if replay is None or run.cancel_requested_at is None or replay.cancelled is not None:
        return False
    turn.drop_attempts("the workflow was cancelled")
    turn.commit([], events=[replay.cancel_event(run.cancel_reason)])
    return True


def cancel_error(turn: TurnState) -> dict[str, Any]:
    """The error recorded on a run that ended after its cancel was delivered
    (the same shape as an immediate cancel's)."""
    return {"type": "Cancelled", "message": turn.run.cancel_reason or "cancelled"}


__all__ = ["cancel_error", "deliver_cancel"]
