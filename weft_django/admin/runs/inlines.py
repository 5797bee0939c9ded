"""The read-only inlines of a run's page: its journal, its timers and the latest
heartbeat of each activity command. Times are engine-clock milliseconds, shown
as dates; nothing here writes (``base.ReadOnlyInline``)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString

from weft_django.admin.base import ReadOnlyInline, admin_link, payload_text, pre_json
from weft_django.inspection import format_age, format_ms
from weft_django.kernel.clock import wall_ms
from weft_django.models import ActivityHeartbeat, JournalEntry, Timer


class JournalEntryInline(ReadOnlyInline):
    model = JournalEntry
    fields = ("position", "kind", "command", "target", "outcome", "engine_id", "epoch", "at")
    readonly_fields = fields
    ordering = ("position",)
    verbose_name_plural = "journal"

    @admin.display(description="result / error")
    def outcome(self, entry: JournalEntry) -> str:
        if entry.error is not None:
            return format_html(
                '<span style="color:#ba2121">{}</span>', payload_text(entry.error, 200)
            )
        return payload_text(entry.result, 200)

    @admin.display(description="at")
    def at(self, entry: JournalEntry) -> str:
        return format_ms(entry.at_ms)


class TimerInline(ReadOnlyInline):
    model = Timer
    fields = ("kind", "position", "fire", "due_in", "dispatched", "engine_id", "epoch")
    readonly_fields = fields
    ordering = ("fire_at",)

    @admin.display(description="fire at")
    def fire(self, timer: Timer) -> str:
        return format_ms(timer.fire_at, with_relative=True)

    @admin.display(description="due in")
    def due_in(self, timer: Timer) -> str:
        return format_age((timer.fire_at - wall_ms()) / 1000)

    @admin.display(description="dispatched at")
    def dispatched(self, timer: Timer) -> str:
        return format_ms(timer.dispatched_at)


class ActivityHeartbeatInline(ReadOnlyInline):
    """The latest heartbeat of each activity command: what the activity reported."""

    model = ActivityHeartbeat
    fields = ("position", "attempt", "details_pretty", "beat", "engine", "epoch")
    readonly_fields = fields
    ordering = ("position",)
    verbose_name = "activity progress"
    verbose_name_plural = "Activity progress"

    @admin.display(description="details")
    def details_pretty(self, beat: ActivityHeartbeat) -> SafeString:
        return pre_json(beat.details)

    @admin.display(description="beat at")
    def beat(self, beat: ActivityHeartbeat) -> str:
        return format_ms(beat.beat_at)

    @admin.display(description="engine")
    def engine(self, beat: ActivityHeartbeat) -> str:
        if not beat.engine_id:
            return "-"
        return admin_link("admin:weft_enginerecord_change", beat.engine_id, beat.engine_id)


__all__ = ["ActivityHeartbeatInline", "JournalEntryInline", "TimerInline"]
