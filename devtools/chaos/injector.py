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
- ``pg_restart``: the soak's private PostgreSQL server shut down at once
  (every session of every engine dropped together, as a crash would), gone
  for 2–5 s, then started again (crash recovery);
- ``broker_outage``: the soak's private broker (Redis, or a RabbitMQ node)
  stopped for 10–30 s while the Celery nodes run, then started again (a
  Redis without persistence comes back empty);
- ``clock_step``: one engine's injected clock (``devtools.chaos.stepclock``)
  stepped forward, then back, each step more than ``CLAIM_RENEW_INTERVAL``
  and each held for a few renewals, then reset;
- ``kill_holding``: SIGKILL of an engine while it holds something beyond its
  claims — an atomic step's open transaction (its backend ``idle in
  transaction`` right after the step's insert), a queue slot, or a
  schedule's driver claim — waited for at most ``HOLD_WAIT_S``; the record
  says what it held (``held none`` when the wait ran out). Restarted as
  ``kill`` is.

Not planned here: ``crash``, an engine that died by itself (a poison run of
``devtools.chaos.flows`` exits its process). The harness restarts it
(``harness.Supervisor``) and records it like a ``kill``; the audit treats
it as one. A slot's ``lock`` is held while its engine is killed and
rebooted, by the injector or the supervisor, so only one of them does it.

The schedule is a pure function of the seed: the same seed, engines and
count give the same kinds, targets and pauses. Faults run one after another
(at most one engine is disturbed at a time, apart from a restarted engine
still booting), each followed by a seeded gap. A service fault (``pg_restart``,
``broker_outage``) disturbs every engine at once: its target is ``EVERY_ENGINE``
(``pg_restart``, whose record's ``engine_id`` is that too: every session
ended) or ``BROKER``. A kind whose service the run does not own (an external
database or broker) is left out of the plan (``available_kinds``).
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

from weft_django.kernel.clock import wall_ms

if TYPE_CHECKING:
    from devtools.chaos.harness import Cluster, Slot

logger = logging.getLogger("devtools.chaos")

FaultKind = Literal[
    "kill",
    "stop",
    "terminate",
    "partition",
    "drop_wake",
    "dup_wake",
    "pg_restart",
    "broker_outage",
    "clock_step",
    "kill_holding",
    "crash",
]
FAULT_KINDS: tuple[FaultKind, ...] = (
    "kill",
    "stop",
    "terminate",
    "partition",
    "drop_wake",
    "dup_wake",
    "pg_restart",
    "broker_outage",
    "clock_step",
    "kill_holding",
)
#: Faults that take an engine's claims away from it (a takeover must follow).
DISABLING: frozenset[str] = frozenset({"kill", "stop", "partition", "kill_holding", "crash"})
#: Faults that SIGKILL the engine (its claims may be taken over before expiry).
KILLING: frozenset[str] = frozenset({"kill", "kill_holding", "crash"})
#: Faults that end an engine's database sessions (its presence lock with them).
SESSION_ENDING: frozenset[str] = frozenset(
    {"kill", "kill_holding", "terminate", "pg_restart", "crash"}
)
#: Faults that may interrupt a turn between an activity and its journal entry
#: (a backward clock step may let the others take a live engine's claims).
DISRUPTIVE: frozenset[str] = frozenset(
    {"kill", "stop", "partition", "terminate", "pg_restart", "clock_step", "kill_holding", "crash"}
)
#: The target of a fault that hits every engine at once (``pg_restart``).
EVERY_ENGINE = "*"
BROKER = "broker"
#: How long ``kill_holding`` waits for its engine to hold something; the first half
#: only for the kind the seed prefers, then for any of ``HOLDABLE``.
HOLD_WAIT_S = 10.0
HOLDABLE: tuple[str, ...] = ("atomic transaction", "queue slot", "schedule")


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


def available_kinds(
    *, private_db: bool, private_broker: bool, celery: int
) -> tuple[FaultKind, ...]:
    """The kinds a run can apply: a service fault needs the service to be the soak's."""
    return tuple(
        kind
        for kind in FAULT_KINDS
        if (kind != "pg_restart" or private_db)
        and (kind != "broker_outage" or (private_broker and celery > 0))
    )


