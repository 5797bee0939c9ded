"""``workflows/<id>/ownership/``, ``workflows/<id>/claim-events/``, ``claims/``, ``engines/``.

Every judgement here ("expired", "alive", claims held) is the querysets':
the same the admin, ``weft_status`` and ``/metrics`` apply.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.schema import ERR_400, ERR_404, ERR_AUTH, ERR_PAGE, OWNERSHIP_TAG
from weft_django.api.serializers import (
    ClaimEventSerializer,
    ClaimListParams,
    ClaimSerializer,
    EngineSerializer,
    OwnershipSerializer,
)
from weft_django.errors import WorkflowNotFound
from weft_django.inspection import takeover_grace_ms
from weft_django.kernel.clock import now_ms
from weft_django.models import ClaimEvent, EngineRecord, WorkflowClaim, WorkflowRun

from .base import WeftAPIView, db, query


class WorkflowOwnershipView(WeftAPIView):
    """``workflows/<id>/ownership/``."""

    @extend_schema(
        operation_id="weft_workflows_ownership",
        tags=OWNERSHIP_TAG,
        summary="Who owns a workflow",
        description="client.ownership_status(id): the claim's epoch and holder.",
        responses={200: OwnershipSerializer, **ERR_AUTH, 404: ERR_404},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        return Response(OwnershipSerializer(client.ownership_status(workflow_id)).data)


class WorkflowClaimEventsView(WeftAPIView):
    """``workflows/<id>/claim-events/``."""

    @extend_schema(
        operation_id="weft_workflows_claim_events",
        tags=OWNERSHIP_TAG,
        summary="A workflow's claim timeline",
        description="Every claim transition (acquire, takeover, release, rotate, "
        "force_release) of the workflow id, oldest first.",
        responses={
            200: ClaimEventSerializer(many=True),
            400: ERR_400,
            **ERR_AUTH,
            404: ERR_404,
        },
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        alias = db()
        if (
            not WorkflowRun.objects.using(alias).filter(workflow_id=workflow_id).exists()
            and not WorkflowClaim.objects.using(alias).filter(pk=workflow_id).exists()
        ):
            raise WorkflowNotFound(workflow_id)
        events = ClaimEvent.objects.using(alias).filter(workflow_id=workflow_id).order_by("id")
        return self.page(events, ClaimEventSerializer)


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
        responses={200: ClaimSerializer(many=True), 400: ERR_400, **ERR_AUTH, 404: ERR_PAGE},
    )
    def get(self, request: Request) -> Response:
        params = query(ClaimListParams, request)
        now, grace = now_ms(), takeover_grace_ms()
        claims = WorkflowClaim.objects.using(db()).with_state(now, grace).order_by("workflow_id")
        if params.get("engine") is not None:
            claims = claims.held_by(params["engine"])
        if params.get("expired") is True:
            claims = claims.expired(now, grace)
        elif params.get("expired") is False:
            claims = claims.live(now, grace)
        return self.page(claims, ClaimSerializer)


class EngineListView(WeftAPIView):
    """``engines/``: one row per engine boot, newest first."""

    @extend_schema(
        operation_id="weft_engines_list",
        tags=OWNERSHIP_TAG,
        summary="Engines",
        description="Every engine boot, newest first, with its counters and claims held.",
        responses={200: EngineSerializer(many=True), 400: ERR_400, **ERR_AUTH, 404: ERR_PAGE},
    )
    def get(self, request: Request) -> Response:
        engines = (
            EngineRecord.objects.using(db())
            .with_liveness(now_ms())
            .with_claims_held()
            .order_by("-started_at", "engine_id")
        )
        return self.page(engines, EngineSerializer)


__all__ = ["ClaimListView", "EngineListView", "WorkflowClaimEventsView", "WorkflowOwnershipView"]
