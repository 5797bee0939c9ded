"""The runtime of a weft Celery node (loaded lazily by ``transports.celery``).

Three roles share this module:

- the node's **main process** (``NodeRuntime``): one ``NodeEngine`` per boot
  whose maintenance runs on threads; it never drives a turn, it sends
  ``weft.drive`` messages to its own direct queue;
- **pool processes** (prefork children, or the worker's threads): a facade
  ``Engine`` per thread with the node's engine id that never renews; each
  message adopts the claim it names from the database before its turn;
- **any process** (web, shell, the node itself): ``on_commit_wake`` turns a
  committed ``client`` write into the right message.

Turns of one run never overlap inside a node: a turn takes the run's turn
mark (``turn_pid``) with a compare-and-set and clears it at the end; a live
mark of another process means "busy" (the message comes back shortly). A
mark is free when it is empty, this process's own, the main process's
hand-off (a pickup it committed), older than the current claim (another
engine's), or its process is gone. The main process re-drives its ``running``
runs whose mark is free for longer than one renew interval or whose turn
process died (a pool child killed mid-turn).

Metrics: pool processes add their counters (wakes, claim attempts) into the
node's ``EngineRecord.metrics`` under a row lock after each task, and the
main process adds its own at each heartbeat, so the record holds the node's
totals.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.db import connections, transaction
from django.db.models import F, Min, OuterRef, Q, QuerySet, Subquery

from weft_django.conf import get_settings
from weft_django.engine import Engine
from weft_django.engine.db_connections import mark_engine_thread
from weft_django.engine.maintenance import TIMER_WAKE_KIND
from weft_django.models import EngineRecord, Timer, WorkflowClaim, WorkflowRun
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.guard import wake_ownership_check
from weft_django.ownership.metrics import (
    CLAIM_ATTEMPT_OUTCOMES,
    ClaimMetricsSnapshot,
)
from weft_django.transports import celery as transport
from weft_django.transports import wake_hooks
from weft_django.warnings import WAKE_KINDS, WakeKind, warn_wake_discarded

logger = logging.getLogger("weft_django.transports.celery")

ENV_KEY = "WEFT_CELERY_NODE"
DRIVING = ("running", "parked")
BATCH = 100
#: A run whose turn mark is busy: the message comes back after this long ...
BUSY_RETRY_MS = 200
#: ... at most this many times (then polling takes over).
BUSY_RETRIES = 50
#: An ``eta`` that fires a little early waits for its timer instead of being discarded.
EARLY_TIMER_MS = 2_000
#: Every message expires this long after it is due (at least).
MIN_EXPIRY_MS = 60_000


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


# -- node identity (minted in the main process before the pool forks) -------------


@dataclass(frozen=True)
class NodeIdentity:
    engine_id: str
    node_name: str
    pool: str
    main_pid: int

    def to_env(self) -> str:
        return json.dumps(
            {"e": self.engine_id, "n": self.node_name, "p": self.pool, "m": self.main_pid}
        )

    @classmethod
    def from_env(cls, raw: str | None) -> NodeIdentity | None:
        try:
            data = json.loads(raw or "")
            return cls(str(data["e"]), str(data["n"]), str(data["p"]), int(data["m"]))
        except (ValueError, KeyError, TypeError):
            return None


_identity: NodeIdentity | None = None
_node: NodeRuntime | None = None  # main process only
_local = threading.local()  # facade engine per thread (pool processes)
_driving: set[str] = set()  # runs whose turn this process is driving now
_driving_lock = threading.Lock()
_marks_dirty = False  # a turn mark could not be cleared: clear leftovers next task


def identity() -> NodeIdentity | None:
    global _identity
    if _identity is None:
        _identity = NodeIdentity.from_env(os.environ.get(ENV_KEY))
    return _identity


def pool_name(pool_cls: Any) -> str:
    """``prefork``, ``threads``, ``solo``, ``gevent`` ... for a worker's pool class."""
    from celery import concurrency

    if isinstance(pool_cls, str):
        target = concurrency.ALIASES.get(pool_cls, pool_cls)
    else:
        target = f"{pool_cls.__module__}:{pool_cls.__qualname__}"
    for alias, path in concurrency.ALIASES.items():
        if path == target and alias not in ("processes", "custom"):
            return alias
    return target


