"""The fault injector: a seeded schedule of faults, applied from outside the
engines by a thread of the harness.

Why from outside: the soak must exercise the production code as deployed,
so nothing here hooks into ``weft_django``; every fault is something an
operator, a kernel or a network can do to a running engine:

- ``kill``: SIGKILL the engine's process group (a Celery node's pool too),
  then boot a fresh engine in its slot;
- ``stop``: SIGSTOP the group past its claim TTL (plus grace and a scan),
  then SIGCONT — a GC pause or a noisy neighbour;
- ``terminate``: ``pg_terminate_backend`` of the engine's backends (found by
  ``application_name``), waiting briefly for one to be mid-transaction;
- ``partition``: black-hole the engine's database proxy for as long as a
  ``stop``, then heal it;
- ``drop_wake``: lose wakes — a standalone engine's LISTEN backend is
  terminated (NOTIFYs sent until it reconnects are lost), a Celery node's
  direct queue and the shared pickup queue are purged;
- ``dup_wake``: repeat wakes — extra ``NOTIFY``s, or each ``weft.drive`` of
  the node's runs re-published twice at the current epoch and once at the
  epoch before (a stale generation the wake guard must discard).

The schedule is a pure function of the seed: the same seed, engines and
count give the same kinds, targets and pauses. Faults run one after another
(at most one engine is disturbed at a time, apart from a restarted engine
still booting), each followed by a seeded gap.
"""

from __future__ import annotations

import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from weft_django.clock import wall_ms

if TYPE_CHECKING:
    from tests.chaos.harness import Cluster, Slot

logger = logging.getLogger("tests.chaos")

FaultKind = Literal["kill", "stop", "terminate", "partition", "drop_wake", "dup_wake"]
FAULT_KINDS: tuple[FaultKind, ...] = (
    "kill",
    "stop",
    "terminate",
    "partition",
    "drop_wake",
    "dup_wake",
)
#: Faults that take an engine's claims away from it (a takeover must follow).
DISABLING: frozenset[str] = frozenset({"kill", "stop", "partition"})
#: Faults that may interrupt a turn between an activity and its journal entry.
DISRUPTIVE: frozenset[str] = frozenset({"kill", "stop", "partition", "terminate"})


@dataclass(frozen=True)
class Fault:
    """One planned fault: ``gap_s`` after the previous one ended."""

    kind: FaultKind
    target: str  # a slot label
    gap_s: float


@dataclass
class FaultRecord:
    """What was done, to which engine boot, when (wall ms), and what it held."""

    kind: FaultKind
    target: str
    engine_id: str
    start_ms: int
    end_ms: int = 0
    #: workflow id -> epoch of every claim the engine held when the fault began
    held: dict[str, int] = field(default_factory=dict)
    detail: str = ""


def plan(seed: int, count: int, labels: list[str], celery_labels: list[str]) -> list[Fault]:
    """``count`` faults: every kind once (when ``count`` allows), then random kinds;
    a disabling fault hits a Celery node at least once when there is one."""
    rng = random.Random(seed)
    kinds: list[FaultKind] = list(FAULT_KINDS)
    rng.shuffle(kinds)
    kinds = kinds[:count] + [rng.choice(FAULT_KINDS) for _ in range(count - len(kinds))]
    targets = [rng.choice(labels) for _ in kinds]
    if celery_labels and not any(
        k in DISABLING and t in celery_labels for k, t in zip(kinds, targets, strict=True)
    ):
        first = next((i for i, k in enumerate(kinds) if k in DISABLING), None)
        if first is not None:
            targets[first] = rng.choice(celery_labels)
    return [
        Fault(kind, target, round(rng.uniform(1.0, 3.0), 2))
        for kind, target in zip(kinds, targets, strict=True)
    ]


