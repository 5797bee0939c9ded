"""The demo's progress-bar page (docs/howto/progress.md).

``/demo/progress/`` (POST) starts a ``demo-progress`` run and redirects to
``/demo/progress/<id>/``, a plain Django template whose ``EventSource``
follows the run's ``progress`` stream from the weft API's Server-Sent
Events endpoint and moves a ``<progress>`` bar. Staff only, because the
API it reads is (``WEFT["API_PERMISSION_CLASSES"]``).
"""

from __future__ import annotations

import uuid

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from weft_django import client


@staff_member_required
def start_progress(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return render(request, "demo/start_progress.html")
    workflow_id = f"progress-{uuid.uuid4().hex[:8]}"
    client.start("demo-progress", {"steps": 5, "seconds": 1.0}, workflow_id=workflow_id)
    return redirect("demo-progress", workflow_id=workflow_id)


@staff_member_required
def progress(request: HttpRequest, workflow_id: str) -> HttpResponse:
    stream_url = reverse("weft:workflow-stream", args=[workflow_id, "progress"])
    return render(
        request, "demo/progress.html", {"workflow_id": workflow_id, "stream_url": stream_url}
    )
