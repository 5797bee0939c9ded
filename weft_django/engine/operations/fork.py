"""Fork and reset: a new run whose journal is a prefix of another run's.

Invariants:

- the new run is written by the one start write (``operations.start``): its
  row, the copied journal entries (positions ``0 .. at_position - 1``) and
  the signals the source received after the prefix go in the start's one
  batch, and -- for a reset -- so does the ending of the live run it
  replaces (``terminated``, the claim rotated, live descendants cancelled,
  as a cancel does). All or nothing;
- recorded results before ``at_position`` are reused, never run again; the
  new run continues with today's code from there;
- the source run is untouched by a fork; a reset only ends it;
- every check runs before anything is written: ``at_position`` within the
  journal, not splitting a ``ctx.all`` / ``ctx.race`` group (some members
  recorded before it, some after), the workflow registered in this
  process, and today's code replaying the prefix without diverging.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from weft_django.conf import get_settings
from weft_django.engine import tracing
from weft_django.engine.journal import load_events
from weft_django.engine.operations._loop import MAX_ATTEMPTS, latest_run
from weft_django.engine.operations.start import Carried, NewRun, new_run, start
from weft_django.engine.operations.stop import _live_descendants, _stop_writes
from weft_django.engine.replay.branches import Group, Leaf
from weft_django.engine.replay.events import Diverged, Event, Frontier
from weft_django.engine.replay.machine import Replay
from weft_django.engine.runs.metrics import record_stops
from weft_django.engine.wakes import announce_event
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.errors import InvalidArgumentError, InvalidTransitionError, WorkflowAlreadyRunning
from weft_django.kernel.clock import now_ms
from weft_django.kernel.ids import check_reason, validate_workflow_id
from weft_django.models import LIVE_STATUSES, JournalEntry, SignalMessage, WorkflowRun
from weft_django.ownership.ops import BulkInsert, Condition, Write


def check_position(run: WorkflowRun, at_position: object, input: Any, db: str) -> list[Event]:
    """The journal prefix before ``at_position``, after every check of it.

    ``InvalidArgumentError("at_position")`` when it is no integer, beyond the
    journal, or inside a group whose members it would split; ``UnknownWorkflowType``
    when the run's workflow is not registered; ``NonDeterminismError`` when
    today's code does not replay the prefix.
    """
    if isinstance(at_position, bool) or not isinstance(at_position, int):
        raise InvalidArgumentError(
            "at_position", f"at_position must be an integer, got {at_position!r:.100}"
        )
    events = load_events(run.pk, db)
    end = events[-1].position + 1 if events else 0
    if not 0 <= at_position <= end:
        raise InvalidArgumentError(
            "at_position",
            f"at_position {at_position} is beyond the journal of run {run.pk} "
            f"(positions 0 to {end - 1}; {end} keeps all of it)",
        )
    definition = get_workflow(run.name)
    prefix = [event for event in events if event.position < at_position]
    later = {event.command for event in events if event.position >= at_position}
    replay = Replay(
        definition,
        workflow_id=run.workflow_id,
        run_id=str(run.pk),
        input=input,
        events=prefix,
        clock_ms=now_ms,
        record=False,
    )
    outcome = replay.advance()
    if isinstance(outcome, Diverged):
        raise outcome.error
    if isinstance(outcome, Frontier):
        _refuse_split(list(replay.leaves.values()), later, at_position)
    return prefix


def _root(leaf: Leaf) -> Group | None:
    group = leaf.group
    while group is not None and group.parent is not None:
        group = group.parent
    return group


def _refuse_split(leaves: list[Leaf], later: set[int | None], at_position: int) -> None:
    """A group with a member recorded before ``at_position`` and a live member
    recorded after it would be split: refused."""
    for leaf in leaves:
        root = _root(leaf)
        if root is None or not leaf.settled:
            continue
        split = [
            other.id
            for other in leaves
            if other.live and other.id in later and _root(other) is root
        ]
        if split:
            raise InvalidArgumentError(
                "at_position",
                f"at_position {at_position} splits a ctx.{root.kind} group: command "
                f"{leaf.id} is recorded before it, command {split[0]} after it "
                "(fork before or after the whole group)",
            )


def _copied(source: WorkflowRun, prefix: list[Event], at_position: int, db: str) -> Any:
    """The rows of the new run besides its own: the journal prefix and the
    signals the source received that it had not consumed before ``at_position``."""
    positions = {event.position for event in prefix}
    entries = list(JournalEntry.objects.using(db).filter(run_id=source.pk, position__in=positions))
    signals = list(
        SignalMessage.objects.using(db)
        .filter(run_id=source.pk)
        .exclude(consumed_at_position__lt=at_position)
        .order_by("id")
    )

    def rows(run: WorkflowRun) -> list[Write]:
        journal = [
            JournalEntry(
                run_id=run.pk,
                position=entry.position,
                kind=entry.kind,
                command=entry.command,
                target=entry.target,
                result=entry.result,
                error=entry.error,
                engine_id=entry.engine_id,
                epoch=entry.epoch,
                at_ms=entry.at_ms,
            )
            for entry in entries
        ]
        inbox = [SignalMessage(run_id=run.pk, name=s.name, payload=s.payload) for s in signals]
        return [BulkInsert(journal), BulkInsert(inbox)]

    return rows


def _new(source: WorkflowRun, workflow_id: str, input: Any) -> NewRun:
    return new_run(
        source.name,
        input,
        workflow_id,
        queue=source.queue,
        priority=source.priority,
        concurrency_key=source.concurrency_key,
    )


def fork(
    workflow_id: str,
    *,
    at_position: object,
    workflow_id_for_fork: str | None = None,
    input: Any = None,
) -> WorkflowRun:
    """A new run (workflow id ``workflow_id_for_fork``, default
    ``<workflow_id>-fork-<uuid>``) of the latest run of ``workflow_id``, its
    journal the source's before ``at_position``; ``input`` (``None``: the
    source's). The source, live or ended, is untouched."""
    db = get_settings().database
    source = latest_run(workflow_id, db)
    target = (
        f"{workflow_id}-fork-{uuid.uuid4().hex[:12]}"[-200:]
        if workflow_id_for_fork is None
        else validate_workflow_id(workflow_id_for_fork)
    )
    run_input = source.input if input is None else input
    with tracing.start_span(source.name, source="fork", workflow_id=target) as span:
        new = _new(source, target, run_input)
        prefix = check_position(source, at_position, new.input, db)
        assert isinstance(at_position, int)
        carried = Carried(
            _copied(source, prefix, at_position, db), columns={"continued_from_id": source.pk}
        )
        run, _created = start(new, carried)
        tracing.annotate(span, run_id=str(run.pk), forked_from=str(source.pk))
        return run


