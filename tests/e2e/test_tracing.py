"""Traces (issue #20 part 2, ``engine.tracing``) in the OpenTelemetry SDK's
in-memory exporter: the caller's start, each turn, each activity attempt
(an ``async def`` one on the executor's loop, a retried one's attempts 1
and 2) and the run, in ONE trace with the right parents; a takeover by a
second engine stays in that trace with the new owner's id and epoch; a child
continues its parent's trace; no payload value reaches a span; tracing adds
no database query; ``WEFT["TRACING"]=False`` and a missing opentelemetry
are silent no-ops (weft.E040 for a bad setting).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.e2e.helpers import latest
from tests.engines.tracing_workflows import (
    CURRENT_SPANS,
    FLAKY_CALLS,
    SECRET_CHILD,
    SECRET_ERROR,
    SECRET_INPUT,
    SECRET_RESULT,
    SLOW_GATE,
)
from tests.tracing_support import recording
from weft_django import client
from weft_django.conf import build_settings
from weft_django.engine import Engine, tracing

SECRETS = (SECRET_INPUT, SECRET_RESULT, SECRET_ERROR, SECRET_CHILD)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    FLAKY_CALLS.clear()
    CURRENT_SPANS.clear()
    with recording() as exporter:
        yield exporter


def finished(exporter: InMemorySpanExporter, count: int) -> list[ReadableSpan]:
    """The finished spans once ``count`` are in (an attempt's span ends on its
    future's callback, a moment after the turn may have committed it)."""
    deadline = time.monotonic() + 5
    while len(exporter.get_finished_spans()) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(exporter.get_finished_spans())


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def span_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan) -> int:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def assert_no_payload(spans: list[ReadableSpan]) -> None:
    """No input, result or error-message value in any attribute or event."""
    seen: list[str] = []
    for span in spans:
        seen += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
        seen.append(span.status.description or "")
        for event in span.events:
            seen.append(event.name)
            seen += [f"{k}={v}" for k, v in (event.attributes or {}).items()]
    text = "\n".join(seen)
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked into a span:\n{text}"


def start_traced(name: str, value: Any, workflow_id: str) -> tuple[Any, ReadableSpan | Any]:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("caller") as caller:
        handle = client.start(name, value, workflow_id=workflow_id)
    return handle, caller


