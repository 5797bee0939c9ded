"""Request and response bodies of the weft REST API (SPEC §5).

Why these serializers are stricter than DRF's defaults: the API is the one
place where untrusted input reaches the runtime, and a bad body must be a
400 naming the field, never a 500. So:

* strings are strings (DRF's ``CharField`` turns ``123`` into ``"123"`` and
  accepts lone surrogates, which the database then refuses);
* durations are finite, non-negative seconds and never booleans;
* every JSON payload (input, signal payload, query args, async results and
  errors) goes through ``weft_django.engine.payload.normalize`` *here*, so
  NaN, ±Infinity, ``\\u0000``, nesting deeper than 100 levels and
  ``MAX_PAYLOAD_BYTES`` are reported against the field that carried them;
  the client checks again when it writes, so nothing bypasses the limit.

Response serializers describe plain dicts built by the views; they exist
so that drf-spectacular documents every body exactly.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from weft_django.engine.client import WORKFLOW_ID_RE
from weft_django.engine.definitions import get_workflow
from weft_django.engine.payload import normalize
from weft_django.errors import PayloadError, UnknownWorkflowType
from weft_django.models import CLAIM_EVENT_KINDS, RUN_STATUSES

#: Upper bound of any duration the API accepts (100 years, in seconds): far
#: beyond any sensible delay, and small enough that ms arithmetic and
#: datetimes never overflow.
MAX_DURATION_SECONDS = 100 * 365.25 * 24 * 3600

WORKFLOW_ID_PATTERN = r"^[A-Za-z0-9._:@-]{1,200}$"


# --------------------------------------------------------------------------
# Strict input fields


class StrictCharField(serializers.CharField):
    """A ``CharField`` that accepts only JSON strings without lone surrogates.

    Whitespace is kept as sent (``trim_whitespace=False``): a workflow id or a
    signal name with a trailing space is a different name, not the same one.
    """

    default_error_messages = {
        "not_a_string": "Must be a string.",
        "surrogate": "Must not contain lone surrogate characters.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        if not kwargs.get("allow_blank", False):
            kwargs.setdefault("min_length", 1)  # so the schema says what "blank" refuses
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("surrogate")
        return str(super().to_internal_value(data))


class SecondsField(serializers.FloatField):
    """A duration in seconds: a finite, non-negative number, never a boolean."""

    default_error_messages = {"boolean": "Must be a number of seconds, not a boolean."}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", MAX_DURATION_SECONDS)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("boolean")
        return float(super().to_internal_value(data))


@extend_schema_field(OpenApiTypes.ANY)
class JSONPayloadField(serializers.Field):
    """Any JSON value, validated by ``payload.normalize`` as ``what``.

    Not DRF's ``JSONField``: that one re-encodes the value with ``json.dumps``
    at whatever stack depth the view is at, and a deeply nested body parsed
    just under the recursion limit would then raise ``RecursionError`` (a
    500). ``normalize`` refuses anything deeper than 100 levels first.
    """

    def __init__(self, *, what: str, **kwargs: Any) -> None:
        self.what = what
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        try:
            return normalize(self.what, data)
        except PayloadError as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field({"type": "array", "items": {}})
class JSONArgsField(JSONPayloadField):
    """A JSON array of positional arguments (each any JSON value)."""

    default_error_messages = {"not_a_list": "Must be a JSON array."}

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, list):
            self.fail("not_a_list")
        return super().to_internal_value(data)


# --------------------------------------------------------------------------
# Request bodies


class StartWorkflowSerializer(serializers.Serializer):
    """``POST workflows/``: start a run (SPEC §2 ``client.start``)."""

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
                WORKFLOW_ID_RE, message="Must match [A-Za-z0-9._:@-]{1,200}.", code="invalid"
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
    """``POST workflows/<id>/signal/``."""

    name = StrictCharField(min_length=1, max_length=200)
    payload = JSONPayloadField(what="signal payload", required=False, allow_null=True, default=None)


class ReasonSerializer(serializers.Serializer):
    """``POST workflows/<id>/cancel/`` and ``suspend/``: an optional reason."""

    reason = StrictCharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=200,
        help_text="Recorded on the run and in the claim event.",
    )


class QuerySerializer(serializers.Serializer):
    """``POST workflows/<id>/query/``."""

    name = StrictCharField(min_length=1, max_length=200, help_text="An on_query handler name.")
    args = JSONArgsField(
        what="query args",
        required=False,
        default=list,
        help_text="Positional arguments for the handler.",
    )


class CompleteAsyncSerializer(serializers.Serializer):
    """``POST async-activities/<token>/complete/``."""

    result = JSONPayloadField(
        what="async activity result", required=False, allow_null=True, default=None
    )


class AsyncErrorSerializer(serializers.Serializer):
    """The ``error`` object of ``POST async-activities/<token>/fail/``."""

    message = StrictCharField(allow_blank=True)
    type = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=200)
    details = JSONPayloadField(what="async activity error details", required=False, allow_null=True)


class FailAsyncSerializer(serializers.Serializer):
    """``POST async-activities/<token>/fail/``."""

    error = AsyncErrorSerializer()

    def validate_error(self, value: dict[str, Any]) -> dict[str, Any]:
        # The parts passed; the whole record must fit MAX_PAYLOAD_BYTES too.
        try:
            normalize("async activity error", value)
        except PayloadError as exc:
            raise serializers.ValidationError(str(exc), code=exc.code) from None
        return value


# --------------------------------------------------------------------------
# Query parameters


class WorkflowListParams(serializers.Serializer):
    status = serializers.ChoiceField(choices=list(RUN_STATUSES), required=False)
    name = StrictCharField(required=False, max_length=200)
    workflow_id = StrictCharField(required=False, max_length=200)


class RunParams(serializers.Serializer):
    run_id = serializers.UUIDField(required=False)


class ClaimListParams(serializers.Serializer):
    engine = StrictCharField(required=False, max_length=200)
    expired = serializers.BooleanField(required=False)


# --------------------------------------------------------------------------
# Response bodies


class ErrorSerializer(serializers.Serializer):
    """Every error: a stable ``code``, a message, and the error's own fields."""

    code = serializers.CharField(help_text="Stable, machine-readable error code.")
    message = serializers.CharField()


