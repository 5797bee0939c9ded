"""``metrics/``: the cluster's claim counters as JSON (``inspection.cluster_counters``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.api.schema import ERR_AUTH, OWNERSHIP_TAG
from weft_django.api.serializers import MetricsSerializer
from weft_django.inspection import cluster_counters

from .base import WeftAPIView, db


class MetricsView(WeftAPIView):
    """``metrics/``: the cluster's claim counters as JSON."""

    @extend_schema(
        operation_id="weft_metrics",
        tags=OWNERSHIP_TAG,
        summary="Cluster claim counters",
        description="Every engine's EngineRecord.metrics (live and past) summed, the "
        "active-claims gauge of engines not stopped, and counts of engines, claims, runs by "
        "status and due timers.",
        responses={200: MetricsSerializer, **ERR_AUTH},
    )
    def get(self, request: Request) -> Response:
        return Response(MetricsSerializer(cluster_counters(using=db())).data)


__all__ = ["MetricsView"]
