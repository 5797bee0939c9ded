"""The Celery transport: ``install(app)`` (SPEC §2 "Engines", Celery).

``install(app)`` only registers things -- a worker bootstep, three tasks
(the third, ``weft.run_routed_activity``, runs routed activities: ``routed``),
signal handlers and the ``CeleryWakeBackend`` -- and marks this process's
transport as ``"celery"`` so that committed ``client`` writes become
messages. A web process, ``migrate`` or ``shell`` that imports the
project's ``celery.py`` starts nothing: no thread, no connection, no broker
traffic until a ``client`` call commits.

Inside ``celery worker`` -- of a node that opts in (``opt_in``: ``--weft``,
or it consumes the weft queue; ``-Q emails`` keeps a node out):

- **One engine per node boot** (``node``): the bootstep (``bootstep``)
  checks the pool (prefork, threads, solo; anything else is refused with
  ``weft.E014``) and the ownership mode, mints the engine id
  (``<node>:<pid>:<random>``, ``identity``) before the pool forks, and
  starts the engine in the *main* process. It drives no turn itself: every
  turn it finds is a ``weft.drive`` message to its own direct queue.
- **Pool processes** (``pool``) share nothing with it across the fork:
  each builds its own engine (same engine id, never renewing) and, before
  each turn, adopts the claim from the database through the wake guard.
- **Wakes** (``routing``, ``messages``) are ``weft.drive(run_id,
  wake_kind, engine_id, epoch)`` on the owner's direct queue
  (``worker_direct``: ``<node>.dq2``); pending runs are
  ``weft.pickup(run_id)`` on the shared queue ``weft`` that every node
  consumes. A sleep becomes an ``eta`` message only once it is due within
  ``CELERY_ETA_HORIZON`` (``timers``). Every message carries ``expires``.
  Lost, duplicated or stale messages change nothing: polling (every
  ``CLAIM_RENEW_INTERVAL``) re-sends what is missing and the wake guard
  discards what is stale. Turns of one run never overlap inside a node
  (``turn_marks``).
- **Shutdown** (warm): once the pool has drained, every claim is released
  and the ``EngineRecord`` is marked stopped.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from weft_django.conf import mark_process_transport
from weft_django.engine.wakes import backends
from weft_django.transports.celery.bootstep import WeftNodeStep, connect_signals
from weft_django.transports.celery.fixup import keep_connections_for_weft_tasks
from weft_django.transports.celery.message_checks import (
    MalformedMessage,
    discard,
    parse_drive,
    parse_pickup,
)
from weft_django.transports.celery.messages import (
    DEFAULT_QUEUE,
    DRIVE_TASK,
    PICKUP_TASK,
    Installed,
    installation,
    installed,
    send,
)
from weft_django.transports.celery.opt_in import add_worker_option
from weft_django.transports.celery.routed import ROUTED_TASK, install_routing, uninstall_routing
from weft_django.transports.celery.wakes import CeleryWakeBackend

if TYPE_CHECKING:
    from celery import Celery

_lock = threading.Lock()
#: The apps whose workers are weft nodes (by identity: tasks and step added once).
_prepared: weakref.WeakSet[Celery] = weakref.WeakSet()


def install(
    app: Celery,
    *,
    queue: str = DEFAULT_QUEUE,
    engine_queues: Iterable[str] | None = None,
) -> Celery:
    """Make ``app``'s opted-in workers weft nodes and this process a Celery-transport one.

    Which workers are engines (``opt_in``): ``celery worker --weft`` /
    ``--no-weft`` decides for one node; else a node started with ``-Q`` is
    an engine only if it names one of ``engine_queues`` (default: just
    ``queue``, i.e. ``-Q weft``), and a node started without ``-Q``
    (every queue of the app) is one unless ``-X`` excludes ``queue``. A
    node that is not an engine never consumes a weft queue or adopts a claim.

    Registers the worker bootstep, the ``weft.drive`` / ``weft.pickup`` tasks
    and the worker signal handlers, sets ``app.conf.worker_direct = True``,
    installs the ``CeleryWakeBackend`` and marks this process's ``TRANSPORT``
    as ``"celery"`` (an explicit conflicting ``WEFT["TRANSPORT"]`` then fails
    validation). Starts nothing and reads no Django setting: safe to call
    from the project's ``celery.py`` while the settings module is still
    being imported.
    """
    with _lock:
        if app not in _prepared:
            app.conf.worker_direct = True
            _register_tasks(app)
            app.steps["worker"].add(WeftNodeStep)
            add_worker_option(app)
            _prepared.add(app)
        connect_signals()
        names = tuple(dict.fromkeys(str(q) for q in engine_queues)) if engine_queues else ()
        installation.current = Installed(app, queue, names)
    mark_process_transport("celery")
    backends.install(CeleryWakeBackend())
    install_routing(app)  # @activity(celery_queue=...): transports.celery.routed
    return app


def uninstall() -> None:
    """Undo this process's marking and wake backend (tests; the app keeps its tasks)."""
    with _lock:
        installation.current = None
    backends.uninstall(CeleryWakeBackend)
    uninstall_routing()
    mark_process_transport(None)


def _register_tasks(app: Celery) -> None:
    # Each returns ``{"outcome", "workflow_id", "run_id"}`` (``wake_report``):
    # what Flower shows, e.g. ``{"outcome": "duplicate", "workflow_id": ...}``.
    # ``*args, **kwargs``: a message of the wrong shape is discarded by
    # ``message_checks`` with a warning, never a crash inside the worker.
    @app.task(name=DRIVE_TASK, bind=True, ignore_result=True, shared=False)
    def weft_drive(self: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        """Drive one turn of ``run_id`` if the wake guard lets it (owner node only)."""
        from weft_django.transports.celery.tasks import run_drive

        try:
            m = parse_drive(args, kwargs)
        except MalformedMessage as error:
            return discard(DRIVE_TASK, error)
        return run_drive(
            m.run_id,
            m.wake_kind,
            m.engine_id,
            m.epoch,
            via=m.via,
            due_ms=m.due_ms,
            attempt=m.attempt,
            workflow_id=m.workflow_id,
        ).as_result(m.run_id)

    @app.task(name=PICKUP_TASK, bind=True, ignore_result=True, shared=False)
    def weft_pickup(self: Any, *args: Any, **kwargs: Any) -> dict[str, str]:
        """Pick up a pending run (claim folded into the write), then drive it."""
        from weft_django.transports.celery.tasks import run_pickup

        try:
            m = parse_pickup(args, kwargs)
        except MalformedMessage as error:
            return discard(PICKUP_TASK, error)
        return run_pickup(
            m.run_id, due_ms=m.due_ms, workflow_id=m.workflow_id, attempt=m.attempt
        ).as_result(m.run_id)


__all__ = [
    "DEFAULT_QUEUE",
    "DRIVE_TASK",
    "PICKUP_TASK",
    "ROUTED_TASK",
    "CeleryWakeBackend",
    "Installed",
    "WeftNodeStep",
    "install",
    "install_routing",
    "installed",
    "keep_connections_for_weft_tasks",
    "send",
    "uninstall",
    "uninstall_routing",
]
