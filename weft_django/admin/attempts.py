"""Activity attempts: every ended attempt of every run, newest first.

Read-only (``base``): an attempt row is written only by the fenced batch that
records its outcome (``models.attempts``), so nothing here changes it. A
paginated list rather than an inline of the run page: a run retried many
times has many attempts, and the run page's timeline already draws the
first ones (``runs.chart``); here they are searched by workflow id and
filtered by outcome, activity or engine.
"""

from __future__ import annotations

from django.contrib import admin

from weft_django.inspection import format_age, format_ms
from weft_django.inspection.attempts import error_text
from weft_django.models import ActivityAttempt

from .base import ReadOnlyAdmin, admin_link
from .search import EXACT_SEARCH_HELP, ExactSearchMixin


@admin.register(ActivityAttempt)
class ActivityAttemptAdmin(ExactSearchMixin, ReadOnlyAdmin):
    """Attempts: run, activity, number, outcome, start, duration, engine, error."""

    list_display = (
        "id",
        "workflow",
        "position",
        "activity",
        "attempt",
        "outcome",
        "started",
        "took",
        "engine_id",
        "error_shown",
    )
    list_filter = ("outcome", "activity")
    list_select_related = ("run",)
    search_fields = ("run__workflow_id", "activity", "engine_id")
    search_help_text = f"workflow id, activity or engine id, {EXACT_SEARCH_HELP}"
    ordering = ("-id",)
    list_per_page = 100
    fields = (
        "workflow",
        "position",
        "activity",
        "attempt",
        "outcome",
        "started",
        "ended",
        "took",
        "engine_id",
        "epoch",
        "error_shown",
    )
    readonly_fields = fields

    @admin.display(description="workflow id", ordering="run__workflow_id")
    def workflow(self, attempt: ActivityAttempt) -> str:
        return admin_link("admin:weft_workflowrun_change", attempt.run_id, attempt.run.workflow_id)

    @admin.display(description="started", ordering="started_at")
    def started(self, attempt: ActivityAttempt) -> str:
        return format_ms(attempt.started_at)

    @admin.display(description="ended", ordering="ended_at")
    def ended(self, attempt: ActivityAttempt) -> str:
        return format_ms(attempt.ended_at)

    @admin.display(description="took")
    def took(self, attempt: ActivityAttempt) -> str:
        return format_age((attempt.ended_at - attempt.started_at) / 1000)

    @admin.display(description="error")
    def error_shown(self, attempt: ActivityAttempt) -> str:
        return error_text(attempt) or "-"


__all__ = ["ActivityAttemptAdmin"]
