"""Request bodies and query parameters of the weft REST API (SPEC §5).

Why each is a serializer: a body or a query string is validated like any
other input, so a bad one is a 400 naming the field (``fields`` says how
strict each kind of value is). The workflow-id grammar is ``weft_django.kernel.ids``.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from weft_django.engine.operations.conflict import ON_CONFLICT
from weft_django.engine.workflow.definitions import get_workflow
from weft_django.errors import UnknownWorkflowType
from weft_django.kernel.ids import WORKFLOW_ID_HELP, WORKFLOW_ID_RE
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
        choices=list(ON_CONFLICT),
        default="error",
        help_text='A run of workflow_id exists. "error": refused. "start-new": a new run '
        'once the last one is terminal. "use-existing": a live run is returned as it is '
        '(HTTP 200), a terminal one gets a new run. "terminate-existing": a live run '
        "is ended terminated (its children cancelled), then a new run starts.",
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
    fairness_key = StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=200,
        help_text='A "fair" queue\'s round robin is across these keys (default: concurrency_key).',
    )
    fairness_weight = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=1000,
        help_text="Admissions per round of the fairness key in a fair queue (default 1).",
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
    idempotency_key = StrictCharField(
        required=False,
        allow_null=True,
        min_length=1,
        max_length=255,
        help_text="Recorded once per key per workflow id: a retried request returns the "
        "signal already recorded (same signal_id); the key with another name or payload → 400.",
    )


class ReasonSerializer(serializers.Serializer):
    """`POST workflows/<id>/cancel/` and `suspend/`: an optional reason."""

    reason = StrictCharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=200,
        help_text="Recorded on the run and in the claim event.",
    )


class ResetSerializer(ReasonSerializer):
    """`POST workflows/<id>/reset/`: the journal position to continue from, a reason."""

    at_position = serializers.IntegerField(
        min_value=0,
        help_text="Journal entries before this position are kept (reused, not run again); "
        "the new run continues from here with today's code.",
    )


class ForkSerializer(serializers.Serializer):
    """`POST workflows/<id>/fork/`: the position, the new workflow id, the input."""

    at_position = serializers.IntegerField(
        min_value=0,
        help_text="Journal entries before this position are copied (reused, not run again).",
    )
    workflow_id_for_fork = StrictCharField(
        required=False,
        allow_null=True,
        max_length=200,
        help_text="The new run's workflow id (default: <workflow_id>-fork-<hex>).",
    )
    input = JSONPayloadField(
        what="fork input",
        required=False,
        allow_null=True,
        help_text="The new run's input (default: the source's).",
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
    """`GET workflows/`: each value checked alone (the last one of a repeated
    parameter); the run filter (``RunFilter.from_params``) then reads them all,
    statuses included (``status=failed,timed_out`` is two)."""

    status = StrictCharField(required=False, max_length=200)
    name = StrictCharField(required=False, max_length=200)
    workflow = StrictCharField(required=False, max_length=200)
    workflow_id = StrictCharField(required=False, max_length=200)
    parent = StrictCharField(required=False, max_length=200)
    attr = StrictCharField(required=False, max_length=400)
    created_after = ISODateTimeParam(required=False)
    created_before = ISODateTimeParam(required=False)
    finished_after = ISODateTimeParam(required=False)
    finished_before = ISODateTimeParam(required=False)
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


def _names(help_text: str) -> serializers.ListField:
    return serializers.ListField(
        child=StrictCharField(min_length=1, max_length=200),
        required=False,
        max_length=1000,
        help_text=help_text,
    )


class RunFilterSerializer(serializers.Serializer):
    """The run filter of a bulk action: every field narrows (AND); lists mean "any of"."""

    status = serializers.ListField(
        child=serializers.ChoiceField(choices=list(RUN_STATUSES)),
        required=False,
        max_length=len(RUN_STATUSES),
        help_text="Run statuses.",
    )
    workflow = _names("Workflow type names.")
    workflow_id = _names("Exact workflow ids.")
    parent = StrictCharField(
        required=False, min_length=1, max_length=200, help_text="Children of this workflow id."
    )
    created_after = ISODateTimeParam(required=False, help_text="Created strictly after.")
    created_before = ISODateTimeParam(required=False, help_text="Created strictly before.")
    finished_after = ISODateTimeParam(required=False, help_text="Finished strictly after.")
    finished_before = ISODateTimeParam(required=False, help_text="Finished strictly before.")
    attr = serializers.ListField(
        child=StrictCharField(min_length=1, max_length=400),
        required=False,
        max_length=100,
        help_text='Search attribute conditions: "NAME=VALUE", or "NAME>=VALUE" (and >, <, <=) '
        "for int, float and datetime attributes; VALUE is read by the declared type.",
    )


def filter_params(validated: dict[str, Any]) -> dict[str, Any]:
    """A validated ``RunFilterSerializer`` as ``RunFilter.from_params`` reads it
    (strings; a datetime in ISO 8601)."""
    params: dict[str, Any] = {}
    for key, value in validated.items():
        if isinstance(value, list):
            if value:
                params[key] = [str(v) for v in value]
        elif hasattr(value, "isoformat"):
            params[key] = value.isoformat()
        else:
            params[key] = value
    return params


class BulkActionSerializer(serializers.Serializer):
    """`POST bulk/cancel/`, `bulk/resume/`, `bulk/retry/`."""

    filter = RunFilterSerializer(
        required=False, help_text="Which runs; an empty filter needs `all`: true."
    )
    dry_run = StrictBooleanField(
        required=False, default=False, help_text="Count what would change; change nothing."
    )
    all = StrictBooleanField(
        required=False,
        default=False,
        help_text="Act on every run when the filter is empty (else a 400 naming `all`).",
    )
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=200,
        help_text="Cancel only: recorded on each run and in its claim event.",
    )


class RunParams(serializers.Serializer):
    run_id = serializers.UUIDField(required=False)


class ClaimListParams(serializers.Serializer):
    engine = StrictCharField(required=False, max_length=200)
    expired = serializers.BooleanField(required=False)


__all__ = [
    "BulkActionSerializer",
    "ClaimListParams",
    "QuerySerializer",
    "ReasonSerializer",
    "RunFilterSerializer",
    "RunParams",
    "SignalSerializer",
    "StartWorkflowSerializer",
    "WorkflowListParams",
    "filter_params",
]
