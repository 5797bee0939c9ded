"""Async activities: the tokens handed to outside systems, and staff's complete / fail.

Read-only like every weft admin (``base``). The raw token is never stored
(only its SHA-256), so it is never shown: the page names an activity by the
first ``TOKEN_HASH_PREFIX_LEN`` hex digits of the hash, as the API does.

"Complete" and "fail" are for the case the outside system will never call
back (it lost the token, or a person decided). They go through
``client.complete_async_activity_by_hash`` / ``fail_async_activity_by_hash``
-- the API's settlement, single use and fenced on the row still being
``pending`` -- never a row write of their own, and need the model's
*change* permission (``weft.change_asyncactivity``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.forms import Form
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from weft_django import client
from weft_django.errors import WeftError
from weft_django.kernel.ids import TOKEN_HASH_PREFIX_LEN
from weft_django.models import AsyncActivity, AsyncStatus

from .async_forms import CompleteAsyncForm, FailAsyncForm
from .base import WeftDatabaseMixin, admin_link, json_text, payload_pre, payload_text, pre_json
from .reporting import ActionReport, refusal_reason
from .search import EXACT_SEARCH_HELP, ExactSearchMixin

_STATUS_COLOURS = {"pending": "#205067", "completed": "#2e7d32", "failed": "#ba2121"}


def token_prefix(row: AsyncActivity) -> str:
    return f"{row.token_hash[:TOKEN_HASH_PREFIX_LEN]}…"


@admin.register(AsyncActivity)
class AsyncActivityAdmin(ExactSearchMixin, WeftDatabaseMixin, admin.ModelAdmin):
    """Pending and settled async activities; complete / fail through ``client``."""

    list_display = (
        "token",
        "workflow",
        "target",
        "position",
        "status_text",
        "created_at",
        "completed_at",
        "outcome",
    )
    list_filter = ("status", "target")
    list_select_related = ("run",)
    search_fields = ("run__workflow_id", "target")
    search_help_text = f"workflow id or activity name, {EXACT_SEARCH_HELP}"
    ordering = ("-created_at",)
    list_per_page = 100
    actions = ("complete_async_activities", "fail_async_activities")
    fields = (
        "token",
        "workflow",
        "target",
        "position",
        "status_text",
        "created_at",
        "completed_at",
        "result_pretty",
        "error_pretty",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Object pages are view-only; the changelist keeps "change" for the actions.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    # -- columns --
    @admin.display(description="token (SHA-256 prefix)")
    def token(self, row: AsyncActivity) -> str:
        return token_prefix(row)

    @admin.display(description="workflow id", ordering="run__workflow_id")
    def workflow(self, row: AsyncActivity) -> str:
        return admin_link("admin:weft_workflowrun_change", row.run_id, row.run.workflow_id)

    @admin.display(description="status", ordering="status")
    def status_text(self, row: AsyncActivity) -> str:
        colour = _STATUS_COLOURS.get(row.status, "#666")
        return format_html('<strong style="color:{}">{}</strong>', colour, row.status)

    @admin.display(description="result / error")
    def outcome(self, row: AsyncActivity) -> str:
        if row.error is not None:
            return format_html('<span style="color:#ba2121">{}</span>', json_text(row.error, 120))
        return "-" if row.status == AsyncStatus.PENDING else payload_text(row.result, 120)

    @admin.display(description="result")
    def result_pretty(self, row: AsyncActivity) -> SafeString:
        return payload_pre(row.result)

    @admin.display(description="error")
    def error_pretty(self, row: AsyncActivity) -> SafeString:
        return pre_json(row.error)

    # -- actions: a form page, then the client's settlement per activity --
    @admin.action(
        description="Complete selected pending async activities (the workflow resumes "
        "with the result you enter)",
        permissions=["change"],
    )
    def complete_async_activities(
        self, request: HttpRequest, queryset: QuerySet[AsyncActivity]
    ) -> HttpResponse | None:
        form = CompleteAsyncForm(request.POST if "post" in request.POST else None)
        if not form.is_valid():
            return self._form_page(request, queryset, form, "complete_async_activities")
        result = form.cleaned_data["result"]
        self._settle(
            request,
            queryset,
            "completed",
            lambda token_hash: client.complete_async_activity_by_hash(token_hash, result),
            "complete_async_activities",
        )
        return None

    @admin.action(
        description="Fail selected pending async activities (the workflow sees an "
        "ActivityError with the message you enter)",
        permissions=["change"],
    )
    def fail_async_activities(
        self, request: HttpRequest, queryset: QuerySet[AsyncActivity]
    ) -> HttpResponse | None:
        form = FailAsyncForm(request.POST if "post" in request.POST else None)
        if not form.is_valid():
            return self._form_page(request, queryset, form, "fail_async_activities")
        record = form.error_record()
        self._settle(
            request,
            queryset,
            "failed",
            lambda token_hash: client.fail_async_activity_by_hash(token_hash, record),
            "fail_async_activities",
        )
        return None

    def _settle(
        self,
        request: HttpRequest,
        queryset: QuerySet[AsyncActivity],
        verb: str,
        settle: Callable[[str], None],
        name: str,
    ) -> None:
        report = ActionReport(verb, "async activity", plural="async activities")
        for row in queryset.select_related("run"):
            label = f"{row.run.workflow_id} {token_prefix(row)}"
            try:
                settle(row.token_hash)
            except WeftError as exc:
                report.refuse(refusal_reason(exc), label)
            else:
                report.ok(row, label)
        report.send(request, name)

    def _form_page(
        self, request: HttpRequest, queryset: QuerySet[AsyncActivity], form: Form, name: str
    ) -> TemplateResponse:
        if not form.is_bound:
            form.initial = {"action": name, "post": "yes"}
        rows = list(queryset.select_related("run"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Complete async activities"
            if name.startswith("complete")
            else "Fail async activities",
            "opts": self.model._meta,
            "form": form,
            "rows": [{"obj": row, "token": token_prefix(row)} for row in rows],
            "pending": sum(1 for row in rows if row.status == AsyncStatus.PENDING),
            "queryset": queryset,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action_name": name,
            "media": self.media + form.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/weft/asyncactivity/settle_form.html", context)


__all__ = ["AsyncActivityAdmin", "token_prefix"]
