"""The Celery transport: ``install(app)`` (SPEC §2 "Engines", Celery).

``install(app)`` only registers things — a worker bootstep, two tasks and
signal handlers — and marks this process's transport as ``"celery"`` so
that ``client`` calls enqueue wakes once their write commits. A web
process, ``migrate`` or ``shell`` that imports the project's ``celery.py``
starts nothing: no thread, no connection, no broker traffic until a
``client`` call commits.

Inside ``celery worker`` (the node runtime lives in ``celery_node``):

- **One engine per node boot.** The bootstep checks the pool (prefork,
  threads, solo; anything else is refused with ``weft.E014``) and the
  ownership mode, mints the engine id (``<node>:<pid>:<random>``) before the
  pool forks, and starts the engine in the *main* process: renewal (one
  statement for every claim carrying its engine id), reclaim scan, timers,
  wakes, pending pickup, stranded-turn re-drive and heartbeat, on threads.
  It drives no turn itself: every turn it finds is a ``weft.drive`` message
  to its own direct queue.
- **Pool processes** share nothing with it across the fork: each builds a
  facade engine (same engine id, never renewing) and, before each turn,
  adopts the claim from the database — the holder row must carry the node's
  engine id at the epoch the message names, else the wake is discarded.
- **Wakes** are ``weft.drive(run_id, wake_kind, engine_id, epoch)`` on the
  owner's direct queue (``worker_direct``: ``<node>.dq2``); pending runs are
  ``weft.pickup(run_id)`` on the shared queue ``weft`` that every node
  consumes. A sleep becomes an ``eta`` message only once it is due within
  ``CELERY_ETA_HORIZON`` (``Timer.dispatched_at``: sent once). Every message
  carries ``expires``. Lost, duplicated or stale messages change nothing:
  polling (every ``CLAIM_RENEW_INTERVAL``) re-sends what is missing and the
  wake guard discards what is stale.
- **Shutdown** (warm): once the pool has drained, every claim is released
  and the ``EngineRecord`` is marked stopped.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from celery import bootsteps, signals

from weft_django.conf import mark_process_transport
from weft_django.transports import wake_hooks

if TYPE_CHECKING:
    from celery import Celery
    from kombu import Queue

logger = logging.getLogger("weft_django.transports.celery")

DRIVE_TASK = "weft.drive"
PICKUP_TASK = "weft.pickup"
DEFAULT_QUEUE = "weft"


@dataclass(frozen=True)
class Installed:
    app: Celery
    queue: str


_installed: Installed | None = None
_lock = threading.Lock()
_signals_connected = False


def install(app: Celery, *, queue: str = DEFAULT_QUEUE) -> Celery:
    """Make ``app``'s workers weft nodes and this process a Celery-transport one.

    Registers the worker bootstep, the ``weft.drive`` / ``weft.pickup`` tasks
    and the worker signal handlers, sets ``app.conf.worker_direct = True``,
    and marks this process's ``TRANSPORT`` as ``"celery"`` (an explicit
    conflicting ``WEFT["TRANSPORT"]`` then fails validation). Starts nothing
    and reads no Django setting: safe to call from the project's
    ``celery.py`` while the settings module is still being imported.
    """
    global _installed
    with _lock:
        if not getattr(app, "_weft_installed", False):
            app.conf.worker_direct = True
            _register_tasks(app)
            app.steps["worker"].add(WeftNodeStep)
            app._weft_installed = True  # type: ignore[attr-defined]
        _connect_signals()
        _installed = Installed(app, queue)
    mark_process_transport("celery")
    wake_hooks.register(_on_commit_wake)
    return app


def uninstall() -> None:
    """Undo this process's marking and wake hook (tests; the app keeps its tasks)."""
    global _installed
    with _lock:
        _installed = None
    wake_hooks.unregister(_on_commit_wake)
    mark_process_transport(None)


def installed() -> Installed | None:
    return _installed


def _on_commit_wake(request: wake_hooks.WakeRequest) -> None:
    from weft_django.transports import celery_node

    celery_node.on_commit_wake(request)


def _register_tasks(app: Celery) -> None:
    @app.task(name=DRIVE_TASK, bind=True, ignore_result=True, shared=False)
    def weft_drive(
        self: Any, run_id: str, wake_kind: str | None, engine_id: str, epoch: int, **options: Any
    ) -> str:
        """Drive one turn of ``run_id`` if the wake guard lets it (owner node only)."""
        from weft_django.transports import celery_node

        return celery_node.run_drive(run_id, wake_kind, engine_id, epoch, **options)

    @app.task(name=PICKUP_TASK, bind=True, ignore_result=True, shared=False)
    def weft_pickup(self: Any, run_id: str, **options: Any) -> str:
        """Pick up a pending run (claim folded into the write), then drive it."""
        from weft_django.transports import celery_node

        return celery_node.run_pickup(run_id, **options)


