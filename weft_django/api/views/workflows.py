"""``workflows/``, ``workflows/<id>/`` and ``workflows/<id>/history/``: list, start, read."""

from __future__ import annotations

import contextlib

from django.db.models import prefetch_related_objects
from django.urls import NoReverseMatch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from weft_django import client
from weft_django.api.schema import (
    ERR_400,
    ERR_404,
    ERR_409,
    ERR_413,
    ERR_AUTH,
    ERR_PAGE,
    RUN_ID_PARAM,
    WORKFLOW_TAG,
)
from weft_django.api.serializers import (
    JournalEntrySerializer,
    RunParams,
    StartWorkflowSerializer,
    WorkflowDetailSerializer,
    WorkflowListParams,
    WorkflowSummarySerializer,
)
from weft_django.errors import WeftError
from weft_django.models import RUN_STATUSES, JournalEntry, WorkflowRun

from .base import (
    WeftAPIView,
    bad_arguments,
    db,
    detail_response,
    get_run,
    query,
    run_filter_of,
    validated,
)


class WorkflowListView(WeftAPIView):
    """``workflows/``: list runs, start a run."""

    @extend_schema(
        operation_id="weft_workflows_list",
        tags=WORKFLOW_TAG,
        summary="List workflow runs",
        description="Every run, newest first (older runs of a workflow id included); "
        "runs created at the same instant are ordered by run id, so pages are stable. "
        "Every filter narrows the list (AND); a repeated parameter means any of its values. "
        "`attr` filters on the search attributes a workflow sets with "
        "`ctx.upsert_search_attributes` (declared in `WEFT['SEARCH_ATTRIBUTES']`): "
        "`attr=customer=acme`, or `attr=amount>=100` (and `>`, `<`, `<=`) for int, float and "
        "datetime attributes. An unknown parameter value, an undeclared attribute or a value "
        "of the wrong type is a 400 naming it (code `invalid`, `errors` by parameter). "
        "Datetimes are ISO 8601; one without an offset is read in the server's time zone; "
        "every time bound is strict. "
        "`updated_after` / `updated_before` list the runs changed in a window: every "
        "state change of a run (start, park, wake, signal, end, cancel, suspend, "
        "resume, retry, timeout) moves its `updated_at`.",
        parameters=[
            OpenApiParameter(
                "status",
                OpenApiTypes.STR,
                enum=list(RUN_STATUSES),
                many=True,
                explode=True,
                description="Run status; repeat it (or separate values with commas) for any "
                "of several.",
            ),
            OpenApiParameter(
                "name",
                OpenApiTypes.STR,
                many=True,
                explode=True,
                description="Workflow type name (repeatable).",
            ),
            OpenApiParameter(
                "workflow",
                OpenApiTypes.STR,
                many=True,
                explode=True,
                description="Workflow type name, as `name` (repeatable).",
            ),
            OpenApiParameter(
                "workflow_id",
                OpenApiTypes.STR,
                many=True,
                explode=True,
                description="Exact workflow id (repeatable).",
            ),
            OpenApiParameter(
                "parent", OpenApiTypes.STR, description="Only children of this workflow id."
            ),
            OpenApiParameter(
                "attr",
                OpenApiTypes.STR,
                many=True,
                explode=True,
                description="A search attribute condition, `NAME=VALUE` (or `NAME>=VALUE`, "
                "`>`, `<`, `<=` for int, float and datetime attributes); repeatable: all must "
                "hold.",
            ),
            OpenApiParameter(
                "created_after",
                OpenApiTypes.DATETIME,
                description="Only runs created strictly after this ISO 8601 datetime.",
            ),
            OpenApiParameter(
                "created_before",
                OpenApiTypes.DATETIME,
                description="Only runs created strictly before this ISO 8601 datetime; with "
                "`created_after`, it must be the later of the two.",
            ),
            OpenApiParameter(
                "finished_after",
                OpenApiTypes.DATETIME,
                description="Only runs that finished strictly after this ISO 8601 datetime.",
            ),
            OpenApiParameter(
                "finished_before",
                OpenApiTypes.DATETIME,
                description="Only runs that finished strictly before this ISO 8601 datetime; "
                "with `finished_after`, it must be the later of the two.",
            ),
            OpenApiParameter(
                "updated_after",
                OpenApiTypes.DATETIME,
                description="Only runs whose `updated_at` is strictly later than this ISO 8601 "
                "datetime (a value without an offset is read in the server's time zone). "
                "A value that is not a datetime is a 400.",
            ),
            OpenApiParameter(
                "updated_before",
                OpenApiTypes.DATETIME,
                description="Only runs whose `updated_at` is strictly earlier than this ISO "
                "8601 datetime; with `updated_after`, it must be the later of the two.",
            ),
        ],
        responses={
            200: WorkflowSummarySerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_PAGE,
        },
    )
    def get(self, request: Request) -> Response:
        params = query(WorkflowListParams, request)
        runs = run_filter_of(request).queryset(db()).order_by("-created_at", "-pk")
        filters = {}
        if params.get("updated_after") is not None:
            filters["updated_at__gt"] = params["updated_after"]
        if params.get("updated_before") is not None:
            filters["updated_at__lt"] = params["updated_before"]
        rows = self.paginate_queryset(runs.filter(**filters))
        prefetch_related_objects(rows, "search_attributes")  # one query for the page
        return self.get_paginated_response(WorkflowSummarySerializer(rows, many=True).data)

    @extend_schema(
        operation_id="weft_workflows_start",
        tags=WORKFLOW_TAG,
        summary="Start a workflow run",
        description="Writes the run as pending; an engine picks it up. 201 for a new run, "
        "200 when idempotency_key names an existing run (returned as it is now).",
        request=StartWorkflowSerializer,
        examples=[
            OpenApiExample(
                "Start an order",
                value={
                    "name": "order",
                    "input": {"order_id": 1042, "amount": 500, "customer": "acme"},
                    "workflow_id": "order-1042",
                    "idempotency_key": "checkout-7f3a9c",
                },
                request_only=True,
            ),
            OpenApiExample(
                "Start in an hour",
                value={"name": "reminder", "input": {"user": 17}, "start_after": 3600},
                request_only=True,
            ),
        ],
        responses={
            201: WorkflowDetailSerializer,
            200: WorkflowDetailSerializer,
            400: ERR_400,
            **ERR_AUTH,
            409: ERR_409,
            413: ERR_413,
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(StartWorkflowSerializer, request.data)
        key = data.get("idempotency_key")
        existing = None
        if key is not None:
            existing = (
                WorkflowRun.objects.using(db())
                .filter(idempotency_key=key)
                .values_list("pk", flat=True)
                .first()
            )
        elif data["on_conflict"] == "use-existing" and data.get("workflow_id") is not None:
            existing = (  # a live run returned as it is: 200, not 201
                WorkflowRun.objects.using(db())
                .filter(workflow_id=data["workflow_id"])
                .order_by("-created_at")
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
                queue=data.get("queue"),
                priority=data.get("priority", 0),
                concurrency_key=data.get("concurrency_key"),
                fairness_key=data.get("fairness_key"),
                fairness_weight=data.get("fairness_weight"),
            )
        except WeftError:
            raise
        except (TypeError, ValueError) as exc:
            raise bad_arguments(exc) from None
        run = get_run(handle.workflow_id, handle.run_id)
        created = existing is None or str(existing) != handle.run_id
        headers = {}
        namespace = request.resolver_match.namespace if request.resolver_match else ""
        with contextlib.suppress(NoReverseMatch):  # included without the named routes
            headers["Location"] = reverse(
                f"{namespace}:workflow-detail" if namespace else "workflow-detail",
                kwargs={"workflow_id": run.workflow_id},
                request=request,
            )
        return detail_response(run, status=201 if created else 200, headers=headers)


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
        responses={200: WorkflowDetailSerializer, 400: ERR_400, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        params = query(RunParams, request)
        return detail_response(get_run(workflow_id, params.get("run_id")))


class WorkflowHistoryView(WeftAPIView):
    """``workflows/<id>/history/``: the journal, by position."""

    @extend_schema(
        operation_id="weft_workflows_history",
        tags=WORKFLOW_TAG,
        summary="A run's journal",
        description="The recorded events of the latest run (or ?run_id=), by position.",
        parameters=[RUN_ID_PARAM],
        responses={
            200: JournalEntrySerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_404,
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        params = query(RunParams, request)
        run = get_run(workflow_id, params.get("run_id"))
        entries = JournalEntry.objects.using(db()).filter(run_id=run.pk).order_by("position")
        return self.page(entries, JournalEntrySerializer)


__all__ = ["WorkflowDetailView", "WorkflowHistoryView", "WorkflowListView"]
