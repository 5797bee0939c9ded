"""Views of the weft REST API (SPEC §5).

Why the views are thin: every state change goes through
``weft_django.engine.client`` (and its ``external`` transitions), which
checks the run's status, writes through the fenced conditional batch and
sends wakes on commit. A view never writes a model; it validates the body
(``serializers``), calls the client, and serialises what it reads back.
Reads (lists, journal, claims, engines) query the models directly, since
the client has no paginated listings.

Errors are never handled here one by one: the client raises ``WeftError``
subclasses carrying their HTTP status, and ``exceptions`` turns those (and
DRF's own) into JSON with a ``code``. The only translations done here are
of the client's plain ``ValueError``/``TypeError`` (bad arguments, already
prevented by the serializers: a backstop) and of a query handler's failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from django.db import DatabaseError
from django.db.models import Count, IntegerField, Min, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpRequest, JsonResponse
from django.urls import NoReverseMatch, Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from weft_django.api import serializers as s
from weft_django.api.exceptions import QueryFailed, weft_exception_handler
from weft_django.api.pagination import WeftPagination, query_params
from weft_django.api.parsers import WeftJSONParser, WeftJSONRenderer
from weft_django.api.permissions import api_permissions
from weft_django.conf import get_settings
from weft_django.engine import client, external
from weft_django.errors import WeftError, WorkflowNotFound
from weft_django.models import (
    RUN_STATUSES,
    AsyncActivity,
    ClaimEvent,
    EngineRecord,
    JournalEntry,
    Timer,
    WorkflowClaim,
    WorkflowRun,
)
from weft_django.ownership import WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER
from weft_django.ownership.codec import decode_holder_row
from weft_django.ownership.metrics import ClaimMetricsSnapshot

logger = logging.getLogger("weft_django.api")
#: Django's own 4xx/5xx log line ("Conflict: /path") goes here; token paths are
#: logged on it redacted instead (see ``log_token_response``).
request_logger = logging.getLogger("django.request")

TOKEN_HASH_PREFIX_LEN = 12

# --------------------------------------------------------------------------
# Shared plumbing


def _db() -> str:
    return get_settings().database


def _actor(request: Request) -> str:
    """Who did it, as recorded in ``ClaimEvent.engine_id`` (200 characters max)."""
    user = getattr(request, "user", None)
    name = user.get_username() if user is not None and user.is_authenticated else ""
    return (f"api:{name}" if name else "api")[:200]


def _expired_cutoff_ms() -> int:
    """A holder whose ``expires_at`` is below this is expired (as ``ownership_status``)."""
    grace = WORKFLOW_CLAIM_TAKEOVER_GRACE_MULTIPLIER * get_settings().claim_renew_interval_ms
    return external.wall_ms() - grace


def _validated(serializer_cls: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_cls(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _body(serializer_cls: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    return _validated(serializer_cls, request.data)


def _params(serializer_cls: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    return _validated(serializer_cls, query_params(request))


def _bad_arguments(exc: Exception) -> exceptions.ValidationError:
    """The client refused an argument the serializer let through (a backstop)."""
    return exceptions.ValidationError({"non_field_errors": [str(exc)]})


def _run(workflow_id: str, run_id: Any = None) -> WorkflowRun:
    """The latest run of ``workflow_id``, or the run ``run_id`` of it."""
    if run_id is None:
        return external.latest_run(workflow_id, _db())
    run = WorkflowRun.objects.using(_db()).filter(workflow_id=workflow_id, pk=run_id).first()
    if run is None:
        if not WorkflowRun.objects.using(_db()).filter(workflow_id=workflow_id).exists():
            raise WorkflowNotFound(workflow_id)
        raise exceptions.NotFound(
            f'Workflow "{workflow_id}" has no run {run_id}.', code="run_not_found"
        )
    return run


def _summary(run: WorkflowRun) -> dict[str, Any]:
    return {
        "workflow_id": run.workflow_id,
        "run_id": run.pk,
        "name": run.name,
        "status": run.status,
        "idempotency_key": run.idempotency_key,
        "parent_run_id": run.parent_id,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _detail(run: WorkflowRun) -> dict[str, Any]:
    db = _db()
    ownership = client.ownership_status(run.workflow_id)
    holder = ownership["holder"]
    owner = {**holder, "expired": ownership["expired"]} if holder is not None else None
    pending = [
        {
            "token_hash_prefix": row.token_hash[:TOKEN_HASH_PREFIX_LEN],
            "target": row.target,
            "position": row.position,
            "created_at": row.created_at,
        }
        for row in AsyncActivity.objects.using(db)
        .filter(run_id=run.pk, status="pending")
        .order_by("position")
    ]
    parent_workflow_id = None
    if run.parent_id is not None:
        parent_workflow_id = (
            WorkflowRun.objects.using(db)
            .filter(pk=run.parent_id)
            .values_list("workflow_id", flat=True)
            .first()
        )
    return {
        **_summary(run),
        "input": run.input,
        "result": run.result,
        "error": run.error,
        "epoch": ownership["epoch"],
        "owner": owner,
        "parent_workflow_id": parent_workflow_id,
        "continued_from_run_id": run.continued_from_id,
        "start_at": run.start_at,
        "deadline_at": run.deadline_at,
        "wake_at": run.wake_at,
        "suspended_reason": run.suspended_reason,
        "pending_async_token": pending[0] if pending else None,
        "pending_async_activities": pending,
    }


def _detail_response(run: WorkflowRun, status: int = 200, **kwargs: Any) -> Response:
    return Response(s.WorkflowDetailSerializer(_detail(run)).data, status=status, **kwargs)


class WeftAPIView(APIView):
    """JSON only, weft's permission classes, weft's exception handler, pagination."""

    parser_classes: ClassVar[list[type]] = [WeftJSONParser]
    renderer_classes: ClassVar[list[type]] = [WeftJSONRenderer]
    pagination_class: ClassVar[type[WeftPagination]] = WeftPagination

    def get_permissions(self) -> list[BasePermission]:
        return api_permissions()

    def get_exception_handler(self) -> Callable[..., Response]:
        return weft_exception_handler

    def paginate(
        self,
        queryset: QuerySet[Any],
        build: Callable[[Any], dict[str, Any]],
        serializer_cls: type[serializers.Serializer],
    ) -> Response:
        paginator = self.pagination_class()
        page: Iterable[Any] = paginator.paginate_queryset(queryset, self.request, view=self)
        data = serializer_cls([build(item) for item in page], many=True).data
        return paginator.get_paginated_response(data)


# --------------------------------------------------------------------------
# OpenAPI helpers

WORKFLOW_TAG = ["workflows"]
OWNERSHIP_TAG = ["ownership"]
ASYNC_TAG = ["async-activities"]


def _error(description: str, serializer: Any = s.ErrorSerializer) -> OpenApiResponse:
    return OpenApiResponse(response=serializer, description=description)


ERR_400 = _error(
    'Bad body or query: code "invalid" with "errors" per field; "parse_error" for '
    'malformed JSON; "invalid_payload" for a payload over MAX_PAYLOAD_BYTES.',
    s.ValidationErrorSerializer,
)
ERR_AUTH = {
    401: _error("Not authenticated (code not_authenticated)."),
    403: _error("Not authenticated or not permitted by API_PERMISSION_CLASSES."),
}
ERR_404 = _error("No such workflow (code workflow_not_found) or run.")
ERR_PAGE = _error("A page past the last one (code not_found).")
ERR_409 = _error(
    "The action does not fit the run's status (code invalid_transition) or a live run "
    "already exists (workflow_already_running, idempotency_conflict)."
)
ERR_413 = _error("The request body is larger than the API reads (code request_too_large).")

RUN_ID_PARAM = OpenApiParameter(
    "run_id",
    OpenApiTypes.UUID,
    OpenApiParameter.QUERY,
    description="An older run of this workflow id (default: the latest run).",
)


def _actions_responses(ok: Any, status: int = 200) -> dict[int, Any]:
    return {status: ok, 400: ERR_400, **ERR_AUTH, 404: ERR_404, 409: ERR_409, 413: ERR_413}


# --------------------------------------------------------------------------
# Workflows


class WorkflowListView(WeftAPIView):
    """``workflows/``: list runs, start a run."""

    @extend_schema(
        operation_id="weft_workflows_list",
        tags=WORKFLOW_TAG,
        summary="List workflow runs",
        description="Every run, newest first (older runs of a workflow id included).",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=list(RUN_STATUSES)),
            OpenApiParameter("name", OpenApiTypes.STR, description="Workflow type name."),
            OpenApiParameter("workflow_id", OpenApiTypes.STR),
        ],
        responses={
            200: s.WorkflowSummarySerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_PAGE,
        },
    )
    def get(self, request: Request) -> Response:
        params = _params(s.WorkflowListParams, request)
        runs = WorkflowRun.objects.using(_db()).order_by("-created_at", "-pk")
        for key in ("status", "name", "workflow_id"):
            if params.get(key) is not None:
                runs = runs.filter(**{key: params[key]})
        return self.paginate(runs, _summary, s.WorkflowSummarySerializer)

    @extend_schema(
        operation_id="weft_workflows_start",
        tags=WORKFLOW_TAG,
        summary="Start a workflow run",
        description="Writes the run as pending; an engine picks it up. 201 for a new run, "
        "200 when idempotency_key names an existing run (returned as it is now).",
        request=s.StartWorkflowSerializer,
        responses={
            201: s.WorkflowDetailSerializer,
            200: s.WorkflowDetailSerializer,
            400: ERR_400,
            **ERR_AUTH,
            409: ERR_409,
            413: ERR_413,
        },
    )
    def post(self, request: Request) -> Response:
        data = _body(s.StartWorkflowSerializer, request)
        key = data.get("idempotency_key")
        existing = None
        if key is not None:
            existing = (
                WorkflowRun.objects.using(_db())
                .filter(idempotency_key=key)
                .values_list("pk", flat=True)
                .first()
            )
        try:
            handle = client.start(
                data["name"],
                data.get("input"),
                workflow_id=data.get("workflow_id"),
                idempotency_key=key,
                start_after=data.get("start_after"),
                start_at=data.get("start_at"),
                execution_timeout=data.get("execution_timeout"),
                on_conflict=data["on_conflict"],
            )
        except WeftError:
            raise
        except (TypeError, ValueError) as exc:
            raise _bad_arguments(exc) from None
        run = _run(handle.workflow_id, handle.run_id)
        created = existing is None or str(existing) != handle.run_id
        headers = {}
        namespace = request.resolver_match.namespace if request.resolver_match else ""
        with contextlib.suppress(NoReverseMatch):  # included without the named routes
            headers["Location"] = reverse(
                f"{namespace}:workflow-detail" if namespace else "workflow-detail",
                kwargs={"workflow_id": run.workflow_id},
                request=request,
            )
        return _detail_response(run, status=201 if created else 200, headers=headers)


class WorkflowDetailView(WeftAPIView):
    """``workflows/<id>/``."""

    @extend_schema(
        operation_id="weft_workflows_retrieve",
        tags=WORKFLOW_TAG,
        summary="A workflow's latest run",
        description="Status, result, error, epoch, owner, and the pending async activity. "
        "pending_async_token shows the SHA-256 prefix of the token and its target: tokens "
        "are stored hashed, so the raw token cannot be shown.",
        parameters=[RUN_ID_PARAM],
        responses={200: s.WorkflowDetailSerializer, 400: ERR_400, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        params = _params(s.RunParams, request)
        return _detail_response(_run(workflow_id, params.get("run_id")))


class WorkflowHistoryView(WeftAPIView):
    """``workflows/<id>/history/``: the journal, by position."""

    @extend_schema(
        operation_id="weft_workflows_history",
        tags=WORKFLOW_TAG,
        summary="A run's journal",
        description="The recorded events of the latest run (or ?run_id=), by position.",
        parameters=[RUN_ID_PARAM],
        responses={
            200: s.JournalEntrySerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_404,
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        params = _params(s.RunParams, request)
        run = _run(workflow_id, params.get("run_id"))
        entries = JournalEntry.objects.using(_db()).filter(run_id=run.pk).order_by("position")
        return self.paginate(
            entries,
            lambda e: {
                "position": e.position,
                "kind": e.kind,
                "command": e.command,
                "target": e.target,
                "result": e.result,
                "error": e.error,
                "engine_id": e.engine_id,
                "epoch": e.epoch,
                "at_ms": e.at_ms,
            },
            s.JournalEntrySerializer,
        )


class WorkflowSignalView(WeftAPIView):
    """``workflows/<id>/signal/``."""

    @extend_schema(
        operation_id="weft_workflows_signal",
        tags=WORKFLOW_TAG,
        summary="Send a signal",
        description="Buffered durably until the run consumes it (202). A terminal run → 409.",
        request=s.SignalSerializer,
        responses=_actions_responses(s.SignalAcceptedSerializer, status=202),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        data = _body(s.SignalSerializer, request)
        try:
            message = client.signal(workflow_id, data["name"], data.get("payload"))
        except WeftError:
            raise
        except (TypeError, ValueError) as exc:
            raise _bad_arguments(exc) from None
        body = {
            "workflow_id": workflow_id,
            "run_id": message.run_id,
            "signal_id": message.pk,
            "name": message.name,
        }
        return Response(s.SignalAcceptedSerializer(body).data, status=202)


class WorkflowCancelView(WeftAPIView):
    """``workflows/<id>/cancel/``."""

    @extend_schema(
        operation_id="weft_workflows_cancel",
        tags=WORKFLOW_TAG,
        summary="Cancel a run",
        description="Immediate (no workflow code runs); cascades to live children; rotates "
        "the claim's epoch. A terminal run → 409.",
        request=s.ReasonSerializer,
        responses=_actions_responses(s.WorkflowDetailSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        data = _body(s.ReasonSerializer, request)
        run = client.cancel(workflow_id, data.get("reason") or "", actor=_actor(request))
        return _detail_response(run)


class WorkflowSuspendView(WeftAPIView):
    """``workflows/<id>/suspend/``."""

    @extend_schema(
        operation_id="weft_workflows_suspend",
        tags=WORKFLOW_TAG,
        summary="Suspend a run",
        description="pending, running or parked → suspended; rotates the claim's epoch.",
        request=s.ReasonSerializer,
        responses=_actions_responses(s.WorkflowDetailSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        data = _body(s.ReasonSerializer, request)
        run = client.suspend(workflow_id, data.get("reason") or "", actor=_actor(request))
        return _detail_response(run)


class WorkflowResumeView(WeftAPIView):
    """``workflows/<id>/resume/``."""

    @extend_schema(
        operation_id="weft_workflows_resume",
        tags=WORKFLOW_TAG,
        summary="Resume a suspended run",
        description="suspended → pending; an engine picks it up with a new epoch.",
        request=None,
        responses=_actions_responses(s.WorkflowDetailSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        return _detail_response(client.resume(workflow_id))


class WorkflowRetryView(WeftAPIView):
    """``workflows/<id>/retry/``."""

    @extend_schema(
        operation_id="weft_workflows_retry",
        tags=WORKFLOW_TAG,
        summary="Retry a failed or timed-out run",
        description="The journal is kept: recorded steps do not run again; the failed step does.",
        request=None,
        responses=_actions_responses(s.WorkflowDetailSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        return _detail_response(client.retry(workflow_id))


class WorkflowPurgeView(WeftAPIView):
    """``workflows/<id>/purge/``."""

    @extend_schema(
        operation_id="weft_workflows_purge",
        tags=WORKFLOW_TAG,
        summary="Delete every terminal run of a workflow id",
        description="Only when the latest run is terminal (else 409). The claim row and its "
        "epoch stay, so a later run of the same id never reuses an epoch.",
        request=None,
        responses=_actions_responses(s.PurgeResultSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        purged = external.purge(workflow_id, actor=_actor(request))
        body = {"workflow_id": workflow_id, "purged_runs": purged}
        return Response(s.PurgeResultSerializer(body).data)


class WorkflowQueryView(WeftAPIView):
    """``workflows/<id>/query/``."""

    @extend_schema(
        operation_id="weft_workflows_query",
        tags=WORKFLOW_TAG,
        summary="Call a query handler",
        description="Replays the journal read-only in this process (nothing is written, no "
        "activity runs) and calls the on_query handler. An unknown handler → 400 with "
        'errors.name; a handler that raises → 400 "query_failed".',
        request=s.QuerySerializer,
        responses=_actions_responses(s.QueryResultSerializer),
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        data = _body(s.QuerySerializer, request)
        name = data["name"]
        try:
            result = client.query(workflow_id, name, *data["args"])
        except (WeftError, DatabaseError):
            raise
        except LookupError as exc:
            if type(exc) is LookupError:  # the client's "no such handler"
                raise exceptions.ValidationError({"name": [str(exc)]}) from None
            raise self._failed(name, exc) from None
        except Exception as exc:
            raise self._failed(name, exc) from None
        body = {"workflow_id": workflow_id, "name": name, "result": result}
        return Response(s.QueryResultSerializer(body).data)

    @staticmethod
    def _failed(name: str, exc: Exception) -> QueryFailed:
        # User code raised: the caller's arguments or the workflow's handler. Logged,
        # since it may be a bug in the handler, and answered without a traceback.
        logger.warning("weft API query %r failed", name, exc_info=exc)
        return QueryFailed(f"Query {name!r} raised {type(exc).__name__}: {exc}"[:1000])


class WorkflowOwnershipView(WeftAPIView):
    """``workflows/<id>/ownership/``."""

    @extend_schema(
        operation_id="weft_workflows_ownership",
        tags=OWNERSHIP_TAG,
        summary="Who owns a workflow",
        description="client.ownership_status(id): the claim's epoch and holder.",
        responses={200: s.OwnershipSerializer, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        return Response(s.OwnershipSerializer(client.ownership_status(workflow_id)).data)


class WorkflowClaimEventsView(WeftAPIView):
    """``workflows/<id>/claim-events/``."""

    @extend_schema(
        operation_id="weft_workflows_claim_events",
        tags=OWNERSHIP_TAG,
        summary="A workflow's claim timeline",
        description="Every claim transition (acquire, takeover, release, rotate, "
        "force_release) of the workflow id, oldest first.",
        responses={
            200: s.ClaimEventSerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_404,
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        db = _db()
        if (
            not WorkflowRun.objects.using(db).filter(workflow_id=workflow_id).exists()
            and not WorkflowClaim.objects.using(db).filter(pk=workflow_id).exists()
        ):
            raise WorkflowNotFound(workflow_id)
        events = ClaimEvent.objects.using(db).filter(workflow_id=workflow_id).order_by("id")
        return self.paginate(
            events,
            lambda e: {
                "id": e.pk,
                "workflow_id": e.workflow_id,
                "epoch": e.epoch,
                "engine_id": e.engine_id,
                "kind": e.kind,
                "at_ms": e.at_ms,
                "reason": e.reason,
                "previous_engine_id": e.previous_engine_id,
                "previous_expires_at": e.previous_expires_at,
            },
            s.ClaimEventSerializer,
        )


# --------------------------------------------------------------------------
# Claims, engines, metrics


def _claim_state(claim: WorkflowClaim, cutoff: int) -> str:
    record = decode_holder_row(claim.engine_id, claim.epoch, claim.expires_at, claim.claimed_at)
    if record is not None:
        return "expired" if record.expires_at < cutoff else "live"
    if claim.engine_id is not None or claim.expires_at is not None:
        return "expired"  # a half-null (corrupt) holder: eligible for takeover
    return "released"


def _expired_q(cutoff: int) -> Q:
    """Expired holders, and half-null (corrupt) ones, as ``_claim_state`` says."""
    stale = Q(expires_at__lt=cutoff) | Q(expires_at__isnull=True) | Q(claimed_at__isnull=True)
    corrupt = Q(engine_id__isnull=True, expires_at__isnull=False)
    return (Q(engine_id__isnull=False) & stale) | corrupt


def _live_q(cutoff: int) -> Q:
    return Q(engine_id__isnull=False, claimed_at__isnull=False, expires_at__gte=cutoff)


class ClaimListView(WeftAPIView):
    """``claims/``: every claim row (one per workflow id ever claimed)."""

    @extend_schema(
        operation_id="weft_claims_list",
        tags=OWNERSHIP_TAG,
        summary="Claims (holders)",
        description="?engine= keeps one engine's claims; ?expired=true only expired holders "
        "(past expires_at + takeover grace), ?expired=false only live ones.",
        parameters=[
            OpenApiParameter("engine", OpenApiTypes.STR, description="An engine id."),
            OpenApiParameter("expired", OpenApiTypes.BOOL),
        ],
        responses={200: s.ClaimSerializer(many=True), 400: ERR_400, **ERR_AUTH, 404: ERR_PAGE},
    )
    def get(self, request: Request) -> Response:
        params = _params(s.ClaimListParams, request)
        cutoff = _expired_cutoff_ms()
        now = external.wall_ms()
        claims = WorkflowClaim.objects.using(_db()).order_by("workflow_id")
        if params.get("engine") is not None:
            claims = claims.filter(engine_id=params["engine"])
        if params.get("expired") is True:
            claims = claims.filter(_expired_q(cutoff))
        elif params.get("expired") is False:
            claims = claims.filter(_live_q(cutoff))
        return self.paginate(
            claims,
            lambda c: {
                "workflow_id": c.workflow_id,
                "epoch": c.epoch,
                "engine_id": c.engine_id,
                "claimed_at": c.claimed_at,
                "expires_at": c.expires_at,
                "state": _claim_state(c, cutoff),
                "expires_in_ms": c.expires_at - now if c.expires_at is not None else None,
            },
            s.ClaimSerializer,
        )


def _claims_held() -> Subquery:
    return Subquery(
        WorkflowClaim.objects.filter(engine_id=OuterRef("engine_id"))
        .order_by()
        .values("engine_id")
        .annotate(n=Count("pk"))
        .values("n")[:1],
        output_field=IntegerField(),
    )


def _engine_alive(engine: EngineRecord, now: int) -> bool:
    return engine.stopped_at is None and now - engine.heartbeat_at <= get_settings().claim_ttl_ms


class EngineListView(WeftAPIView):
    """``engines/``: one row per engine boot, newest first."""

    @extend_schema(
        operation_id="weft_engines_list",
        tags=OWNERSHIP_TAG,
        summary="Engines",
        description="Every engine boot, newest first, with its counters and claims held.",
        responses={200: s.EngineSerializer(many=True), 400: ERR_400, **ERR_AUTH, 404: ERR_PAGE},
    )
    def get(self, request: Request) -> Response:
        now = external.wall_ms()
        engines = (
            EngineRecord.objects.using(_db())
            .annotate(claims_held=Coalesce(_claims_held(), Value(0)))
            .order_by("-started_at", "engine_id")
        )
        return self.paginate(
            engines,
            lambda e: {
                "engine_id": e.engine_id,
                "node_name": e.node_name,
                "host": e.host,
                "pid": e.pid,
                "mode": e.mode,
                "pool": e.pool,
                "transport": e.transport,
                "started_at": e.started_at,
                "heartbeat_at": e.heartbeat_at,
                "stopped_at": e.stopped_at,
                "alive": _engine_alive(e, now),
                "heartbeat_age_ms": now - e.heartbeat_at,
                "claims_held": e.claims_held,
                "metrics": ClaimMetricsSnapshot.from_json(e.metrics).to_json(),
            },
            s.EngineSerializer,
        )


class MetricsView(WeftAPIView):
    """``metrics/``: the cluster's claim counters as JSON."""

    @extend_schema(
        operation_id="weft_metrics",
        tags=OWNERSHIP_TAG,
        summary="Cluster claim counters",
        description="Every engine's EngineRecord.metrics (live and past) summed, the "
        "active-claims gauge of engines not stopped, and counts of engines, claims, runs by "
        "status and due timers.",
        responses={200: s.MetricsSerializer, **ERR_AUTH},
    )
    def get(self, request: Request) -> Response:
        db = _db()
        now = external.wall_ms()
        ttl = get_settings().claim_ttl_ms
        total = ClaimMetricsSnapshot()
        active = 0
        engines = alive = stopped = 0
        rows = EngineRecord.objects.using(db).values_list("metrics", "stopped_at", "heartbeat_at")
        for metrics, stopped_at, heartbeat_at in rows.iterator():
            snapshot = ClaimMetricsSnapshot.from_json(metrics)
            total = total + snapshot
            engines += 1
            if stopped_at is None:
                active += snapshot.active_claims
                alive += int(now - heartbeat_at <= ttl)
            else:
                stopped += 1
        body = total.to_json()
        body["active_claims"] = active
        cutoff = _expired_cutoff_ms()
        claims = WorkflowClaim.objects.using(db).aggregate(
            total=Count("pk"),
            held=Count("pk", filter=Q(engine_id__isnull=False)),
            expired=Count("pk", filter=_expired_q(cutoff)),
        )
        by_status = dict.fromkeys(RUN_STATUSES, 0)
        for status, n in (
            WorkflowRun.objects.using(db).order_by().values_list("status").annotate(n=Count("pk"))
        ):
            by_status[status] = n
        timers = (
            Timer.objects.using(db)
            .filter(fire_at__lte=now)
            .aggregate(n=Count("pk"), oldest=Min("fire_at"))
        )
        body.update(
            engines={"total": engines, "alive": alive, "stopped": stopped},
            claims=claims,
            runs_by_status=by_status,
            due_timers=timers["n"],
            oldest_due_timer_lag_ms=None if timers["oldest"] is None else now - timers["oldest"],
        )
        return Response(s.MetricsSerializer(body).data)


