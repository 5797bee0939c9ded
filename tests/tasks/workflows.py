"""A workflow that runs a Django task as one of its activities (its retries apply)."""

from __future__ import annotations

from tests.tasks import tasks
from weft_django import workflow


@workflow("tests.tasks.grow")
def grow(ctx, input):
    return (yield ctx.run(tasks.flaky, input["fail_times"]))
