"""Which Celery workers are weft engines: only those that opt in.

Why: a project's Celery deployment usually runs workers for other work
(``celery -A proj worker -n emails@%h -Q emails``). Such a node must never
consume a weft queue, adopt a claim or drive a turn: it was sized, placed
and restarted for its own tasks, and a takeover that lands 128 workflows on
it is a surprise nobody planned for. So a node becomes an engine only when
its own configuration says so, decided once, in the worker's main process,
before anything weft-related is minted or subscribed:

1. ``celery worker --weft`` / ``--no-weft`` (a worker option ``install``
   adds): an explicit yes or no for this node;
2. else the queues it consumes: a node started with ``-Q`` is an engine
   only if one of the named queues is an *engine queue* --
   ``install(app, engine_queues=...)``, by default just the weft queue
   (``-Q weft`` or ``-Q weft,default``), or a queue that carries one weft
   queue (``-Q weft.q.reports``: ``served``); ``-Q emails`` keeps it out;
3. a node started without ``-Q`` consumes every queue of the app, the weft
   queue included (as before this rule existed) -- unless ``-X`` excludes
   the weft queue.

A node that does not opt in still has the weft tasks registered (it may
*send* wakes, as a web process does, when its own tasks call ``client``),
but it subscribes to no weft queue, mints no engine id and starts no engine.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from weft_django.transports.celery.served import names_weft_queue

#: The worker option (``--weft/--no-weft``): the bootstep's keyword argument.
OPTION = "weft"


@dataclass(frozen=True)
class NodeDecision:
    """Whether a worker is a weft engine, and why (logged at boot)."""

    engine: bool
    why: str


def decide(
    *,
    flag: bool | None,
    selected: Collection[str] | None,
    excluded: Collection[str],
    queue: str,
    engine_queues: Collection[str],
) -> NodeDecision:
    """The rule of this module, as a pure function of the worker's options.

    ``selected``: the queues named with ``-Q`` (``None``: no ``-Q``, every
    queue of the app); ``excluded``: those named with ``-X``.
    """
    if flag is True:
        return NodeDecision(True, "started with --weft")
    if flag is False:
        return NodeDecision(False, "started with --no-weft")
    if selected is None:
        if queue in excluded:
            return NodeDecision(False, f"-X excludes the weft queue {queue!r}")
        return NodeDecision(True, "consumes every queue of the app (no -Q), the weft queue too")
    named = sorted(set(selected) & set(engine_queues))
    if named:
        return NodeDecision(True, f"consumes the engine queue {named[0]!r} by name (-Q)")
    carriers = sorted(names_weft_queue(selected, queue))
    if carriers:
        return NodeDecision(True, f"consumes the weft queue's Celery queue {carriers[0]!r} (-Q)")
    wanted = ", ".join(repr(q) for q in sorted(engine_queues))
    return NodeDecision(
        False,
        f"-Q {','.join(sorted(selected))} names no engine queue ({wanted}); "
        f"add {queue!r} (or {queue}.q.<weft queue>) to -Q or start it with --weft "
        "to make it an engine",
    )


def _names(value: Any) -> list[str]:
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, Iterable):
        return [name for item in value for name in _names(item)]
    return [str(value)]


class _WorkerOptions:
    """The ``-Q``/``-X`` a worker was started with, by hostname (``celeryd_init``).

    Celery consumes them in ``WorkController.setup_instance`` and keeps only
    the resulting queue set, in which "no ``-Q``" and "``-Q`` of every queue"
    look alike; ``celeryd_init`` is sent just before, with the options.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_host: dict[str, tuple[list[str] | None, list[str]]] = {}

    def remember(self, sender: Any = None, options: Any = None, **_: Any) -> None:
        options = options or {}
        selected = _names(options.get("queues")) or None
        excluded = _names(options.get("exclude_queues"))
        with self._lock:
            self._by_host[str(sender)] = (selected, excluded)

    def of(self, worker: Any) -> tuple[list[str] | None, list[str]]:
        with self._lock:
            known = self._by_host.get(str(getattr(worker, "hostname", "")))
        if known is not None:
            return known
        # Not seen (a worker built without the CLI): read the selection itself.
        queues = worker.app.amqp.queues
        chosen = getattr(queues, "_consume_from", None)
        return (None if chosen is None else list(chosen), [])


worker_options = _WorkerOptions()


def decide_for(
    worker: Any, *, flag: bool | None, queue: str, engine_queues: Collection[str]
) -> NodeDecision:
    """``decide`` for a worker being initialised (main process, before the fork)."""
    selected, excluded = worker_options.of(worker)
    return decide(
        flag=flag,
        selected=selected,
        excluded=excluded,
        queue=queue,
        engine_queues=engine_queues,
    )


def add_worker_option(app: Any) -> None:
    """``celery worker --weft/--no-weft`` (idempotent per app)."""
    from click import Option

    options = app.user_options["worker"]
    if any(OPTION in getattr(option, "name", "") for option in options):
        return
    options.add(
        Option(
            ["--weft/--no-weft"],
            default=None,
            help=(
                "Make this node a weft engine (--weft) or keep it out (--no-weft). "
                "Default: an engine only if it consumes the weft queue (no -Q, or -Q naming it)."
            ),
        )
    )


__all__ = [
    "OPTION",
    "NodeDecision",
    "add_worker_option",
    "decide",
    "decide_for",
    "worker_options",
]
