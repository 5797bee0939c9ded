"""The worker bootstep and signal handlers: where a Celery worker becomes a weft node.

Why a bootstep: the node's identity must be minted, and its pool and
ownership mode checked, in the main process BEFORE the pool forks (every
process carries one engine id), and its engine must start after the pool
is up and stop only after it drained (claims stay renewed meanwhile). The
node runtime is imported here lazily: a web process that imports the
project's ``celery.py`` loads none of it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import bootsteps, signals

from weft_django.transports.celery.fixup import keep_connections_for_weft_tasks
from weft_django.transports.celery.messages import DEFAULT_QUEUE, installed
from weft_django.transports.celery.opt_in import decide_for, worker_options

logger = logging.getLogger("weft_django.transports.celery")


class WeftNodeStep(bootsteps.StartStopStep):
    """The worker bootstep: one weft engine per node boot (main process)."""

    label = "weft"
    requires = ("celery.worker.components:Pool",)

    def __init__(self, parent: Any, weft: bool | None = None, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        from weft_django.transports.celery.identity import prepare_node

        # Only a node that opts in (``opt_in``) becomes an engine; then, before
        # the pool forks: refuse an unsupported pool or mode, mint the engine
        # id, consume the shared pickup queue.
        current = installed()
        queue = current.queue if current else DEFAULT_QUEUE
        engine_queues = current.engine_queue_names() if current else (queue,)
        decision = decide_for(parent, flag=weft, queue=queue, engine_queues=engine_queues)
        self.engine = decision.engine
        if not decision.engine:
            logger.info(
                "weft: node %s is not a weft engine (%s): it consumes no weft queue and "
                "adopts no claim",
                getattr(parent, "hostname", "?"),
                decision.why,
            )
            return
        logger.info(
            "weft: node %s is a weft engine (%s)", getattr(parent, "hostname", "?"), decision.why
        )
        selected, excluded = worker_options.of(parent)
        prepare_node(parent, queue=queue, selected=selected, excluded=excluded)
        keep_connections_for_weft_tasks(parent.app)

    def include_if(self, parent: Any) -> bool:
        return bool(getattr(self, "engine", True))

    def start(self, parent: Any) -> None:
        if not self.engine:
            return
        from weft_django.transports.celery.node import start_node

        start_node(parent)

    def stop(self, parent: Any) -> None:
        # Claims stay renewed while the pool drains; ``worker_shutdown``
        # (sent after the pool stopped) releases them.
        return None

    def terminate(self, parent: Any) -> None:
        from weft_django.transports.celery.node import shutdown_node

        shutdown_node()


def on_worker_process_init(**kwargs: Any) -> None:
    """A prefork child: forget the parent's runtime, build this process's engine."""
    from weft_django.transports.celery.identity import identity
    from weft_django.transports.celery.node import forget_after_fork
    from weft_django.transports.celery.pool import reset_after_fork

    if identity() is None:
        return
    forget_after_fork()
    reset_after_fork()


def on_worker_shutdown(**kwargs: Any) -> None:
    from weft_django.transports.celery.node import shutdown_node

    shutdown_node()


_connect_lock = threading.Lock()


def connect_signals() -> None:
    """Connect the worker signal handlers (idempotent: by ``dispatch_uid``)."""
    with _connect_lock:
        signals.worker_process_init.connect(
            on_worker_process_init, weak=False, dispatch_uid="weft_django.process_init"
        )
        signals.worker_shutdown.connect(
            on_worker_shutdown, weak=False, dispatch_uid="weft_django.worker_shutdown"
        )
        # The -Q / -X a worker was started with (``opt_in``), before it uses them.
        signals.celeryd_init.connect(
            worker_options.remember, weak=False, dispatch_uid="weft_django.celeryd_init"
        )


__all__ = ["WeftNodeStep", "connect_signals", "on_worker_process_init", "on_worker_shutdown"]
