"""``POST bulk/cancel/``, ``bulk/resume/``, ``bulk/retry/``: act by filter.

Each is one call to ``client.cancel_many`` / ``resume_many`` / ``retry_many``
(``engine.operations.bulk``): the runs change in fenced chunks, so a request
cut short leaves each run done or untouched and the same request again
finishes the rest. The filter is the list's, as a JSON object; an empty one
needs ``"all": true``. The same permissions as the per-run actions.

They live under ``bulk/``, outside ``workflows/<id>/``: any path there may be
a workflow id (``cancel-many`` is a valid one), so a bulk route there would
hide a workflow.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django import client
from weft_django.api.schema import ERR_400, ERR_AUTH, WORKFLOW_TAG
from weft_django.api.serializers import (
    BulkActionSerializer,
    BulkResultSerializer,
    filter_params,
)
from weft_django.engine.runs.filters import RunFilter
from weft_django.errors import InvalidRunFilter

from .base import WeftAPIView, actor, filter_error, validated

_WHAT = {
    "cancel": "Cancel every live run the filter matches, with its live descendants (each "
    "claim rotated, as a single cancel does; a workflow with a cancel grace gets the "
    "graceful request). Runs already ended, or already asked to cancel, are skipped.",
    "resume": "Resume every suspended run the filter matches; others are skipped.",
    "retry": "Retry every failed or timed-out run the filter matches that is still its "
    "workflow id's latest run; others are skipped.",
}
_HOW = (
    " Runs change in chunks of 200, each one fenced batch: an interrupted request leaves "
    "each run done or untouched, and the same request again finishes the rest (nothing "
    "changes twice). `dry_run`: the counts, nothing changed. An empty filter would match "
    'every run: it needs `"all": true` (else a 400 naming `all`). A bad filter is a 400 '
    "naming the value under `filter`."
)


class _BulkView(WeftAPIView):
    action: ClassVar[str] = ""

    def post(self, request: Request) -> Response:
        data = validated(BulkActionSerializer, request.data)
        try:
            run_filter = RunFilter.from_params(filter_params(data.get("filter") or {}))
            result = getattr(client, f"{self.action}_many")(
                run_filter,
                dry_run=data["dry_run"],
                allow_all=data["all"],
                reason=data["reason"],
                actor=actor(request),
            )
        except InvalidRunFilter as error:
            raise filter_error(error, None if error.key == "all" else "filter") from None
        return Response(BulkResultSerializer(result.as_dict()).data)


def _schema(action: str) -> Any:
    return extend_schema(
        operation_id=f"weft_workflows_{action}_many",
        tags=WORKFLOW_TAG,
        summary=f"{action.capitalize()} runs by filter",
        description=_WHAT[action] + _HOW,
        request=BulkActionSerializer,
        responses={200: BulkResultSerializer, 400: ERR_400, **ERR_AUTH},
    )


class WorkflowCancelManyView(_BulkView):
    """``bulk/cancel/``."""

    action = "cancel"

    @_schema("cancel")
    def post(self, request: Request) -> Response:
        return super().post(request)


class WorkflowResumeManyView(_BulkView):
    """``bulk/resume/``."""

    action = "resume"

    @_schema("resume")
    def post(self, request: Request) -> Response:
        return super().post(request)


class WorkflowRetryManyView(_BulkView):
    """``bulk/retry/``."""

    action = "retry"

    @_schema("retry")
    def post(self, request: Request) -> Response:
        return super().post(request)


__all__ = ["WorkflowCancelManyView", "WorkflowResumeManyView", "WorkflowRetryManyView"]
