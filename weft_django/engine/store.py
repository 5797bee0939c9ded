"""Reading a run's durable state, and building the rows a turn writes.

Kept apart from the turn logic so that the turn reads as "decide, then
commit one batch", and so queries (``client.query``) and the admin can load
a journal the same way the engine does.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.db.models import F

from weft_django.engine.replay import Event
from weft_django.models import (
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    Timer,
    WorkflowRun,
)
from weft_django.ownership.batch import Delete, Insert, Update, Write


def load_events(run_id: Any, using: str) -> list[Event]:
    rows = (
        JournalEntry.objects.using(using)
        .filter(run_id=run_id)
        .order_by("position")
        .values_list("position", "kind", "command", "target", "result", "error")
    )
    return [Event(*row) for row in rows]


@dataclass
class RunInbox:
    """What the outside world left for a run: signals, async results, children, timers."""

    signals: list[SignalMessage] = field(default_factory=list)
    async_rows: dict[int, AsyncActivity] = field(default_factory=dict)
    children: dict[int, WorkflowRun] = field(default_factory=dict)
    timers: dict[tuple[str, int | None], Timer] = field(default_factory=dict)


def load_inbox(run: WorkflowRun, using: str) -> RunInbox:
    inbox = RunInbox()
    inbox.signals = list(
        SignalMessage.objects.using(using)
        .filter(run_id=run.pk, consumed_at_position__isnull=True)
        .order_by("id")
    )
    inbox.async_rows = {
        int(row.position): row for row in AsyncActivity.objects.using(using).filter(run_id=run.pk)
    }
    inbox.children = {
        int(child.parent_position or 0): child
        for child in WorkflowRun.objects.using(using)
        .filter(parent_id=run.pk)
        .exclude(parent_position__isnull=True)
        .order_by("created_at")
    }
    inbox.timers = {
        (timer.kind, timer.position): timer
        for timer in Timer.objects.using(using).filter(run_id=run.pk)
    }
    return inbox


def journal_write(run_id: Any, event: Event, *, engine_id: str, epoch: int, at_ms: int) -> Write:
    return Insert(
        JournalEntry(
            run_id=run_id,
            position=event.position,
            kind=event.kind,
            command=event.command,
            target=event.target[:200],
            result=event.result,
            error=event.error,
            engine_id=engine_id,
            epoch=epoch,
            at_ms=at_ms,
        )
    )


def bump_parent(run: WorkflowRun) -> list[Write]:
    """A child reached a terminal state: wake its parent (non-terminal, no rotation)."""
    if run.parent_id is None:
        return []
    return [Update(WorkflowRun, {"pk": run.parent_id}, {"wake_seq": F("wake_seq") + 1})]


def delete_timers(run_id: Any, keep_kinds: tuple[str, ...] = ()) -> Write:
    filters: dict[str, Any] = {"run_id": run_id}
    if keep_kinds:
        return _DeleteTimersExcept(run_id, keep_kinds)
    return Delete(Timer, filters)


@dataclass(frozen=True)
class _DeleteTimersExcept:
    run_id: Any
    keep_kinds: tuple[str, ...]

    def apply(self, using: str) -> None:
        Timer.objects.using(using).filter(run_id=self.run_id).exclude(
            kind__in=self.keep_kinds
        ).delete()


def async_token(run_id: Any, position: int, nonce: str) -> str:
    """The raw token: an HMAC of the run, the command and a journaled nonce.

    Only its hash is stored; the owning engine can recompute the raw token
    (to hand it out again on a retried hand-out) because the nonce is in
    the journal, but nobody without ``SECRET_KEY`` can forge one.
    """
    key = str(django_settings.SECRET_KEY).encode()
    message = f"weft-async:{run_id}:{position}:{nonce}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
