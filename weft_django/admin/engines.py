"""Engine boots: alive (the querysets' rule), node, heartbeat age, claims held, counters."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string

from weft_django.inspection import alive_window_ms, engine_is_alive, format_age, format_ms
from weft_django.kernel.clock import wall_ms
from weft_django.models import EngineRecord
from weft_django.ownership.metrics import CLAIM_ATTEMPT_OUTCOMES, ClaimMetricsSnapshot

from .base import ReadOnlyAdmin


class EngineAliveFilter(admin.SimpleListFilter):
    title = "alive"
    parameter_name = "alive"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "alive"), ("no", "stopped or silent")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        if self.value() == "yes":
            return queryset.alive(wall_ms())  # type: ignore[attr-defined,no-any-return]
        if self.value() == "no":
            return queryset.not_alive(wall_ms())  # type: ignore[attr-defined,no-any-return]
        return queryset


def _counters(record: EngineRecord) -> ClaimMetricsSnapshot:
    return ClaimMetricsSnapshot.from_json(record.metrics)


@admin.register(EngineRecord)
class EngineRecordAdmin(ReadOnlyAdmin):
    """Engine boots: alive, node, heartbeat age, claims held, their counters."""

    list_display = (
        "engine_id",
        "alive",
        "node_name",
        "host",
        "pid",
        "mode",
        "transport",
        "heartbeat_age",
        "claims_held",
        "counters",
        "started",
    )
    list_filter = (EngineAliveFilter, "mode", "transport")
    search_fields = ("engine_id", "node_name", "host")
    list_per_page = 50
    fields = (
        "engine_id",
        "alive",
        "node_name",
        "host",
        "pid",
        "mode",
        "pool",
        "transport",
        "started",
        "heartbeat",
        "heartbeat_age",
        "stopped",
        "claims_held",
        "counters_table",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[EngineRecord]:
        return super().get_queryset(request).with_claims_held()  # type: ignore[attr-defined,no-any-return]

    @admin.display(description="alive", boolean=True)
    def alive(self, record: EngineRecord) -> bool:
        return engine_is_alive(record, wall_ms(), alive_window_ms())

    @admin.display(description="heartbeat age", ordering="-heartbeat_at")
    def heartbeat_age(self, record: EngineRecord) -> str:
        return format_age((wall_ms() - record.heartbeat_at) / 1000)

    @admin.display(description="claims held", ordering="claims_held")
    def claims_held(self, record: EngineRecord) -> int:
        return int(getattr(record, "claims_held", 0) or 0)

    @admin.display(description="claim attempts")
    def counters(self, record: EngineRecord) -> str:
        snap = _counters(record)
        return " · ".join(f"{o} {snap.attempts.get(o, 0)}" for o in CLAIM_ATTEMPT_OUTCOMES)

    @admin.display(description="started", ordering="started_at")
    def started(self, record: EngineRecord) -> str:
        return format_ms(record.started_at)

    @admin.display(description="heartbeat")
    def heartbeat(self, record: EngineRecord) -> str:
        return format_ms(record.heartbeat_at, with_relative=True)

    @admin.display(description="stopped")
    def stopped(self, record: EngineRecord) -> str:
        return format_ms(record.stopped_at)

    @admin.display(description="counters (at last heartbeat)")
    def counters_table(self, record: EngineRecord) -> str:
        snap = _counters(record)
        return render_to_string(
            "admin/weft/includes/counters.html",
            {
                "attempts": [(o, snap.attempts.get(o, 0)) for o in CLAIM_ATTEMPT_OUTCOMES],
                "active_claims": snap.active_claims,
                "renewal_failures": snap.renewal_failures,
                "abandoned_activity_threads": snap.abandoned_activity_threads,
                "workflow_cache_hits": snap.workflow_cache_hits,
                "workflow_cache_misses": snap.workflow_cache_misses,
                "wakes": [
                    {"kind": k, "decision": d, "transport": t, "count": n}
                    for (k, d, t), n in sorted(snap.wakes.items())
                ],
            },
        )


__all__ = ["EngineAliveFilter", "EngineRecordAdmin"]
