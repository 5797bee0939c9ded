"""The worker bootstep and signal handlers: where a Celery worker becomes a weft node.

Why a bootstep: the node's identity must be minted, and its pool and
ownership mode checked, in the main process BEFORE the pool forks (every
process carries one engine id), and its engine must start after the pool
is up and stop only after it drained (claims stay renewed meanwhile). The
node runtime is imported here lazily: a web process that imports the
project's ``celery.py`` loads none of it.
"""

from __future__ import annotations

import threading
from typing import Any

from celery import bootsteps, signals

from weft_django.transports.celery.fixup import keep_connections_for_weft_tasks
from weft_django.transports.celery.messages import DEFAULT_QUEUE, installed


class WeftNodeStep(bootsteps.StartStopStep):
    """The worker bootstep: one weft engine per node boot (main process)."""

    label = "weft"
    requires = ("celery.worker.components:Pool",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        from weft_django.transports.celery.identity import prepare_node

        # Before the pool forks: refuse an unsupported pool or mode, mint the
        # engine id, consume the shared pickup queue.
        current = installed()
        prepare_node(parent, queue=current.queue if current else DEFAULT_QUEUE)
        keep_connections_for_weft_tasks(parent.app)

    def start(self, parent: Any) -> None:
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


__all__ = ["WeftNodeStep", "connect_signals", "on_worker_process_init", "on_worker_shutdown"]
