"""The types of ``client.start``: which result type a handle promises.

Given the ``@workflow`` function itself, ``client.start(order, Order(...))``
returns a ``WorkflowHandle[Receipt]`` -- ``R`` read from the function's return
annotation (an ``async def``'s ``-> R``, a generator's
``Generator[Any, Any, R]``) -- whose ``result()`` rebuilds the stored result as
``R`` (``payload_types``); given a name string, a ``WorkflowHandle[Any]``
handing back the stored JSON. ``StartOptions`` are the keyword arguments every
form shares (their checks are ``client.start``'s).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypedDict

from weft_django.engine.operations.conflict import OnConflict
from weft_django.engine.workflow.definitions import WorkflowDefinition, registry
from weft_django.engine.workflow.payload_types import Rebuild


class StartOptions(TypedDict, total=False):
    """``client.start``'s keyword arguments."""

    workflow_id: str | None
    idempotency_key: str | None
    start_after: timedelta | float | None
    start_at: datetime | None
    execution_timeout: timedelta | float | None
    on_conflict: OnConflict
    queue: str | None
    priority: int
    concurrency_key: str | None
    fairness_key: str | None
    fairness_weight: int | None


def start_target(target: Any) -> tuple[Any, Rebuild | None]:
    """``(name, rebuild)``: the workflow name ``target`` stands for (a function
    decorated with ``@workflow``, or anything else passed on to be checked as a
    name) and how its result is rebuilt (``None`` for a name)."""
    name = getattr(target, "__weft_workflow__", None)
    if not isinstance(name, str):
        return target, None
    definition: WorkflowDefinition | None = registry.workflows.get(name)
    return name, definition.result_rebuild if definition is not None else None


__all__ = ["StartOptions", "start_target"]