@pytest.mark.django_db(transaction=True)
def test_one_trace_from_the_callers_start_through_turns_attempts_and_the_run(spans, weft_env):
    handle, caller = start_traced(
        "trace-order", {"sku": SECRET_INPUT, "key": "t1"}, workflow_id="trace-1"
    )
    stored = latest("trace-1").trace_context
    assert set(stored) == {"traceparent"}  # the W3C carrier, written by the insert
    weft_env.run_until_idle()  # turn 1: trace-charge, then the sleep
    weft_env.advance(timedelta(seconds=11))
    weft_env.run_until_idle()  # turn 2: trace-flaky attempt 1 fails: a retry timer
    weft_env.advance(timedelta(seconds=60))
    weft_env.run_until_idle()  # turn 3: attempt 2, the end
    assert handle.result(timeout=5)["second"] == SECRET_RESULT

    spans_ = finished(spans, 8)
    caller_ctx = caller.get_span_context()
    assert {trace_id(s) for s in spans_} == {caller_ctx.trace_id}

    (start,) = named(spans_, "weft.start trace-order")
    assert start.kind is SpanKind.PRODUCER
    assert parent_id(start) == caller_ctx.span_id
    assert start.attributes == {
        "weft.workflow.name": "trace-order",
        "weft.workflow.id": "trace-1",
        "weft.start.source": "client",
        "weft.run.id": handle.run_id,
    }
    assert stored["traceparent"].split("-")[2] == f"{span_id(start):016x}"

    turns = named(spans_, "weft.turn trace-order")
    engine = weft_env.engine
    epoch = turns[0].attributes["weft.claim.epoch"]
    assert epoch >= 1
    assert len(turns) == 3
    for turn in turns:
        assert turn.kind is SpanKind.CONSUMER
        assert parent_id(turn) == span_id(start)
        assert turn.attributes["weft.workflow.id"] == "trace-1"
        assert turn.attributes["weft.run.id"] == handle.run_id
        assert turn.attributes["weft.engine.id"] == engine.engine_id
        assert turn.attributes["weft.claim.epoch"] == epoch
    assert [t.attributes["weft.turn.outcome"] for t in turns] == ["parked", "parked", "completed"]
    # the journal's length when each turn began: nothing; the charge (and the
    # sleep's timer-set entry); then the fired sleep and attempt 1's retry
    positions = [t.attributes["weft.turn.position"] for t in turns]
    assert positions[0] == 0 and positions[0] < positions[1] <= positions[2]

    (charge,) = named(spans_, "weft.activity trace-charge")
    assert parent_id(charge) == span_id(turns[0])
    assert charge.attributes["weft.activity.name"] == "trace-charge"
    assert charge.attributes["weft.position"] == 0
    assert charge.attributes["weft.attempt"] == 1
    assert charge.attributes["weft.activity.outcome"] == "completed"
    assert charge.attributes["weft.engine.id"] == engine.engine_id
    assert charge.attributes["weft.claim.epoch"] == epoch
    assert charge.status.status_code is StatusCode.UNSET
    # the async body ran under its attempt's span (the executor's loop)
    assert CURRENT_SPANS["trace-charge"] == span_id(charge)

    first, second = named(spans_, "weft.activity trace-flaky")
    assert (first.attributes["weft.attempt"], second.attributes["weft.attempt"]) == (1, 2)
    assert first.attributes["weft.position"] == second.attributes["weft.position"]
    assert parent_id(first) == span_id(turns[1])
    assert parent_id(second) == span_id(turns[2])
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "RuntimeError"
    assert [(e.name, dict(e.attributes or {})) for e in first.events] == [
        ("exception", {"exception.type": "RuntimeError"})
    ]
    assert first.attributes["weft.activity.outcome"] == "failed"
    assert second.attributes["weft.activity.outcome"] == "completed"

    (run,) = named(spans_, "weft.run trace-order")
    assert parent_id(run) == span_id(start)
    assert run.attributes["weft.run.status"] == "completed"
    assert run.attributes["weft.run.id"] == handle.run_id
    # one honest span: from the run's creation to its end
    assert run.start_time <= turns[0].start_time
    assert run.end_time >= second.end_time
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_a_takeover_stays_in_the_trace_with_the_new_owner_and_epoch(spans, clock):
    first = Engine("trace-engine-a", clock=clock, background_tasks="manual").boot()
    second = Engine("trace-engine-b", clock=clock, background_tasks="manual")
    try:
        handle, caller = start_traced(
            "trace-order", {"sku": SECRET_INPUT, "key": "t2"}, workflow_id="trace-2"
        )
        first.run_until_idle()  # A: the charge, then parked on the sleep
        assert handle.status() == "parked"
        # A goes silent; past its claim's expiry and the sleep, B takes over
        settings = first.settings
        clock.advance(settings.claim_ttl_ms + 10 * settings.claim_renew_interval_ms + 11_000)
        second.boot()
        second.run_until_idle()
        clock.advance(60_000)
        second.run_until_idle()
        assert handle.result(timeout=5)["second"] == SECRET_RESULT
    finally:
        second.dispose(grace=0)
        first.dispose(grace=0)
    spans_ = finished(spans, 8)
    assert {trace_id(s) for s in spans_} == {caller.get_span_context().trace_id}
    (start,) = named(spans_, "weft.start trace-order")
    turns = named(spans_, "weft.turn trace-order")
    assert [t.attributes["weft.engine.id"] for t in turns] == [
        "trace-engine-a",
        "trace-engine-b",
        "trace-engine-b",
    ]
    assert all(parent_id(t) == span_id(start) for t in turns)
    epoch_a = turns[0].attributes["weft.claim.epoch"]
    epoch_b = turns[1].attributes["weft.claim.epoch"]
    assert epoch_b > epoch_a >= 1
    assert turns[2].attributes["weft.claim.epoch"] == epoch_b
    for attempt in named(spans_, "weft.activity trace-flaky"):
        assert attempt.attributes["weft.engine.id"] == "trace-engine-b"
        assert attempt.attributes["weft.claim.epoch"] == epoch_b
    (charge,) = named(spans_, "weft.activity trace-charge")
    assert charge.attributes["weft.engine.id"] == "trace-engine-a"
    (run,) = named(spans_, "weft.run trace-order")
    assert run.attributes["weft.engine.id"] == "trace-engine-b"
    assert run.attributes["weft.claim.epoch"] == epoch_b
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_a_child_continues_its_parents_trace(spans, weft_env):
    handle, caller = start_traced("trace-parent", "x", workflow_id="trace-3")
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == "x" + SECRET_CHILD
    spans_ = finished(spans, 7)
    assert {trace_id(s) for s in spans_} == {caller.get_span_context().trace_id}
    parent_turn = named(spans_, "weft.turn trace-parent")[0]
    (child_start,) = named(spans_, "weft.start trace-child")
    assert child_start.attributes["weft.start.source"] == "child"
    assert child_start.attributes["weft.workflow.id"] == "trace-3:0"
    assert parent_id(child_start) == span_id(parent_turn)
    assert latest("trace-3:0").trace_context["traceparent"].split("-")[2] == (
        f"{span_id(child_start):016x}"
    )
    child_turns = named(spans_, "weft.turn trace-child")
    assert child_turns and all(parent_id(t) == span_id(child_start) for t in child_turns)
    (echo,) = named(spans_, "weft.activity trace-echo")
    assert parent_id(echo) in {span_id(t) for t in child_turns}
    assert CURRENT_SPANS["trace-echo"] == span_id(echo)  # a thread's body, under its span
    (child_run,) = named(spans_, "weft.run trace-child")
    assert parent_id(child_run) == span_id(child_start)
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_signal_with_start_writes_its_spans_context_into_the_run(spans, weft_env):
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("caller") as caller:
        client.signal_with_start("trace-quick", SECRET_INPUT, "trace-4", "go", SECRET_INPUT)
    weft_env.run_until_idle()
    spans_ = finished(spans, 4)
    (start,) = named(spans_, "weft.start trace-quick")
    assert start.attributes["weft.start.source"] == "signal-with-start"
    assert start.attributes["weft.start.created"] is True
    assert {trace_id(s) for s in spans_} == {caller.get_span_context().trace_id}
    assert all(parent_id(t) == span_id(start) for t in named(spans_, "weft.turn trace-quick"))
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_a_failed_run_is_an_error_span_naming_only_the_errors_type(spans, weft_env):
    client.start("trace-fails", SECRET_INPUT, workflow_id="trace-5")
    weft_env.run_until_idle()
    weft_env.advance(timedelta(seconds=2))
    weft_env.run_until_idle()
    assert latest("trace-5").status == "failed"
    spans_ = finished(spans, 4)
    (run,) = named(spans_, "weft.run trace-fails")
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description == "ValueError"
    assert run.attributes["weft.run.status"] == "failed"
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_continue_as_new_carries_the_trace_on(spans, weft_env):
    handle, caller = start_traced("trace-loop", {"n": 0}, workflow_id="trace-8")
    weft_env.run_until_idle()
    assert client.get_handle("trace-8").result(timeout=5) == "done"
    spans_ = finished(spans, 6)
    assert {trace_id(s) for s in spans_} == {caller.get_span_context().trace_id}
    (start,) = named(spans_, "weft.start trace-loop")
    turns = named(spans_, "weft.turn trace-loop")
    first_run, second_run = named(spans_, "weft.run trace-loop")
    assert first_run.attributes["weft.run.id"] == handle.run_id
    assert parent_id(first_run) == span_id(start)
    # the new run was inserted by the turn that continued it, under that turn
    continued = latest("trace-8")
    assert str(continued.pk) == second_run.attributes["weft.run.id"] != handle.run_id
    assert parent_id(second_run) == span_id(turns[0])
    assert continued.trace_context["traceparent"].split("-")[2] == f"{span_id(turns[0]):016x}"


