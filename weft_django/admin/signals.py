"""Signals: what was sent to each run, and whether the run has consumed it yet.

Read-only (``base``): a signal row is written by ``client.signal`` with the
run's wake in one batch and consumed by the owner's fenced turn, so nothing
here changes it. "Buffered" is a signal no turn has consumed
(``consumed_at_position`` unset): what a parked run has waiting for it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from weft_django.models import SignalMessage

from .base import ReadOnlyAdmin, admin_link, json_text, pre_json
from .search import EXACT_SEARCH_HELP, ExactSearchMixin


class SignalStateFilter(admin.SimpleListFilter):
    """buffered (not consumed yet) / consumed."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("buffered", "buffered"), ("consumed", "consumed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any] | None:
        if self.value() == "buffered":
            return queryset.filter(consumed_at_position__isnull=True)
        if self.value() == "consumed":
            return queryset.filter(consumed_at_position__isnull=False)
        return queryset


@admin.register(SignalMessage)
class SignalMessageAdmin(ExactSearchMixin, ReadOnlyAdmin):
    """Signals per run: name, payload, received, buffered or consumed at which step."""

    list_display = ("id", "workflow", "run_status", "name", "received_at", "state", "payload_text")
    list_filter = (SignalStateFilter, "name")
    list_select_related = ("run",)
    search_fields = ("run__workflow_id", "name")
    search_help_text = f"workflow id or signal name, {EXACT_SEARCH_HELP}"
    ordering = ("-id",)
    list_per_page = 100
    fields = ("workflow", "run_status", "name", "received_at", "state", "payload_pretty")
    readonly_fields = fields

    @admin.display(description="workflow id", ordering="run__workflow_id")
    def workflow(self, message: SignalMessage) -> str:
        return admin_link("admin:weft_workflowrun_change", message.run_id, message.run.workflow_id)

    @admin.display(description="run status")
    def run_status(self, message: SignalMessage) -> str:
        return message.run.status

    @admin.display(description="state", ordering="consumed_at_position")
    def state(self, message: SignalMessage) -> str:
        if message.consumed_at_position is None:
            return "buffered"
        return f"consumed at step {message.consumed_at_position}"

    @admin.display(description="payload")
    def payload_text(self, message: SignalMessage) -> str:
        return json_text(message.payload, 120)

    @admin.display(description="payload")
    def payload_pretty(self, message: SignalMessage) -> SafeString:
        return pre_json(message.payload)


__all__ = ["SignalMessageAdmin", "SignalStateFilter"]
