"""``POST workflows/<id>/update/``: a validated request to a running workflow.

One call of ``client.update``: the validator runs in this process (a
rejection is 422 ``update_rejected`` and writes nothing), an unknown handler
is 404 ``unknown_update``, and the request waits (up to ``timeout`` seconds,
bounded by ``MAX_TIMEOUT_S``) for the owner to record the answer -- 504
``workflow_timeout`` after that, the update staying accepted, so a retry
with the same ``update_id`` gets the same answer. A handler that raised is
400 ``update_failed`` (the recorded error's type and message).

Not atomic under ``ATOMIC_REQUESTS``: the request waits for another process
to commit, which it could never see from inside its own open transaction.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings as django_settings
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.api.schema import WORKFLOW_TAG, action_responses, error
from weft_django.api.serializers.fields import JSONArgsField, JSONPayloadField, StrictCharField
from weft_django.client.updates import update
from weft_django.engine.replay.errors_codec import RecordedError

from .base import WorkflowActionView

logger = logging.getLogger("weft_django.api")

MAX_TIMEOUT_S = 60.0
"""The longest a request may wait for an answer (a worker thread is held)."""


class UpdateFailed(exceptions.APIException):
    """The update handler raised (its recorded error)."""

    status_code = 400
    default_code = "update_failed"
    default_detail = "The update handler raised."


class UpdateSerializer(serializers.Serializer):
    """The body: the handler's `name`, its `args`, an optional `update_id`."""

    name = StrictCharField(min_length=1, max_length=200, help_text="An on_update handler name.")
    args = JSONArgsField(
        what="update args",
        required=False,
        default=list,
        help_text="Positional arguments for the validator and the handler.",
    )
    update_id = StrictCharField(
        min_length=1,
        max_length=200,
        required=False,
        default=None,
        allow_null=True,
        help_text="Applied once per id: a repeat returns the recorded answer (default: new).",
    )
    timeout = serializers.FloatField(
        min_value=0,
        max_value=MAX_TIMEOUT_S,
        required=False,
        default=30.0,
        help_text=f"Seconds to wait for the answer (at most {MAX_TIMEOUT_S:g}).",
    )


class UpdateResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    name = serializers.CharField()
    result = JSONPayloadField(what="update result", allow_null=True)


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_update",
        tags=WORKFLOW_TAG,
        summary="Send an update and wait for its answer",
        description="Runs the validator (read-only; raising → 422 update_rejected, nothing "
        "written), then waits while the owning engine runs the on_update handler in its turn "
        "and records its answer. The same update_id is applied once. No such handler → 404 "
        "unknown_update; the run ended → 409 invalid_transition; no answer within timeout → "
        '504 workflow_timeout (still accepted); the handler raised → 400 "update_failed".',
        request=UpdateSerializer,
        responses={
            **action_responses(UpdateResultSerializer),
            422: error("The validator rejected the update (code update_rejected)."),
            504: error("No answer within the timeout (code workflow_timeout)."),
        },
    )
)
class WorkflowUpdateView(WorkflowActionView):
    """``workflows/<id>/update/``."""

    body = UpdateSerializer

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        view = super().as_view(**initkwargs)
        # Never wrapped in ATOMIC_REQUESTS' transaction (see the module docstring).
        view._non_atomic_requests = set(django_settings.DATABASES)
        return view

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        name = data["name"]
        try:
            result = update(
                workflow_id,
                name,
                *data["args"],
                update_id=data.get("update_id"),
                timeout=data["timeout"],
            )
        except RecordedError as exc:
            raise UpdateFailed(f"Update {name!r} raised {exc}"[:1000]) from None
        body = {"workflow_id": workflow_id, "name": name, "result": result}
        return Response(UpdateResultSerializer(body).data)


__all__ = ["MAX_TIMEOUT_S", "UpdateFailed", "UpdateSerializer", "WorkflowUpdateView"]
