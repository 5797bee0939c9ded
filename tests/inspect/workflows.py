"""Workflows the inspection tests run: one parks on a timer, one on a signal,
one fails, one completes -- so every admin page has journal entries, timers
and claim events to show."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django import activity, workflow


@activity()
def inspect_echo(value: Any) -> Any:
    return value


@activity()
def inspect_boom(value: Any) -> Any:
    raise ValueError(f"boom {value}")


@workflow(name="inspect-sleeper")
def inspect_sleeper(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(inspect_echo, data)
    yield ctx.sleep(timedelta(hours=1))
    got = yield ctx.wait_for_signal("go")
    return {"first": first, "got": got}


@workflow(name="inspect-waiter")
def inspect_waiter(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(inspect_echo, data)
    got = yield ctx.wait_for_signal("go")
    return {"first": first, "got": got}


@workflow(name="inspect-failing")
def inspect_failing(ctx: Any, data: Any) -> Any:
    yield ctx.run(inspect_echo, data)
    yield ctx.run(inspect_boom, data)


@workflow(name="inspect-quick")
def inspect_quick(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(inspect_echo, data))


ASYNC_TOKENS: list[str] = []
"""Tokens ``inspect_hand_out`` was given, in order (the admin tests settle by row)."""


@activity()
def inspect_hand_out(token: str, value: Any) -> None:
    ASYNC_TOKENS.append(token)


@workflow(name="inspect-async")
def inspect_async(ctx: Any, data: Any) -> Any:
    got = yield ctx.async_activity(inspect_hand_out, data)
    return {"got": got}