# --------------------------------------------------------------------------
# Async activities: the token is the credential

TOKEN_PARAM = OpenApiParameter(
    "token",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="The async activity's token, as handed to the activity. It alone "
    "authorises this call (no login); unknown → 404, already used → 409.",
    pattern=r"^[A-Za-z0-9._~-]{1,512}$",
)


_TOKEN_IN_PATH = re.compile(r"(async-activities/)([^/]+)")


def _redact_token_path(path: str) -> str:
    """``…/async-activities/<token sha256:1a2b3c4d5e6f>/complete/``: the raw token
    replaced by the prefix of its hash (the one the detail view shows staff)."""

    def redact(match: re.Match[str]) -> str:
        digest = hashlib.sha256(match.group(2).encode()).hexdigest()
        return f"{match.group(1)}<token sha256:{digest[:TOKEN_HASH_PREFIX_LEN]}>"

    return _TOKEN_IN_PATH.sub(redact, path)


def log_token_response(request: HttpRequest, response: Any) -> None:
    """Log a 4xx/5xx answer to a token path without the raw token in it.

    Why: the token is a bearer credential and sits in the URL (SPEC §5). For
    every response >= 400 Django logs ``"<reason>: <request.path>"`` on
    ``django.request``, with the request attached -- so a bad body (400) sent
    with a valid, still unused token would write that token into the logs (and
    into an ``AdminEmailHandler`` mail or an error tracker). This logs the same
    line with the token replaced by its hash prefix, without the request
    object, and marks the response as logged (``_has_been_logged``, the flag
    Django's ``log_response`` checks) so Django does not log it again.
    """
    if response.status_code < 400 or getattr(response, "_has_been_logged", False):
        return
    level = logging.ERROR if response.status_code >= 500 else logging.WARNING
    request_logger.log(
        level,
        "%s: %s",
        response.reason_phrase,
        _redact_token_path(request.path),
        extra={"status_code": response.status_code},
    )
    response._has_been_logged = True


