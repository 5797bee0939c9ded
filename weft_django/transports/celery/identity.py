"""Who this node is: its engine id, minted once per boot before the pool forks.

Why minted in the main process, before the fork: every process of the node
(the main process that renews, each pool process that drives) must carry
the SAME engine id, or a pool process could not adopt the claims the node
renews. Pool processes that do not fork (threads, solo, replacements
spawned later) read it from the environment. ``prepare_node`` also refuses,
at worker init, a pool or ownership mode under which a node would be unsafe.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Any

from weft_django.conf import get_settings
from weft_django.transports.celery.served import consumed_for, served_by

logger = logging.getLogger("weft_django.transports.celery")

ENV_KEY = "WEFT_CELERY_NODE"


@dataclass(frozen=True)
class NodeIdentity:
    engine_id: str
    node_name: str
    pool: str
    main_pid: int
    #: The pool's processes (threads): a node's room is twice this (``room``).
    concurrency: int = 1
    #: The weft queues it serves (``served``); ``None``: every declared queue.
    served_queues: frozenset[str] | None = None

    def to_env(self) -> str:
        served = self.served_queues
        return json.dumps(
            {
                "e": self.engine_id,
                "n": self.node_name,
                "p": self.pool,
                "m": self.main_pid,
                "c": self.concurrency,
                "q": None if served is None else sorted(served),
            }
        )

    @classmethod
    def from_env(cls, raw: str | None) -> NodeIdentity | None:
        try:
            data = json.loads(raw or "")
            served = data.get("q")
            return cls(
                str(data["e"]),
                str(data["n"]),
                str(data["p"]),
                int(data["m"]),
                max(1, int(data.get("c", 1))),
                None if served is None else frozenset(str(q) for q in served),
            )
        except (ValueError, KeyError, TypeError):
            return None


class _Minted:
    """This process's identity: minted by ``prepare_node`` or read from the env."""

    current: NodeIdentity | None = None


minted = _Minted()


def identity() -> NodeIdentity | None:
    """This node's identity; ``None`` outside a weft Celery worker."""
    if minted.current is None:
        minted.current = NodeIdentity.from_env(os.environ.get(ENV_KEY))
    return minted.current


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


def prepare_node(
    worker: Any,
    *,
    queue: str,
    selected: list[str] | None = None,
    excluded: list[str] | None = None,
) -> NodeIdentity:
    """Worker init, main process, before the pool forks: check, mint, subscribe.

    ``selected`` / ``excluded``: the worker's ``-Q`` / ``-X`` (``opt_in``), from
    which the weft queues it serves are read (``served``)."""
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured

    if not apps.ready:
        import django

        django.setup()
    from weft_django.transports.celery.node_checks import check_celery_ownership, check_celery_pool

    name = pool_name(worker.pool_cls)
    problems = [f"{m.id}: {m.msg}" for m in check_celery_pool(name)]
    settings = get_settings()  # ImproperlyConfigured names any bad WEFT key
    problems += [f"{m.id}: {m.msg} ({m.hint})" for m in check_celery_ownership(settings.ownership)]
    if settings.ownership == "lease":
        problems.append(
            f'WEFT["OWNERSHIP"] is {settings.ownership!r}: a Celery node holds per-workflow '
            'claims; use "workflow-lease" (the default) with Celery'
        )
    if problems:
        message = "weft-django refuses to start this worker: " + "; ".join(problems)
        logger.critical(message)
        raise ImproperlyConfigured(message)
    node = str(worker.hostname)
    declared = list(settings.queues)
    served = served_by(selected, excluded or [], declared=declared, shared_queue=queue)
    if served.unknown:
        logger.warning(
            "weft: node %s names %s in -Q/-X, but WEFT['QUEUES'] declares no such "
            "weft queue (declared: %s): it serves nothing through that name",
            node,
            ", ".join(repr(n) for n in served.unknown),
            ", ".join(sorted(declared)) or "none",
        )
    logger.info("weft: node %s serves the weft queues: %s", node, served.describe())
    minted.current = NodeIdentity(
        engine_id=f"{node[:160]}:{os.getpid()}:{uuid.uuid4().hex[:8]}",
        node_name=node,
        pool=name,
        main_pid=os.getpid(),
        concurrency=max(1, int(getattr(worker, "concurrency", 0) or 1)),
        served_queues=served.queues,
    )
    os.environ[ENV_KEY] = minted.current.to_env()  # for pool processes that do not fork
    for name in consumed_for(served, declared=declared, shared_queue=queue):
        worker.app.amqp.queues.select_add(name)
    return minted.current


__all__ = ["ENV_KEY", "NodeIdentity", "identity", "pool_name", "prepare_node"]
