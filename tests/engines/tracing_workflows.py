"""Workflows of the tracing tests (``tests/e2e/test_tracing.py``, and the
Celery node of ``tests/engines/test_tracing_celery.py``, which imports this
module with ``-I``).

Every input, result and error message carries a ``SECRET`` marker: the tests
assert that no span attribute or event ever contains one.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from weft_django import activity, workflow

SECRET_INPUT = "SECRET-INPUT-4411"
SECRET_RESULT = "SECRET-RESULT-7722"
SECRET_ERROR = "SECRET-ERROR-9933"
SECRET_CHILD = "SECRET-CHILD-5544"

#: Attempts of ``trace-flaky`` per key (its first attempt per key fails).
FLAKY_CALLS: dict[str, int] = {}
#: The span current inside an activity body, by activity name (span id).
CURRENT_SPANS: dict[str, int] = {}
#: Holds ``trace-slow`` until a test sets it.
SLOW_GATE = threading.Event()


def _note_current_span(name: str) -> None:
    try:
        from opentelemetry import trace
    except ImportError:  # the process without opentelemetry
        return
    CURRENT_SPANS[name] = trace.get_current_span().get_span_context().span_id


@activity(name="trace-charge")
async def charge(order: dict[str, Any]) -> dict[str, Any]:
    """An ``async def`` activity: it runs on the executor's event loop."""
    _note_current_span("trace-charge")
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
    _note_current_span("trace-echo")
    return value


@activity(name="trace-atomic", atomic=True)
def atomic_step(value: str) -> str:
    """Runs on the turn thread, inside the transaction that commits its result."""
    _note_current_span("trace-atomic")
    return value


@workflow(name="trace-atomic-flow")
def atomic_flow(ctx: Any, value: str) -> Any:
    return (yield ctx.run(atomic_step, value))


@activity(name="trace-slow")
def slow() -> str:
    SLOW_GATE.wait(20)
    return "slow"


@workflow(name="trace-race")
def race(ctx: Any, value: str) -> Any:
    """``trace-echo`` wins; the ``trace-slow`` attempt is abandoned."""
    _index, winner = yield ctx.race(ctx.run(slow), ctx.run(echo, value))
    return winner


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


@workflow(name="trace-hop")
def hop(ctx: Any, data: dict[str, Any]) -> Any:
    """The Celery hop: a turn from the pickup message, a sleep woken by a Celery
    message, then an activity routed to the ``gpu`` queue (named by string: only
    the worker processes import it, ``tests.celery.routed_activities``)."""
    first = yield ctx.run(echo, data["value"])
    yield ctx.sleep(timedelta(seconds=1))
    routed = yield ctx.run("celery.gpu_square", data["gpu"])
    return {"first": first, "square": routed["square"]}


@workflow(name="trace-loop")
def loop(ctx: Any, data: dict[str, Any]) -> Any:
    """Continues as new once, then runs one activity."""
    if data["n"] < 1:
        yield ctx.continue_as_new({"n": data["n"] + 1})
    return (yield ctx.run(echo, "done"))
