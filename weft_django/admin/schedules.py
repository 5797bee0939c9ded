"""Schedules: next fire, last tick, tick counts, recent runs; actions.

Read-only like every weft admin (``base``): the spec is changed through
``client.update_schedule`` (or ``WEFT["SCHEDULES"]``), never by a form
that would bypass validation and leave the driver unwoken. The actions --
pause, resume, trigger one run now -- go through ``client``, and need the
model's *change* permission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from weft_django import client
from weft_django.engine.schedules.rows import recent_runs, summary
from weft_django.errors import WeftError
from weft_django.inspection import format_ms
from weft_django.models import Schedule

from .base import WeftDatabaseMixin, admin_link, payload_pre, pre_json
from .reporting import ActionReport, refusal_reason


@admin.register(Schedule)
class ScheduleAdmin(WeftDatabaseMixin, admin.ModelAdmin):
    """Schedules with their next fire time and last runs; pause/resume/trigger."""

    list_display = (
        "schedule_id",
        "workflow",
        "when",
        "timezone",
        "overlap",
        "paused",
        "declared",
        "next_fire",
        "last_tick",
        "fired_count",
        "skipped_count",
        "missed_count",
    )
    list_filter = ("paused", "declared", "overlap", "workflow")
    search_fields = ("schedule_id", "workflow")
    list_per_page = 50
    actions = ("pause_schedules", "resume_schedules", "trigger_schedules")
    readonly_fields = (
        "schedule_id",
        "workflow",
        "when",
        "timezone",
        "overlap",
        "catchup_window_ms",
        "jitter_ms",
        "start_at_text",
        "end_at_text",
        "paused",
        "declared",
        "version",
        "next_fire_times",
        "last_tick",
        "tick_counts",
        "input_pretty",
        "last_runs",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Object pages are view-only; the changelist keeps "change" for the actions.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # -- columns --
    @admin.display(description="cron / every")
    def when(self, row: Schedule) -> str:
        return row.cron if row.cron is not None else f"every {(row.every_ms or 0) / 1000:g} s"

    @admin.display(description="next fire")
    def next_fire(self, row: Schedule) -> str:
        nxt = summary(row)["next_fire_at"]
        return "paused" if row.paused else (nxt or "-")

    @admin.display(description="next fire times")
    def next_fire_times(self, row: Schedule) -> str:
        times = summary(row, next_count=5)["next_fire_times"]
        return ", ".join(times) if times else "-"

    @admin.display(description="last tick")
    def last_tick(self, row: Schedule) -> str:
        return format_ms(row.last_tick_ms, with_relative=True)

    @admin.display(description="start at")
    def start_at_text(self, row: Schedule) -> str:
        return format_ms(row.start_at_ms)

    @admin.display(description="end at")
    def end_at_text(self, row: Schedule) -> str:
        return format_ms(row.end_at_ms)

    @admin.display(description="ticks")
    def tick_counts(self, row: Schedule) -> SafeString:
        return pre_json(summary(row)["ticks"])

    @admin.display(description="input")
    def input_pretty(self, row: Schedule) -> SafeString:
        return payload_pre(row.input)

    @admin.display(description="last runs")
    def last_runs(self, row: Schedule) -> SafeString:
        runs = recent_runs(row.schedule_id)
        if not runs:
            return format_html("{}", "-")
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{} ({})</li>",
                (
                    (
                        admin_link("admin:weft_workflowrun_change", r["run_id"], r["workflow_id"]),
                        r["status"],
                    )
                    for r in runs
                ),
            ),
        )

    # -- actions (through client; one summary message, a LogEntry per schedule) --
    def _apply(
        self,
        request: HttpRequest,
        queryset: QuerySet[Schedule],
        verb: str,
        action: Callable[[str], Any],
        name: str,
    ) -> None:
        report = ActionReport(verb, "schedule")
        for row in queryset.only("schedule_id", "workflow"):
            try:
                action(row.schedule_id)
            except WeftError as exc:
                report.refuse(refusal_reason(exc), row.schedule_id)
            else:
                report.ok(row, row.schedule_id)
        report.send(request, name)

    @admin.action(description="Pause selected schedules", permissions=["change"])
    def pause_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._apply(request, queryset, "paused", client.pause_schedule, "pause_schedules")

    @admin.action(description="Resume selected schedules", permissions=["change"])
    def resume_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._apply(request, queryset, "resumed", client.resume_schedule, "resume_schedules")

    @admin.action(
        description="Trigger selected schedules (one run now each)", permissions=["change"]
    )
    def trigger_schedules(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._apply(request, queryset, "triggered", client.trigger_schedule, "trigger_schedules")


__all__ = ["ScheduleAdmin"]
