"""The chaos harness: engines behind proxies, the outside world, one run.

``run_chaos(config)`` is the whole soak, shared by the CI test
(``tests/chaos/test_chaos_soak.py``) and the long-run entry point
(``python -m devtools.chaos``). It expects Django set up on PostgreSQL, on the
database the engines should use (the test database under pytest, its own
database for the script), and:

1. opens one proxy port per engine slot (``ProxyHub``) and boots the engines
   through them — standalone ``weft_worker`` processes (``tests.engines.harness.
   Worker``) and Celery nodes (``tests.celery.conftest.CeleryWorker``), each in
   its own process group, with the short claim timings (TTL 3 s, renew 1 s),
   the chaos workflows imported, and its slot label as ``application_name``
   so its backends can be found in ``pg_stat_activity``;
2. plays the outside world (``Driver``): starts the workflows at a steady
   rate, sends their signals and updates, completes their async-activity
   tokens, cancels some with a grace, and runs a schedule meanwhile;
3. lets the injector work through its seeded plan meanwhile;
4. waits for every workflow to finish, kills every group, and audits
   (``devtools.chaos.check``).

This process talks to PostgreSQL directly (it is the web process and the
auditor, never partitioned); it installs the Celery transport so its
``client`` calls send messages to the nodes as a web process would. It must
outlive a ``pg_restart`` of the soak's own server (``ChaosConfig.
database_service``): its database calls run under ``Cluster.harness_db``, which
waits while the server is down and drops the dead connection once it is back,
and its reads retry on a fresh connection (``retrying``), so no half-done
driver step (a start or a signal popped from its plan) is lost to the outage.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from django.db import DatabaseError, InterfaceError, OperationalError, connection

import devtools.chaos.workflows as chaos_workflows
from devtools.chaos.check import MINE, Actions, Audit, ScheduleWindow, audit
from devtools.chaos.flow_driver import FlowDriver
from devtools.chaos.flows import POISON_LOG, POISON_LOG_ENV
from devtools.chaos.injector import (
    HOLDABLE,
    FaultKind,
    FaultRecord,
    Injector,
    available_kinds,
    plan,
)
from devtools.chaos.proxy import ProxyHub
from devtools.chaos.services import PrivatePostgres, PrivateRabbit, PrivateRedis
from devtools.chaos.stepclock import CLOCK_FILE_ENV, write_offset
from devtools.chaos.supervisor import Supervisor
from devtools.procs import ChildExited, ChildGroup, wait_for
from project.demo.models import StockMove
from tests.celery.conftest import CeleryWorker
from tests.engines.harness import CHILD_RENEW_INTERVAL_MS, CHILD_TTL_MS, GRACE_MS, Worker
from weft_django import client
from weft_django.errors import AsyncActivityTokenError, ScheduleNotFound
from weft_django.kernel.clock import now_ms
from weft_django.models import (
    LIVE_STATUSES,
    EngineRecord,
    WorkflowClaim,
    WorkflowEvent,
    WorkflowRun,
)
from weft_django.models.schedules import Schedule

logger = logging.getLogger("devtools.chaos")

#: ``stepclock`` first: it gives the engines built afterwards the steppable clock.
IMPORTS = ("devtools.chaos.stepclock", "devtools.chaos.workflows", "devtools.chaos.flows")
BOOT_TIMEOUT_S = 90.0  # hang protection only
#: One maintenance scan: a Celery node scans every renew interval (a
#: standalone engine every POLL_INTERVAL, 0.2 s).
SCAN_MS = CHILD_RENEW_INTERVAL_MS
#: Scheduling slack on two busy cores for "taken over within TTL + grace + a scan".
TOLERANCE_MS = 1_500


T = TypeVar("T")


@dataclass
class ChaosConfig:
    engines: int = 3
    celery: int = 1  # how many of ``engines`` are Celery nodes
    workflows: int = 40
    faults: int = 6
    seed: int = 1
    logs: Path = Path("/tmp/weft-chaos")
    broker: str = "redis://127.0.0.1:6379/12"
    #: Seconds over which the workflows are started (default: spread over the faults).
    start_window_s: float | None = None
    #: Hang protection for the whole run to drain, never a performance bound.
    drain_timeout_s: float = 600.0
    #: libpq ``options`` for the engines' sessions, e.g. ``-c
    #: idle_in_transaction_session_timeout=1000`` (a mitigation to compare against).
    pg_options: str = ""
    #: The soak's own PostgreSQL server (``pg_restart`` needs it; None: an external one).
    database_service: PrivatePostgres | None = None
    #: The soak's own broker (``broker_outage`` needs it; None: an external one).
    broker_service: PrivateRedis | PrivateRabbit | None = None
    #: Poison runs of each kind (``flows``: an activity and a body that exit
    #: their engine's process); each costs a few engine deaths.
    poison: int = 1

    def fault_kinds(self) -> tuple[FaultKind, ...]:
        return available_kinds(
            private_db=self.database_service is not None,
            private_broker=self.broker_service is not None,
            celery=self.celery,
        )


@dataclass
class Slot:
    """One engine position: a label, its proxy port and the boots it had."""

    label: str
    kind: Literal["standalone", "celery"]
    cluster: Cluster
    boots: int = 0
    engine_ids: list[str] = field(default_factory=list)
    dead_engine_ids: list[str] = field(default_factory=list)
    process: Worker | CeleryWorker | None = None
    #: Held while the slot's engine is killed and rebooted (injector or supervisor).
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def engine_id(self) -> str:
        return self.engine_ids[-1] if self.engine_ids else ""

    def group(self) -> ChildGroup:
        assert self.process is not None
        return self.process

    def boot(self) -> None:
        """Start a fresh engine in this slot (its ``EngineRecord`` comes later)."""
        self.boots += 1
        env = self.cluster.engine_env(self.label)
        logs = self.cluster.config.logs
        if self.kind == "standalone":
            engine_id = f"{self.label}.{self.boots}"
            self.process = Worker(engine_id, logs, env=env, imports=IMPORTS)
            self.engine_ids.append(engine_id)
        else:
            self.process = CeleryWorker(
                f"{self.label}-b{self.boots}",
                logs,
                self.cluster.config.broker,
                concurrency=2,
                env=env,
                imports=IMPORTS,
            )

    def wait_ready(self) -> None:
        """Wait for the fresh engine to boot; one that died meanwhile (a poison
        run it took over) is left to the ``Supervisor``, which boots another."""
        try:
            if isinstance(self.process, CeleryWorker):
                record = self.process.wait_ready()
                self.engine_ids.append(record.engine_id)
                return
            worker = self.process
            assert isinstance(worker, Worker)
            wait_for(
                f"{worker.engine_id} to boot",
                lambda: EngineRecord.objects.filter(pk=worker.engine_id).exists(),
                worker,
                timeout=BOOT_TIMEOUT_S,
                interval=0.05,
                log_tail=5000,
            )
        except ChildExited:
            logger.warning(
                "engine of %s died while booting; the supervisor restarts it", self.label
            )

    def node_name(self) -> str:
        return self.process.node if isinstance(self.process, CeleryWorker) else ""


class Cluster:
    """The engines, their proxies, and what the injector may do to them."""

    takeover_bound_ms = CHILD_TTL_MS + GRACE_MS + SCAN_MS
    renew_interval_ms = CHILD_RENEW_INTERVAL_MS
    #: How long a pause or a partition lasts at least.
    disabled_ms = takeover_bound_ms + TOLERANCE_MS

    def __init__(self, config: ChaosConfig) -> None:
        self.config = config
        settings = connection.settings_dict
        self.proxy = ProxyHub((settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432)))
        self.ports: dict[str, int] = {}
        self.slots: dict[str, Slot] = {}
        #: Held by the harness around its database calls and by a ``pg_restart``
        #: while the server is down: the web process waits out the outage.
        self.outage = threading.Lock()
        #: Bumped by each database restart: a thread that sees it change drops its
        #: (dead) Django connection before its next query.
        self.db_generation = 0
        self.clock_dir = config.logs / "clocks"
        self.clock_dir.mkdir(parents=True, exist_ok=True)
        for i in range(config.engines):
            kind: Literal["standalone", "celery"] = (
                "celery" if i >= config.engines - config.celery else "standalone"
            )
            label = f"chaos-{'c' if kind == 'celery' else 'e'}{i + 1}"
            self.ports[label] = self.proxy.add(label)
            self.slots[label] = Slot(label, kind, self)

    def engine_env(self, label: str) -> dict[str, str]:
        """The engine's environment: the database through its proxy port, its label."""
        settings = connection.settings_dict
        url = (
            f"postgres://{quote(settings['USER'])}@127.0.0.1:{self.ports[label]}/"
            f"{quote(settings['NAME'])}?application_name={quote(label)}"
        )
        if self.config.pg_options:
            url += f"&options={quote(self.config.pg_options)}"
        return {
            "DATABASE_URL": url,
            chaos_workflows.ENGINE_ENV: label,
            CLOCK_FILE_ENV: str(self.clock_file(label)),
            "WEFT_QUEUES": json.dumps(chaos_workflows.QUEUES),
            POISON_LOG_ENV: str(self.config.logs / POISON_LOG),
        }

    def clock_file(self, label: str) -> Path:
        return self.clock_dir / f"{label}.offset"

    def start(self) -> None:
        for slot in self.slots.values():
            slot.boot()
        for slot in self.slots.values():
            slot.wait_ready()

    def stop(self) -> None:
        for slot in self.slots.values():
            if slot.process is not None:
                slot.process.kill()
        self.proxy.close()

    # -- the harness's side of a database restart --------------------------------------
    @contextlib.contextmanager
    def harness_db(self, seen: list[int]) -> Any:
        """Database calls of the harness (web process, auditor): never during a
        ``pg_restart``; a fresh connection after one (``seen``: the generation this
        thread's connection belongs to)."""
        with self.outage:
            if seen[0] != self.db_generation:
                with contextlib.suppress(Exception):
                    connection.close()
                seen[0] = self.db_generation
            yield

    def engine_ids(self) -> dict[str, str]:
        """engine id -> slot label, for every boot."""
        return {e: s.label for s in self.slots.values() for e in s.engine_ids}

    # -- what the injector needs --------------------------------------------------------
    def held(self, engine_id: str) -> dict[str, int]:
        rows = WorkflowClaim.objects.filter(engine_id=engine_id).values_list("workflow_id", "epoch")
        return dict(rows)

    def backends(self, label: str, *, busy_only: bool = False) -> int:
        state = "AND state IN ('active', 'idle in transaction')" if busy_only else ""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                f"AND pid <> pg_backend_pid() {state}",
                [label],
            )
            return int(cursor.fetchone()[0])

    def blocked_behind(self, label: str) -> int:
        """Backends of other engines waiting on a lock held by ``label``'s backends."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity w WHERE w.application_name <> %s "
                "AND EXISTS (SELECT 1 FROM pg_stat_activity h WHERE h.application_name = %s "
                "AND h.pid = ANY(pg_blocking_pids(w.pid)))",
                [label, label],
            )
            return int(cursor.fetchone()[0])

    def terminate_backends(self, label: str, *, listen_only: bool = False) -> int:
        listen = "AND query ILIKE 'LISTEN%%'" if listen_only else ""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE application_name = %s AND pid <> pg_backend_pid() {listen}) AS t",
                [label],
            )
            return int(cursor.fetchone()[0])

    def restart_database(self, down_s: float) -> None:
        service = self.config.database_service
        if service is None:
            raise RuntimeError("pg_restart needs the soak's own PostgreSQL (--pg private)")
        with self.outage:
            try:
                service.restart(down_s)
            finally:
                self.db_generation += 1

    def broker_outage(self, down_s: float) -> float:
        """Stop the broker, keep it down ``down_s`` in all, start it; the seconds it was down."""
        service = self.config.broker_service
        if service is None:
            raise RuntimeError("broker_outage needs the soak's own broker")
        began = time.monotonic()
        service.stop()
        time.sleep(max(0.0, down_s - (time.monotonic() - began)))  # the outage itself
        service.start()
        return time.monotonic() - began

    def set_clock_offset(self, slot: Slot, offset_ms: int) -> None:
        write_offset(self.clock_file(slot.label), offset_ms)

    def holding(self, slot: Slot, kinds: tuple[str, ...] = HOLDABLE) -> str:
        """The first of ``kinds`` the slot's engine holds now, or ``""``: an atomic
        step's transaction open (its backend idle in transaction after the step's
        insert), a live queue slot of its claim generation, a schedule's driver claim."""
        from weft_django.kernel.schedule_spec import DRIVER_WORKFLOW
        from weft_django.models import QueueSlot

        for kind in kinds:
            if kind == "atomic transaction":
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                        "AND state = 'idle in transaction' AND query ILIKE %s",
                        [slot.label, f'INSERT INTO "{StockMove._meta.db_table}"%'],
                    )
                    if int(cursor.fetchone()[0]):
                        return kind
                continue
            held = self.held(slot.engine_id)
            if not held:
                continue
            if kind == "queue slot":
                slots = QueueSlot.objects.filter(
                    released=False, workflow_id__in=list(held)
                ).values_list("workflow_id", "epoch", "queue")
                live = [q for w, e, q in slots if held.get(w) == e]
                if live:
                    return f"{kind} of {live[0]}"
            elif kind == "schedule":
                driver = WorkflowRun.objects.filter(
                    name=DRIVER_WORKFLOW, status__in=LIVE_STATUSES, workflow_id__in=list(held)
                ).values_list("workflow_id", flat=True)
                first = next(iter(driver), None)
                if first is not None:
                    return f"{kind} {first}"
        return ""

    def purge_queues(self, slot: Slot) -> int:
        from celery.utils.nodenames import worker_direct
        from kombu import Connection

        from weft_django.transports.celery import DEFAULT_QUEUE

        purged = 0
        with Connection(self.config.broker, connect_timeout=5) as conn:
            channel = conn.channel()
            for queue in (worker_direct(slot.node_name()).name, DEFAULT_QUEUE):
                with contextlib.suppress(Exception):
                    purged += int(channel.queue_purge(queue) or 0)
        return purged

    def duplicate_wakes(self, slot: Slot) -> int:
        """Re-send the wakes of the engine's live runs (and a stale one each)."""
        runs = list(
            WorkflowRun.objects.filter(
                status__in=("running", "parked"),
                workflow_id__in=WorkflowClaim.objects.filter(engine_id=slot.engine_id).values(
                    "workflow_id"
                ),
            ).values_list("pk", "workflow_id")
        )
        epochs = dict(
            WorkflowClaim.objects.filter(engine_id=slot.engine_id).values_list(
                "workflow_id", "epoch"
            )
        )
        sent = 0
        if slot.kind == "celery":
            from weft_django.transports.celery.messages import DriveMessage, send_drive

            for run_id, workflow_id in runs:
                epoch = epochs.get(workflow_id, 0)
                for wake_epoch in (epoch, epoch, epoch - 1):
                    message = DriveMessage(
                        slot.node_name(),
                        str(run_id),
                        "drive",
                        slot.engine_id,
                        wake_epoch,
                        via="chaos",
                        workflow_id=workflow_id,
                    )
                    sent += send_drive(message)
            return sent
        with connection.cursor() as cursor:
            for workflow_id in [wid for _, wid in runs] or ["chaos-dup"]:
                for _ in range(3):
                    cursor.execute("SELECT pg_notify('weft_wake', %s)", [workflow_id])
                    sent += 1
        return sent