class Injector:
    """Applies a plan to a ``Cluster`` on its own thread; ``records`` is the log."""

    def __init__(self, cluster: Cluster, faults: list[Fault], seed: int) -> None:
        self.cluster = cluster
        self.faults = faults
        self.rng = random.Random(seed + 1)
        self.records: list[FaultRecord] = []
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def done(self) -> bool:
        return self._done.is_set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        from django.db import connection

        try:
            for fault in self.faults:
                time.sleep(fault.gap_s)
                slot = self.cluster.slots[fault.target]
                action: Callable[[Slot], FaultRecord] = getattr(self, f"_{fault.kind}")
                record = action(slot)
                record.end_ms = record.end_ms or wall_ms()
                self.records.append(record)
                logger.info(
                    "fault %s on %s (%s): %s",
                    record.kind,
                    record.target,
                    record.engine_id,
                    record.detail,
                )
        except BaseException as exc:  # reported by the harness, never swallowed
            self.error = exc
        finally:
            connection.close()
            self._done.set()

    # -- the faults -------------------------------------------------------------------
    def _disabled_for(self) -> float:
        """How long a stop or a partition lasts: past TTL + grace + one scan, and the
        audit's tolerance, so the others have taken its claims over before it returns."""
        return self.cluster.disabled_ms / 1000 + self.rng.uniform(0.5, 1.5)

    def _kill(self, slot: Slot) -> FaultRecord:
        engine_id = slot.engine_id
        start = wall_ms()
        slot.group().signal_group(signal.SIGKILL)
        slot.group().kill()  # reap
        record = FaultRecord(
            "kill", slot.label, engine_id, start, held=self.cluster.held(engine_id)
        )
        slot.dead_engine_ids.append(engine_id)
        time.sleep(self.rng.uniform(0.5, 1.5))
        slot.boot()
        record.end_ms = wall_ms()
        slot.wait_ready()
        record.detail = f"held {len(record.held)}; restarted as {slot.engine_id}"
        return record

    def _stop(self, slot: Slot) -> FaultRecord:
        start = wall_ms()
        slot.group().signal_group(signal.SIGSTOP)
        record = FaultRecord(
            "stop", slot.label, slot.engine_id, start, held=self.cluster.held(slot.engine_id)
        )
        pause = self._disabled_for()
        time.sleep(pause)
        slot.group().signal_group(signal.SIGCONT)
        record.detail = f"held {len(record.held)}; paused {pause:.1f} s"
        return record

    def _partition(self, slot: Slot) -> FaultRecord:
        start = wall_ms()
        self.cluster.proxy.block(slot.label)
        record = FaultRecord(
            "partition", slot.label, slot.engine_id, start, held=self.cluster.held(slot.engine_id)
        )
        cut = self._disabled_for()
        time.sleep(0.2)
        # A backend left inside a transaction keeps its row locks across the cut ...
        open_tx = self.cluster.backends(slot.label, busy_only=True)
        time.sleep(self.cluster.takeover_bound_ms / 1000)
        # ... and whoever needs those rows (a takeover's SELECT ... FOR UPDATE) waits.
        blocked = self.cluster.blocked_behind(slot.label)
        time.sleep(max(0.0, cut - 0.2 - self.cluster.takeover_bound_ms / 1000))
        self.cluster.proxy.heal(slot.label)
        record.detail = (
            f"held {len(record.held)}; cut off {cut:.1f} s; {open_tx} backend(s) cut "
            f"mid-transaction; {blocked} other backend(s) waiting on their locks at expiry"
        )
        return record

    def _terminate(self, slot: Slot) -> FaultRecord:
        """Wait (briefly) for a backend of the engine inside a transaction, then
        terminate every backend of the engine."""
        start = wall_ms()
        busy = False
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and not busy:
            busy = self.cluster.backends(slot.label, busy_only=True) > 0
            if not busy:
                time.sleep(0.01)
        killed = self.cluster.terminate_backends(slot.label)
        return FaultRecord(
            "terminate",
            slot.label,
            slot.engine_id,
            start,
            detail=f"{killed} backends ({'mid-transaction' if busy else 'idle'})",
        )

    def _drop_wake(self, slot: Slot) -> FaultRecord:
        start = wall_ms()
        if slot.kind == "celery":
            purged = self.cluster.purge_queues(slot)
            detail = f"purged {purged} messages"
        else:
            killed = self.cluster.terminate_backends(slot.label, listen_only=True)
            detail = f"terminated {killed} LISTEN backend(s)"
        return FaultRecord("drop_wake", slot.label, slot.engine_id, start, detail=detail)

    def _dup_wake(self, slot: Slot) -> FaultRecord:
        start = wall_ms()
        with contextlib.suppress(Exception):
            sent = self.cluster.duplicate_wakes(slot)
            return FaultRecord(
                "dup_wake", slot.label, slot.engine_id, start, detail=f"{sent} extra wakes"
            )
        return FaultRecord("dup_wake", slot.label, slot.engine_id, start, detail="failed")
