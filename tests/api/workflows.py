"""Small workflows the API tests drive (registered on import, names prefixed ``api-``)."""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow
from weft_django.errors import ActivityError

#: Raw async-activity tokens, as handed to the ``hand_out`` activity.
TOKENS: list[str] = []
#: ``flaky`` fails while this is true (retry tests flip it).
FLAKY = {"fail": True}


@activity(name="api.double")
def double(n: int) -> int:
    return n * 2


@activity(name="api.flaky")
def flaky(key: str) -> str:
    if FLAKY["fail"]:
        raise RuntimeError(f"flaky {key} failed")
    return f"ok:{key}"


@activity(name="api.hand_out")
def hand_out(token: str, key: str) -> None:
    TOKENS.append(token)


@workflow(name="api-signal")
def wait_signal(ctx: Any, data: Any) -> Any:
    """Doubles a number, then waits for the signal ``go``; answers queries."""
    state = {"stage": "started"}
    ctx.on_query("progress", lambda: dict(state))
    ctx.on_query("add", lambda a, b: a + b)
    ctx.on_query("explode", lambda: 1 / 0)
    n = data.get("n", 1) if isinstance(data, dict) else 1
    doubled = yield ctx.run(double, n)
    state["stage"] = "waiting"
    got = yield ctx.wait_for_signal("go")
    state["stage"] = "done"
    return {"doubled": doubled, "got": got}


@workflow(name="api-flaky")
def flaky_workflow(ctx: Any, data: Any) -> Any:
    """Fails while ``FLAKY["fail"]``; a retry after flipping it completes."""
    out = yield ctx.run(flaky, str(data))
    return out


@workflow(name="api-async")
def wait_async(ctx: Any, data: Any) -> Any:
    """Hands a token out and waits for it to be completed or failed."""
    try:
        result = yield ctx.async_activity(hand_out, str(data))
    except ActivityError as exc:
        return {"failed": exc.message, "type": exc.error_type}
    return {"result": result}


@workflow(name="api-parent")
def parent(ctx: Any, data: Any) -> Any:
    """Starts ``api-signal`` as a child with a known id and waits for it."""
    child = yield ctx.start_child("api-signal", {"n": 2}, workflow_id=f"{data}-child")
    return {"child": child}
