"""The confirmation page of run actions that stop work (cancel, force cancel, suspend).

The invariant it protects: such an action writes nothing on the first post
from the changelist; it shows what it will do to how many runs, and only a
second post carrying ``post=yes`` (the page's button) acts -- as Django's
own delete action confirms. "Select all" stays a filter (``select_across``),
never a list of 10,000 ids in the page.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from weft_django.models import WorkflowRun

#: How many of the selected runs the page lists by id.
SHOWN = 20


def confirmed(request: HttpRequest) -> bool:
    """Whether this post is the confirmation page's "yes"."""
    return request.POST.get("post") == "yes"


def confirmation_page(
    model_admin: Any,
    request: HttpRequest,
    queryset: QuerySet[WorkflowRun],
    *,
    action_name: str,
    label: str,
    explanation: str,
    confirm_label: str,
) -> HttpResponse:
    """The page asking to confirm ``action_name`` on ``queryset``."""
    select_across = request.POST.get("select_across") == "1"
    rows = list(queryset.only("pk", "workflow_id", "name", "status")[: SHOWN + 1])
    count = queryset.count() if select_across or len(rows) > SHOWN else len(rows)
    selected = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"{label}: are you sure?",
        "label": label,
        "explanation": explanation,
        "confirm_label": confirm_label,
        "opts": model_admin.model._meta,
        "count": count,
        "shown": rows[:SHOWN],
        "more": max(0, count - SHOWN),
        "select_across": select_across,
        "first_pk": selected[0] if selected else "",
        "pks": [] if select_across else [row.pk for row in queryset.only("pk")],
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "action_name": action_name,
        "media": model_admin.media,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "admin/weft/workflowrun/action_confirmation.html", context)


__all__ = ["SHOWN", "confirmation_page", "confirmed"]
