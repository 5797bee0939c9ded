"""What every weft API view shares: JSON only, weft's permissions and errors,
pagination, body validation, the run lookup, and the action base class.

Why the views are thin: every state change goes through
``weft_django.client`` (and its ``external`` transitions), which
checks the run's status, writes through the fenced conditional batch and
sends wakes on commit. A view never writes a model; it validates the body
(``serializers``), calls the client, and serialises what it reads back.
Reads go through the models' querysets and ``weft_django.inspection``, so
the API judges "alive", "expired" and "due" exactly as the admin,
``weft_status`` and ``/metrics`` do.

Errors are never handled one by one: the client raises ``WeftError``
subclasses carrying their HTTP status, and ``exceptions`` turns those (and
DRF's own) into JSON with a ``code``. The only translation done here is of
the client's plain ``ValueError``/``TypeError`` (bad arguments, already
prevented by the serializers: a backstop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from rest_framework import exceptions, serializers
from rest_framework.generics import GenericAPIView
from rest_framework.metadata import SimpleMetadata
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.exceptions import weft_exception_handler
from weft_django.api.openapi import WeftAutoSchema
from weft_django.api.pagination import WeftPagination, query_params
from weft_django.api.parsers import WeftJSONParser, WeftJSONRenderer
from weft_django.api.permissions import api_permissions
from weft_django.api.serializers import WorkflowDetailSerializer
from weft_django.conf import get_settings
from weft_django.engine.runs.filters import PARAM_KEYS, RunFilter
from weft_django.engine.runs.waits import run_waits, waits_summary
from weft_django.errors import InvalidRunFilter, WeftError, WorkflowNotFound
from weft_django.inspection import payload_view
from weft_django.inspection.attempts import latest_attempts
from weft_django.models import ActivityHeartbeat, AsyncActivity, AsyncStatus, WorkflowRun


def db() -> str:
    """The alias every weft query uses (``WEFT["DATABASE"]``)."""
    return get_settings().database


def actor(request: Request) -> str:
    """Who did it, as recorded in ``ClaimEvent.engine_id`` (200 characters max)."""
    user = getattr(request, "user", None)
    name = user.get_username() if user is not None and user.is_authenticated else ""
    return (f"api:{name}" if name else "api")[:200]


def validated(serializer_cls: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_cls(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def query(serializer_cls: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The query parameters, validated by ``serializer_cls``."""
    return validated(serializer_cls, query_params(request))


def filter_error(error: InvalidRunFilter, within: str | None = None) -> exceptions.ValidationError:
    """A refused run filter as the API's 400: code ``invalid``, the message under
    its parameter (nested under ``within`` for a body's ``filter``)."""
    errors: dict[str, Any] = {error.key: [str(error)]}
    return exceptions.ValidationError({within: errors} if within else errors)


def run_filter_of(request: Request) -> RunFilter:
    """The run filter of a list's query string (repeated parameters kept; an
    empty value means "not given", as for every parameter of the API)."""
    params: dict[str, list[str]] = {}
    for key in PARAM_KEYS:
        values = [v for v in request.query_params.getlist(key) if v != ""]
        if values:
            params[key] = values
    try:
        return RunFilter.from_params(params)
    except InvalidRunFilter as error:
        raise filter_error(error) from None


def bad_arguments(exc: Exception) -> exceptions.ValidationError:
    """The client refused an argument the serializer let through (a backstop)."""
    return exceptions.ValidationError({"non_field_errors": [str(exc)]})


def get_run(workflow_id: str, run_id: Any = None) -> WorkflowRun:
    """The latest run of ``workflow_id`` (``latest_for``), or its run ``run_id``."""
    runs = WorkflowRun.objects.using(db()).select_related("parent")
    run = (
        runs.latest_for(workflow_id)
        if run_id is None
        else runs.filter(workflow_id=workflow_id, pk=run_id).first()
    )
    if run is not None:
        return run
    if run_id is None or not runs.filter(workflow_id=workflow_id).exists():
        raise WorkflowNotFound(workflow_id)
    raise exceptions.NotFound(
        f'Workflow "{workflow_id}" has no run {run_id}.', code="run_not_found"
    )


