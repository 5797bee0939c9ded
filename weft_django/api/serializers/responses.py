"""Response bodies that are run rows: runs (summary and detail), journal entries,
activity heartbeats, pending async activities (claims and engines: ``claims``).

Each body is a row (plus the few values ``views.base.detail_response`` sets on a
detail's instance), read by a ``ModelSerializer`` with ``source=``, so no view
builds a dict. Every field is declared, not generated: the published schema keeps
its types, nullability and help texts whatever the model's own field options are.
An async activity's token is shown only as its hash prefix, never itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from weft_django.engine.runs.waits import WAIT_KINDS
from weft_django.kernel import ids
from weft_django.models import (
    RUN_STATUSES,
    ActivityAttempt,
    ActivityHeartbeat,
    AsyncActivity,
    JournalEntry,
    WorkflowRun,
)

from .fields import JSONPayloadField
from .results import OwnerSerializer

TOKEN_HASH_PREFIX_LEN = ids.TOKEN_HASH_PREFIX_LEN


class TokenHashPrefixField(serializers.CharField):
    """The first ``TOKEN_HASH_PREFIX_LEN`` hex digits of the stored token hash."""

    def to_representation(self, value: Any) -> str:
        return str(value)[:TOKEN_HASH_PREFIX_LEN]


class PendingAsyncSerializer(serializers.ModelSerializer):
    """A pending async activity. The raw token is never stored (only its SHA-256)."""

    token_hash_prefix = TokenHashPrefixField(
        source="token_hash",
        help_text="First 12 hex digits of the SHA-256 of the token. The raw token is "
        "never stored, so it cannot be shown; this prefix identifies the activity.",
    )
    target = serializers.CharField(help_text="The async activity's name.")
    position = serializers.IntegerField(help_text="The command position it belongs to.")
    created_at = serializers.DateTimeField()

    class Meta:
        model = AsyncActivity
        fields = ("token_hash_prefix", "target", "position", "created_at")


class WaitSerializer(serializers.Serializer):
    """One thing a run waits for; its fields depend on `kind`."""

    kind = serializers.ChoiceField(choices=list(WAIT_KINDS))
    text = serializers.CharField(help_text="The wait in words.")
    name = serializers.CharField(
        required=False,
        help_text="signal, activity, async_activity, update: its name; child: its type.",
    )
    position = serializers.IntegerField(
        required=False, allow_null=True, help_text="The journal position of the command."
    )
    due_at = serializers.DateTimeField(
        required=False, help_text="timer: when it is due (ISO 8601, UTC)."
    )
    due_at_ms = serializers.IntegerField(
        required=False, help_text="timer: due_at as engine-clock ms since the epoch."
    )
    timer_kind = serializers.CharField(required=False, help_text="timer: sleep, timeout, ...")
    timeout_ms = serializers.IntegerField(
        required=False, allow_null=True, help_text="signal: the wait's timeout, ms."
    )
    token_hash_prefix = serializers.CharField(
        required=False, help_text="async_activity: the token's hash prefix (never the token)."
    )
    workflow_id = serializers.CharField(required=False, help_text="child: its workflow id.")
    run_id = serializers.UUIDField(required=False, help_text="child: its run id.")
    status = serializers.CharField(required=False, help_text="child: its status.")
    update_id = serializers.CharField(required=False, help_text="update: its id.")
    queue = serializers.CharField(required=False, help_text="queue_slot: the queue.")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return dict(instance)


class ActivityAttemptSerializer(serializers.ModelSerializer):
    """One ended activity attempt: when it ran, how it ended, on which engine."""

    position = serializers.IntegerField(help_text="The activity command's position.")
    attempt = serializers.IntegerField(help_text="The attempt number (1-based).")
    activity = serializers.CharField(help_text="The activity's registered name.")
    started_at = serializers.IntegerField(help_text="When it started, ms (engine clock).")
    ended_at = serializers.IntegerField(
        help_text="When it ended, ms (engine clock); interrupted: when the next owner settled it."
    )
    outcome = serializers.ChoiceField(
        choices=["ok", "failed", "interrupted"],
        help_text="ok, failed, or interrupted (its engine stopped while it ran).",
    )
    error = JSONPayloadField(
        what="attempt error",
        allow_null=True,
        help_text="Its error's headline (type: message), null when it succeeded; "
        '{"hidden": true, "size": n} without weft.view_payload.',
    )
    engine_id = serializers.CharField(allow_blank=True, help_text="The engine that ran it.")
    epoch = serializers.IntegerField(help_text="The claim epoch it was recorded under.")

    class Meta:
        model = ActivityAttempt
        fields = (
            "position",
            "attempt",
            "activity",
            "started_at",
            "ended_at",
            "outcome",
            "error",
            "engine_id",
            "epoch",
        )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        shown = super().to_representation(instance)
        if not instance.error:  # it succeeded: no headline (nor a hidden one)
            shown["error"] = None
        return shown


class ActivityHeartbeatSerializer(serializers.ModelSerializer):
    """The latest heartbeat of an activity command: its reported progress."""

    position = serializers.IntegerField(help_text="The activity command's journal position.")
    attempt = serializers.IntegerField(help_text="The attempt (1-based) that reported it.")
    details = JSONPayloadField(
        what="heartbeat details",
        allow_null=True,
        help_text="What the activity passed to activity_info().heartbeat(details).",
    )
    beat_at = serializers.IntegerField(help_text="When it was stored, ms (engine clock).")
    engine_id = serializers.CharField(allow_blank=True, help_text="The engine that stored it.")
    epoch = serializers.IntegerField(help_text="The claim epoch that engine held.")

    class Meta:
        model = ActivityHeartbeat
        fields = ("position", "attempt", "details", "beat_at", "engine_id", "epoch")


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {
            "oneOf": [
                {"type": "string"},
                {"type": "integer"},
                {"type": "number"},
                {"type": "boolean"},
            ]
        },
    }
)
class SearchAttributesField(serializers.Field):
    """The run's search attributes, ``{name: value}`` (a datetime as ISO 8601).

    Lists prefetch ``search_attributes`` for the page (one query); a detail
    reads its run's rows (one query)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("source", "*")
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        for row in sorted(value.search_attributes.all(), key=lambda r: r.name):
            item = row.value
            shown[row.name] = (
                serializers.DateTimeField().to_representation(item)
                if isinstance(item, datetime)
                else item
            )
        return shown


