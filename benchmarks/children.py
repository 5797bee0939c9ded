"""The benchmarks' children: standalone ``weft_worker`` engines and Celery nodes on
``weft_bench``, spawned, waited on and stopped with ``devtools.procs`` (the same
helpers as the tests; the benchmarks never import ``tests``)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from benchmarks.common import LOG_DIR, bench_url, child_env
from devtools import procs
from devtools.procs import ChildGroup, wait_for


def spawn(name: str, argv: list[str], env: dict[str, str], *, capture: bool = False) -> ChildGroup:
    """A child in its own process group, logging to ``benchmarks/out/logs/<name>.log``."""
    return ChildGroup(argv, LOG_DIR / f"{name}.log", env, capture_stdout=capture)


#: ``python -c WORKER_LAUNCHER <command> ...`` = ``manage.py <command> ...`` with
#: ``benchmarks.workflows`` imported first (``manage.py`` has no ``-I`` like Celery).
WORKER_LAUNCHER = (
    "import sys, django; django.setup(); import benchmarks.workflows; "
    "from django.core.management import execute_from_command_line; "
    "execute_from_command_line(['manage.py', *sys.argv[1:]])"
)


def weft_worker(name: str, *extra: str, env: dict[str, str] | None = None) -> ChildGroup:
    """``manage.py weft_worker --engine-id <name>`` on ``weft_bench``."""
    url = bench_url()
    environment = child_env(f"{url}?application_name={quote(name)}", **(env or {}))
    argv = [sys.executable, "-c", WORKER_LAUNCHER, "weft_worker", "--engine-id", name]
    return spawn(name, [*argv, "--grace", "5", "--log-level", "WARNING", *extra], environment)


# -- Celery ------------------------------------------------------------------------------

#: Redis database 12 is the benchmarks' own broker (the Celery tests use 13,
#: the example project 0); ``WEFT_BENCH_BROKER`` overrides it.
DEFAULT_BROKER = "redis://127.0.0.1:6379/12"
CELERY_POOL = "prefork"
CELERY_CONCURRENCY = 2  # pool processes per node: one per core of this machine


def broker_url() -> str:
    return os.environ.get("WEFT_BENCH_BROKER", DEFAULT_BROKER)


def flush_broker() -> None:
    """Empty the benchmarks' Redis database: a killed earlier run may have left
    messages (stale wakes are discarded by the wake guard, but they cost time)."""
    url = broker_url()
    if url.startswith("redis://"):
        import redis

        redis.Redis.from_url(url).flushdb()


def install_celery() -> Any:
    """Make this process a web process of the Celery deployment: ``client``
    calls then send their wakes (``weft.pickup``/``weft.drive``) on commit."""
    from celery import Celery

    from weft_django.celery import install

    app = Celery("weft-bench", broker=broker_url())
    app.conf.broker_connection_retry_on_startup = True
    return install(app)


def uninstall_celery(app: Any) -> None:
    from weft_django.celery import uninstall

    uninstall()
    with contextlib.suppress(Exception):
        app.close()


class CeleryNode(ChildGroup):
    """A Celery node (``node`` is its ``name@host``); ``stop`` is a warm shutdown."""

    def __init__(self, name: str, node: str, env: dict[str, str], **command: Any) -> None:
        argv = procs.celery_worker_command(node, **command)
        super().__init__(argv, LOG_DIR / f"{name}.log", env, term_main_only=True)
        self.node = node


def celery_node(
    name: str,
    *,
    pool: str = CELERY_POOL,
    concurrency: int = CELERY_CONCURRENCY,
    env: dict[str, str] | None = None,
) -> CeleryNode:
    """``celery -A project worker`` (one weft engine per node) on ``weft_bench``.

    Log level WARNING like the standalone engines; mingle, gossip and the
    event heartbeat are off (cluster chatter the benchmark does not need)."""
    import socket

    node = f"{name}@{socket.gethostname()}"
    url = bench_url()
    environment = child_env(
        f"{url}?application_name={quote(name)}", CELERY_BROKER_URL=broker_url(), **(env or {})
    )
    return CeleryNode(
        name,
        node,
        environment,
        pool=pool,
        concurrency=concurrency,
        loglevel="WARNING",
        imports=["benchmarks.workflows"],
        heartbeat=False,
    )


def wait_celery_ready(nodes: Sequence[CeleryNode], timeout: float = 120) -> None:
    """Each node's engine booted (``EngineRecord``) and its consumer ready."""
    from benchmarks.workflows import READY_MARK
    from weft_django.models import EngineRecord

    names = [n.node for n in nodes]
    wait_for(
        f"{len(nodes)} Celery nodes to boot",
        lambda: (
            EngineRecord.objects.filter(node_name__in=names, stopped_at=None).count() >= len(nodes)
            and all(READY_MARK in n.log() for n in nodes)
        ),
        *nodes,
        timeout=timeout,
        interval=0.1,
    )


def stop_all(children: Sequence[ChildGroup]) -> None:
    """SIGTERM every process first, then wait for each: N warm shutdowns in parallel."""
    for child in children:
        child.terminate()
    for child in children:
        child.stop()