def reset(
    workflow_id: str, *, at_position: object, reason: str = "", actor: str = "client"
) -> WorkflowRun:
    """The latest run of ``workflow_id`` ends ``terminated`` (if live: claim
    rotated, live descendants cancelled, ``reason`` recorded) and a new run of
    the same id continues from its journal before ``at_position``, in one batch."""
    check_reason(reason)
    db = get_settings().database
    for _ in range(MAX_ATTEMPTS):
        source = latest_run(workflow_id, db)
        with tracing.start_span(source.name, source="reset", workflow_id=workflow_id) as span:
            new = dataclasses.replace(_new(source, workflow_id, source.input), after_finished=True)
            prefix = check_position(source, at_position, new.input, db)
            assert isinstance(at_position, int)
            rows = _copied(source, prefix, at_position, db)
            ended: list[WorkflowRun] = []
            conditions: list[Condition] = []
            before: list[Write] = []
            if source.status in LIVE_STATUSES:
                ended = [source, *_live_descendants(source, db)]
                message = reason or f"reset at position {at_position}"
                conditions, before = _ending(source, ended[1:], message, db, actor=actor)
            carried = Carried(
                rows,
                conditions,
                before,
                source.pk if ended else None,
                columns={"continued_from_id": source.pk},
            )
            try:
                run, _created = start(new, carried)
            except WorkflowAlreadyRunning:
                if latest_run(workflow_id, db).pk == source.pk:
                    continue  # the run moved between the read and the batch: read again
                raise
            tracing.annotate(span, run_id=str(run.pk), reset_from=str(source.pk))
        _announce_ended(ended, db)
        return run
    raise InvalidTransitionError(workflow_id, latest_run(workflow_id, db).status, "reset")


def _ending(
    source: WorkflowRun, children: list[WorkflowRun], message: str, db: str, *, actor: str
) -> tuple[list[Condition], list[Write]]:
    """``source`` ends ``terminated`` and its live descendants ``cancelled``,
    each with its claim rotated (``operations.stop``)."""
    now = now_ms()
    conditions, writes = _stop_writes(
        source,
        "terminated",
        {"type": "Terminated", "message": message},
        db,
        actor=actor,
        now=now,
        reason=f"reset: {message}"[:200],
    )
    for child in children:
        c_conds, c_writes = _stop_writes(
            child,
            "cancelled",
            {"type": "Cancelled", "message": f"parent {source.workflow_id} was reset"},
            db,
            actor=actor,
            now=now,
            reason="parent reset",
        )
        conditions.extend(c_conds)
        writes.extend(c_writes)
    return conditions, writes


def _announce_ended(ended: list[WorkflowRun], db: str) -> None:
    if not ended:
        return
    source = ended[0]
    record_stops(
        db,
        [
            (each.name, "terminated" if each is source else "cancelled", each.created_at)
            for each in ended
        ],
    )
    for each in ended:
        announce_event("finished", each.pk, db, workflow_id=each.workflow_id)
    announce_event("child-completion", source.parent_id, db)


__all__ = ["check_position", "fork", "reset"]
