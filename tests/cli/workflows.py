"""Workflows the CLI tests drive: one waits for a signal, one fails, one sleeps,
one completes at once -- a store where every subcommand has something to act on."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django import WorkflowCancelled, activity, workflow


@activity()
def cli_echo(value: Any) -> Any:
    return value


@activity()
def cli_boom(value: Any) -> Any:
    raise ValueError(f"boom {value}")


@workflow(name="cli-waiter")
def cli_waiter(ctx: Any, data: Any) -> Any:
    first = yield ctx.run(cli_echo, data)
    got = yield ctx.wait_for_signal("go")
    return {"first": first, "got": got}


@workflow(name="cli-failing")
def cli_failing(ctx: Any, data: Any) -> Any:
    yield ctx.run(cli_echo, data)
    yield ctx.run(cli_boom, data)


@workflow(name="cli-sleeper")
def cli_sleeper(ctx: Any, data: Any) -> Any:
    yield ctx.sleep(timedelta(hours=1))
    return data


@workflow(name="cli-quick")
def cli_quick(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(cli_echo, data))


@workflow(name="cli-order")
def cli_order(ctx: Any, data: Any) -> Any:
    """Sets search attributes (declared by the tests that use it), then waits."""
    ctx.upsert_search_attributes(customer=data["customer"], amount=data["amount"])
    got = yield ctx.wait_for_signal("go")
    return got


@workflow(name="cli-parent")
def cli_parent(ctx: Any, data: Any) -> Any:
    """Starts a ``cli-waiter`` child and waits for it."""
    return (yield ctx.start_child("cli-waiter", data, workflow_id=f"{ctx.workflow_id}-child"))


@workflow(name="cli-graceful", cancel_grace=60)
def cli_graceful(ctx: Any, data: Any) -> Any:
    """Cleans up when cancelled (``WorkflowCancelled`` is thrown into it)."""
    try:
        return (yield ctx.wait_for_signal("go"))
    except WorkflowCancelled:
        yield ctx.run(cli_echo, "cleaned up")
        raise
