"""The store-wide rows (mode marker, global lease) and the claim history: read-only."""

from __future__ import annotations

from django.contrib import admin

from weft_django.inspection import format_ms
from weft_django.models import ClaimEvent, GlobalLease, OwnershipModeMarker

from .base import ReadOnlyAdmin
from .search import EXACT_SEARCH_HELP, ExactSearchMixin


@admin.register(OwnershipModeMarker)
class OwnershipModeMarkerAdmin(ReadOnlyAdmin):
    """The store-wide mode marker; deleting it is ``weft_reset_mode``'s job."""

    list_display = ("mode", "established")
    fields = ("key", "mode", "established")
    readonly_fields = fields

    @admin.display(description="established at", ordering="established_at")
    def established(self, marker: OwnershipModeMarker) -> str:
        return format_ms(marker.established_at)


@admin.register(GlobalLease)
class GlobalLeaseAdmin(ReadOnlyAdmin):
    """The ``lease`` mode singleton."""

    list_display = ("key", "epoch", "holder_id", "expires")
    fields = ("key", "epoch", "holder_id", "expires")
    readonly_fields = fields

    @admin.display(description="expires at", ordering="expires_at")
    def expires(self, lease: GlobalLease) -> str:
        return format_ms(lease.expires_at, with_relative=True)


@admin.register(ClaimEvent)
class ClaimEventAdmin(ExactSearchMixin, ReadOnlyAdmin):
    """The append-only claim history across every workflow."""

    list_display = ("id", "workflow_id", "kind", "epoch", "engine_id", "at", "reason")
    list_filter = ("kind",)
    search_fields = ("workflow_id", "engine_id")
    search_help_text = f"workflow id or engine id, {EXACT_SEARCH_HELP}"
    ordering = ("-id",)
    list_per_page = 100
    fields = (
        "workflow_id",
        "kind",
        "epoch",
        "engine_id",
        "at",
        "reason",
        "previous_engine_id",
        "previous_expires",
    )
    readonly_fields = fields

    @admin.display(description="at", ordering="at_ms")
    def at(self, event: ClaimEvent) -> str:
        return format_ms(event.at_ms)

    @admin.display(description="previous holder expired at")
    def previous_expires(self, event: ClaimEvent) -> str:
        return format_ms(event.previous_expires_at)


__all__ = ["ClaimEventAdmin", "GlobalLeaseAdmin", "OwnershipModeMarkerAdmin"]