@pytest.mark.django_db(transaction=True)
def test_astart_is_traced_in_the_awaiting_callers_span(spans, weft_env):
    async def start() -> tuple[Any, Any]:
        with trace.get_tracer("tests").start_as_current_span("caller") as caller:
            handle = await client.astart("trace-quick", "a", workflow_id="trace-11")
        # astart ran on asgiref's sync thread: close its connection here
        await sync_to_async(connections.close_all)()
        return handle, caller

    handle, caller = asyncio.run(start())
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == "a"
    spans_ = finished(spans, 5)
    (start_span,) = named(spans_, "weft.start trace-quick")
    assert parent_id(start_span) == caller.get_span_context().span_id
    turns = named(spans_, "weft.turn trace-quick")
    assert turns and all(parent_id(t) == span_id(start_span) for t in turns)


@pytest.mark.django_db(transaction=True)
def test_a_schedules_start_is_traced_in_its_caller(spans, weft_env):
    client.create_schedule("trace-sched", "trace-quick", "s", every=timedelta(hours=1))
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("caller") as caller:
        handle = client.trigger_schedule("trace-sched")
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == "s"
    spans_ = finished(spans, 5)
    (start,) = named(spans_, "weft.start trace-quick")
    assert start.attributes["weft.start.source"] == "schedule"
    assert start.attributes["weft.start.created"] is True
    assert parent_id(start) == caller.get_span_context().span_id
    turns = named(spans_, "weft.turn trace-quick")
    assert turns and all(parent_id(t) == span_id(start) for t in turns)


