"""Workflows of the ASGI test (``test_asgi_client``), loaded by the server and
the ``weft_worker`` child alike (this package is not an app)."""

from __future__ import annotations

from typing import Any

from weft_django import activity, workflow

IMPORTS = ("tests.engines.asgi_workflows",)


@activity(name="asgi.double")
def asgi_double(n: int) -> int:
    return n * 2


@workflow(name="asgi-double")
def asgi_double_workflow(ctx: Any, data: Any) -> Any:
    return {"doubled": (yield ctx.run(asgi_double, data["n"]))}


@workflow(name="asgi-wait-go")
def asgi_wait_go(ctx: Any, data: Any) -> Any:
    return {"input": data, "go": (yield ctx.wait_for_signal("go"))}
