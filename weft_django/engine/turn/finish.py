"""Ending a run: the terminal commit, ``continue_as_new``, post-commit effects.

Why one terminal batch: the end state, the held-back last result, the timer
cleanup, the parent's wake and the claim release all commit together
(SPEC §4.2), so a run is never ended while still claimed, or released while
still live. Only after that commit do the effects run: the ``finished`` and
``child-completion`` wakes (``engine.wakes.announce``), cancelling children
a race abandoned, and the ``workflow_completed``/``workflow_failed`` signals.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from django.utils import timezone

from weft_django.engine import signals as weft_signals
from weft_django.engine import tracing
from weft_django.engine.activities import attempt_log
from weft_django.engine.journal import bump_parent
from weft_django.engine.queues.freed import announce_slot_freed
from weft_django.engine.replay.errors_codec import error_record
from weft_django.engine.runs.metrics import record_run_end
from weft_django.engine.turn.child import cancel_abandoned_children
from weft_django.engine.turn.commit import HeldResult, TurnAborted, TurnState
from weft_django.engine.turn.publish import CarrySearchAttributes
from weft_django.engine.wakes import Wake, announce
from weft_django.engine.workflow.payload import normalize
from weft_django.errors import PayloadError
from weft_django.models import QueueSlot, Timer, WorkflowRun
from weft_django.ownership.ops import Delete, Insert, Update, Write

logger = logging.getLogger("weft_django.engine")

EndStatus = Literal["completed", "failed", "cancelled", "suspended"]
"""How a turn can leave a run for good (``suspended`` until resumed;
``cancelled`` after a cancel with a grace was delivered and cleanup ended)."""


def _held_writes(held: HeldResult | None, *, drop_timer_deletes: bool) -> list[Write]:
    """The held result's writes; its position's timer delete is dropped when the
    end deletes every timer of the run anyway (one timer statement, not two)."""
    if held is None:
        return []
    return [
        w
        for w in held.writes
        if not (drop_timer_deletes and isinstance(w, Delete) and w.model is Timer)
    ]


def stop(
    turn: TurnState,
    status: EndStatus,
    *,
    result: Any = None,
    error: Any = None,
    release: bool,
    reason: str | None = None,
    extra_values: dict[str, Any] | None = None,
) -> EndStatus:
    """Commit the run's end; returns the status stored (a result that is not
    a valid payload fails the run instead of completing it).

    ``reason``: the ``suspended_reason`` (default: the error's message).
    ``extra_values``: more run columns for the same write (they win over the
    reset of the failed-turn counter a normal end does).
    """
    host = turn.host
    run = turn.run
    wid = run.workflow_id
    host.parked_commands.pop(str(run.pk), None)
    try:
        stored = normalize(f"result of {wid!r}", result) if status == "completed" else None
    except PayloadError as exc:
        status, stored, error = "failed", None, error_record(exc)
    no_timers = turn.inbox is not None and turn.inbox.has_timer_at() is False
    writes: list[Write] = [] if no_timers else [Delete(Timer, {"run_id": run.pk})]
    if status != "suspended":
        writes.extend(bump_parent(run))
    values: dict[str, Any] = {"status": status, "result": stored, "error": error, "wake_at": None}
    values.update(turn.failures_cleared())
    values.update(extra_values or {})
    if status == "suspended":
        default_reason = str((error or {}).get("message", ""))
        values["suspended_reason"] = (default_reason if reason is None else reason)[:2000]
    else:
        values["finished_at"] = timezone.now()
    registry = host.registry
    epoch = host.epoch_for(wid) if tracing.enabled() else 0  # before the release forgets it
    transition = registry.prepare_release(wid, reason=status) if (release and registry) else None
    held, turn.held_result = turn.held_result, None
    committed = False
    try:
        turn.commit(
            [
                *_held_writes(held, drop_timer_deletes=not no_timers),
                *writes,
                *(transition.writes if transition else ()),
            ],
            conditions=[
                *(held.conditions if held else ()),
                *(transition.conditions if transition else ()),
            ],
            run_values=values,
            already_fed=[held.event] if held else (),
        )
        committed = True
    finally:
        if transition is not None and registry is not None:
            registry.finish_release(wid, committed)
    record_run_end(host.metrics, run.name, status, run.created_at)
    if status != "suspended":  # suspended is not an end: resume may go on
        tracing.run_ended(
            run,
            status,
            engine_id=host.engine_id,
            epoch=epoch,
            error_type=(error or {}).get("type") if isinstance(error, dict) else None,
        )
    cancel_abandoned_children(turn)
    announce(Wake("finished", str(run.pk), turn.db, wid))
    announce_slot_freed(run.queue, turn.db)
    if run.parent_id is not None and status != "suspended":
        # A suspended child does not wake its parent: it has not ended.
        announce(Wake("child-completion", str(run.parent_id), turn.db))
    run.status = status
    signal = {
        "completed": weft_signals.workflow_completed,
        "failed": weft_signals.workflow_failed,
    }.get(status)
    if signal is not None:
        signal.send(sender=WorkflowRun, run=run, result=stored, error=error)
    if status == "failed":
        attempt_log.run_failed(wid, str(run.pk), error)
    else:
        logger.info("workflow %s %s", wid, status)
    return status


def carry_slot(run: WorkflowRun, new: WorkflowRun, epoch: int | None) -> list[Write]:
    """``continue_as_new`` of a queued run: its slot passes to the new run in
    the batch that ends the old one, so the queue's count never drops in
    between and the new run never runs without a slot (the slot stays this
    claim generation's: fenced like any). Nothing for a run without a queue."""
    if run.queue is None or epoch is None:
        return []
    mine = {"workflow_id": run.workflow_id, "epoch": epoch, "run_id": run.pk}
    return [Update(QueueSlot, {**mine, "position__isnull": True}, {"run_id": new.pk})]


def continue_as_new(turn: TurnState, new_input: Any) -> None:
    """End this run as completed and go on driving a fresh run of the same id."""
    run = turn.run
    wid = run.workflow_id
    try:
        fresh_input = normalize(f"continue_as_new input of {wid!r}", new_input)
    except PayloadError as exc:
        stop(turn, "failed", error=error_record(exc), release=True)
        raise TurnAborted(wid) from exc
    new = WorkflowRun(
        workflow_id=wid,
        name=run.name,
        status="running",
        input=fresh_input,
        continued_from_id=run.pk,
        parent_id=run.parent_id,
        parent_position=run.parent_position,
        deadline_at=run.deadline_at,
        # Its queue's: the new run goes on in the old run's slot (``carry_slot``).
        queue=run.queue,
        priority=run.priority,
        concurrency_key=run.concurrency_key,
        started_at=timezone.now(),
        turn_started_at=turn.host.now_ms(),
        turn_pid=os.getpid(),
        # The new run goes on in this trace, under the turn that continued it.
        trace_context=tracing.carrier() or run.trace_context,
    )
    ended = {
        "status": "completed",
        "result": {"continued_as_new": str(new.pk)},
        "finished_at": timezone.now(),
        "wake_at": None,
    }
    # This turn goes on driving the new run inline: in flight before it
    # exists, or the maintenance pass would start a second turn of it.
    turn.host.adopt_inflight(new.pk)
    # The old run must leave the live statuses before the new one is
    # inserted: one live run per workflow id is a (non-deferred) unique
    # constraint, checked statement by statement.
    turn.commit(
        [
            Delete(Timer, {"run_id": run.pk}),
            Update(WorkflowRun, {"pk": run.pk}, ended),
            Insert(new),
            CarrySearchAttributes(run.pk, new.pk),
            *carry_slot(run, new, turn.host.epoch_for(wid)),
        ],
        run_values=ended,
    )
    record_run_end(turn.host.metrics, run.name, "completed", run.created_at)
    tracing.run_ended(
        run, "completed", engine_id=turn.host.engine_id, epoch=turn.host.epoch_for(wid)
    )
    turn.host.parked_commands.pop(str(run.pk), None)
    turn.run = new
    turn.version = new.version
    turn.wake_seq = new.wake_seq
    turn.replay = None
    turn.inbox = None


__all__ = ["EndStatus", "continue_as_new", "stop"]