@pytest.mark.django_db(transaction=True)
def test_an_atomic_attempt_runs_under_its_span_on_the_turn_thread(spans, weft_env):
    handle, _caller = start_traced("trace-atomic-flow", SECRET_INPUT, workflow_id="trace-9")
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == SECRET_INPUT
    spans_ = finished(spans, 5)
    (turn,) = named(spans_, "weft.turn trace-atomic-flow")
    (attempt,) = named(spans_, "weft.activity trace-atomic")
    assert parent_id(attempt) == span_id(turn)
    assert attempt.attributes["weft.activity.outcome"] == "completed"
    assert CURRENT_SPANS["trace-atomic"] == span_id(attempt)
    assert_no_payload(spans_)


@pytest.mark.django_db(transaction=True)
def test_an_abandoned_attempt_says_so_and_is_no_error(spans, weft_env):
    SLOW_GATE.clear()
    try:
        handle, _caller = start_traced("trace-race", "won", workflow_id="trace-10")
        weft_env.run_until_idle()
        assert handle.result(timeout=5) == "won"
        spans_ = finished(spans, 6)
    finally:
        SLOW_GATE.set()  # the abandoned thread ends
    (slow,) = named(spans_, "weft.activity trace-slow")
    (fast,) = named(spans_, "weft.activity trace-echo")
    assert slow.attributes["weft.activity.outcome"] == "abandoned"
    assert slow.status.status_code is StatusCode.UNSET
    assert fast.attributes["weft.activity.outcome"] == "completed"
    assert parent_id(slow) == parent_id(fast)


def _statements_of_a_run(weft_env: Any, workflow_id: str) -> int:
    connection = connections[weft_env.engine.settings.database]
    with CaptureQueriesContext(connection) as queries:
        handle = client.start("trace-quick", "v", workflow_id=workflow_id)
        weft_env.run_until_idle()
        assert handle.result(timeout=5) == "v"
    return len(queries.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_tracing_adds_no_statement(spans, weft_env):
    _statements_of_a_run(weft_env, "trace-6")  # the engine's first passes read more
    spans.clear()
    traced = _statements_of_a_run(weft_env, "trace-6a")
    assert len(spans.get_finished_spans()) >= 4
    with override_settings(WEFT={"TRACING": False}):
        untraced = _statements_of_a_run(weft_env, "trace-6b")
    assert traced == untraced


@pytest.mark.django_db(transaction=True)
def test_tracing_off_by_setting_or_without_opentelemetry_is_silent(spans, weft_env, monkeypatch):
    with override_settings(WEFT={"TRACING": False}):
        assert not tracing.enabled()
        handle, _ = start_traced("trace-quick", "a", workflow_id="trace-7a")
        weft_env.run_until_idle()
        assert handle.result(timeout=5) == "a"
        assert latest("trace-7a").trace_context is None
    monkeypatch.setattr(tracing, "AVAILABLE", False)
    handle, _ = start_traced("trace-quick", "b", workflow_id="trace-7b")
    weft_env.run_until_idle()
    assert handle.result(timeout=5) == "b"
    assert latest("trace-7b").trace_context is None
    assert [s.name for s in spans.get_finished_spans()] == ["caller", "caller"]


def test_a_bad_tracing_setting_is_weft_e040():
    _settings, problems = build_settings({"TRACING": "yes"})
    assert [(p.id, "'yes'" in p.message) for p in problems] == [("weft.E040", True)]
    from weft_django.checks import check_weft_settings

    with override_settings(WEFT={"TRACING": 1}):
        errors = [e for e in check_weft_settings(None) if e.id == "weft.E040"]
    assert len(errors) == 1 and "got 1" in errors[0].msg


NO_OTEL = """
import sys
sys.modules["opentelemetry"] = None  # "import opentelemetry" now raises ImportError
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
import tests.engines.tracing_workflows  # noqa: F401
from weft_django import client
from weft_django.engine import tracing
from weft_django.testing import WorkflowTestEnvironment
assert tracing.AVAILABLE is False and tracing.enabled() is False
env = WorkflowTestEnvironment()
try:
    handle = client.start("trace-quick", "fine", workflow_id="no-otel")
    env.run_until_idle()
    assert handle.result(timeout=5) == "fine"
finally:
    env.close()
from weft_django.models import WorkflowRun
assert WorkflowRun.objects.get(workflow_id="no-otel").trace_context is None
assert "opentelemetry.trace" not in sys.modules
print("ok")
"""


@pytest.mark.processes
def test_without_opentelemetry_installed_workflows_run(tmp_path):
    """A fresh process where ``import opentelemetry`` fails (SQLite file database)."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'no-otel.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", NO_OTEL],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
