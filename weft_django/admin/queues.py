"""Queues: every declared queue with its waiting, running, admitted and
rate-limited figures, read by ``inspection.queue_figures`` (the numbers
``weft_status`` and ``/metrics`` show, under the same bounded counts).

The page sits on ``QueueLock`` (one row per queue an admission has locked),
but lists the queues ``WEFT["QUEUES"]`` declares, locked yet or not: a queue
nobody has admitted to is still a queue with waiting runs. Read-only, like
every weft admin page; the run counts link to the runs changelist.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse

from weft_django.conf import get_settings
from weft_django.inspection.queue_figures import queue_cells, queue_figures
from weft_django.kernel.clock import wall_ms
from weft_django.kernel.queue_spec import QueueSpec
from weft_django.models import QueueLock

from .base import ReadOnlyAdmin, db


def _runs_url(queue: str, status: str) -> str:
    try:
        base = reverse("admin:weft_workflowrun_changelist")
    except NoReverseMatch:
        return ""
    return f"{base}?{urlencode({'queue': queue, 'status': status})}"


def _limits(spec: QueueSpec) -> str:
    parts = []
    if spec.concurrency is not None:
        parts.append(f"concurrency {spec.concurrency}")
    if spec.per_key_concurrency is not None:
        parts.append(f"per key {spec.per_key_concurrency}")
    if spec.rate_text is not None:
        parts.append(f"rate {spec.rate_text}")
    if spec.per_key_rate_text is not None:
        parts.append(f"per key rate {spec.per_key_rate_text}")
    if spec.fair:
        parts.append("fair")
    return ", ".join(parts) or "no limit"


@admin.register(QueueLock)
class QueueAdmin(ReadOnlyAdmin):
    """The queue list (see the module doc); no change page."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_view_permission(request, obj)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        # Django's own changelist checks this; a page of its own must too.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        specs = get_settings().queues
        figures = queue_figures(wall_ms(), db())
        rows = []
        for name, f in figures.items():
            waiting, running, admitted, rate_limited = queue_cells(f)
            rows.append(
                {
                    "name": name,
                    "waiting": waiting,
                    "running": running,
                    "admitted": admitted,
                    "rate_limited": rate_limited,
                    "limits": _limits(specs[name]),
                    "waiting_url": _runs_url(name, "pending"),
                    "running_url": _runs_url(name, "running"),
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Queues",
            "rows": rows,
            "estimated": [e for f in figures.values() for e in f.estimated],
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/weft/queuelock/queues.html", context)


__all__ = ["QueueAdmin"]