def detail_response(run: WorkflowRun, status: int = 200, **kwargs: Any) -> Response:
    """The run as ``WorkflowDetailSerializer`` shows it.

    Sets on the instance what is not a column of the run: the claim's epoch
    and owner (``client.ownership_status``, the client's one reading of a
    claim) and the pending async activities, by position; prefetches the
    activities' latest heartbeats, by position, and reads the last attempts
    (only detail views pay for them: lists never read them).
    """
    ownership = client.ownership_status(run.workflow_id)
    waits = run_waits(run)
    holder = ownership["holder"]
    pending = list(
        AsyncActivity.objects.using(db())
        .filter(run_id=run.pk, status=AsyncStatus.PENDING)
        .order_by("position")
    )
    # ``run.heartbeats`` is the reverse relation: prefetched, so the serializer
    # reads it from the cache (one query, by position).
    heartbeats = ActivityHeartbeat.objects.using(db()).order_by("position")
    prefetch_related_objects([run], Prefetch("heartbeats", queryset=heartbeats))
    attempts, attempts_total = latest_attempts(run.pk, db())
    extra = {
        "epoch": ownership["epoch"],
        "owner": {**holder, "expired": ownership["expired"]} if holder is not None else None,
        "pending_async_activities": pending,
        "pending_async_token": pending[0] if pending else None,
        "waiting_reason": waits_summary(waits),
        "waits": [w.as_dict() for w in waits],
        "attempt_history": attempts,
        "attempts_total": attempts_total,
    }
    for name, value in extra.items():
        setattr(run, name, value)
    return Response(WorkflowDetailSerializer(run).data, status=status, **kwargs)


class ViewMetadata(SimpleMetadata):
    """``OPTIONS``: the view's name, description, renderers and parsers, no form.

    DRF describes a ``GenericAPIView``'s POST body from ``get_serializer()``;
    weft's views pick their serializers per method, so ``OPTIONS`` answers as
    for a plain ``APIView`` (the OpenAPI schema documents every body).
    """

    def determine_actions(self, request: Any, view: Any) -> dict[str, Any]:
        return {}


class WeftAPIView(GenericAPIView):
    """JSON only, weft's permission classes, weft's exception handler, pagination.

    ``GenericAPIView`` for its ``paginate_queryset`` / ``get_paginated_response``;
    no filter backends (each list validates its own query parameters).
    """

    parser_classes: ClassVar[list[type]] = [WeftJSONParser]
    renderer_classes: ClassVar[list[type]] = [WeftJSONRenderer]
    pagination_class: ClassVar[type[WeftPagination]] = WeftPagination
    filter_backends: ClassVar[list[type]] = []
    metadata_class = ViewMetadata
    schema = WeftAutoSchema()

    def get_permissions(self) -> list[BasePermission]:
        return api_permissions()

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        token = payload_view.allow(False)  # until the user is known (``initial``)
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            payload_view.reset(token)

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        payload_view.allow(payload_view.may_view_payloads(request.user))  # weft.view_payload

    def get_exception_handler(self) -> Callable[..., Response]:
        return weft_exception_handler

    def page(
        self, queryset: QuerySet[Any], serializer_cls: type[serializers.BaseSerializer]
    ) -> Response:
        """One page of ``queryset`` in the paginator's envelope."""
        rows = self.paginate_queryset(queryset)
        return self.get_paginated_response(serializer_cls(rows, many=True).data)


class WorkflowActionView(WeftAPIView):
    """``POST workflows/<id>/<action>/``: validate the body, call the client, answer.

    A subclass names its body serializer (``body``, or ``None`` for no body)
    and implements ``act``; the OpenAPI description sits on the subclass
    (``extend_schema_view(post=...)``).
    """

    body: ClassVar[type[serializers.Serializer] | None] = None

    def post(self, request: Request, workflow_id: str) -> Response:
        data = validated(self.body, request.data) if self.body is not None else {}
        try:
            return self.act(request, workflow_id, data)
        except WeftError:
            raise
        except (TypeError, ValueError) as exc:
            raise bad_arguments(exc) from None

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        raise NotImplementedError


__all__ = [
    "WeftAPIView",
    "WorkflowActionView",
    "actor",
    "bad_arguments",
    "db",
    "detail_response",
    "filter_error",
    "get_run",
    "query",
    "run_filter_of",
    "validated",
]
