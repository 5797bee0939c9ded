"""Response bodies that are ownership rows: claims, claim events, engines.

Each body is a row plus the values the read model annotates on its queryset (a
claim's ``state`` and ``expires_in_ms``, an engine's ``alive``, ``heartbeat_age_ms``
and ``claims_held``), so no view builds a dict. Every field is declared, not
generated: the published schema keeps its types, nullability and help texts
whatever the model's own field options are. An engine's counters are decoded
fail-closed (``inspection.engine_counters``): a junk document reads as zeros.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from weft_django.inspection import CLAIM_STATES, engine_counters
from weft_django.models import CLAIM_EVENT_KINDS, ClaimEvent, EngineRecord, WorkflowClaim


class EngineCountersField(serializers.DictField):
    """``EngineRecord.metrics`` decoded fail-closed (junk counters read as zero)."""

    def to_representation(self, value: Any) -> dict[str, Any]:
        return engine_counters(value)


class ClaimEventSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField()
    workflow_id = serializers.CharField()
    epoch = serializers.IntegerField()
    engine_id = serializers.CharField(allow_blank=True)
    kind = serializers.ChoiceField(choices=list(CLAIM_EVENT_KINDS))
    at_ms = serializers.IntegerField(help_text="Engine clock, ms since the epoch.")
    reason = serializers.CharField(allow_blank=True)
    previous_engine_id = serializers.CharField(allow_blank=True)
    previous_expires_at = serializers.IntegerField(
        allow_null=True, help_text="Engine clock, ms since the epoch."
    )

    class Meta:
        model = ClaimEvent
        fields = (
            "id",
            "workflow_id",
            "epoch",
            "engine_id",
            "kind",
            "at_ms",
            "reason",
            "previous_engine_id",
            "previous_expires_at",
        )


class ClaimSerializer(serializers.ModelSerializer):
    # ``state`` and ``expires_in_ms`` are annotated by ``WorkflowClaim.objects.with_state``.

    workflow_id = serializers.CharField()
    epoch = serializers.IntegerField()
    engine_id = serializers.CharField(allow_null=True)
    claimed_at = serializers.IntegerField(
        allow_null=True, help_text="Engine clock, ms since the epoch."
    )
    expires_at = serializers.IntegerField(
        allow_null=True, help_text="Engine clock, ms since the epoch."
    )
    state = serializers.ChoiceField(
        choices=list(CLAIM_STATES),
        help_text="released: no holder; expired: past expires_at + takeover grace, or a "
        "corrupt holder (engines take it over at once).",
    )
    expires_in_ms = serializers.IntegerField(
        allow_null=True, help_text="expires_at minus now (negative once expired)."
    )

    class Meta:
        model = WorkflowClaim
        fields = (
            "workflow_id",
            "epoch",
            "engine_id",
            "claimed_at",
            "expires_at",
            "state",
            "expires_in_ms",
        )


class EngineSerializer(serializers.ModelSerializer):
    # ``alive``, ``heartbeat_age_ms`` and ``claims_held`` are annotated by
    # ``EngineRecord.objects.with_liveness`` and ``with_claims_held``.

    engine_id = serializers.CharField()
    node_name = serializers.CharField(allow_blank=True)
    host = serializers.CharField(allow_blank=True)
    pid = serializers.IntegerField(allow_null=True)
    mode = serializers.CharField()
    pool = serializers.CharField(allow_blank=True)
    transport = serializers.CharField(allow_blank=True)
    started_at = serializers.IntegerField(help_text="Engine clock, ms since the epoch.")
    heartbeat_at = serializers.IntegerField(help_text="Engine clock, ms since the epoch.")
    stopped_at = serializers.IntegerField(
        allow_null=True, help_text="Engine clock, ms since the epoch."
    )
    alive = serializers.BooleanField(
        help_text="Not stopped, and its heartbeat is younger than 3 × CLAIM_RENEW_INTERVAL "
        "(as in the admin, weft_status and /metrics)."
    )
    heartbeat_age_ms = serializers.IntegerField()
    claims_held = serializers.IntegerField()
    metrics = EngineCountersField(child=serializers.JSONField())

    class Meta:
        model = EngineRecord
        fields = (
            "engine_id",
            "node_name",
            "host",
            "pid",
            "mode",
            "pool",
            "transport",
            "started_at",
            "heartbeat_at",
            "stopped_at",
            "alive",
            "heartbeat_age_ms",
            "claims_held",
            "metrics",
        )


__all__ = ["ClaimEventSerializer", "ClaimSerializer", "EngineSerializer"]
