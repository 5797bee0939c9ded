"""Queue slots are fenced: a slot belongs to one claim generation.

The invariant: *a slot counts only while the claim generation that took it
is still the workflow's current one.* A ``QueueSlot`` row names its
``(workflow_id, epoch)``; it is live only while

- the workflow's claim row is still at that ``epoch`` with a holder, and
- the run still holds it: ``running`` (or ``parked`` when the queue's
  ``parked_holds_slot``), and the row is not ``released`` (an activity's
  slot is released by the commit that journals its attempt).

Nothing has to find and delete a slot when its holder goes: a takeover and a
rotation (cancel, suspend, timeout) write epoch + 1, a release deletes the
holder, the run's end writes a terminal status -- each in its own fenced
batch, so the slot frees *in that same commit*, whichever path made it
(``ownership.batch``'s one-at-a-time batches, ``engine.bulk_takeover``'s
one ``UPDATE``, ``engine.operations.stop``'s rotation). A crashed, stopped
or deposed engine can never keep one: its generation is over the moment
another one begins.

Admission is race-free because every admission to a queue first locks that
queue's ``QueueLock`` row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's
``IMMEDIATE`` transactions are one writer at a time) and only then counts:
an admitter sees every admission committed before it. A slot freed
concurrently by a claim change only makes the count smaller, never larger.
The ``QueueLock`` is always the first lock an admission takes (claims and
runs after it), so admissions never deadlock with the claim protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, OuterRef

from weft_django.conf import get_settings
from weft_django.db.portable import copy_live_slots
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueLock, QueueSlot, WorkflowClaim, WorkflowRun


def held_statuses(spec: QueueSpec) -> tuple[str, ...]:
    """The run statuses that keep a slot of ``spec``."""
    return ("running", "parked") if spec.parked_holds_slot else ("running",)


def live_slots(spec: QueueSpec, db: str) -> Any:
    """The slots of ``spec`` that count now (see the module doc)."""
    current = WorkflowClaim.objects.using(db).filter(
        workflow_id=OuterRef("workflow_id"), epoch=OuterRef("epoch"), engine_id__isnull=False
    )
    holding = WorkflowRun.objects.using(db).filter(
        pk=OuterRef("run_id"), status__in=held_statuses(spec)
    )
    return (
        QueueSlot.objects.using(db)
        .filter(queue=spec.name, released=False)
        .filter(Exists(current))
        .filter(Exists(holding))
    )


def lock_queue(name: str, db: str) -> None:
    """Lock the queue's row (created on first use); call inside the transaction."""
    if not QueueLock.objects.using(db).select_for_update().filter(pk=name).exists():
        QueueLock.objects.using(db).bulk_create([QueueLock(name=name)], ignore_conflicts=True)
        QueueLock.objects.using(db).select_for_update().filter(pk=name).exists()


def usage(spec: QueueSpec, db: str, now_ms: int) -> tuple[int, dict[str, int], int]:
    """``(live slots, live slots per concurrency key, admissions in the rate window)``."""
    live = live_slots(spec, db)
    total = 0
    per_key: dict[str, int] = {}
    if spec.concurrency is not None or spec.per_key_concurrency is not None:
        rows = live.values("concurrency_key").annotate(n=Count("id")).order_by()
        for row in rows:
            total += row["n"]
            if row["concurrency_key"] is not None:
                per_key[row["concurrency_key"]] = row["n"]
    recent = 0
    if spec.rate is not None:
        recent = (
            QueueSlot.objects.using(db)
            .filter(queue=spec.name, counts_for_rate=True, admitted_at__gt=now_ms - spec.rate[1])
            .count()
        )
    return total, per_key, recent


