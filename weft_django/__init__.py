"""weft-django: durable workflows with fenced per-workflow ownership.

The public names are loaded lazily (module ``__getattr__``) so that importing
the package never touches models before the app registry is ready.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "workflow": ("weft_django.engine.workflow.definitions", "workflow"),
    "activity": ("weft_django.engine.workflow.definitions", "activity"),
    "client": ("weft_django.client", None),
    "activity_info": ("weft_django.engine.activities.info", "activity_info"),
    "ActivityInfo": ("weft_django.engine.activities.info", "ActivityInfo"),
    "ActivityCancelled": ("weft_django.errors", "ActivityCancelled"),
    "FencedModel": ("weft_django.fencing", "FencedModel"),
    "StaleFenceError": ("weft_django.errors", "StaleFenceError"),
    "fenced_update": ("weft_django.fencing", "fenced_update"),
    "afenced_update": ("weft_django.fencing", "afenced_update"),
    "WorkflowCancelled": ("weft_django.errors", "WorkflowCancelled"),
    "SagaCompensationError": ("weft_django.errors", "SagaCompensationError"),
}

if TYPE_CHECKING:  # pragma: no cover
    from weft_django import client
    from weft_django.engine.activities.info import ActivityInfo as ActivityInfo
    from weft_django.engine.activities.info import activity_info as activity_info
    from weft_django.engine.workflow.definitions import activity as activity
    from weft_django.engine.workflow.definitions import workflow as workflow
    from weft_django.errors import ActivityCancelled as ActivityCancelled
    from weft_django.errors import SagaCompensationError as SagaCompensationError
    from weft_django.errors import StaleFenceError as StaleFenceError
    from weft_django.errors import WorkflowCancelled as WorkflowCancelled
    from weft_django.fencing import FencedModel as FencedModel
    from weft_django.fencing import afenced_update as afenced_update
    from weft_django.fencing import fenced_update as fenced_update


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'weft_django' has no attribute {name!r}") from None
    module = import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


__all__ = [
    "ActivityCancelled",
    "ActivityInfo",
    "FencedModel",
    "SagaCompensationError",
    "StaleFenceError",
    "WorkflowCancelled",
    "__version__",
    "activity",
    "activity_info",
    "afenced_update",
    "client",
    "fenced_update",
    "workflow",
]
