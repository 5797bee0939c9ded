"""Workflows of the update process test (``test_update_crash``), loaded by the
test and by every engine child (``Worker(..., imports=IMPORTS)``).

The handler's activity writes ``SideEffect`` rows (``START``/``END``, key
``<item>:<step>``) from the engine process before it returns, so a crash
cannot hide an execution.
"""

from __future__ import annotations

import time
from typing import Any

from weft_django import activity, workflow

IMPORTS = ("tests.engines.update_workflows",)

START = "procs-update-start"
END = "procs-update-end"


def _record(kind: str, key: str) -> None:
    from project.demo.models import SideEffect

    SideEffect.objects.create(kind=kind, key=key)


@activity()
def procs_update_step(key: str, seconds: float) -> str:
    _record(START, key)
    time.sleep(seconds)
    _record(END, key)
    return key


@workflow(name="procs-update-cart")
def procs_update_cart(ctx: Any, data: Any) -> Any:
    """Each ``add`` update runs two activity steps, then answers the count."""
    items: list[str] = []

    def validate(item: Any) -> None:
        if not isinstance(item, str) or not item:
            raise ValueError("item must be a non-empty string")

    def add(item: str) -> Any:
        yield ctx.run(procs_update_step, f"{item}:a", data["seconds"])
        last = yield ctx.run(procs_update_step, f"{item}:b", data["seconds"])
        items.append(item)
        return {"count": len(items), "last": last}

    ctx.on_update("add", add, validator=validate)
    ctx.on_query("items", lambda: list(items))
    yield ctx.wait_for_signal("checkout")
    return items
