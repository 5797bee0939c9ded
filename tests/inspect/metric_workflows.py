"""Workflows the metric tests drive: a retried activity, a plain one, a waiter."""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow

#: Attempts so far per input (the flaky activity fails its first two).
FLAKY_CALLS: dict[str, int] = {}


@activity(name="metrics-echo")
def metrics_echo(value: Any) -> Any:
    return value


@activity(name="metrics-flaky", retries=3, backoff=1)
def metrics_flaky(key: str) -> str:
    FLAKY_CALLS[key] = FLAKY_CALLS.get(key, 0) + 1
    if FLAKY_CALLS[key] <= 2:
        raise RuntimeError(f"flaky {key} attempt {FLAKY_CALLS[key]}")
    return key


@activity(name="metrics-broken")
def metrics_broken(value: Any) -> Any:
    raise ValueError(f"broken {value}")


@workflow(name="metrics-quick")
def metrics_quick(ctx: Any, data: Any) -> Any:
    return (yield ctx.run(metrics_echo, data))


@workflow(name="metrics-retrying")
def metrics_retrying(ctx: Any, key: str) -> Any:
    return (yield ctx.run(metrics_flaky, key))


@workflow(name="metrics-failing")
def metrics_failing(ctx: Any, data: Any) -> Any:
    yield ctx.run(metrics_broken, data)


@workflow(name="metrics-waiter")
def metrics_waiter(ctx: Any, data: Any) -> Any:
    yield ctx.run(metrics_echo, data)
    return (yield ctx.wait_for_signal("go"))
