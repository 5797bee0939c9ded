"""The run changelist's triage columns: a coloured status badge, why a run is where it
is (a failed run's error headline, what a parked run waits for), and a cancel mark only
where a cancel is pending.

The invariant it protects: the list reads only what each row's page would show
(``inspection``/``engine.runs.waits``), never writes, and costs a bounded amount
per row: the waits of a parked row are asked only for the page's rows.
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html
from django.utils.safestring import SafeString

from weft_django.engine.runs.waits import run_waits, waits_summary
from weft_django.models import TERMINAL_STATUSES, WorkflowRun

#: The most characters of the "why" cell (the full text is its tooltip).
WHY_LIMIT = 120


def error_headline(error: object) -> str:
    """``Type: message`` of a recorded error (first line of the message)."""
    if not isinstance(error, dict):
        return "" if error is None else str(error)
    message = str(error.get("message") or "").splitlines()
    headline = f"{error.get('type') or 'Error'}: {message[0] if message else ''}"
    return headline.rstrip(": ")


def why(run: WorkflowRun) -> str:
    """Why the run is where it is, in one line (empty when nothing needs saying)."""
    if run.status in ("failed", "timed_out"):
        return error_headline(run.error)
    if run.status == "suspended":
        return run.suspended_reason or ""
    if run.status == "cancelled":
        return run.cancel_reason or error_headline(run.error)
    if run.status == "parked":
        return "waits for " + (waits_summary(run_waits(run)) or "nothing it can say")
    return ""


class RunListMixin:
    """The changelist's triage columns of ``WorkflowRunAdmin``."""

    class Media:
        css = {"all": ("weft/admin.css",)}

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: WorkflowRun) -> SafeString:
        return format_html('<span class="weft-badge {}">{}</span>', run.status, run.status)

    @admin.display(description="why")
    def why(self, run: WorkflowRun) -> SafeString | str:
        text = why(run)
        if not text:
            return ""
        shown = text if len(text) <= WHY_LIMIT else text[: WHY_LIMIT - 1] + "…"
        return format_html('<span title="{}">{}</span>', text, shown)

    @admin.display(description="cancel", ordering="cancel_requested_at")
    def cancel_pending(self, run: WorkflowRun) -> SafeString | str:
        """A mark only while a requested cancel is pending (the run has not ended)."""
        if run.cancel_requested_at is None or run.status in TERMINAL_STATUSES:
            return ""
        return format_html('<span class="weft-cancel-pending">{}</span>', "cancel pending")


__all__ = ["WHY_LIMIT", "RunListMixin", "error_headline", "why"]
