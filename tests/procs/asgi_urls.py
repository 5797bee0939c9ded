"""Async Django views calling the async client, as a user's ASGI app would.

``start-and-wait/<id>/`` starts a run and awaits its result in the request;
``signal/<id>/`` signals it; ``ping/`` answers at once. One uvicorn worker
serves them all on one event loop: while a ``start-and-wait`` request awaits
``aresult``, the others must still be answered.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

import tests.engines.asgi_workflows  # noqa: F401  (registers the workflows)
from weft_django import client


@csrf_exempt
async def start_and_wait(request: HttpRequest, workflow_id: str) -> JsonResponse:
    body: dict[str, Any] = json.loads(request.body)
    handle = await client.astart(body["name"], body.get("input"), workflow_id=workflow_id)
    result = await handle.aresult(timeout=float(body.get("timeout", 30)))
    return JsonResponse({"run_id": handle.run_id, "result": result, "status": "completed"})


@csrf_exempt
async def signal(request: HttpRequest, workflow_id: str) -> JsonResponse:
    message = await client.asignal(workflow_id, "go", json.loads(request.body))
    return JsonResponse({"signal_id": message.pk}, status=202)


async def ping(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"pong": True})


urlpatterns = [
    path("start-and-wait/<str:workflow_id>/", start_and_wait),
    path("signal/<str:workflow_id>/", signal),
    path("ping/", ping),
]