class ValidationErrorSerializer(ErrorSerializer):
    """A 400: ``code`` ``"invalid"`` with ``errors`` per field, or another code without."""

    errors = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text='With code "invalid": field name -> list of messages (a nested object '
        'for nested fields). Absent for "parse_error" and "invalid_payload".',
    )


class HolderSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    epoch = serializers.IntegerField()
    expires_at = serializers.IntegerField(help_text="Engine clock, ms since the epoch.")
    claimed_at = serializers.IntegerField(help_text="Engine clock, ms since the epoch.")


class OwnerSerializer(HolderSerializer):
    expired = serializers.BooleanField(
        help_text="The holder's claim expired (past expires_at + takeover grace)."
    )


class PendingAsyncSerializer(serializers.Serializer):
    """A pending async activity. The raw token is never stored (only its SHA-256)."""

    token_hash_prefix = serializers.CharField(
        help_text="First 12 hex digits of the SHA-256 of the token. The raw token is "
        "never stored, so it cannot be shown; this prefix identifies the activity."
    )
    target = serializers.CharField(help_text="The async activity's name.")
    position = serializers.IntegerField(help_text="The command position it belongs to.")
    created_at = serializers.DateTimeField()


class WorkflowSummarySerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=list(RUN_STATUSES))
    idempotency_key = serializers.CharField(allow_null=True)
    parent_run_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class WorkflowDetailSerializer(WorkflowSummarySerializer):
    input = JSONPayloadField(what="input", allow_null=True)
    result = JSONPayloadField(what="result", allow_null=True)
    error = JSONPayloadField(what="error", allow_null=True)
    epoch = serializers.IntegerField(help_text="The claim's fencing epoch (0 = never claimed).")
    owner = OwnerSerializer(allow_null=True, help_text="The engine holding the claim, if any.")
    parent_workflow_id = serializers.CharField(allow_null=True)
    continued_from_run_id = serializers.UUIDField(allow_null=True)
    start_at = serializers.IntegerField(allow_null=True, help_text="Delayed start, ms.")
    deadline_at = serializers.IntegerField(allow_null=True, help_text="Execution deadline, ms.")
    wake_at = serializers.IntegerField(allow_null=True, help_text="Earliest timer, ms.")
    suspended_reason = serializers.CharField(allow_blank=True)
    pending_async_token = PendingAsyncSerializer(
        allow_null=True,
        help_text="The first pending async activity (lowest position), or null. Tokens are "
        "stored hashed: this shows the token hash prefix and the target, never the token.",
    )
    pending_async_activities = PendingAsyncSerializer(
        many=True, help_text="Every pending async activity of the run, by position."
    )


