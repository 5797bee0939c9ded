"""Calling an activity function: ``run_activity`` and its ``ActivityOutcome``.

Why on its own: a timed-out activity must not hold the turn (and its claim)
hostage. With a timeout the function runs on its own daemon thread, the turn
waits at most ``timeout_ms`` and then abandons it -- the activity's late
result is never journaled, its database connections are closed by that
thread when it does end. The thread runs in a copy of the caller's
``contextvars`` context, so ``activity_info()`` (``engine.activity_context``)
answers there as it does inline.
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass
from typing import Any

from django.db import connections

from weft_django.engine.definitions import ActivityDefinition


@dataclass(frozen=True)
class ActivityOutcome:
    ok: bool
    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False


def run_activity(
    definition: ActivityDefinition, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> ActivityOutcome:
    """Call an activity; with a timeout it runs on its own thread and is abandoned."""
    if definition.timeout_ms is None:
        try:
            return ActivityOutcome(True, definition.fn(*args, **kwargs))
        except Exception as exc:
            return ActivityOutcome(False, error=exc)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = definition.fn(*args, **kwargs)
        except Exception as exc:
            box["error"] = exc
        finally:
            connections.close_all()

    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(target,), name=f"weft-activity:{definition.name}", daemon=True
    )
    thread.start()
    thread.join(definition.timeout_ms / 1000)
    if thread.is_alive():
        return ActivityOutcome(
            False,
            error=TimeoutError(
                f"activity {definition.name!r} timed out after {definition.timeout_ms} ms"
            ),
            timed_out=True,
        )
    if "error" in box:
        return ActivityOutcome(False, error=box["error"])
    return ActivityOutcome(True, box.get("value"))


__all__ = ["ActivityOutcome", "run_activity"]
