"""``POST workflows/<id>/<action>/``: signal, cancel, suspend, resume, retry, purge, query,
fork, reset.

Each action is a ``WorkflowActionView``: its body serializer, one call to
the client, and the answer; the schema of each sits on its class.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.exceptions import QueryFailed
from weft_django.api.schema import WORKFLOW_TAG, action_responses
from weft_django.api.serializers import (
    CancelSerializer,
    ForkSerializer,
    PurgeResultSerializer,
    QueryResultSerializer,
    QuerySerializer,
    ReasonSerializer,
    ResetSerializer,
    SignalAcceptedSerializer,
    SignalSerializer,
    WorkflowDetailSerializer,
)
from weft_django.client.audit import log_repair
from weft_django.engine import operations
from weft_django.errors import UnknownQuery, WeftError
from weft_django.models import WorkflowRun

from .base import WorkflowActionView, actor, detail_response

logger = logging.getLogger("weft_django.api")


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_signal",
        tags=WORKFLOW_TAG,
        summary="Send a signal",
        description="Buffered durably until the run consumes it (202). A terminal run → 409. "
        "With idempotency_key, recorded once per key per workflow id (a retry answers 202 "
        "with the recorded signal).",
        request=SignalSerializer,
        responses=action_responses(SignalAcceptedSerializer, status=202),
    )
)
class WorkflowSignalView(WorkflowActionView):
    """``workflows/<id>/signal/``."""

    body = SignalSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        message = client.signal(
            workflow_id,
            data["name"],
            data.get("payload"),
            idempotency_key=data.get("idempotency_key"),
        )
        body = {
            "workflow_id": workflow_id,
            "run_id": message.run_id,
            "signal_id": message.pk,
            "name": message.name,
        }
        return Response(SignalAcceptedSerializer(body).data, status=202)


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_cancel",
        tags=WORKFLOW_TAG,
        summary="Cancel a run",
        description="Rotates the claim's epoch, so the running owner's in-flight step commits "
        "nothing. Without a grace (none given, no workflow cancel_grace) or with force=true: "
        "immediate (no workflow code runs), cascading to live children. With a grace: the run "
        "is marked cancel-requested and stays drivable; WorkflowCancelled is thrown into it so "
        "it can clean up, its children get the same grace, and it ends cancelled (failed if "
        "cleanup raised) or at once when the grace runs out or on a second cancel. "
        "A terminal run → 409.",
        request=CancelSerializer,
        responses=action_responses(WorkflowDetailSerializer),
    )
)
class WorkflowCancelView(WorkflowActionView):
    """``workflows/<id>/cancel/``."""

    body = CancelSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        reason = data.get("reason") or ""
        run = client.cancel(
            workflow_id,
            reason,
            grace=data.get("grace"),
            force=bool(data.get("force")),
            actor=actor(request),
        )
        return detail_response(run)


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_suspend",
        tags=WORKFLOW_TAG,
        summary="Suspend a run",
        description="pending, running or parked → suspended; rotates the claim's epoch.",
        request=ReasonSerializer,
        responses=action_responses(WorkflowDetailSerializer),
    )
)
class WorkflowSuspendView(WorkflowActionView):
    """``workflows/<id>/suspend/``."""

    body = ReasonSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        reason = data.get("reason") or ""
        return detail_response(client.suspend(workflow_id, reason, actor=actor(request)))


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_resume",
        tags=WORKFLOW_TAG,
        summary="Resume a suspended run",
        description="suspended → pending; an engine picks it up with a new epoch.",
        request=None,
        responses=action_responses(WorkflowDetailSerializer),
    )
)
class WorkflowResumeView(WorkflowActionView):
    """``workflows/<id>/resume/``."""

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        return detail_response(client.resume(workflow_id))


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_retry",
        tags=WORKFLOW_TAG,
        summary="Retry a failed or timed-out run",
        description="The journal is kept: recorded steps do not run again; the failed step does.",
        request=None,
        responses=action_responses(WorkflowDetailSerializer),
    )
)
class WorkflowRetryView(WorkflowActionView):
    """``workflows/<id>/retry/``."""

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        return detail_response(client.retry(workflow_id))


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_fork",
        tags=WORKFLOW_TAG,
        summary="Fork a run at a journal position",
        description="A new run (workflow_id_for_fork) whose journal is the latest run's entries "
        "before at_position: recorded results are reused, the rest runs with today's code. "
        "The source, live or ended, is untouched (201, the new run). at_position beyond the "
        "journal or splitting a ctx.all group, or a workflow not registered → 400.",
        request=ForkSerializer,
        responses=action_responses(WorkflowDetailSerializer, status=201),
    )
)
class WorkflowForkView(WorkflowActionView):
    """``workflows/<id>/fork/``."""

    body = ForkSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        who = actor(request)
        handle = client.fork(
            workflow_id,
            at_position=data["at_position"],
            workflow_id_for_fork=data.get("workflow_id_for_fork"),
            input=data.get("input"),
            actor=who,
        )
        log_repair("fork", handle.run_id, data["at_position"], actor=who, user=request.user)
        return detail_response(WorkflowRun.objects.get(pk=handle.run_id), status=201)


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_reset",
        tags=WORKFLOW_TAG,
        summary="Reset a run to a journal position",
        description="The latest run ends terminated (if live: the claim's epoch rotated, live "
        "children cancelled, the reason recorded) and a new run of the same workflow id "
        "continues from its journal before at_position, in one batch (the new run). Bad "
        "at_position → 400, nothing written.",
        request=ResetSerializer,
        responses=action_responses(WorkflowDetailSerializer),
    )
)
class WorkflowResetView(WorkflowActionView):
    """``workflows/<id>/reset/``."""

    body = ResetSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        who = actor(request)
        handle = client.reset(
            workflow_id,
            at_position=data["at_position"],
            reason=data.get("reason") or "",
            actor=who,
        )
        log_repair("reset", handle.run_id, data["at_position"], actor=who, user=request.user)
        return detail_response(WorkflowRun.objects.get(pk=handle.run_id))


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_purge",
        tags=WORKFLOW_TAG,
        summary="Delete every terminal run of a workflow id",
        description="Only when the latest run is terminal (else 409). The claim row and its "
        "epoch stay, so a later run of the same id never reuses an epoch.",
        request=None,
        responses=action_responses(PurgeResultSerializer),
    )
)
class WorkflowPurgeView(WorkflowActionView):
    """``workflows/<id>/purge/``."""

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        purged = operations.purge(workflow_id, actor=actor(request))
        body = {"workflow_id": workflow_id, "purged_runs": purged}
        return Response(PurgeResultSerializer(body).data)


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_query",
        tags=WORKFLOW_TAG,
        summary="Call a query handler",
        description="Replays the journal read-only in this process (nothing is written, no "
        "activity runs) and calls the on_query handler. An unknown handler → 400 with "
        'errors.name; a handler that raises → 400 "query_failed".',
        request=QuerySerializer,
        responses=action_responses(QueryResultSerializer),
    )
)
class WorkflowQueryView(WorkflowActionView):
    """``workflows/<id>/query/``."""

    body = QuerySerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        name = data["name"]
        try:
            result = client.query(workflow_id, name, *data["args"])
        except UnknownQuery as exc:  # the client's "no such handler": a field error
            raise exceptions.ValidationError({"name": [str(exc)]}) from None
        except (WeftError, DatabaseError):
            raise
        except Exception as exc:
            raise self._failed(name, exc) from None
        body = {"workflow_id": workflow_id, "name": name, "result": result}
        return Response(QueryResultSerializer(body).data)

    @staticmethod
    def _failed(name: str, exc: Exception) -> QueryFailed:
        # User code raised: the caller's arguments or the workflow's handler. Logged,
        # since it may be a bug in the handler, and answered without a traceback.
        logger.warning("weft API query %r failed", name, exc_info=exc)
        return QueryFailed(f"Query {name!r} raised {type(exc).__name__}: {exc}"[:1000])


__all__ = [
    "WorkflowCancelView",
    "WorkflowForkView",
    "WorkflowPurgeView",
    "WorkflowQueryView",
    "WorkflowResetView",
    "WorkflowResumeView",
    "WorkflowRetryView",
    "WorkflowSignalView",
    "WorkflowSuspendView",
]
