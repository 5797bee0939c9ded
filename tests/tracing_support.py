"""The OpenTelemetry SDK for the tracing tests (not a test module).

The global tracer provider can be set once per process, so ``provider()``
sets one SDK ``TracerProvider`` the first time and returns it after; its
sampler records only while a test holds ``recording()`` (``spans`` fixture),
so the rest of the suite sharing the process gets non-recording spans and
the in-memory exporter never grows between tests.

``install_file_exporter()`` is the same for another process (a Celery worker
node): it writes each ended span as one JSON line to the file named by
``WEFT_TEST_SPANS_FILE`` (test-only; imported by the worker with ``-I``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    Sampler,
    SamplingResult,
)

_lock = threading.Lock()
_recording = threading.Event()
EXPORTER = InMemorySpanExporter()


class _WhileRecording(Sampler):
    """ALWAYS_ON while a test records, else drop (non-recording spans)."""

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        if _recording.is_set():
            return ALWAYS_ON.should_sample(*args, **kwargs)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "WhileRecording"


def provider() -> TracerProvider:
    """This process's SDK provider (set globally on first use)."""
    with _lock:
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            return current
        sdk = TracerProvider(sampler=_WhileRecording())
        sdk.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(sdk)
        assert trace.get_tracer_provider() is sdk, "another tracer provider was set first"
        return sdk


@contextlib.contextmanager
def recording() -> Iterator[InMemorySpanExporter]:
    provider()
    EXPORTER.clear()
    _recording.set()
    try:
        yield EXPORTER
    finally:
        _recording.clear()
        EXPORTER.clear()


class JsonLinesExporter(SpanExporter):
    """Appends each span as one JSON line (ids as hex) to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = [json.dumps(span_record(s)) + "\n" for s in spans]
        with _lock, open(self.path, "a", encoding="utf-8") as out:
            out.writelines(lines)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def span_record(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "kind": span.kind.name,
        "status": span.status.status_code.name,
        "attributes": dict(span.attributes or {}),
        "pid": os.getpid(),
    }


def install_file_exporter() -> None:
    path = os.environ.get("WEFT_TEST_SPANS_FILE")
    if not path:
        return
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(sdk)


def read_span_file(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]