# -- the outside world -------------------------------------------------------------------


class Driver:
    """Starts the workflows and plays the outside world's part: signals, token
    completions, updates (some sent twice with the same id), cancels with a
    grace, and the schedule ``chaos-tick`` (created at ``begin``, deleted once
    every workflow is started: ``started_all`` is false until then).

    Its actions are what the audit predicts outcomes from, so each is kept:
    ``keys`` (what was started) and ``actions`` (``check.Actions``: the
    cancels, the updates sent and repeated, the schedule's active window)."""

    #: Seconds a cancelled ``chaos-cancel`` has to clean up (faults included).
    CANCEL_GRACE_S = 120.0
    #: Queued workflows start in bursts of this many, so the queue's limits bind.
    QUEUE_BURST = 5

    def __init__(self, config: ChaosConfig) -> None:
        self.config = config
        rng = random.Random(config.seed + 2)
        window = config.start_window_s
        if window is None:
            window = max(5.0, config.faults * (Cluster.disabled_ms / 1000 + 2.0) * 0.6)
        times = {i: round(rng.uniform(0, window), 3) for i in range(config.workflows)}
        queued = [i for i in times if self._name(i) == "chaos-queued"]
        for n in range(0, len(queued), self.QUEUE_BURST):
            burst = queued[n : n + self.QUEUE_BURST]
            at = min(times[i] for i in burst)
            times.update(dict.fromkeys(burst, at))
        self.plan = sorted((at, i) for i, at in times.items())
        self.actions = Actions()
        self.flow = FlowDriver(config.seed, config.workflows, config.poison, window, self.actions)
        self.keys: dict[str, tuple[str, str]] = {}  # workflow id -> (name, key)
        #: (at, workflow id, kind, name, payload): kind "signal" or "update"
        self.later: list[tuple[float, str, str, str, Any]] = []
        self.tokens_done: set[str] = set()
        self.to_cancel: list[str] = []
        self._sent: set[str] = set()
        self._settings: Any = None
        self.began = 0.0

    @staticmethod
    def _name(i: int) -> str:
        return chaos_workflows.STARTED[i % len(chaos_workflows.STARTED)]

    def begin(self) -> None:
        """Declare the chaos queue in this process (the engines get it in their
        environment) and create the schedule; the clock starts."""
        from django.conf import settings
        from django.test import override_settings

        self._settings = override_settings(
            WEFT={**getattr(settings, "WEFT", {}), "QUEUES": chaos_workflows.QUEUES}
        )
        self._settings.enable()
        client.create_schedule(
            chaos_workflows.SCHEDULE_ID,
            "chaos-ticked",
            {},
            every=timedelta(milliseconds=chaos_workflows.SCHEDULE_EVERY_MS),
            overlap="allow",
        )
        row = Schedule.objects.get(pk=chaos_workflows.SCHEDULE_ID)
        self.actions.schedule = ScheduleWindow(
            chaos_workflows.SCHEDULE_ID, chaos_workflows.SCHEDULE_EVERY_MS, row.since_ms
        )
        self.began = time.monotonic()

    def close(self) -> None:
        """Delete the schedule if still there; undo the settings override. Never
        raises: it runs in ``run_chaos``'s ``finally``, maybe after a failure."""
        try:
            self._stop_schedule()
        except Exception:
            logger.exception("could not delete the schedule %s", chaos_workflows.SCHEDULE_ID)
        if self._settings is not None:
            self._settings.disable()
            self._settings = None

    def started_all(self) -> bool:
        return (
            not self.plan
            and not self.to_cancel
            and not self.later
            and self.flow.done()
            and self._schedule_done()
        )

    def _schedule_done(self) -> bool:
        window = self.actions.schedule
        return window is None or window.deleted_ms is not None

    def _stop_schedule(self) -> None:
        window = self.actions.schedule
        if window is not None and window.deleted_ms is None:
            with contextlib.suppress(ScheduleNotFound):
                client.delete_schedule(window.schedule_id)
            window.deleted_ms = now_ms()

    def pump(self) -> None:
        now = time.monotonic() - self.began
        while self.plan and self.plan[0][0] <= now:
            _, i = self.plan.pop(0)
            self._start(i, now)
        self.flow.pump(now)
        if not self.plan and self.flow.settled(self.config.logs / POISON_LOG):
            self._stop_schedule()
        due = [item for item in self.later if item[0] <= now]
        self.later = [item for item in self.later if item[0] > now]
        for _, workflow_id, kind, name, payload in due:
            if kind == "signal":
                client.signal(workflow_id, name, payload)
            else:
                self._update(workflow_id, payload)
        self._cancel_armed()
        self._complete_tokens()

    def _start(self, i: int, now: float) -> None:
        name = self._name(i)
        key = f"w{i:04d}"
        workflow_id = f"chaos-{i:04d}"
        data: dict[str, Any] = {"key": key}
        if name == "chaos-tour":
            data.update(slow=0.3 if i % 2 else 0.0, sleep=0.3)
        elif name == "chaos-chain":
            data.update(steps=3, slow=0.3, sleep=0.2)
        if name in ("chaos-chain", "chaos-fan") and chaos_workflows.uses_atomic(key):
            data["atomic"] = True
        queue = chaos_workflows.QUEUE if name == "chaos-queued" else None
        client.start(name, data, workflow_id=workflow_id, queue=queue)
        self.keys[workflow_id] = (name, key)
        if name == "chaos-cancel":
            self.to_cancel.append(workflow_id)
        if name == "chaos-talk":
            # Each id once, two of them again shortly after (the run cannot end
            # before the last id is applied, so the repeat meets a live run).
            ids = chaos_workflows.update_ids(workflow_id)
            sends = [(0.5, ids[0]), (0.8, ids[0]), (1.1, ids[1]), (1.25, ids[1])]
            sends += [(1.4 + 0.3 * n, uid) for n, uid in enumerate(ids[2:])]
            for delay, uid in sends:
                self.later.append((now + delay, workflow_id, "update", "add", uid))
        if name not in ("chaos-tour", "chaos-fan"):
            return
        signals: list[tuple[str, Any]] = [("go", key)]
        if name == "chaos-tour":
            signals += [("bump", 1), ("bump", 2)]
        # Half buffered before the wait, half sent later (usually to a parked run).
        delay = 0.0 if i % 2 == 0 else 1.5
        for n, (signal_name, payload) in enumerate(signals):
            self.later.append((now + delay + 0.3 * n, workflow_id, "signal", signal_name, payload))

    def _update(self, workflow_id: str, update_id: str) -> None:
        """Submit only (``timeout=0``: the pump never blocks): a repeated id must
        not be applied again."""
        from weft_django.errors import WorkflowTimeoutError

        repeat = update_id in self._sent
        with contextlib.suppress(WorkflowTimeoutError):
            client.update(workflow_id, "add", update_id, update_id=update_id, timeout=0)
        if repeat:
            self.actions.updates_resent += 1
        else:
            self._sent.add(update_id)
            self.actions.updates_sent += 1

    def _cancel_armed(self) -> None:
        """Cancel (with a grace) each ``chaos-cancel`` once it published ``armed``:
        it then waits inside its ``try``, so its cleanup must run exactly once."""
        if not self.to_cancel:
            return
        ended = set(
            WorkflowRun.objects.filter(workflow_id__in=self.to_cancel)
            .exclude(status__in=LIVE_STATUSES)
            .values_list("workflow_id", flat=True)
        )
        self.to_cancel = [w for w in self.to_cancel if w not in ended]  # the audit says why
        armed = set(
            WorkflowEvent.objects.filter(
                run__workflow_id__in=self.to_cancel, key="armed"
            ).values_list("run__workflow_id", flat=True)
        )
        for workflow_id in [w for w in self.to_cancel if w in armed]:
            client.cancel(workflow_id, "chaos cancel", grace=self.CANCEL_GRACE_S)
            self.to_cancel.remove(workflow_id)
            self.actions.cancelled.append(workflow_id)

    def _complete_tokens(self) -> None:
        from project.demo.models import SideEffect

        rows = SideEffect.objects.filter(kind=chaos_workflows.TOKEN_KIND).values_list(
            "key", flat=True
        )
        for raw in rows:
            key, _, token = raw.rsplit("@", 1)[0].partition("|")
            if token in self.tokens_done:
                continue
            with contextlib.suppress(AsyncActivityTokenError):
                client.complete_async_activity(token, {"paid": key})
            self.tokens_done.add(token)

    def live(self) -> int:
        """Runs still to finish: a ``suspended`` one waits for an operator (the
        poison body's, by design; any other is the audit's to report)."""
        return (
            WorkflowRun.objects.filter(MINE, status__in=LIVE_STATUSES)
            .exclude(status="suspended")
            .count()
        )

    def still_live(self, most: int = 10) -> str:
        """The live runs and their claims, for a drain that timed out."""
        runs = WorkflowRun.objects.filter(
            workflow_id__startswith="chaos-", status__in=LIVE_STATUSES
        ).order_by("workflow_id")[:most]
        claims = dict(
            WorkflowClaim.objects.filter(workflow_id__in=[r.workflow_id for r in runs]).values_list(
                "workflow_id", "engine_id"
            )
        )
        return "; ".join(
            f"{r.workflow_id} {r.status} wake_seq={r.wake_seq}/{r.parked_seq} "
            f"wake_at={r.wake_at} held by {claims.get(r.workflow_id)}"
            for r in runs
        )


