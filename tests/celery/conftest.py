"""Harness of the Celery tests: real ``celery -A project worker`` nodes.

Each worker runs in its own process group (``start_new_session``) on the
*test* database (``child_env``), with ``WEFT_TEST_TIMINGS=1`` (TTL 3 s, renew
1 s) unless a test overrides a timing through the environment, and is
killed as a whole group in a ``finally``. Node names carry a random suffix
so direct queues never collide across runs; Redis uses its own database
(``REDIS_DB``), flushed once per session.

The test process plays the web process: ``celery_app`` installs the
transport here (client calls enqueue wakes on commit) and uninstalls it
afterwards so the rest of the suite keeps the polling transport.

Every wait polls with a bound that is hang protection only; nothing here
asserts a duration (latencies are printed).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

import tests.celery.workflows  # noqa: F401  (registers the workflows in this process)
from tests.support import ChildGroup, child_env, python, wait_for
from weft_django.models import EngineRecord
from weft_django.ownership.metrics import ClaimMetricsSnapshot

REDIS_DB = 13
REDIS_URL = f"redis://127.0.0.1:6379/{REDIS_DB}"
AMQP_URL = "amqp://guest:guest@127.0.0.1:5672//"
BROKERS = {"redis": REDIS_URL, "amqp": AMQP_URL}
HANG_TIMEOUT_S = 30.0  # hang protection only


@pytest.fixture(scope="session", autouse=True)
def _clean_brokers() -> None:
    """Stale messages of earlier runs would only be discarded, but start clean."""
    with contextlib.suppress(Exception):
        import redis

        redis.Redis.from_url(REDIS_URL).flushdb()
    with contextlib.suppress(Exception):
        from kombu import Connection

        with Connection(AMQP_URL, connect_timeout=2) as conn:
            channel = conn.channel()
            with contextlib.suppress(Exception):
                channel.queue_purge("weft")


@pytest.fixture
def postgres() -> None:
    """PostgreSQL only (asserted, never skipped): the tests use the
    ``django_db(transaction=True)`` marker for database access."""
    from django.db import connection

    assert connection.vendor == "postgresql", "the Celery tests run on PostgreSQL only"


def make_app(broker: str) -> Celery:
    app = Celery("weft-tests", broker=broker)
    app.conf.broker_connection_retry_on_startup = True
    return app


@pytest.fixture
def celery_app(request: pytest.FixtureRequest) -> Iterator[Celery]:
    """This process as a web process of a Celery deployment (broker: the param)."""
    from weft_django.celery import install, uninstall

    broker = getattr(request, "param", "redis")
    app = make_app(BROKERS[broker])
    install(app)
    try:
        yield app
    finally:
        uninstall()
        with contextlib.suppress(Exception):
            app.close()


class CeleryWorker(ChildGroup):
    """One ``celery -A project worker`` node; stdout and stderr go to a log file.

    ``imports``: the workflow modules every process of the node loads (``-I``);
    ``extra``: more worker options (``-Q emails``, ``--no-weft``).
    """

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(
        self,
        name: str,
        logs: Path,
        broker: str = REDIS_URL,
        *,
        pool: str = "prefork",
        concurrency: int = 2,
        env: dict[str, str] | None = None,
        imports: tuple[str, ...] = ("tests.celery.workflows",),
        extra: tuple[str, ...] = (),
    ) -> None:
        self.node = f"{name}-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        environment = child_env(
            WEFT_TEST_TIMINGS="1",
            CELERY_BROKER_URL=broker,
            WEFT_LOG_LEVEL="INFO",
            **(env or {}),
        )
        command = [
            python(),
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "-n",
            self.node,
            "-P",
            pool,
            "-c",
            str(concurrency),
            "-l",
            "INFO",
            "-I",
            ",".join(imports),
            "--without-mingle",
            "--without-gossip",
            *extra,
        ]
        super().__init__(command, logs / f"{name}.log", environment)
        self.engine_id = ""

    def wait_ready(self) -> EngineRecord:
        """Booted (``EngineRecord``), consuming (``ready.`` in its log) and past its
        first maintenance pass (so nothing a test starts next is found by the
        boot sweep instead of its own message)."""
        record = wait_for(
            f"{self.node} to boot",
            lambda: EngineRecord.objects.filter(node_name=self.node, stopped_at=None).first(),
            self,
        )
        wait_for(f"{self.node} to be ready", lambda: f"{self.node} ready." in self.log(), self)
        wait_for(
            f"{self.node}'s first maintenance pass",
            lambda: "first maintenance pass done" in self.log(),
            self,
        )
        self.engine_id = record.engine_id
        return record

    def metrics(self) -> ClaimMetricsSnapshot:
        record = EngineRecord.objects.get(pk=self.engine_id)
        return ClaimMetricsSnapshot.from_json(record.metrics)

    def metrics_when(self, what: str, ready: Callable[[ClaimMetricsSnapshot], bool]) -> Any:
        """The node's counters once ``ready`` (pool processes add theirs after each task,
        a moment after the turn's own commit)."""
        latest: list[ClaimMetricsSnapshot] = []

        def probe() -> bool:
            latest[:] = [self.metrics()]
            return ready(latest[0])

        with contextlib.suppress(pytest.fail.Exception):  # the caller's asserts report
            wait_for(what, probe, self, timeout=10)
        return latest[0]

    def stop(self) -> int | None:
        """Warm shutdown: SIGTERM to the main process, then wait for it."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout=HANG_TIMEOUT_S)
        return None

    def wake_lines(self, decision: str = "proceed") -> list[dict[str, str]]:
        """The node's wake log (``weft wake <decision> ... key=value ...``)."""
        seen: set[str] = set()
        found = []
        for line in self.log().splitlines():
            match = re.search(rf"weft wake {decision} (.*)$", line)
            if match is None or match.group(1) in seen:
                continue  # each line is logged twice (weft handler + Celery's)
            seen.add(match.group(1))
            found.append(dict(re.findall(r"(\w+)=(\S+)", match.group(1))))
        return found


@pytest.fixture
def workers() -> Iterator[list[CeleryWorker]]:
    started: list[CeleryWorker] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.kill()


def wakes(metrics: ClaimMetricsSnapshot, **labels: str) -> int:
    """Sum of ``weft_wakes_total`` over the wake keys matching ``labels``."""
    names = ("kind", "decision", "transport")
    return sum(
        n
        for key, n in metrics.wakes.items()
        if all(dict(zip(names, key, strict=True))[k] == v for k, v in labels.items())
    )


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else -1