class WorkflowSummarySerializer(serializers.ModelSerializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField(source="pk")
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=list(RUN_STATUSES))
    idempotency_key = serializers.CharField(allow_null=True)
    parent_run_id = serializers.UUIDField(source="parent_id", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    search_attributes = SearchAttributesField(
        help_text="The run's search attributes (ctx.upsert_search_attributes), by name."
    )

    class Meta:
        model = WorkflowRun
        fields: tuple[str, ...] = (
            "workflow_id",
            "run_id",
            "name",
            "status",
            "idempotency_key",
            "parent_run_id",
            "created_at",
            "updated_at",
            "started_at",
            "finished_at",
            "search_attributes",
        )


class WorkflowDetailSerializer(WorkflowSummarySerializer):
    # No docstring: it would become the schema's description. ``epoch``, ``owner``,
    # ``pending_async_token`` and ``pending_async_activities`` are not columns of
    # the run: ``views.base.detail_response`` sets them on the instance from
    # ``client.ownership_status`` and the run's pending ``AsyncActivity`` rows.
    # ``heartbeats`` is the reverse relation, which it prefetches by position.

    input = JSONPayloadField(what="input", allow_null=True)
    result = JSONPayloadField(what="result", allow_null=True)
    error = JSONPayloadField(what="error", allow_null=True)
    epoch = serializers.IntegerField(help_text="The claim's fencing epoch (0 = never claimed).")
    owner = OwnerSerializer(allow_null=True, help_text="The engine holding the claim, if any.")
    parent_workflow_id = serializers.CharField(source="parent.workflow_id", allow_null=True)
    continued_from_run_id = serializers.UUIDField(source="continued_from_id", allow_null=True)
    start_at = serializers.IntegerField(allow_null=True, help_text="Delayed start, ms.")
    deadline_at = serializers.IntegerField(allow_null=True, help_text="Execution deadline, ms.")
    wake_at = serializers.IntegerField(allow_null=True, help_text="Earliest timer, ms.")
    suspended_reason = serializers.CharField(allow_blank=True)
    cancel_requested_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When a cancel with a grace was asked for (the run is cleaning up), or null.",
    )
    cancel_reason = serializers.CharField(
        allow_blank=True, help_text="The reason of that cancel request."
    )
    cancel_deadline_at = serializers.IntegerField(
        allow_null=True, help_text="End of the cancel grace, ms: the run is ended then."
    )
    queue = serializers.CharField(allow_null=True, help_text="The run's queue, or null.")
    priority = serializers.IntegerField(help_text="Admission order within the queue.")
    concurrency_key = serializers.CharField(allow_null=True)
    waiting_reason = serializers.CharField(
        allow_null=True,
        help_text="What the run waits for, in words (a queue slot, a timer, a signal, an "
        "async activity, a child, an update), or null. `waits` has the same as objects.",
    )
    waits = WaitSerializer(
        many=True,
        help_text="What the run waits for, one object per wait (empty for an ended run).",
    )
    pending_async_token = PendingAsyncSerializer(
        allow_null=True,
        help_text="The first pending async activity (lowest position), or null. Tokens are "
        "stored hashed: this shows the token hash prefix and the target, never the token.",
    )
    pending_async_activities = PendingAsyncSerializer(
        many=True, help_text="Every pending async activity of the run, by position."
    )
    heartbeats = ActivityHeartbeatSerializer(
        many=True,
        help_text="The latest heartbeat of each activity command that reported progress, "
        "by position (detail views only).",
    )
    attempts = ActivityAttemptSerializer(
        many=True,
        source="attempt_history",
        help_text="The run's last 100 ended activity attempts, oldest first (detail views "
        "only); `attempts_total` counts them all.",
    )
    attempts_total = serializers.IntegerField(help_text="How many attempts the run has ended.")

    class Meta(WorkflowSummarySerializer.Meta):
        fields = (
            *WorkflowSummarySerializer.Meta.fields,
            "input",
            "result",
            "error",
            "epoch",
            "owner",
            "parent_workflow_id",
            "continued_from_run_id",
            "start_at",
            "deadline_at",
            "wake_at",
            "suspended_reason",
            "cancel_requested_at",
            "cancel_reason",
            "cancel_deadline_at",
            "queue",
            "priority",
            "concurrency_key",
            "waiting_reason",
            "waits",
            "pending_async_token",
            "pending_async_activities",
            "heartbeats",
            "attempts",
            "attempts_total",
        )


class JournalEntrySerializer(serializers.ModelSerializer):
    position = serializers.IntegerField()
    kind = serializers.CharField()
    command = serializers.IntegerField(allow_null=True)
    target = serializers.CharField(allow_blank=True)
    result = JSONPayloadField(what="result", allow_null=True)
    error = JSONPayloadField(what="error", allow_null=True)
    engine_id = serializers.CharField(allow_blank=True)
    epoch = serializers.IntegerField()
    at_ms = serializers.IntegerField()

    class Meta:
        model = JournalEntry
        fields = (
            "position",
            "kind",
            "command",
            "target",
            "result",
            "error",
            "engine_id",
            "epoch",
            "at_ms",
        )


__all__ = [
    "TOKEN_HASH_PREFIX_LEN",
    "ActivityAttemptSerializer",
    "ActivityHeartbeatSerializer",
    "JournalEntrySerializer",
    "PendingAsyncSerializer",
    "WorkflowDetailSerializer",
    "WorkflowSummarySerializer",
]
