"""The run page's layout: the timeline picture first, then only the fields that say
something for this run.

The invariant it protects: a field with nothing to say for this run (no parent,
no cancel, no queue, no deadline, ...) is not shown as a row of "-"; the
identity, status, times and duration are always shown.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.safestring import SafeString

from weft_django.admin.base import db
from weft_django.models import RunSearchAttribute, WorkflowRun

from .chart import run_chart

#: Shown whatever their value.
ALWAYS = {"workflow_id", "status", "name", "id", "created_text", "duration", "claim_state_text"}

#: The run's model value behind a display field, to tell whether it says anything.
_VALUE_OF = {
    "idempotency_key": "idempotency_key",
    "parent": "parent_id",
    "continued_from": "continued_from_id",
    "suspended_reason": "suspended_reason",
    "cancel_requested_text": "cancel_requested_at",
    "cancel_deadline_text": "cancel_deadline_at",
    "queue": "queue",
    "concurrency_key": "concurrency_key",
    "started_text": "started_at",
    "finished_text": "finished_at",
    "start_at_text": "start_at",
    "deadline_text": "deadline_at",
    "result_pretty": "result",
    "error_pretty": "error",
}

FIELDSETS: tuple[tuple[str | None, dict[str, Any]], ...] = (
    ("Timeline", {"fields": ("timeline_chart",)}),
    (
        None,
        {
            "fields": (
                ("workflow_id", "status"),
                ("name", "id"),
                ("owner_engine", "claim_epoch", "claim_state_text"),
                "idempotency_key",
                ("parent", "continued_from"),
                "suspended_reason",
                ("cancel_requested_text", "cancel_reason_text", "cancel_deadline_text"),
                ("queue", "priority", "concurrency_key"),
                "waiting_reason_text",
                ("created_text", "updated_text", "started_text", "finished_text", "duration"),
                ("start_at_text", "deadline_text"),
                "search_attributes_text",
            )
        },
    ),
    ("Data", {"fields": ("input_pretty", "result_pretty", "error_pretty")}),
    ("Claim timeline", {"fields": ("claim_timeline",)}),
    ("Journal timeline", {"fields": ("journal_timeline",)}),
)


def cancel_reason(run: WorkflowRun) -> str:
    """Why the run was cancelled: the stored request's reason, or -- a cancel
    that ended the run at once -- the reason its recorded error carries."""
    if run.cancel_reason:
        return run.cancel_reason
    error = run.error if isinstance(run.error, dict) else {}
    if run.status == "cancelled" and error.get("type") == "Cancelled":
        return str(error.get("message") or "")
    return ""


def _says_something(run: WorkflowRun, field: str) -> bool:
    if field in ALWAYS:
        return True
    if field == "owner_engine" or field == "claim_epoch":
        return run.status not in ("completed", "failed", "cancelled", "timed_out")
    if field == "priority":
        return bool(run.queue)
    if field == "waiting_reason_text":
        return run.status in ("parked", "pending", "running", "suspended")
    if field == "result_pretty" and run.status != "completed":
        return False
    if field == "cancel_reason_text":
        return bool(cancel_reason(run))
    if field == "search_attributes_text":
        return RunSearchAttribute.objects.using(db()).filter(run_id=run.pk).exists()
    attr = _VALUE_OF.get(field)
    if attr is None:
        return True
    value = getattr(run, attr, None)
    return value not in (None, "", {}, [])


def visible_fieldsets(run: WorkflowRun | None) -> list[tuple[str | None, dict[str, Any]]]:
    """``FIELDSETS`` without the fields that say nothing for ``run``."""
    if run is None:
        return list(FIELDSETS)
    shown: list[tuple[str | None, dict[str, Any]]] = []
    for title, options in FIELDSETS:
        fields: list[Any] = []
        for item in options["fields"]:
            if isinstance(item, tuple):
                kept = tuple(f for f in item if _says_something(run, f))
                if kept:
                    fields.append(kept if len(kept) > 1 else kept[0])
            elif _says_something(run, item):
                fields.append(item)
        if fields:
            shown.append((title, {**options, "fields": tuple(fields)}))
    return shown


class RunLayoutMixin:
    """The run page's fieldsets and its timeline picture."""

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return visible_fieldsets(obj)

    @admin.display(description="cancel reason")
    def cancel_reason_text(self, run: WorkflowRun) -> str:
        return cancel_reason(run) or "-"

    @admin.display(description="steps")
    def timeline_chart(self, run: WorkflowRun) -> SafeString:
        return run_chart(run)


__all__ = ["FIELDSETS", "RunLayoutMixin", "cancel_reason", "visible_fieldsets"]