def prepare_node(worker: Any, *, queue: str) -> NodeIdentity:
    """Worker init, main process, before the pool forks: check, mint, subscribe."""
    global _identity
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured

    if not apps.ready:
        import django

        django.setup()
    from weft_django.checks import check_celery_pool

    name = pool_name(worker.pool_cls)
    problems = [f"{m.id}: {m.msg}" for m in check_celery_pool(name)]
    settings = get_settings()  # ImproperlyConfigured names any bad WEFT key
    if settings.ownership == "none":
        problems.append(
            'weft.E013: WEFT["OWNERSHIP"] is "none" but this is a Celery worker: several '
            'nodes would drive the same workflows unfenced; use "workflow-lease"'
        )
    elif settings.ownership != "workflow-lease":
        problems.append(
            f'WEFT["OWNERSHIP"] is {settings.ownership!r}: a Celery node holds per-workflow '
            'claims; use "workflow-lease" (the default) with Celery'
        )
    if problems:
        message = "weft-django refuses to start this worker: " + "; ".join(problems)
        logger.critical(message)
        raise ImproperlyConfigured(message)
    node = str(worker.hostname)
    _identity = NodeIdentity(
        engine_id=f"{node[:160]}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
        node_name=node,
        pool=name,
        main_pid=os.getpid(),
    )
    os.environ[ENV_KEY] = _identity.to_env()  # for pool processes that do not fork
    worker.app.amqp.queues.select_add(queue)
    return _identity


def start_node(worker: Any) -> None:
    """Bootstep start, main process: boot the node's engine and its threads."""
    global _node
    ident = identity()
    if ident is None or _node is not None:
        return
    _node = NodeRuntime(ident, worker)
    _node.start()


def shutdown_node() -> None:
    """Warm shutdown (after the pool drained) or cold: release every claim."""
    global _node
    node, _node = _node, None
    if node is not None:
        node.shutdown()


def on_pool_process_init() -> None:
    """A prefork child: forget the parent's runtime, build this process's facade."""
    global _node, _local, _marks_dirty
    if identity() is None:
        return
    _node = None  # the parent's engine, threads and connections are not ours
    _local = threading.local()
    with _driving_lock:
        _driving.clear()
    _marks_dirty = False
    facade()


# -- metrics ------------------------------------------------------------------------


