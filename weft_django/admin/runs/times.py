"""A run's instants and duration on its admin page, one way (``inspection.format``).

The invariant it protects: every instant of the run page is shown in the
project's time zone to the second, with a relative form ("in 2 h", "3 min
ago") where the distance to now is what a person asks about; no epoch
milliseconds; a finished run shows how long it took.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from weft_django.inspection import format_age, format_instant, format_ms
from weft_django.models import WorkflowRun


class RunTimesMixin:
    """The ``*_text`` display fields of a run's instants, and its duration."""

    @admin.display(description="created", ordering="created_at")
    def created_text(self, run: WorkflowRun) -> str:
        return format_instant(run.created_at, with_relative=True)

    @admin.display(description="updated")
    def updated_text(self, run: WorkflowRun) -> str:
        return format_instant(run.updated_at, with_relative=True)

    @admin.display(description="started")
    def started_text(self, run: WorkflowRun) -> str:
        return format_instant(run.started_at)

    @admin.display(description="finished", ordering="finished_at")
    def finished_text(self, run: WorkflowRun) -> str:
        return format_instant(run.finished_at, with_relative=True)

    @admin.display(description="duration")
    def duration(self, run: WorkflowRun) -> str:
        """Created to finished (a finished run), or created to now (a live one)."""
        end = run.finished_at or timezone.now()
        text = format_age((end - run.created_at).total_seconds())
        return text if run.finished_at else f"{text} so far"

    @admin.display(description="cancel requested")
    def cancel_requested_text(self, run: WorkflowRun) -> str:
        return format_instant(run.cancel_requested_at, with_relative=True)

    @admin.display(description="start at")
    def start_at_text(self, run: WorkflowRun) -> str:
        return format_ms(run.start_at, with_relative=True)

    @admin.display(description="deadline")
    def deadline_text(self, run: WorkflowRun) -> str:
        return format_ms(run.deadline_at, with_relative=True)

    @admin.display(description="cancel grace ends")
    def cancel_deadline_text(self, run: WorkflowRun) -> str:
        return format_ms(run.cancel_deadline_at, with_relative=True)


__all__ = ["RunTimesMixin"]
