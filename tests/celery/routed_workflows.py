"""The workflow of the routed-activity tests (test process and every node).

It names its activity by string: the routed activity itself
(``tests.celery.routed_activities``) is imported only by the worker
processes, so the test process registers no routed activity (its
``weft.E035`` check stays quiet for the rest of the suite).
"""

from __future__ import annotations

from weft_django import workflow
from weft_django.errors import ActivityError


@workflow(name="celery-routed")
def celery_routed(ctx, data):
    try:
        value = yield ctx.run("celery.gpu_square", data)
    except ActivityError as exc:
        return {"error": exc.error_type, "attempts": exc.attempts}
    return value
