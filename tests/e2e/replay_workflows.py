"""The workflows the replay-check tests run (release 1), importable by a child
process as the code *before* a deploy. ``replay_workflows_v2`` is release 2."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django import activity, workflow


@activity(name="rc.step")
def rc_step(key: str) -> str:
    return f"step:{key}"


@activity(name="rc.other")
def rc_other(key: str) -> str:
    return f"other:{key}"


@workflow(name="rc-order")
def rc_order(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(rc_step, data["id"])
    yield ctx.sleep(timedelta(seconds=10))
    approved = yield ctx.wait_for_signal("approved")
    return {"first": first, "approved": approved}


@workflow(name="rc-stable")
def rc_stable(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(rc_step, data["id"])
    got = yield ctx.wait_for_signal("go")
    return [first, got]