def _counters(snapshot: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
    return replace(snapshot, active_claims=0)


def _subtract(new: ClaimMetricsSnapshot, old: ClaimMetricsSnapshot) -> ClaimMetricsSnapshot:
    return ClaimMetricsSnapshot(
        attempts={
            o: new.attempts.get(o, 0) - old.attempts.get(o, 0) for o in CLAIM_ATTEMPT_OUTCOMES
        },
        active_claims=0,
        renewal_failures=new.renewal_failures - old.renewal_failures,
        wakes={
            k: n - old.wakes.get(k, 0) for k, n in new.wakes.items() if n != old.wakes.get(k, 0)
        },
    )


def _is_zero(delta: ClaimMetricsSnapshot) -> bool:
    return not any(delta.attempts.values()) and not delta.renewal_failures and not delta.wakes


def add_to_engine_record(
    using: str,
    engine_id: str,
    delta: ClaimMetricsSnapshot,
    *,
    active_claims: int | None = None,
    heartbeat_at: int | None = None,
) -> None:
    """Add ``delta`` to the record's counters under its row lock (several writers)."""
    with transaction.atomic(using=using):
        stored_json = (
            EngineRecord.objects.using(using)
            .select_for_update()
            .filter(pk=engine_id)
            .values_list("metrics", flat=True)
            .first()
        )
        stored = ClaimMetricsSnapshot.from_json(stored_json or {})
        merged = stored + _counters(delta)
        if active_claims is not None:
            merged = replace(merged, active_claims=active_claims)
        values: dict[str, Any] = {"metrics": merged.to_json()}
        if heartbeat_at is not None:
            values["heartbeat_at"] = heartbeat_at
        EngineRecord.objects.using(using).filter(pk=engine_id).update(**values)


# -- the node's engine (main process) -------------------------------------------------


class NodeEngine(Engine):
    """The node's engine: renews every claim carrying its id; heartbeats add, not overwrite."""

    def __init__(self, ident: NodeIdentity, runtime: NodeRuntime) -> None:
        super().__init__(
            engine_id=ident.engine_id,
            node_name=ident.node_name,
            pool=ident.pool,
            renew_scope="engine",
            listen=False,  # client wakes arrive as messages; polling is the backstop
            dispatcher=runtime.dispatch,
        )
        self.timer_dispatcher = runtime.dispatch_timers
        self.stranded_finder = runtime.find_stranded
        self._flushed = ClaimMetricsSnapshot()

    def heartbeat(self) -> None:
        snapshot = self.metrics.snapshot()
        add_to_engine_record(
            self.settings.database,
            self.engine_id,
            _subtract(snapshot, self._flushed),
            active_claims=snapshot.active_claims,
            heartbeat_at=self.now_ms(),
        )
        self._flushed = snapshot


class NodeRuntime:
    """The main process of one node boot."""

    def __init__(self, ident: NodeIdentity, worker: Any) -> None:
        self.identity = ident
        self.worker = worker
        self.engine = NodeEngine(ident, self)

    @property
    def db(self) -> str:
        return self.engine.settings.database

    def start(self) -> None:
        engine = self.engine
        try:
            if engine.settings.background_tasks == "manual":
                engine.boot()  # the host calls engine.run_maintenance()
            else:
                engine.start()
        finally:
            # Pool processes are forked from this (main) thread later on
            # (replacements): it must hold no database connection then.
            connections.close_all()
        logger.info(
            "weft node %s: engine %s (pool %s) started",
            self.identity.node_name,
            engine.engine_id,
            self.identity.pool,
        )

    def shutdown(self) -> None:
        engine = self.engine
        if engine.registry is not None and engine.booted:
            # Adopt what pool processes claimed since the last pass, then release all.
            with contextlib.suppress(Exception):
                engine.registry.renew_all()
        engine.dispose(grace=2.0)

    # -- maintenance hooks -------------------------------------------------------
    def dispatch(self, run_id: Any, wake_kind: WakeKind | None, transport_name: str) -> None:
        """A turn the maintenance pass found: a message to this node's own queue."""
        owner = owner_of_run(self.db, run_id)
        if owner is None or owner.engine_id != self.identity.engine_id:
            return
        send_drive(
            self.identity.node_name,
            str(run_id),
            wake_kind,
            owner.engine_id,
            owner.epoch,
            via="polling",
        )

    def dispatch_timers(self, owned: QuerySet[WorkflowRun], now: int) -> set[str]:
        return dispatch_timers(self.engine, owned, now, found_by_polling=True)

    def find_stranded(self, owned: QuerySet[WorkflowRun], now: int) -> list[Any]:
        """``running`` runs whose turn is nobody's: re-drive them."""
        interval = self.engine.settings.claim_renew_interval_ms
        claims = WorkflowClaim.objects.using(self.db).filter(workflow_id=OuterRef("workflow_id"))
        rows = (
            owned.filter(status="running")
            .annotate(c_claimed=Subquery(claims.values("claimed_at")[:1]))
            .values_list("pk", "turn_pid", "turn_started_at", "c_claimed")[:BATCH]
        )
        pool = self.pool_pids()
        with _driving_lock:
            driving = set(_driving)
        stranded: list[Any] = []
        for pk, pid, started, claimed in rows:
            if str(pk) in driving:
                continue
            if _mark_is_handoff(pid, started, claimed, self.identity):
                if started is None or now - started >= interval:
                    stranded.append(pk)
            elif pid is not None and not _turn_process_alive(pid, pool):
                logger.info("run %s: its turn process %s is gone; re-driving it", pk, pid)
                stranded.append(pk)
        return stranded

    def pool_pids(self) -> set[int] | None:
        """The live pool processes (prefork), or ``None`` when not known."""
        pool = getattr(getattr(self.worker, "pool", None), "_pool", None)
        processes = getattr(pool, "_pool", None)
        if not isinstance(processes, list):
            return None
        return {p.pid for p in processes if getattr(p, "pid", None)}


def _mark_is_handoff(
    pid: int | None, started: int | None, claimed: int | None, ident: NodeIdentity
) -> bool:
    """No turn is (or can be) running under this mark: empty, the main process's
    pickup hand-off, or written before the current claim (another engine's)."""
    return (
        pid is None
        or pid == ident.main_pid
        or started is None
        or (claimed is not None and started < claimed)
    )


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _turn_process_alive(pid: int, pool: set[int] | None) -> bool:
    if pool is not None and pid not in pool:
        return False
    return _pid_alive(pid)


# -- messages -------------------------------------------------------------------------


def _expiry_ms() -> int:
    return max(MIN_EXPIRY_MS, 3 * get_settings().claim_renew_interval_ms)


def send_drive(
    node_name: str,
    run_id: str,
    wake_kind: str | None,
    engine_id: str,
    epoch: int,
    *,
    via: str,
    eta_ms: int | None = None,
    attempt: int = 0,
    due_ms: int | None = None,
) -> bool:
    from celery.utils.nodenames import worker_direct

    now = wall_ms()
    due = eta_ms if eta_ms is not None and eta_ms > now else now
    return transport.send(
        transport.DRIVE_TASK,
        [str(run_id), wake_kind, engine_id, int(epoch)],
        {"via": via, "due_ms": due_ms if due_ms is not None else due, "attempt": attempt},
        worker_direct(node_name),
        now_ms=now,
        expires_ms=due + _expiry_ms(),
        eta_ms=eta_ms,
    )


def send_pickup(run_id: str, *, eta_ms: int | None = None) -> bool:
    current = transport.installed()
    if current is None:
        return False
    now = wall_ms()
    due = eta_ms if eta_ms is not None and eta_ms > now else now
    return transport.send(
        transport.PICKUP_TASK,
        [str(run_id)],
        {"due_ms": due},
        current.queue,
        now_ms=now,
        expires_ms=due + _expiry_ms(),
        eta_ms=eta_ms,
    )


@dataclass(frozen=True)
class Owner:
    workflow_id: str
    engine_id: str | None
    epoch: int
    expires_at: int | None


def owner_of_run(using: str, run_id: Any) -> Owner | None:
    """The run's workflow id and its claim's holder (one query)."""
    claims = WorkflowClaim.objects.using(using).filter(workflow_id=OuterRef("workflow_id"))
    row = (
        WorkflowRun.objects.using(using)
        .filter(pk=run_id)
        .annotate(
            c_engine=Subquery(claims.values("engine_id")[:1]),
            c_epoch=Subquery(claims.values("epoch")[:1]),
            c_expires=Subquery(claims.values("expires_at")[:1]),
        )
        .values_list("workflow_id", "c_engine", "c_epoch", "c_expires")
        .first()
    )
    if row is None:
        return None
    return Owner(row[0], row[1], int(row[2] or 0), row[3])


def on_commit_wake(request: wake_hooks.WakeRequest) -> None:
    """A committed ``client`` write (any process): send the message it calls for."""
    settings = get_settings()
    now = wall_ms()
    if request.event in wake_hooks.PICKUP_EVENTS:
        eta = request.start_at if request.start_at is not None and request.start_at > now else None
        if eta is not None and eta - now > settings.celery_eta_horizon_ms:
            return  # a far delayed start: the nodes' polling picks it up when due
        send_pickup(request.run_id, eta_ms=eta)
        return
    owner = owner_of_run(request.using, request.run_id)
    if owner is None or not owner.engine_id or owner.expires_at is None:
        return  # no holder: pickup or the reclaim scan will drive it
    grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * settings.claim_renew_interval_ms
    if owner.expires_at + grace < now:
        return  # an expired holder: another node's reclaim scan takes it over
    node = (
        EngineRecord.objects.using(request.using)
        .filter(pk=owner.engine_id, stopped_at__isnull=True)
        .exclude(node_name="")
        .values_list("node_name", flat=True)
        .first()
    )
    if not node:
        return  # a standalone engine: NOTIFY or polling wakes it
    send_drive(node, request.run_id, request.event, owner.engine_id, owner.epoch, via="celery")


# -- timers -------------------------------------------------------------------------


def dispatch_timers(
    engine: Engine, runs: QuerySet[WorkflowRun], now: int, *, found_by_polling: bool
) -> set[str]:
    """Hand this engine's timers due within the horizon to Celery, each once.

    A timer is (re)sent when it was never sent, was sent before the current
    claim (by a previous owner), or is overdue by a renew interval although
    sent (the message was lost). Returns the runs sent for a turn now.
    """
    settings = engine.settings
    db = settings.database
    interval = settings.claim_renew_interval_ms
    claims = WorkflowClaim.objects.using(db).filter(workflow_id=OuterRef("run__workflow_id"))
    rows = (
        Timer.objects.using(db)
        .filter(
            run__in=runs.values("pk"),
            run__status__in=DRIVING,
            fire_at__lte=now + settings.celery_eta_horizon_ms,
        )
        .annotate(
            c_engine=Subquery(claims.values("engine_id")[:1]),
            c_epoch=Subquery(claims.values("epoch")[:1]),
            c_claimed=Subquery(claims.values("claimed_at")[:1]),
        )
        .filter(c_engine=engine.engine_id)
        .filter(
            Q(dispatched_at__isnull=True)
            | Q(dispatched_at__lt=F("c_claimed"))
            | Q(fire_at__lte=now - interval, dispatched_at__lte=now - interval)
        )
        .order_by("fire_at")
        .values_list("pk", "run_id", "kind", "fire_at", "dispatched_at", "c_epoch", "c_claimed")[
            : BATCH * 4
        ]
    )
    now_runs: set[str] = set()
    for pk, run_id, kind, fire_at, dispatched_at, epoch, claimed in rows:
        mark = Timer.objects.using(db).filter(pk=pk)
        mark = (
            mark.filter(dispatched_at__isnull=True)
            if dispatched_at is None
            else mark.filter(dispatched_at=dispatched_at)
        )
        if not mark.update(dispatched_at=now):
            continue  # someone else sent it meanwhile
        resend = dispatched_at is not None and claimed is not None and dispatched_at >= claimed
        via = "polling" if resend or (found_by_polling and fire_at <= now) else "celery"
        send_drive(
            engine.node_name,
            str(run_id),
            TIMER_WAKE_KIND.get(kind, "inline-macrotask-drive"),
            engine.engine_id,
            int(epoch),
            via=via,
            eta_ms=fire_at if fire_at > now else None,
            due_ms=fire_at,
        )
        if fire_at <= now:
            now_runs.add(str(run_id))
    return now_runs


# -- pool processes: the facade and the two tasks -------------------------------------


def facade() -> Engine:
    """This thread's facade engine (same engine id as the node; never renews)."""
    ident = identity()
    assert ident is not None
    engine: Engine | None = getattr(_local, "engine", None)
    if engine is None or engine.engine_id != ident.engine_id:
        engine = Engine(
            engine_id=ident.engine_id,
            node_name=ident.node_name,
            pool=ident.pool,
            renew_scope="engine",
            listen=False,
            dispatcher=_facade_dispatch,
        )
        _local.engine = engine
    return engine


def _facade_dispatch(run_id: Any, wake_kind: WakeKind | None, transport_name: str) -> None:
    """A turn started another run (a child): hand it to this node's queue."""
    ident = identity()
    assert ident is not None
    db = get_settings().database
    key = str(run_id)
    with _driving_lock:
        driving = key in _driving
    if not driving:
        # The child's insert stamped this process's pid; it will not drive it.
        WorkflowRun.objects.using(db).filter(pk=run_id, turn_pid=os.getpid()).update(turn_pid=None)
    owner = owner_of_run(db, run_id)
    if owner is None or owner.engine_id != ident.engine_id:
        return
    send_drive(ident.node_name, key, wake_kind, owner.engine_id, owner.epoch, via="celery")


def _begin_task(engine: Engine) -> None:
    global _marks_dirty
    # A pool process drives turns: bound its sessions' idle transactions
    # (``engine.db_connections``). Not the test or web process's own threads.
    mark_engine_thread(engine.settings.claim_ttl_ms)
    if _marks_dirty:
        _clear_leftover_marks(engine)


def _end_task(engine: Engine) -> None:
    registry = engine.registry
    if registry is not None:
        for wid in registry.tracked():
            registry.forget(wid)  # the node renews; the next message adopts afresh
    engine.parked_commands.clear()
    delta = _counters(engine.metrics.snapshot())
    if _is_zero(delta):
        return
    try:
        add_to_engine_record(engine.settings.database, engine.engine_id, delta)
    except Exception:
        logger.warning("could not add pool counters to engine %s", engine.engine_id, exc_info=True)
        return
    engine.metrics.reset()


def _clear_leftover_marks(engine: Engine) -> None:
    global _marks_dirty
    db = engine.settings.database
    mine = WorkflowClaim.objects.using(db).filter(engine_id=engine.engine_id)
    with _driving_lock:
        driving = list(_driving)
    try:
        WorkflowRun.objects.using(db).filter(
            turn_pid=os.getpid(), workflow_id__in=mine.values("workflow_id")
        ).exclude(pk__in=driving).update(turn_pid=None)
        _marks_dirty = False
    except Exception:
        logger.warning("could not clear leftover turn marks", exc_info=True)


def _take_turn(engine: Engine, run_id: str, claimed_at: int | None) -> str:
    """``ok`` (this process now drives ``run_id``), ``busy`` or ``gone``."""
    ident = identity()
    assert ident is not None
    with _driving_lock:
        if run_id in _driving:
            return "busy"
        _driving.add(run_id)
    taken = False
    try:
        db = engine.settings.database
        row = (
            WorkflowRun.objects.using(db)
            .filter(pk=run_id)
            .values_list("status", "turn_pid", "turn_started_at")
            .first()
        )
        if row is None or row[0] not in DRIVING:
            return "gone"
        _, pid, started = row
        free = (
            pid == os.getpid()
            or _mark_is_handoff(pid, started, claimed_at, ident)
            or (pid is not None and not _pid_alive(pid))
        )
        if not free:
            return "busy"
        cas = WorkflowRun.objects.using(db).filter(pk=run_id, status__in=DRIVING)
        cas = cas.filter(turn_pid__isnull=True) if pid is None else cas.filter(turn_pid=pid)
        # The whole mark, not only the pid: a pickup re-stamps its own mark
        # (same pid, fresh time) right after committing; a sibling that read
        # the older stamp must not take the turn over (the chaos soak caught
        # two pool processes driving one run this way).
        cas = (
            cas.filter(turn_started_at__isnull=True)
            if started is None
            else cas.filter(turn_started_at=started)
        )
        if not cas.update(turn_pid=os.getpid(), turn_started_at=engine.now_ms()):
            return "busy"
        taken = True
        return "ok"
    finally:
        if not taken:
            with _driving_lock:
                _driving.discard(run_id)


def _leave_turn(engine: Engine, run_id: str) -> None:
    global _marks_dirty
    try:
        WorkflowRun.objects.using(engine.settings.database).filter(
            pk=run_id, turn_pid=os.getpid()
        ).update(turn_pid=None)
    except Exception:
        _marks_dirty = True
        logger.warning("could not clear the turn mark of %s", run_id, exc_info=True)
    finally:
        with _driving_lock:
            _driving.discard(run_id)


def _runnable(engine: Engine, run_id: str) -> bool:
    """Is there anything for a turn to do? (Else the wake was a duplicate.)"""
    db = engine.settings.database
    row = (
        WorkflowRun.objects.using(db)
        .filter(pk=run_id)
        .values_list("status", "wake_seq", "parked_seq")
        .first()
    )
    if row is None:
        return False
    status, wake_seq, parked_seq = row
    if status == "running":
        return True
    if status != "parked":
        return False
    if wake_seq > parked_seq:
        return True
    timers = Timer.objects.using(db).filter(run__pk=run_id)
    first = timers.aggregate(first=Min("fire_at"))["first"]
    if first is None:
        return False
    now = engine.now_ms()
    if first <= now:
        return True
    if first - now <= EARLY_TIMER_MS:  # an eta that fired a hair early
        time.sleep((first - now) / 1000 + 0.002)
        return True
    return False


def _log_wake(
    decision: str, run_id: str, workflow_id: str, kind: str, via: str, due_ms: Any, reason: str
) -> None:
    latency = wall_ms() - int(due_ms) if isinstance(due_ms, int) else None
    logger.info(
        "weft wake %s run=%s workflow=%s kind=%s via=%s reason=%s latency_ms=%s",
        decision,
        run_id,
        workflow_id,
        kind,
        via,
        reason or "-",
        latency,
    )


def run_drive(
    run_id: str,
    wake_kind: str | None,
    engine_id: str,
    epoch: int,
    *,
    via: str = "celery",
    due_ms: int | None = None,
    attempt: int = 0,
    **_: Any,
) -> str:
    """The ``weft.drive`` task body (a pool process of the owning node)."""
    ident = identity()
    if ident is None:
        logger.error("weft.drive ran outside a weft Celery node; ignored")
        return "no-node"
    engine = facade()
    kind: WakeKind = wake_kind if wake_kind in WAKE_KINDS else "inline-macrotask-drive"  # type: ignore[assignment]
    channel = via if via in ("celery", "polling") else "celery"
    _begin_task(engine)
    try:
        outcome = _wake(engine, str(run_id), kind, engine_id, int(epoch), channel, due_ms)
    finally:
        _end_task(engine)
    if outcome == "busy":
        if attempt < BUSY_RETRIES:
            send_drive(
                ident.node_name,
                str(run_id),
                wake_kind,
                engine_id,
                int(epoch),
                via=via,
                eta_ms=wall_ms() + BUSY_RETRY_MS,
                attempt=attempt + 1,
                due_ms=due_ms,
            )
        else:
            logger.info("run %s still busy after %s tries; polling takes over", run_id, attempt)
    return outcome


def _wake(
    engine: Engine,
    run_id: str,
    kind: WakeKind,
    engine_id: str,
    epoch: int,
    channel: str,
    due_ms: Any,
) -> str:
    db = engine.settings.database
    row = WorkflowRun.objects.using(db).filter(pk=run_id).values_list("workflow_id").first()
    if row is None:
        return "gone"
    wid = row[0]

    def discard(reason: str, *, warned: bool) -> str:
        if not warned:
            warn_wake_discarded(wid, kind, reason=reason, engine_id=engine.engine_id)
        engine.metrics.record_wake(kind, "discard", channel)  # type: ignore[arg-type]
        _log_wake("discarded", run_id, wid, kind, channel, due_ms, reason)
        return "duplicate" if reason == "duplicate" else "discarded"

    # The wake guard (SPEC §4.7): this node's engine id AND the epoch the message names.
    if engine_id != engine.engine_id:
        return discard("other-engine", warned=False)
    try:
        check = wake_ownership_check(
            workflow_id=wid,
            wake_kind=kind,
            expected_engine_id=engine.engine_id,
            expected_epoch=epoch,
            using=db,
        )
    except Exception:  # a read blip: the fenced writes of the turn are the backstop
        logger.warning("wake guard read failed for %s; proceeding", wid, exc_info=True)
    else:
        if check.status != "match":
            return discard(str(check.reason), warned=True)
    registry = engine.registry
    holder = registry.adopt(wid, epoch) if registry is not None else None
    if registry is not None and holder is None:  # the holder changed since the check
        recheck = wake_ownership_check(
            workflow_id=wid,
            wake_kind=kind,
            expected_engine_id=engine.engine_id,
            expected_epoch=epoch,
            using=db,
        )
        if recheck.status != "match":
            return discard(str(recheck.reason), warned=True)
        return discard("generation-mismatch", warned=False)
    taken = _take_turn(engine, run_id, holder.claimed_at if holder is not None else None)
    if taken != "ok":
        return taken
    try:
        if not _runnable(engine, run_id):
            return discard("duplicate", warned=False)
        engine.metrics.record_wake(kind, "proceed", channel)  # type: ignore[arg-type]
        _log_wake("proceed", run_id, wid, kind, channel, due_ms, "")
        left = engine.drive(run_id, None)
        _after_turn(engine, wid)
        return left or "driven"
    finally:
        _leave_turn(engine, run_id)


def _after_turn(engine: Engine, workflow_id: str) -> None:
    """Timers the turn just wrote that are due within the horizon: hand them over."""
    runs = WorkflowRun.objects.using(engine.settings.database).filter(
        workflow_id=workflow_id, status__in=DRIVING
    )
    try:
        dispatch_timers(engine, runs, engine.now_ms(), found_by_polling=False)
    except Exception:  # the node's polling sends them
        logger.warning("could not hand the timers of %s over", workflow_id, exc_info=True)


def run_pickup(run_id: str, *, due_ms: int | None = None, **_: Any) -> str:
    """The ``weft.pickup`` task body (any node): claim a pending run, drive it."""
    ident = identity()
    if ident is None:
        logger.error("weft.pickup ran outside a weft Celery node; ignored")
        return "no-node"
    engine = facade()
    db = engine.settings.database
    _begin_task(engine)
    try:
        run = WorkflowRun.objects.using(db).filter(pk=run_id).first()
        if run is None or run.status != "pending":
            return "not-pending"
        now = engine.now_ms()
        if run.start_at is not None and run.start_at > now:
            if run.start_at - now > EARLY_TIMER_MS:
                return "not-due"
            time.sleep((run.start_at - now) / 1000 + 0.002)
        key = str(run.pk)
        with _driving_lock:
            if key in _driving:
                return "busy"
            _driving.add(key)
        try:
            if not engine.maintenance.pick_up(run):
                return "lost-race"
            # The pickup stamped this process's mark before the claim's
            # claimed_at; re-stamp it so a sibling sees a live turn.
            if not (
                WorkflowRun.objects.using(db)
                .filter(pk=run.pk, turn_pid=os.getpid())
                .update(turn_started_at=engine.now_ms())
            ):
                return "busy"
            _log_wake("pickup", key, run.workflow_id, "-", "celery", due_ms, "")
            left = engine.drive(run.pk, None)
            _after_turn(engine, run.workflow_id)
            return left or "driven"
        finally:
            _leave_turn(engine, key)
    finally:
        _end_task(engine)