# -- one run -----------------------------------------------------------------------------


@dataclass
class ChaosResult:
    audit: Audit
    faults: list[FaultRecord]
    duration_s: float
    summary: str


def retrying(read: Callable[[], T], attempts: int = 5) -> T:
    """A read of the harness, again on a fresh connection when the server dropped
    the old one (a ``pg_restart``, or a session the injector terminated)."""
    for attempt in range(attempts):
        try:
            return read()
        except (OperationalError, InterfaceError) as exc:
            if attempt == attempts - 1:
                raise
            logger.warning("harness read failed (%s); reconnecting", exc)
            with contextlib.suppress(DatabaseError):
                connection.close()
            time.sleep(0.5 * (attempt + 1))  # the server is coming back
    raise AssertionError("unreachable")


def clean_broker(broker: str) -> None:
    """Stale messages of an earlier run would only be discarded, but start clean."""
    if not broker.startswith("redis"):
        return  # a private RabbitMQ node starts empty
    with contextlib.suppress(Exception):
        import redis

        redis.Redis.from_url(broker).flushdb()


def database_deadlocks() -> int:
    """PostgreSQL's count of deadlocks detected in this database (``pg_stat_database``):
    the audit's independent evidence, whether or not an engine logged the error."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def run_chaos(config: ChaosConfig, progress: Callable[[str], None] | None = None) -> ChaosResult:
    """Boot, drive, inject, drain, audit. Kills every engine before returning."""
    from celery import Celery

    from weft_django.celery import install, uninstall

    say = progress or (lambda line: None)
    config.logs.mkdir(parents=True, exist_ok=True)
    (config.logs / POISON_LOG).unlink(missing_ok=True)  # one run's deaths only
    clean_broker(config.broker)
    app = Celery("weft-chaos", broker=config.broker)
    app.conf.broker_connection_retry_on_startup = True
    install(app)
    cluster = Cluster(config)
    labels = list(cluster.slots)
    celery_labels = [s.label for s in cluster.slots.values() if s.kind == "celery"]
    injector = Injector(
        cluster,
        plan(config.seed, config.faults, labels, celery_labels, config.fault_kinds()),
        config.seed,
    )
    seen = [0]  # the database generation of this thread's connection
    began = time.monotonic()
    driver = Driver(config)
    supervisor = Supervisor(cluster)
    try:
        cluster.start()
        supervisor.start()
        say(f"booted {', '.join(s.engine_id for s in cluster.slots.values())}")
        with cluster.harness_db(seen):
            deadlocks_before = retrying(database_deadlocks)
            driver.begin()
        injector.start()
        deadline = time.monotonic() + config.drain_timeout_s
        last_note = 0.0
        while True:
            if injector.error is not None:
                raise RuntimeError("the fault injector failed") from injector.error
            if supervisor.error is not None:
                raise RuntimeError("the supervisor failed") from supervisor.error
            with cluster.harness_db(seen):
                live = retrying(driver.live)
                if driver.started_all() and injector.done() and live == 0:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{live} workflows still live after {config.drain_timeout_s} s: "
                        + retrying(driver.still_live)
                    )
                driver.pump()
            if time.monotonic() - last_note > 10:
                last_note = time.monotonic()
                say(
                    f"t={last_note - began:.0f}s started {len(driver.keys)} live {live} "
                    f"faults {len(injector.records)}/{len(injector.faults)}"
                )
            time.sleep(0.05)
        if injector.error is not None:
            raise RuntimeError("the fault injector failed") from injector.error
        # Let the last releases land before judging claims.
        time.sleep(0.5)
        duration = time.monotonic() - began
        supervisor.stop()  # a restart under way finishes first
        driver.actions.crashes = list(supervisor.records)
        driver.actions.engines_down = supervisor.down()
    finally:
        driver.close()
        injector.join(timeout=60)
        supervisor.stop()
        cluster.stop()
        uninstall()
        with contextlib.suppress(Exception):
            app.close()
    with cluster.harness_db(seen):
        result = retrying(
            lambda: audit(
                driver.keys,
                injector.records,
                cluster.engine_ids(),
                dead={e for s in cluster.slots.values() for e in s.dead_engine_ids},
                takeover_bound_ms=Cluster.takeover_bound_ms + TOLERANCE_MS,
                actions=driver.actions,
                logs=config.logs,
            )
        )
        result.pg_deadlocks = retrying(database_deadlocks) - deadlocks_before
    line = result.summary_line(
        engines=config.engines,
        celery=config.celery,
        boots=sum(s.boots for s in cluster.slots.values()),
        seed=config.seed,
        duration_s=duration,
    )
    return ChaosResult(result, injector.records, duration, line)
