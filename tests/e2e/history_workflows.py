"""The workflows the history tests run (release 1), importable by a child
process. ``history_workflows_v2`` is release 2: position 1 changed."""

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
    first = yield ctx.run(hist_step, data["id"])  # position 0
    second = yield ctx.run(hist_step, "second")  # position 1
    bonus = ctx.patched("hist-bonus")  # position 2 (a patch marker)
    approved = yield ctx.wait_for_signal("approved")  # position 3
    return {"first": first, "second": second, "bonus": bonus, "approved": approved}


@workflow(name="hist-fails")
def hist_fails(ctx: Any, data: Any) -> Any:
    yield ctx.run(hist_step, "before")
    raise RuntimeError(f"refused {data!r}")
