"""``GET workflows/<id>/events/``, ``…/events/<key>/?wait=`` and the SSE ``…/streams/<key>/``.

Read-only views over what a run published (``engine.published_reads``):
they never write. The event wait is bounded (``MAX_EVENT_WAIT_S``) because
a waiting request holds a worker (a WSGI thread) for as long as it waits;
a value beyond the bound, or not a number, is a 400 that names it. A key
that is not set after the wait is a 404 ``event_not_set`` (ask again); a run
that ended without setting it is a 409 ``workflow_finished``.

The stream view answers ``text/event-stream`` (Server-Sent Events): one
``id: <offset>`` / ``data: <json>`` message per value, a ``: ping`` comment
about every second while nothing arrives (so a proxy keeps the connection
and a gone reader is noticed at the next write), and a final ``event: end``
when the stream is closed or the run ended -- the page calls
``source.close()`` on it, otherwise ``EventSource`` would reconnect. A
reconnect sends ``Last-Event-ID`` and resumes after that offset
(``?offset=`` starts elsewhere). Under WSGI the body is a sync generator
(``StreamingHttpResponse``); under ASGI an async one (a sync iterator would
be drained to the end before the first byte under ASGI).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.api.parsers import WeftJSONRenderer
from weft_django.api.schema import ERR_400, ERR_404, ERR_AUTH, WORKFLOW_TAG, error
from weft_django.client import published as published_reads
from weft_django.engine.workflow.publish import MAX_KEY_LENGTH, check_key
from weft_django.errors import WorkflowTimeoutError

from .base import WeftAPIView, get_run

#: The longest ``?wait=`` the event endpoint accepts, in seconds.
MAX_EVENT_WAIT_S = 30.0
#: An SSE comment this often while the stream is quiet (the wait's re-read period).
PING = b": ping\n\n"


class EventStreamRenderer(BaseRenderer):
    """``text/event-stream``: lets ``Accept: text/event-stream`` (what
    ``EventSource`` sends) through content negotiation; an error body is sent
    as one ``event: error`` message carrying the JSON error."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


def _seconds(name: str, raw: str, maximum: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or math.isinf(value):
        raise exceptions.ValidationError({name: [f"{name}={raw!r} is not a number of seconds."]})
    if value < 0 or value > maximum:
        raise exceptions.ValidationError(
            {name: [f"{name}={raw} is outside 0 to {maximum:g} seconds (the maximum)."]}
        )
    return value


def _start_offset(request: Request) -> int:
    """Where the stream starts: after ``Last-Event-ID``, else ``?offset=``, else 0."""
    last = request.headers.get("Last-Event-ID")
    raw, name = (last, "Last-Event-ID") if last else (request.query_params.get("offset"), "offset")
    if raw is None or raw == "":
        return 0
    if not raw.isdigit() or len(raw) > 9:
        raise exceptions.ValidationError(
            {name: [f"{name}={raw!r} is not an offset (an integer >= 0)."]}
        )
    return int(raw) + 1 if name == "Last-Event-ID" else int(raw)


def _message(offset: int, value: Any) -> bytes:
    return f"id: {offset}\ndata: {json.dumps(value)}\n\n".encode()


def _end() -> bytes:
    return b"event: end\ndata: {}\n\n"


def _sse(entries: Iterator[tuple[int, Any] | None]) -> Iterator[bytes]:
    yield b"retry: 1000\n\n"
    for entry in entries:
        yield PING if entry is None else _message(*entry)
    yield _end()


async def _asse(entries: AsyncIterator[tuple[int, Any] | None]) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    async for entry in entries:
        yield PING if entry is None else _message(*entry)
    yield _end()


KEY_PARAM = OpenApiParameter(
    "key",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description=f"The event or stream key (1 to {MAX_KEY_LENGTH} characters).",
)


class EventsSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    events = serializers.DictField(child=serializers.JSONField(), help_text="key → last value")


class EventSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)


