"""Workflows the security tests drive (registered on import, names prefixed ``sec-``).

Why separate from ``tests.api.workflows``: these carry distinctive canary
strings (ids, payloads, error messages) that the leak tests search for, and
they record every raw token handed out so the tests can look for it in the
database, the logs and the metrics.
"""

from __future__ import annotations

from typing import Any

from weft_django import activity, client, workflow

#: Raw async-activity tokens, in the order the hand-out activity received them.
TOKENS: list[str] = []
#: Messages the ``sec.fail`` activity raises with (the leak tests look for them).
FAIL_MESSAGE = "SEC-CANARY-ACTIVITY-ERROR-5e1d"


@activity(name="sec.hand_out")
def hand_out(token: str, key: str) -> None:
    """The outside world's side of an async activity: it just keeps the token."""
    TOKENS.append(token)


@activity(name="sec.echo")
def echo(value: Any) -> Any:
    return value


@activity(name="sec.fail")
def fail(value: Any) -> Any:
    raise RuntimeError(FAIL_MESSAGE)


@activity(name="sec.cancel_own_workflow")
def cancel_own_workflow(workflow_id: str) -> str:
    """Rotates its own workflow's epoch mid-turn, so the engine's next fenced write loses."""
    client.cancel(workflow_id, reason="rotated from inside an activity")
    return "cancelled"


@workflow(name="sec-async")
def one_token(ctx: Any, data: Any) -> Any:
    """Hands one token out, waits for it, echoes the payload through an activity."""
    echoed = yield ctx.run(echo, data)
    result = yield ctx.async_activity(hand_out, "one")
    return {"echoed": echoed, "result": result}


@workflow(name="sec-async-many")
def many_tokens(ctx: Any, data: Any) -> Any:
    """Mints ``data["n"]`` tokens at once (the entropy measurement's sample)."""
    n = int(data["n"])
    results = yield ctx.all(*[ctx.async_activity(hand_out, str(i)) for i in range(n)])
    return {"n": len(results)}


@workflow(name="sec-signal")
def wait_signal(ctx: Any, data: Any) -> Any:
    """Echoes its input, waits for the signal ``go``; answers the query ``progress``
    and the update ``stage``."""
    state = {"stage": "started"}
    ctx.on_query("progress", lambda: dict(state))
    ctx.on_update("stage", lambda: state["stage"])
    echoed = yield ctx.run(echo, data)
    state["stage"] = "waiting"
    got = yield ctx.wait_for_signal("go")
    return {"echoed": echoed, "got": got}


@workflow(name="sec-fail")
def failing(ctx: Any, data: Any) -> Any:
    """Fails at its only activity (no retries): a ``failed`` run to retry."""
    out = yield ctx.run(fail, data)
    return out


@workflow(name="sec-self-cancel")
def self_cancel(ctx: Any, data: Any) -> Any:
    """Its activity cancels the workflow: the engine is deposed from it mid-turn."""
    out = yield ctx.run(cancel_own_workflow, ctx.workflow_id)
    return out


#: Calls of ``sec.flaky_hand_out`` so far (its first attempt fails).
FLAKY_CALLS: list[str] = []


@activity(name="sec.flaky_hand_out", retries=1, backoff=0.001)
def flaky_hand_out(token: str) -> None:
    """A callback whose first attempt fails with the URL (and so the token) in
    its message, as ``requests``' ``HTTPError`` does."""
    FLAKY_CALLS.append(token)
    TOKENS.append(token)
    if len(FLAKY_CALLS) == 1:
        raise RuntimeError(f"POST https://payments.example/callback/{token} failed: 503")


@workflow(name="sec-async-flaky")
def flaky_token(ctx: Any, data: Any) -> Any:
    """Hands its token out through ``sec.flaky_hand_out`` (one failed attempt)."""
    result = yield ctx.async_activity(flaky_hand_out)
    return result
