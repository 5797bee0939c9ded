"""Workflows of the tracing tests (``tests/e2e/test_tracing.py``, and the
Celery node of ``tests/engines/test_tracing_celery.py``, which imports this
module with ``-I``).

Every input, result and error message carries a ``SECRET`` marker: the tests
assert that no span attribute or event ever contains one.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from weft_django import activity, workflow

SECRET_INPUT = "SECRET-INPUT-4411"
SECRET_RESULT = "SECRET-RESULT-7722"
SECRET_ERROR = "SECRET-ERROR-9933"
SECRET_CHILD = "SECRET-CHILD-5544"

#: Attempts of ``trace-flaky`` per key (its first attempt per key fails).
FLAKY_CALLS: dict[str, int] = {}


@activity(name="trace-charge")
async def charge(order: dict[str, Any]) -> dict[str, Any]:
    """An ``async def`` activity: it runs on the executor's event loop."""
    return {"receipt": SECRET_RESULT, "sku": order["sku"]}


@activity(name="trace-flaky", retries=1, backoff=timedelta(seconds=1))
def flaky(key: str) -> str:
    FLAKY_CALLS[key] = FLAKY_CALLS.get(key, 0) + 1
    if FLAKY_CALLS[key] == 1:
        raise RuntimeError(f"first attempt fails: {SECRET_ERROR}")
    return SECRET_RESULT


@workflow(name="trace-order")
def order(ctx: Any, order: dict[str, Any]) -> Any:
    """Two activities and a sleep; the second activity needs two attempts."""
    receipt = yield ctx.run(charge, order)
    yield ctx.sleep(timedelta(seconds=10))
    second = yield ctx.run(flaky, order["key"])
    return {"receipt": receipt, "second": second}


@activity(name="trace-echo")
def echo(value: str) -> str:
    return value


@workflow(name="trace-child")
def child(ctx: Any, value: str) -> Any:
    return (yield ctx.run(echo, value))


@workflow(name="trace-parent")
def parent(ctx: Any, value: str) -> Any:
    return (yield ctx.start_child("trace-child", value + SECRET_CHILD))


@workflow(name="trace-quick")
def quick(ctx: Any, value: str) -> Any:
    """One activity, no sleep: the Celery hop's workflow."""
    return (yield ctx.run(echo, value))


@workflow(name="trace-fails")
def fails(ctx: Any, value: str) -> Any:
    yield ctx.sleep(timedelta(seconds=1))
    raise ValueError(f"bad {value}")