class JournalEntrySerializer(serializers.Serializer):
    position = serializers.IntegerField()
    kind = serializers.CharField()
    command = serializers.IntegerField(allow_null=True)
    target = serializers.CharField(allow_blank=True)
    result = JSONPayloadField(what="result", allow_null=True)
    error = JSONPayloadField(what="error", allow_null=True)
    engine_id = serializers.CharField(allow_blank=True)
    epoch = serializers.IntegerField()
    at_ms = serializers.IntegerField()


class SignalAcceptedSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    signal_id = serializers.IntegerField()
    name = serializers.CharField()


class PurgeResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    purged_runs = serializers.IntegerField()


class QueryResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    name = serializers.CharField()
    result = JSONPayloadField(what="query result", allow_null=True)


class OwnershipSerializer(serializers.Serializer):
    """``client.ownership_status(id)`` (SPEC §2)."""

    workflow_id = serializers.CharField()
    status = serializers.ChoiceField(choices=list(RUN_STATUSES), allow_null=True)
    epoch = serializers.IntegerField()
    holder = HolderSerializer(allow_null=True)
    expired = serializers.BooleanField()


class ClaimEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    workflow_id = serializers.CharField()
    epoch = serializers.IntegerField()
    engine_id = serializers.CharField(allow_blank=True)
    kind = serializers.ChoiceField(choices=list(CLAIM_EVENT_KINDS))
    at_ms = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)
    previous_engine_id = serializers.CharField(allow_blank=True)
    previous_expires_at = serializers.IntegerField(allow_null=True)


class ClaimSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    epoch = serializers.IntegerField()
    engine_id = serializers.CharField(allow_null=True)
    claimed_at = serializers.IntegerField(allow_null=True)
    expires_at = serializers.IntegerField(allow_null=True)
    state = serializers.ChoiceField(
        choices=["live", "expired", "released"],
        help_text="released: no holder; expired: past expires_at + takeover grace.",
    )
    expires_in_ms = serializers.IntegerField(
        allow_null=True, help_text="expires_at minus now (negative once expired)."
    )


class EngineSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    node_name = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)
    pid = serializers.IntegerField(allow_null=True)
    mode = serializers.CharField()
    pool = serializers.CharField(allow_blank=True)
    transport = serializers.CharField(allow_blank=True)
    started_at = serializers.IntegerField()
    heartbeat_at = serializers.IntegerField()
    stopped_at = serializers.IntegerField(allow_null=True)
    alive = serializers.BooleanField(
        help_text="Not stopped, and its heartbeat is younger than CLAIM_TTL."
    )
    heartbeat_age_ms = serializers.IntegerField()
    claims_held = serializers.IntegerField()
    metrics = serializers.DictField(child=serializers.JSONField())


class ClaimCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Claim rows (one per workflow id ever claimed).")
    held = serializers.IntegerField()
    expired = serializers.IntegerField()


class EngineCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    alive = serializers.IntegerField()
    stopped = serializers.IntegerField()


class WakeCountSerializer(serializers.Serializer):
    kind = serializers.CharField()
    decision = serializers.CharField()
    transport = serializers.CharField()
    count = serializers.IntegerField()


class MetricsSerializer(serializers.Serializer):
    """The cluster's claim counters: every engine's ``EngineRecord.metrics`` summed."""

    version = serializers.IntegerField()
    attempts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Claim attempts by outcome (acquired, takeover, lost_race, deposed, "
        "backoff_skipped), summed over every engine, live and past.",
    )
    active_claims = serializers.IntegerField(
        help_text="Sum of the active-claims gauge of engines not stopped."
    )
    renewal_failures = serializers.IntegerField()
    wakes = WakeCountSerializer(many=True)
    engines = EngineCountsSerializer()
    claims = ClaimCountsSerializer()
    runs_by_status = serializers.DictField(child=serializers.IntegerField())
    due_timers = serializers.IntegerField()
    oldest_due_timer_lag_ms = serializers.IntegerField(allow_null=True)


class AsyncSettledSerializer(serializers.Serializer):
    # A CharField, not a ChoiceField: a second enum named "status" would collide
    # with the run status enum in the generated schema.
    status = serializers.CharField(help_text='"completed" or "failed".')