def plan(
    seed: int,
    count: int,
    labels: list[str],
    celery_labels: list[str],
    kinds_available: tuple[FaultKind, ...] = FAULT_KINDS,
) -> list[Fault]:
    """``count`` faults: every kind once (when ``count`` allows), then random kinds;
    a disabling fault hits a Celery node at least once when there is one."""
    rng = random.Random(seed)
    kinds: list[FaultKind] = list(kinds_available)
    rng.shuffle(kinds)
    kinds = kinds[:count] + [rng.choice(kinds_available) for _ in range(count - len(kinds))]
    targets = [rng.choice(labels) for _ in kinds]
    for i, kind in enumerate(kinds):
        if kind == "pg_restart":
            targets[i] = EVERY_ENGINE
        elif kind == "broker_outage":
            targets[i] = BROKER
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
                if fault.kind == "pg_restart":
                    record = self._pg_restart()
                elif fault.kind == "broker_outage":
                    record = self._broker_outage()
                else:
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
        with slot.lock:
            return self._kill_locked(slot)

    def _kill_locked(self, slot: Slot) -> FaultRecord:
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

    # -- the harsher faults (issue #21) -----------------------------------------------
    def _pg_restart(self) -> FaultRecord:
        """The private server shut down at once and started again after 2–5 s.

        The harness's own database calls wait meanwhile (``Cluster.outage``), so
        the web process and the auditor reconnect instead of failing."""
        from django.db import connection

        down = round(self.rng.uniform(2.0, 5.0), 1)
        sessions = sum(self.cluster.backends(label) for label in self.cluster.slots)
        connection.close()
        start = wall_ms()
        self.cluster.restart_database(down)
        record = FaultRecord(
            "pg_restart",
            EVERY_ENGINE,
            EVERY_ENGINE,
            start,
            detail=f"{sessions} engine sessions dropped; server down {down:.1f} s "
            f"(back after {(wall_ms() - start) / 1000:.1f} s)",
        )
        return record

    def _broker_outage(self) -> FaultRecord:
        """The private broker stopped for 10–30 s while the Celery nodes run."""
        down = round(self.rng.uniform(10.0, 30.0), 1)
        start = wall_ms()
        taken = self.cluster.broker_outage(down)
        return FaultRecord(
            "broker_outage",
            BROKER,
            "",
            start,
            detail=f"broker down {taken:.1f} s (planned {down:.1f} s)",
        )

    def _clock_step(self, slot: Slot) -> FaultRecord:
        """Step the engine's clock forward, then back, each by more than the renew
        interval (less than the TTL minus one renew interval, so a stepped engine
        keeps the protocol's timing assumption for others' claims), then reset."""
        renew_ms = self.cluster.renew_interval_ms
        step = int(self.rng.uniform(1.5, 2.5) * renew_ms)
        hold = self.rng.uniform(2.0, 4.0)
        start = wall_ms()
        record = FaultRecord(
            "clock_step", slot.label, slot.engine_id, start, held=self.cluster.held(slot.engine_id)
        )
        self.cluster.set_clock_offset(slot, step)
        time.sleep(hold)
        self.cluster.set_clock_offset(slot, -step)
        time.sleep(hold)
        self.cluster.set_clock_offset(slot, 0)
        record.detail = (
            f"held {len(record.held)}; clock +{step} ms for {hold:.1f} s, "
            f"then -{step} ms for {hold:.1f} s"
        )
        return record

    def _kill_holding(self, planned: Slot) -> FaultRecord:
        """Wait (at most ``HOLD_WAIT_S``) for an engine to hold an atomic step's
        transaction, a queue slot or a schedule's claim, then SIGKILL it.

        The wait is in thirds: the planned engine holding the kind the seed
        prefers, then the planned engine holding any, then any engine (the
        record's target is the engine killed)."""
        order = list(HOLDABLE)
        self.rng.shuffle(order)
        began = time.monotonic()
        slot, what = planned, ""
        while not what:
            waited = time.monotonic() - began
            if waited > HOLD_WAIT_S:
                break
            if waited < HOLD_WAIT_S / 3:
                what = self.cluster.holding(planned, tuple(order[:1]))
            elif waited < 2 * HOLD_WAIT_S / 3:
                what = self.cluster.holding(planned, tuple(order))
            else:
                for candidate in self.cluster.slots.values():
                    if candidate.engine_id in candidate.dead_engine_ids:
                        continue  # killed, its successor still booting
                    what = self.cluster.holding(candidate, tuple(order))
                    if what:
                        slot = candidate
                        break
            if not what:
                time.sleep(0.01)
        with slot.lock:
            return self._kill_held(slot, what, waited)

    def _kill_held(self, slot: Slot, what: str, waited: float) -> FaultRecord:
        engine_id = slot.engine_id
        start = wall_ms()
        slot.group().signal_group(signal.SIGKILL)
        slot.group().kill()  # reap
        record = FaultRecord(
            "kill_holding", slot.label, engine_id, start, held=self.cluster.held(engine_id)
        )
        slot.dead_engine_ids.append(engine_id)
        time.sleep(self.rng.uniform(0.5, 1.5))
        slot.boot()
        record.end_ms = wall_ms()
        slot.wait_ready()
        record.detail = (
            f"held {what or 'none'} (waited {waited:.1f} s); {len(record.held)} claims; "
            f"restarted as {slot.engine_id}"
        )
        return record
