"""The run page's "fork / reset from here": one journal entry's repair form.

Writes only through ``client.fork`` / ``client.reset`` (every check before
anything is written; a refusal is an error message, nothing written), under
the change permission, and audited (``client.audit.log_repair``, the record
the API and the CLI write too): the source run and the new run each get an
admin ``LogEntry`` naming the action, the position and the operator, and a
reset's claim rotation records ``admin:<user>`` as its actor. Only the latest
run of a workflow id can be repaired (the client acts on the latest run).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from weft_django import client
from weft_django.admin.base import actor, db
from weft_django.client.audit import log_repair
from weft_django.errors import WeftError
from weft_django.models import WorkflowRun


def repair_urls(model_admin: admin.ModelAdmin[WorkflowRun]) -> list[URLPattern]:
    """``<run pk>/repair/<position>/`` (what each journal entry links to)."""
    view = model_admin.admin_site.admin_view(
        lambda request, object_id, position: repair_view(model_admin, request, object_id, position)
    )
    return [path("<path:object_id>/repair/<int:position>/", view, name="weft_workflowrun_repair")]


def repair_view(
    model_admin: admin.ModelAdmin[WorkflowRun], request: HttpRequest, object_id: str, position: int
) -> HttpResponse:
    if not model_admin.has_change_permission(request):
        raise PermissionDenied
    run = WorkflowRun.objects.using(db()).filter(pk=object_id).first()
    if run is None:
        raise Http404(f"no run {object_id!r}")
    page = reverse("admin:weft_workflowrun_change", args=[run.pk])
    if request.method != "POST":
        context: dict[str, Any] = {
            **model_admin.admin_site.each_context(request),
            "opts": model_admin.model._meta,
            "run": run,
            "position": position,
            "title": f"Fork or reset {run.workflow_id} at position {position}",
        }
        return TemplateResponse(request, "admin/weft/workflowrun/repair_form.html", context)
    action = request.POST.get("action")
    latest = WorkflowRun.objects.using(db()).latest_for(run.workflow_id)
    if latest is None or latest.pk != run.pk:
        messages.error(request, f"{run.workflow_id}: not the latest run of its workflow id.")
        return HttpResponseRedirect(page)
    who = actor(request)
    try:
        if action == "fork":
            handle = client.fork(
                run.workflow_id,
                at_position=position,
                workflow_id_for_fork=request.POST.get("workflow_id_for_fork") or None,
                actor=who,
            )
        elif action == "reset":
            reason = request.POST.get("reason") or f"reset by {who}"
            handle = client.reset(run.workflow_id, at_position=position, reason=reason, actor=who)
        else:
            raise Http404(f"no repair action {action!r}")
    except WeftError as exc:
        messages.error(request, f"{action} refused: {exc}")
        return HttpResponseRedirect(page)
    new = WorkflowRun.objects.using(db()).get(pk=handle.run_id)
    verb = "Forked" if action == "fork" else "Reset"
    log_repair(
        "fork" if action == "fork" else "reset", str(new.pk), position, actor=who, user=request.user
    )
    messages.success(request, f"{verb} {run.workflow_id} at position {position}: run {new.pk}.")
    return HttpResponseRedirect(reverse("admin:weft_workflowrun_change", args=[new.pk]))


__all__ = ["repair_urls", "repair_view"]
