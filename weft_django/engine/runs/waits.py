"""What a run waits for, derived without its owner (admin, API).

It asks the runtime's own rules -- the queue's wait (``engine.queues.flow.waiting_reason``)
and the open commands of a read-only ``Replay``, as ``client.query`` does -- so what it
shows is what the owner would do. (``inspection`` may not import the runtime, which
imports it.)

Invariant: this module only reads. Durable rows say most of it -- the run's
timers, its pending async activities (the token's hash prefix and the
activity's name, never the token), its live children, its undelivered
updates, its queue -- and a read-only replay of a *parked* run adds what
only the body knows: the signal names it waits for and the activities
waiting for a retry. A replay that cannot run (the definition is not
registered in this process, the code diverged, the body raised) adds
nothing: the rows are shown, and nothing is invented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from weft_django.conf import get_settings
from weft_django.engine.journal import load_events
from weft_django.engine.queues.flow import waiting_reason
from weft_django.engine.replay.events import Frontier
from weft_django.engine.replay.machine import Replay
from weft_django.engine.workflow.commands import RunActivity, WaitSignal, WaitUntil
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.inspection.format import iso, local_clock, relative
from weft_django.kernel.clock import now_ms as clock_now_ms
from weft_django.kernel.ids import TOKEN_HASH_PREFIX_LEN
from weft_django.models import (
    LIVE_STATUSES,
    TERMINAL_STATUSES,
    AsyncActivity,
    AsyncStatus,
    Timer,
    UpdateRequest,
    WorkflowRun,
)

WaitKind = Literal[
    "timer", "signal", "activity", "async_activity", "child", "update", "queue_slot", "event"
]

#: Every wait kind, in the order of the ``Literal`` (the API's enum).
WAIT_KINDS: tuple[str, ...] = get_args(WaitKind)


@dataclass(frozen=True)
class Wait:
    """One thing a run waits for: its ``kind``, a sentence, and the details."""

    kind: WaitKind
    text: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.details}


def run_waits(run: WorkflowRun, *, now_ms: int | None = None) -> list[Wait]:
    """Everything ``run`` waits for, in a stable order (queue, timers by due time,
    async activities, children, updates by arrival, then the body's waits)."""
    if run.status in TERMINAL_STATUSES:
        return []
    db = get_settings().database
    waits: list[Wait] = []
    reason = waiting_reason(run, now_ms=now_ms)
    if reason is not None:
        waits.append(Wait("queue_slot", reason, {"queue": run.queue}))
    # A started marker (``activities.started``) is no wait: it never fires.
    timers = list(
        Timer.objects.using(db)
        .filter(run_id=run.pk)
        .exclude(kind="attempt")
        .order_by("fire_at", "pk")
    )
    now = clock_now_ms() if now_ms is None else now_ms
    for timer in timers:
        waits.append(
            Wait(
                "timer",
                _timer_text(timer, now),
                {
                    "timer_kind": timer.kind,
                    "position": timer.position,
                    "due_at": iso(timer.fire_at),
                    "due_at_ms": timer.fire_at,
                },
            )
        )
    pending = AsyncActivity.objects.using(db).filter(run_id=run.pk, status=AsyncStatus.PENDING)
    for row in pending.order_by("position"):
        prefix = row.token_hash[:TOKEN_HASH_PREFIX_LEN]
        waits.append(
            Wait(
                "async_activity",
                f"async activity {row.target!r} (token hash {prefix}) to be completed",
                {"name": row.target, "position": row.position, "token_hash_prefix": prefix},
            )
        )
    children = WorkflowRun.objects.using(db).filter(parent_id=run.pk, status__in=LIVE_STATUSES)
    for child in children.order_by("created_at", "pk"):
        waits.append(
            Wait(
                "child",
                f"child workflow {child.workflow_id!r} ({child.name}, {child.status})",
                {
                    "workflow_id": child.workflow_id,
                    "run_id": str(child.pk),
                    "name": child.name,
                    "status": child.status,
                },
            )
        )
    updates = UpdateRequest.objects.using(db).filter(run_id=run.pk, consumed_at_position=None)
    for update in updates.order_by("received_at", "pk"):
        waits.append(
            Wait(
                "update",
                f"update {update.name!r} ({update.update_id}) to be delivered",
                {"name": update.name, "update_id": update.update_id},
            )
        )
    if run.status == "parked":
        waits = _merge(waits, _body_waits(run, db))
    return waits


def _when(due_ms: int, now_ms: int) -> str:
    """``in 2 h (19:24:33)``: relative, then the clock time in the project's zone."""
    return f"{relative((due_ms - now_ms) / 1000)} ({local_clock(due_ms)})"


def _timer_text(timer: Timer, now_ms: int) -> str:
    when = _when(timer.fire_at, now_ms)
    if timer.kind == "sleep":
        return f"the sleep to end {when}"
    if timer.kind == "retry":
        attempt = (timer.payload or {}).get("attempt")
        return f"attempt {attempt} {when}" if attempt else f"the retry {when}"
    return f"the {timer.kind} {when}"


def _merge(waits: list[Wait], body: list[Wait]) -> list[Wait]:
    """The body's waits with the timer at the same position folded into one
    sentence ("signal 'approved', or the timeout in 2 h (19:24:33)")."""
    timers = {w.details.get("position"): w for w in waits if w.kind == "timer"}
    merged: list[Wait] = []
    for wait in body:
        timer = timers.pop(wait.details.get("position"), None)
        if timer is None:
            merged.append(wait)
            continue
        joiner = ", or " if timer.details.get("timer_kind") == "timeout" else ", "
        details = {**timer.details, **wait.details}
        merged.append(Wait(wait.kind, f"{wait.text}{joiner}{timer.text}", details))
    kept = [w for w in waits if w.kind != "timer" or w in timers.values()]
    return kept + merged


def _body_waits(run: WorkflowRun, db: str) -> list[Wait]:
    """The open commands only the body knows (a read-only replay), or nothing."""
    try:
        replay = Replay(
            get_workflow(run.name),
            workflow_id=run.workflow_id,
            run_id=str(run.pk),
            input=run.input,
            events=load_events(run.pk, db),
            clock_ms=clock_now_ms,
            record=False,
        )
        outcome = replay.advance()
    except Exception:  # not registered here, diverged, or the body raised: rows only
        return []
    if not isinstance(outcome, Frontier):
        return []
    waits: list[Wait] = []
    for leaf in outcome.open:
        command = leaf.command
        if isinstance(command, WaitSignal):
            waits.append(
                Wait(
                    "signal",
                    f"signal {command.name!r}",
                    {"name": command.name, "position": leaf.id, "timeout_ms": command.timeout_ms},
                )
            )
        elif isinstance(command, WaitUntil):
            waits.append(Wait("event", "a wait_until condition", {"position": leaf.id}))
        elif isinstance(command, RunActivity):
            waits.append(
                Wait(
                    "activity",
                    f"activity {command.name!r}",
                    {"name": command.name, "position": leaf.id},
                )
            )
    return waits


def waits_summary(waits: list[Wait]) -> str | None:
    """The waits as one line (the API's ``waiting_reason``), or ``None``."""
    return "; ".join(w.text for w in waits) or None


__all__ = ["TOKEN_HASH_PREFIX_LEN", "WAIT_KINDS", "Wait", "WaitKind", "run_waits", "waits_summary"]
