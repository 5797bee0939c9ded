"""The ``ctx.async_activity`` step: mint a token, hand it out, await completion.

Why three journaled stages: the token is an HMAC of the run, the position and
a nonce recorded in the journal (``async-token``), so the owning engine can
recompute it but only its hash is stored; the hand-out to an ``@activity``
(``async-handout``) is recorded once it succeeded, so a retried hand-out
reuses the same token; the completion arrives from outside
(``client.complete_async``) as an ``AsyncActivity`` row the step settles from.
"""

from __future__ import annotations

import secrets
from typing import Any

from weft_django.engine.journal import RunInbox, async_token, hash_token
from weft_django.engine.replay.events import Event
from weft_django.engine.replay.machine import Leaf
from weft_django.engine.turn.activity import start_attempt
from weft_django.engine.turn.commit import TurnState
from weft_django.engine.workflow.commands import StartAsyncActivity
from weft_django.errors import ActivityError, WorkflowTimeoutError
from weft_django.models import AsyncActivity, Timer
from weft_django.ownership.ops import Delete, Insert, Update, Write


def async_activity(
    turn: TurnState, leaf: Leaf, command: StartAsyncActivity, inbox: RunInbox, now: int
) -> bool:
    replay = turn.replay
    assert replay is not None
    run_pk = turn.run.pk
    minted = leaf.info.get("async-token")
    if not isinstance(minted, dict):
        nonce = secrets.token_hex(16)
        token = async_token(run_pk, leaf.id, nonce)
        event = Event(replay.next_position, "async-token", leaf.id, command.name, {"nonce": nonce})
        row = AsyncActivity(
            token_hash=hash_token(token), run_id=run_pk, position=leaf.id, target=command.name
        )
        turn.commit([Insert(row)], [event])
        return True
    token = async_token(run_pk, leaf.id, str(minted.get("nonce")))
    if command.is_activity and "async-handout" not in leaf.info:

        def handed_out(_: Any) -> bool:
            assert turn.replay is not None
            event = Event(turn.replay.next_position, "async-handout", leaf.id, command.name, None)
            turn.commit(
                [Delete(Timer, {"run_id": run_pk, "position": leaf.id, "kind": "retry"})], [event]
            )
            return True

        return start_attempt(
            turn,
            leaf,
            command.name,
            (token, *command.args),
            {},
            inbox,
            now,
            on_success=handed_out,
            secret=token,
        )
    settled = inbox.async_rows.get(leaf.id)
    if settled is not None and settled.status == "completed":
        return turn.settle(leaf, result=settled.result)
    if settled is not None and settled.status == "failed":
        error = (
            settled.error if isinstance(settled.error, dict) else {"message": str(settled.error)}
        )
        return turn.settle(
            leaf,
            error=ActivityError(
                command.name,
                str(error.get("message", "failed")),
                kind="error",
                error_type=str(error.get("type") or "AsyncActivityFailed"),
            ),
        )
    timer = inbox.timers.get(("timeout", leaf.id))
    if timer is not None and timer.fire_at <= now:
        expire = Update(
            AsyncActivity,
            {"run_id": run_pk, "position": leaf.id, "status": "pending"},
            {"status": "expired"},
        )
        return turn.settle(
            leaf,
            error=WorkflowTimeoutError(turn.run.workflow_id, f"async activity {command.name!r}"),
            writes=[expire],
        )
    return False


def void_async_tokens(run_pk: Any, leaves: list[Leaf]) -> list[Write]:
    """Writes that void the pending tokens of abandoned async activities: a
    completion that arrives later is refused (``AsyncActivityTokenError("used")``)
    instead of being accepted for a command nobody waits for."""
    positions = [leaf.id for leaf in leaves if isinstance(leaf.command, StartAsyncActivity)]
    if not positions:
        return []
    return [
        Update(
            AsyncActivity,
            {"run_id": run_pk, "position__in": positions, "status": "pending"},
            {"status": "expired"},
        )
    ]


__all__ = ["async_activity", "void_async_tokens"]
