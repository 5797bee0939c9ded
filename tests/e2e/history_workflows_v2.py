"""Release 2 of ``history_workflows``, for a child process (never imported by
the test process, which registers release 1): position 1 now runs another
activity."""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow


@activity(name="hist.step")
def hist_step(key: str) -> str:
    return f"step:{key}"


@activity(name="hist.other")
def hist_other(key: str) -> str:
    return f"other:{key}"


@workflow(name="hist-order")
def hist_order(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(hist_step, data["id"])
    second = yield ctx.run(hist_other, "second")  # was hist.step: recorded position 1 differs
    bonus = ctx.patched("hist-bonus")
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "second": second, "bonus": bonus, "approved": approved}
