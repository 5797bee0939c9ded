"""Reading a run's durable state, and building the rows a turn writes.

Kept apart from the turn logic so that the turn reads as "decide, then
commit one batch", and so queries (``client.query``) and the admin can load
a journal the same way the engine does.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from functools import cached_property
from typing import Any, cast

from django.conf import settings as django_settings
from django.db.models import F

from weft_django.codecs.stored import readable
from weft_django.engine.replay.events import Event, EventKind
from weft_django.models import (
    AsyncActivity,
    JournalEntry,
    SignalMessage,
    Timer,
    WorkflowRun,
)
from weft_django.ownership.ops import Delete, Insert, Update, Write


def load_events(run_id: Any, using: str) -> list[Event]:
    rows = (
        JournalEntry.objects.using(using)
        .filter(run_id=run_id)
        .order_by("position")
        .values_list("position", "kind", "command", "target", "result", "error")
    )
    return [
        Event(
            position,
            cast("EventKind", kind),
            command,
            target,
            readable(result, run_id, f"journal position {position} (result)"),
            readable(error, run_id, f"journal position {position} (error)"),
        )
        for position, kind, command, target, result, error in rows
    ]


class RunInbox:
    """What the outside world left for a run: signals, async results, children, timers.

    Each part is read on first use and kept for the step that made it: most
    steps need one part or none (an activity step only its retry timer), and
    reading all four every step would cost a quarter of a turn's database
    time. A part read later in the step is only
    *fresher*, which the turn's wake-seq condition on parking already allows.
    """

    def __init__(
        self, run_id: Any, using: str, timers: dict[tuple[str, int | None], Timer] | None = None
    ) -> None:
        self.run_id = run_id
        self.using = using
        if timers is not None:  # still what is stored (see ``Turn``): not read again
            self.__dict__["timers"] = timers

    @cached_property
    def signals(self) -> list[SignalMessage]:
        rows = list(
            SignalMessage.objects.using(self.using)
            .filter(run_id=self.run_id, consumed_at_position__isnull=True)
            .order_by("id")
        )
        for row in rows:
            readable(row.payload, self.run_id, f"signal {row.name!r} #{row.pk}")
        return rows

    @cached_property
    def async_rows(self) -> dict[int, AsyncActivity]:
        rows = AsyncActivity.objects.using(self.using).filter(run_id=self.run_id)
        for row in rows:
            readable(row.result, self.run_id, f"async activity at position {row.position} (result)")
            readable(row.error, self.run_id, f"async activity at position {row.position} (error)")
        return {int(row.position): row for row in rows}

    @cached_property
    def children(self) -> dict[int, WorkflowRun]:
        children = (
            WorkflowRun.objects.using(self.using)
            .filter(parent_id=self.run_id)
            .exclude(parent_position__isnull=True)
            .order_by("created_at")
        )
        found = {int(child.parent_position or 0): child for child in children}
        for child in found.values():  # an ended child's outcome is what the parent reads
            position = f"child {child.workflow_id!r}"
            readable(child.result, self.run_id, f"{position} (result)")
            readable(child.error, self.run_id, f"{position} (error)")
        return found

    @cached_property
    def timers(self) -> dict[tuple[str, int | None], Timer]:
        rows = Timer.objects.using(self.using).filter(run_id=self.run_id)
        return {(timer.kind, timer.position): timer for timer in rows}

    def has_timer_at(self, position: int | None = None) -> bool | None:
        """Whether a timer exists (at ``position``, or at all when it is ``None``);
        ``None`` when the timers were not read this step."""
        if "timers" not in self.__dict__:
            return None
        return any(position is None or key[1] == position for key in self.timers)


def load_inbox(
    run: WorkflowRun, using: str, timers: dict[tuple[str, int | None], Timer] | None = None
) -> RunInbox:
    """The run's inbox; nothing is read until a part is used (``timers``: known)."""
    return RunInbox(run.pk, using, timers)


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
