"""Traces across a Celery hop (issue #20 part 2). PostgreSQL, Redis database 9.

The test process plays the web process: it starts ``trace-hop`` under a span
of its own, in the OpenTelemetry SDK's in-memory exporter. A real weft node
(``celery -A project worker``) drives every turn -- the first from the pickup
message, the next from the sleep's ``weft.drive`` message (the polling
backstop is 60 s, so nothing else can wake it in time) -- and sends the
routed activity to a plain Celery worker of ``tests.celery.routed_app``
consuming ``gpu``. Both worker processes export their spans to JSON-lines
files (``tests.engines.tracing_worker_setup``). Every span, in three
processes, is in the caller's trace, with the right parents, and none names
a payload.

Not under ``tests/celery/``: that directory's harness flushes Redis database
13 for its own tests; this module uses database 9 and borrows only the
``CeleryWorker`` class.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from opentelemetry import trace

from tests.celery.conftest import HANG_TIMEOUT_S, CeleryWorker, wakes
from tests.engines.tracing_workflows import SECRET_INPUT
from tests.support import ChildGroup, child_env, python, wait_for
from tests.tracing_support import read_span_file, recording
from weft_django import client

pytestmark = [pytest.mark.processes]

REDIS_URL = "redis://127.0.0.1:6379/9"
IMPORTS = (
    "tests.engines.tracing_workflows",
    "tests.celery.routed_activities",
    "tests.engines.tracing_worker_setup",
)


@pytest.fixture
def postgres() -> None:
    from django.db import connection

    assert connection.vendor == "postgresql", "the Celery tracing test runs on PostgreSQL"


@pytest.fixture
def celery_app() -> Iterator[Celery]:
    """This process as a web process of a Celery deployment on Redis database 9."""
    import redis

    from weft_django.celery import install, uninstall

    redis.Redis.from_url(REDIS_URL).flushdb()
    app = Celery("weft-trace-tests", broker=REDIS_URL)
    app.conf.broker_connection_retry_on_startup = True
    install(app)
    try:
        yield app
    finally:
        uninstall()
        with contextlib.suppress(Exception):
            app.close()


class GpuWorker(ChildGroup):
    """``celery -A tests.celery.routed_app worker -Q gpu``: routed activities only."""

    reap_timeout_s = HANG_TIMEOUT_S

    def __init__(self, logs: Path, spans_file: Path) -> None:
        self.node = f"trace-gpu-{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
        command = [
            python(),
            "-m",
            "celery",
            "-A",
            "tests.celery.routed_app",
            "worker",
            "-n",
            self.node,
            "-Q",
            "gpu",
            "-P",
            "prefork",
            "-c",
            "1",
            "-l",
            "INFO",
            "-I",
            "tests.celery.routed_activities,tests.engines.tracing_worker_setup",
            "--without-mingle",
            "--without-gossip",
        ]
        env = child_env(
            CELERY_BROKER_URL=REDIS_URL,
            WEFT_TEST_TIMINGS="1",
            WEFT_TEST_SPANS_FILE=str(spans_file),
        )
        super().__init__(command, logs / "trace-gpu.log", env)


def by_name(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


@pytest.mark.django_db(transaction=True)
def test_turns_on_a_celery_node_and_a_routed_attempt_join_the_callers_trace(
    postgres, celery_app, tmp_path
):
    node_spans, gpu_spans = tmp_path / "node-spans.jsonl", tmp_path / "gpu-spans.jsonl"
    node = CeleryWorker(
        "trace-node",
        tmp_path,
        REDIS_URL,
        imports=IMPORTS,
        env={
            "WEFT_CLAIM_RENEW_INTERVAL": "60",
            "WEFT_CLAIM_TTL": "180",
            "WEFT_TEST_SPANS_FILE": str(node_spans),
        },
    )
    gpu = GpuWorker(tmp_path, gpu_spans)
    try:
        node.wait_ready()
        wait_for(f"{gpu.node} to be ready", lambda: f"{gpu.node} ready." in gpu.log(), gpu)
        with recording() as exporter:
            with trace.get_tracer("tests").start_as_current_span("caller") as caller:
                handle = client.start(
                    "trace-hop",
                    {"value": SECRET_INPUT, "gpu": {"key": "trace-hop", "x": 6}},
                    workflow_id="trace-hop-1",
                )
            assert handle.result(timeout=60) == {"first": SECRET_INPUT, "square": 36}
            (start,) = [s for s in exporter.get_finished_spans() if s.name.startswith("weft.")]
        metrics = node.metrics_when(
            "the sleep's wake counted", lambda m: wakes(m, kind="sleep", decision="proceed") >= 1
        )
        assert wakes(metrics, kind="sleep", decision="proceed", transport="celery") == 1, (
            metrics.wakes
        )
        node_side = wait_for(
            "the node's run span",
            lambda: (s := read_span_file(str(node_spans))) and by_name(s, "weft.run ") and s,
            node,
        )
        gpu_side = wait_for(
            "the gpu worker's span",
            lambda: read_span_file(str(gpu_spans)) or None,
            gpu,
        )
    finally:
        gpu.kill()
        node.kill()

    caller_trace = f"{caller.get_span_context().trace_id:032x}"
    start_id = f"{start.get_span_context().span_id:016x}"
    assert start.name == "weft.start trace-hop"
    everything = node_side + gpu_side
    assert {s["trace_id"] for s in everything} == {caller_trace}
    assert os.getpid() not in {s["pid"] for s in everything}  # other processes

    turns = by_name(node_side, "weft.turn trace-hop")
    assert len(turns) >= 2  # the pickup's turn and the sleep's
    assert all(t["parent_id"] == start_id for t in turns)
    assert all(t["attributes"]["weft.engine.id"].startswith(node.node) for t in turns)
    assert all(t["attributes"]["weft.claim.epoch"] >= 1 for t in turns)
    turn_ids = {t["span_id"] for t in turns}
    (echo,) = by_name(node_side, "weft.activity trace-echo")
    (sender,) = by_name(node_side, "weft.activity celery.gpu_square")
    assert echo["parent_id"] in turn_ids and sender["parent_id"] in turn_ids
    assert sender["attributes"]["weft.activity.celery_queue"] == "gpu"
    assert sender["attributes"]["weft.activity.outcome"] == "completed"
    (routed,) = by_name(gpu_side, "weft.routed_activity celery.gpu_square")
    assert routed["kind"] == "CONSUMER"
    assert routed["parent_id"] == sender["span_id"]
    assert routed["attributes"]["weft.attempt"] == 1
    assert routed["attributes"]["weft.worker"].startswith("trace-gpu-")
    (run,) = by_name(node_side, "weft.run trace-hop")
    assert run["parent_id"] == start_id and run["attributes"]["weft.run.status"] == "completed"
    assert SECRET_INPUT not in repr([s["attributes"] for s in everything])
