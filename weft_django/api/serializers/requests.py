"""Request bodies and query parameters of the weft REST API (SPEC §5).

Why each is a serializer: a body or a query string is validated like any
other input, so a bad one is a 400 naming the field (``fields`` says how
strict each kind of value is). The workflow-id grammar is ``weft_django.ids``.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from weft_django.engine.definitions import get_workflow
from weft_django.engine.payload import normalize
from weft_django.errors import PayloadError, UnknownWorkflowType
from weft_django.ids import WORKFLOW_ID_HELP, WORKFLOW_ID_RE
from weft_django.models import RUN_STATUSES

from .fields import (
    JSONArgsField,
    JSONPayloadField,
    SecondsField,
    StrictBooleanField,
    StrictCharField,
)


class StartWorkflowSerializer(serializers.Serializer):
    """`POST workflows/`: start a run (`client.start`)."""

    name = StrictCharField(max_length=200, help_text="The registered @workflow name.")
    input = JSONPayloadField(
        what="workflow input",
        required=False,
        allow_null=True,
        default=None,
        help_text="Any JSON value, at most MAX_PAYLOAD_BYTES once encoded.",
    )
    workflow_id = StrictCharField(
        required=False,
        allow_null=True,
        max_length=200,
        validators=[
            RegexValidator(
                WORKFLOW_ID_RE, message=f"Must match {WORKFLOW_ID_HELP}.", code="invalid"
            )
        ],
        help_text="Default: a new UUID. Unique among live runs.",
    )
    idempotency_key = StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=255,
        help_text="Globally unique; a repeated key returns the existing run (HTTP 200).",
    )
    start_after = SecondsField(
        required=False, allow_null=True, help_text="Delay the start by this many seconds."
    )
    start_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Start at this time (not with start_after)."
    )
    execution_timeout = SecondsField(
        required=False,
        allow_null=True,
        min_value=0.001,
        help_text="Seconds from the start after which the run is timed_out.",
    )
    on_conflict = serializers.ChoiceField(
        choices=["error", "start-new"],
        default="error",
        help_text='"start-new": start a new run of a workflow id whose last run is terminal.',
    )
    queue = StrictCharField(
        required=False,
        allow_null=True,
        max_length=100,
        help_text='A queue of WEFT["QUEUES"] (default: the workflow\'s own, if any).',
    )
    priority = serializers.IntegerField(
        required=False,
        default=0,
        min_value=-(2**31),
        max_value=2**31 - 1,
        help_text="Admission order within the queue: higher first, FIFO within one.",
    )
    concurrency_key = StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=200,
        help_text="The queue's per_key_concurrency applies per key (a tenant, an account).",
    )

    def validate_name(self, value: str) -> str:
        try:
            get_workflow(value)
        except UnknownWorkflowType as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("start_after") is not None and attrs.get("start_at") is not None:
            raise serializers.ValidationError(
                {"start_at": ["Give start_at or start_after, not both."]}, code="invalid"
            )
        return attrs


class SignalSerializer(serializers.Serializer):
    """`POST workflows/<id>/signal/`."""

    name = StrictCharField(min_length=1, max_length=200)
    payload = JSONPayloadField(what="signal payload", required=False, allow_null=True, default=None)


class ReasonSerializer(serializers.Serializer):
    """`POST workflows/<id>/cancel/` and `suspend/`: an optional reason."""

    reason = StrictCharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=200,
        help_text="Recorded on the run and in the claim event.",
    )


class CancelSerializer(ReasonSerializer):
    """`POST workflows/<id>/cancel/`: a reason, and a grace for cleanup or force."""

    grace = SecondsField(
        required=False,
        allow_null=True,
        help_text="Seconds the workflow may clean up (WorkflowCancelled is thrown into it); "
        "default: the workflow's cancel_grace, else an immediate cancel.",
    )
    force = StrictBooleanField(
        required=False,
        default=False,
        help_text="End the run at once, whatever the grace (not with grace).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("force") and attrs.get("grace") is not None:
            raise serializers.ValidationError(
                {"grace": ["Give grace or force=true, not both."]}, code="invalid"
            )
        return attrs


class QuerySerializer(serializers.Serializer):
    """`POST workflows/<id>/query/`."""

    name = StrictCharField(min_length=1, max_length=200, help_text="An on_query handler name.")
    args = JSONArgsField(
        what="query args",
        required=False,
        default=list,
        help_text="Positional arguments for the handler.",
    )


class CompleteAsyncSerializer(serializers.Serializer):
    """`POST async-activities/<token>/complete/`."""

    result = JSONPayloadField(
        what="async activity result", required=False, allow_null=True, default=None
    )


class AsyncErrorSerializer(serializers.Serializer):
    """The `error` object of `POST async-activities/<token>/fail/`."""

    message = StrictCharField(allow_blank=True)
    type = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    details = JSONPayloadField(what="async activity error details", required=False, allow_null=True)


class FailAsyncSerializer(serializers.Serializer):
    """`POST async-activities/<token>/fail/`."""

    error = AsyncErrorSerializer()

    def validate_error(self, value: dict[str, Any]) -> dict[str, Any]:
        # The parts passed; the whole record must fit MAX_PAYLOAD_BYTES too.
        try:
            normalize("async activity error", value)
        except PayloadError as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None
        return value


class ISODateTimeParam(serializers.DateTimeField):
    """An ISO 8601 datetime query parameter; a bad one is refused naming the value
    (DRF's own message lists formats, not what the client sent)."""

    def to_internal_value(self, value: Any) -> Any:
        try:
            return super().to_internal_value(value)
        except serializers.ValidationError:
            raise serializers.ValidationError(
                f"{value!r} is not an ISO 8601 datetime (e.g. 2026-01-31T12:00:00Z)",
                code="invalid",
            ) from None


class WorkflowListParams(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(RUN_STATUSES), required=False)
    name = StrictCharField(required=False, max_length=200)
    workflow_id = StrictCharField(required=False, max_length=200)
    updated_after = ISODateTimeParam(required=False)
    updated_before = ISODateTimeParam(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        after, before = attrs.get("updated_after"), attrs.get("updated_before")
        if after is not None and before is not None and after >= before:
            raise serializers.ValidationError(
                {
                    "updated_before": [
                        f"updated_before ({before.isoformat()}) must be later than "
                        f"updated_after ({after.isoformat()})"
                    ]
                }
            )
        return attrs


class RunParams(serializers.Serializer):
    run_id = serializers.UUIDField(required=False)


class ClaimListParams(serializers.Serializer):
    engine = StrictCharField(required=False, max_length=200)
    expired = serializers.BooleanField(required=False)


__all__ = [
    "AsyncErrorSerializer",
    "ClaimListParams",
    "CompleteAsyncSerializer",
    "FailAsyncSerializer",
    "QuerySerializer",
    "ReasonSerializer",
    "RunParams",
    "SignalSerializer",
    "StartWorkflowSerializer",
    "WorkflowListParams",
]
