"""Response bodies that are not rows: errors, action results, ownership, metrics.

Why plain serializers here: these bodies are built from what the client
returns (a signal message, a purge count, ``ownership_status``) or from the
read model's counters (``inspection.cluster_counters``); they exist so that
drf-spectacular documents every body exactly. Rows are in ``responses``.
"""

from __future__ import annotations

from rest_framework import serializers

from weft_django.models import RUN_STATUSES

from .errors import ErrorSerializer, ValidationErrorSerializer
from .fields import JSONPayloadField, MillisecondsAsISOField


class HolderSerializer(serializers.Serializer):
    engine_id = serializers.CharField()
    epoch = serializers.IntegerField()
    expires_at = MillisecondsAsISOField(help_text="When the claim expires (ISO 8601, UTC).")
    claimed_at = MillisecondsAsISOField(help_text="When the claim was taken (ISO 8601, UTC).")
    expires_at_ms = serializers.IntegerField(
        source="expires_at", help_text="expires_at as engine-clock ms since the epoch."
    )
    claimed_at_ms = serializers.IntegerField(
        source="claimed_at", help_text="claimed_at as engine-clock ms since the epoch."
    )


class OwnerSerializer(HolderSerializer):
    expired = serializers.BooleanField(
        help_text="The holder's claim expired (past expires_at + takeover grace)."
    )


class SignalAcceptedSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    run_id = serializers.UUIDField()
    signal_id = serializers.IntegerField()
    name = serializers.CharField()


class PurgeResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    purged_runs = serializers.IntegerField()


class BulkResultSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["cancel", "resume", "retry"])
    matched = serializers.IntegerField(help_text="Runs the filter matched.")
    changed = serializers.IntegerField(help_text="Runs changed (dry run: that would change).")
    skipped = serializers.IntegerField(
        help_text="Matched runs the action does not apply to now (already ended, not "
        "suspended, not failed, superseded, or changed meanwhile); dry run: would skip."
    )
    dry_run = serializers.BooleanField()
    cascaded = serializers.IntegerField(
        help_text="Live descendants a cancel ended with their parent."
    )
    chunks = serializers.IntegerField(help_text="Batches (of up to 200 runs) committed.")
    filter = serializers.CharField(help_text="The filter, in words.")


class QueryResultSerializer(serializers.Serializer):
    workflow_id = serializers.CharField()
    name = serializers.CharField()
    result = JSONPayloadField(what="query result", allow_null=True)


class OwnershipSerializer(serializers.Serializer):
    """`client.ownership_status(id)`."""

    workflow_id = serializers.CharField()
    status = serializers.ChoiceField(choices=list(RUN_STATUSES), allow_null=True)
    epoch = serializers.IntegerField()
    holder = HolderSerializer(allow_null=True)
    expired = serializers.BooleanField()


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
    """The cluster's claim counters: every engine's `EngineRecord.metrics` summed."""

    version = serializers.IntegerField()
    attempts = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Claim attempts by outcome (acquired, takeover, lost_race, deposed, "
        "rotated, backoff_skipped), summed over every engine, live and past.",
    )
    active_claims = serializers.IntegerField(
        help_text="Sum of the active-claims gauge of engines not stopped."
    )
    renewal_failures = serializers.IntegerField()
    wakes = WakeCountSerializer(many=True)
    abandoned_activity_threads = serializers.IntegerField(
        help_text="Sync activity threads abandoned while still running (a timeout, a "
        "heartbeat timeout, a result no longer wanted), summed over every engine."
    )
    workflow_cache_hits = serializers.IntegerField(
        help_text="Turns that resumed their run's cached replay (WORKFLOW_CACHE_SIZE), "
        "summed over every engine."
    )
    workflow_cache_misses = serializers.IntegerField(
        help_text="Turns of engines with the workflow cache on that found no valid cached "
        "replay and replayed the journal in full, summed over every engine."
    )
    engines = EngineCountsSerializer()
    claims = ClaimCountsSerializer()
    runs_by_status = serializers.DictField(child=serializers.IntegerField())
    due_timers = serializers.IntegerField()
    oldest_due_timer_lag_ms = serializers.IntegerField(allow_null=True)


class AsyncSettledSerializer(serializers.Serializer):
    # A CharField, not a ChoiceField: a second enum named "status" would collide
    # with the run status enum in the generated schema.
    status = serializers.CharField(help_text='"completed" or "failed".')


__all__ = [
    "AsyncSettledSerializer",
    "BulkResultSerializer",
    "ClaimCountsSerializer",
    "EngineCountsSerializer",
    "ErrorSerializer",
    "HolderSerializer",
    "MetricsSerializer",
    "OwnerSerializer",
    "OwnershipSerializer",
    "PurgeResultSerializer",
    "QueryResultSerializer",
    "SignalAcceptedSerializer",
    "ValidationErrorSerializer",
    "WakeCountSerializer",
]