def _connect_signals() -> None:
    global _signals_connected
    if _signals_connected:
        return
    signals.worker_process_init.connect(
        _on_worker_process_init, weak=False, dispatch_uid="weft_django.process_init"
    )
    signals.worker_shutdown.connect(
        _on_worker_shutdown, weak=False, dispatch_uid="weft_django.worker_shutdown"
    )
    _signals_connected = True


def _on_worker_process_init(**kwargs: Any) -> None:
    from weft_django.transports import celery_node

    celery_node.on_pool_process_init()


def _on_worker_shutdown(**kwargs: Any) -> None:
    from weft_django.transports import celery_node

    celery_node.shutdown_node()


def keep_connections_for_weft_tasks(app: Celery) -> bool:
    """Let ``weft.*`` tasks keep their database connection from task to task.

    Why: Celery's Django fix-up closes every connection before and after
    *every* task (unless ``CELERY_DB_REUSE_MAX`` is set), so each weft turn
    in a pool process opened a new PostgreSQL session — 5–17 ms of each
    timer or signal wake in the Celery latency benchmark (issue #7). For a
    weft task the close is replaced by ``refresh_connections`` (drop a
    connection that broke, keep a healthy one); every other task is closed
    around exactly as before. Patched on the worker's fix-up instance before
    the pool forks, so every pool process inherits it. Returns whether a
    Django fix-up was found.
    """
    from celery._state import get_current_task

    from weft_django.engine.db_connections import refresh_connections

    found = False
    for fixup in getattr(app, "_fixups", None) or ():
        worker_fixup = getattr(fixup, "_worker_fixup", None)
        if worker_fixup is None or not hasattr(worker_fixup, "close_database"):
            continue
        found = True
        if getattr(worker_fixup, "_weft_keeps_connections", False):
            continue
        close_for_other_tasks = worker_fixup.close_database

        def close_database(_close: Any = close_for_other_tasks, **kwargs: Any) -> Any:
            task = get_current_task()
            if task is not None and str(getattr(task, "name", "")).startswith("weft."):
                refresh_connections()
                return None
            return _close(**kwargs)

        worker_fixup.close_database = close_database
        worker_fixup._weft_keeps_connections = True
    return found


class WeftNodeStep(bootsteps.StartStopStep):
    """The worker bootstep: one weft engine per node boot (main process)."""

    label = "weft"
    requires = ("celery.worker.components:Pool",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        from weft_django.transports import celery_node

        # Before the pool forks: refuse an unsupported pool or mode, mint the
        # engine id, consume the shared pickup queue.
        celery_node.prepare_node(parent, queue=_installed.queue if _installed else DEFAULT_QUEUE)
        keep_connections_for_weft_tasks(parent.app)

    def start(self, parent: Any) -> None:
        from weft_django.transports import celery_node

        celery_node.start_node(parent)

    def stop(self, parent: Any) -> None:
        # Claims stay renewed while the pool drains; ``worker_shutdown``
        # (sent after the pool stopped) releases them.
        return None

    def terminate(self, parent: Any) -> None:
        from weft_django.transports import celery_node

        celery_node.shutdown_node()


# -- sending ------------------------------------------------------------------------


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def send(
    name: str,
    args: list[Any],
    kwargs: dict[str, Any],
    queue: str | Queue,
    *,
    now_ms: int,
    expires_ms: int,
    eta_ms: int | None = None,
) -> bool:
    """Send one weft task; a failure is logged and reported, never raised."""
    current = _installed
    if current is None:
        return False
    try:
        current.app.send_task(
            name,
            args=args,
            kwargs=kwargs,
            queue=queue,
            eta=_utc(eta_ms) if eta_ms is not None and eta_ms > now_ms else None,
            expires=_utc(expires_ms),
        )
    except Exception:  # a lost message costs one renew interval: polling re-sends it
        logger.warning(
            "could not send %s for %s; polling will pick it up", name, args[:1], exc_info=True
        )
        return False
    return True


__all__ = ["DEFAULT_QUEUE", "DRIVE_TASK", "PICKUP_TASK", "WeftNodeStep", "install", "uninstall"]