def key_rate_usage(spec: QueueSpec, db: str, now_ms: int) -> dict[str, int]:
    """Admissions per ``concurrency_key`` inside the ``per_key_rate`` window
    (on the admitter's clock, read under the queue lock like ``usage``)."""
    if spec.per_key_rate is None:
        return {}
    rows = (
        QueueSlot.objects.using(db)
        .filter(
            queue=spec.name,
            counts_for_rate=True,
            concurrency_key__isnull=False,
            admitted_at__gt=now_ms - spec.per_key_rate[1],
        )
        .values("concurrency_key")
        .annotate(n=Count("id"))
        .order_by()
    )
    return {str(row["concurrency_key"]): row["n"] for row in rows}


#: How long past the rate window a released slot is kept before a sweep may
#: delete it. Each admitter reads the window on its own clock, and the sweep
#: runs on the sweeper's: a sweeper whose clock runs ahead by d would delete
#: admissions that another engine's window still reads, and that engine would
#: admit past the rate. Kept this long, a clock up to a minute ahead costs
#: only its own engine's count (``docs/howto/queues.md``).
CLOCK_SKEW_ALLOWANCE_MS = 60_000


def forget_old(spec: QueueSpec, db: str, now_ms: int) -> int:
    """Mark the slots that no longer count ``released`` and delete released
    ones out of the rate window (by ``CLOCK_SKEW_ALLOWANCE_MS`` and more);
    returns how many rows it changed.

    Not workflow state, and it changes no count: a slot whose generation is
    over never counts again (epochs only grow; a release is followed by an
    acquire at epoch + 1), and the one that can count again -- a parked run's
    under ``parked_holds_slot=False`` -- is replaced by a fresh row when the
    run wakes (``engine.queues``). The rate window reads released rows too.
    It only keeps the live count's scan short; the admission runs it now
    and then, under the queue lock."""
    window = max(
        spec.rate[1] if spec.rate is not None else 0,
        spec.per_key_rate[1] if spec.per_key_rate is not None else 0,
    )
    live = live_slots(spec, db).values("pk")
    marked = (
        QueueSlot.objects.using(db)
        .filter(queue=spec.name, released=False)
        .exclude(pk__in=live)
        .update(released=True)
    )
    deleted, _ = (
        QueueSlot.objects.using(db)
        .filter(
            queue=spec.name,
            released=True,
            admitted_at__lt=now_ms - window - CLOCK_SKEW_ALLOWANCE_MS,
        )
        .delete()
    )
    return marked + deleted


@dataclass(frozen=True)
class CarrySlots:
    """A takeover's write: each run slot of the generation it ends, begun again
    at the generation it starts (a ``Write`` of its batch).

    Why: a takeover ends the old generation's slot in its own commit (the
    epoch moves on). A run that was running or parked under it is the new
    owner's to go on with, so the new generation takes the slot in that same
    commit: the queue's count never drops in between, and no other run is
    admitted into a slot a taken-over run will need. One ``INSERT … SELECT``
    for the whole batch; only the old generation's own live run slots are
    carried (a generation that had none -- a run waiting at the gate -- asks
    again at ``engine.queues.gate``). Written only when ``WEFT["QUEUES"]``
    declares a queue: without one, a takeover's batch is unchanged.
    """

    #: ``(workflow_id, old_epoch, new_epoch)``
    moves: tuple[tuple[str, int, int], ...]
    at_ms: int

    def apply(self, using: str) -> None:
        copy_live_slots(using, self.moves, self.at_ms)


def carry_on_takeover(moves: list[tuple[str, int, int]], at_ms: int) -> list[CarrySlots]:
    """The ``CarrySlots`` a takeover batch adds: none unless a queue is declared."""
    if not moves or not get_settings().queues:
        return []
    return [CarrySlots(tuple(moves), at_ms)]


__all__ = [
    "CLOCK_SKEW_ALLOWANCE_MS",
    "CarrySlots",
    "carry_on_takeover",
    "forget_old",
    "held_statuses",
    "key_rate_usage",
    "live_slots",
    "lock_queue",
    "usage",
]