class WorkflowEventsView(WeftAPIView):
    """``workflows/<id>/events/``: every event of the latest run."""

    @extend_schema(
        operation_id="weft_workflows_events",
        tags=WORKFLOW_TAG,
        summary="The events a run set (ctx.set_event)",
        description="Every key the latest run set with `ctx.set_event`, with its last value.",
        responses={200: EventsSerializer, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        run = get_run(workflow_id)
        events = published_reads.get_events(workflow_id)
        body = {"workflow_id": workflow_id, "run_id": run.pk, "events": events}
        return Response(EventsSerializer(body).data)


class WorkflowEventView(WeftAPIView):
    """``workflows/<id>/events/<key>/?wait=<seconds>``: one event, waiting for it."""

    @extend_schema(
        operation_id="weft_workflows_event",
        tags=WORKFLOW_TAG,
        summary="One event, waiting until it is set",
        description=(
            "The value the latest run set for `key`. With `?wait=` the request waits up to "
            f"that many seconds (at most {MAX_EVENT_WAIT_S:g}) for the set: NOTIFY on "
            "PostgreSQL, polling elsewhere. Not set after the wait → 404 `event_not_set`; "
            "the run ended without setting it → 409 `workflow_finished`."
        ),
        parameters=[
            KEY_PARAM,
            OpenApiParameter(
                "wait",
                {"type": "number", "minimum": 0, "maximum": MAX_EVENT_WAIT_S, "default": 0},
                OpenApiParameter.QUERY,
                description=f"Seconds to wait for the set, 0 to {MAX_EVENT_WAIT_S:g} (default 0).",
            ),
        ],
        responses={
            200: EventSerializer,
            400: ERR_400,
            **ERR_AUTH,
            404: error("No such workflow, or the event is not set (code event_not_set)."),
            409: error("The run ended without setting the event (code workflow_finished)."),
        },
    )
    def get(self, request: Request, workflow_id: str, key: str) -> Response:
        check_key("event key", key)
        raw = request.query_params.get("wait", "0")
        wait = _seconds("wait", raw, MAX_EVENT_WAIT_S)
        run = get_run(workflow_id)
        try:
            value = published_reads.get_event(workflow_id, key, timeout=wait)
        except WorkflowTimeoutError:
            raise exceptions.NotFound(
                f'Workflow "{workflow_id}" has not set event {key!r} (yet).', code="event_not_set"
            ) from None
        body = {"workflow_id": workflow_id, "run_id": run.pk, "key": key, "value": value}
        return Response(EventSerializer(body).data)


class WorkflowStreamView(WeftAPIView):
    """``workflows/<id>/streams/<key>/``: a stream as Server-Sent Events."""

    renderer_classes: ClassVar[list[type]] = [WeftJSONRenderer, EventStreamRenderer]

    @extend_schema(
        operation_id="weft_workflows_stream",
        tags=WORKFLOW_TAG,
        summary="Follow a stream (Server-Sent Events)",
        description=(
            "`text/event-stream` for a browser `EventSource`: one message per value "
            "(`id:` = its offset, `data:` = its JSON), `: ping` comments while quiet, and "
            "`event: end` when the stream is closed or the run ended (call `close()` on it). "
            "A reconnect's `Last-Event-ID` resumes after that offset; `?offset=` starts there."
        ),
        parameters=[
            KEY_PARAM,
            OpenApiParameter(
                "offset",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                description="First offset to send (default 0; Last-Event-ID wins).",
            ),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                response={
                    "type": "string",
                    "description": "Server-Sent Events (text/event-stream), not JSON: "
                    "`id:` offset, `data:` the value's JSON, `event: end` at the end.",
                },
                description="The event stream (media type text/event-stream).",
                examples=[
                    OpenApiExample(
                        "Two values, then the end",
                        value=(
                            'id: 0\ndata: {"step": "charged", "amount": 500}\n\n'
                            'id: 1\ndata: {"step": "shipped"}\n\n'
                            ": ping\n\nevent: end\ndata: {}\n\n"
                        ),
                        media_type="text/event-stream",
                        response_only=True,
                    )
                ],
            ),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_404,
        },
    )
    def get(self, request: Request, workflow_id: str, key: str) -> HttpResponseBase:
        check_key("stream key", key)
        start = _start_offset(request)
        get_run(workflow_id)  # unknown workflow: a JSON 404 before any stream
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        if request.method == "HEAD":
            return HttpResponse(b"", content_type="text/event-stream", headers=headers)
        if isinstance(request._request, ASGIRequest):
            body: Any = _asse(published_reads.astream_entries(workflow_id, key, start, ticks=True))
        else:
            body = _sse(published_reads.stream_entries(workflow_id, key, start, ticks=True))
        return StreamingHttpResponse(body, content_type="text/event-stream", headers=headers)


__all__ = [
    "MAX_EVENT_WAIT_S",
    "EventStreamRenderer",
    "WorkflowEventView",
    "WorkflowEventsView",
    "WorkflowStreamView",
]
