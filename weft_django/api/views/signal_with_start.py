"""``POST workflows/<id>/signal-with-start/``: start unless live, signal either way.

One call of ``client.signal_with_start`` (one conditional batch per attempt,
so two racing requests make one run holding both signals); 201 when this
request started the run, 202 when it signalled the live one.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from weft_django.api.schema import WORKFLOW_TAG, action_responses
from weft_django.api.serializers.fields import JSONPayloadField, StrictCharField
from weft_django.engine.operations.signal_with_start import signal_with_start

from .base import WorkflowActionView


class SignalWithStartSerializer(serializers.Serializer):
    """The body: the workflow to start (`name`, `input`) and the signal."""

    name = StrictCharField(max_length=200, help_text="The registered @workflow name.")
    input = JSONPayloadField(
        what="workflow input",
        required=False,
        allow_null=True,
        default=None,
        help_text="Used only when this request starts the run.",
    )
    signal = StrictCharField(min_length=1, max_length=200, help_text="The signal's name.")
    payload = JSONPayloadField(what="signal payload", required=False, allow_null=True, default=None)


class SignalWithStartResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    signal_id = serializers.IntegerField()
    signal = serializers.CharField()
    started = serializers.BooleanField(help_text="This request started the run.")


@extend_schema_view(
    post=extend_schema(
        operation_id="weft_workflows_signal_with_start",
        tags=WORKFLOW_TAG,
        summary="Signal a workflow, starting it if no run is live",
        description="Atomic: starts `name` as a pending run with the signal buffered when no "
        "live run has the id (201), else buffers the signal on the live run (202). A live run "
        "of another workflow → 409 workflow_already_running, nothing written.",
        request=SignalWithStartSerializer,
        responses={
            201: SignalWithStartResultSerializer,
            **action_responses(SignalWithStartResultSerializer, status=202),
        },
    )
)
class WorkflowSignalWithStartView(WorkflowActionView):
    """``workflows/<id>/signal-with-start/``."""

    body = SignalWithStartSerializer

    def act(self, request: Request, workflow_id: str, data: dict[str, Any]) -> Response:
        run, message, started = signal_with_start(
            data["name"], data.get("input"), workflow_id, data["signal"], data.get("payload")
        )
        body = {
            "workflow_id": workflow_id,
            "run_id": run.pk,
            "signal_id": message.pk,
            "signal": message.name,
            "started": started,
        }
        return Response(SignalWithStartResultSerializer(body).data, status=201 if started else 202)


__all__ = [
    "SignalWithStartResultSerializer",
    "SignalWithStartSerializer",
    "WorkflowSignalWithStartView",
]