class _AsyncTokenView(WeftAPIView):
    """No authentication, no permission classes: the token authorises itself."""

    authentication_classes: ClassVar[list[type]] = []

    def get_permissions(self) -> list[BasePermission]:
        return [AllowAny()]

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        log_token_response(request._request, response)
        return response


class AsyncActivityCompleteView(_AsyncTokenView):
    """``async-activities/<token>/complete/``."""

    @extend_schema(
        operation_id="weft_async_activities_complete",
        tags=ASYNC_TAG,
        summary="Complete an async activity",
        description="Records the result; the waiting run resumes. Single use. No login: "
        "the token alone authorises (tokens are stored hashed).",
        auth=[],
        parameters=[TOKEN_PARAM],
        request=s.CompleteAsyncSerializer,
        responses={
            200: s.AsyncSettledSerializer,
            400: ERR_400,
            404: _error("Unknown token (code async_activity_token, kind unknown)."),
            409: _error("Token already used (code async_activity_token, kind used)."),
            413: ERR_413,
        },
    )
    def post(self, request: Request, token: str) -> Response:
        data = _body(s.CompleteAsyncSerializer, request)
        client.complete_async_activity(token, data.get("result"))
        return Response(s.AsyncSettledSerializer({"status": "completed"}).data)


class AsyncActivityFailView(_AsyncTokenView):
    """``async-activities/<token>/fail/``."""

    @extend_schema(
        operation_id="weft_async_activities_fail",
        tags=ASYNC_TAG,
        summary="Fail an async activity",
        description="Records the failure: the workflow sees an ActivityError with this "
        "message and type. Single use. No login: the token alone authorises.",
        auth=[],
        parameters=[TOKEN_PARAM],
        request=s.FailAsyncSerializer,
        responses={
            200: s.AsyncSettledSerializer,
            400: ERR_400,
            404: _error("Unknown token (code async_activity_token, kind unknown)."),
            409: _error("Token already used (code async_activity_token, kind used)."),
            413: ERR_413,
        },
    )
    def post(self, request: Request, token: str) -> Response:
        data = _body(s.FailAsyncSerializer, request)
        client.fail_async_activity(token, data["error"])
        return Response(s.AsyncSettledSerializer({"status": "failed"}).data)


# --------------------------------------------------------------------------
# Anything else under the API prefix


@csrf_exempt
def not_found(request: HttpRequest) -> JsonResponse:
    """JSON 404 for a path no route matches (a plain view: not in the schema).

    Reached for ids outside the workflow id grammar, unknown endpoints and a
    missing trailing slash (the catch-all resolves, so ``APPEND_SLASH`` does
    not redirect; the message says what to add instead).
    """
    message = f"No weft API endpoint at {request.path!r}."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path_info + "/", getattr(request, "urlconf", None))
        except Resolver404:
            match = None
        if match is not None and match.url_name != "not-found":
            message += f" Did you mean {request.path + '/'!r}? (Paths end with a slash.)"
    response = JsonResponse({"code": "not_found", "message": message}, status=404)
    if _TOKEN_IN_PATH.search(request.path):
        # ``…/<token>/complete`` without its slash lands here: keep a valid token
        # out of the log (the caller, who sent it, still sees the path).
        log_token_response(request, response)
    return response
